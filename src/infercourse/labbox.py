"""The box at the top of every lab section: VRAM, card, time, cost, platform notes and commands.

One function renders every lesson's box from the registry, so the boxes cannot disagree on how
a lab is installed, what a card holds or what a minute costs.
"""

from __future__ import annotations

import math

from infercourse import fmt, memory, registry, transformer


def vram_needed_bytes(peak_kv_tokens: int, model_name: str = registry.COURSE_MODEL, dtype_bytes: int = 2) -> float:
    """Device memory (B) a lab needs under vLLM's default ``gpu_memory_utilization``.

    (weights + KV cache for ``peak_kv_tokens`` + the non-KV reserve) / utilization. The reserve is
    the registry's assumption ``VLLM_NON_KV_RESERVE_GIB``.

    Raises:
        ValueError: ``peak_kv_tokens`` is not a positive integer.
    """
    if isinstance(peak_kv_tokens, bool) or not isinstance(peak_kv_tokens, int) or peak_kv_tokens <= 0:
        raise ValueError(f"peak_kv_tokens must be a positive whole number of tokens, got {peak_kv_tokens!r}")
    config = registry.model(model_name).config
    used = (transformer.weight_bytes(config, dtype_bytes)
            + peak_kv_tokens * transformer.kv_bytes_per_token(config, dtype_bytes)
            + registry.VLLM_NON_KV_RESERVE_GIB * fmt.GIB)
    return used / registry.VLLM_DEFAULT_GPU_MEMORY_UTILIZATION


def lab_box(script: str, peak_kv_tokens: int, run_minutes: float, args: str = "",
            model_name: str = registry.COURSE_MODEL) -> str:
    """Markdown admonition for the lab ``snippets/labs/<script>``.

    Args:
        script: the lab's file name, e.g. ``"phases.py"``.
        peak_kv_tokens: the most tokens the lab keeps in the KV cache at once (sets the VRAM need).
        run_minutes: the lab's own measuring time on the card, minutes (download and start-up are added).
        args: extra command-line arguments shown in the run command.
        model_name: the model the lab loads by default.

    Raises:
        ValueError: a non-positive ``peak_kv_tokens`` or ``run_minutes``.
    """
    if not run_minutes > 0:
        raise ValueError(f"run_minutes must be positive, got {run_minutes!r}")
    rent = registry.AUTODL_RTX_4090
    card = registry.gpu(rent.card)
    config = registry.model(model_name).config
    weights = transformer.weight_bytes(config)
    need = vram_needed_bytes(peak_kv_tokens, model_name)
    total = memory.device_total_bytes(rent.card)
    download_min = weights / (rent.download_mb_s * 1e6) / 60
    minutes = download_min + rent.engine_start_min + run_minutes
    name = script.removesuffix(".py")
    fits = "fits" if need <= total else "does NOT fit"
    return f"""!!! example "GPU lab: `snippets/labs/{script}`"
    - **Minimum VRAM:** {fmt.gib(need, 1)}: {model_name}'s BF16 weights ({fmt.gib(weights, 1)}), the KV cache of
      {fmt.count(peak_kv_tokens)} tokens and vLLM's other memory (assumed {registry.VLLM_NON_KV_RESERVE_GIB:g} GiB),
      over the default `gpu_memory_utilization` of {registry.VLLM_DEFAULT_GPU_MEMORY_UTILIZATION}. That {fits} an
      {card.name}, which reports {fmt.gib(total, 1)}.
    - **Card:** {card.name} (24 GB) on AutoDL, with vLLM {registry.VLLM_GPU_VERSION}.
    - **Time and cost (estimate):** about {math.ceil(minutes)} minutes: the first download of
      {fmt.gb(weights)} at an assumed {rent.download_mb_s:g} MB/s ({download_min:.0f} min; later labs reuse it),
      engine start-up (about {rent.engine_start_min:g} min) and the measurements (about {run_minutes:g} min). At
      ¥{rent.cny_per_hour:.2f}/h, about ¥{minutes / 60 * rent.cny_per_hour:.2f} ({rent.source}).
    - **Platform notes:** NVIDIA GPU with a CUDA 12 image. If Hugging Face is slow or blocked, set
      `VLLM_USE_MODELSCOPE=True` to fetch the same model from ModelScope. On ROCm or vLLM's CPU build the
      script runs unchanged, but its timings belong to that device; our tests run it on the CPU build with
      a tiny random model, so it is known to run end to end.

    ```bash
    pip install -r requirements-labs-gpu.txt      # vLLM {registry.VLLM_GPU_VERSION} and ModelScope's client
    export VLLM_USE_MODELSCOPE=True               # only if Hugging Face is slow or blocked
    python snippets/labs/{script} {args + " " if args else ""}--receipt receipts/rtx-4090/{name}.json
    ```
"""
