"""Lesson 6A: its formulas, the lesson's snippet and the page's headline values, on values worked by hand.

Floors by hand (RTX 4090: 1,008 GB/s, 165.2 TFLOP/s; BF16; context S = 1,024):
- Qwen2.5-7B: M = 7,070,619,136 matmul parameters -> M b / beta = 14,141,238,272 / 1.008e12 = 14.02901 ms;
  kappa S / beta = 57,344 * 1,024 / 1.008e12 = 0.05825 ms per sequence. tau(B=1) = 14.08726 ms.
- Qwen2.5-0.5B: M = 494,032,768 -> 988,065,536 / 1.008e12 = 0.98022 ms; 12,288 * 1,024 / 1.008e12 =
  0.01248 ms. tau_d(B=1) = 0.99271 ms; rho = 0.99271 / 14.08726 = 0.070468.
- verification at B = 1, k = 4: 5 tokens, still weight-bound (2 M 5 / P = 0.428 ms < 14.029 ms); its
  attention reads the sequence's cache once for all 5 queries (roofline.spec_step_floors), so
  tau_v = 14.02901 + 0.05825 = 14.08726 ms = tau.
- E(0.7, 4) = (1 - 0.7^5) / 0.3 = 0.83193 / 0.3 = 2.7731; sigma = 2.7731 * 14.08726 / (4 * 0.99271 + 14.08726)
  = 39.0654 / 18.0581 = 2.1633.
"""

from __future__ import annotations

import pytest
from test_calculators import node_calc

from conftest import ROOT
from infercourse import calculators, registry, roofline, snippets
from infercourse.pages import values_for

PAGE = "lessons/6a-speculative-decoding.md"
G4090 = registry.gpu("RTX 4090")
TARGET = registry.model(registry.COURSE_MODEL).config
DRAFT = registry.model("Qwen/Qwen2.5-0.5B-Instruct").config


def _v(name: str):
    return values_for(PAGE)[name].value


@pytest.mark.parametrize(
    "alpha, k, tokens",
    [
        (0.0, 4, 1.0),  # every draft rejected: the target's own token only
        (1.0, 4, 5.0),  # every draft kept: k + 1
        (0.5, 1, 1.5),  # 1 + 0.5
        (0.5, 3, 1.875),  # 1 + 0.5 + 0.25 + 0.125
        (0.7, 4, 2.7731),  # (1 - 0.16807) / 0.3
    ],
)
def test_expected_tokens_per_step_by_hand(alpha, k, tokens):
    assert roofline.expected_tokens_per_step(alpha, k) == pytest.approx(tokens, rel=1e-12)


@pytest.mark.parametrize("alpha, k", [(-0.1, 4), (1.5, 4), (True, 4), (0.5, 0), (0.5, 2.0), (0.5, True)])
def test_expected_tokens_per_step_refuses_bad_input(alpha, k):
    with pytest.raises(ValueError, match="alpha|k"):
        roofline.expected_tokens_per_step(alpha, k)


def test_spec_speedup_by_hand():
    # alpha 0.5, k = 1: E = 1.5 tokens for 1 draft step of 1 + a verification of 10, against 10 per token:
    # 1.5 * 10 / 11 = 1.363636...
    assert roofline.spec_speedup(0.5, 1, 10.0, 1.0, 10.0) == pytest.approx(15 / 11, rel=1e-12)
    with pytest.raises(ValueError, match="draft_step"):
        roofline.spec_speedup(0.5, 1, 10.0, 0.0, 10.0)


@pytest.mark.parametrize("n, k, steps", [(41, 4, 9), (13, 3, 4), (1, 4, 1), (2, 4, 2), (42, 4, 10)])
def test_spec_decode_steps_by_hand(n, k, steps):
    # 1 + ceil((n - 1) / (k + 1)): 40 / 5 = 8; 12 / 4 = 3; 0; ceil(1/5) = 1; ceil(41/5) = 9
    assert roofline.spec_decode_steps(n, k) == steps


def test_spec_step_floors_by_hand():
    tau, tau_d, tau_v = roofline.spec_step_floors(G4090, TARGET, DRAFT, 1024, 1, 4)
    assert tau == pytest.approx(14_141_238_272 / 1.008e12 + 57_344 * 1024 / 1.008e12, rel=1e-12)
    assert tau_d == pytest.approx(988_065_536 / 1.008e12 + 12_288 * 1024 / 1.008e12, rel=1e-12)
    # verification of 5 tokens: the weights once (14.029 ms), the cache once (58.25 us; its 5 x 401,408 x 1,024
    # FLOPs take 12.4 us at 165.2 TFLOP/s): equal to the plain step at B = 1
    assert tau_v == pytest.approx(14_141_238_272 / 1.008e12 + 57_344 * 1024 / 1.008e12, rel=1e-12)


def test_speedup_at_batch_64_by_hand():
    # B = 64 on the RTX 4090: tau = max(2 M 64 / P = 5.478 ms, 14.029 ms) + 64 * 0.05825 ms = 17.757 ms;
    # tau_d = 0.98022 + 64 * 0.01248 = 1.77915 ms; verification of 320 tokens: matmuls compute-bound,
    # 2 * 7,070,619,136 * 320 / 165.2e12 = 27.392 ms, + each cache read once, 64 * 0.05825 = 3.728 ms
    # (its FLOPs, 320 * 401,408 * 1,024 / 165.2e12 = 0.796 ms, take less): 31.120 ms.
    # sigma = 2.7731 * 17.757 / (4 * 1.77915 + 31.120) = 49.243 / 38.237 = 1.2878: still a gain
    tau, tau_d, tau_v = roofline.spec_step_floors(G4090, TARGET, DRAFT, 1024, 64, 4)
    assert tau_v == pytest.approx(2 * 7_070_619_136 * 320 / 165.2e12 + 64 * 57_344 * 1024 / 1.008e12, rel=1e-12)
    assert roofline.spec_speedup(0.7, 4, tau, tau_d, tau_v) == pytest.approx(1.2878, abs=1e-4)


def test_snippet_keeps_the_target_distribution():
    toy = snippets.load("lesson_6a/rejection_sampling.py")
    # min(pi, q): 0.30 + 0.30 + 0.05 + 0.05 = 0.70
    assert toy.acceptance(toy.TARGET, toy.DRAFT) == pytest.approx(0.70, abs=1e-12)
    out = toy.output_distribution(toy.TARGET, toy.DRAFT)
    # "the": 0.30 kept + 0.30 * (0.20 / 0.30) = 0.50; "a": 0.30 kept, no leftover; "cat": 0.05 + 0.3 * 0.1/0.3
    assert out == pytest.approx(toy.TARGET, abs=1e-12)
    assert toy.expected_tokens(0.7, 4) == pytest.approx(2.7731, rel=1e-12)
    assert toy.expected_tokens(1, 4) == 5


def test_the_target_check_fails_on_a_snippet_that_drops_the_residual(tmp_path, monkeypatch):
    """The fault planted: the snippet's output distribution without the rejection's residual draw. The
    check above (emitted = target) must then fail: "the" would come out at 0.30, not 0.50."""
    source = (ROOT / "snippets" / "lesson_6a" / "rejection_sampling.py").read_text(encoding="utf-8")
    planted = source.replace(" + (1 - alpha) * residual[x] / total for x in pi}", " for x in pi}")
    assert planted != source, "the snippet no longer has the line this test edits"
    (tmp_path / "lesson_6a").mkdir()
    (tmp_path / "lesson_6a" / "rejection_sampling.py").write_text(planted, encoding="utf-8")
    monkeypatch.setattr(snippets, "SNIPPETS_DIR", tmp_path)
    toy = snippets.load("lesson_6a/rejection_sampling.py")
    out = toy.output_distribution(toy.TARGET, toy.DRAFT)
    assert out["the"] == pytest.approx(0.30, abs=1e-12)  # min(0.50, 0.30): the kept drafts alone
    assert out != pytest.approx(toy.TARGET, abs=1e-3)


def test_lesson_6a_headline_values():
    assert _v("tau") == pytest.approx(0.01408726, abs=1e-8)
    assert _v("tau_d") == pytest.approx(0.00099271, abs=1e-8)
    assert _v("tau_v") == pytest.approx(0.01408726, abs=1e-8)  # = tau: weights once, cache once (worked above)
    assert _v("rho") == pytest.approx(0.070468, abs=1e-6)
    assert _v("E_ex") == pytest.approx(2.7731, rel=1e-12)
    # sigma = 2.7731 * 14.08726 / (4 * 0.99271 + 14.08726) = 39.0654 / 18.0581 = 2.1633
    assert _v("sigma_ex") == pytest.approx(2.1633, abs=1e-4)
    # lesson 2B's band. Slow end: floor / 0.81 + every launch at 6 us, (10 L + 6) launches:
    # target 14.08726 / 0.81 + 286 * 0.006 = 17.39168 + 1.716 = 19.10768 ms; draft (24 layers)
    # 0.99271 / 0.81 + 246 * 0.006 = 1.22557 + 1.476 = 2.70157 ms;
    # 2.7731 * 19.10768 / (4 * 2.70157 + 19.10768) = 52.9880 / 29.91396 = 1.7713
    assert _v("tau_d_slow") == pytest.approx(0.00270157, abs=1e-8)
    assert _v("sigma_ex_slow") == pytest.approx(1.7713, abs=1e-4)
    # fast end: floor + 6 launches at 4 us = + 0.024 ms: 2.7731 * 14.11126 / (4 * 1.01671 + 14.11126) = 2.1527
    assert _v("sigma_ex_fast") == pytest.approx(2.1527, abs=1e-4)
    # B* = R b / 2 = (165.2e12 / 1.008e12) * 2 / 2 = 163.89; / (k + 1) = 32.78
    assert _v("bstar") == pytest.approx(165.2 / 1.008, rel=1e-12)
    assert _v("bstar_over_k1") == pytest.approx(165.2 / 1.008 / 5, rel=1e-12)
    # TPOT with speculation: (4 * 0.99271 + 14.08726) / 2.7731 = 18.0581 / 2.7731 = 6.5119 ms
    assert _v("tpot_spec_ex") == pytest.approx(0.0065119, abs=1e-7)
    # the draft's vocabulary differs from the target's: 152,064 vs 151,936 rows (their configs)
    assert (_v("V_target"), _v("V_draft")) == (152_064, 151_936)
    # KV budget with the draft (lesson 1A's 6,317,926,522.88 B): (budget - 988,065,536) / (57,344 + 12,288)
    # = 76,543.6 tokens -> whole blocks of 16: 4,783 * 16 = 76,528, against 110,160
    assert (_v("kv_tokens"), _v("kv_tokens_draft")) == (110_160, 76_528)
    # problem 2: 800 + 620 + 480 + 370 = 2,270 of 4 * 1,000; 1 + 2.27 = 3.27; E(0.8, 4) = (1 - 0.32768) / 0.2
    assert (_v("p2_drafted"), _v("p2_accepted")) == (4000, 2270)
    assert (_v("p2_rate"), _v("p2_mean_len")) == (0.5675, 3.27)
    assert _v("p2_iid") == pytest.approx(3.3616, rel=1e-12)
    # a gain at B = 64 on the RTX 4090 (worked above); a loss at B = 128: tau = 14.029 + 128 * 0.05825 =
    # 21.485 ms, tau_d = 0.98022 + 128 * 0.01248 = 2.578 ms, tau_v = 2 * 7,070,619,136 * 640 / 165.2e12 = 54.78 ms
    # + 7.456 ms = 62.24 ms: sigma = 2.7731 * 21.485 / (4 * 2.578 + 62.24) = 59.58 / 72.55 = 0.821
    assert _v("batch_rows")[4]["batch"] == 64 and _v("batch_rows")[4]["s4090"] == pytest.approx(1.2878, abs=1e-4)
    assert _v("batch_rows")[5]["batch"] == 128 and _v("batch_rows")[5]["s4090"] == pytest.approx(0.821, abs=1e-3)
    assert 64 < _v("break_4090") <= 128


def test_the_calculator_says_what_the_lesson_says_in_python_and_in_javascript():
    # lesson 6A's inputs (alpha 0.7, k = 4, context 1,024, the lab's draft) on both cards at every batch of its
    # table: the Python reference and the JavaScript port under Node both give the page's speedups
    target = dict(registry.model().config)
    cases = [
        {"config": target, "gpu": gpu, "alpha": 0.7, "k": 4, "batch": b, "context": 1024, "draft": None}
        for gpu in ("RTX 4090", "H200")
        for b in (1, 4, 16, 32, 64, 128)
    ]
    page = {
        (r["batch"], gpu): r[key] for r in _v("batch_rows") for gpu, key in (("RTX 4090", "s4090"), ("H200", "sh200"))
    }
    python = [calculators.spec_calc(**c) for c in cases]
    for case, out in zip(cases, python, strict=True):
        assert out["speedup"] == pytest.approx(page[case["batch"], case["gpu"]], rel=1e-12), case
    draft = dict(registry.model(calculators.DRAFT_MODEL).config)
    javascript = node_calc("specCalc", [c | {"draft": draft} for c in cases])
    for case, py, js in zip(cases, python, javascript, strict=True):
        assert js["errors"] == {} and js["speedup"] == pytest.approx(py["speedup"], rel=1e-12), (case["batch"], js)
        assert js["tau_d"] == pytest.approx(py["tau_d"], rel=1e-12)
    # the old calculator held the draft at rho = 0.1 of tau: x1.98 at B = 1 and x1.364 at B = 64 (6A: x2.16, x1.29)
    assert round(python[0]["speedup"], 2) == 2.16 and round(python[4]["speedup"], 2) == 1.29
