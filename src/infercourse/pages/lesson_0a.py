"""Values of lesson 0A (prefill and decode): intensities, ridge points, the decode floor, AWQ."""

from __future__ import annotations

from infercourse import fmt, notation, registry, roofline, snippets, transformer
from infercourse.pages import gpu_rows, lesson_values

P = lesson_values(__name__)

qwen = registry.model(registry.COURSE_MODEL)
cfg = P.add("cfg", qwen.config, "record")
N = transformer.param_count(cfg)
M = roofline.matmul_params(cfg)
b = 2
b_kv = P.add("b_kv", 2, "B/param")
d_h = transformer.head_dim(cfg)
kappa = P.add("kappa", transformer.kv_bytes_per_token(cfg, b_kv), "B/token")
g4090 = P.add("g4090", registry.gpu("RTX 4090"), "record")
gh200 = P.add("gh200", registry.gpu("H200"), "record")
P.add("gpu_rows", gpu_rows([g4090, gh200]), "record")
ridge4090 = P.add("ridge4090", roofline.ridge_point(g4090), "FLOP/B")
ridgeh200 = roofline.ridge_point(gh200)
P.add("h200_peak_x", gh200.bf16_dense_tflops / g4090.bf16_dense_tflops, "1")
P.add("h200_bw_x", gh200.bandwidth_gb_s / g4090.bandwidth_gb_s, "1")
u = registry.VLLM_DEFAULT_GPU_MEMORY_UTILIZATION

# Section 3: prefill and decode intensity under the 2N model (attention FLOPs left out), at these contexts.
_CONTEXTS = {"short": 128, "1k": 1024, "8k": 8192, "32k": 32768}
crossover = P.add("crossover", N * b / kappa, "tokens")
P.add("crossover_over_window", crossover / cfg["max_position_embeddings"], "1")
ceiling = P.add("two_over_b", 2 / b, "FLOP/B")
ctx_short, ctx_1k, ctx_8k, ctx_32k = (P.add(f"ctx_{k}", n, "tokens") for k, n in _CONTEXTS.items())
dec1k = P.add("dec1k", roofline.decode_intensity(N, kappa, ctx_1k, 1, b), "FLOP/B")
P.add("dec1k_share_4090", dec1k / ridge4090, "1")
P.add("dec1k_idle_4090", 1 - dec1k / ridge4090, "1")
P.add("dec1k_idle_h200", 1 - dec1k / ridgeh200, "1")
P.add("dec1k_below_4090", ridge4090 / dec1k, "1")
P.add("prefill_cross_4090", ridge4090 * b / 2, "tokens")
P.add("prefill_cross_h200", ridgeh200 * b / 2, "tokens")


def _decode_intensity_with_attention(context: int) -> float:
    """(2N + 4 L h d_h S) / (N b + kappa S): section 3's decode intensity with attention's products counted."""
    return (2 * N + transformer.attention_flops_per_token(cfg, context)) / (N * b + kappa * context)


P.add("dec_att_1k", _decode_intensity_with_attention(ctx_1k), "FLOP/B")
P.add("dec_att_8k", _decode_intensity_with_attention(ctx_8k), "FLOP/B")
P.add("dec_att_32k", _decode_intensity_with_attention(ctx_32k), "FLOP/B")

# The decode step's floor: the matmul weights (all but the embedding table) over the bandwidth.
matmul_bytes = P.add("matmul_bytes", M * b, "B")
all_weight_bytes = P.add("weight_bytes", transformer.weight_bytes(cfg, b), "B")
tpot_floor_1 = P.add("tpot_floor_1", roofline.decode_step_floor(g4090, cfg, 1), "s")
P.add_band("tpot_band", roofline.step_band(tpot_floor_1, cfg["num_hidden_layers"]), "s")  # where a step lands
P.add("all_weights_time", all_weight_bytes / (g4090.bandwidth_gb_s * 1e9), "s")
long_prompt = P.add("long_prompt", 4000, "tokens")  # problem 3's request: this prompt and 50 output tokens
P.add("prefill_floor_4000", roofline.prefill_floor(g4090, cfg, long_prompt), "s")
P.add("decode_floor_4025", roofline.decode_step_floor(g4090, cfg, long_prompt + 25), "s")  # mean context of 50 steps

# AWQ 4-bit (the lab's other model).
awq_group = P.add("awq_group", registry.AWQ_GROUP_SIZE, "count")
awq = P.add("awq", transformer.awq_weight_bytes(cfg, awq_group), "B")
b_awq = P.add("b_awq", awq / N, "B/param")
P.add("awq_ceiling", 2 / b_awq, "FLOP/B")
P.add("awq_crossover", awq / kappa, "tokens")

# The lab: vLLM refuses to start unless one request of max_model_len tokens fits in the cache, so
# the box's VRAM is computed for max_model_len tokens of cache, not for the grid's longest request.


P.add("lab_max_model_len", snippets.constant("labs/phases.py", "MAX_MODEL_LEN"), "tokens")
grid = snippets.constant("labs/phases.py", "GRID")
P.add("lab_longest_request", max(p + o for p, o in grid), "tokens")
short_prompt = min(p for p, _ in grid)


def _listed(numbers) -> str:
    """``[128, 1024, 4096]`` -> ``"128, 1,024 and 4,096"``."""
    words = [f"{n:,}" for n in sorted(numbers)]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


fixed_output = max(
    set(o for _, o in grid), key=lambda o: sum(1 for _, x in grid if x == o)
)  # the output most rows share
P.add("lab_prompts", _listed({p for p, o in grid if o == fixed_output}), "text")
P.add("lab_fixed_output", fixed_output, "tokens")
P.add("lab_outputs", _listed({o for p, o in grid if p == short_prompt}), "text")
P.add("lab_short_prompt", short_prompt, "tokens")

SYMBOLS: list[notation.Symbol] = [
    (
        "N",
        f"For {registry.COURSE_MODEL}, derived from its `config.json`: {fmt.count(N)} (embedding and output "
        "head are separate matrices; [lesson 0C](0c-transformer.md#principle) derives the count module by module).",
    ),
    ("b", f"Here {b}, BF16."),
    ("b_kv", f"Here {b_kv}, BF16."),
    (
        "kappa",
        "\\(\\kappa = 2 \\cdot L \\cdot h_{\\text{kv}} \\cdot d_h \\cdot b_{\\text{kv}}\\): keys and values (2) "
        f"for every layer and KV head. Here {fmt.count(kappa)} B.",
    ),
    ("L", f"Here {cfg['num_hidden_layers']}."),
    ("h", f"Here {cfg['num_attention_heads']}."),
    ("h_kv", f"Here {cfg['num_key_value_heads']}: the *KV* heads, not the attention heads."),
    ("d_h", f"Here {transformer.head_dim(cfg)}."),
    "S",
    "I",
    ("M", "[Lesson 0C](0c-transformer.md#flops) counts it."),
    "B",
    "i",
    "Q",
    "K",
    "Vmat",
    "Pmat",
]
P.symbols(SYMBOLS)

P.facts(
    "gpu-h200",
    "vllm-gpu-memory-utilization",
    "awq-group-size",
    "vllm-prompt-leaves-one-token",
)

# --- figures: the snippets' own plot functions, drawn at build time ---
_kv_growth = snippets.load("lesson_0a/kv_growth.py")
_intensity = snippets.load("lesson_0a/phase_intensity.py")
P.figure("fig_kv_growth", _kv_growth.plot)
P.figure(
    "fig_intensity",
    lambda ax: _intensity.plot(ax, _intensity.Model(_intensity.PARAMS, _intensity.KV_BYTES_PER_TOKEN)),
    figsize=(7, 4.2),
)
