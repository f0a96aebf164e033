"""The physics check: no time or rate the course predicts asks a card for more FLOP/s than its peak or more
bytes/s than its bandwidth.

Every rate a page shows carries its :class:`~infercourse.roofline.Demand` (``PageValues.add`` refuses a rate
without one), and so does every serving point of the step model (``batching.rate_point``,
``batching.max_request_rate``) and every lab spec that predicts a time or a rate (``LabSpec.demands``). A
demand counts the work from the model's shapes (``roofline.request_flops``, ``decode_demand``), not from
the step model, so a step model that leaves work out predicts a rate whose demand is above the peak.
"""

from __future__ import annotations

import re

import pytest

from infercourse import batching, labs, registry, roofline
from infercourse.pages import PAGES, RATE_UNITS, PageValues, values_for


def demands_in(value) -> list[roofline.Demand]:
    """Every Demand in ``value``: itself, or inside its lists, tuples and dicts (a page's records)."""
    if isinstance(value, roofline.Demand):
        return [value]
    if isinstance(value, dict):
        return [d for v in value.values() for d in demands_in(v)]
    if isinstance(value, (list, tuple)):
        return [d for v in value for d in demands_in(v)]
    return []


def problems_of(values) -> list[str]:
    """What is impossible among a page's ``values`` (name -> Value): one line per excess, with the value's name."""
    return [
        f"{name}: {problem}"
        for name, v in values.items()
        for d in demands_in(v.demand) + demands_in(v.value)
        for problem in d.problems()
    ]


@pytest.mark.parametrize("page", sorted(PAGES))
def test_every_time_and_rate_on_a_page_is_physically_possible(page):
    assert problems_of(values_for(page)) == []


TIME_OR_RATE = re.compile(r"\d\s*(?:ms|µs)\b|/s\b|\(ms\)|\(s\)")
"""A time or a rate in a prediction's Markdown: "14.0 ms", "tok/s", a "(ms)" or "(s)" column."""


@pytest.mark.parametrize("lab", [lab for lab in labs.wired() if labs.spec(lab).demands is not None])
def test_every_time_and_rate_a_lab_predicts_is_physically_possible(lab):
    demands = labs.spec(lab).demands()
    assert demands, f"{lab}: demands() returned nothing; return what each predicted time or rate asks of the card"
    assert [p for d in demands for p in d.problems()] == []


@pytest.mark.parametrize("lab", labs.wired())
def test_a_lab_that_predicts_a_time_or_a_rate_declares_its_demands(lab):
    spec = labs.spec(lab)
    shown = TIME_OR_RATE.findall(spec.prediction())
    assert spec.demands is not None or not shown, (
        f"{lab}'s prediction shows {shown[:3]}: give its LabSpec demands=... (what each time or rate asks of the "
        "card, roofline.decode_demand / prefill_demand / serving_demand) so the physics check can hold it"
    )


def test_lesson_4a_shows_rates_with_their_demands():
    # the rates of lesson 4A all say what they ask of the card; the knee on the RTX 4090 asks 86 % of its peak
    values = values_for("lessons/4a-continuous-batching.md")
    rates = {name for name, v in values.items() if v.unit in RATE_UNITS}
    assert {"lam_kv", "x_kv", "lam_h200", "lam_knee", "lam_peak"} <= rates
    knee = values["lam_kv"].demand
    assert 0.85 < knee.flop_s / (knee.gpu.bf16_dense_tflops * 1e12) < 0.86


def test_a_step_model_that_leaves_prefill_out_fails_the_check(monkeypatch):
    # plant the old model: a serving step that is the decode step alone (the prompts' compute left out)
    def decode_only(gpu, config, batch, prompt_len, output_len, overhead_s=0.0, weight_bytes=2):
        return batching.step_time(gpu, config, batch, prompt_len + output_len // 2, overhead_s, weight_bytes)

    monkeypatch.setattr(batching, "serving_step_time", decode_only)
    g4090, cfg = registry.gpu("RTX 4090"), registry.model(registry.COURSE_MODEL).config
    knee = batching.max_request_rate(batching.Server(g4090, cfg, 512, 256, registry.STEP_OVERHEAD_S, 143, 8192))
    assert round(knee["rate"], 1) == 27.6  # the figure lesson 4A printed before prefill was counted
    page = PageValues("planted.md")
    page.add("lam", knee["rate"], "requests/s", knee["demand"])
    (problem,) = problems_of(page.values())
    assert problem.startswith("lam: 27.6 requests/s") and "174% of the RTX 4090's peak" in problem, problem


def test_a_demand_above_the_bandwidth_fails():
    g = registry.gpu("RTX 4090")
    (problem,) = roofline.Demand(g, 1e12, 2.016e12, "a planted step").problems()  # twice 1,008 GB/s
    assert "needs 2,016 GB/s, 200% of the RTX 4090's 1,008 GB/s" in problem


def test_a_rate_without_its_demand_is_refused():
    page = PageValues("planted.md")
    with pytest.raises(ValueError, match="must say what it asks of the card"):
        page.add("x", 100.0, "tokens/s")
    with pytest.raises(ValueError, match="only a rate"):
        page.add("t", 0.01, "s", "a reason")
