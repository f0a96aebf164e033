"""Sizes derived from a decoder-only transformer's ``config.json``.

Parameter counts cover the dense architectures in the registry (Qwen2, Qwen3, Llama, Mistral):
RMSNorm, SwiGLU MLP (gate, up, down), multi-head, multi-query or grouped-query attention; and the
mixture-of-experts ones (Qwen3-MoE, OLMoE, DeepSeek-V3 with its latent attention). KV-cache
sizes also cover multi-head latent attention (DeepSeek-V2/V3) and sliding-window layers. Every function
takes the config as a mapping with the keys spelled as in ``config.json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infercourse.checks import whole

BYTES_PER_DTYPE = {"float32": 4, "bfloat16": 2, "float16": 2, "fp8": 1}
"""Bytes per element of the dtypes the course uses."""

_ARCH_WITH_QKV_BIAS = {"qwen2"}  # Qwen2 always has q/k/v biases; its config has no flag for it
_ARCH_WITH_QK_NORM = {"qwen3"}  # Qwen3 applies an RMSNorm of size head_dim to q and to k


CONFIG_SIZE_MAX = 2**24
"""The largest size a config key read here may hold (16,777,216): far above any real model's (the largest
among the registry's models is Qwen2.5-7B's vocabulary, 152,064), so a config pasted into a calculator with
an absurd size (``1e308``, ``2**60``) gets this message, not a count that prints as a wall of digits."""


def _need(config: Mapping[str, Any], key: str) -> int:
    try:
        value = config[key]
    except KeyError:
        raise ValueError(f"the config.json has no {key}: use the model's whole config.json") from None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= CONFIG_SIZE_MAX:
        raise ValueError(f"config[{key!r}] must be a positive integer up to {CONFIG_SIZE_MAX:,}, got {value!r}")
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
        ValueError: a required key is missing or not a positive integer, or the config is an
            MLA or mixture-of-experts model (``kv_lora_rank``, ``n_routed_experts``), which this
            dense count does not cover.
    """
    for key in ("kv_lora_rank", "n_routed_experts", "num_experts"):
        if config.get(key) is not None:
            raise ValueError(
                f"config sets {key!r}: MLA and mixture-of-experts models are not covered by this dense count"
            )
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
    """Total parameter count N (a plain count): :func:`moe_param_breakdown`'s ``total`` for a
    mixture-of-experts config, else the sum of :func:`param_breakdown`. Raises ``ValueError`` as they do."""
    if is_moe(config):
        return moe_param_breakdown(config)["total"]
    return sum(param_breakdown(config).values())


def linear_weight_count(config: Mapping[str, Any]) -> int:
    """Weights of the decoder layers' linear projections (q, k, v, o, gate, up, down), biases excluded.

    These are the weights that weight-only quantisation (AWQ, GPTQ) packs; embeddings, lm_head,
    biases and norms stay in 16-bit. A mixture-of-experts config: every projection of attention, of the
    dense and shared MLPs and of every expert (the router stays 16-bit).
    """
    if is_moe(config):
        parts = moe_param_breakdown(config)
        return parts["attention"] + parts["dense_mlp"] + parts["shared_experts"] + parts["routed_experts"]
    hidden = _need(config, "hidden_size")
    d_h = head_dim(config)
    q_out = _need(config, "num_attention_heads") * d_h
    kv_out = _need(config, "num_key_value_heads") * d_h
    per_layer = 2 * hidden * q_out + 2 * hidden * kv_out + 3 * hidden * _need(config, "intermediate_size")
    return _need(config, "num_hidden_layers") * per_layer


def _check_dtype_bytes(dtype_bytes: int) -> None:
    if not isinstance(dtype_bytes, int) or isinstance(dtype_bytes, bool) or dtype_bytes <= 0:
        raise ValueError(f"dtype_bytes must be a positive integer (2 for bf16, 1 for fp8), got {dtype_bytes!r}")


def is_mla(config: Mapping[str, Any]) -> bool:
    """True for multi-head latent attention (DeepSeek-V2/V3): the config sets ``kv_lora_rank``."""
    return config.get("kv_lora_rank") is not None


def attention_kind(config: Mapping[str, Any]) -> str:
    """``"MHA"``, ``"MQA"``, ``"GQA"`` or ``"MLA"``, read from the KV-head count (or ``kv_lora_rank``).

    Raises:
        ValueError: a required key is missing or not a positive integer, or the KV heads do not divide
            the attention heads.
    """
    if is_mla(config):
        return "MLA"
    heads, kv = _need(config, "num_attention_heads"), _need(config, "num_key_value_heads")
    if heads % kv:
        raise ValueError(
            f"num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}; "
            "each KV head must serve a whole group of query heads"
        )
    if kv == heads:
        return "MHA"
    return "MQA" if kv == 1 else "GQA"


def kv_bytes_per_layer_token(config: Mapping[str, Any], dtype_bytes: int = 2) -> int:
    """Bytes one layer caches for one token (B).

    MHA/MQA/GQA: K and V of every KV head, 2 * h_kv * d_h * b_kv. MLA: one compressed latent of
    ``kv_lora_rank`` elements plus the decoupled RoPE key of ``qk_rope_head_dim`` elements,
    (kv_lora_rank + qk_rope_head_dim) * b_kv; MLA caches no per-head K and V.

    Raises:
        ValueError: a config key is missing, or ``dtype_bytes`` is not a positive integer.
    """
    _check_dtype_bytes(dtype_bytes)
    if is_mla(config):
        return (_need(config, "kv_lora_rank") + _need(config, "qk_rope_head_dim")) * dtype_bytes
    return 2 * _need(config, "num_key_value_heads") * head_dim(config) * dtype_bytes


def kv_bytes_per_token(config: Mapping[str, Any], dtype_bytes: int = 2) -> int:
    """KV-cache bytes per token over all layers, kappa (B/token), with no sliding window applied.

    MHA, MQA or GQA: kappa = 2 * L * h_kv * d_h * b_kv (K and V; ``num_key_value_heads``, not the
    attention heads; d_h from ``head_dim`` where the config sets it). MLA (``kv_lora_rank`` set):
    kappa = L * (kv_lora_rank + qk_rope_head_dim) * b_kv.

    Args:
        config: the model's config.json as a mapping.
        dtype_bytes: bytes per cached element b_kv (2 for bf16/fp16, 1 for fp8).

    Raises:
        ValueError: a config key is missing, or ``dtype_bytes`` is not a positive integer.
    """
    return _need(config, "num_hidden_layers") * kv_bytes_per_layer_token(config, dtype_bytes)


def sliding_window_layers(config: Mapping[str, Any]) -> int:
    """How many layers attend only to the last ``sliding_window`` tokens (0 when none do).

    Where the config lists ``layer_types``, the layers marked ``"sliding_attention"``; otherwise
    every layer when ``sliding_window`` is set and ``use_sliding_window`` is not false (Mistral's
    convention; Qwen2 configs carry a ``sliding_window`` value with ``use_sliding_window: false``).

    Raises:
        ValueError: ``sliding_window`` is set but not a positive integer, or a key is missing.
    """
    if config.get("sliding_window") is None or config.get("use_sliding_window") is False:
        return 0
    _need(config, "sliding_window")
    layer_types = config.get("layer_types")
    if layer_types is not None:
        return sum(1 for kind in layer_types if kind == "sliding_attention")
    return _need(config, "num_hidden_layers")


def kv_cache_bytes(config: Mapping[str, Any], tokens: int, dtype_bytes: int = 2) -> int:
    """Bytes of one sequence's KV cache holding ``tokens`` tokens of context (B).

    Full-attention layers keep every token; sliding-window layers keep at most ``sliding_window``
    tokens (an engine may free the older ones), so their share stops growing at the window:
    (L - L_w) * tokens * kappa_layer + L_w * min(tokens, W) * kappa_layer.

    Raises:
        ValueError: ``tokens`` is not a non-negative integer, ``dtype_bytes`` is not a positive
            integer, or a config key is missing.
    """
    whole("tokens", tokens, 0)
    per_layer = kv_bytes_per_layer_token(config, dtype_bytes)
    layers = _need(config, "num_hidden_layers")
    windowed = sliding_window_layers(config)
    capped = min(tokens, config["sliding_window"]) if windowed else tokens
    return (layers - windowed) * tokens * per_layer + windowed * capped * per_layer


def weight_bytes(config: Mapping[str, Any], dtype_bytes: int = 2) -> int:
    """Bytes of all weights stored in one dtype: N * b. Raises ``ValueError`` on a non-positive width."""
    _check_dtype_bytes(dtype_bytes)
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


def awq_weight_bytes(config: Mapping[str, Any], group_size: int = 128, zero_point_bytes: float = 0.5) -> float:
    """Bytes of a 4-bit AWQ model: packed linear weights plus, per group, an fp16 scale and a zero point.

    Each quantised weight costs 0.5 B + 2/group_size B (scale) + ``zero_point_bytes``/group_size B;
    everything else (embeddings, lm_head, biases, norms) stays fp16 at 2 B. ``zero_point_bytes``: 0.5 (a
    4-bit zero) in the checkpoint and in Marlin's repack (the RTX 4090); 2 on Machete (Hopper), which keeps
    each zero point as an fp16 value pre-multiplied by the scale
    (vLLM 0.26.0, ``vllm/model_executor/kernels/linear/mixed_precision/machete.py``:110-119).

    Raises:
        ValueError: ``group_size`` is not a positive integer, ``zero_point_bytes`` is negative, or a config
            key is missing.
    """
    if not isinstance(group_size, int) or isinstance(group_size, bool) or group_size <= 0:
        raise ValueError(f"group_size must be a positive integer (128 for Qwen's AWQ), got {group_size!r}")
    if not zero_point_bytes >= 0:
        raise ValueError(f"zero_point_bytes must be 0.5 (4-bit) or 2 (fp16, Machete), got {zero_point_bytes!r}")
    return _bytes_with_quantised_linears(config, 0.5 + (2 + zero_point_bytes) / group_size)


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
        ValueError: ``context_len`` is not a positive integer, a config key is missing, or the config
            is MLA (``kv_lora_rank``), whose per-head sizes are not ``head_dim``.
    """
    if not isinstance(context_len, int) or isinstance(context_len, bool) or context_len <= 0:
        raise ValueError(f"context_len must be a positive whole number of tokens, got {context_len!r}")
    if is_mla(config):
        raise ValueError(
            "config sets 'kv_lora_rank': MLA's attention products (over the shared latent, key size "
            "qk_nope_head_dim + qk_rope_head_dim) are not modelled by this count"
        )
    heads = _need(config, "num_attention_heads")
    return 4 * _need(config, "num_hidden_layers") * heads * head_dim(config) * context_len


def forward_flops_per_token(config: Mapping[str, Any], context_len: int) -> int:
    """FLOPs of one token's forward pass: 2N (one multiply-add per parameter) plus attention's products.

    ``2 * param_count(config) + attention_flops_per_token(config, context_len)``. 2N counts the
    embedding table as if it were multiplied, though it is only a row lookup; lesson 0C says how
    much that over-counts. Raises ``ValueError`` as :func:`attention_flops_per_token`.
    """
    return 2 * param_count(config) + attention_flops_per_token(config, context_len)


# --- lesson 7A: tensor parallelism ---


def tp_sizes(config: Mapping[str, Any]) -> list[int]:
    """The tensor-parallel degrees T vLLM 0.26.0 can split ``config`` into, ascending: T divides the query
    heads (vllm/config/model.py:1228-1234 at v0.26.0 refuses the rest before loading) and the MLP width
    (each rank's gate/up/down slice), and T and h_kv divide one another (past h_kv each KV head is copied
    to T / h_kv ranks). Qwen2.5-7B (28 heads, 4 KV heads, width 18,944): [1, 2, 4].

    Raises:
        ValueError: a config key is missing or not a positive integer.
    """
    heads, kv_heads = _need(config, "num_attention_heads"), _need(config, "num_key_value_heads")
    inter = _need(config, "intermediate_size")
    return [
        t for t in range(1, heads + 1) if heads % t == 0 and inter % t == 0 and (kv_heads % t == 0 or t % kv_heads == 0)
    ]


def tp_rank_linear_elements(config: Mapping[str, Any], ranks: int) -> dict[str, int]:
    """Weights of the sharded linear layers one rank holds under Megatron tensor parallelism, per kind,
    summed over the layers (biases excluded; plain counts).

    Column-parallel ``qkv_proj`` (d x (h/T + 2 k) d_h) and ``gate_up_proj`` (d x 2I/T), row-parallel
    ``o_proj`` (h d_h/T x d) and ``down_proj`` (I/T x d), where k = h_kv / T KV heads per rank, or 1
    when T > h_kv (vLLM then replicates each KV head on T / h_kv ranks:
    vllm/model_executor/models/qwen2.py:140-148 at v0.26.0).

    Raises:
        ValueError: ``ranks`` is not a positive whole number, T does not divide the heads or the
            intermediate size, T and h_kv do not divide one another, or a config key is missing.
    """
    if not isinstance(ranks, int) or isinstance(ranks, bool) or ranks < 1:
        raise ValueError(f"ranks must be a positive whole number, got {ranks!r}")
    if ranks not in tp_sizes(config):
        raise ValueError(
            f"T = {ranks} must divide num_attention_heads {config['num_attention_heads']} and intermediate_size "
            f"{config['intermediate_size']}, and T and num_key_value_heads {config['num_key_value_heads']} must "
            f"divide one another; pick one of {tp_sizes(config)}"
        )
    hidden, d_h = _need(config, "hidden_size"), head_dim(config)
    heads, kv_heads = _need(config, "num_attention_heads"), _need(config, "num_key_value_heads")
    inter, layers = _need(config, "intermediate_size"), _need(config, "num_hidden_layers")
    kv_per_rank = max(1, kv_heads // ranks)
    return {
        "qkv_proj": layers * hidden * (heads // ranks + 2 * kv_per_rank) * d_h,
        "o_proj": layers * heads // ranks * d_h * hidden,
        "gate_up_proj": layers * hidden * 2 * inter // ranks,
        "down_proj": layers * inter // ranks * hidden,
    }


# --- end of lesson 7A ---


# --- lesson 7B: mixture of experts ---


def is_moe(config: Mapping[str, Any]) -> bool:
    """True for a mixture-of-experts config: it sets ``num_experts`` (Qwen3-MoE, OLMoE) or
    ``n_routed_experts`` (DeepSeek-V2/V3); :func:`moe_experts` checks the value."""
    return any(config.get(key) is not None for key in ("num_experts", "n_routed_experts"))


def moe_experts(config: Mapping[str, Any]) -> tuple[int, int]:
    """``(E, k)``: routed experts per MoE layer and experts each token is routed to.

    Raises:
        ValueError: not a mixture-of-experts config, ``num_experts_per_tok`` missing, or k > E.
    """
    if not is_moe(config):
        raise ValueError("not a mixture-of-experts config: it sets neither num_experts nor n_routed_experts")
    experts = _need(config, "num_experts" if config.get("num_experts") is not None else "n_routed_experts")
    top_k = _need(config, "num_experts_per_tok")
    if top_k > experts:
        raise ValueError(f"num_experts_per_tok {top_k} exceeds the {experts} routed experts")
    return experts, top_k


def moe_layer_indices(config: Mapping[str, Any]) -> list[int]:
    """The decoder layers (0-based) whose MLP is a routed mixture of experts; the rest are dense MLPs.

    Qwen3-MoE: layer i unless i is in ``mlp_only_layers``, when (i + 1) % ``decoder_sparse_step`` == 0
    (vLLM 0.26.0, ``vllm/model_executor/models/qwen3_moe.py``); DeepSeek-V3: i >= ``first_k_dense_replace``
    and i % ``moe_layer_freq`` == 0 (``deepseek_v2.py``); OLMoE: every layer.

    Raises:
        ValueError: as :func:`moe_experts`, or ``num_hidden_layers`` missing.
    """
    moe_experts(config)
    layers = _need(config, "num_hidden_layers")
    if config.get("first_k_dense_replace") is not None or config.get("moe_layer_freq") is not None:
        first = _need(config, "first_k_dense_replace") if config.get("first_k_dense_replace") else 0
        freq = _need(config, "moe_layer_freq") if config.get("moe_layer_freq") is not None else 1
        return [i for i in range(layers) if i >= first and i % freq == 0]
    step = _need(config, "decoder_sparse_step") if config.get("decoder_sparse_step") is not None else 1
    dense = config.get("mlp_only_layers") or []
    if not isinstance(dense, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in dense):
        raise ValueError(f"config['mlp_only_layers'] must be a list of layer numbers, got {dense!r}")
    return [i for i in range(layers) if i not in dense and (i + 1) % step == 0]


def _mla_attention_params(config: Mapping[str, Any]) -> int:
    """One layer of multi-head latent attention (DeepSeek-V2/V3), weights and its two norms: q through the
    ``q_lora_rank`` latent (or directly when it is null), the shared ``kv_lora_rank`` latent with the RoPE
    key, its up-projection to every head's key and value, and the output projection."""
    hidden, heads = _need(config, "hidden_size"), _need(config, "num_attention_heads")
    nope, rope = _need(config, "qk_nope_head_dim"), _need(config, "qk_rope_head_dim")
    latent, v_dim = _need(config, "kv_lora_rank"), _need(config, "v_head_dim")
    q_width = heads * (nope + rope)
    q_lora = config.get("q_lora_rank")
    if q_lora is not None:
        q_lora = _need(config, "q_lora_rank")
    q = hidden * q_width if q_lora is None else hidden * q_lora + q_lora + q_lora * q_width
    kv = hidden * (latent + rope) + latent + latent * heads * (nope + v_dim)  # a-proj, its norm, b-proj
    return q + kv + heads * v_dim * hidden


def moe_param_breakdown(config: Mapping[str, Any]) -> dict[str, int]:
    """Parameters of a mixture-of-experts model by part, the total N and the active count per token.

    Returns:
        Plain counts: ``embedding``, ``lm_head`` (0 when tied), ``attention`` (all layers, with q/k norms),
        ``dense_mlp`` (the layers that are not MoE), ``router`` (a d x E gate per MoE layer, plus
        DeepSeek-V3's E routing biases), ``shared_experts`` (DeepSeek's ``n_shared_experts``, every token
        uses them), ``routed_experts`` (all E of every MoE layer), ``norms`` (two per layer and the final
        one), ``expert`` (one routed expert of one layer: 3 d I_e, gate, up and down), ``moe_layers``,
        ``total`` (N, the sum of the parts) and ``active`` (N with k of the E routed experts per MoE layer:
        what one token is multiplied by, plus the embedding row it reads).

    Counts the gated (SwiGLU) experts of Qwen3-MoE, OLMoE and DeepSeek-V3; the expert width I_e is
    ``moe_intermediate_size`` where the config sets it (else ``intermediate_size``, OLMoE). Checked by hand
    in ``tests/lessons/test_7b.py`` against the cards: Qwen3-30B-A3B 30.5B total, 3.3B active; DeepSeek-V3 671B, 37B.

    Raises:
        ValueError: not a mixture-of-experts config, or a key it needs is missing or not a positive integer.
    """
    experts, top_k = moe_experts(config)
    hidden, layers, vocab = (
        _need(config, "hidden_size"),
        _need(config, "num_hidden_layers"),
        _need(config, "vocab_size"),
    )
    moe_layers = len(moe_layer_indices(config))
    width_key = "moe_intermediate_size" if config.get("moe_intermediate_size") is not None else "intermediate_size"
    expert_width = _need(config, width_key)
    expert = 3 * hidden * expert_width
    arch = config.get("model_type")
    if is_mla(config):
        attention = _mla_attention_params(config)
    else:
        d_h = head_dim(config)
        q_out, kv_out = _need(config, "num_attention_heads") * d_h, _need(config, "num_key_value_heads") * d_h
        attention = 2 * hidden * q_out + 2 * hidden * kv_out
        attention += {"qwen3_moe": 2 * d_h, "olmoe": q_out + kv_out}.get(str(arch), 0)  # q and k norms
    dense_layers = layers - moe_layers
    parts = {
        "embedding": vocab * hidden,
        "lm_head": 0 if config.get("tie_word_embeddings", False) else vocab * hidden,
        "attention": layers * attention,
        "dense_mlp": dense_layers * 3 * hidden * _need(config, "intermediate_size") if dense_layers else 0,
        "router": moe_layers * (hidden * experts + (experts if config.get("topk_method") == "noaux_tc" else 0)),
        "shared_experts": moe_layers
        * (_need(config, "n_shared_experts") if config.get("n_shared_experts") else 0)
        * expert,
        "routed_experts": moe_layers * experts * expert,
        "norms": layers * 2 * hidden + hidden,
    }
    total = sum(parts.values())
    return {
        **parts,
        "expert": expert,
        "moe_layers": moe_layers,
        "total": total,
        "active": total - moe_layers * (experts - top_k) * expert,
    }


def lora_adapter_bytes(config: Mapping[str, Any], rank: int, dtype_bytes: int = 2) -> int:
    """Bytes of one LoRA adapter of ``rank`` r on every linear projection of a dense decoder (q, k, v, o, gate,
    up, down: what vLLM adapts by default, every linear layer; registry fact ``vllm-max-lora-rank``).

    A projection from d_in to d_out gains A (r x d_in) and B (d_out x r): r (d_in + d_out) weights, each
    ``dtype_bytes`` bytes (2: vLLM's ``lora_dtype`` "auto" is the model's BF16). Summed over the seven
    projections of every layer; the embedding and the output head are not adapted.

    Raises:
        ValueError: ``rank`` or ``dtype_bytes`` not an integer >= 1; a mixture-of-experts config (its experts
            make the count another formula).
        KeyError: a config key missing.
    """
    whole("rank", rank, 1)
    whole("dtype_bytes", dtype_bytes, 1)
    if is_moe(config):
        raise ValueError("lora_adapter_bytes counts a dense decoder; this config is a mixture of experts")
    d, f = config["hidden_size"], config["intermediate_size"]
    q = config["num_attention_heads"] * head_dim(config)
    kv = config["num_key_value_heads"] * head_dim(config)
    per_layer = (d + q) + 2 * (d + kv) + (q + d) + 2 * (d + f) + (f + d)
    return per_layer * config["num_hidden_layers"] * rank * dtype_bytes
