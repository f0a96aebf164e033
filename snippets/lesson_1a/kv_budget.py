"""KV-cache bytes per token for MHA, GQA, MQA and MLA models, and how many tokens fit on a 24 GB card.

Pure Python, no GPU, no network. Run it: `python kv_budget.py` prints two Markdown tables.

Sizes: B = bytes; GB = 10^9 B; GiB = 2^30 B (what CUDA, nvidia-smi and vLLM's logs use).
"""

# Config values (keys spelled as in each model's config.json; sources in the course registry).
MODELS = {
    "Qwen/Qwen2.5-7B-Instruct": {
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "hidden_size": 3584,
    },  # config.json (checked)
    "Qwen/Qwen3-4B": {
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_size": 2560,
        "head_dim": 128,
    },  # explicit head_dim: not 2560 / 32 = 80
    "meta-llama/Meta-Llama-3-8B": {
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_size": 4096,
    },  # recalled from the public config
    "meta-llama/Llama-2-13b-hf": {
        "num_hidden_layers": 40,
        "num_attention_heads": 40,
        "num_key_value_heads": 40,
        "hidden_size": 5120,
    },  # MHA; recalled from the public config
    "mistralai/Mistral-7B-v0.1": {
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_size": 4096,
        "sliding_window": 4096,
    },  # recalled, secondary
    "deepseek-ai/DeepSeek-V3": {
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "hidden_size": 7168,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
    },  # MLA
}
CONTEXTS = (4096, 8192, 32768)  # tokens of context per sequence, for the "one sequence" columns

# --8<-- [start:formulas]
# The capacity example: Qwen2.5-7B-Instruct in bf16 on an RTX 4090 with vLLM 0.26.0's defaults.
DEVICE_TOTAL_MIB = 24564  # RTX 4090 as CUDA / nvidia-smi report it (secondary; a lab receipt records it)
GPU_MEMORY_UTILIZATION = 0.92  # vLLM 0.26.0 default of LLM(gpu_memory_utilization=...)
WEIGHT_BYTES = 15_231_233_024  # 7,615,616,512 parameters * 2 B (bf16)
RESERVE_GIB = 2.0  # ASSUMPTION: activations + non-torch memory + CUDA graphs; lab 1A measures it
BLOCK_SIZE = 16  # tokens per vLLM KV block (the cache is allocated in whole blocks)
CAPACITY_CONTEXTS = (4096, 8192, 32768)


def head_dim(cfg):
    """Per-head size: head_dim where the config sets it, else hidden_size / num_attention_heads."""
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def attention_kind(cfg):
    if "kv_lora_rank" in cfg:
        return "MLA"
    kv, heads = cfg["num_key_value_heads"], cfg["num_attention_heads"]
    return "MHA" if kv == heads else ("MQA" if kv == 1 else "GQA")


def kv_bytes_per_token(cfg, dtype_bytes=2):
    """kappa in B/token: 2 * L * h_kv * d_h * b_kv, or L * (kv_lora_rank + qk_rope_head_dim) * b_kv for MLA."""
    if dtype_bytes <= 0:
        raise ValueError(f"dtype_bytes must be positive, got {dtype_bytes!r}")
    layers = cfg["num_hidden_layers"]
    if "kv_lora_rank" in cfg:  # MLA caches one compressed latent + one RoPE key per layer
        return layers * (cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]) * dtype_bytes
    return 2 * layers * cfg["num_key_value_heads"] * head_dim(cfg) * dtype_bytes


def cache_bytes(cfg, tokens, dtype_bytes=2):
    """One sequence's cache in B; a sliding-window model keeps at most `sliding_window` tokens per layer."""
    if tokens < 0:
        raise ValueError(f"tokens must be >= 0, got {tokens!r}")
    kept = min(tokens, cfg["sliding_window"]) if "sliding_window" in cfg else tokens
    return kept * kv_bytes_per_token(cfg, dtype_bytes)


def print_kv_table(models=MODELS, contexts=CONTEXTS):
    """Markdown: kappa in bf16 and fp8, and one sequence's cache at each context, per model."""
    head = " | ".join(f"one sequence, {s:,} tokens (GB)" for s in contexts)
    print(f"| model | attention | what one layer caches per token | κ bf16 (B/token) | κ fp8 (B/token) | {head} |")
    print("|---|---|---|---:|---:|" + "---:|" * len(contexts))
    for name, cfg in models.items():
        if "kv_lora_rank" in cfg:
            per_layer = f"latent {cfg['kv_lora_rank']} + RoPE key {cfg['qk_rope_head_dim']}"
        else:
            per_layer = f"K and V: {cfg['num_key_value_heads']} heads × {head_dim(cfg)}"
        if "sliding_window" in cfg:
            per_layer += f" (window {cfg['sliding_window']:,})"
        sizes = " | ".join(f"{cache_bytes(cfg, s) / 1e9:.3f}" for s in contexts)
        print(
            f"| {name} | {attention_kind(cfg)} | {per_layer} | {kv_bytes_per_token(cfg):,} | "
            f"{kv_bytes_per_token(cfg, 1):,} | {sizes} |"
        )


def kv_capacity_tokens(kv_bytes, utilization=GPU_MEMORY_UTILIZATION, reserve_gib=RESERVE_GIB):
    """Tokens of cache that fit: (total * utilization - weights - reserve) / kappa, in whole blocks."""
    budget = DEVICE_TOTAL_MIB * 2**20 * utilization - WEIGHT_BYTES - reserve_gib * 2**30
    if budget <= 0:
        raise ValueError("the weights and the reserve leave nothing for the KV cache")
    return int(budget // (kv_bytes * BLOCK_SIZE)) * BLOCK_SIZE, budget


# --8<-- [end:formulas]


def print_capacity_table(cfg=MODELS["Qwen/Qwen2.5-7B-Instruct"], contexts=CAPACITY_CONTEXTS):
    """Markdown: tokens that fit and sequences at once, for a bf16 and an fp8 KV cache."""
    head = " | ".join(f"sequences at {s:,}" for s in contexts)
    print(f"| KV dtype | κ (B/token) | left for KV (GiB) | tokens that fit | {head} |")
    print("|---|---:|---:|---:|" + "---:|" * len(contexts))
    for label, b in (("bf16", 2), ("fp8", 1)):
        kappa = kv_bytes_per_token(cfg, b)
        tokens, budget = kv_capacity_tokens(kappa)
        seqs = " | ".join(f"{tokens / s:.2f}" for s in contexts)
        print(f"| {label} | {kappa:,} | {budget / 2**30:.2f} | {tokens:,} | {seqs} |")


if __name__ == "__main__":
    print_kv_table()
    print()
    print_capacity_table()
