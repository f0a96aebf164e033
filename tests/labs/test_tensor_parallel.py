"""Lab tensor_parallel (lesson 7A): its spec's claims, prediction and bad input, on receipts worked by hand.

The hand arithmetic of the model, the card and the floors is in tests/lessons/test_7a.py's docstring.
"""

from __future__ import annotations

import copy

import pytest

from conftest import CPU_MACHINE, GPU_MACHINE, make_receipt
from infercourse import labbox, labs, registry
from infercourse.labs import tensor_parallel as spec

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


def _row(run, tp, sizes, per_rank, kv, vocab_rows, step_ms=()):
    return {
        "run": run,
        "tensor_parallel_size": tp,
        "outcome": "started",
        "reason": None,
        "ranks": tp,
        **{f"{k}_elements": [per_rank[k]] * tp for k in spec.LAB.KINDS},
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
    # two points (0, 1) and (2, 5): slope 2, intercept 1, whatever the weights. Three points (0, 1), (1, 2), (2, 2)
    # in relative error: minimise (a - 1)^2 + ((a + b - 2) / 2)^2 + ((a + 2b - 2) / 2)^2; d/da = 0 gives
    # 3a + 1.5b = 4, d/db = 0 gives 1.5a + 2.5b = 3, so b = 4/7, a = 22/21 (a plain fit: b = 1/2, a = 7/6)
    assert spec.least_squares([0, 2], [1, 5]) == pytest.approx((1.0, 2.0), rel=1e-12)
    assert spec.least_squares([0, 1, 2], [1, 2, 2]) == pytest.approx((22 / 21, 4 / 7), rel=1e-12)
    with pytest.raises(ValueError, match="every time must be positive"):
        spec.least_squares([0, 1], [0, 1])


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
    # predicted t(2)/t(1) on two RTX 4090s at B = 1 (tests/lessons/test_7a.py writes both out):
    # (7.019057 + 1.167800) / 14.03811 = 0.58318; bound 1.15 x = 0.6707
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
    assert spec.predicted_ratio("RTX 4090", registry.model().config, 1) == pytest.approx(0.58318, abs=1e-4)
    got = _results(receipt)
    assert got["tp2_speedup_in_range"].passed  # 9.5 / 14.5 = 0.655 <= 0.6707
    assert got["shard_step_below_tp2"].passed
    receipt["results"][2]["step_ms"] = [9.8]  # 0.676 > 0.6707
    receipt["results"][1]["step_ms"] = [9.9]
    got = _results(receipt)
    assert not got["tp2_speedup_in_range"].passed and not got["shard_step_below_tp2"].passed
    receipt["results"][2]["step_ms"] = [7.0]  # 0.483 < 0.5: faster than two GPUs can be
    assert not _results(receipt)["tp2_speedup_in_range"].passed


def test_prediction_table_by_hand():
    text = spec.prediction()
    # B = 1 row: t(1) 14.04, shard 7.02, collectives 1.17, t(2) 8.19, ratio 0.58 (numbers above)
    assert "| 1 | 14.04 | 7.02 | 1.17 | 8.19 | 0.58 |" in text
    assert "PCIe 4.0 x16 (31.5 GB/s per direction, assumed 10.0 µs per ring step)" in text


def test_the_lab_box_rents_two_cards():
    # tensor parallelism at T = 2 needs both cards in one instance, and pays for both
    box = labbox.lab_box("tensor_parallel.py")
    assert "**Card:** 2 × RTX 4090 (24 GB each) in one instance" in box
    minutes = labbox.lab_minutes("tensor_parallel")["total"]
    assert f"about ¥{minutes / 60 * 1.98 * 2:.2f}" in box  # 1.98 yuan/h per card (AutoDL, September 2026), two cards


def test_the_lab_reads_vllm_turning_its_custom_all_reduce_off():
    """vLLM 0.26.0's warning without peer access, as in its source
    (vllm/distributed/device_communicators/custom_all_reduce.py; in the committed message list)."""
    import re

    from infercourse import snippets

    lab = snippets.load("labs/tensor_parallel.py")  # imports without vLLM
    line = (
        "Custom allreduce is disabled because your platform lacks GPU P2P "
        "capability or P2P test failed. To silence this warning, specify disable_custom_all_reduce=True explicitly."
    )
    found = re.search(lab.CUSTOM_ALL_REDUCE_OFF, line)
    assert found and found.group(1) == "your platform lacks GPU P2P capability or P2P test failed"
    assert re.search(lab.CUSTOM_ALL_REDUCE_OFF, "Using NCCL for all-reduce") is None


def test_the_notebook_exercises_by_hand():
    """qkv_proj at T = 2: 28 layers x 3,584 x (28 / 2 + 2 x 4 / 2 = 18 heads) x 128 = 231,211,008. One all-reduce at
    batch 64 over T = 4: m = 64 x 3,584 x 2 = 458,752 B, each GPU sends 2 x 3 / 4 x m = 688,128 B. Batch 1 at the
    lab's context 128 + 64 / 2 = 160 on the RTX 4090: t1 = (14,141,238,272 + 57,344 x 160) / 1.008e12 = 14.03811 ms;
    t2 = t1 / 2 (weights and cache both split in two) + 1.167800 ms of collectives (tests/lessons/test_7a.py)."""
    qkv, sent, speedup = (e.answer() for e in labs.spec("tensor_parallel").exercises)
    assert qkv == 28 * 3584 * 18 * 128 == 231_211_008
    assert sent == 688_128
    t1 = (14_141_238_272 + 57_344 * 160) / 1.008e12
    assert speedup == pytest.approx(t1 / (t1 / 2 + 1.167800e-3), rel=1e-5)


def test_the_notebook_compares_qkv_elements_per_rank_with_the_formula():
    """The notebook's first panel: each engine run's qkv_proj elements per rank beside the formula's, exact; the
    allreduce row (no engine) is not compared."""
    receipt = _cpu_receipt()
    found = labs.compared(receipt)
    # L d (h/T + 2 max(1, h_kv/T)) d_h with L 2, d 256, h 4, h_kv 2, d_h 64:
    # T = 1: 2 x 256 x (4 + 2 x 2) x 64 = 262,144; T = 2: 2 x 256 x (2 + 2 x 1) x 64 = 131,072
    assert [(c.row, c.measured, c.predicted, c.kind) for c in found] == [
        (0, 262_144, 262_144, "exact"),
        (1, 131_072, 131_072, "exact"),
    ]
    receipt["results"][1]["qkv_proj_elements"] = [131_072, 131_072 + 64]  # one rank holds one d_h more
    assert labs.compared(receipt)[1].ratio == 131_136 / 131_072
    assert "NOT as predicted" in labs.report(receipt)[1]
