"""Lesson 2A's lab receipts drawn against the roofline (batch_decode spec), on a receipt written here."""

from __future__ import annotations

import json

import pytest

from conftest import CPU_MACHINE, claims_passed, make_receipt
from infercourse import labs
from infercourse.labs import batch_decode


def _receipt(kind="gpu", steps=((1, 20.0), (8, 21.0), (64, 28.0)), preempted=(0, 0, 0)) -> dict:
    rows = [
        {
            "batch": b,
            "step_ms": step,
            "median_tpot_ms": step,
            "tokens_per_s": b / step * 1e3,
            "bytes_per_step": 14_200_000_000,
            "achieved_gb_s": 14.2 / step * 1e3,
            "memory_floor_ms": 14.1 if kind == "gpu" else None,
            "preemptions": p,
        }
        for (b, step), p in zip(steps, preempted, strict=True)
    ]
    return make_receipt(
        "batch_decode",
        rows,
        batch_decode.SPEC.units,
        kind=kind,
        max_model_len=2048,
        settings={"prompt_len": 512, "output_len": 128, "matmul_params": 7_070_619_136},
    )


def test_measured_points_by_hand():
    labs.validate_receipt(_receipt())
    # B = 8, step 21 ms, BF16: intensity 2 * 8 / 2 = 8 FLOP/byte;
    # FLOP/s = 2 * 7,070,619,136 * 8 / 0.021 s = 5.3871e12
    assert batch_decode.measured_points(_receipt())[1] == pytest.approx((8, 8.0, 5.38714e12), rel=1e-5)


def test_receipts_drawn_against_the_roofline(tmp_path):
    assert "None yet: the first GPU receipt of this lab" in batch_decode.receipts_roofline_svg([])
    (tmp_path / "rtx-4090").mkdir()
    (tmp_path / "rtx-4090" / "batch_decode.json").write_text(json.dumps(_receipt()))
    (tmp_path / "cpu-amd-epyc").mkdir()
    (tmp_path / "cpu-amd-epyc" / "batch_decode.json").write_text(json.dumps(_receipt(kind="cpu")))
    gpu_only = labs.gpu_receipts("batch_decode", receipts_dir=tmp_path)
    assert [r["machine"]["kind"] for r in gpu_only] == ["gpu"]
    svg = batch_decode.receipts_roofline_svg(gpu_only)
    assert svg.startswith('<div class="course-figure"><svg') and svg.count("<svg") == 1
    # a machine the registry has no roof for is left out rather than drawn against a guess
    assert "None yet: the first GPU receipt of this lab" in batch_decode.receipts_roofline_svg([_receipt(kind="cpu")])
    mixed = batch_decode.receipts_roofline_svg([_receipt(), _receipt(kind="cpu")])
    assert "RTX 4090 roof" in mixed and CPU_MACHINE["name"] not in mixed


def test_claims_on_a_gpu_receipt():
    # tokens/s 50 -> 381 -> 2,286 rises; step 20 -> 28 ms is x1.4 <= 0.5 x 64; 28/20 = 1.4 < 2;
    # achieved 14.2 GB / 0.020 s = 710 GB/s at most, under the 4090's 1,008
    assert claims_passed(_receipt()) == {
        "no_preemption": True,
        "throughput_rises_with_batch": True,
        "step_grows_less_than_batch": True,
        "step_nearly_flat_gpu": True,
        "bandwidth_below_datasheet": True,
    }


def test_a_preempted_batch_fails_on_any_machine():
    for kind in ("gpu", "cpu"):
        result = next(r for r in labs.check(_receipt(kind, preempted=(0, 0, 3))) if r.claim == "no_preemption")
        assert result.passed is False and "B=64: 3" in result.detail


def test_timing_claims_are_printed_not_asserted_on_a_cpu_receipt():
    # tokens/s 1/0.2 = 5 -> 8/2.0 = 4: falls; step x10 > 0.5 x 8: both would fail on a GPU receipt
    slow = ((1, 200.0), (8, 2000.0))
    assert claims_passed(_receipt("gpu", steps=slow, preempted=(0, 0)))["throughput_rises_with_batch"] is False
    claims = claims_passed(_receipt("cpu", steps=slow, preempted=(0, 0)))
    assert claims["throughput_rises_with_batch"] is None and claims["step_grows_less_than_batch"] is None
    assert claims["no_preemption"] is True


def test_the_lab_is_the_one_home_of_its_lengths_and_batches():
    from infercourse import snippets

    lab = snippets.load("labs/batch_decode.py")  # imports without vLLM
    defaults = lab.parse_args([])
    assert (
        (defaults.prompt_len, defaults.output_len)
        == (batch_decode.LAB.PROMPT_LEN, batch_decode.LAB.OUTPUT_LEN)
        == (512, 128)
    )
    assert batch_decode.LARGEST_BATCH == max(lab.BATCHES) == 64
    assert defaults.max_model_len >= 512 + 128
    # the largest batch's KV: 64 x (512 + 128) = 40,960 tokens, the lab box's peak
    assert batch_decode.SPEC.work.peak_kv_tokens == 40_960


def test_prediction_states_the_largest_batch_s_kv_need():
    text = batch_decode.prediction()
    # 64 x 640 = 40,960 tokens x 57,344 B = 2,348,810,240 B = 2.1875 GiB
    assert "64 × (512 + 128) = 40,960 tokens" in text and "2.19 GiB at 57,344 B/token" in text
    assert "caps `max_num_batched_tokens` at 8,192" in text and batch_decode.LAB.MAX_BATCHED_TOKENS == 8192


def test_the_notebook_exercises_by_hand():
    """B* on the RTX 4090 = R b / 2 = (165.2e12 / 1008e9) x 2 / 2 = 163.89 sequences. At the lab's mean context
    512 + 128 / 2 = 576 tokens both steps are memory-bound (B = 64 < B*; attention is a few FLOP/byte):
    weights 14,141,238,272 B (M b, see test_phases) plus B x 57,344 x 576 B of cache; step(64) / step(1) =
    (14,141,238,272 + 2,113,929,216) / (14,141,238,272 + 33,030,144) = 16,255,167,488 / 14,174,268,416 =
    1.14681; tokens/s at 64 = 64 / (16,255,167,488 / 1008e9 s) = 3,968.71."""
    bstar, growth, ceiling = (e.answer() for e in labs.spec("batch_decode").exercises)
    assert bstar == pytest.approx(165.2e12 / 1008e9)
    assert growth == pytest.approx(16_255_167_488 / 14_174_268_416, rel=1e-9)
    assert ceiling == pytest.approx(64 / (16_255_167_488 / 1008e9), rel=1e-9)


def test_the_notebook_compares_step_time_with_the_memory_floor_the_lab_recorded():
    """The notebook's first panel: each row's step time beside its ``memory_floor_ms``, the floor the lab recorded
    for the GPU that ran it (kind "floor"); a CPU has no datasheet bandwidth, so no floor and no pair."""
    receipt = _receipt()
    # M b + B kappa S at 576 tokens (test_the_notebook_exercises_by_hand), / the 4090's 1,008 GB/s, as the lab
    # writes it (4 decimals): B = 1: 14,174,268,416 B / 1.008e9 B/s = 14.0618 ms; B = 8: 14,141,238,272 +
    # 8 x 33,030,144 = 14,405,479,424 B, 14.2912 ms; B = 64: 16,255,167,488 B / 1.008e9 B/s = 16.1262 ms
    floors = ((14_174_268_416, 14.0618), (14_405_479_424, 14.2912), (16_255_167_488, 16.1262))
    for row, (nbytes, floor) in zip(receipt["results"], floors, strict=True):
        row["bytes_per_step"], row["memory_floor_ms"] = nbytes, floor
    found = labs.compared(receipt)
    assert [(c.row, c.measured, c.predicted, c.kind) for c in found] == [
        (0, 20.0, 14.0618, "floor"),
        (1, 21.0, 14.2912, "floor"),
        (2, 28.0, 16.1262, "floor"),
    ]
    assert found[0].ratio == pytest.approx(20.0 / 14.0618)  # 1.42x above its floor
    assert labs.compared(_receipt(kind="cpu")) == []
    receipt["results"][0]["step_ms"] = 10.0  # faster than the memory allows: below its floor
    assert labs.compared(receipt)[0].ratio < 1
    assert "step time measured 10 ms, predicted 14.06 ms (floor; 0.71x)" in labs.report(receipt)[1]
