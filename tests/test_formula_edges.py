"""Formulas at their edges, by hand: the branches and boundaries the lessons' own numbers never reach.

Each test here was written for mutants that ``make mutation`` found surviving (README): a config shape no
registry model has (MLA without a q latent, a DeepSeek MoE layer pattern, an MoE without q/k norms), a boundary
hit exactly (a batch equal to a captured size, k equal to E), a constant off by one part in 10^9 (exact
arithmetic below, so a tolerance cannot hide it), or a demand whose parts were only ever compared with a limit.
"""

from __future__ import annotations

import pytest

from infercourse import registry, roofline, transformer

RTX_4090 = registry.gpu("RTX 4090")  # 165.2 TFLOP/s dense BF16, 1,008 GB/s (registry, NVIDIA's datasheet)
QWEN_7B = registry.model().config
OLMOE = registry.model("allenai/OLMoE-1B-7B-0924-Instruct").config


def _moe(**overrides):
    """A tiny Qwen3-MoE-shaped config: d 8, 2 heads of 4, 1 KV head, 4 experts of width 2, 2 per token."""
    config = {
        "model_type": "qwen3_moe",
        "hidden_size": 8,
        "num_hidden_layers": 4,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 4,
        "vocab_size": 10,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 2,
        "intermediate_size": 6,
    }
    return {**config, **overrides}


@pytest.mark.parametrize(
    ("overrides", "layers"),
    [
        # DeepSeek: layer i is MoE when i >= first_k_dense_replace and i % moe_layer_freq == 0
        ({"num_hidden_layers": 6, "first_k_dense_replace": 1, "moe_layer_freq": 2}, [2, 4]),
        ({"moe_layer_freq": 2}, [0, 2]),  # no dense prefix
        ({"first_k_dense_replace": 2}, [2, 3]),  # every layer after the dense ones
        ({"first_k_dense_replace": 0, "moe_layer_freq": 1}, [0, 1, 2, 3]),
        # Qwen3-MoE: (i + 1) % decoder_sparse_step == 0, minus mlp_only_layers
        ({"num_hidden_layers": 6, "decoder_sparse_step": 2, "mlp_only_layers": [3]}, [1, 5]),
        ({"decoder_sparse_step": 1, "mlp_only_layers": [0]}, [1, 2, 3]),
        ({"num_hidden_layers": 6, "decoder_sparse_step": 3}, [2, 5]),  # (i + 1) % 3 == 0
        ({}, [0, 1, 2, 3]),
    ],
)
def test_moe_layers_follow_each_family_s_pattern(overrides, layers):
    assert transformer.moe_layer_indices(_moe(**overrides)) == layers


@pytest.mark.parametrize("dense", [[True], ["3"], (1, 2)])
def test_mlp_only_layers_must_be_a_list_of_layer_numbers(dense):
    with pytest.raises(ValueError, match="mlp_only_layers"):
        transformer.moe_layer_indices(_moe(mlp_only_layers=dense))


def test_k_may_equal_e_but_not_exceed_it():
    assert transformer.moe_experts(_moe(num_experts_per_tok=4)) == (4, 4)
    assert roofline.expected_experts_touched(4, 4, 1) == 4.0  # every expert, from the first token
    with pytest.raises(ValueError, match="exceeds"):
        transformer.moe_experts(_moe(num_experts_per_tok=5))


@pytest.mark.parametrize(
    ("model_type", "attention"),
    [
        # 2 d q_out + 2 d kv_out = 2 x 8 x 8 + 2 x 8 x 4 = 192 per layer, plus q/k norms where the family has them
        ("qwen3_moe", 192 + 2 * 4),  # one d_h-wide norm each for q and k
        ("olmoe", 192 + 8 + 4),  # norms over the whole q and k outputs
        ("mixtral", 192),  # none
    ],
)
def test_moe_attention_counts_each_family_s_norms(model_type, attention):
    parts = transformer.moe_param_breakdown(_moe(model_type=model_type))
    assert parts["attention"] == 4 * attention


def test_tied_moe_embeddings_have_no_separate_head():
    assert transformer.moe_param_breakdown(_moe())["lm_head"] == 10 * 8
    assert transformer.moe_param_breakdown(_moe(tie_word_embeddings=True))["lm_head"] == 0


@pytest.mark.parametrize(
    ("q_lora_rank", "per_layer"),
    [
        # d 8, 2 heads, nope 2 + rope 1 (q width 2 x 3 = 6), KV latent 4, v 2:
        # kv = 8 x (4 + 1) + 4 + 4 x 2 x (2 + 2) = 76, o = 2 x 2 x 8 = 32
        (None, 8 * 6 + 76 + 32),  # q straight from d: 48
        (3, 8 * 3 + 3 + 3 * 6 + 76 + 32),  # q through a latent of 3 and its norm: 45
    ],
)
def test_mla_attention_with_and_without_a_q_latent(q_lora_rank, per_layer):
    config = _moe(
        model_type="deepseek_v3",
        num_hidden_layers=1,
        n_routed_experts=4,
        num_experts=None,
        kv_lora_rank=4,
        q_lora_rank=q_lora_rank,
        qk_nope_head_dim=2,
        qk_rope_head_dim=1,
        v_head_dim=2,
    )
    assert transformer.moe_param_breakdown(config)["attention"] == per_layer


def test_tp_sizes_include_the_head_count_itself():
    # 4 heads, 2 KV heads, width 8: T = 1, 2, 4 divide the heads and the width; at 4 each KV head is copied twice
    config = {"num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 8, "hidden_size": 16}
    assert transformer.tp_sizes(config) == [1, 2, 4]


def test_a_rank_s_slices_are_whole_counts():
    parts = transformer.tp_rank_linear_elements(QWEN_7B, 2)
    assert all(type(v) is int for v in parts.values()), parts


@pytest.mark.parametrize(
    ("max_num_seqs", "max_num_batched_tokens", "sizes_end"),
    [
        (2, 8192, [1, 2, 4]),  # largest 2 x 2 = 4: captured itself
        (256, 7, [1, 2, 4, 7]),  # largest 7 < 8: no multiple of 8, the token budget added
        (256, 271, [240, 248, 256, 271]),  # 256 and then every 16 up to 271: 256 only, then the budget
        (1024, 8192, [480, 496, 512]),  # 2 x 1,024 capped at vLLM's 512
    ],
)
def test_captured_sizes_at_their_edges(max_num_seqs, max_num_batched_tokens, sizes_end):
    sizes = roofline.cudagraph_capture_sizes(max_num_seqs, max_num_batched_tokens)
    assert sizes[-len(sizes_end) :] == sizes_end


def test_a_batch_equal_to_a_captured_size_runs_in_that_graph():
    assert roofline.cudagraph_padded_size(8, [1, 2, 4, 8, 16]) == 8
    assert roofline.cudagraph_padded_size(9, [1, 2, 4, 8, 16]) == 16


# Exact arithmetic: each value below is an integer or a power-of-ten fraction the float computes exactly, so a
# constant nudged by one part in 10^9 (1e9 -> 1000000001.0) cannot hide inside a tolerance.
def test_roofline_constants_exactly():
    assert roofline.attainable_flops(RTX_4090, 100) == 100 * 1_008_000_000_000  # memory-bound: I x 1,008 GB/s
    assert roofline.attainable_flops(RTX_4090, 1000) == pytest.approx(165.2e12, rel=1e-14)  # the peak
    assert roofline.overhead_bound_bytes(RTX_4090, 1.0) == 1_008_000_000_000  # 1 s at 1,008 GB/s
    assert roofline.ring_allreduce_time(1e9, 2, 10, 0) == pytest.approx(0.1, rel=1e-14)  # 2 x 1/2 x 1 GB / 10 GB/s
    # half of 152,064 logits x 2 B cross a 1 GB/s link: 152,064 B / 1e9 B/s
    assert roofline.logits_gather_time(QWEN_7B, 1, 2, 1, 0) == pytest.approx(152_064e-9, rel=1e-14)
    assert roofline.cost_per_million_tokens(3.6, 1000) == pytest.approx(1.0, rel=1e-14)  # 3.6 / h at 1,000 tok/s


def test_moe_decode_demand_by_hand():
    # OLMoE, B = 2, 16 experts reached per layer, 144 tokens of context, a step of 0.5 s (tests/lessons/test_7b.py):
    # weights read 373,688,320 + 16 x 16 x 6,291,456 = 1,984,301,056; multiplied 373,688,320 + 8 x 16 x 6,291,456
    # = 1,178,994,688; attention 4 L h d_h S = 18,874,368 FLOP and kappa S = 18,874,368 B per sequence.
    d = roofline.moe_decode_demand(RTX_4090, OLMOE, batch=2, context_len=144, step_s=0.5, what="w", experts_touched=16)
    assert d.flop_s == (2 * 1_178_994_688 * 2 + 2 * 18_874_368) / 0.5
    assert d.byte_s == (1_984_301_056 * 2 + 2 * 18_874_368) / 0.5
    assert d.what == "w"


def test_prefill_demand_reads_the_weights_once():
    # Qwen2.5-7B: linear weights 28 x 233,046,016 = 6,525,288,448, head 152,064 x 3,584 = 544,997,376, BF16
    d = roofline.prefill_demand(RTX_4090, QWEN_7B, 512, 0.5, "p")
    assert d.byte_s == 2 * (6_525_288_448 + 544_997_376) / 0.5
    # 512 positions through the linear weights, the head once, causal attention 4 L h d_h = 401,408 FLOP per key:
    # 2 x 6,525,288,448 x 512 + 2 x 544,997,376 + 401,408 x (1 + ... + 512) = 6,735,701,475,328
    assert roofline.request_flops(QWEN_7B, 512, 1) == 6_735_701_475_328
    assert d.flop_s == 6_735_701_475_328 / 0.5
    assert d.what == "p"


@pytest.mark.parametrize("prompt_len", [1, 512])
def test_tp_prefill_at_one_rank_is_the_prefill_floor(prompt_len):
    # one token: memory-bound (the weights' and the cache's bytes decide); 512: compute-bound with real attention
    compute, communication = roofline.tp_prefill_step(RTX_4090, QWEN_7B, prompt_len, 1, 64, 5e-6)
    assert communication == 0
    assert compute == pytest.approx(roofline.prefill_floor(RTX_4090, QWEN_7B, prompt_len), rel=1e-12)


def test_decode_demand_by_hand():
    # Qwen2.5-7B, B = 2 at 100 tokens of context, split over 2 ranks, a step of 0.5 s. Per step:
    # FLOP 2 x (2 x 6,525,288,448 + 2 x 544,997,376 + 401,408 x 100) = 28,361,424,896;
    # bytes 2 x 6,525,288,448 + 2 x 544,997,376 + 2 x 100 x 57,344 = 14,152,040,448 (an FP8 cache: 28,672 B/token
    # -> 14,146,306,048); each of 2 ranks over 0.5 s: the same numbers per second
    d = roofline.decode_demand(RTX_4090, QWEN_7B, batch=2, context_len=100, step_s=0.5, what="d", ranks=2)
    assert (d.flop_s, d.byte_s, d.what) == (28_361_424_896, 14_152_040_448, "d")
    fp8 = roofline.decode_demand(RTX_4090, QWEN_7B, 2, 100, 0.5, "d", ranks=2, kv_dtype_bytes=1)
    assert fp8.byte_s == 14_146_306_048


def test_serving_demand_by_hand():
    # 0.5 requests/s of 512 tokens in, 1 out: 0.5 x 6,735,701,475,328 FLOP/s (request_flops above); each 0.5 s step
    # reads the BF16 linear weights and head once: 2 x (6,525,288,448 + 544,997,376) / 0.5 B/s
    d = roofline.serving_demand(RTX_4090, QWEN_7B, 0.5, 512, 1, 0.5, "s")
    assert (d.flop_s, d.byte_s, d.what) == (3_367_850_737_664, 28_281_143_296, "s")


def test_sliding_layers_are_counted_not_their_complement():
    config = {"sliding_window": 4096, "layer_types": ["sliding_attention"] * 3 + ["full_attention"]}
    assert transformer.sliding_window_layers(config) == 3


def test_bounds_that_are_allowed_exactly():
    from infercourse import memory

    # utilization 1 is the whole card; a budget of exactly nothing is refused: 10 x 0.9 - 9 - 0 = 0 B
    assert memory.kv_budget_bytes(10, 1, 0, utilization=1) == 9
    with pytest.raises(ValueError, match="utilization"):
        memory.kv_budget_bytes(10, 1, 0, utilization=0)
    with pytest.raises(ValueError, match="leave nothing for the KV cache"):
        memory.kv_budget_bytes(10, 9, 0, utilization=0.9)
    assert transformer.kv_cache_bytes(QWEN_7B, 0) == 0  # an empty cache
    # symmetric AWQ (no zero points): 4 bits per weight plus a 2-byte scale per group of 128
    assert transformer.awq_weight_bytes(QWEN_7B, 128, 0) < transformer.awq_weight_bytes(QWEN_7B, 128, 0.5)
    # launches: (kernels per layer x layers + kernels outside) x launch time, each given
    assert roofline.launch_overhead_s(2, 1e-6, kernels_per_layer=10, kernels_outside=4) == pytest.approx(24e-6)


@pytest.mark.parametrize("bad", [True, "8", float("inf")])
def test_formats_and_calculators_refuse_what_is_not_a_finite_number(bad):
    from infercourse import calculators, fmt

    with pytest.raises(ValueError, match="finite number"):
        fmt.count(bad)
    with pytest.raises(ValueError, match="memory_gib must be a positive number"):
        calculators.gpu_total_bytes(None, bad)
    # 0.5 GiB is a card the calculators take (the range is (0, LIMITS]); a whole GiB is not the floor
    assert calculators.gpu_total_bytes(None, 0.5) == 2**29
