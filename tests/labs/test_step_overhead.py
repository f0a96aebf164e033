"""Lab step_overhead (lesson 2B): its spec's claims and prediction, and its bad input, on receipts worked by hand.

The course model resized (vLLM's Qwen2; qkv biases; untied head; V = 152,064, d_h = 128):
- L2xW0.25: d 896, 7 heads, 1 KV head, f 4,736. A layer: q 896^2 + 896 = 803,712; k and v 896 * 128 + 128 =
  114,816 each; o 802,816; MLP 3 * 896 * 4,736 = 12,730,368; norms 1,792 -> 14,568,320; two layers
  29,136,640; embedding and head 2 * 152,064 * 896 = 272,498,688; final norm 896 -> N = 301,636,224.
  M = N - 136,249,344 = 165,386,880; kappa = 2 * 2 * 1 * 128 * 2 = 1,024 B; at B = 1 and 16 + 32 / 2 = 32
  tokens: bytes 330,773,760 + 32,768 = 330,806,528, FLOPs 330,773,760.
- L8xW0.5: d 1,792, 14 heads, 2 KV heads, f 9,472. A layer 58,267,392 (q 3,213,056, k and v 459,008 each,
  o 3,211,264, MLP 50,921,472, norms 3,584); N = 8 * 58,267,392 + 2 * 272,498,688 + 1,792 = 1,011,138,304;
  M = 738,639,616; kappa = 2 * 8 * 2 * 128 * 2 = 8,192 -> bytes 1,477,279,232 + 262,144 = 1,477,541,376.
- L28xW1, the 7B itself: N = 7,615,616,512, M = 7,070,619,136, kappa 57,344 -> bytes 14,141,238,272 +
  1,835,008 = 14,143,073,280, FLOPs 14,141,238,272.
With a probe of 1,000 GB/s and 100 TFLOP/s every floor is the bytes': 0.330807, 1.477541, 14.143073 ms.
"""

from __future__ import annotations

import pytest

from conftest import CPU_MACHINE, GPU_MACHINE, lab_refusal, make_receipt
from infercourse import labs
from infercourse.labs.step_overhead import fitted_line

SPEC = labs.spec("step_overhead")
HAND = {  # variant: (layers, width, N, step bytes at B = 1, FLOPs at B = 1)
    "L2xW0.25": (2, 0.25, 301_636_224, 330_806_528, 330_773_760),
    "L8xW0.5": (8, 0.5, 1_011_138_304, 1_477_541_376, 1_477_279_232),
    "L28xW1": (28, 1.0, 7_615_616_512, 14_143_073_280, 14_141_238_272),
}
PROBE = {"bandwidth_gb_s": 1000.0, "matmul_tflops": 100.0, "copy_bytes": 2**31, "matmul_n": 8192}


def _row(variant: str, step_ms: float, mode: str = "graphs") -> dict:
    layers, width, n, step_bytes, flops = HAND[variant]
    floor_ms = step_bytes / 1e9  # bytes / 1e12 B/s, in ms
    return {
        "variant": variant,
        "mode": mode,
        "layers": layers,
        "width": width,
        "params": n,
        "weight_bytes": 2 * n,
        "step_bytes": step_bytes,
        "step_flops": flops,
        "batch": 1,
        "floor_ms": round(floor_ms, 6),
        "step_ms": step_ms,
        "ratio": round(step_ms / floor_ms, 4),
    }


def _receipt(rows, machine=GPU_MACHINE) -> dict:
    return make_receipt("step_overhead", rows, SPEC.units, machine=machine, settings={"probe": PROBE})


def _claims(receipt) -> dict:
    return {c.claim: c for c in labs.check(receipt)}


GOOD = [_row("L2xW0.25", 2.0), _row("L8xW0.5", 2.9), _row("L28xW1", 15.5), _row("L2xW0.25", 3.1, "eager")]


def test_claims_hold_on_a_hand_worked_gpu_receipt():
    got = _claims(_receipt(GOOD))
    assert all(c.passed for c in got.values()), got
    # least squares over (0.3308, 2.0), (1.4775, 2.9), (14.1431, 15.5) (GB, ms): mean x 5.3171, mean y 6.8;
    # dx = -4.9863, -3.8396, 8.8260, dy = -4.8, -3.9, 8.7: slope 115.70 / 117.50 = 0.98468 ms/GB,
    # tau_0 = 6.8 - 0.98468 * 5.3171 = 1.564 ms; bandwidth_eff 1 / 0.98468 ms/GB = 1,015.6 GB/s
    tau0, bw, r2 = fitted_line(_receipt(GOOD))
    assert tau0 == pytest.approx(1.564, abs=2e-3) and bw == pytest.approx(1015.6, rel=1e-3) and r2 > 0.999


def test_a_wrong_parameter_count_or_floor_fails():
    wrong = _receipt(GOOD)
    wrong["results"][1]["params"] += 1
    assert _claims(wrong)["params_exact"].passed is False
    wrong = _receipt(GOOD)
    wrong["results"][2]["floor_ms"] *= 1.01  # 1 % off the probe's arithmetic
    assert _claims(wrong)["floor_from_probe"].passed is False


def test_timing_claims_fail_on_a_gpu_and_are_only_printed_on_a_cpu():
    slow_graphs = [_row("L2xW0.25", 4.0), _row("L8xW0.5", 2.9), _row("L28xW1", 14.0), _row("L2xW0.25", 3.1, "eager")]
    got = _claims(_receipt(slow_graphs))
    # 14.0 ms is under the 7B's 14.143 ms floor; graphs (4.0) slower than eager (3.1); the line's intercept
    # is still positive, and the small model is still further above its floor (x12.1 against x0.99)
    assert got["never_below_floor"].passed is False and got["graphs_save_time"].passed is False
    assert got["overhead_shrinks_with_size"].passed is True
    on_cpu = _claims(_receipt(slow_graphs, machine=CPU_MACHINE))
    assert on_cpu["never_below_floor"].passed is None and on_cpu["graphs_save_time"].passed is None


def test_the_prediction_lists_every_variant_with_its_floor():
    text = SPEC.prediction()
    # RTX 4090, 1,008 GB/s: 14,143,073,280 B / 1.008e12 = 14.031 ms; 330,806,528 / 1.008e12 = 0.328 ms
    assert "| L28xW1 | 7,615,616,512 | 1 | 14.143 | 14.031 |" in text
    assert "| L2xW0.25 | 301,636,224 | 1 | 0.331 | 0.328 |" in text
    # eager launches of 28 layers: (10 * 28 + 6) x 4-6 µs = 1.14-1.72 ms
    assert "| 1.14-1.72 |" in text


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--variants", "2xwide"], "--variants must be comma-separated LAYERSxWIDTH pairs"),
        (["--variants", "0x1"], "--variants needs layers >= 1"),
        (["--batches", "8,1"], "argument --batches: must be increasing whole numbers >= 1, got 8,1"),
    ],
)
def test_bad_input_is_one_line_before_anything_starts(args, expected):
    assert expected in lab_refusal("step_overhead", *args)


def test_the_notebook_exercises_by_hand():
    """10 launches per layer x 28 layers + 6 = 286; x 6 us = 1.716 ms; W* on the RTX 4090 = 1.716e-3 s x 1,008e9
    B/s = 1,729,728,000 B = 1.7297 GB."""
    launches, eager_ms, bound_gb = (e.answer() for e in labs.spec("step_overhead").exercises)
    assert launches == 286
    assert eager_ms == pytest.approx(1.716, rel=1e-12)
    assert bound_gb == pytest.approx(1.729728, rel=1e-12)


def test_the_notebook_compares_step_times_with_the_probe_s_floor():
    """The notebook's first panel: each row's step beside its floor from the receipt's own probe, a floor."""
    receipt = _receipt(GOOD, machine=CPU_MACHINE)
    found = labs.compared(receipt)
    # probe 1,000 GB/s and 100 TFLOP/s: L2xW0.25 bytes 330,806,528 / 1e12 B/s = 0.330807 ms (FLOPs 330,773,760 /
    # 1e14 = 0.0033 ms, below it); L28xW1 14,143,073,280 B -> 14.143073 ms
    assert [c.predicted for c in found] == pytest.approx([0.330807, 1.477541, 14.143073, 0.330807], abs=1e-6)
    assert [c.measured for c in found] == [2.0, 2.9, 15.5, 3.1] and {c.kind for c in found} == {"floor"}
    receipt["results"][2]["step_ms"] = 7.0  # faster than the floor: the floor's ratio falls under 1
    assert labs.compared(receipt)[2].ratio == pytest.approx(7.0 / 14.143073)
