"""Lab phases (lesson 0A): its grid, its claims on receipts worked by hand, its floors and the expected output."""

from __future__ import annotations

import pytest

from conftest import phases_receipt
from infercourse import labs, snippets
from infercourse.labs.core import floors
from infercourse.registry import gpu, model

CFG = model("Qwen/Qwen2.5-7B-Instruct").config


def test_labs_uses_the_grid_of_the_lab_itself():
    lab = snippets.load("labs/phases.py")  # must import without vLLM (the docs venv has none)
    assert labs.phases.GRID == labs.spec("phases").grid == lab.GRID
    assert lab.GRID == ((128, 32), (128, 128), (128, 512), (1024, 128), (4096, 128))


def _by_claim(receipt) -> dict:
    return {r.claim: r.passed for r in labs.check(receipt)}


def test_claims_pass_on_a_receipt_that_shows_the_lesson():
    # TTFT 20 -> 110 -> 450 ms: x5.5 and x4.09, both >= 1.2.
    # TPOT 17.0 -> 17.5 ms: +2.9 %; TTFT +2,150 %; 2.9 % <= 0.1 * 2,150 % and 17.5/17 = 1.029 <= 1.25.
    # decode = 17 ms * (n - 1): exactly a line, R^2 = 1, spread 1.0.
    # steps and tokens: STEPS_BY_HAND above.
    assert _by_claim(phases_receipt()) == {
        "engine_steps_exact": True,
        "ttft_grows_with_prompt": True,
        "tpot_flat_vs_ttft": True,
        "tpot_within_tolerance_gpu": True,
        "decode_linear_in_output": True,
    }


def test_timing_claims_are_printed_not_asserted_on_a_cpuphases_receipt():
    # the same failing timings as test_ttft_that_does_not_grow_fails etc., on a CPU receipt: not judged
    receipt = phases_receipt(kind="cpu", ttft=(20.0, 22.0, 21.0), tpot_4096=90.1, decode=(1.0, 1.1, 1.0, 1.0, 1.0))
    results = {r.claim: r for r in labs.check(receipt)}
    timed = ("ttft_grows_with_prompt", "tpot_flat_vs_ttft", "decode_linear_in_output")
    assert all(results[c].passed is None and "CPU receipt: a timing" in results[c].detail for c in timed)
    assert "TTFT 20.00 / 22.00 / 21.00 ms" in results["ttft_grows_with_prompt"].detail  # still shown
    assert results["engine_steps_exact"].passed is True  # exact counts are checked on the CPU too
    assert labs.report(receipt)[0] is True


def test_engine_steps_off_by_one_fail_on_any_machine():
    for kind in ("gpu", "cpu"):
        receipt = phases_receipt(kind=kind)
        receipt["results"][4]["engine_steps"] = 3 * 129  # as if the chunk that yields no token were recorded
        assert _by_claim(receipt)["engine_steps_exact"] is False
        receipt = phases_receipt(kind=kind)
        receipt["results"][0]["step_tokens"] = 3 * 159  # S + n - 1: the last token not counted
        assert _by_claim(receipt)["engine_steps_exact"] is False


def test_expected_steps_by_hand():
    # 4096 prompt tokens in chunks of 2048: the first chunk's step yields no token and is not recorded, the
    # second yields the first token, then 127 more: 128 recorded steps; 4096 + 128 tokens
    assert labs.phases.expected_steps(4096, 128) == (128, 4224)
    assert labs.phases.expected_steps(2049, 2) == (2, 2051)


def test_ttft_that_does_not_grow_fails():
    # 22/20 = 1.1 < 1.2.
    assert _by_claim(phases_receipt(ttft=(20.0, 22.0, 450.0)))["ttft_grows_with_prompt"] is False


def test_tpot_growing_like_ttft_fails():
    # TTFT growth 450/20 - 1 = 21.5; TPOT 17 -> 90.1 is growth 4.3 > 0.1 * 21.5 = 2.15; ratio 5.3 > 1.25.
    claims = _by_claim(phases_receipt(tpot_4096=90.1))
    assert claims["tpot_flat_vs_ttft"] is False and claims["tpot_within_tolerance_gpu"] is False


def test_gpu_tolerance_boundary():
    # 21.25/17 = 1.25 exactly: within; 21.3/17 = 1.253: outside.
    assert _by_claim(phases_receipt(tpot_4096=21.25))["tpot_within_tolerance_gpu"] is True
    assert _by_claim(phases_receipt(tpot_4096=21.3))["tpot_within_tolerance_gpu"] is False


def test_gpu_tolerance_does_not_apply_to_a_cpuphases_receipt():
    assert _by_claim(phases_receipt(kind="cpu", tpot_4096=30.0))["tpot_within_tolerance_gpu"] is None


def test_decode_that_does_not_grow_with_output_fails():
    # decode 1.0, 1.1, 1.0 s for n-1 = 31, 127, 511: per step 32.3, 8.66, 1.96 ms, spread x16.5 > 2.
    decode = [1.0, 1.1, 1.0, 17 * 127 / 1e3, 17.5 * 127 / 1e3]
    assert _by_claim(phases_receipt(decode=decode))["decode_linear_in_output"] is False
    # decode growing with n squared: 31^2, 127^2, 511^2 ms. R^2 of a line is 0.981 (passes R^2 alone),
    # per step 31, 127, 511 ms: spread 511/31 = 16.5 > 2.
    square = [31**2 / 1e3, 127**2 / 1e3, 511**2 / 1e3, 2.0, 2.0]
    result = {r.claim: r for r in labs.check(phases_receipt(decode=square))}["decode_linear_in_output"]
    assert result.passed is False and "R^2 = 0.981" in result.detail and "x16.48" in result.detail
    flat = [1.0, 1.0, 1.0, 2.0, 2.0]  # no line to fit at all: fails, does not raise
    assert _by_claim(phases_receipt(decode=flat))["decode_linear_in_output"] is False


def test_linear_fit_by_hand():
    # y = 1 + 2x exactly.
    assert labs.linear_fit([0, 1, 2], [1, 3, 5]) == pytest.approx((1.0, 2.0, 1.0))
    # y = 0, 1, 0: slope sum((x-1)(y-1/3))/2 = (1/3 - 1/3)/2 = 0, so R^2 = 0.
    assert labs.linear_fit([0, 1, 2], [0, 1, 0]) == pytest.approx((1 / 3, 0.0, 0.0), abs=1e-12)
    with pytest.raises(ValueError):
        labs.linear_fit([1, 2], [1, 2])


def test_phases_floors_by_hand():
    f = floors(gpu("RTX 4090"), CFG, 128, 32)
    # TTFT = prefill_floor(128). Matmuls: compute (2 (M - H) 128 + 2 H) = 1,671,649,165,312 FLOP
    # / 165.2e12 = 10.1189 ms; memory M*b = 14,141,238,272 B / 1008e9 = 14.0290 ms: memory-bound.
    # Attention: 401,408 * 128 * 129 / 2 = 3,314,024,448 FLOP / 165.2e12 = 0.02006 ms; KV
    # 57,344 * 128 = 7,340,032 B / 1008e9 = 0.00728 ms: compute. Sum 14.0491 ms.
    assert f["ttft_s"] == pytest.approx(14_141_238_272 / 1008e9 + 3_314_024_448 / 165.2e12)
    assert f["ttft_s"] * 1e3 == pytest.approx(14.0491, abs=1e-4)
    # TPOT = decode_step_floor at S + n/2 = 144: matmuls 14.0290 ms (memory); attention
    # 57,344 * 144 = 8,257,536 B / 1008e9 = 0.00819 ms (intensity 7 FLOP/B: memory). 14.0372 ms.
    assert f["tpot_s"] * 1e3 == pytest.approx(14.0372, abs=1e-4)
    assert f["decode_s"] == pytest.approx(31 * (14_141_238_272 + 8_257_536) / 1008e9)  # 0.4352 s
    g = floors(gpu("RTX 4090"), CFG, 4096, 128)
    # TTFT: matmuls 2 (M - H) 4096 + 2 H = 53,458,983,452,672 FLOP / 165.2e12 = 323.6016 ms (compute);
    # attention 401,408 * 4096 * 4097 / 2 = 3,368,076,443,648 FLOP / 165.2e12 = 20.3879 ms. 343.9895 ms.
    assert g["ttft_s"] * 1e3 == pytest.approx(343.9895, abs=1e-3)
    # TPOT at 4160: (14,141,238,272 + 57,344 * 4160 = 14,379,789,312 B) / 1008e9 = 14.2657 ms.
    assert g["tpot_s"] * 1e3 == pytest.approx(14.2657, abs=1e-4)
    for bad in ((0, 32), (128, 0), (128.0, 32), (True, 32)):
        with pytest.raises(ValueError, match="must be a positive integer"):
            floors(gpu("RTX 4090"), CFG, *bad)


def test_phases_floors_with_an_odd_output_count():
    # n = 33: mean context 128 + 33 // 2 = 144 (rounded down), as for n = 32; no fractional token count
    f = floors(gpu("RTX 4090"), CFG, 128, 33)
    assert f["tpot_s"] * 1e3 == pytest.approx(14.0372, abs=1e-4)  # the n = 32 value above
    assert f["decode_s"] == pytest.approx(32 * (14_141_238_272 + 8_257_536) / 1008e9)


def test_expected_output_is_labelled_prediction_with_the_hand_worked_rows(tmp_path):
    text = labs.expected_output("phases", receipts_dir=tmp_path)
    assert text.startswith("**Prediction for the RTX 4090 from the roofline, not a measurement.**")
    assert "a real run is slower" in text and "embedding is a lookup" in text and "S + n/2" in text
    assert "| 128 | 32 | 14.0 | 14.04 | 0.44 |" in text  # 14.0491 ms, 14.0372 ms, 31 x 14.0372 ms = 0.435 s
    assert "| 4,096 | 128 | 344.0 | 14.27 | 1.81 |" in text  # 343.99 ms, 14.2657 ms, 127 x 14.2657 ms = 1.812 s
    assert "No GPU receipt is committed yet" in text


def test_the_notebook_exercises_by_hand():
    """One request alone: n = 64 recorded steps. TTFT from 1,024 to 4,096 tokens: 343.9895 ms (above) over
    82.1806 ms: matmuls (2 (M - H) 1,024 + 2 H) = 13,365,563,359,232 FLOP / 165.2e12 = 80.9054 ms (2 (M - H) =
    13,051,243,520 and 2 H = 1,089,994,752 from the two rows above), attention 401,408 x 1,024 x 1,025 / 2 =
    210,658,918,400 FLOP / 165.2e12 = 1.2752 ms. TPOT from 128 to 4,096 (128 out): 14,379,789,312 B (above) over
    14,141,238,272 + 57,344 x 192 = 14,152,248,320 B."""
    steps, ttft, tpot = (e.answer() for e in labs.spec("phases").exercises)
    assert steps == 64
    assert ttft == pytest.approx(343.9895 / 82.1806, rel=1e-5)
    assert tpot == pytest.approx(14_379_789_312 / 14_152_248_320, rel=1e-9)


def test_the_notebook_compares_engine_steps_with_the_lesson_s_count():
    """The notebook's first panel: each row's steps beside n x repeats (3 repeats in phases_receipt), exact."""
    receipt = phases_receipt(kind="cpu")
    found = labs.compared(receipt)
    # rows (128, 32), (128, 128), (128, 512), (1024, 128), (4096, 128): n x 3 steps
    assert [(c.measured, c.predicted, c.kind) for c in found] == [
        (96, 96, "exact"),
        (384, 384, "exact"),
        (1536, 1536, "exact"),
        (384, 384, "exact"),
        (384, 384, "exact"),
    ]
    assert "    engine steps (3 runs): all 5 rows as predicted, exactly" in labs.report(receipt)[1]  # one line
    receipt["results"][4]["engine_steps"] = 3 * 129  # the planted fault of test_engine_steps_off_by_one...
    assert labs.compared(receipt)[4].ratio == 129 / 128
    assert "NOT as predicted" in labs.report(receipt)[1]
