"""Lab weights: its spec's claims, receipts and expected output, on receipts worked by hand."""

from __future__ import annotations

import pytest

from conftest import CPU_MACHINE, GPU_MACHINE, claims_passed, make_receipt
from infercourse import labs
from infercourse.labs import weights as weights_spec

GPU, CPU = GPU_MACHINE, CPU_MACHINE


def _weights(machine=GPU, total=15_231_233_024, dtypes=("bfloat16",)) -> dict:
    rows = [{"dtype": d, "elements": total // 2 // len(dtypes), "bytes": total // len(dtypes)} for d in dtypes]
    rows.append({"dtype": "all", "elements": total // 2, "bytes": total})
    return make_receipt("weights", rows, {"elements": "count", "bytes": "B"}, machine=machine, max_model_len=4096)


def test_weights_bf16_bytes_are_2n():
    # by hand (lesson 0C): N = 7,615,616,512, so BF16 = 2 x N = 15,231,233,024 B
    assert claims_passed(_weights()) == {"parameter_bytes_match_config": True, "single_dtype": True}
    assert "15,231,233,024" in labs.expected_output("weights")


def test_weights_off_by_one_percent_fails():
    assert claims_passed(_weights(total=int(15_231_233_024 * 1.01)))["parameter_bytes_match_config"] is False


def test_weights_two_dtypes_fail_single_dtype():
    assert claims_passed(_weights(dtypes=("bfloat16", "float32")))["single_dtype"] is False


def test_weights_unknown_model_is_not_applicable():
    receipt = {**_weights(), "model": "/no/such/model"}
    assert set(claims_passed(receipt).values()) == {None}


def test_weights_prediction_of_awq():
    # lesson 0C's AWQ formula: 4-bit, group 128, about 5.57 GB in all
    assert "5.57 GB" in weights_spec.prediction()


def test_weights_cpu_build_without_linear_weights_passes():
    # linear weights per layer: 2*3584*3584 (q, o) + 2*3584*512 (k, v) + 3*3584*18944 (MLP) = 233,046,016;
    # x 28 = 6,525,288,448; the rest 7,615,616,512 - 6,525,288,448 = 1,090,328,064 params = 2,180,656,128 B
    assert claims_passed(_weights(machine=CPU, total=2_180_656_128))["parameter_bytes_match_config"] is True
    assert claims_passed(_weights(machine=GPU, total=2_180_656_128))["parameter_bytes_match_config"] is False


def test_weights_cpu_build_with_float32_biases_is_counted_in_elements():
    # vLLM's CPU build on a CPU with the sgl GEMM kernel keeps the qkv biases in float32:
    # (3,584 + 512 + 512) x 28 layers = 129,024 bias elements at 4 B; the rest 1,090,328,064 - 129,024
    # = 1,090,199,040 at 2 B. Elements 1,090,328,064 = the prediction exactly; bytes 2,180,914,176.
    rows = [
        {"dtype": "bfloat16", "elements": 1_090_199_040, "bytes": 2_180_398_080},
        {"dtype": "float32", "elements": 129_024, "bytes": 516_096},
        {"dtype": "all", "elements": 1_090_328_064, "bytes": 2_180_914_176},
    ]
    receipt = make_receipt("weights", rows, {"elements": "count", "bytes": "B"}, machine=CPU, max_model_len=4096)
    assert claims_passed(receipt) == {"parameter_bytes_match_config": True, "single_dtype": None}
    receipt["results"][2]["elements"] += 1  # one element off: exact, so it fails
    assert claims_passed(receipt)["parameter_bytes_match_config"] is False


def test_the_notebook_exercises_by_hand():
    """N = 7,615,616,512 (tests/test_registry.py, module by module); x 2 B = 15,231,233,024 B; AWQ at group 128:
    6,525,288,448 quantised linear weights x (0.5 + 2.5 / 128 = 0.51953125 B) + 2,180,656,128 B kept 16-bit."""
    n, bf16_gb, awq_gb = (e.answer() for e in labs.spec("weights").exercises)
    assert n == 7_615_616_512
    assert bf16_gb == pytest.approx(15.231233024, rel=1e-12)
    assert awq_gb == pytest.approx((6_525_288_448 * 0.51953125 + 2_180_656_128) / 1e9, rel=1e-12)


def test_the_notebook_compares_parameters_held_with_config_s_count():
    """The notebook's first panel: the "all" row's elements beside N, or N less the linear weights on vLLM's
    CPU build (exact on either machine; the per-dtype rows are not compared)."""
    # GPU: N = 7,615,616,512 (lesson 0C); the receipt holds 15,231,233,024 B / 2 B = 7,615,616,512 elements
    [gpu] = labs.compared(_weights())
    assert (gpu.row, gpu.measured, gpu.predicted, gpu.kind) == (1, 7_615_616_512, 7_615_616_512, "exact")
    # CPU build: N - 28 x 233,046,016 linear weights = 7,615,616,512 - 6,525,288,448 = 1,090,328,064
    receipt = _weights(machine=CPU, total=2_180_656_128)
    [cpu] = labs.compared(receipt)
    assert (cpu.measured, cpu.predicted) == (1_090_328_064, 1_090_328_064)
    receipt["results"][1]["elements"] += 1  # one element too many: exact, so it shows
    assert labs.compared(receipt)[0].ratio == 1_090_328_065 / 1_090_328_064
    assert "NOT as predicted" in labs.report(receipt)[1]
