"""Sizes derived from a decoder-only transformer's ``config.json``.

Covers the dense architectures in the registry (Qwen2, Qwen3, Llama): RMSNorm, SwiGLU MLP
(gate, up, down), grouped-query attention. Every function takes the config as a mapping with
the keys spelled as in ``config.json``.
"""

from __future__ import annotations

from typing import Any, Mapping

BYTES_PER_DTYPE = {"float32": 4, "bfloat16": 2, "float16": 2, "fp8": 1}
"""Bytes per element of the dtypes the course uses."""

_ARCH_WITH_QKV_BIAS = {"qwen2"}  # Qwen2 always has q/k/v biases; its config has no flag for it
_ARCH_WITH_QK_NORM = {"qwen3"}  # Qwen3 applies an RMSNorm of size head_dim to q and to k


def _need(config: Mapping[str, Any], key: str) -> int:
    try:
        value = config[key]
    except KeyError:
        raise ValueError(f"config has no {key!r}; pass the model's config.json as a dict") from None
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"config[{key!r}] must be a positive integer, got {value!r}")
    return value


def head_dim(config: Mapping[str, Any]) -> int:
    """Per-head size d_h: ``head_dim`` where the config sets it, else hidden_size / num_attention_heads.

    Raises:
        ValueError: a required key is missing or not a positive integer, or hidden_size is not
            divisible by the number of heads.
    """
    if config.get("head_dim") is not None:
        return _need(config, "head_dim")
    hidden, heads = _need(config, "hidden_size"), _need(config, "num_attention_heads")
    if hidden % heads:
        raise ValueError(f"hidden_size {hidden} is not divisible by num_attention_heads {heads}; set head_dim")
    return hidden // heads


def param_breakdown(config: Mapping[str, Any]) -> dict[str, int]:
    """Parameter count per module, from a config.

    Returns:
        ``{"embedding", "attention", "mlp", "norms", "lm_head"}`` to counts (parameters, not
        bytes). ``attention``, ``mlp`` and ``norms`` are summed over all layers; ``norms``
        includes the final norm; ``lm_head`` is 0 when ``tie_word_embeddings`` is true.

    Raises:
        ValueError: a required key is missing or not a positive integer.
    """
    hidden = _need(config, "hidden_size")
    layers = _need(config, "num_hidden_layers")
    vocab = _need(config, "vocab_size")
    inter = _need(config, "intermediate_size")
    d_h = head_dim(config)
    q_out = _need(config, "num_attention_heads") * d_h
    kv_out = _need(config, "num_key_value_heads") * d_h
    arch = config.get("model_type")
    qkv_bias = arch in _ARCH_WITH_QKV_BIAS or bool(config.get("attention_bias", False))

    attention = hidden * q_out + 2 * hidden * kv_out + q_out * hidden  # q, k, v, o weights
    if qkv_bias:
        attention += q_out + 2 * kv_out
    norms_per_layer = 2 * hidden + (2 * d_h if arch in _ARCH_WITH_QK_NORM else 0)
    embedding = vocab * hidden
    return {
        "embedding": embedding,
        "attention": layers * attention,
        "mlp": layers * 3 * hidden * inter,  # gate, up, down
        "norms": layers * norms_per_layer + hidden,  # + final norm
        "lm_head": 0 if config.get("tie_word_embeddings", False) else embedding,
    }


def param_count(config: Mapping[str, Any]) -> int:
    """Total parameter count N (a plain count). Raises ``ValueError`` as :func:`param_breakdown`."""
    return sum(param_breakdown(config).values())


def linear_weight_count(config: Mapping[str, Any]) -> int:
    """Weights of the decoder layers' linear projections (q, k, v, o, gate, up, down), biases excluded.

    These are the weights that weight-only quantisation (AWQ, GPTQ) packs; embeddings, lm_head,
    biases and norms stay in 16-bit.
    """
    hidden = _need(config, "hidden_size")
    d_h = head_dim(config)
    q_out = _need(config, "num_attention_heads") * d_h
    kv_out = _need(config, "num_key_value_heads") * d_h
    per_layer = 2 * hidden * q_out + 2 * hidden * kv_out + 3 * hidden * _need(config, "intermediate_size")
    return _need(config, "num_hidden_layers") * per_layer


def kv_bytes_per_token(config: Mapping[str, Any], dtype_bytes: int = 2) -> int:
    """KV-cache bytes per token, kappa = 2 * L * n_kv * d_h * b (K and V, every layer).

    Args:
        config: the model's config (MHA, MQA or GQA; ``num_key_value_heads``, not the attention heads).
        dtype_bytes: bytes per cached element b (2 for bf16/fp16, 1 for fp8).

    Raises:
        ValueError: a config key is missing, or ``dtype_bytes`` is not a positive integer.
    """
    if not isinstance(dtype_bytes, int) or dtype_bytes <= 0:
        raise ValueError(f"dtype_bytes must be a positive integer (2 for bf16), got {dtype_bytes!r}")
    return 2 * _need(config, "num_hidden_layers") * _need(config, "num_key_value_heads") * head_dim(config) * dtype_bytes


def weight_bytes(config: Mapping[str, Any], dtype_bytes: int = 2) -> int:
    """Bytes of all weights stored in one dtype: N * b. Raises ``ValueError`` on a non-positive width."""
    if not isinstance(dtype_bytes, int) or dtype_bytes <= 0:
        raise ValueError(f"dtype_bytes must be a positive integer (2 for bf16), got {dtype_bytes!r}")
    return param_count(config) * dtype_bytes


def _bytes_with_quantised_linears(config: Mapping[str, Any], bytes_per_linear_weight: float) -> float:
    """Linear-layer weights at ``bytes_per_linear_weight`` B each; everything else 16-bit (2 B)."""
    quantised = linear_weight_count(config)
    return quantised * bytes_per_linear_weight + 2 * (param_count(config) - quantised)


def fp8_weight_bytes(config: Mapping[str, Any]) -> int:
    """Bytes of an FP8 (W8) checkpoint: 1 B per linear-layer weight, the rest (embeddings, lm_head,
    biases, norms) in 16-bit at 2 B. Per-tensor or per-channel scales are left out (a few KB to MB).

    Raises:
        ValueError: a config key is missing or not a positive integer.
    """
    return int(_bytes_with_quantised_linears(config, 1))


def awq_weight_bytes(config: Mapping[str, Any], group_size: int = 128) -> float:
    """Bytes of a 4-bit AWQ checkpoint: packed linear weights plus per-group fp16 scale and 4-bit zero.

    Each quantised weight costs 0.5 B + 2/group_size B (scale) + 0.5/group_size B (zero point);
    everything else (embeddings, lm_head, biases, norms) stays fp16 at 2 B.

    Raises:
        ValueError: ``group_size`` is not a positive integer, or a config key is missing.
    """
    if not isinstance(group_size, int) or isinstance(group_size, bool) or group_size <= 0:
        raise ValueError(f"group_size must be a positive integer (128 for Qwen's AWQ), got {group_size!r}")
    return _bytes_with_quantised_linears(config, 0.5 + (2 + 0.5) / group_size)


def attention_flops_per_token(config: Mapping[str, Any], context_len: int) -> int:
    """FLOPs of attention's own products (QK^T and PV) for ONE query token over ``context_len`` keys.

    Per layer and query head, QK^T is d_h multiply-adds per key and PV d_h per key (value rows
    weighted by the probabilities): 2 * 2 * d_h * context_len FLOPs. Summed over the
    ``num_attention_heads`` *query* heads (with GQA several query heads share a KV head but each
    still does its own products) and ``num_hidden_layers`` layers::

        4 * L * n_heads * d_h * context_len

    Softmax and scaling (a few FLOPs per score) are left out. These FLOPs are not in 2N: they
    multiply activations by activations, not by weights.

    Args:
        config: the model's config.json as a mapping.
        context_len: keys the token attends to (itself included), in tokens.

    Raises:
        ValueError: ``context_len`` is not a positive integer, or a config key is missing.
    """
    if not isinstance(context_len, int) or isinstance(context_len, bool) or context_len <= 0:
        raise ValueError(f"context_len must be a positive whole number of tokens, got {context_len!r}")
    heads = _need(config, "num_attention_heads")
    return 4 * _need(config, "num_hidden_layers") * heads * head_dim(config) * context_len


def forward_flops_per_token(config: Mapping[str, Any], context_len: int) -> int:
    """FLOPs of one token's forward pass: 2N (one multiply-add per parameter) plus attention's products.

    ``2 * param_count(config) + attention_flops_per_token(config, context_len)``. 2N counts the
    embedding table as if it were multiplied, though it is only a row lookup; lesson 0C says how
    much that over-counts. Raises ``ValueError`` as :func:`attention_flops_per_token`.
    """
    return 2 * param_count(config) + attention_flops_per_token(config, context_len)
