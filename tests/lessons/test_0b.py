"""Lesson 0B: the page's headline values and the worked example (lesson_0b/latency_metrics.py), by hand."""

from __future__ import annotations

import pytest

from infercourse.pages import values_for
from infercourse.snippets import constant, load


def _v(page: str, name: str):
    return values_for(page)[name].value


def test_lesson_0b_headline_values():
    page = "lessons/0b-metrics.md"
    # 2NS's excess 4Vd per token: 4 * 544,997,376 / (2 * 7,615,616,512) = 14.3 % of 2NS;
    # against the exact count 2N - 4Vd: 2,179,989,504 / 5,435,627,008 = 16.7 % too high
    assert _v(page, "prefill_overcount_of_2n") == pytest.approx(0.1431, abs=1e-4)
    assert _v(page, "prefill_overcount_of_exact") == pytest.approx(0.1671, abs=1e-4)
    # request C: arrives 100 ms, tokens at 400, 430, 460, 610, 640: TTFT 300, TPOT 240/4 = 60, E2E 540
    assert (_v(page, "c_ttft"), _v(page, "c_tpot"), _v(page, "c_e2e")) == (300, 60, 540)
    # TPOT floor at 128 tokens: 14,141,238,272 B / 1.008e12 + 128 x 57,344 B / 1.008e12 = 14.02901 + 0.00728 ms;
    # lesson 2B's band: + 0.024 ms to 14.03629 / 0.81 + 1.716 = 17.32875 + 1.716 = 19.04475 ms
    assert _v(page, "tpot_floor_128") == pytest.approx(14.03629e-3, rel=1e-6)
    assert (_v(page, "tpot_band_lo"), _v(page, "tpot_band_hi")) == pytest.approx((14.06029e-3, 19.04475e-3), rel=1e-6)
    # goodput break-even: 4/6 of requests must meet the SLO, so more than 1/3 missing lowers it
    assert _v(page, "q4_break_even_miss") == pytest.approx(1 / 3)


lm = load("lesson_0b/latency_metrics.py")


def test_per_request_metrics():
    a, b, c = lm.MIXED
    assert a.token_ms == (100, 160, 220) and b.token_ms == tuple(range(150, 351, 20))
    assert [lm.ttft(r) for r in lm.MIXED] == [100, 150, 300]  # C: 400 - 100 (arrival)
    assert [lm.tpot(r) for r in lm.MIXED] == [60, 20, 60]  # C: (640 - 400) / 4
    assert [lm.e2e(r) for r in lm.MIXED] == [220, 350, 540]
    assert lm.itls(c) == [30, 30, 150, 30]
    # E2E = TTFT + (n - 1) * TPOT, exactly
    for r in lm.MIXED + lm.SAME_LENGTH:
        assert lm.e2e(r) == pytest.approx(lm.ttft(r) + (len(r.token_ms) - 1) * lm.tpot(r))


def test_mixed_lengths_means_differ():
    s = lm.summary(lm.MIXED)
    assert s["mean_tpot_ms"] == pytest.approx((60 + 20 + 60) / 3)  # 46.67, one vote per request
    # gaps: A 2 x 60, B 10 x 20, C 30+30+150+30 -> (120 + 200 + 240) / 16 = 35
    assert s["mean_itl_ms"] == pytest.approx(560 / 16) == 35.0
    # sorted gaps: 20 x10, 30 x3, 60 x2, 150 -> rank 15*p
    assert s["median_itl_ms"] == 20  # rank 7.5 between two 20s
    assert s["p90_itl_ms"] == 60  # rank 13.5 between two 60s
    assert s["p99_itl_ms"] == pytest.approx(60 + 0.85 * 90)  # rank 14.85: 136.5
    assert s["duration_s"] == pytest.approx(0.64)  # first arrival 0, last token 640 ms
    assert s["request_throughput"] == pytest.approx(3 / 0.64)
    assert s["output_throughput"] == pytest.approx((3 + 11 + 5) / 0.64)
    assert s["goodput"] == pytest.approx(1 / 0.64)  # only B: TTFT 150 <= 200 and TPOT 20 <= 50
    assert s["mean_ttft_ms"] == pytest.approx(550 / 3) and s["mean_e2el_ms"] == pytest.approx(370)


def test_same_length_means_agree():
    s = lm.summary(lm.SAME_LENGTH)
    assert all(len(r.token_ms) == 5 for r in lm.SAME_LENGTH)
    # gaps: A 4 x 60 = 240, B 4 x 20 = 80, C 240 -> 560 / 12 = 46.67 = (60 + 20 + 60) / 3
    assert s["mean_itl_ms"] == pytest.approx(560 / 12) == pytest.approx(140 / 3)
    assert s["mean_tpot_ms"] == pytest.approx(140 / 3)
    assert s["p99_itl_ms"] == pytest.approx(60 + 0.89 * 90)  # 12 gaps, rank 10.89: 140.1


def test_percentile_is_numpy_linear():
    assert lm.percentile([1, 2, 3, 4], 50) == 2.5
    assert lm.percentile([5], 99) == 5
    with pytest.raises(ValueError):
        lm.percentile([], 50)
    with pytest.raises(ValueError):
        lm.percentile([1, 2], 101)


def test_one_token_request_has_no_tpot():
    r = lm.Request("x", 0, (10,))
    assert lm.tpot(r) is None and lm.itls(r) == [] and lm.meets_slo(r)


@pytest.mark.parametrize("arrival, tokens", [(0, ()), (50, (40, 60)), (0, (10, 5))])
def test_bad_timestamps_name_the_field(arrival, tokens):
    with pytest.raises(ValueError, match="token_ms"):
        lm.Request("bad", arrival, tokens)


def test_lab_grid_is_read_without_importing_the_lab():
    assert constant("labs/metrics.py", "GRID") == ((128, 128), (1024, 128), (4096, 128), (1024, 512))
    with pytest.raises(ValueError, match="NO_SUCH"):
        constant("labs/metrics.py", "NO_SUCH")
    with pytest.raises(FileNotFoundError):
        constant("labs/missing.py", "GRID")
