"""Lesson 7A: its formulas, the lesson's snippet and the page's headline values, on values worked by hand.

The tiny test model (``.cache/models/tiny-qwen2``): L = 2, d = 256, h = 4, h_kv = 2, d_h = 64, I = 512,
V = 512. Per rank at T = 1: QKV 2 * 256 * (4 + 2 * 2) * 64 = 262,144; o_proj 2 * 4 * 64 * 256 = 131,072;
gate/up 2 * 256 * 2 * 512 = 524,288; down 2 * 512 * 256 = 262,144. At T = 2 each is halved (131,072,
65,536, 262,144, 131,072) and each rank has 1 KV head and 256 of the 512 vocabulary rows.

Qwen2.5-7B: L = 28, d = 3,584, h = 28, h_kv = 4, d_h = 128, I = 18,944.
"""

from __future__ import annotations

import pytest

from infercourse import registry, roofline, transformer

TINY = {
    "num_hidden_layers": 2,
    "hidden_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 512,
    "vocab_size": 512,
}


def test_rank_elements_of_the_tiny_model_by_hand():
    assert transformer.tp_rank_linear_elements(TINY, 1) == {
        "qkv_proj": 262_144,
        "o_proj": 131_072,
        "gate_up_proj": 524_288,
        "down_proj": 262_144,
    }
    assert transformer.tp_rank_linear_elements(TINY, 2) == {
        "qkv_proj": 131_072,
        "o_proj": 65_536,
        "gate_up_proj": 262_144,
        "down_proj": 131_072,
    }


def test_rank_elements_of_qwen_7b_and_kv_replication():
    config = registry.model().config
    # T = 2: QKV 28 * 3584 * (14 + 2 * 2) * 128 = 231,211,008; o 28 * 14 * 128 * 3584 = 179,830,784;
    # gate/up 28 * 3584 * 18944 = 1,901,068,288; down 28 * 9472 * 3584 = 950,534,144
    assert transformer.tp_rank_linear_elements(config, 2) == {
        "qkv_proj": 231_211_008,
        "o_proj": 179_830_784,
        "gate_up_proj": 1_901_068_288,
        "down_proj": 950_534_144,
    }
    # T = 8 > h_kv = 4: one KV head per rank (replicated), QKV 28 * 3584 * (3.5 -> 28/8 is not whole)
    with pytest.raises(ValueError, match="must divide num_attention_heads 28"):
        transformer.tp_rank_linear_elements(config, 8)
    # T = 4 = h_kv: QKV 28 * 3584 * (7 + 2 * 1) * 128 = 115,605,504
    assert transformer.tp_rank_linear_elements(config, 4)["qkv_proj"] == 115_605_504
    # a model with h = 8, h_kv = 2 at T = 4: 1 KV head per rank, QKV 1 * 16 * (2 + 2) * 2 = 128
    small = {
        "num_hidden_layers": 1,
        "hidden_size": 16,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "intermediate_size": 8,
        "head_dim": 2,
    }
    assert transformer.tp_rank_linear_elements(small, 4)["qkv_proj"] == 128


@pytest.mark.parametrize("ranks", [0, -1, 1.5, True])
def test_rank_elements_refuse_a_bad_degree(ranks):
    with pytest.raises(ValueError, match="ranks must be a positive whole number"):
        transformer.tp_rank_linear_elements(TINY, ranks)


def test_ring_all_reduce_by_hand():
    # B = 1 message of Qwen2.5-7B: 3,584 * 2 = 7,168 B; T = 2 over 31.5 GB/s with 10 us per step:
    # 2 * 1/2 * 7168 / 31.5e9 = 0.22756 us + 2 * 10 us = 20.2276 us
    assert roofline.ring_allreduce_time(7168, 2, 31.5, 10e-6) == pytest.approx(20.2276e-6, rel=1e-5)
    # T = 4, 1 MB over 450 GB/s, no latency: 2 * 3/4 * 1e6 / 450e9 = 3.3333 us
    assert roofline.ring_allreduce_time(1e6, 4, 450, 0) == pytest.approx(3.3333e-6, rel=1e-4)
    assert roofline.ring_allreduce_time(1e6, 1, 450, 5e-6) == 0
    with pytest.raises(ValueError, match="message_bytes must be a finite number >= 0"):
        roofline.ring_allreduce_time(-1, 2, 450, 0)
    with pytest.raises(ValueError, match="link_gb_s"):
        roofline.ring_allreduce_time(1, 2, 0, 0)


def test_tp_step_of_qwen_7b_on_two_rtx_4090s_by_hand():
    g, config = registry.gpu("RTX 4090"), registry.model().config
    # weights: M = 7,070,619,136 matmul parameters, 2 M B / 1.008e12 B/s = 14.02901 ms;
    # attention at S = 160: kappa S = 57,344 * 160 = 9,175,040 B / 1.008e12 = 9.1022 us (memory-bound)
    one_compute, one_comm = roofline.tp_decode_step(g, config, 160, 1, 1, 31.5, 10e-6)
    assert one_comm == 0 and one_compute == pytest.approx(14.02901e-3 + 9.1022e-6, rel=1e-5)
    # T = 2: 7.014506 + 0.004551 = 7.019057 ms; 2 x 28 + 1 (embedding) = 57 all-reduces of 20.2276 us =
    # 1.152973 ms, then the logits gather: 1/2 x 152,064 x 2 B / 31.5e9 + 10 us = 14.8274 us: 1.167800 ms
    compute, comm = roofline.tp_decode_step(g, config, 160, 1, 2, 31.5, 10e-6)
    assert compute == pytest.approx(7.019057e-3, rel=1e-5)
    assert comm == pytest.approx(1.167800e-3, rel=1e-5)


def test_tp_prefill_of_qwen_7b_on_two_rtx_4090s_by_hand():
    g, config = registry.gpu("RTX 4090"), registry.model().config
    # 2,048 prompt tokens: each all-reduce carries 2,048 x 3,584 x 2 = 14,680,064 B:
    # 14,680,064 / 31.5e9 + 2 x 10 us = 466.034 + 20 = 486.034 us; 57 of them 27.7039 ms; the gather of one
    # row of logits 14.8274 us: 27.7187 ms. Compute: the prefill's matmuls 2 (M - H) S + 2 H =
    # 2 x 6,525,621,760 x 2,048 + 1,089,994,752 = 2.67295e13 FLOP / 165.2e12 = 161.801 ms, attention
    # 401,408 x (2,048 x 2,049 / 2) = 8.42244e11 FLOP / 165.2e12 = 5.0983 ms: halved, 83.4496 ms
    compute, comm = roofline.tp_prefill_step(g, config, 2048, 2, 31.5, 10e-6)
    assert comm == pytest.approx(27.7187e-3, rel=1e-5)
    assert compute == pytest.approx(83.4496e-3, rel=1e-4)
    assert roofline.tp_prefill_step(g, config, 2048, 1, 31.5, 10e-6)[1] == 0


def test_registry_links_and_assumed_latencies():
    # NVLink 900 GB/s both ways = 450 each way; PCIe 4.0 x16: 16 GT/s * 16 * 128/130 / 8 = 31.51 GB/s
    assert registry.TP_LINKS == {"H200": ("H200 NVLink", 450.0), "RTX 4090": ("PCIe 4.0 x16", 31.5)}
    assert round(16 * 16 * 128 / 130 / 8, 1) == registry.TP_LINKS["RTX 4090"][1]
    ids = {f.id: f for f in registry.facts()}
    assert ids["tp-hop-latency"].source.kind == "assumption"
    assert "custom_all_reduce.py`:150-167" in ids["vllm-custom-all-reduce-needs-p2p"].source.where


def _v(name):
    from infercourse.pages import values_for

    return values_for("lessons/7a-tensor-parallelism.md")[name].value


def test_page_step_model_on_two_rtx_4090s_by_hand():
    # S = 1,024: attention kappa S = 57,344 * 1024 = 58,720,256 B / 1.008e12 = 58.254 us; weights 14.02901 ms
    assert _v("t1_4090") == pytest.approx(14.08727e-3, rel=1e-5)
    # T = 2: 7.014506 + 0.029127 = 7.043633 ms of compute, 57 x 20.2276 us + 14.8274 us = 1.167800 ms of
    # collectives (test_tp_step_of_qwen_7b_on_two_rtx_4090s_by_hand)
    assert _v("compute2_4090") == pytest.approx(7.043633e-3, rel=1e-5)
    assert _v("comm2_4090") == pytest.approx(1.167800e-3, rel=1e-5)
    # speed-up 14.08727 / 8.211433 = 1.71556, efficiency 0.85778
    assert _v("speedup_4090") == pytest.approx(1.71556, abs=1e-4)
    assert _v("eta_4090") == pytest.approx(0.85778, abs=1e-4)
    assert _v("n_ar") == 57


def test_page_messages_and_crossover_by_hand():
    assert (_v("m1"), _v("m64")) == (7_168, 458_752)  # 3,584 * 2 and 64 * 3,584 * 2
    # m / beta = 2 alpha at m = 2 * 10 us * 31.5e9 B/s = 630,000 B = 87.89 sequences of 7,168 B
    assert _v("B_cross_4090") == pytest.approx(87.89, abs=0.01)
    # B = 64: 458,752 / 31.5e9 + 2 x 10 us = 14.5636 + 20 = 34.5636 us against 20.2276 us: 1.7087 times
    assert _v("ar_growth_4090") == pytest.approx(34.5636 / 20.2276, rel=1e-5)
    # KV per GPU: 57,344 / 2 = 28,672; / 4 = 14,336
    assert (_v("kappa_rank2"), _v("kappa_rank4")) == (28_672, 14_336)
    # T must divide the 28 query heads (1, 2, 4, 7, 14, 28) and the width 18,944 = 2^8 x 74 (drops 7, 14, 28),
    # and T and the 4 KV heads must divide one another: 1, 2, 4. Llama-2-13B: 40 heads and 40 KV heads,
    # width 13,824 = 2^9 x 27: 1, 2, 4, 8
    assert _v("tp_sizes") == "1, 2, 4"
    assert transformer.tp_sizes(registry.model("meta-llama/Llama-2-13b-hf").config) == [1, 2, 4, 8]
    with pytest.raises(ValueError, match=r"pick one of \[1, 2, 4\]"):
        transformer.tp_rank_linear_elements(registry.model().config, 8)
    # prefill of 2,048 tokens on two RTX 4090s (test_tp_prefill_of_qwen_7b_on_two_rtx_4090s_by_hand):
    # 27.7187 ms of collectives against 83.4496 ms of compute, 33.2 %
    assert _v("m2k") == 14_680_064 and _v("p2k_ratio") == pytest.approx(27.7187 / 83.4496, rel=1e-4)


def test_page_model_that_does_not_fit_by_hand():
    # Llama-2-13B: embedding 32,000 * 5,120 = 163,840,000, twice (untied); per layer 4 * 5,120^2 = 104,857,600
    # + 3 * 5,120 * 13,824 = 212,336,640 + norms 10,240 = 317,204,480; 40 layers + final norm 5,120:
    # N = 13,015,864,320, in BF16 26,031,728,640 B > the RTX 4090's 24,564 MiB = 25,757,220,864 B
    assert _v("W_big") == 26_031_728_640
    assert _v("D_4090") == 25_757_220_864
    assert _v("W_big_rank2") == 13_015_864_320


def test_snippet_split_mlp_equals_the_whole():
    from infercourse import snippets

    mlp = snippets.load("lesson_7a/megatron_mlp.py")
    # d = 8, f = 12: the up and down matrices hold 2 * 8 * 12 = 192 weights; T = 3 gives 3 x (8 * 4 + 4 * 8) = 3 x 64
    assert (mlp.D, mlp.F) == (8, 12)
    x = [[1, -2, 3, 0, 1, 2, -1, 1]] * mlp.TOKENS
    w_up = [[(i * 7 + j * 3) % 5 - 2 for j in range(12)] for i in range(8)]
    w_down = [[(i * 5 + j) % 7 - 3 for j in range(8)] for i in range(12)]
    out, elements = mlp.tensor_parallel_mlp(x, w_up, w_down, 3)
    assert elements == [64, 64, 64]
    assert out == mlp.mlp(x, w_up, w_down)
