"""The box at the top of every lab section: VRAM, card, time, cost, platform notes and commands.

One function renders every lesson's box from the registry, so the boxes cannot disagree on how
a lab is installed, what a card holds or what a minute costs.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from infercourse import fmt, memory, registry, roofline, snippets, transformer

if TYPE_CHECKING:  # importing infercourse.labs at run time reads the lab scripts: done lazily below
    from infercourse.labs.core import LabWork

LABKIT_MIN_DRIVER: int = snippets.constant("labs/labkit/machine.py", "MIN_DRIVER_FOR_WHEEL")
"""Oldest NVIDIA driver branch for vLLM 0.26.0's CUDA 13 build, read from its one home, labkit's
``MIN_DRIVER_FOR_WHEEL`` (NVIDIA, CUDA Toolkit Release Notes, table 3: CUDA 13.0 needs >= 580.65.06)."""


def vram_needed_bytes(
    peak_kv_tokens: int,
    model_name: str = registry.COURSE_MODEL,
    dtype_bytes: int = 2,
    draft_model: str | None = None,
    utilization: float = registry.VLLM_DEFAULT_GPU_MEMORY_UTILIZATION,
) -> float:
    """Device memory (B) a lab needs when its engine may use ``utilization`` of the card (vLLM's
    ``gpu_memory_utilization``, default vLLM's own; a replica of several on one card gets its share).

    (weights + KV cache for ``peak_kv_tokens`` + the non-KV reserve) / utilization. The reserve is
    the registry's assumption ``VLLM_NON_KV_RESERVE_GIB``. With a ``draft_model`` (a registry name), its
    weights are added and each token's KV cache is both models' (vLLM gives the draft's layers their
    own blocks, for the same tokens, from the same pool).

    Raises:
        ValueError: ``peak_kv_tokens`` is not a positive integer, or ``utilization`` not in (0, 1].
        KeyError: a model is not in the registry.
    """
    if not 0 < utilization <= 1:
        raise ValueError(f"utilization must be a share of the card in (0, 1], got {utilization!r}")
    if isinstance(peak_kv_tokens, bool) or not isinstance(peak_kv_tokens, int) or peak_kv_tokens <= 0:
        raise ValueError(f"peak_kv_tokens must be a positive whole number of tokens, got {peak_kv_tokens!r}")
    configs = [registry.model(name).config for name in (model_name, draft_model) if name]
    used = registry.VLLM_NON_KV_RESERVE_GIB * fmt.GIB + sum(
        transformer.weight_bytes(c, dtype_bytes) + peak_kv_tokens * transformer.kv_bytes_per_token(c, dtype_bytes)
        for c in configs
    )
    return used / utilization


DECODE_EFFICIENCY_ASSUMED = 0.7
"""Assumed share of the roofline a decode step reaches on the lab card (floor / measured), for the time
estimate only; an assumption until GPU receipts measure it (lesson 0A's efficiency column)."""

STEP_CONTEXT = 2048
"""Context (tokens) at which the estimate's decode step is priced: the labs' typical context."""


def lab_work(lab: str) -> LabWork:
    """What ``lab``'s GPU run does, from its spec.

    Raises:
        KeyError: ``lab`` has no spec.
        ValueError: its spec sets no ``work``.
    """
    from infercourse.labs import spec  # the specs read the lab scripts; the build imports this lazily

    work = spec(lab).work
    if work is None:
        raise ValueError(
            f"lab {lab!r}'s spec sets no work: give its LabSpec a work=LabWork(...) "
            "(engines, decode steps, peak KV tokens) so the lab box can estimate its time and VRAM"
        )
    return work


def lab_minutes(lab: str) -> dict[str, float]:
    """Minutes one lab takes on the lab card, from its own settings (its spec's :class:`LabWork`).

    Returns ``{"download", "engines", "decode", "arrivals", "run", "total"}`` in minutes (``run``: the
    lab itself, engines + decode + arrivals; ``total``: run + download): the first download of
    its model's (:class:`LabWork` ``model``) BF16 weights at the assumed speed
    (``registry.AUTODL_RTX_4090.download_mb_s``; later labs reuse it), ``engines`` x the assumed start-up,
    ``decode_steps`` x the decode-step floor at :data:`STEP_CONTEXT` (batch 1; a mixture-of-experts model's with
    uniform routing) / :data:`DECODE_EFFICIENCY_ASSUMED`, and ``arrival_s``.

    Raises:
        KeyError: ``lab`` has no spec.
        ValueError: its spec sets no ``work``.
    """
    work = lab_work(lab)
    rent = registry.AUTODL_RTX_4090
    config = registry.model(work.model).config
    floors = roofline.moe_decode_kernel_floors if transformer.is_moe(config) else roofline.decode_kernel_floors
    step_s = sum(floors(registry.gpu(rent.card), config, STEP_CONTEXT)) / DECODE_EFFICIENCY_ASSUMED
    parts = {
        "download": transformer.weight_bytes(config) / (rent.download_mb_s * 1e6) / 60,
        "engines": work.engines * rent.engine_start_min,
        "decode": work.decode_steps * step_s / 60,
        "arrivals": work.arrival_s / 60,
    }
    run = parts["engines"] + parts["decode"] + parts["arrivals"]
    return {**parts, "run": run, "total": run + parts["download"]}


def lab_cny(lab: str, minutes: float) -> float:
    """Yuan for ``minutes`` of ``lab`` on AutoDL: the registry's price per card-hour
    (``registry.AUTODL_RTX_4090``) times the cards the lab needs at once (its :class:`LabWork` ``gpus``).

    Raises:
        KeyError: ``lab`` has no spec.
        ValueError: its spec sets no ``work``.
    """
    return minutes / 60 * registry.AUTODL_RTX_4090.cny_per_hour * lab_work(lab).gpus


def time_estimate(labs: list[str], download: bool = True) -> str:
    """A few lines: the estimated minutes of each lab and of all of them on the lab card (the download
    counted once, when ``download``), with the assumptions they rest on."""
    rent = registry.AUTODL_RTX_4090
    lines, total = (
        [
            f"Estimate for an {rent.card} (assumed: {rent.engine_start_min:g} min per engine start, "
            f"{rent.download_mb_s:g} MB/s download, decode at {DECODE_EFFICIENCY_ASSUMED:.0%} of the roofline):"
        ],
        0.0,
    )
    for lab in labs:
        m = lab_minutes(lab)
        total += m["run"]
        cards = lab_work(lab).gpus
        lines.append(f"  {lab:<14} {m['run']:5.1f} min" + (f" on {cards} cards at once" if cards > 1 else ""))
    if download:
        m = lab_minutes(labs[0])
        total += m["download"]
        lines.append(f"  {'download':<14} {m['download']:5.1f} min (first run only)")
    lines.append(f"  {'total':<14} {total:5.1f} min")
    return "\n".join(lines)


def lab_box(script: str, args: str = "") -> str:
    """Markdown admonition for the lab ``snippets/labs/<script>``, collapsed behind a one-line title (cards,
    VRAM, minutes, yuan): VRAM, card, time, cost, platform notes and commands, every figure computed from
    the lab's own settings (its spec's :class:`LabWork`). A lab
    that takes ``--parts`` declares them in the script, ``PARTS = {name: what it shows}``: the box lists
    each, with the command that runs it alone.

    Args:
        script: the lab's file name, e.g. ``"phases.py"``.
        args: extra command-line arguments shown in the run command.

    Raises:
        KeyError: the lab has no spec.
        ValueError: its spec sets no ``work``.
    """
    from infercourse.labs import spec  # the specs read the lab scripts; the build imports this lazily

    name = script.removesuffix(".py")
    work = lab_work(name)
    model_name = work.model  # the model the lab loads by default
    rent = registry.AUTODL_RTX_4090
    card = registry.gpu(rent.card)
    config = registry.model(model_name).config
    weights = transformer.weight_bytes(config)
    share = work.memory_share or registry.VLLM_DEFAULT_GPU_MEMORY_UTILIZATION
    need = vram_needed_bytes(work.peak_kv_tokens, model_name, draft_model=work.draft_model, utilization=share)
    draft = (
        f" and its draft model {work.draft_model}'s "
        f"({fmt.gib(transformer.weight_bytes(registry.model(work.draft_model).config), 1)})"
        if work.draft_model
        else ""
    )
    both = " in both models' layers" if work.draft_model else ""
    total = memory.device_total_bytes(rent.card)
    m = lab_minutes(name)
    cards = f"{card.name} (24 GB)" if work.gpus == 1 else f"{work.gpus} × {card.name} (24 GB each) in one instance"
    fits = "fits" if need <= total else "does NOT fit"
    each = f"{work.replicas} replicas run side by side, each with " if work.replicas > 1 else ""
    over = "the `--gpu-memory-utilization` each gets" if work.replicas > 1 else "the default `gpu_memory_utilization`"
    engines = f"{work.engines} engine start{'s' if work.engines > 1 else ''}"
    parts = snippets.constant(f"labs/{script}", "PARTS", default={})
    listed = "; ".join(f"`{name}`: {shows}" for name, shows in parts.items())
    parts_note = f"\n    - **Parts** (all of them by default): {listed}." if parts else ""
    part_commands = "".join(
        f"\n    python snippets/labs/{script} --parts {name:<{max(map(len, parts))}}   # the {name} part alone"
        for name in parts
    )
    decode = (
        f", {fmt.count(work.decode_steps)} decode steps at about "
        f"{fmt.fixed(m['decode'] * 60e3 / work.decode_steps, 0)} ms ({m['decode']:.1f} min)"
        if work.decode_steps
        else ""
    ) + (f", {m['arrivals']:.1f} min of requests arriving at fixed rates" if work.arrival_s else "")
    title = (
        f"GPU lab: `snippets/labs/{script}` · {work.gpus} × {card.name} · {fmt.gib(need, 1)} of VRAM · "
        f"about {math.ceil(m['total'])} min, ¥{lab_cny(name, m['total']):.2f}"
    )
    return f"""??? example "{title}"
    - **Minimum VRAM:** {fmt.gib(need, 1)}: {each}{model_name}'s BF16 weights ({fmt.gib(weights, 1)}){draft}, the KV
      cache of {fmt.count(work.peak_kv_tokens)} tokens{both} and vLLM's other memory
      (assumed {registry.VLLM_NON_KV_RESERVE_GIB:g} GiB), over {over} of
      {share:g}. That {fits} an {card.name}, which reports {fmt.gib(total, 1)}.
    - **Card:** {cards} on AutoDL, with vLLM {registry.VLLM_GPU_VERSION}.
    - **Time and cost (estimate):** about {math.ceil(m["total"])} minutes: the first download of
      {fmt.gb(weights)} at an assumed {rent.download_mb_s:g} MB/s ({m["download"]:.1f} min; later labs reuse it),
      {engines} at an assumed {rent.engine_start_min:g} min each{decode}. At
      ¥{rent.cny_per_hour:.2f}/h per card, about ¥{lab_cny(name, m["total"]):.2f} ({rent.source}).
    - **Platform notes:** an NVIDIA GPU whose driver is {LABKIT_MIN_DRIVER} or newer (`nvidia-smi` shows CUDA
      13.0 or newer): vLLM {registry.VLLM_GPU_VERSION} from PyPI is a CUDA 13 build, and the image's own CUDA
      does not matter. `python scripts/run_labs.py --check` says what is missing, one line each (the driver, free
      GPU memory, GPUs for a lab that needs two, disk for the download), before anything downloads. If Hugging Face
      is slow or blocked, set `VLLM_USE_MODELSCOPE=True`: every file the lab reads goes through vLLM, which then
      fetches from ModelScope. On vLLM's CPU build the script runs as it is (it sets `VLLM_CPU_KVCACHE_SPACE` to 1
      GiB when unset), but its timings belong to that CPU; our tests run it there with a tiny random model, so it is
      known to run end to end ([how the course checks itself](../checks.md#labs)).{parts_note}
    - **Without a GPU:** `make labs-cpu LAB={name}`, from a clone of this repository, runs this lab on vLLM's
      CPU build with one of the course's tiny random test models instead of {model_name} (the first run builds
      `.venv-labs/` and the model, nothing is downloaded but packages); it prints the table and checks every
      claim the CPU makes exact (counts, backends, bytes), and shows the timings, which belong to that CPU.

    - **Notebook:** the same lab cell by cell for JupyterLab (your predictions checked, preflight, install,
      model download to AutoDL's data disk, the lab, its receipt against the lesson's prediction):
      [Lab notebook {spec(name).lesson}](../notebooks/{name}.ipynb), with a download link for the `.ipynb`.

    ```bash
    python scripts/run_labs.py --check            # driver, GPUs, free memory and disk: before any install
    pip install -r requirements-labs-gpu.lock      # vLLM {registry.VLLM_GPU_VERSION} and ModelScope's client
    export VLLM_USE_MODELSCOPE=True               # only if Hugging Face is slow or blocked
    python scripts/run_labs.py --fetch --lab {name}   # its model(s), resumable, before the run
    python snippets/labs/{script} {args + " " if args else ""}--receipt receipts/rtx-4090/{name}.json{part_commands}
    ```
"""
