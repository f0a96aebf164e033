"""Lesson 2A's lab receipts drawn against the roofline (batch_decode spec), on a receipt written here."""

from __future__ import annotations

import json

import pytest

from conftest import CPU_MACHINE, GPU_MACHINE, make_receipt
from infercourse import labs
from infercourse.labs import batch_decode


def _receipt(kind="gpu") -> dict:
    rows = [{"batch": b, "step_ms": step, "median_tpot_ms": step, "tokens_per_s": b / step * 1e3,
             "bytes_per_step": 14_200_000_000, "achieved_gb_s": 14.2 / step * 1e3, "memory_floor_ms": 14.1}
            for b, step in ((1, 20.0), (8, 21.0), (64, 28.0))]
    return make_receipt("batch_decode", rows, batch_decode.SPEC.units,
                        machine=GPU_MACHINE if kind == "gpu" else CPU_MACHINE, max_model_len=2048,
                        settings={"prompt_len": 512, "output_len": 128, "matmul_params": 7_070_619_136})


def test_measured_points_by_hand():
    labs.validate_receipt(_receipt())
    # B = 8, step 21 ms, BF16: intensity 2 * 8 / 2 = 8 FLOP/byte;
    # FLOP/s = 2 * 7,070,619,136 * 8 / 0.021 s = 5.3871e12
    assert batch_decode.measured_points(_receipt())[1] == pytest.approx((8, 8.0, 5.38714e12), rel=1e-5)


def test_receipts_drawn_against_the_roofline(tmp_path):
    assert "No GPU receipt of this lab" in batch_decode.receipts_roofline_svg([])
    (tmp_path / "rtx-4090").mkdir()
    (tmp_path / "rtx-4090" / "batch_decode.json").write_text(json.dumps(_receipt()))
    (tmp_path / "cpu-amd-epyc").mkdir()
    (tmp_path / "cpu-amd-epyc" / "batch_decode.json").write_text(json.dumps(_receipt(kind="cpu")))
    gpu_only = [r for r in labs.gpu_receipts(tmp_path) if r["lab"] == "batch_decode"]
    assert [r["machine"]["kind"] for r in gpu_only] == ["gpu"]
    svg = batch_decode.receipts_roofline_svg(gpu_only)
    assert svg.startswith('<div class="course-figure"><svg') and svg.count("<svg") == 1
    # a machine the registry has no roof for is left out rather than drawn against a guess
    assert "No GPU receipt of this lab" in batch_decode.receipts_roofline_svg([_receipt(kind="cpu")])
