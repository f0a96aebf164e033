"""Values of lesson 3A (weight-only quantisation and FP8): bytes per weight, weight floors, B*, KV capacity.

Every number the page shows is bound here once, with its unit, from the registry and the formula
modules; the page only looks the names up and formats them. The two figures are drawn by
:func:`_floors_figure` and :func:`_memory_figure` from the same values (``fig_floors``, ``fig_memory``).
"""

from __future__ import annotations

import math

from infercourse import fmt, memory, registry, roofline, snippets, transformer
from infercourse.pages import fact_link, lesson_values

P = lesson_values(__name__)

cfg = P.add("cfg", registry.model(registry.COURSE_MODEL).config, "record")
N = P.add("N", transformer.param_count(cfg), "params")
N_q = P.add("N_q", transformer.linear_weight_count(cfg), "params")
P.add("N_rest", N - N_q, "params")
P.add("q_share", N_q / N, "1")
G = P.add("G", registry.AWQ_GROUP_SIZE, "count")

# Bytes per quantised weight (B/param): AWQ packs 4 bits, plus per group a 16-bit scale and a 4-bit zero.
P.add("b_awq_value", 4 / 8, "B/param")  # a 4-bit weight
P.add("b_awq_scale", 2 / G, "B/param")
P.add("b_awq_zero", 0.5 / G, "B/param")
b_awq = P.add("b_awq", 0.5 + 2.5 / G, "B/param")
P.add("awq_overhead", (2.5 / G) / 0.5, "1")

# Weight bytes per format (B), and the ratios the field rounds to "2x" and "4x".
W_bf16 = P.add("W_bf16", transformer.weight_bytes(cfg, 2), "B")
W_fp8 = P.add("W_fp8", transformer.fp8_weight_bytes(cfg), "B")
W_awq = P.add("W_awq", transformer.awq_weight_bytes(cfg, G), "B")
P.add("ratio_fp8", W_bf16 / W_fp8, "1")
P.add("ratio_awq", W_bf16 / W_awq, "1")
P.add("ratio_awq_linear", 2 / b_awq, "1")
P.add("rest_share_awq", 2 * (N - N_q) / W_awq, "1")
fp8_scales = P.add("fp8_scales", 4 * cfg["num_hidden_layers"], "count")  # qkv, o, gate_up, down per layer
P.add("fp8_scale_bytes", fp8_scales * 4, "B")  # one float32 each

# What one decode step reads for its matmuls: every weight but the input embedding (a row lookup).
M = P.add("M", roofline.matmul_params(cfg), "params")
embedding_bytes = 2 * transformer.param_breakdown(cfg)["embedding"]
FORMATS = ("bf16", "fp8", "awq")
weights = {"bf16": W_bf16, "fp8": W_fp8, "awq": W_awq}
matmul_bytes = {f: weights[f] - embedding_bytes for f in FORMATS}
b_bar = {f: matmul_bytes[f] / M for f in FORMATS}
P.add("mb_bf16", matmul_bytes["bf16"], "B")
P.add("mb_fp8", matmul_bytes["fp8"], "B")
P.add("mb_awq", matmul_bytes["awq"], "B")
P.add("bbar_fp8", b_bar["fp8"], "B/param")
P.add("bbar_awq", b_bar["awq"], "B/param")

g4090 = P.add("g4090", registry.gpu("RTX 4090"), "record")
gh200 = P.add("gh200", registry.gpu("H200"), "record")
ga100 = P.add("ga100", registry.gpu("A100"), "record")
P_fp8 = P.add("P_fp8", registry.fp8_dense_tflops("RTX 4090"), "text")  # TFLOP/s, a registry figure shown as is
P.add("P_fp8_h200", registry.fp8_dense_tflops("H200"), "text")
R = P.add("R", roofline.ridge_point(g4090), "FLOP/B")
R_fp8 = P.add("R_fp8", roofline.ridge_point(g4090, P_fp8), "FLOP/B")


def weight_floor(gpu: registry.GPUFacts, fmt_name: str) -> float:
    """The matmuls' floor at batch 1 (s): their bytes over the bandwidth (their FLOPs take far less)."""
    return roofline.time_floor(gpu, 2 * M, matmul_bytes[fmt_name])


def bstar(gpu_key: str, fmt_name: str) -> float:
    """B* of a format on a GPU: R b_bar / 2, at the FP8 peak for W8A8 FP8, at the BF16 peak otherwise."""
    peak = registry.fp8_dense_tflops(gpu_key) if fmt_name == "fp8" else None
    return roofline.compute_bound_batch(registry.gpu(gpu_key), b_bar[fmt_name], peak)


floor = {f: weight_floor(g4090, f) for f in FORMATS}
P.add("floor_bf16", floor["bf16"], "s")
P.add("floor_fp8", floor["fp8"], "s")
P.add("floor_awq", floor["awq"], "s")
P.add("speedup_awq", floor["bf16"] / floor["awq"], "1")
P.add("machete_extra", transformer.awq_weight_bytes(cfg, registry.AWQ_GROUP_SIZE, 2) / W_awq - 1, "1")
awq_bf16_ms, awq_ms = P.add("awq_measured_ms", registry.AWQ_MARLIN_L4_STEP_MS, "record")  # published, L4
P.add("speedup_awq_measured", awq_bf16_ms / awq_ms, "1")
P.add("speedup_fp8", floor["bf16"] / floor["fp8"], "1")
_linear = transformer.linear_weight_count(cfg)


def _rate_demand(fmt_name: str) -> roofline.Demand:
    """What one token per floor asks of the RTX 4090 (B = 1, a one-token context: the weights alone)."""
    per_linear = (matmul_bytes[fmt_name] - 2 * (M - _linear)) / _linear  # the rest of M stays 16-bit
    what = f"{fmt_name} decode at B = 1, one token per {floor[fmt_name] * 1e3:.2f} ms"
    return roofline.decode_demand(g4090, cfg, 1, 1, floor[fmt_name], what, weight_bytes=per_linear)


P.add("rate_bf16", 1 / floor["bf16"], "tokens/s", _rate_demand("bf16"))
P.add("rate_awq", 1 / floor["awq"], "tokens/s", _rate_demand("awq"))
P.add("floor_awq_h200", weight_floor(gh200, "awq"), "s")
P.add("floor_bf16_h200", weight_floor(gh200, "bf16"), "s")
P.add("floor_fp8_h200", weight_floor(gh200, "fp8"), "s")

bs = {f: bstar("RTX 4090", f) for f in FORMATS}
P.add("bstar_bf16", math.ceil(bs["bf16"]), "sequences")
P.add("bstar_fp8", math.ceil(bs["fp8"]), "sequences")
P.add("bstar_awq", math.ceil(bs["awq"]), "sequences")
P.add("bstar_awq_fraction", bs["awq"] / bs["bf16"], "1")
P.add("bstar_fp8_w8a16", math.ceil(roofline.compute_bound_batch(g4090, b_bar["fp8"])), "sequences")
P.add("bstar_awq_h200", math.ceil(bstar("H200", "awq")), "sequences")
P.add("bstar_fp8_h200", math.ceil(bstar("H200", "fp8")), "sequences")

# A batch of 128 on the RTX 4090: past AWQ's B*, short of BF16's; the matmuls' floors per step.
big_batch = P.add("big_batch", 128, "sequences")


def matmul_floor(fmt_name: str, batch: int, gpu: registry.GPUFacts = g4090) -> float:
    """Floor (s) of one decode step's matmuls for ``batch`` sequences in a format: max(FLOPs / peak, bytes / beta)."""
    return roofline.time_floor(gpu, 2 * M * batch, matmul_bytes[fmt_name], P_fp8 if fmt_name == "fp8" else None)


P.add("big_bf16", matmul_floor("bf16", big_batch), "s")
P.add("big_fp8", matmul_floor("fp8", big_batch), "s")
P.add("big_awq", matmul_floor("awq", big_batch), "s")
P.add("big_edge_awq", matmul_floor("bf16", big_batch) / matmul_floor("awq", big_batch), "1")

# Prefill (TTFT) of a 2,048-token prompt on the RTX 4090: compute-bound, so what counts is the peak the
# matmuls run at, not their bytes (lesson 0A): W4A16 multiplies in BF16, W8A8 FP8 at the FP8 peak.
prompt_2k = P.add("prompt_2k", 2048, "tokens")


def ttft_floor(fmt_name: str) -> float:
    """TTFT floor (s) of the 2,048-token prompt on the RTX 4090 in a format (:func:`roofline.prefill_floor`)."""
    peak = P_fp8 if fmt_name == "fp8" else None
    return roofline.prefill_floor(g4090, cfg, prompt_2k, b_bar[fmt_name], peak_tflops=peak)


P.add("ttft_bf16", ttft_floor("bf16"), "s")
P.add("ttft_awq", ttft_floor("awq"), "s")
P.add("ttft_fp8", ttft_floor("fp8"), "s")
P.add("ttft_fp8_gain", ttft_floor("bf16") / ttft_floor("fp8"), "1")

# Freed memory becomes KV cache on the 24 GB card (lesson 1A's budget, same assumed reserve).
kappa = P.add("kappa", transformer.kv_bytes_per_token(cfg, 2), "B/token")
D = P.add("D", memory.device_total_bytes("RTX 4090"), "B")
u = P.add("u", registry.VLLM_DEFAULT_GPU_MEMORY_UTILIZATION, "1")
reserve = P.add("reserve", registry.VLLM_NON_KV_RESERVE_GIB * fmt.GIB, "B")
budget = {f: memory.kv_budget_bytes(D, weights[f], reserve, u) for f in FORMATS}
tokens = {f: memory.kv_capacity_tokens(budget[f], kappa) for f in FORMATS}
for f in FORMATS:
    P.add(f"kv_{f}", tokens[f], "tokens")
    P.add(f"budget_{f}", budget[f], "B")
P.add("freed_awq", W_bf16 - W_awq, "B")
P.add("kv_gain_awq", tokens["awq"] / tokens["bf16"], "1")
ctx = P.add("ctx", 8192, "tokens")
P.add("seqs_bf16", memory.max_sequences(budget["bf16"], kappa, ctx), "sequences")
P.add("seqs_fp8", memory.max_sequences(budget["fp8"], kappa, ctx), "sequences")
P.add("seqs_awq", memory.max_sequences(budget["awq"], kappa, ctx), "sequences")
P.add("seqs_awq_fp8kv", memory.max_sequences(budget["awq"], transformer.kv_bytes_per_token(cfg, 1), ctx), "sequences")

# The lab (snippets/labs/quant_nll.py).
P.add("lab_awq_model", snippets.constant("labs/quant_nll.py", "AWQ_MODEL"), "text")
rent = registry.AUTODL_RTX_4090
P.add("awq_download_min", math.ceil(W_awq / (rent.download_mb_s * 1e6) / 60), "count")  # whole minutes
P.add("lab_max_model_len", snippets.constant("labs/quant_nll.py", "MAX_MODEL_LEN"), "tokens")
P.add("lab_top_k", snippets.constant("labs/quant_nll.py", "TOP_K"), "count")
step_batches = snippets.constant("labs/quant_nll.py", "STEP_BATCHES")
step_prompt = P.add("step_prompt", snippets.constant("labs/quant_nll.py", "STEP_PROMPT_LEN"), "tokens")
step_output = P.add("step_output", snippets.constant("labs/quant_nll.py", "STEP_OUTPUT_LEN"), "tokens")
P.add("step_batches", ", ".join(map(str, step_batches)), "text")
step_small = P.add("step_small", step_batches[0], "sequences")
step_large = P.add("step_large", step_batches[-1], "sequences")


def step_floor(fmt_name: str, batch: int) -> float:
    """Floor (s) of a whole decode step of the lab's sweep: matmuls and attention at the sweep's mean context."""
    peak = P_fp8 if fmt_name == "fp8" else None
    return roofline.decode_step_floor(
        g4090, cfg, step_prompt + step_output // 2, batch, b_bar[fmt_name], peak_tflops=peak
    )


P.add("step_bf16_small", step_floor("bf16", step_small), "s")
P.add("step_awq_small", step_floor("awq", step_small), "s")
P.add("step_bf16_large", step_floor("bf16", step_large), "s")
P.add("step_awq_large", step_floor("awq", step_large), "s")
# the whole step at batch 1 adds the KV reads of the sweep's context to the matmuls' floor of section 3
P.add(
    "step_kv_small",
    step_small
    * transformer.kv_bytes_per_token(cfg, 2)
    * (step_prompt + step_output // 2)
    / (g4090.bandwidth_gb_s * 1e9),
    "s",
)

SYMBOLS: list[str | tuple[str, str]] = [
    ("N", f"Here {fmt.count(N)}."),
    ("N_q", f"Here {fmt.count(N_q)}."),
    "b",
    "G",
    "M",
    "b_bar",
    "P",
    "P_fp8",
    "beta",
    "R",
    "R_fp8",
    "B",
    "Bstar",
    "W",
    "D",
    "u",
    "A",
    "kappa",
    "S",
    "y",
    "ell",
]
P.symbols(SYMBOLS)

P.facts(
    "awq-group-size",
    "gpu-rtx-4090-fp8",
    "gpu-h200-fp8",
    "gpu-h100-fp8",
    "vllm-fp8-linear-layers-only",
    "vllm-online-fp8-per-tensor",
    "vllm-fp8-without-fp8-cores",
    "vllm-bf16-gemm",
    "vllm-awq-kernel",
    "awq-marlin-batch1-measured",
    "vllm-fp8-kernel",
    "vllm-prompt-logprobs",
    extra=(
        {
            "what": f"KV budget on the {g4090.name}",
            "value": f"u = {u}, reserve {fmt.gib(reserve, 0)}",
            "source": "[lesson 1A](1a-kv-cache.md#principle) (the reserve is an **assumption**: "
            + fact_link("vllm-non-kv-reserve")
            + ")",
        },
    ),
)


def _floors_plot(ax) -> None:
    """The matmuls' floor per decode step against the batch on the RTX 4090, one line per format."""
    batches = list(range(1, 513))
    for fmt_name, label in (("bf16", "BF16 (W16A16)"), ("fp8", "FP8 (W8A8)"), ("awq", "AWQ 4-bit (W4A16)")):
        ax.plot(
            batches,
            [matmul_floor(fmt_name, b) * 1e3 for b in batches],
            label=f"{label}: compute-bound from B = {math.ceil(bs[fmt_name])}",
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch B (sequences in one decode step)")
    ax.set_ylabel("matmul floor per step (ms)")
    ax.set_title(f"Decode matmuls' floor per step, {registry.COURSE_MODEL}, {g4090.name}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()


def _memory_plot(ax) -> None:
    """The 24 GB card's memory per format: weights, the assumed reserve, KV cache, and what u leaves unused."""
    names = [f"{label}\n{tokens[f]:,} KV tokens" for label, f in zip(("BF16", "FP8", "AWQ"), FORMATS, strict=True)]
    parts = [
        ("weights", [weights[f] for f in FORMATS]),
        ("reserve (assumed)", [reserve] * 3),
        ("KV cache", [budget[f] for f in FORMATS]),
        ("unused (1 - u)", [D * (1 - u)] * 3),
    ]
    left = [0.0, 0.0, 0.0]
    for label, values in parts:
        gib = [v / fmt.GIB for v in values]
        ax.barh(names, gib, left=left, label=label)
        left = [a + b for a, b in zip(left, gib, strict=True)]
    ax.set_xlabel(f"GiB of the {g4090.name}'s {D / fmt.GIB:.2f} GiB")
    ax.invert_yaxis()
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=4, fontsize=8)


P.figure("fig_floors", _floors_plot, figsize=(7, 4))
P.figure("fig_memory", _memory_plot, figsize=(7, 3.2))
