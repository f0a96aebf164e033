"""Lesson 2A's lab receipts drawn against the roofline (batch_decode spec), on a receipt written here."""

from __future__ import annotations

import json

import pytest

from infercourse import labs
from infercourse.labs import batch_decode


def _receipt(kind="gpu") -> dict:
    rows = [{"batch": b, "step_ms": step, "median_tpot_ms": step, "tokens_per_s": b / step * 1e3,
             "bytes_per_step": 14_200_000_000, "achieved_gb_s": 14.2 / step * 1e3, "memory_floor_ms": 14.1}
            for b, step in ((1, 20.0), (8, 21.0), (64, 28.0))]
    machine = ({"kind": "gpu", "name": "NVIDIA GeForce RTX 4090", "memory_gib": 24.0, "driver": "550.54",
                "cuda_driver_api": "12.4"} if kind == "gpu" else {"kind": "cpu", "name": "AMD EPYC", "cores": 2})
    return {
        "schema": 1, "lab": "batch_decode", "command": "python snippets/labs/batch_decode.py", "git_commit": None,
        "date_utc": "2026-11-30T10:00:00Z", "machine": machine,
        "versions": {"python": "3.11.7", "vllm": "0.26.0", "torch": "2.11.0", "transformers": "5.5.3"},
        "model": "Qwen/Qwen2.5-7B-Instruct", "load_format": "auto", "dtype": "auto", "max_model_len": 2048,
        "settings": {"prompt_len": 512, "output_len": 128, "matmul_params": 7_070_619_136},
        "engine_start_s": 60.0, "units": {**batch_decode.SPEC.units, "engine_start_s": "s"}, "results": rows,
    }


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
