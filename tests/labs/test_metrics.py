"""Lab metrics: its spec's claims, receipts and expected output, on receipts worked by hand."""

from __future__ import annotations

import pytest

from conftest import CPU_MACHINE, GPU_MACHINE, claims_passed, make_receipt
from infercourse import labs, snippets
from infercourse.labs import metrics as metrics_spec

GPU, CPU = GPU_MACHINE, CPU_MACHINE


def _metrics(machine=GPU, tpot=17.0, itl=17.0, ttft=(20.0, 110.0, 450.0)) -> dict:
    ttft_by_prompt = dict(zip((128, 1024, 4096), ttft, strict=True))
    rows = [
        {
            "prompt_tokens": s,
            "output_tokens": n,
            "ttft_ms": ttft_by_prompt[s],
            "tpot_ms": tpot,
            "e2e_ms": ttft_by_prompt[s] + (n - 1) * tpot,
            "tpot_mean_ms": tpot,
            "itl_mean_ms": itl,
        }
        for s, n in metrics_spec.GRID
    ]
    units = {k: "ms" for k in ("ttft_ms", "tpot_ms", "e2e_ms", "tpot_mean_ms", "itl_mean_ms")}
    return make_receipt("metrics", rows, units, machine=machine)


def test_metrics_grid_is_the_lab_s():
    lab = snippets.load("labs/metrics.py")  # imports without vLLM
    assert (
        metrics_spec.GRID
        == labs.spec("metrics").grid
        == lab.GRID
        == ((128, 128), (1024, 128), (4096, 128), (1024, 512))
    )
    assert labs.spec("metrics").cpu_max_model_len == 4096 + 128


def test_metrics_receipt_passes_on_gpu_with_tpot_above_floor():
    # TPOT floor at S=128, n=128 on the 4090 is about 14 ms (weights 14.1 GB / 1008 GB/s); 17 ms is above it
    claims = claims_passed(_metrics())
    assert claims == {
        "ttft_grows_with_prompt": True,
        "tpot_flat_vs_ttft": True,
        "tpot_within_tolerance_gpu": True,
        "itl_mean_equals_tpot_mean": True,
        "tpot_above_floor_gpu": True,
    }


def test_metrics_tpot_below_the_floor_fails_on_gpu():
    # 10 ms per step would need 14.1 GB / 0.010 s = 1,410 GB/s, more than the 4090's 1,008 GB/s
    assert claims_passed(_metrics(tpot=10.0, itl=10.0))["tpot_above_floor_gpu"] is False


def test_metrics_itl_must_equal_tpot_for_equal_lengths():
    assert claims_passed(_metrics(itl=17.0 * 1.019))["itl_mean_equals_tpot_mean"] is True  # 1.9 % < 2 %
    assert claims_passed(_metrics(itl=17.0 * 1.03))["itl_mean_equals_tpot_mean"] is False  # 3 % > 2 %


def test_metrics_gpu_claims_are_not_applied_on_cpu():
    claims = claims_passed(_metrics(machine=CPU, tpot=1.0, itl=1.0, ttft=(5.0, 40.0, 200.0)))
    assert claims["tpot_within_tolerance_gpu"] is None and claims["tpot_above_floor_gpu"] is None
    assert claims["ttft_grows_with_prompt"] is None  # a timing: printed on a CPU receipt, not asserted
    assert claims["itl_mean_equals_tpot_mean"]  # the same timestamps pooled two ways: exact on any machine


def test_metrics_expected_output_is_a_labelled_prediction_of_every_row():
    text = labs.expected_output("metrics")
    assert text.startswith("**Prediction for the RTX 4090 from the roofline, not a measurement.**")
    rows = [line for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [r.split(" | ")[:2] for r in rows] == [
        ["| 128", "128"],
        ["| 1,024", "128"],
        ["| 4,096", "128"],
        ["| 1,024", "512"],
    ]
    # E2E floor = TTFT floor + (n - 1) x TPOT floor; for S = 128, n = 128: 14.0 ms + 127 x 14.04 ms ~ 1,797 ms
    ttft, tpot, e2e = (float(c.replace(",", "")) for c in rows[0].strip("| ").split(" | ")[2:])
    assert e2e == pytest.approx(ttft + 127 * tpot, abs=1.0)


def test_the_notebook_exercises_by_hand():
    """TPOT = (5,320 - 200) / (257 - 1) = 20 ms. Pooled ITL = (2 x 60 + 10 x 20) / 12 = 26.67 ms (mean TPOT 40).
    E2E floor of 1,024 + 512 on the RTX 4090: TTFT 82.1806 ms (tests/labs/test_phases.py) + 511 TPOTs at the mean
    context 1,024 + 256 = 1,280: (14,141,238,272 + 57,344 x 1,280) B / 1008e9 = 14.10182 ms -> 7,288.2 ms."""
    tpot, itl, e2e = (e.answer() for e in labs.spec("metrics").exercises)
    assert tpot == (5_320 - 200) / 256 == 20
    assert itl == pytest.approx(320 / 12, rel=1e-12)
    assert e2e == pytest.approx(82.1806 + 511 * (14_141_238_272 + 57_344 * 1_280) / 1008e9 * 1e3, rel=1e-6)


def test_the_notebook_compares_mean_itl_with_mean_tpot():
    """The notebook's first panel: each row's pooled mean ITL beside its mean TPOT (exact, on any machine)."""
    # three repeats of a row, 128 tokens each, at 16, 16 and 19 ms per gap: mean TPOT (16 + 16 + 19) / 3 = 17 ms
    # (the median, tpot_ms, is 16); pooled ITL (127 x 16 + 127 x 16 + 127 x 19) / (3 x 127) = 6,477 / 381 = 17 ms
    receipt = _metrics(machine=CPU, tpot=17.0, itl=17.0)
    for row in receipt["results"]:
        row["tpot_ms"] = 16.0
    found = labs.compared(receipt)
    assert [(c.row, c.quantity, c.measured, c.predicted, c.kind) for c in found][0] == (0, "mean ITL", 17, 17, "exact")
    assert len(found) == len(metrics_spec.GRID) and all(c.ratio == 1 for c in found)
    receipt = _metrics(itl=17.0 * 1.019)  # within the claim's 2 %, not the same number
    assert claims_passed(receipt)["itl_mean_equals_tpot_mean"] is True
    assert labs.compared(receipt)[0].ratio == pytest.approx(1.019)
    assert "NOT as predicted" in labs.report(receipt)[1]
