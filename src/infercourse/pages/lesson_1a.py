"""Values of lesson 1A (the KV cache): bytes per token per layout, the RTX 4090's KV budget and capacity."""

from __future__ import annotations

from infercourse import fmt, memory, notation, registry, snippets, transformer
from infercourse.pages import lesson_values

P = lesson_values(__name__)

qwen = registry.model(registry.COURSE_MODEL)
cfg = P.add("cfg", qwen.config, "record")
b_kv = P.add("b_kv", 2, "B/param")
kappa = P.add("kappa", transformer.kv_bytes_per_token(cfg, b_kv), "B/token")
kappa_fp8 = P.add("kappa_fp8", transformer.kv_bytes_per_token(cfg, 1), "B/token")
P.add("d_h", transformer.head_dim(cfg), "count")
wrong = P.add(
    "wrong", 2 * cfg["num_hidden_layers"] * cfg["num_attention_heads"] * transformer.head_dim(cfg) * b_kv, "B/token"
)
P.add("wrong_factor", wrong / kappa, "1")
P.add("gqa_factor", cfg["num_attention_heads"] / cfg["num_key_value_heads"], "1")

llama2 = P.add("llama2", registry.model("meta-llama/Llama-2-13b-hf"), "record")
kappa_llama2 = P.add("kappa_llama2", transformer.kv_bytes_per_token(llama2.config, b_kv), "B/token")
P.add("llama2_d_h", transformer.head_dim(llama2.config), "count")
P.add("llama2_factor", kappa_llama2 / kappa, "1")
qwen3 = P.add("qwen3", registry.model("Qwen/Qwen3-4B"), "record")
q3 = qwen3.config
P.add("q3_divided_head", q3["hidden_size"] // q3["num_attention_heads"], "count")
P.add("kappa_qwen3", transformer.kv_bytes_per_token(q3, b_kv), "B/token")
P.add(
    "kappa_qwen3_divided",
    2 * q3["num_hidden_layers"] * q3["num_key_value_heads"] * (q3["hidden_size"] // q3["num_attention_heads"]) * b_kv,
    "B/token",
)
mistral = P.add("mistral", registry.model("mistralai/Mistral-7B-v0.1"), "record")
ctx_4k, ctx_8k, ctx_32k = (P.add(f"ctx_{k}k", k * 1024, "tokens") for k in (4, 8, 32))  # the contexts compared
P.add("mistral_32k_windowed", transformer.kv_cache_bytes(mistral.config, ctx_32k, b_kv), "B")
P.add("mistral_32k_full", ctx_32k * transformer.kv_bytes_per_token(mistral.config, b_kv), "B")
ds = registry.model("deepseek-ai/DeepSeek-V3")
dsc = P.add("dsc", ds.config, "record")
kappa_ds = P.add("kappa_ds", transformer.kv_bytes_per_token(dsc, b_kv), "B/token")
P.add("ds_latent_width", dsc["kv_lora_rank"] + dsc["qk_rope_head_dim"], "count")
P.add("ds_key_width", dsc["qk_nope_head_dim"] + dsc["qk_rope_head_dim"], "count")
ds_mha = P.add(
    "ds_mha",
    dsc["num_hidden_layers"]
    * dsc["num_attention_heads"]
    * (dsc["qk_nope_head_dim"] + dsc["qk_rope_head_dim"] + dsc["v_head_dim"])
    * b_kv,
    "B/token",
)
P.add("ds_factor", ds_mha / kappa_ds, "1")


# The budget on the RTX 4090 at vLLM's defaults (the reserve is an assumption).
g4090 = P.add("g4090", registry.gpu("RTX 4090"), "record")
P.add("total_mib", registry.GPU_MEMORY_TOTAL_MIB["RTX 4090"], "count")
total = P.add("total", memory.device_total_bytes("RTX 4090"), "B")
u = P.add("u", registry.VLLM_DEFAULT_GPU_MEMORY_UTILIZATION, "1")
P.add("total_u", total * u, "B")
weights = P.add("weights", transformer.weight_bytes(cfg, 2), "B")
reserve = P.add("reserve", registry.VLLM_NON_KV_RESERVE_GIB * fmt.GIB, "B")
kv_budget = P.add("kv_budget", memory.kv_budget_bytes(total, weights, reserve, u), "B")
block = P.add("block", registry.VLLM_DEFAULT_BLOCK_SIZE, "tokens")
tokens = P.add("tokens", memory.kv_capacity_tokens(kv_budget, kappa, block), "tokens")
tokens_fp8 = P.add("tokens_fp8", memory.kv_capacity_tokens(kv_budget, kappa_fp8, block), "tokens")
P.add("conc_4k", memory.max_concurrency(tokens, ctx_4k), "1")
P.add("conc_8k", memory.max_concurrency(tokens, ctx_8k), "1")
P.add("conc_32k", memory.max_concurrency(tokens, ctx_32k), "1")
P.add("conc_fp8_8k", memory.max_concurrency(tokens_fp8, ctx_8k), "1")
P.add("full_fp8_8k", tokens_fp8 // ctx_8k, "sequences")
P.add("tokens_wrong", memory.kv_capacity_tokens(kv_budget, wrong, block), "tokens")
naive_total = g4090.memory_gb * 1e9
naive_tokens = P.add(
    "naive_tokens",
    memory.kv_capacity_tokens(memory.kv_budget_bytes(naive_total, weights, reserve, u), kappa, block),
    "tokens",
)
P.add("naive_loss", total - naive_total, "B")
P.add("naive_loss_u", (total - naive_total) * u, "B")
P.add("naive_short", 1 - naive_tokens / tokens, "1")
P.add("other_process_max", (1 - u) * total, "B")

max_model_len = P.add("lab_max_model_len", snippets.constant("labs/kv_capacity.py", "MAX_MODEL_LEN"), "tokens")
P.add(
    "longest_prompt", max_model_len - 1, "tokens"
)  # vLLM refuses prompt length == max_model_len (registry BEHAVIOURS)

SYMBOLS: list[notation.Symbol] = [
    "L",
    "h_kv",
    "h",
    "d_h",
    "b_kv",
    "S",
    "kappa",
    "r_kv",
    "d_rope",
    "S_w",
    "L_w",
    "D",
    "u",
    "W",
    "A",
]
P.symbols(SYMBOLS)

P.facts(
    "model-qwen-qwen3-4b",
    "model-meta-llama-llama-2-13b-hf",
    "model-mistralai-mistral-7b-v0-1",
    "model-deepseek-ai-deepseek-v3",
    "gpu-memory-total-rtx-4090",
    "vllm-gpu-memory-utilization",
    "vllm-block-size",
    "vllm-non-kv-reserve",
    "vllm-free-memory-check",
    "vllm-prompt-leaves-one-token",
)
