"""Roofline arithmetic: ridge points and the time floors a GPU's datasheet allows.

Units: FLOP/s and bytes/s in SI (10^12, 10^9) as the registry states them; times in seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infercourse.checks import nonnegative, whole
from infercourse.checks import positive as _positive
from infercourse.registry import GPUFacts


def ridge_point(gpu: GPUFacts, peak_tflops: float | None = None) -> float:
    """Arithmetic intensity (FLOP/byte) above which a kernel is compute-bound on ``gpu``.

    peak dense FLOP/s (FP32 accumulate) / peak memory bandwidth in bytes/s. The peak is the BF16 one
    unless ``peak_tflops`` (TFLOP/s) names the math the kernel runs, e.g. the FP8 peak of a W8A8 GEMM
    (``registry.fp8_dense_tflops``, lesson 3A).

    Raises:
        ValueError: ``peak_tflops`` is given and not positive.
    """
    if peak_tflops is not None:
        _positive("peak_tflops", peak_tflops)
    peak = gpu.bf16_dense_tflops if peak_tflops is None else peak_tflops
    return peak * 1e12 / (gpu.bandwidth_gb_s * 1e9)


def attainable_flops(gpu: GPUFacts, intensity: float) -> float:
    """Roofline: min(peak FLOP/s, intensity * bandwidth), in FLOP/s.

    Raises:
        ValueError: ``intensity`` is not positive.
    """
    _positive("intensity", intensity)
    return min(gpu.bf16_dense_tflops * 1e12, intensity * gpu.bandwidth_gb_s * 1e9)


def time_floor(gpu: GPUFacts, flops: float, bytes_moved: float, peak_tflops: float | None = None) -> float:
    """The least time (s) a step can take on ``gpu``: max(flops / peak, bytes / bandwidth).

    ``peak_tflops``: the peak of the math the step runs (TFLOP/s); default ``gpu``'s dense BF16 peak.

    Raises:
        ValueError: a negative count, or a ``peak_tflops`` that is not positive.
    """
    nonnegative("flops", flops)
    nonnegative("bytes_moved", bytes_moved)
    peak = gpu.bf16_dense_tflops if peak_tflops is None else _positive("peak_tflops", peak_tflops)
    return max(flops / (peak * 1e12), bytes_moved / (gpu.bandwidth_gb_s * 1e9))


def decode_bytes_per_step(
    params: float, kv_bytes_per_token: float, context_len: float, batch: int = 1, weight_bytes: float = 2
) -> float:
    """Bytes one decode step moves: every weight once, plus each sequence's whole cache (B).

    N * b + B * kappa * S, with N ``params``, b ``weight_bytes`` per parameter (2 for BF16, about
    0.73 averaged over all of N for Qwen2.5-7B's AWQ 4-bit, lesson 0A), B ``batch`` sequences, kappa
    ``kv_bytes_per_token`` (B/token) and S ``context_len`` tokens of context per sequence.

    Raises:
        ValueError: an argument is not positive.
    """
    for name, value in (
        ("params", params),
        ("kv_bytes_per_token", kv_bytes_per_token),
        ("context_len", context_len),
        ("batch", batch),
        ("weight_bytes", weight_bytes),
    ):
        _positive(name, value)
    return params * weight_bytes + batch * kv_bytes_per_token * context_len


def decode_intensity(
    params: float, kv_bytes_per_token: float, context_len: float, batch: int = 1, weight_bytes: float = 2
) -> float:
    """The step's AVERAGE intensity (FLOP/byte) over all its kernels: 2 N B / (N b + B kappa S).

    Counts 2 FLOPs per parameter per token; attention's own FLOPs are left out (lesson 0A). An
    average of two kernels that run one after the other: it does NOT say whether either kernel is
    compute-bound (use :func:`linear_intensity` and :func:`attention_intensity` for that).

    Raises:
        ValueError: an argument is not positive.
    """
    step_bytes = decode_bytes_per_step(params, kv_bytes_per_token, context_len, batch, weight_bytes)  # checks them
    return 2 * params * batch / step_bytes


def decode_intensity_limit(params: float, kv_bytes_per_token: float, context_len: float) -> float:
    """The limit of :func:`decode_intensity` as B grows without bound: 2 N / (kappa S), FLOP/byte.

    An average, like :func:`decode_intensity`; it caps no kernel's intensity.

    Raises:
        ValueError: an argument is not positive.
    """
    for name, value in (("params", params), ("kv_bytes_per_token", kv_bytes_per_token), ("context_len", context_len)):
        _positive(name, value)
    return 2 * params / (kv_bytes_per_token * context_len)


def linear_intensity(batch: int, weight_bytes: float = 2) -> float:
    """FLOP/byte of a decode step's weight matmuls for ``batch`` sequences: 2 M B / (M b) = 2 B / b.

    Every weight (``weight_bytes`` b per parameter) is read once and used for B tokens, 2 FLOPs per
    use. Independent of the model size M and of the context length.

    Raises:
        ValueError: ``batch`` or ``weight_bytes`` is not positive.
    """
    _positive("batch", batch)
    _positive("weight_bytes", weight_bytes)
    return 2 * batch / weight_bytes


def attention_intensity(config, kv_dtype_bytes: int = 2) -> float:
    """FLOP/byte of decode attention: each query's 4 L h d_h FLOPs per cached token over kappa bytes.

    For MHA/GQA/MQA that is 4 L h d_h / (2 L h_kv d_h b_kv) = 2 (h / h_kv) / b_kv: independent of the
    batch (every sequence reads its own cache) and of the context length (FLOPs and bytes both grow
    with S). One query token per sequence; speculative verification of k drafted tokens multiplies
    it by k + 1. MLA configs raise (see :func:`infercourse.transformer.attention_flops_per_token`).

    Args:
        config: the model's config.json as a mapping.
        kv_dtype_bytes: bytes per cached element (2 for BF16, 1 for FP8).

    Raises:
        ValueError: a non-positive ``kv_dtype_bytes`` or a config key missing.
    """
    from infercourse.transformer import attention_flops_per_token, kv_bytes_per_token

    whole("kv_dtype_bytes", kv_dtype_bytes)
    return attention_flops_per_token(config, 1) / kv_bytes_per_token(config, kv_dtype_bytes)


def compute_bound_batch(gpu: GPUFacts, weight_bytes: float = 2, peak_tflops: float | None = None) -> float:
    """The batch B* at which a decode step's weight matmuls reach ``gpu``'s ridge point R: R b / 2.

    Solves 2 B / b = R, with b the bytes *stored* per weight (what the step reads) and R at the peak of
    the math the matmuls run: BF16 by default, also for weight-only formats (AWQ's W4A16 dequantises
    to BF16), ``peak_tflops`` for W8A8 FP8 (lesson 3A). A real number (round up for a whole batch);
    independent of the model and of the context length. GQA/MHA attention with one query per sequence never gets there
    (:func:`attention_intensity` is a few FLOP/byte), so such a step stays partly memory-bound at any
    batch; MLA and speculative verification raise attention's intensity (lesson 2A).

    Raises:
        ValueError: ``weight_bytes`` or ``peak_tflops`` is not positive.
    """
    _positive("weight_bytes", weight_bytes)
    return ridge_point(gpu, peak_tflops) * weight_bytes / 2


def decode_kernel_floors(
    gpu: GPUFacts,
    config,
    context_len: int,
    batch: int = 1,
    weight_bytes: float = 2,
    kv_dtype_bytes: int = 2,
    peak_tflops: float | None = None,
) -> tuple[float, float]:
    """(weight matmuls, attention): each kernel's floor (s) in one decode step; their sum is
    :func:`decode_step_floor`.

    weight matmuls: max(2 M B / peak, M b / bandwidth), at ``peak_tflops`` (default the BF16 peak; the FP8
    peak for W8A8 FP8, lesson 3A); attention: max(B 4 L h d_h S / peak, B kappa S / bandwidth) at BF16.

    Raises:
        ValueError: a non-positive length, batch or width, or a config key missing.
    """
    from infercourse.transformer import attention_flops_per_token, kv_bytes_per_token

    for name, value in (("batch", batch), ("weight_bytes", weight_bytes)):
        _positive(name, value)
    whole("kv_dtype_bytes", kv_dtype_bytes)
    m = matmul_params(config)
    linear = time_floor(gpu, 2 * m * batch, m * weight_bytes, peak_tflops)
    attention = time_floor(
        gpu,
        batch * attention_flops_per_token(config, context_len),
        batch * kv_bytes_per_token(config, kv_dtype_bytes) * context_len,
    )
    return linear, attention


# --- Floors of one forward pass, kernel by kernel ----------------------------------------------
# The weight matmuls and attention run as separate kernels, one after the other, so a pass takes
# at least the sum of their floors (not the floor of their summed FLOPs and bytes). These are the
# floors the labs' predictions use.


def matmul_params(config) -> int:
    """Parameters a token is multiplied by: the decoder layers plus the output head (a count).

    N minus the input embedding (a row lookup, not a product), with the head counted once whether
    or not it is tied to the embedding. Norms and biases are included; they are a rounding error.

    Raises:
        ValueError: as :func:`infercourse.transformer.param_breakdown`.
    """
    from infercourse.transformer import param_breakdown

    parts = param_breakdown(config)
    head = config["vocab_size"] * config["hidden_size"]
    return sum(parts.values()) - parts["embedding"] - parts["lm_head"] + head


def decode_step_floor(
    gpu: GPUFacts,
    config,
    context_len: int,
    batch: int = 1,
    weight_bytes: float = 2,
    kv_dtype_bytes: int = 2,
    peak_tflops: float | None = None,
) -> float:
    """Least time (s) of one decode step of ``batch`` sequences, each with ``context_len`` cached tokens.

    weight matmuls: max(2 M B / peak, M b / bandwidth), M = :func:`matmul_params`, weights read once;
    attention: max(B * 4 L h d_h S / peak, B kappa S / bandwidth), each sequence's cache read once.

    Args:
        weight_bytes: average bytes per matmul parameter b (2 for BF16; for AWQ 4-bit 0.52 per quantised
            weight, about 0.63 averaged over M, whose output head stays 16-bit: lesson 0C).
        kv_dtype_bytes: bytes per cached element (2 for BF16, 1 for FP8).
        peak_tflops: the weight matmuls' peak (TFLOP/s): default BF16; the FP8 peak for W8A8 FP8.

    Raises:
        ValueError: a non-positive length, batch, width or peak, or a config key missing.
    """
    return sum(decode_kernel_floors(gpu, config, context_len, batch, weight_bytes, kv_dtype_bytes, peak_tflops))


def prefill_floor(
    gpu: GPUFacts,
    config,
    prompt_len: int,
    weight_bytes: float = 2,
    kv_dtype_bytes: int = 2,
    peak_tflops: float | None = None,
) -> float:
    """Least time (s) of one prefill pass over ``prompt_len`` tokens (a lower bound on TTFT).

    ``peak_tflops``: the weight matmuls' peak (TFLOP/s), default BF16: the FP8 peak for W8A8 FP8. Weight-only
    formats (AWQ's W4A16) multiply in BF16, so only their bytes (``weight_bytes``) change.

    weight matmuls: max((2 (M - H) S + 2 H) / peak, M b / bandwidth), where H = vocab x hidden is the
    output head, applied to the last position only (vLLM computes logits for it alone);
    attention (causal): max(sum over positions of 4 L h d_h i, for i = 1..S, / peak, kappa S / bandwidth).

    Raises:
        ValueError: a non-positive length or width, or a config key missing.
    """
    _positive("prompt_len", prompt_len)
    return sum(_chunk_kernel_floors(gpu, config, prompt_len, 0, weight_bytes, kv_dtype_bytes, peak_tflops))


# --- lesson 4B: chunked prefill and PD disaggregation ---
def chunk_step_floor(
    gpu: GPUFacts, config, chunk: int, context: int = 0, weight_bytes: float = 2, kv_dtype_bytes: int = 2
) -> float:
    """Least time (s) of one step that prefills ``chunk`` prompt tokens after ``context`` already cached.

    weight matmuls: max((2 (M - H) C + 2 H) / peak, M b / bandwidth), H = vocab x hidden (the output
    head runs on one position); attention: max(4 L h d_h (sum of the positions context+1 .. context+C)
    / peak, kappa (context + C) / bandwidth): the chunk's queries see the cached prefix and themselves
    (causal), and the prefix's KV is read once. With ``context`` 0 this is :func:`prefill_floor`.

    Args:
        chunk: prompt tokens C in the step (tokens, > 0).
        context: prompt tokens already in the KV cache before it (tokens, >= 0).

    Raises:
        ValueError: a non-positive chunk or width, a negative or fractional context, or a config key missing.
    """
    return sum(_chunk_kernel_floors(gpu, config, chunk, context, weight_bytes, kv_dtype_bytes))


def _chunk_kernel_floors(
    gpu: GPUFacts,
    config,
    chunk: int,
    context: int,
    weight_bytes: float,
    kv_dtype_bytes: int,
    peak_tflops: float | None = None,
) -> tuple[float, float]:
    """(weight matmuls, attention) floors (s) of :func:`chunk_step_floor`."""
    from infercourse.transformer import attention_flops_per_token, kv_bytes_per_token

    _positive("chunk", chunk)
    _positive("weight_bytes", weight_bytes)
    whole("context", context, 0)
    whole("kv_dtype_bytes", kv_dtype_bytes)
    m = matmul_params(config)
    head = config["vocab_size"] * config["hidden_size"]
    linear = time_floor(gpu, 2 * (m - head) * chunk + 2 * head, m * weight_bytes, peak_tflops)
    positions = chunk * (2 * context + chunk + 1) / 2  # context+1 + ... + context+chunk
    attention = time_floor(
        gpu,
        attention_flops_per_token(config, 1) * positions,
        kv_bytes_per_token(config, kv_dtype_bytes) * (context + chunk),
    )
    return linear, attention


def chunked_prefill_steps(prompt_len: int, budget: int, decoders: int = 0) -> int:
    """Engine steps until a ``prompt_len``-token prompt's first token with chunked prefill: ceil(P / (C - D)).

    Each step holds at most ``budget`` tokens C (vLLM's ``max_num_batched_tokens``); the ``decoders``
    D already running take one token each first (vLLM schedules running requests before waiting
    ones), the prompt gets the rest, and its last chunk's step samples its first token. Chunking off
    (C >= P + D): one step.

    Raises:
        ValueError: a non-positive length or budget, a negative decoder count, or C <= D (no room).
    """
    _positive("prompt_len", prompt_len)
    _positive("budget", budget)
    whole("decoders", decoders, 0)
    if budget <= decoders:
        raise ValueError(f"a budget of {budget} tokens leaves no room beside {decoders} decoders; raise the budget")
    return -(-prompt_len // (budget - decoders))


def chunked_prefill_floors(gpu: GPUFacts, config, prompt_len: int, chunk: int) -> list[float]:
    """The floor (s) of each step of a ``prompt_len``-token prefill cut into chunks of ``chunk`` tokens.

    Step j (from 0) prefills min(C, P - jC) tokens after jC cached ones (:func:`chunk_step_floor`);
    their sum is the prompt's TTFT floor, their largest the longest gap a decoder beside it sees.

    Raises:
        ValueError: a non-positive length or chunk.
    """
    _positive("chunk", chunk)
    steps = chunked_prefill_steps(prompt_len, chunk)
    return [chunk_step_floor(gpu, config, min(chunk, prompt_len - j * chunk), j * chunk) for j in range(steps)]


# --- end of lesson 4B ---

# --- lesson 6A: speculative decoding ---


def _acceptance(alpha: float) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= alpha <= 1:
        raise ValueError(f"alpha (acceptance rate) must be a number from 0 to 1, got {alpha!r}")
    return float(alpha)


def _draft_len(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k (draft tokens per step) must be a whole number >= 1, got {k!r}")
    return k


def expected_tokens_per_step(alpha: float, k: int) -> float:
    """Expected tokens one target step emits with ``k`` draft tokens, each accepted with probability
    ``alpha`` independently of the others (Leviathan et al. 2023, eq. 1): (1 - alpha^(k+1)) / (1 - alpha).

    The accepted prefix of the draft plus one token the target samples itself (a correction after a
    rejection, or a bonus token when all k are accepted): 1 at alpha = 0, k + 1 at alpha = 1.

    Raises:
        ValueError: alpha outside [0, 1], or k not a whole number >= 1.
    """
    a, k = _acceptance(alpha), _draft_len(k)
    return float(k + 1) if a == 1 else (1 - a ** (k + 1)) / (1 - a)


def spec_speedup(alpha: float, k: int, target_step: float, draft_step: float, verify_step: float) -> float:
    """Speedup of speculative decoding over plain decode: tokens per second with it over without.

    sigma = E tau / (k tau_d + tau_v): E = :func:`expected_tokens_per_step` tokens for k draft steps of
    ``draft_step`` s each plus one verification step of ``verify_step`` s, against one token per plain
    step of ``target_step`` s. All three times in the same unit (seconds).

    Raises:
        ValueError: alpha outside [0, 1], k not a whole number >= 1, or a non-positive time.
    """
    for name, value in (("target_step", target_step), ("draft_step", draft_step), ("verify_step", verify_step)):
        _positive(name, value)
    return expected_tokens_per_step(alpha, k) * target_step / (k * draft_step + verify_step)


def spec_step_floors(
    gpu: GPUFacts, target_config, draft_config, context_len: int, batch: int, k: int
) -> tuple[float, float, float]:
    """Floors (s) of the three steps of :func:`spec_speedup` on ``gpu``, BF16, ``batch`` sequences of
    ``context_len`` cached tokens: (plain target step, one draft step, target verification of k + 1
    tokens per sequence); the first two are :func:`decode_step_floor`.

    The verification step carries ``batch * (k + 1)`` tokens: its matmuls read the weights once and do
    k + 1 times the work, so they cost about one plain step while batch (k + 1) stays below B* and grow
    with it beyond. Its attention reads each sequence's cache once for all k + 1 queries (the kernel
    handles a sequence's queries together, as in a prefill chunk) and does k + 1 times the FLOPs, so its
    intensity grows (k + 1)-fold (lesson 2A's caveat).

    Raises:
        ValueError: a non-positive length or batch, k not a whole number >= 1, or a config key missing.
    """
    from infercourse.transformer import attention_flops_per_token, kv_bytes_per_token

    k = _draft_len(k)
    tokens = batch * (k + 1)
    linear, _ = decode_kernel_floors(gpu, target_config, context_len, tokens)
    attention = time_floor(
        gpu,
        tokens * attention_flops_per_token(target_config, context_len),
        batch * kv_bytes_per_token(target_config, 2) * context_len,
    )
    return (
        decode_step_floor(gpu, target_config, context_len, batch),
        decode_step_floor(gpu, draft_config, context_len, batch),
        linear + attention,
    )


def spec_decode_steps(output_tokens: int, k: int) -> int:
    """Engine steps one request of ``output_tokens`` tokens takes when every draft token is accepted
    (a draft identical to the target under greedy decoding, or vLLM's synthetic acceptance at k + 1):
    1 prefill step that emits the first token, then ceil((n - 1) / (k + 1)) steps of k + 1 tokens each.
    Without speculation (k = 0 is not accepted here) it is n steps.

    Raises:
        ValueError: output_tokens < 1 or k not a whole number >= 1.
    """
    k = _draft_len(k)
    whole("output_tokens", output_tokens)
    return 1 + -(-(output_tokens - 1) // (k + 1))


# --- end of lesson 6A ---


# --- lesson 7A: tensor parallelism ---


def ring_allreduce_time(message_bytes: float, ranks: int, link_gb_s: float, hop_latency_s: float) -> float:
    """Time (s) of one ring all-reduce of ``message_bytes`` (B) over ``ranks`` GPUs.

    2 (T - 1) steps (reduce-scatter, then all-gather), each moving m / T bytes over a link of
    ``link_gb_s`` (GB/s, 10^9 B/s, one direction) after a fixed ``hop_latency_s``:
    t = 2 (T - 1) / T * m / beta + 2 (T - 1) alpha. Zero for T = 1.

    Raises:
        ValueError: a negative message or latency, a non-positive link, or T not a positive whole number.
    """
    nonnegative("hop_latency_s", hop_latency_s)
    _positive("link_gb_s", link_gb_s)
    return ring_allreduce_bytes(message_bytes, ranks) / (link_gb_s * 1e9) + 2 * (ranks - 1) * hop_latency_s


def ring_allreduce_bytes(message_bytes: float, ranks: int) -> float:
    """Bytes (B) each of ``ranks`` GPUs sends in one ring all-reduce of ``message_bytes``: 2 (T - 1) / T x m
    (T - 1 steps of reduce-scatter, T - 1 of all-gather, m / T bytes each). Zero for T = 1.

    Raises:
        ValueError: a negative message, or T not a positive whole number.
    """
    whole("ranks", ranks)
    nonnegative("message_bytes", message_bytes)
    return 2 * (ranks - 1) / ranks * message_bytes


def tp_collectives_time(
    config, tokens: int, logit_rows: int, ranks: int, link_gb_s: float, hop_latency_s: float
) -> float:
    """Time (s) of the collectives one tensor-parallel BF16 forward pass over ``tokens`` positions pays,
    one after the other: 2 L + 1 ring all-reduces of m = tokens x d x 2 bytes (two per layer, after
    o_proj and down_proj, and one after the vocabulary-parallel embedding; :func:`ring_allreduce_time`),
    then the gather of ``logit_rows`` rows of V BF16 logits to one rank, (T - 1) / T x rows V 2 / beta +
    (T - 1) alpha. Zero for T = 1. Over a link staged through host memory (the RTX 4090's PCIe) each
    byte crosses the bus twice, so ``link_gb_s`` per direction makes this a lower bound there.

    Raises:
        ValueError: as :func:`ring_allreduce_time`; a config key missing.
    """
    whole("tokens", tokens)
    whole("logit_rows", logit_rows)
    if whole("ranks", ranks) == 1:
        return 0.0
    message = tokens * config["hidden_size"] * 2
    all_reduces = (2 * config["num_hidden_layers"] + 1) * ring_allreduce_time(message, ranks, link_gb_s, hop_latency_s)
    return all_reduces + logits_gather_time(config, logit_rows, ranks, link_gb_s, hop_latency_s)


def logits_gather_time(config, rows: int, ranks: int, link_gb_s: float, hop_latency_s: float) -> float:
    """Time (s) to gather ``rows`` rows of V BF16 logits, split by vocabulary over ``ranks`` GPUs, to one
    rank: (T - 1) / T x rows V 2 / beta + (T - 1) alpha (each other rank sends its slice once).

    Raises:
        ValueError: a count not a positive whole number, a non-positive link, a negative latency, or a config
            key missing.
    """
    whole("rows", rows)
    whole("ranks", ranks)
    _positive("link_gb_s", link_gb_s)
    nonnegative("hop_latency_s", hop_latency_s)
    logits = rows * config["vocab_size"] * 2
    return (ranks - 1) / ranks * logits / (link_gb_s * 1e9) + (ranks - 1) * hop_latency_s


def tp_decode_step(
    gpu: GPUFacts, config, context_len: int, batch: int, ranks: int, link_gb_s: float, hop_latency_s: float
) -> tuple[float, float]:
    """(compute, communication) floors (s) of one BF16 decode step at tensor-parallel degree ``ranks``.

    compute: :func:`decode_kernel_floors` with the weight matmuls divided by T (every matmul, the
    vocab-parallel output head included, is split) and attention by min(T, h_kv) (past h_kv the KV
    heads are replicated); communication: :func:`tp_collectives_time` over the B tokens, B rows of logits.

    Raises:
        ValueError: as :func:`decode_kernel_floors` and :func:`ring_allreduce_time`.
    """
    linear, attention = decode_kernel_floors(gpu, config, context_len, batch)
    whole("ranks", ranks)
    compute = linear / ranks + attention / min(ranks, config["num_key_value_heads"])
    return compute, tp_collectives_time(config, batch, batch, ranks, link_gb_s, hop_latency_s)


def tp_prefill_step(
    gpu: GPUFacts, config, prompt_len: int, ranks: int, link_gb_s: float, hop_latency_s: float
) -> tuple[float, float]:
    """(compute, communication) floors (s) of one BF16 prefill of ``prompt_len`` tokens at tensor-parallel
    degree ``ranks``: TTFT is at least their sum.

    compute: :func:`prefill_floor`'s weight matmuls divided by T and its attention by min(T, h_kv);
    communication: :func:`tp_collectives_time` over the S prompt tokens (each all-reduce carries S d 2
    bytes, so a long prompt's are bandwidth-bound where a decode step's are latency-bound) and one row
    of logits (the last position's).

    Raises:
        ValueError: as :func:`prefill_floor` and :func:`ring_allreduce_time`.
    """
    _positive("prompt_len", prompt_len)
    whole("ranks", ranks)
    linear, attention = _chunk_kernel_floors(gpu, config, prompt_len, 0, 2, 2)
    compute = linear / ranks + attention / min(ranks, config["num_key_value_heads"])
    return compute, tp_collectives_time(config, prompt_len, 1, ranks, link_gb_s, hop_latency_s)


# --- end of lesson 7A ---


# --- The physics check: what a predicted rate asks of the card ----------------------------------
# Counted from the model's shapes (infercourse.transformer), not from the step model above, so a step
# model that leaves work out (prefill, say) predicts a rate that asks more than the card has.


@dataclass(frozen=True)
class Demand:
    """What a predicted rate asks of one GPU, sustained: FLOP/s and bytes/s.

    Attributes:
        gpu: the card (its datasheet peak and bandwidth).
        flop_s: floating-point operations per second the prediction needs, on this card (FLOP/s).
        byte_s: bytes per second it must read from the card's memory (bytes/s).
        what: the prediction, in words (for the message when it is impossible).
        peak_tflops: the peak of the math it runs (TFLOP/s); default the card's dense BF16 peak.
    """

    gpu: GPUFacts
    flop_s: float
    byte_s: float
    what: str
    peak_tflops: float | None = None

    def problems(self) -> list[str]:
        """What makes the prediction impossible: an empty list when it needs at most the peak FLOP/s and
        at most the bandwidth, else one sentence per excess, with the share of the peak it needs."""
        peak = (self.gpu.bf16_dense_tflops if self.peak_tflops is None else self.peak_tflops) * 1e12
        bandwidth = self.gpu.bandwidth_gb_s * 1e9
        out = []
        if self.flop_s > peak * (1 + 1e-9):
            out.append(
                f"{self.what} needs {self.flop_s / 1e12:,.1f} TFLOP/s, {self.flop_s / peak:.0%} of the "
                f"{self.gpu.name}'s peak of {peak / 1e12:,.1f} TFLOP/s: the model leaves work out"
            )
        if self.byte_s > bandwidth * (1 + 1e-9):
            out.append(
                f"{self.what} needs {self.byte_s / 1e9:,.0f} GB/s, {self.byte_s / bandwidth:.0%} of the "
                f"{self.gpu.name}'s {bandwidth / 1e9:,.0f} GB/s: the model leaves bytes out"
            )
        return out


def _head_params(config) -> int:
    return config["vocab_size"] * config["hidden_size"]


def request_flops(config, prompt_len: int, output_len: int) -> float:
    """The least FLOPs one request of ``prompt_len`` prompt and ``output_len`` output tokens costs (FLOP).

    Its S_in + n - 1 positions each go through the decoder layers' linear weights (2 FLOPs per weight,
    :func:`infercourse.transformer.linear_weight_count`) and attend causally to every position up to
    their own (:func:`infercourse.transformer.attention_flops_per_token`); the output head runs on the n
    positions that sample a token (the prompt's last and each decode step's). Norms, biases and
    the embedding's row lookup are left out, so it is a lower bound. Qwen2.5-7B at 512 in, 256 out:
    1.04e13 FLOP (prefill 6.7e12, decode 3.7e12).

    Raises:
        ValueError: a length that is not a positive whole number, a config key missing, or an MLA config.
    """
    from infercourse.transformer import attention_flops_per_token, linear_weight_count

    whole("prompt_len", prompt_len)
    whole("output_len", output_len)
    positions = prompt_len + output_len - 1
    attention = attention_flops_per_token(config, positions) * (positions + 1) / 2  # keys 1 + 2 + ... + positions
    return 2 * linear_weight_count(config) * positions + 2 * _head_params(config) * output_len + attention


def decode_demand(
    gpu: GPUFacts,
    config,
    batch: int,
    context_len: int,
    step_s: float,
    what: str,
    ranks: int = 1,
    weight_bytes: float = 2,
    peak_tflops: float | None = None,
    kv_dtype_bytes: int = 2,
) -> Demand:
    """What a decode step of ``batch`` sequences at ``context_len`` tokens of context, predicted to take
    ``step_s`` seconds, asks of each of ``ranks`` GPUs (tensor parallel: the work split evenly, a floor).

    FLOP per step: B x (2 x linear weights + 2 x output head + attention over the context); bytes per
    step: the linear weights at ``weight_bytes`` per weight plus the 16-bit output head (read once) and
    B x context_len tokens of KV at ``kv_dtype_bytes`` per element (2: BF16; 1: FP8).

    Raises:
        ValueError: a non-positive batch, length, time or rank count; a config key missing.
    """
    from infercourse.transformer import attention_flops_per_token, kv_bytes_per_token, linear_weight_count

    for name, value in (("batch", batch), ("step_s", step_s), ("ranks", ranks), ("weight_bytes", weight_bytes)):
        _positive(name, value)
    whole("kv_dtype_bytes", kv_dtype_bytes)
    linear, head = linear_weight_count(config), _head_params(config)
    flops = batch * (2 * linear + 2 * head + attention_flops_per_token(config, context_len))
    bytes_moved = linear * weight_bytes + 2 * head + batch * context_len * kv_bytes_per_token(config, kv_dtype_bytes)
    return Demand(gpu, flops / ranks / step_s, bytes_moved / ranks / step_s, what, peak_tflops)


def prefill_demand(gpu: GPUFacts, config, prompt_len: int, seconds: float, what: str) -> Demand:
    """What a prefill of ``prompt_len`` tokens, predicted to take ``seconds``, asks of one GPU:
    :func:`request_flops` of the prompt and its first token over the time, and the BF16 linear
    weights and output head read once.

    Raises:
        ValueError: a non-positive length or time; a config key missing.
    """
    from infercourse.transformer import linear_weight_count

    _positive("seconds", seconds)
    bytes_moved = 2 * (linear_weight_count(config) + _head_params(config))
    return Demand(gpu, request_flops(config, prompt_len, 1) / seconds, bytes_moved / seconds, what)


def cost_per_million_tokens(price_per_hour: float, tokens_per_s: float) -> float:
    """What a million tokens cost on a card rented at ``price_per_hour`` (any currency, per card-hour) that produces
    ``tokens_per_s`` tokens a second: 10^6 x price / (3,600 s x rate), in the same currency. At a throughput
    ceiling (a floor on time) it is a floor on cost.

    Raises:
        ValueError: a price or rate not positive and finite.
    """
    _positive("price_per_hour", price_per_hour)
    _positive("tokens_per_s", tokens_per_s)
    return 1e6 * price_per_hour / (3600 * tokens_per_s)


def serving_demand(
    gpu: GPUFacts, config, rate: float, prompt_len: int, output_len: int, step_s: float, what: str
) -> Demand:
    """What serving ``rate`` requests/s of ``prompt_len`` + ``output_len`` tokens, with engine steps of
    ``step_s`` seconds, asks of one GPU: rate x :func:`request_flops` FLOP/s, and each step reads the
    BF16 linear weights and output head at least once.

    Raises:
        ValueError: a non-positive rate, length or time; a config key missing.
    """
    from infercourse.transformer import linear_weight_count

    _positive("rate", rate)
    _positive("step_s", step_s)
    bytes_per_step = 2 * (linear_weight_count(config) + _head_params(config))
    return Demand(gpu, rate * request_flops(config, prompt_len, output_len), bytes_per_step / step_s, what)


# --- lesson 2B: the third regime, launch overhead and CUDA graphs ----------------------------------


def attention_kernel_bytes(context_len: int, head_dim: int, dtype_bytes: int = 2, tile: int = 128) -> dict[str, int]:
    """Bytes one attention head moves through GPU memory for ``context_len`` queries over as many keys
    (lesson 1B; non-causal, the count the snippet ``snippets/lesson_1b/attention_kernels.py`` prints).

    Returns ``{"naive", "tiled", "once"}`` in bytes: naive, three kernels, b (4 S d_h + 4 S^2) (Q, K, V read
    and O written once; the S x S scores and then the probabilities written and read back); tiled, at most,
    b (2 S d_h + 2 S d_h ceil(S / tile)) (K and V read once per tile of ``tile`` queries); once, 4 S d_h b,
    the tiled kernel's least (every re-read served by the L2 cache).

    Raises:
        ValueError: a length, head size, byte count or tile that is not a positive whole number.
    """
    for name, value in (
        ("context_len", context_len),
        ("head_dim", head_dim),
        ("dtype_bytes", dtype_bytes),
        ("tile", tile),
    ):
        _positive(name, value)
    s, d, b = context_len, head_dim, dtype_bytes
    return {
        "naive": b * (4 * s * d + 4 * s * s),
        "tiled": b * (2 * s * d + 2 * s * d * math.ceil(s / tile)),
        "once": 4 * s * d * b,
    }


CAPTURE_STRIDE_SWITCH = 256
"""Where vLLM 0.26.0's default capture sizes go from every 8 tokens to every 16
(vllm/config/vllm.py:1783-1843, registry fact ``vllm-cudagraph-capture-sizes``)."""


def cudagraph_capture_sizes(max_num_seqs: int, max_num_batched_tokens: int, speculative_tokens: int = 0) -> list[int]:
    """The batch sizes (tokens per step) vLLM 0.26.0 captures a CUDA graph for by default, ascending.

    The largest is min(2 x ``max_num_seqs`` x (1 + ``speculative_tokens``), 512, ``max_num_batched_tokens``);
    below it 1, 2, 4, every 8 below 256 and every 16 from 256; ``max_num_batched_tokens`` is added when it
    is at most the largest (vllm/config/vllm.py:1783-1843, registry fact ``vllm-cudagraph-capture-sizes``;
    the default ``performance_mode`` "balanced").

    Raises:
        ValueError: a non-positive ``max_num_seqs`` or ``max_num_batched_tokens``, or negative
            ``speculative_tokens``.
    """
    from infercourse.registry import CUDAGRAPH_MAX_CAPTURE_SIZE

    _positive("max_num_seqs", max_num_seqs)
    _positive("max_num_batched_tokens", max_num_batched_tokens)
    whole("speculative_tokens", speculative_tokens, 0)
    largest = min(max_num_seqs * (1 + speculative_tokens) * 2, CUDAGRAPH_MAX_CAPTURE_SIZE, max_num_batched_tokens)
    sizes = [s for s in (1, 2, 4) if s <= largest]
    switch = CAPTURE_STRIDE_SWITCH
    sizes += list(range(8, min(largest + 1, switch), 8)) + list(range(switch, largest + 1, 16))
    if max_num_batched_tokens <= largest:
        sizes.append(max_num_batched_tokens)
    return sorted(set(sizes))


def cudagraph_padded_size(batch: int, sizes: list[int]) -> int | None:
    """The captured size a decode batch of ``batch`` tokens runs at: the smallest of ``sizes`` that is at
    least ``batch`` (the rows above ``batch`` are padding), or None above the largest (no graph: eager).
    vllm/v1/cudagraph_dispatcher.py:72-91, registry fact ``vllm-cudagraph-padding``.

    Raises:
        ValueError: a non-positive ``batch``, or no sizes.
    """
    _positive("batch", batch)
    if not sizes:
        raise ValueError("sizes is empty: no CUDA graph was captured (enforce_eager?)")
    return next((s for s in sorted(sizes) if s >= batch), None)


def launch_overhead_s(
    layers: int, launch_s: float, kernels_per_layer: int | None = None, kernels_outside: int | None = None
) -> float:
    """CPU time (s) an eager decode step spends launching its kernels: (kernels per layer x ``layers`` +
    kernels outside the layers) x ``launch_s`` (s per launch). Defaults: the registry's assumed counts
    (``KERNELS_PER_LAYER``, ``KERNELS_OUTSIDE_LAYERS``). When the GPU's kernels are shorter than their
    launches, this, not the roofline floor, sets the step: a CUDA graph replaces the launches by one.

    Raises:
        ValueError: a non-positive layer count, launch time or kernel count.
    """
    from infercourse.registry import KERNELS_OUTSIDE_LAYERS, KERNELS_PER_LAYER

    per_layer = KERNELS_PER_LAYER if kernels_per_layer is None else kernels_per_layer
    outside = KERNELS_OUTSIDE_LAYERS if kernels_outside is None else kernels_outside
    for name, value in (("layers", layers), ("launch_s", launch_s), ("kernels_per_layer", per_layer)):
        _positive(name, value)
    _positive("kernels_outside", outside)
    return (per_layer * layers + outside) * launch_s


def overhead_bound_bytes(gpu: GPUFacts, overhead_s: float) -> float:
    """The bytes per step below which a decode step is overhead-bound on ``gpu`` (B): the bytes its
    bandwidth moves in ``overhead_s`` seconds, W* = tau_0 x bandwidth. A model reading fewer bytes per
    step spends more of the step on overhead than on moving bytes.

    Raises:
        ValueError: a non-positive ``overhead_s``.
    """
    _positive("overhead_s", overhead_s)
    return overhead_s * gpu.bandwidth_gb_s * 1e9


def overhead_band_s(layers: int) -> tuple[float, float]:
    """The course's band for tau_0 (s), low and high: what one decode step of a model with ``layers``
    decoder layers costs on one GPU beyond its floor.

    Low: vLLM's default CUDA graphs; the graph's replay and the kernels around it, ``KERNELS_OUTSIDE_LAYERS``
    launches at the fast end of ``KERNEL_LAUNCH_US``; async scheduling hides the scheduler behind the GPU.
    High: every kernel launched one by one at the slow end, (K_layer L + K_out) launches: what
    ``enforce_eager=True`` pays, and the stand-in for CPU work (scheduling, sampling) a step fails to hide.
    Sources: facts ``kernel-launch-cost`` and ``kernels-per-decode-step``; lab 2B's GPU receipt measures yours.

    Raises:
        ValueError: a non-positive layer count.
    """
    from infercourse.registry import KERNEL_LAUNCH_US, KERNELS_OUTSIDE_LAYERS

    _positive("layers", layers)
    fast, slow = (us * 1e-6 for us in KERNEL_LAUNCH_US)
    return KERNELS_OUTSIDE_LAYERS * fast, launch_overhead_s(layers, slow)


def step_band(floor_s: float, layers: int) -> tuple[float, float]:
    """The band (s, low and high) a measured decode step of a ``layers``-layer model should land in, given
    its floor ``floor_s`` (s, from :func:`decode_step_floor`): from the floor plus the low end of
    :func:`overhead_band_s` to the floor over ``DECODE_BANDWIDTH_SHARE`` (the share of the datasheet
    bandwidth a published batch-1 decode reached) plus its high end. A receipt outside it is news: below,
    a wrong floor; above, overhead or kernels the band does not count.

    Raises:
        ValueError: a non-positive floor or layer count.
    """
    from infercourse.registry import DECODE_BANDWIDTH_SHARE

    _positive("floor_s", floor_s)
    low, high = overhead_band_s(layers)
    return floor_s + low, floor_s / DECODE_BANDWIDTH_SHARE + high


# --- lesson 7B: mixture of experts ---


def expected_experts_touched(experts: int, top_k: int, tokens: int) -> float:
    """Expected number of distinct routed experts that ``tokens`` tokens reach in one MoE layer, when each token
    picks ``top_k`` of the ``experts`` uniformly at random and independently of the others: E (1 - (1 - k/E)^B).

    One token leaves a given expert out with probability 1 - k/E (it picks k of E); B independent tokens all
    leave it out with probability (1 - k/E)^B. Routing that prefers some experts (skew), or tokens that pick
    alike, touches fewer on average: the expected count sum_e 1 - (1 - p_e)^B over per-expert probabilities p_e
    that sum to k is largest when every p_e = k/E (it is concave in each p_e). So this is an upper bound.

    Raises:
        ValueError: E, k or B not a positive whole number, or k > E.
    """
    for name, value in (("experts", experts), ("top_k", top_k), ("tokens", tokens)):
        whole(name, value)
    if top_k > experts:
        raise ValueError(f"top_k {top_k} exceeds experts {experts}: a token picks k different experts")
    return experts * (1 - (1 - top_k / experts) ** tokens)


def experts_touched_sd(experts: int, top_k: int, tokens: int) -> float:
    """Standard deviation of the number of distinct experts ``tokens`` uniformly routed tokens reach in one layer
    (the spread around :func:`expected_experts_touched`): Var = E p0 (1 - p0) + E (E - 1) (p00 - p0^2), with
    p0 = (1 - k/E)^B the chance that no token picks a given expert and p00 = ((E - k)(E - k - 1) / (E (E - 1)))^B
    that none picks either of two given experts (the count is a sum of E dependent indicators).

    Raises:
        ValueError: as :func:`expected_experts_touched`.
    """
    expected_experts_touched(experts, top_k, tokens)  # checks the arguments
    p0 = (1 - top_k / experts) ** tokens
    p00 = ((experts - top_k) * (experts - top_k - 1) / (experts * (experts - 1))) ** tokens if experts > 1 else 0.0
    variance = experts * p0 * (1 - p0) + experts * (experts - 1) * (p00 - p0 * p0)
    return max(variance, 0.0) ** 0.5


def moe_step_params(config, experts_touched: float) -> tuple[float, float]:
    """``(read, multiplied)``: the weights one decode step of a mixture-of-experts model reads (a count), when
    ``experts_touched`` routed experts per MoE layer are reached, and those each token is multiplied by.

    read: attention, dense MLPs, shared experts, routers and the output head (every step needs them), plus
    ``experts_touched`` x one expert in each MoE layer. multiplied: the same with k experts per MoE layer
    (:func:`infercourse.transformer.moe_param_breakdown`'s active count, less the input embedding, a lookup).

    Raises:
        ValueError: ``experts_touched`` outside [k, E], or as :func:`~infercourse.transformer.moe_param_breakdown`.
    """
    from infercourse.transformer import moe_experts, moe_param_breakdown

    experts, top_k = moe_experts(config)
    _positive("experts_touched", experts_touched)
    if not top_k <= experts_touched <= experts:
        raise ValueError(f"experts_touched must lie in [k, E] = [{top_k}, {experts}], got {experts_touched!r}")
    parts = moe_param_breakdown(config)
    head = config["vocab_size"] * config["hidden_size"]
    always = parts["total"] - parts["routed_experts"] - parts["embedding"] - parts["lm_head"] + head
    per_layer = parts["moe_layers"] * parts["expert"]
    return always + experts_touched * per_layer, always + top_k * per_layer


def _moe_decode_work(
    config, context_len: int, batch: int, experts_touched: float | None, weight_bytes: float, kv_dtype_bytes: int
) -> tuple[float, float, float, float]:
    """(matmul FLOPs, matmul bytes, attention FLOPs, attention bytes) of one MoE decode step: the work
    :func:`moe_decode_kernel_floors` prices and :func:`moe_decode_demand` divides by a time."""
    from infercourse.transformer import attention_flops_per_token, kv_bytes_per_token, moe_experts

    _positive("batch", batch)
    _positive("weight_bytes", weight_bytes)
    whole("kv_dtype_bytes", kv_dtype_bytes)
    if experts_touched is None:
        experts_touched = expected_experts_touched(*moe_experts(config), batch)
    read, multiplied = moe_step_params(config, experts_touched)
    return (
        2 * multiplied * batch,
        read * weight_bytes,
        batch * attention_flops_per_token(config, context_len),
        batch * kv_bytes_per_token(config, kv_dtype_bytes) * context_len,
    )


def moe_decode_kernel_floors(
    gpu: GPUFacts,
    config,
    context_len: int,
    batch: int = 1,
    experts_touched: float | None = None,
    weight_bytes: float = 2,
    kv_dtype_bytes: int = 2,
) -> tuple[float, float]:
    """(weight matmuls, attention) floors (s) of one decode step of ``batch`` sequences of a mixture-of-experts
    model, as :func:`decode_kernel_floors` for a dense one, but the matmuls read only the experts the batch
    reaches: max(2 B M_active / peak, M_read b / bandwidth) with (M_read, M_active) = :func:`moe_step_params`.

    ``experts_touched`` per MoE layer defaults to :func:`expected_experts_touched` of the batch (uniform
    routing, the most a batch reaches on average); pass a measured count to predict for a receipt.

    Raises:
        ValueError: a non-positive length, batch or width, a config key missing, or an MLA config (attention).
    """
    linear_flops, linear_bytes, attention_flops, attention_bytes = _moe_decode_work(
        config, context_len, batch, experts_touched, weight_bytes, kv_dtype_bytes
    )
    return time_floor(gpu, linear_flops, linear_bytes), time_floor(gpu, attention_flops, attention_bytes)


def moe_decode_demand(
    gpu: GPUFacts, config, batch: int, context_len: int, step_s: float, what: str, experts_touched: float | None = None
) -> Demand:
    """What a BF16 mixture-of-experts decode step predicted at ``step_s`` seconds asks of the card: the FLOPs
    and bytes of :func:`moe_decode_kernel_floors` (same arguments) over ``step_s``.

    Raises:
        ValueError: as :func:`moe_decode_kernel_floors`, or a non-positive ``step_s``.
    """
    _positive("step_s", step_s)
    linear_flops, linear_bytes, attention_flops, attention_bytes = _moe_decode_work(
        config, context_len, batch, experts_touched, 2, 2
    )
    flops, bytes_moved = linear_flops + attention_flops, linear_bytes + attention_bytes
    return Demand(gpu, flops / step_s, bytes_moved / step_s, what)


def ep_all_to_all_bytes(tokens: int, top_k: int, ranks: int, hidden: int, dtype_bytes: float = 2) -> float:
    """Bytes (B) each of ``ranks`` GPUs sends in one MoE layer of a forward pass over ``tokens`` tokens under
    expert parallelism (attention data-parallel: each GPU holds tokens / T of them), dispatch plus combine:
    2 x (B / T) x k x (T - 1) / T x d x b. Each token's hidden vector (d values of b bytes) goes to each of its
    k experts, (T - 1) / T of which live on other GPUs when routing is uniform, and the expert's output comes
    back the same size. An upper bound for engines that send a token once to a GPU holding two of its
    experts (DeepEP); dispatch in FP8 (b = 1 one way) halves that half.

    Raises:
        ValueError: a count not a positive whole number, or a non-positive width.
    """
    for name, value in (("tokens", tokens), ("top_k", top_k), ("ranks", ranks), ("hidden", hidden)):
        whole(name, value)
    _positive("dtype_bytes", dtype_bytes)
    return 2 * tokens / ranks * top_k * (ranks - 1) / ranks * hidden * dtype_bytes
