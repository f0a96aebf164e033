"""Lab attention_backends (lesson 1B): vLLM 0.26.0's backend rule, the spec's claims and floors, and the lab's bad
input, on receipts worked by hand.

Floors on the RTX 4090 (1,008 GB/s), Qwen2.5-7B in BF16 (M = 7,070,619,136 matmul weights, 14,141,238,272 B;
kappa = 2 x 28 layers x 4 KV heads x 128 x 2 B = 57,344 B/token), 4 sequences at the mean context S + 32 / 2:
- S = 1,024: cache 4 x 1,040 x 57,344 = 238,551,040 B; step 14,379,789,312 B / 1.008e12 = 14.2657 ms;
  with an FP8 cache (28,672 B/token) 119,275,520 B, 14,260,513,792 B -> 14.1473 ms.
- S = 16,384: cache 4 x 16,400 x 57,344 = 3,761,766,400 B; step 17,903,004,672 B -> 17.7609 ms; FP8 15.8950 ms.
The matmuls' FLOPs (2 x M x 4 = 5.7e10 against 165.2 TFLOP/s: 0.34 ms) and attention's are below the bytes' time.
"""

from __future__ import annotations

import pytest

from conftest import CPU_MACHINE, lab_refusal, make_receipt
from infercourse import labs
from infercourse.labs.attention_backends import predicted_backend, step_floor_s
from infercourse.registry import gpu, model

SPEC = labs.spec("attention_backends")


@pytest.mark.parametrize(
    "capability, dtype, requested, expected",
    [
        ((8, 9), "auto", "default", "FLASH_ATTN"),  # RTX 4090: FlashAttention 2 first in the order
        ((8, 9), "fp8", "default", "FLASHINFER"),  # FA2 stores no FP8 cache; FlashInfer does, on 8.0-12.1
        ((8, 9), "fp8", "FLASH_ATTN", "refused"),  # forced: checked alone, no fallback
        ((9, 0), "fp8", "default", "FLASH_ATTN"),  # H200: FlashAttention 3 stores FP8
        ((10, 0), "auto", "default", "FLASHINFER"),  # Blackwell: FlashInfer first
        ((7, 5), "auto", "default", "TRITON_ATTN"),  # Turing: neither FlashAttention nor FlashInfer
        ((12, 2), "auto", "FLASHINFER", "refused"),  # above FlashInfer's 12.1
        ((8, 9), "auto", "TRITON_ATTN", "TRITON_ATTN"),
    ],
)
def test_predicted_backend_follows_vllm_0_26_0_s_rule(capability, dtype, requested, expected):
    assert predicted_backend(capability, dtype, requested) == expected


def _rows(run: str, steps_ms: tuple[float, float] | None, backend: str | None = None, capability: str = "8.9") -> list:
    requested, dtype = run.split(":")
    base = {"run": run, "requested_backend": requested, "kv_cache_dtype": dtype, "cpu_refusal": None}
    if steps_ms is None:
        reason = f"ValueError: Selected backend {requested} is not valid for this configuration. Reason: [...]"
        empty = dict.fromkeys(("context", "batch", "output_len", "kv_bytes_per_token", "step_ms", "histogram_tokens"))
        return [{**base, "outcome": "refused", "reason": reason, "backend": None, "capability": None, **empty}]
    return [
        {
            **base,
            "outcome": "started",
            "reason": None,
            "backend": backend,
            "capability": capability,
            "context": s,
            "batch": 4,
            "output_len": 32,
            "kv_bytes_per_token": 28_672 if dtype == "fp8" else 57_344,
            "step_ms": ms,
            "histogram_tokens": 2 * 4 * (s + 32),  # 8,448 at 1,024; 131,328 at 16,384
        }
        for s, ms in zip((1024, 16384), steps_ms, strict=True)
    ]


GOOD = (
    _rows("default:auto", (15.1, 19.0), "FLASH_ATTN")
    + _rows("FLASHINFER:auto", (15.3, 19.6), "FLASHINFER")
    + _rows("default:fp8", (15.0, 17.2), "FLASHINFER")
    + _rows("FLASH_ATTN:fp8", None)
)


def _claims(rows, machine=None) -> dict:
    extra = {} if machine is None else {"machine": machine}
    return {c.claim: c for c in labs.check(make_receipt("attention_backends", rows, SPEC.units, **extra))}


def test_claims_hold_on_a_hand_worked_gpu_receipt():
    got = _claims(GOOD)
    assert got["cpu_build_runs_cpu_attn"].passed is None  # a GPU receipt
    assert all(c.passed for name, c in got.items() if name != "cpu_build_runs_cpu_attn"), got
    assert "FLASH_ATTN:fp8 -> refused" in got["choice_as_predicted"].detail


def test_a_wrong_choice_a_wrong_count_or_a_flat_step_fails():
    wrong = [dict(r) for r in GOOD]
    for r in wrong[4:6]:
        r["backend"] = "TRITON_ATTN"  # default:fp8 on the 4090 is FLASHINFER
    assert _claims(wrong)["choice_as_predicted"].passed is False
    wrong = [dict(r) for r in GOOD]
    wrong[1]["histogram_tokens"] -= 1
    assert _claims(wrong)["histogram_tokens_exact"].passed is False
    wrong = [dict(r) for r in GOOD]
    wrong[3]["step_ms"] = 15.0  # FLASHINFER:auto no slower at 16,384 than at 1,024 (15.3 ms)
    assert _claims(wrong)["step_grows_with_context"].passed is False
    assert _claims(wrong, CPU_MACHINE)["step_grows_with_context"].passed is None  # a CPU timing: printed only


def test_the_notebook_compares_scheduled_tokens_with_the_lesson_s_count():
    """The notebook's first panel: each started row's scheduled tokens beside 2 B (S + n), exact; the refused run
    has none (the step beside its floor is the efficiency panel's, on a GPU the registry has)."""
    receipt = make_receipt("attention_backends", [dict(r) for r in GOOD], SPEC.units)
    found = labs.compared(receipt)
    assert [c.row for c in found] == [0, 1, 2, 3, 4, 5]  # row 6: FLASH_ATTN:fp8, refused
    assert all(
        (c.quantity, c.unit, c.kind, c.measured) == ("scheduled tokens", "tokens", "exact", c.predicted) for c in found
    )
    # warm-up + timed batch of B = 4 requests, n = 32: 2 x 4 x (1,024 + 32) = 8,448; 2 x 4 x (16,384 + 32) = 131,328
    assert [c.predicted for c in found[:2]] == [8448, 131_328]
    receipt["results"][1]["histogram_tokens"] -= 8  # one token short per request
    assert labs.compared(receipt)[1].ratio == 131_320 / 131_328
    assert "NOT as predicted" in labs.report(receipt)[1]


def test_the_cpu_build_claim_needs_cpu_attn_and_the_refusal_line():
    forced = _rows("default:auto", (2.0, 2.1), "CPU_ATTN", None) + _rows(
        "FLASH_ATTN:auto", (2.0, 2.1), "CPU_ATTN", None
    )
    for r in forced[2:]:
        r["cpu_refusal"] = (
            "FLASH_ATTN"  # vLLM's CPU build: "Cannot use AttentionBackendEnum.FLASH_ATTN backend on CPU."
        )
    got = _claims(forced, CPU_MACHINE)
    assert got["cpu_build_runs_cpu_attn"].passed is True and got["choice_as_predicted"].passed is None
    for r in forced[2:]:
        r["cpu_refusal"] = None
    assert _claims(forced, CPU_MACHINE)["cpu_build_runs_cpu_attn"].passed is False


def test_floors_and_the_prediction_are_the_hand_arithmetic():
    g, cfg = gpu("RTX 4090"), model("Qwen/Qwen2.5-7B-Instruct").config
    row = {"batch": 4, "output_len": 32, "context": 1024, "kv_cache_dtype": "auto"}
    assert step_floor_s(g, cfg, row) * 1e3 == pytest.approx(14.2657, abs=1e-4)
    assert step_floor_s(g, cfg, {**row, "context": 16384, "kv_cache_dtype": "fp8"}) * 1e3 == pytest.approx(
        15.8950, abs=1e-4
    )
    text = SPEC.prediction()
    assert "| default:auto | FLASH_ATTN | 14.27 | 14.96 | 17.76 |" in text  # 4,096: 15,084,432,384 B -> 14.96 ms
    assert "| default:fp8 | FLASHINFER | 14.15 | 14.50 | 15.89 |" in text
    assert "| FLASH_ATTN:fp8 | refused | - | - | - |" in text


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--runs", "FLASH:auto"], "FLASH:auto is not BACKEND:DTYPE"),
        (["--runs", "default:int8"], "default:int8 is not BACKEND:DTYPE"),
        (["--runs", "default:auto,default:auto"], "names a run twice"),
        (["--output-len", "2"], "--output-len must be at least 4"),
        (["--contexts", "1024,32768"], "the longest context needs 32800 tokens but --max-model-len is 16448"),
        (["--contexts", "4096,1024"], "argument --contexts: must be increasing whole numbers >= 1"),
    ],
)
def test_bad_input_is_one_line_before_anything_starts(args, expected):
    assert expected in lab_refusal("attention_backends", *args)


def test_the_notebook_exercises_by_hand():
    """16,384^2 x 2 B = 536,870,912 B = 0.5369 GB. Batch 4 x 4 KV heads = 16 blocks of the RTX 4090's 128 SMs =
    12.5 %. At context 16,384 + 32 / 2 = 16,400, batch 4: the cache read is 4 x 57,344 x 16,400 = 3,761,766,400 B in
    BF16 and half in FP8, beside 14,141,238,272 B of weights, all memory-bound."""
    score_gb, share, fp8_gain = (e.answer() for e in labs.spec("attention_backends").exercises)
    assert score_gb == pytest.approx(0.536870912, rel=1e-12)
    assert share == 100 * 16 / 128  # in %
    assert fp8_gain == pytest.approx((14_141_238_272 + 3_761_766_400) / (14_141_238_272 + 1_880_883_200), rel=1e-9)
