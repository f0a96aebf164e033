"""Values of lesson 0C (the transformer, the infra view): parameter counts, FLOPs per token, weight bytes."""

from __future__ import annotations

from infercourse import fmt, memory, notation, registry, roofline, transformer
from infercourse.pages import lesson_values

P = lesson_values(__name__)

qwen = P.add("qwen", registry.model(registry.COURSE_MODEL), "record")
cfg = qwen.config
parts = P.add("parts", transformer.param_breakdown(cfg), "record")
N = P.add("N", transformer.param_count(cfg), "params")
d = P.add("d", cfg["hidden_size"], "count")
L = P.add("L", cfg["num_hidden_layers"], "count")
V = cfg["vocab_size"]
f = cfg["intermediate_size"]
h = P.add("h", cfg["num_attention_heads"], "count")
h_kv = cfg["num_key_value_heads"]
d_h = P.add("d_h", transformer.head_dim(cfg), "count")
tied = 1 if cfg["tie_word_embeddings"] else 0
P.add("group_share", h // h_kv, "count")
P.add("q_width", h * d_h, "count")
P.add("kv_width", h_kv * d_h, "count")
P.add("attention_per_layer", parts["attention"] // L, "params")
P.add("no_embed_head", N - parts["embedding"] - parts["lm_head"], "params")
P.add("mlp_share", parts["mlp"] / N, "1")
P.add("embed_head_share", (parts["embedding"] + parts["lm_head"]) / N, "1")

# FLOPs per token.
M = P.add("M", roofline.matmul_params(cfg), "params")
H = P.add("H", V * d, "params")
two_m = P.add("two_M", 2 * M, "FLOP")
P.add("decode_overcount", H / N, "1")
P.add("prefill_overcount_of_2n", 2 * H / N, "1")
P.add("prefill_overcount_of_exact", 2 * H / (N - 2 * H), "1")
ctx = P.add("ctx", 8192, "tokens")
att8k = P.add("att8k", transformer.attention_flops_per_token(cfg, ctx), "FLOP")
P.add("att8k_share", att8k / two_m, "1")
P.add(
    "attention_rows",
    [
        {
            "c": c,
            "flops": transformer.attention_flops_per_token(cfg, c),
            "share": transformer.attention_flops_per_token(cfg, c) / two_m,
        }
        for c in (1024, 8192, cfg["max_position_embeddings"])
    ],
    "record",
)
window = P.add("window", cfg["max_position_embeddings"], "tokens")
P.add("att_window_share", transformer.attention_flops_per_token(cfg, window) / two_m, "1")
q3 = P.add("q3", registry.model("Qwen/Qwen3-4B").config, "record")
P.add("q3_d_h", transformer.head_dim(q3), "count")
P.add("q3_divided_head", q3["hidden_size"] // q3["num_attention_heads"], "count")
P.add("q3_q_width", q3["num_attention_heads"] * transformer.head_dim(q3), "count")
P.add("q3_kv_width", q3["num_key_value_heads"] * transformer.head_dim(q3), "count")

# Weight bytes.
lin = P.add("lin", transformer.linear_weight_count(cfg), "params")
P.add("not_lin", N - lin, "params")
awq_group = P.add("awq_group", registry.AWQ_GROUP_SIZE, "count")
awq = P.add("awq", transformer.awq_weight_bytes(cfg, awq_group), "B")
awq_per_weight = P.add("awq_per_weight", 0.5 + 2.5 / awq_group, "B/param")
P.add("awq_group_overhead", awq_per_weight - 0.5, "B/param")
P.add("b_awq", awq / N, "B/param")
weights = P.add("weights", transformer.weight_bytes(cfg, 2), "B")
P.add("fp8_weights", transformer.fp8_weight_bytes(cfg), "B")
P.add("half_n", N / 2, "B")
models = [registry.COURSE_MODEL, "Qwen/Qwen2.5-0.5B-Instruct", "meta-llama/Meta-Llama-3-8B", "Qwen/Qwen3-4B"]


def _model_row(name: str) -> dict:
    facts = registry.model(name)
    c = facts.config
    return {
        "name": name,
        "N": transformer.param_count(c),
        "bf16": transformer.weight_bytes(c, 2),
        "fp8": transformer.fp8_weight_bytes(c),
        "awq": transformer.awq_weight_bytes(c, awq_group),
        "config": c,
        "d_h": transformer.head_dim(c),
        "explicit_head": "head_dim" in c,
        "tied": str(c["tie_word_embeddings"]).lower(),
        "source": facts.source,
        "card": facts.card_params,
    }


P.add("model_rows", [_model_row(name) for name in models], "record")
small = registry.model("Qwen/Qwen2.5-0.5B-Instruct").config
small_embedding = transformer.param_breakdown(small)["embedding"]
P.add("small_head", small_embedding, "params")
P.add("small_head_share", small_embedding / transformer.param_count(small), "1")

# The lab card's memory, vLLM's budget on it, and the decode floor in BF16 and AWQ.
g = P.add("g", registry.gpu(registry.LAB_GPU), "record")
P.add("total_mib", registry.GPU_MEMORY_TOTAL_MIB[registry.LAB_GPU], "count")
total = P.add("total", memory.device_total_bytes(registry.LAB_GPU), "B")
u = P.add("u", registry.VLLM_DEFAULT_GPU_MEMORY_UTILIZATION, "1")
budget = P.add("budget", total * u, "B")
reserve = P.add("reserve", registry.VLLM_NON_KV_RESERVE_GIB * fmt.GIB, "B")
P.add("left_bf16", budget - weights, "B")
P.add("left_awq", budget - awq, "B")
P.add("kv_bf16", budget - weights - reserve, "B")
P.add("kv_awq", budget - awq - reserve, "B")
P.add("floor_bf16_1k", roofline.decode_step_floor(g, cfg, 1024), "s")
P.add("floor_awq_1k", roofline.decode_step_floor(g, cfg, 1024, weight_bytes=(awq - 2 * parts["embedding"]) / M), "s")

SYMBOLS: list[notation.Symbol] = [
    ("V", f"Here {fmt.count(V)}."),
    ("d", f"Here {fmt.count(d)}."),
    ("L", f"Here {L}."),
    ("h", f"Here {h}."),
    ("h_kv", f"Here {h_kv}."),
    ("d_h", f"Here {d_h}."),
    ("f", f"Here {fmt.count(cfg['intermediate_size'])}."),
    ("tied", f"Here {1 if cfg['tie_word_embeddings'] else 0}."),
    "M",
    "H",
    "F",
    "c",
    "S",
    "G",
]
P.symbols(SYMBOLS)

P.facts(
    *[registry.model_fact_id(name) + suffix for name in models for suffix in ("", "-card")],
    registry.gpu_fact_id(registry.LAB_GPU),
    "gpu-memory-total-rtx-4090",
    "vllm-gpu-memory-utilization",
    "vllm-non-kv-reserve",
    "awq-group-size",
)
