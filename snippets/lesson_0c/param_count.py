"""Parameter count of a decoder-only transformer, module by module, from its config.json.

Pure Python, no GPU, no network. Run it: `python param_count.py` prints one Markdown table per
model. To count another model, paste its config.json into CONFIGS (json.load gives the same dict).

Architectures covered: Qwen2 (q/k/v biases, which its config does not flag), Llama (no biases
unless `attention_bias`), Qwen3 (explicit `head_dim`, an RMSNorm on q and on k per head).
All three use RMSNorm (one weight vector, no bias) and a SwiGLU MLP (gate, up, down).
"""

# The config.json values the count needs, as published on Hugging Face (extra keys are harmless).
CONFIGS = {
    "Qwen/Qwen2.5-7B-Instruct": {
        "model_type": "qwen2",
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "vocab_size": 152064,
        "tie_word_embeddings": False,
        "max_position_embeddings": 32768,
        "rope_theta": 1000000.0,
        "torch_dtype": "bfloat16",
    },
    "Qwen/Qwen2.5-0.5B-Instruct": {
        "model_type": "qwen2",
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
        "max_position_embeddings": 32768,
        "torch_dtype": "bfloat16",
    },
    "meta-llama/Meta-Llama-3-8B": {
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "max_position_embeddings": 8192,
        "torch_dtype": "bfloat16",
    },
    "Qwen/Qwen3-4B": {
        "model_type": "qwen3",
        "hidden_size": 2560,
        "intermediate_size": 9728,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
        "attention_bias": False,
        "max_position_embeddings": 40960,
        "torch_dtype": "bfloat16",
    },
}


# --8<-- [start:count]
def modules(config):
    """Rows (module, shape as text, parameters per layer or None, total parameters) for one config."""
    d = config["hidden_size"]
    L = config["num_hidden_layers"]
    V = config["vocab_size"]
    ff = config["intermediate_size"]
    h = config["num_attention_heads"]
    h_kv = config["num_key_value_heads"]
    d_h = config.get("head_dim") or d // h  # Qwen3 sets head_dim; otherwise hidden / heads
    q_out, kv_out = h * d_h, h_kv * d_h  # width of Q, and of K (= of V)
    qwen2 = config["model_type"] == "qwen2"
    qkv_bias = qwen2 or config.get("attention_bias", False)
    qk_norm = config["model_type"] == "qwen3"

    rows = [("embedding", f"{V:,} × {d:,}", None, V * d)]
    per_layer = [
        ("q_proj", f"{d:,} × {q_out:,}", d * q_out),
        ("k_proj, v_proj", f"2 × {d:,} × {kv_out:,}", 2 * d * kv_out),
        ("o_proj", f"{q_out:,} × {d:,}", q_out * d),
    ]
    if qkv_bias:
        per_layer.append(("q, k, v biases", f"{q_out:,} + 2 × {kv_out:,}", q_out + 2 * kv_out))
    if qk_norm:
        per_layer.append(("q_norm, k_norm", f"2 × {d_h:,}", 2 * d_h))
    per_layer += [
        ("MLP gate, up, down", f"3 × {d:,} × {ff:,}", 3 * d * ff),
        ("two RMSNorms", f"2 × {d:,}", 2 * d),
    ]
    rows += [(name, shape, n, L * n) for name, shape, n in per_layer]
    rows.append(("final RMSNorm", f"{d:,}", None, d))
    tied = config.get("tie_word_embeddings", False)
    rows.append(("lm_head", "tied: the embedding matrix" if tied else f"{d:,} × {V:,}", None, 0 if tied else V * d))
    return rows


def param_count(config):
    """Total parameters N: the sum of the module rows."""
    return sum(total for *_, total in modules(config))


# --8<-- [end:count]


def print_table(name, config):
    """One Markdown table: each module's shape, its count per layer (decoder layers) and in all."""
    L = config["num_hidden_layers"]
    print(f"**{name}** ({L} decoder layers)\n")
    print(f"| module | shape | per layer | all {L} layers |")
    print("|---|---|---:|---:|")
    for module, shape, per_layer, total in modules(config):
        print(f"| {module} | {shape} | {'' if per_layer is None else f'{per_layer:,}'} | {total:,} |")
    print(f"| **total N** | | | **{param_count(config):,}** |\n")


if __name__ == "__main__":
    for model_name, model_config in CONFIGS.items():
        print_table(model_name, model_config)
