"""Lab expert_coverage (lesson 7B): the spec's claims, floors and prediction, and the lab's bad input, on receipts
worked by hand.

The tiny MoE of the CPU run: E = 16 experts, k = 2 per token, 2 MoE layers, 16 output tokens (15 decode steps).
Uniform routing at B = 2: 16 (1 - (14/16)^2) = 3.75 experts; its spread: p0 = 0.765625, p00 = (14 x 13 / (16 x 15))^2
= 0.575069, Var = 16 x 0.765625 x 0.234375 + 240 x (0.575069 - 0.586182) = 0.20417, sd 0.45185; a mean over
15 steps x 2 layers = 30 samples may reach 3.75 + 3 x 0.45185 / sqrt(30) = 3.99749.
Floors of OLMoE on the RTX 4090 at S = 144 (tests/lessons/test_7b.py): 2.358 ms at B = 1; at B = 64, 63.9876
experts: 6,814,887,373 weights read, 13,629,774,746 B -> 13.5216 ms, plus 64 x 144 x 131,072 B of cache -> 1.1984 ms:
14.720 ms.
"""

from __future__ import annotations

import pytest

from conftest import CPU_MACHINE, lab_refusal, make_receipt
from infercourse import labs
from infercourse.labs.expert_coverage import step_floor_s, uniform_bound
from infercourse.registry import gpu, model

SPEC = labs.spec("expert_coverage")
SETTINGS = {"experts": 16, "top_k": 2, "moe_layers": 2, "output_len": 16, "prompt_len": 16}


def _row(mode, batch, step_ms, mean=None, low=None, high=None, steps=15):
    counted = mode == "eager"
    return {
        "mode": mode,
        "batch": batch,
        "router_steps": steps if counted else None,
        "experts_mean": mean,
        "experts_min": low,
        "experts_max": high,
        "step_ms": step_ms,
    }


GOOD = [
    _row("eager", 1, 4.0, 2.0, 2, 2),
    _row("eager", 2, 4.1, 3.9, 2, 4),  # under the bound 3.9975
    _row("eager", 16, 6.0, 14.0, 12, 16),  # uniform: 16 (1 - 0.875^16) = 14.11
    _row("graphs", 1, 2.4),
    _row("graphs", 2, 3.7),
    _row("graphs", 16, 12.1),  # x5.04 over batch 1
]


def _claims(rows, machine=None) -> dict:
    extra = {"settings": SETTINGS} | ({} if machine is None else {"machine": machine})
    return {c.claim: c for c in labs.check(make_receipt("expert_coverage", rows, SPEC.units, **extra))}


def test_claims_hold_on_a_hand_worked_receipt():
    got = _claims(GOOD)
    assert all(c.passed for c in got.values()), got
    assert "x5.04" in got["step_grows_with_batch"].detail  # the graphs engine's rows are the timed ones


def test_the_uniform_bound_is_three_standard_errors_above_the_formula():
    receipt = make_receipt("expert_coverage", GOOD, SPEC.units, settings=SETTINGS)
    assert uniform_bound(receipt, GOOD[1]) == pytest.approx(3.99749, abs=1e-5)


@pytest.mark.parametrize(
    "index, change, claim",
    [
        (1, {"router_steps": 14}, "router_steps_exact"),  # a step lost or split
        (0, {"experts_max": 3}, "one_token_touches_k"),  # one token reached 3 experts: the hook counted wrong
        (1, {"experts_mean": 4.1}, "coverage_at_most_uniform"),  # above 3.9975
        (2, {"experts_mean": 3.8}, "coverage_grows_with_batch"),  # fewer at 16 than at 2
        (5, {"step_ms": 4.5}, "step_grows_with_batch"),  # x1.88: a dense model's growth
    ],
)
def test_each_claim_fails_on_its_fault(index, change, claim):
    rows = [dict(r) for r in GOOD]
    rows[index] |= change
    assert _claims(rows)[claim].passed is False


def test_timing_is_printed_not_asserted_on_a_cpu():
    rows = [dict(r) for r in GOOD[:3]]  # the CPU run: the eager engine alone, timed too
    got = _claims(rows, CPU_MACHINE)
    assert got["step_grows_with_batch"].passed is None and "eager: B=1" in got["step_grows_with_batch"].detail
    assert got["coverage_at_most_uniform"].passed is True


def test_floors_and_the_prediction_are_the_hand_arithmetic():
    g, cfg = gpu("RTX 4090"), model("allenai/OLMoE-1B-7B-0924-Instruct").config
    context = 128 + 32 // 2  # the lab's mean context: prompt + half the output
    assert step_floor_s(g, cfg, 1, context) * 1e3 == pytest.approx(2.35800, abs=1e-5)
    assert step_floor_s(g, cfg, 64, context) * 1e3 == pytest.approx(14.720, abs=1e-3)
    assert step_floor_s(g, cfg, 64, context, 16.0) < step_floor_s(g, cfg, 64, context)  # fewer experts counted
    text = SPEC.prediction()
    assert "| 1 | 8.0 | 2.36 | 2.36 |" in text and "| 64 | 64.0 | 13.63 | 14.72 |" in text


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--modes", "eager,fast"], "--modes eager,fast: name each of eager, graphs at most once"),
        (["--modes", "eager,eager"], "name each of eager, graphs at most once"),
        (["--prompt-len", "1"], "--prompt-len must be at least 2"),
        (["--output-len", "3"], "--output-len must be at least 4"),
        (["--prompt-len", "1000", "--output-len", "100"], "prompt + output = 1100 tokens exceed --max-model-len 1024"),
        (["--batches", "4,2"], "argument --batches: must be increasing whole numbers >= 1"),
    ],
)
def test_bad_input_is_one_line_before_anything_starts(args, expected):
    assert expected in lab_refusal("expert_coverage", *args)


def test_a_dense_model_folder_is_refused_before_anything_starts(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "qwen2"}')  # the course's dense model, say
    line = lab_refusal("expert_coverage", "--model", str(tmp_path))
    assert "is not a mixture of experts this lab can read; its model_type must be one of olmoe, qwen3_moe" in line


def test_the_efficiency_floor_is_at_the_run_s_own_context():
    """A GPU run of OLMoE with other lengths is floored at its own mean context, 1,000 + 100 / 2 = 1,050 tokens,
    with the experts its eager engine counted. At B = 16 with 40 experts per layer: weights read 373,688,320 +
    40 x 16 x 6,291,456 = 4,400,220,160, 8,800,440,320 B -> 8.73060 ms at 1,008 GB/s; cache 16 x 1,050 x
    131,072 = 2,202,009,600 B -> 2.18453 ms; floor 10.91513 ms (the FLOPs take less)."""
    from infercourse.labs.expert_coverage import efficiency

    g, cfg = gpu("RTX 4090"), model("allenai/OLMoE-1B-7B-0924-Instruct").config
    rows = [dict(r) for r in GOOD]
    for r, mean in zip(rows[:3], (8.0, 15.0, 40.0), strict=True):  # OLMoE's counts: k = 8 at B = 1
        r["experts_mean"] = mean
    settings = SETTINGS | {"experts": 64, "top_k": 8, "moe_layers": 16, "prompt_len": 1000, "output_len": 100}
    found = efficiency(make_receipt("expert_coverage", rows, SPEC.units, settings=settings), g, cfg)
    assert [rows[e.row]["mode"] for e in found] == ["graphs"] * 3  # the default engine's rows are the timed ones
    b16 = next(e for e in found if rows[e.row]["batch"] == 16)
    assert b16.floor == pytest.approx(10.91513, abs=1e-4)


def test_the_notebook_exercises_by_hand():
    """OLMoE, E = 64, k = 8: batch 2 touches 64 (1 - (56 / 64)^2) = 64 x 0.234375 = 15 experts, batch 16
    64 (1 - 0.875^16) = 56.4437. A step reads, BF16, what every step needs: per layer q, k, v, o (4 x 2,048^2), the
    router (2,048 x 64) and four norms (q, k and the two layer norms, 4 x 2,048), 16 layers, the final norm and the
    head (50,304 x 2,048): 373,688,320 weights = 747,376,640 B; plus per touched expert 3 x 2,048 x 1,024 x 16
    layers x 2 B = 201,326,592 B."""
    two, sixteen, growth = (e.answer() for e in labs.spec("expert_coverage").exercises)
    assert two == pytest.approx(15.0, rel=1e-12)
    assert sixteen == pytest.approx(64 * (1 - 0.875**16), rel=1e-12)
    always = 2 * (16 * (4 * 2048**2 + 2048 * 64 + 4 * 2048) + 2048 + 50_304 * 2048)
    assert always == 747_376_640
    expert = 3 * 2048 * 1024 * 16 * 2
    assert growth == pytest.approx((always + sixteen * expert) / (always + 8 * expert), rel=1e-12)


def test_the_notebook_compares_experts_touched_with_uniform_routing():
    """The notebook's first panel: each counted row's mean experts per step beside E (1 - (1 - k/E)^B), an
    estimate; the graphs rows (nothing counted) are not compared."""
    receipt = make_receipt("expert_coverage", GOOD, SPEC.units, settings=SETTINGS)
    found = labs.compared(receipt)
    assert [(c.row, c.measured, c.kind) for c in found] == [
        (0, 2.0, "estimate"),
        (1, 3.9, "estimate"),
        (2, 14.0, "estimate"),
    ]
    # E 16, k 2: B = 1: 16 (1 - 14/16) = 2; B = 2: 16 (1 - 0.765625) = 3.75; B = 16: 16 (1 - 0.875^16) = 14.11
    assert [c.predicted for c in found] == pytest.approx([2.0, 3.75, 14.11], abs=5e-3)
    receipt["results"][1]["experts_mean"] = 4.5  # more than two tokens can touch: 2 x k = 4
    assert labs.compared(receipt)[1].ratio == pytest.approx(4.5 / 3.75)
