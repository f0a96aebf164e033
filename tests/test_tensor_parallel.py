"""Lesson 7A and its lab tensor_parallel: per-rank counts, the ring all-reduce, the TP step model, the
claims and the prediction, against hand arithmetic.

The tiny test model (``.cache/models/tiny-qwen2``): L = 2, d = 256, h = 4, h_kv = 2, d_h = 64, I = 512,
V = 512. Per rank at T = 1: QKV 2 * 256 * (4 + 2 * 2) * 64 = 262,144; o_proj 2 * 4 * 64 * 256 = 131,072;
gate/up 2 * 256 * 2 * 512 = 524,288; down 2 * 512 * 256 = 262,144. At T = 2 each is halved (131,072,
65,536, 262,144, 131,072) and each rank has 1 KV head and 256 of the 512 vocabulary rows.

Qwen2.5-7B: L = 28, d = 3,584, h = 28, h_kv = 4, d_h = 128, I = 18,944.
"""

from __future__ import annotations

import copy

import pytest

from conftest import CPU_MACHINE, GPU_MACHINE, make_receipt
from infercourse import labs, registry, roofline, transformer
from infercourse.labs import tensor_parallel as spec

TINY = {
    "num_hidden_layers": 2,
    "hidden_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 512,
    "vocab_size": 512,
}
TINY_SIZES = {
    "layers": 2,
    "hidden_size": 256,
    "heads": 4,
    "kv_heads": 2,
    "head_dim": 64,
    "intermediate_size": 512,
    "vocab_size": 512,
}
SHARD_SIZES = {**TINY_SIZES, "heads": 2, "kv_heads": 1, "intermediate_size": 256}
TOKENS = [[495, 495, 285, 55], [12, 13, 14, 15]]


# --- formulas ---------------------------------------------------------------------------------------


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
    with pytest.raises(ValueError, match="must be >= 0"):
        roofline.ring_allreduce_time(-1, 2, 450, 0)
    with pytest.raises(ValueError, match="link_gb_s"):
        roofline.ring_allreduce_time(1, 2, 0, 0)


def test_tp_step_of_qwen_7b_on_two_rtx_4090s_by_hand():
    g, config = registry.gpu("RTX 4090"), registry.model().config
    # weights: M = 7,070,619,136 matmul parameters, 2 M B / 1.008e12 B/s = 14.02901 ms;
    # attention at S = 160: kappa S = 57,344 * 160 = 9,175,040 B / 1.008e12 = 9.1022 us (memory-bound)
    one_compute, one_comm = roofline.tp_decode_step(g, config, 160, 1, 1, 31.5, 10e-6)
    assert one_comm == 0 and one_compute == pytest.approx(14.02901e-3 + 9.1022e-6, rel=1e-5)
    # T = 2: 7.014506 + 0.004551 = 7.019057 ms; 56 all-reduces of 20.2276 us = 1.13275 ms
    compute, comm = roofline.tp_decode_step(g, config, 160, 1, 2, 31.5, 10e-6)
    assert compute == pytest.approx(7.019057e-3, rel=1e-5)
    assert comm == pytest.approx(1.13275e-3, rel=1e-4)


def test_registry_links_and_assumed_latencies():
    # NVLink 900 GB/s both ways = 450 each way; PCIe 4.0 x16: 16 GT/s * 16 * 128/130 / 8 = 31.51 GB/s
    assert registry.TP_LINKS == {"H200": ("H200 NVLink", 450.0), "RTX 4090": ("PCIe 4.0 x16", 31.5)}
    assert round(16 * 16 * 128 / 130 / 8, 1) == registry.TP_LINKS["RTX 4090"][1]
    ids = {f.id: f for f in registry.facts()}
    assert ids["tp-hop-latency"].source.kind == "assumption"
    assert "custom_all_reduce.py`:150-167" in ids["vllm-custom-all-reduce-needs-p2p"].source.where


# --- the lab's claims ---------------------------------------------------------------------------------


def _row(run, tp, sizes, per_rank, kv, vocab_rows, step_ms=()):
    return {
        "run": run,
        "tensor_parallel_size": tp,
        "outcome": "started",
        "reason": None,
        "ranks": tp,
        **{f"{k}_elements": [per_rank[k]] * tp for k in spec.KINDS},
        "embed_rows": [vocab_rows] * tp,
        "lm_head_rows": [vocab_rows] * tp,
        "kv_heads": [kv] * tp,
        "sizes": sizes,
        "greedy_tokens": copy.deepcopy(TOKENS),
        "step_batches": [1, 8, 64][: len(step_ms)],
        "step_ms": list(step_ms),
        **NO_ALLREDUCE,
    }


NO_ALLREDUCE = dict.fromkeys(
    ("backend", "message_bytes", "allreduce_s", "sum_exact", "fit_latency_s", "fit_s_per_byte", "fit_alpha_s")
    + ("fit_link_gb_s",)
)
AR_BYTES = [4_096, 16_384, 65_536, 262_144, 1_048_576, 4_194_304]  # 4^6 .. 4^11


def _allreduce(backend="gloo"):
    """Times exactly on t = 20 us + n * 0.1 ns: 20.4096, 21.6384, 26.5536, 46.2144, 124.8576, 439.4304 us. The
    least-squares line through points on a line is that line: a = 20e-6 s, b = 1e-10 s/B; alpha = a / (2 (2 - 1))
    = 10 us per ring step; link = 2 (2 - 1) / (2 b) = 1e10 B/s = 10 GB/s."""
    empty = {k: None for k in _row("tp1", 1, TINY_SIZES, WHOLE, 2, 512) if k not in NO_ALLREDUCE}
    return {
        **empty,
        "run": "allreduce",
        "tensor_parallel_size": 2,
        "outcome": "started",
        "ranks": 2,
        "backend": backend,
        "message_bytes": list(AR_BYTES),
        "allreduce_s": [20.4096e-6, 21.6384e-6, 26.5536e-6, 46.2144e-6, 124.8576e-6, 439.4304e-6],
        "sum_exact": True,
        "fit_latency_s": 20e-6,
        "fit_s_per_byte": 1e-10,
        "fit_alpha_s": 10e-6,
        "fit_link_gb_s": 10.0,
    }


WHOLE = {"qkv_proj": 262_144, "o_proj": 131_072, "gate_up_proj": 524_288, "down_proj": 262_144}
HALF = {"qkv_proj": 131_072, "o_proj": 65_536, "gate_up_proj": 262_144, "down_proj": 131_072}


def _cpu_receipt(**envelope):
    rows = [_row("tp1", 1, TINY_SIZES, WHOLE, 2, 512), _row("tp2", 2, TINY_SIZES, HALF, 1, 256), _allreduce()]
    return make_receipt(
        "tensor_parallel",
        rows,
        spec.SPEC.units,
        machine=CPU_MACHINE,
        dtype="float32",
        model=".cache/models/tiny-qwen2",
        **envelope,
    )


def _results(receipt):
    return {c.claim: c for c in labs.check(receipt)}


def test_a_cpu_receipt_worked_by_hand_passes_the_exact_claims():
    got = _results(_cpu_receipt())
    assert got["rank_counts_exact"].passed and got["shards_sum_to_whole"].passed and got["greedy_tokens_equal"].passed
    assert got["allreduce_fit_exact"].passed and "a = 20.0 µs, b = 0.1000 ns/B" in got["allreduce_fit_exact"].detail
    assert got["tp2_speedup_in_range"].passed is None and got["shard_step_below_tp2"].passed is None


def test_least_squares_through_points_on_a_line_by_hand():
    row = _allreduce()
    assert spec.least_squares(row["message_bytes"], row["allreduce_s"]) == pytest.approx((20e-6, 1e-10), rel=1e-9)
    # two points (0, 1) and (2, 5): slope 2, intercept 1; three points (0, 0), (1, 1), (2, 1): the normal equations
    # give b = 0.5, a = 1/6 (mean t 2/3 - 0.5 * mean n 1)
    assert spec.least_squares([0, 2], [1, 5]) == pytest.approx((1.0, 2.0), rel=1e-12)
    assert spec.least_squares([0, 1, 2], [0, 1, 1]) == pytest.approx((1 / 6, 0.5), rel=1e-12)


@pytest.mark.parametrize(
    "change",
    [
        {"message_bytes": AR_BYTES[:-1]},  # a size left out
        {"allreduce_s": [20.4096e-6] * 5},  # a time missing
        {"allreduce_s": [20.4096e-6] * 5 + [float("nan")]},  # a time not finite
        {"sum_exact": False},  # a rank's sum differs
        {"fit_latency_s": -1e-6},  # a negative latency
        {"fit_s_per_byte": float("inf")},
        {"fit_latency_s": 20.2e-6},  # 1 % off the least-squares fit
    ],
)
def test_an_allreduce_sweep_that_breaks_a_rule_fails(change):
    """The claim fails, or the receipt's schema refuses it first (a measured value must be finite and >= 0)."""
    receipt = _cpu_receipt()
    receipt["results"][2].update(change)
    try:
        passed = _results(receipt)["allreduce_fit_exact"].passed
    except labs.ReceiptError as exc:
        assert "not a finite non-negative number" in str(exc)
        return
    assert passed is False


def test_an_allreduce_on_one_gpu_is_na_with_its_reason():
    receipt = _cpu_receipt()
    reason = "one GPU visible (NVIDIA GeForce RTX 4090): an all-reduce needs two or more ranks"
    receipt["results"][2].update(NO_ALLREDUCE, outcome="n/a", reason=reason, ranks=None)
    got = _results(receipt)["allreduce_fit_exact"]
    assert got.passed is None and got.detail == f"n/a: {reason}"


def test_the_page_takes_alpha_from_a_gpu_receipt_only():
    gpu = make_receipt("tensor_parallel", [_allreduce("nccl")], spec.SPEC.units, machine=GPU_MACHINE)
    cpu = _cpu_receipt()
    assert spec.fitted_alpha([cpu]) == {}
    found = spec.fitted_alpha([cpu, gpu])
    assert list(found) == ["RTX 4090"] and found["RTX 4090"][0] == pytest.approx(10e-6, rel=1e-12)
    gpu["results"][0]["sum_exact"] = False  # a receipt that fails the sweep's rules is not used
    assert spec.fitted_alpha([gpu]) == {}


def test_a_rank_one_element_short_fails():
    receipt = _cpu_receipt()
    receipt["results"][1]["down_proj_elements"][1] -= 1
    got = _results(receipt)
    assert not got["rank_counts_exact"].passed and not got["shards_sum_to_whole"].passed


def test_unequal_shards_with_the_right_sum_fail():
    receipt = _cpu_receipt()
    receipt["results"][1]["o_proj_elements"] = [65_536 + 64, 65_536 - 64]
    got = _results(receipt)
    assert got["shards_sum_to_whole"].passed and not got["rank_counts_exact"].passed


def test_replicated_kv_heads_where_they_split_fail():
    receipt = _cpu_receipt()
    receipt["results"][1]["kv_heads"] = [2, 2]
    assert not _results(receipt)["rank_counts_exact"].passed


def test_a_vocabulary_not_split_fails():
    receipt = _cpu_receipt()
    receipt["results"][1]["lm_head_rows"] = [512, 512]
    assert not _results(receipt)["shards_sum_to_whole"].passed


def test_different_greedy_tokens_fail_in_float32_only():
    receipt = _cpu_receipt()
    receipt["results"][1]["greedy_tokens"][1][3] = 16
    assert _results(receipt)["greedy_tokens_equal"].passed is False
    receipt["dtype"] = "bfloat16"
    assert _results(receipt)["greedy_tokens_equal"].passed is None
    # random weights are drawn per rank (a real CPU run with --load-format dummy gave other tokens at T = 2)
    receipt["dtype"], receipt["load_format"] = "float32", "dummy"
    assert _results(receipt)["greedy_tokens_equal"].passed is None


def test_the_shard_run_is_one_rank_of_two():
    # the shard's config has h = 2, h_kv = 1, I = 256 and d_h = 64 kept: the whole model's T = 2 rank
    shard = _row("shard", 1, SHARD_SIZES, HALF, 1, 512)
    receipt = make_receipt("tensor_parallel", [shard], spec.SPEC.units, machine=CPU_MACHINE)
    assert _results(receipt)["rank_counts_exact"].passed
    # vLLM's Qwen2 class re-derives d_h = 256 / 2 = 128: QKV 2 * 256 * (2 + 2) * 128 = 262,144 and
    # o_proj 2 * 2 * 128 * 256 = 131,072, the whole model's (the lab's first shard run did this)
    row = receipt["results"][0]
    row["qkv_proj_elements"], row["o_proj_elements"] = [262_144], [131_072]
    assert not _results(receipt)["rank_counts_exact"].passed


def test_gpu_step_claims_by_hand():
    # predicted t(2)/t(1) on two RTX 4090s at B = 1: 8.1518 / 14.0381 = 0.5807; bound 1.15 x = 0.668
    rows = [
        _row("tp1", 1, TINY_SIZES, WHOLE, 2, 512, [14.5]),
        _row("shard", 1, SHARD_SIZES, HALF, 1, 512, [7.4]),
        _row("tp2", 2, TINY_SIZES, HALF, 1, 256, [9.5]),
    ]
    receipt = make_receipt("tensor_parallel", rows, spec.SPEC.units, machine=GPU_MACHINE)
    for r in receipt["results"]:
        r["sizes"] = {
            "layers": 28,
            "hidden_size": 3584,
            "heads": 28,
            "kv_heads": 4,
            "head_dim": 128,
            "intermediate_size": 18944,
            "vocab_size": 152064,
        }
    assert spec.predicted_ratio("RTX 4090", registry.model().config, 1) == pytest.approx(0.5807, abs=1e-4)
    got = _results(receipt)
    assert got["tp2_speedup_in_range"].passed  # 9.5 / 14.5 = 0.655 <= 0.668
    assert got["shard_step_below_tp2"].passed
    receipt["results"][2]["step_ms"] = [9.8]  # 0.676 > 0.668
    receipt["results"][1]["step_ms"] = [9.9]
    got = _results(receipt)
    assert not got["tp2_speedup_in_range"].passed and not got["shard_step_below_tp2"].passed
    receipt["results"][2]["step_ms"] = [7.0]  # 0.483 < 0.5: faster than two GPUs can be
    assert not _results(receipt)["tp2_speedup_in_range"].passed


def test_prediction_table_by_hand():
    text = spec.prediction()
    # B = 1 row: t(1) 14.04, shard 7.02, all-reduces 1.13, t(2) 8.15, ratio 0.58
    assert "| 1 | 14.04 | 7.02 | 1.13 | 8.15 | 0.58 |" in text
    assert "PCIe 4.0 x16 (31.5 GB/s per direction, assumed 10.0 µs per ring step)" in text


# --- the page's headline values ---------------------------------------------------------------------


def _v(name):
    from infercourse.pages import values_for

    return values_for("lessons/7a-tensor-parallelism.md")[name].value


def test_page_step_model_on_two_rtx_4090s_by_hand():
    # S = 1,024: attention kappa S = 57,344 * 1024 = 58,720,256 B / 1.008e12 = 58.254 us; weights 14.02901 ms
    assert _v("t1_4090") == pytest.approx(14.08727e-3, rel=1e-5)
    # T = 2: 7.014506 + 0.029127 = 7.043633 ms of compute, 56 x 20.2276 us = 1.13275 ms of all-reduces
    assert _v("compute2_4090") == pytest.approx(7.043633e-3, rel=1e-5)
    assert _v("comm2_4090") == pytest.approx(1.13275e-3, rel=1e-4)
    # speed-up 14.08727 / 8.17638 = 1.7229, efficiency 0.8615
    assert _v("speedup_4090") == pytest.approx(1.7229, abs=1e-4)
    assert _v("eta_4090") == pytest.approx(0.8615, abs=1e-4)
    assert _v("n_ar") == 56


def test_page_messages_and_crossover_by_hand():
    assert (_v("m1"), _v("m64")) == (7_168, 458_752)  # 3,584 * 2 and 64 * 3,584 * 2
    # m / beta = 2 alpha at m = 2 * 10 us * 31.5e9 B/s = 630,000 B = 87.89 sequences of 7,168 B
    assert _v("B_cross_4090") == pytest.approx(87.89, abs=0.01)
    # KV per GPU: 57,344 / 2 = 28,672; / 4 = 14,336; at T = 8 > h_kv = 4 still 14,336 (replicated)
    assert (_v("kappa_rank2"), _v("kappa_rank4"), _v("kappa_rank8")) == (28_672, 14_336, 14_336)


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
