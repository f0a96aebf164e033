"""Lesson 3A: its formulas, the lesson's snippet and the page's headline values, on values worked by hand.

Qwen2.5-7B-Instruct (registry config): per layer the linear weights are q and o 2 * 3584 * 3584 =
25,690,112, k and v 2 * 3584 * 512 = 3,670,016 (4 KV heads of 128), gate/up/down 3 * 3584 * 18944 =
203,685,888: 233,046,016 per layer, 6,525,288,448 in 28 layers (N_q). N = 7,615,616,512, so 16-bit
parameters N - N_q = 1,090,328,064. The embedding (and the untied head) is 152,064 * 3584 = 544,997,376.
"""

from __future__ import annotations

import math

import pytest

from infercourse import registry, roofline, snippets
from infercourse.pages import values_for

PAGE = "lessons/3a-quantisation.md"


def _v(name):
    return values_for(PAGE)[name].value


def test_bytes_per_awq_weight():
    # 0.5 B for 4 bits + 2 B scale / 128 + 0.5 B zero / 128 = 0.5 + 0.015625 + 0.00390625 = 0.51953125
    assert _v("b_awq") == 0.51953125
    assert (_v("b_awq_scale"), _v("b_awq_zero")) == (0.015625, 0.00390625)


def test_weight_bytes_per_format():
    assert _v("N_q") == 6_525_288_448
    assert _v("W_bf16") == 15_231_233_024  # 7,615,616,512 * 2
    # FP8: 6,525,288,448 * 1 + 1,090,328,064 * 2 = 6,525,288,448 + 2,180,656,128
    assert _v("W_fp8") == 8_705_944_576
    # AWQ: 6,525,288,448 * 0.5 = 3,262,644,224; * 5/256 = 127,447,040; + 2,180,656,128
    assert _v("W_awq") == 5_570_747_392
    # "4-bit is 4x smaller": 15,231,233,024 / 5,570,747,392 = 2.734; per quantised weight 2 / 0.51953125 = 3.850
    assert _v("ratio_awq") == pytest.approx(2.7341, abs=1e-4)
    assert _v("ratio_awq_linear") == pytest.approx(3.8496, abs=1e-4)


def test_weight_floors_on_the_rtx_4090():
    # matmul bytes = W - 2 * 544,997,376 (the input embedding) = W - 1,089,994,752
    # BF16: 14,141,238,272 / 1.008e12 = 14.029 ms; FP8: 7,615,949,824 / 1.008e12 = 7.556 ms;
    # AWQ: 4,480,752,640 / 1.008e12 = 4.445 ms
    assert _v("floor_bf16") == pytest.approx(14.029e-3, abs=1e-6)
    assert _v("floor_fp8") == pytest.approx(7.5555e-3, abs=1e-6)
    assert _v("floor_awq") == pytest.approx(4.4452e-3, abs=1e-6)
    # the floors promise 14.029 / 4.4452 = 3.156x; the published L4 measurement gave 62.32 / 45.24 = 1.3775x
    assert _v("speedup_awq") == pytest.approx(3.156, abs=1e-3)
    # Machete's fp16 zero points: 76,468,224 B more on 5,570,747,392 (tests/labs/test_quant_nll.py) = 1.3727 %
    assert _v("machete_extra") == pytest.approx(76_468_224 / 5_570_747_392, rel=1e-9)
    assert _v("speedup_awq_measured") == pytest.approx(1.3775, abs=1e-4)


def test_compute_bound_batch_moves_down_for_w4a16_not_for_w8a8():
    # M = 7,615,616,512 - 544,997,376 = 7,070,619,136; R = 165.2e12 / 1.008e12 = 163.889
    # AWQ: b_bar = 4,480,752,640 / 7,070,619,136 = 0.63371; B* = 163.889 * 0.63371 / 2 = 51.93 -> 52
    assert _v("bbar_awq") == pytest.approx(0.63371, abs=1e-5)
    assert _v("bstar_awq") == 52 and _v("bstar_bf16") == 164
    # FP8 W8A8: R_fp8 = 330.3e12 / 1.008e12 = 327.679; b_bar = 7,615,949,824 / 7,070,619,136 = 1.07713;
    # B* = 327.679 * 1.07713 / 2 = 176.48 -> 177; as W8A16 (BF16 math): 163.889 * 1.07713 / 2 = 88.26 -> 89
    assert _v("R_fp8") == pytest.approx(327.679, abs=1e-3)
    assert _v("bstar_fp8") == 177 and _v("bstar_fp8_w8a16") == 89


def test_kv_capacity_freed_on_a_24_gb_card():
    # budget = 24,564 MiB * 0.92 - W - 2 GiB = 23,696,643,194.88 - 2,147,483,648 - W
    # AWQ: 15,978,412,154.88 / (57,344 * 16 = 917,504) = 17,415.1 blocks -> 278,640 tokens
    # FP8: 12,843,214,970.88 / 917,504 = 13,997.99 blocks -> 223,952 tokens; BF16: lesson 1A's 110,160
    assert (_v("kv_bf16"), _v("kv_fp8"), _v("kv_awq")) == (110_160, 223_952, 278_640)
    # 8,192-token sequences need 512 blocks each: 6,885 // 512 = 13; 17,415 // 512 = 34
    assert (_v("seqs_bf16"), _v("seqs_awq")) == (13, 34)


def test_fp8_peaks_and_the_ridge_at_a_given_peak():
    # Ada whitepaper: FP8 with FP32 accumulate 330.3 dense; H200/H100: 3,958 sparse / 2 = 1,979 dense
    assert registry.fp8_dense_tflops("RTX 4090") == 330.3
    assert registry.fp8_dense_tflops("H200") == registry.fp8_dense_tflops("H100") == 1979
    with pytest.raises(KeyError, match="no FP8 tensor cores"):
        registry.fp8_dense_tflops("A100")
    g = registry.gpu("RTX 4090")
    # 330.3e12 / 1008e9 = 327.679 FLOP/B; B* at 1 B per weight = 163.839
    assert roofline.compute_bound_batch(g, 1, 330.3) == pytest.approx(163.839, abs=1e-3)
    with pytest.raises(ValueError, match="peak_tflops"):
        roofline.ridge_point(g, 0)


def test_snippet_constants_and_results_equal_the_page():
    from infercourse import memory, transformer

    qb = snippets.load("lesson_3a/quant_bytes.py")
    cfg = registry.model().config
    assert transformer.param_count(cfg) == qb.PARAMS and transformer.linear_weight_count(cfg) == qb.LINEAR_WEIGHTS
    assert transformer.param_breakdown(cfg)["embedding"] == qb.EMBEDDING
    assert transformer.kv_bytes_per_token(cfg) == qb.KV_BYTES_PER_TOKEN and qb.GROUP == registry.AWQ_GROUP_SIZE
    g = registry.gpu("RTX 4090")
    datasheet = (g.bf16_dense_tflops, registry.fp8_dense_tflops(), g.bandwidth_gb_s)
    assert datasheet == (qb.BF16_TFLOPS, qb.FP8_TFLOPS, qb.BANDWIDTH_GB_S)
    assert memory.device_total_bytes() == qb.DEVICE_BYTES
    assert qb.UTILIZATION == registry.VLLM_DEFAULT_GPU_MEMORY_UTILIZATION
    assert qb.RESERVE_BYTES == registry.VLLM_NON_KV_RESERVE_GIB * 2**30 and qb.BLOCK == registry.VLLM_DEFAULT_BLOCK_SIZE
    for f in ("bf16", "fp8", "awq"):
        assert qb.weight_bytes(f) == _v(f"W_{f}")
        assert qb.kv_tokens(f) == _v(f"kv_{f}")
        assert math.ceil(qb.compute_bound_batch(f)) == _v(f"bstar_{f}")
        assert qb.weight_floor_ms(f) == pytest.approx(_v(f"floor_{f}") * 1e3)
