"""The 0B (metrics) and 0C (weights) lab specs: receipts, claims and expected output, against hand arithmetic."""

from __future__ import annotations

import pytest

from conftest import CPU_MACHINE, GPU_MACHINE, make_receipt
from infercourse import labs, snippets
from infercourse.labs import metrics as metrics_spec
from infercourse.labs import weights as weights_spec

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


def _weights(machine=GPU, total=15_231_233_024, dtypes=("bfloat16",)) -> dict:
    rows = [{"dtype": d, "elements": total // 2 // len(dtypes), "bytes": total // len(dtypes)} for d in dtypes]
    rows.append({"dtype": "all", "elements": total // 2, "bytes": total})
    return make_receipt("weights", rows, {"elements": "count", "bytes": "B"}, machine=machine, max_model_len=4096)


def _claims(receipt) -> dict:
    return {r.claim: r.passed for r in labs.check(receipt)}


# --- metrics --------------------------------------------------------------------------------------


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
    claims = _claims(_metrics())
    assert claims == {
        "ttft_grows_with_prompt": True,
        "tpot_flat_vs_ttft": True,
        "tpot_within_tolerance_gpu": True,
        "itl_mean_equals_tpot_mean": True,
        "tpot_above_floor_gpu": True,
    }


def test_metrics_tpot_below_the_floor_fails_on_gpu():
    # 10 ms per step would need 14.1 GB / 0.010 s = 1,410 GB/s, more than the 4090's 1,008 GB/s
    assert _claims(_metrics(tpot=10.0, itl=10.0))["tpot_above_floor_gpu"] is False


def test_metrics_itl_must_equal_tpot_for_equal_lengths():
    assert _claims(_metrics(itl=17.0 * 1.019))["itl_mean_equals_tpot_mean"] is True  # 1.9 % < 2 %
    assert _claims(_metrics(itl=17.0 * 1.03))["itl_mean_equals_tpot_mean"] is False  # 3 % > 2 %


def test_metrics_gpu_claims_are_not_applied_on_cpu():
    claims = _claims(_metrics(machine=CPU, tpot=1.0, itl=1.0, ttft=(5.0, 40.0, 200.0)))
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


# --- weights --------------------------------------------------------------------------------------


def test_weights_bf16_bytes_are_2n():
    # by hand (lesson 0C): N = 7,615,616,512, so BF16 = 2 x N = 15,231,233,024 B
    assert _claims(_weights()) == {"parameter_bytes_match_config": True, "single_dtype": True}
    assert "15,231,233,024" in labs.expected_output("weights")


def test_weights_off_by_one_percent_fails():
    assert _claims(_weights(total=int(15_231_233_024 * 1.01)))["parameter_bytes_match_config"] is False


def test_weights_two_dtypes_fail_single_dtype():
    assert _claims(_weights(dtypes=("bfloat16", "float32")))["single_dtype"] is False


def test_weights_unknown_model_is_not_applicable():
    receipt = {**_weights(), "model": "/no/such/model"}
    assert set(_claims(receipt).values()) == {None}


def test_weights_prediction_of_awq():
    # lesson 0C's AWQ formula: 4-bit, group 128, about 5.57 GB in all
    assert "5.57 GB" in weights_spec.prediction()


def test_weights_cpu_build_without_linear_weights_passes():
    # linear weights per layer: 2*3584*3584 (q, o) + 2*3584*512 (k, v) + 3*3584*18944 (MLP) = 233,046,016;
    # x 28 = 6,525,288,448; the rest 7,615,616,512 - 6,525,288,448 = 1,090,328,064 params = 2,180,656,128 B
    assert _claims(_weights(machine=CPU, total=2_180_656_128))["parameter_bytes_match_config"] is True
    assert _claims(_weights(machine=GPU, total=2_180_656_128))["parameter_bytes_match_config"] is False


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
    assert _claims(receipt) == {"parameter_bytes_match_config": True, "single_dtype": None}
    receipt["results"][2]["elements"] += 1  # one element off: exact, so it fails
    assert _claims(receipt)["parameter_bytes_match_config"] is False
