"""What the site's interactive calculators show, composed from the course's formula modules.

The calculators run in the reader's browser as a JavaScript port (docs/javascripts/calc/formulas.js,
ADR-0008). These functions are the reference that port must equal: tests/test_calculators.py feeds
the same inputs to both and compares every output. Each function returns a dict of plain values
(``None`` where an input error stops the computation) and ``errors``, a dict from the input field to
its one-line message (the message the formula modules raise, where they raise one). Nothing here
raises on bad input: a reader's typo is a message, not a traceback.

Units: bytes (B), seconds (s), tokens, FLOP/byte; GiB only in the inputs named ``*_gib``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, cast

from infercourse import fmt, memory, registry, roofline, snippets, transformer

DRAFT_MODEL = snippets.constant("labs/spec_decode.py", "DRAFT_MODEL")
"""The spec calculator's default draft: lesson 6A's, the lab's ``DRAFT_MODEL`` (a registry model)."""

MOE_MODEL = snippets.constant("labs/expert_coverage.py", "MODEL")
"""The MoE calculator's default model: lab 7B's (a registry model)."""

ATTENTION_TILE = snippets.constant("lesson_1b/attention_kernels.py", "TILE")
"""Query rows a tiled attention kernel holds: lesson 1B's B_r, FlashAttention 2's block for a 128-wide head."""

KV_DTYPE_BYTES = {"bf16": 2, "fp8": 1}
"""Bytes per cached element b_kv by the calculators' KV dtype choice."""

WEIGHT_DTYPES = ("bf16", "fp8", "awq")
"""Weight formats: BF16 (2 B each), FP8 (W8: 1 B per linear weight), AWQ 4-bit (group size 128)."""

LIMITS = {
    "memory_gib": 4096,
    "reserve_gib": 4096,
    "max_model_len": 2**24,
    "batch": 4 * max(seqs for _, seqs in registry.VLLM_SCHEDULER_DEFAULTS.values()),
    "context": 2**24,
    "k": 32,
}
"""The largest value each numeric field of the calculators takes (GiB, tokens, sequences, draft tokens): a
reader's range, not a fact. 4 TiB is more memory than any one card has; 2^24 = 16,777,216 tokens is longer
than any model's context; the batch goes to four times vLLM's largest default ``max_num_seqs``
(:data:`infercourse.registry.VLLM_SCHEDULER_DEFAULTS`: 1,024, so 4,096); a
draft of 32 tokens is far past where speculation pays. Beyond them a field gets a message naming its range,
so no output is infinite or a wall of digits. The lower ends are each field's own: above 0 (memory), 0 or
more (reserve), 1 or more (the whole numbers); ``gpu_memory_utilization`` in (0, 1] and alpha in [0, 1]."""


def weight_bytes(config: Mapping[str, Any], dtype: str) -> float:
    """Bytes of the checkpoint's weights in ``dtype`` (``"bf16"``, ``"fp8"`` or ``"awq"``), B.

    Raises:
        ValueError: an unknown dtype, or a config the dense count does not cover (:mod:`infercourse.transformer`).
    """
    if dtype == "bf16":
        return transformer.weight_bytes(config, 2)
    if dtype == "fp8":
        return transformer.fp8_weight_bytes(config)
    if dtype == "awq":
        return transformer.awq_weight_bytes(config, registry.AWQ_GROUP_SIZE)
    raise ValueError(f"weight dtype must be one of {', '.join(WEIGHT_DTYPES)}, got {dtype!r}")


def gpu_total_bytes(gpu_name: str | None, memory_gib: float | None) -> float:
    """Device memory (B) the calculators use: ``memory_gib`` * 2^30 when given, else the registry GPU's
    :func:`infercourse.memory.device_total_upper_bytes` (CUDA's figure for the RTX 4090; elsewhere the
    datasheet's "GB" read as GiB, an upper bound).

    Raises:
        ValueError: ``memory_gib`` is not a number in (0, ``LIMITS["memory_gib"]``]. KeyError: an unknown GPU.
    """
    if memory_gib is not None:
        high = LIMITS["memory_gib"]
        if not _real(memory_gib) or not 0 < memory_gib <= high:
            raise ValueError(f"memory_gib must be a positive number of GiB up to {high:,}, got {memory_gib!r}")
        return memory_gib * fmt.GIB
    return memory.device_total_upper_bytes(gpu_name or registry.LAB_GPU)


def _real(value: Any) -> bool:
    """A finite int or float (not a bool)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def _whole(name: str, value: Any, field: str | None = None) -> None:
    """Refuse ``value`` unless it is a whole number from 1 to ``LIMITS[field or name]``.

    Raises:
        ValueError: naming ``name`` and the range.
    """
    high = LIMITS[field or name]
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise ValueError(f"{name} must be a whole number from 1 to {high:,}, got {value!r}")


def _whole_errors(**values: Any) -> dict[str, str]:
    """:func:`_whole`'s message for each named value (``batch=...``) that is not a whole number in its range,
    by name; empty when all are."""
    errors = {}
    for name, value in values.items():
        try:
            _whole(name, value)
        except ValueError as e:
            errors[name] = str(e)
    return errors


def memory_calc(
    config: Mapping[str, Any],
    weights: str = "bf16",
    kv: str = "bf16",
    gpu: str | None = registry.LAB_GPU,
    memory_gib: float | None = None,
    utilization: float = registry.VLLM_DEFAULT_GPU_MEMORY_UTILIZATION,
    max_model_len: int | None = None,
    reserve_gib: float = registry.VLLM_NON_KV_RESERVE_GIB,
) -> dict[str, Any]:
    """Lesson 1A's calculator: weights, kappa, KV budget, capacity and whether vLLM would start.

    Args:
        config: the model's config.json as a mapping.
        weights: weight format, one of :data:`WEIGHT_DTYPES`.
        kv: KV-cache dtype, a key of :data:`KV_DTYPE_BYTES`.
        gpu: a registry GPU short name, used when ``memory_gib`` is None.
        memory_gib: a custom device memory, GiB.
        utilization: vLLM's ``gpu_memory_utilization``, in (0, 1].
        max_model_len: tokens per request; None takes the config's ``max_position_embeddings`` (vLLM's default).
        reserve_gib: memory besides weights and KV cache, GiB (the course's assumption by default).

    Returns:
        ``attention`` (MHA/GQA/MQA/MLA), ``params`` (count), ``weight_bytes`` (B), ``kappa`` (B/token),
        ``total_bytes``, ``budget`` (B), ``tokens`` (KV capacity, whole blocks), ``concurrency`` (capacity /
        max_model_len, vLLM's "maximum concurrency"), ``sequences`` (whole requests of max_model_len),
        ``starts`` (bool, None when inputs are bad), ``reason`` (why it would not), ``note`` (what the
        counts leave out for this config, else empty), ``errors``.
    """
    out: dict[str, Any] = dict.fromkeys(
        ("attention", "params", "weight_bytes", "kappa", "total_bytes", "budget", "tokens", "concurrency", "sequences")
    )
    out.update(starts=None, reason="", note="", errors={})
    errors = out["errors"]
    try:
        out["attention"] = transformer.attention_kind(config)
        out["kappa"] = transformer.kv_bytes_per_token(config, KV_DTYPE_BYTES[kv])
        transformer.sliding_window_layers(config)
    except ValueError as e:
        errors["config"] = str(e)
    if "config" not in errors:
        try:
            out["params"] = transformer.param_count(config)
            out["weight_bytes"] = weight_bytes(config, weights)
        except ValueError as e:
            errors["weights"] = str(e)
    try:
        out["total_bytes"] = gpu_total_bytes(gpu, memory_gib)
    except ValueError as e:
        errors["memory_gib"] = str(e)
    if not (isinstance(utilization, (int, float)) and not isinstance(utilization, bool) and 0 < utilization <= 1):
        errors["utilization"] = f"gpu_memory_utilization must be in (0, 1], got {utilization!r}"
    high = LIMITS["reserve_gib"]
    if not _real(reserve_gib) or not 0 <= reserve_gib <= high:
        errors["reserve_gib"] = f"reserve must be a non-negative number of GiB up to {high:,}, got {reserve_gib!r}"
    mml = cast(int, config.get("max_position_embeddings") if max_model_len is None else max_model_len)  # checked next
    try:
        _whole("max_model_len", mml)
    except ValueError as e:
        if mml is not None or "config" not in errors:  # a bad config already has its message
            hint = "" if mml is not None else " (the config has no max_position_embeddings)"
            errors["max_model_len"] = str(e) + hint
    if errors:
        return out
    budget = out["total_bytes"] * utilization - out["weight_bytes"] - reserve_gib * fmt.GIB
    out["budget"] = budget
    if budget <= 0:
        out.update(tokens=0, concurrency=0.0, sequences=0, starts=False)
        out["reason"] = (
            "No available memory for the cache blocks: the weights and the reserve take all of "
            "total × gpu_memory_utilization"
        )
        return out
    windowed = transformer.sliding_window_layers(config)
    if windowed:
        out["note"] = (
            f"{windowed} of {config['num_hidden_layers']} layers use a sliding window: these counts treat every "
            "layer as full attention, so the capacity is a lower bound and a refusal may not happen in vLLM, "
            "which frees the blocks that leave the window"
        )
    tokens = memory.kv_capacity_tokens(budget, out["kappa"])
    out["tokens"] = tokens
    out["concurrency"] = memory.max_concurrency(tokens, mml) if tokens else 0.0
    out["sequences"] = memory.max_sequences(budget, out["kappa"], mml)
    limit = config.get("max_position_embeddings")
    if limit is not None and mml > limit:
        out["starts"] = False
        out["reason"] = (
            f"User-specified max_model_len ({mml}) is greater than the derived max_model_len "
            f"(max_position_embeddings={limit})"
        )
    elif out["sequences"] < 1:
        out["starts"] = False
        out["reason"] = f"the KV cache cannot hold one request of max_model_len ({mml}) tokens"
    else:
        out["starts"] = True
    return out


def _matmul_bytes_per_param(config: Mapping[str, Any], weights: str) -> float:
    """Average bytes per matmul parameter b that a decode step reads: the checkpoint's bytes less the
    input embedding table (a row lookup; when tied, it is the output head and is read), over M."""
    checkpoint = weight_bytes(config, weights)  # validates the config first
    table = 0 if config.get("tie_word_embeddings", False) else 2 * config["vocab_size"] * config["hidden_size"]
    return (checkpoint - table) / roofline.matmul_params(config)


def roofline_calc(
    config: Mapping[str, Any], gpu: str, weights: str = "bf16", kv: str = "bf16", batch: int = 1, context: int = 1024
) -> dict[str, Any]:
    """Lesson 2A's calculator: ridge point, each decode kernel's intensity, floor and regime, tokens/s.

    The weight matmuls run at the FP8 peak for FP8 weights on a card with FP8 tensor cores (W8A8), else
    at the BF16 peak (AWQ dequantises to BF16; FP8 on the A100 is weight-only); attention at BF16.

    Returns:
        ``b`` (B per matmul parameter), ``ridge`` (FLOP/B at the matmuls' peak), ``ridge_bf16``,
        ``peak_tflops`` (the matmuls'), ``linear_intensity``, ``attention_intensity`` (FLOP/B),
        ``linear_s``, ``attention_s``, ``step_s`` (floors, s), ``linear_bound``, ``attention_bound``
        (``"compute"`` or ``"memory"``), ``tokens_per_s`` (B / step floor), ``bstar`` (sequences),
        ``errors``.
    """
    keys = ("b", "ridge", "ridge_bf16", "peak_tflops", "linear_intensity", "attention_intensity")
    out: dict[str, Any] = dict.fromkeys(
        (*keys, "linear_s", "attention_s", "step_s", "linear_bound", "attention_bound", "tokens_per_s", "bstar")
    )
    out["errors"] = errors = _whole_errors(batch=batch, context=context)
    try:
        transformer.attention_flops_per_token(config, 1)  # MLA and missing keys say so here
        b = _matmul_bytes_per_param(config, weights)
    except ValueError as e:
        errors["config"] = str(e)
    if errors:
        return out
    peak = registry.fp8_dense_tflops(gpu) if weights == "fp8" and gpu in registry.FP8_DENSE_TFLOPS else None
    gpu_facts = registry.gpu(gpu)
    kv_b = KV_DTYPE_BYTES[kv]
    linear, attention = roofline.decode_kernel_floors(gpu_facts, config, context, batch, b, kv_b, peak)
    ridge = roofline.ridge_point(gpu_facts, peak)
    ridge_bf16 = roofline.ridge_point(gpu_facts)
    i_lin = roofline.linear_intensity(batch, b)
    i_att = roofline.attention_intensity(config, kv_b)
    out.update(
        b=b,
        ridge=ridge,
        ridge_bf16=ridge_bf16,
        peak_tflops=peak if peak is not None else gpu_facts.bf16_dense_tflops,
        linear_intensity=i_lin,
        attention_intensity=i_att,
        linear_s=linear,
        attention_s=attention,
        step_s=linear + attention,
        linear_bound="compute" if i_lin > ridge else "memory",
        attention_bound="compute" if i_att > ridge_bf16 else "memory",
        tokens_per_s=batch / (linear + attention),
        bstar=roofline.compute_bound_batch(gpu_facts, b, peak),
    )
    return out


def spec_calc(
    config: Mapping[str, Any],
    gpu: str,
    alpha: float = 0.7,
    k: int = 4,
    batch: int = 1,
    context: int = 1024,
    draft: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Lesson 6A's calculator: expected tokens per step and the speedup of speculative decoding.

    The three steps are lesson 6A's BF16 floors on ``gpu`` (a registry short name;
    :func:`infercourse.roofline.spec_step_floors`): the target's plain step tau and verification tau_v, and the
    ``draft`` model's step tau_d at the same batch and context (default: the lesson's draft,
    :data:`DRAFT_MODEL`), so the draft's cost grows with the batch as the lesson's does.

    Returns:
        ``expected`` (tokens per target step), ``tau``, ``tau_d``, ``tau_v``, ``rho`` (tau_d / tau), ``step_s``
        (k tau_d + tau_v), ``tpot`` (s per token with speculation), ``speedup`` (sigma), ``errors``.
    """
    draft = registry.model(DRAFT_MODEL).config if draft is None else draft
    out: dict[str, Any] = dict.fromkeys(("expected", "tau", "tau_d", "tau_v", "rho", "step_s", "tpot", "speedup"))
    out["errors"] = errors = {}
    checks = (
        ("alpha", lambda: roofline.expected_tokens_per_step(alpha, 1)),
        ("k", lambda: _whole("k (draft tokens per step)", k, "k")),
        ("batch", lambda: _whole("batch", batch)),
        ("context", lambda: _whole("context", context)),
    )
    for name, check in checks:
        try:
            check()
        except ValueError as e:
            errors[name] = str(e)
    if not errors:
        try:
            tau, _, tau_v = roofline.spec_step_floors(registry.gpu(gpu), config, config, context, batch, k)
        except ValueError as e:
            errors["config"] = str(e)
        try:
            tau_d = roofline.decode_step_floor(registry.gpu(gpu), draft, context, batch)
        except ValueError as e:
            errors["draft"] = str(e)
    if errors:
        return out
    expected = roofline.expected_tokens_per_step(alpha, k)
    step = k * tau_d + tau_v
    out.update(
        expected=expected,
        tau=tau,
        tau_d=tau_d,
        tau_v=tau_v,
        rho=tau_d / tau,
        step_s=step,
        tpot=step / expected,
        speedup=roofline.spec_speedup(alpha, k, tau, tau_d, tau_v),
    )
    return out


def attention_calc(
    config: Mapping[str, Any], gpu: str, kv: str = "bf16", batch: int = 1, context: int = 4096
) -> dict[str, Any]:
    """Lesson 1B's calculator: attention kernels for ``config`` on ``gpu`` (a registry short name).

    Per head, at S = ``context`` queries over as many keys, BF16: the score matrix and the bytes of naive and
    tiled attention (:func:`infercourse.roofline.attention_kernel_bytes`, tile :data:`ATTENTION_TILE`). Per
    decode step of ``batch`` sequences: the thread blocks B h_kv of a kernel with one block per (sequence,
    key/value head), against the card's SMs (registry ``SM_COUNT``), and the splits of the keys that fill
    them. vLLM 0.26.0's default attention backend for the card and the ``kv`` cache dtype
    (:func:`infercourse.labs.attention_backends.predicted_backend`, from its compute capability).

    Returns:
        ``score_head`` (B), ``score_layer`` (B, every query head), ``naive``, ``tiled``, ``once`` (B, one head),
        ``blocks``, ``sms``, ``busy`` (fraction of SMs with a block), ``splits`` (to fill them), ``backend``
        (``sms``, ``busy``, ``splits`` and ``backend`` are None for a card the registry has no figure for),
        ``errors``.
    """
    from infercourse.labs.attention_backends import predicted_backend

    keys = ("score_head", "score_layer", "naive", "tiled", "once", "blocks", "sms", "busy", "splits", "backend")
    out: dict[str, Any] = dict.fromkeys(keys)
    out["errors"] = errors = _whole_errors(batch=batch, context=context)
    try:
        transformer.attention_flops_per_token(config, 1)  # MLA and missing keys say so here
        d_h = transformer.head_dim(config)
    except ValueError as e:
        errors["config"] = str(e)
    if errors:
        return out
    kernel = roofline.attention_kernel_bytes(context, d_h, 2, ATTENTION_TILE)
    blocks = batch * config["num_key_value_heads"]
    sms, capability = registry.SM_COUNT.get(gpu), registry.COMPUTE_CAPABILITY.get(gpu)
    out.update(
        score_head=context * context * 2,
        score_layer=config["num_attention_heads"] * context * context * 2,
        naive=kernel["naive"],
        tiled=kernel["tiled"],
        once=kernel["once"],
        blocks=blocks,
        sms=sms,
        busy=None if sms is None else min(1.0, blocks / sms),
        splits=None if sms is None else math.ceil(sms / blocks),
        backend=None if capability is None else predicted_backend(capability, "fp8" if kv == "fp8" else "auto"),
    )
    return out


def moe_calc(config: Mapping[str, Any], gpu: str, batch: int = 1) -> dict[str, Any]:
    """Lesson 7B's calculator: what a decode step of ``batch`` sequences reads of a mixture-of-experts ``config``
    on ``gpu`` (a registry short name), BF16 weights, uniform routing.

    Returns:
        ``experts`` (E per MoE layer), ``top_k`` (k), ``total`` and ``active`` (parameters,
        :func:`infercourse.transformer.moe_param_breakdown`), ``touched`` (experts the batch reaches per MoE layer,
        :func:`infercourse.roofline.expected_experts_touched`: the most on average), ``touched_share`` (of E),
        ``weight_bytes`` (B: every weight in BF16), ``cards`` (how many of ``gpu``'s memory the weights alone
        fill, rounded up), ``read_bytes`` (B: the weights the step reads, :func:`infercourse.roofline.moe_step_params`),
        ``all_bytes`` (B: the same with every expert read), ``linear_s`` (s: the weight matmuls' floor,
        max(2 B M_active / peak, read / bandwidth)), ``ridge_batch`` (sequences: the batch at which each expert's
        matmuls reach the ridge point once every expert is read, B* E / k), ``errors``.
    """
    keys = ("experts", "top_k", "total", "active", "weight_bytes", "cards", "touched", "touched_share")
    out: dict[str, Any] = dict.fromkeys((*keys, "read_bytes", "all_bytes", "linear_s", "ridge_batch"))
    out["errors"] = errors = _whole_errors(batch=batch)
    try:
        experts, top_k = transformer.moe_experts(config)
        parts = transformer.moe_param_breakdown(config)
    except ValueError as e:
        errors["config"] = str(e)
    if errors:
        return out
    gpu_facts = registry.gpu(gpu)
    touched = roofline.expected_experts_touched(experts, top_k, batch)
    read, multiplied = roofline.moe_step_params(config, touched)
    out.update(
        experts=experts,
        top_k=top_k,
        total=parts["total"],
        active=parts["active"],
        weight_bytes=2 * parts["total"],
        cards=math.ceil(2 * parts["total"] / memory.device_total_upper_bytes(gpu)),
        touched=touched,
        touched_share=touched / experts,
        read_bytes=2 * read,
        all_bytes=2 * roofline.moe_step_params(config, experts)[0],
        linear_s=roofline.time_floor(gpu_facts, 2 * multiplied * batch, 2 * read),
        ridge_batch=roofline.compute_bound_batch(gpu_facts) * experts / top_k,
    )
    return out


def registry_export() -> dict[str, Any]:
    """The registry facts the calculators read, as JSON-ready data (written to the site at build time
    by hooks/calculators.py, so the JavaScript holds formulas only, no facts)."""
    return {
        "models": {name: dict(m.config) for name, m in registry.MODELS.items()},
        "gpus": {
            short: {
                "name": g.name,
                "total_bytes": memory.device_total_upper_bytes(short),
                "total_is_cuda": short in registry.GPU_MEMORY_TOTAL_MIB,
                "bandwidth_gb_s": g.bandwidth_gb_s,
                "bf16_dense_tflops": g.bf16_dense_tflops,
                "fp8_dense_tflops": registry.FP8_DENSE_TFLOPS.get(short),
                "sms": registry.SM_COUNT.get(short),
                "capability": registry.COMPUTE_CAPABILITY.get(short),
            }
            for short, g in registry.GPUS.items()
        },
        "defaults": {
            "model": registry.COURSE_MODEL,
            "gpu": registry.LAB_GPU,
            "utilization": registry.VLLM_DEFAULT_GPU_MEMORY_UTILIZATION,
            "reserve_gib": registry.VLLM_NON_KV_RESERVE_GIB,
            "block_size": registry.VLLM_DEFAULT_BLOCK_SIZE,
            "awq_group_size": registry.AWQ_GROUP_SIZE,
            "draft": DRAFT_MODEL,
            "moe_model": MOE_MODEL,
            "attention_tile": ATTENTION_TILE,
        },
        "limits": {**LIMITS, "config_size": transformer.CONFIG_SIZE_MAX},
    }
