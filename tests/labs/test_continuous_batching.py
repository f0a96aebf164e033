"""Lab continuous_batching (lesson 4A): its spec's claims, prediction and bad input, on receipts worked by hand.

The hand arithmetic of the model, the card and the floors is in tests/lessons/test_4a.py's docstring.
"""

from __future__ import annotations

import argparse
import socket

import pytest

from conftest import GPU_MACHINE, claims_passed, lab_refusal, make_receipt
from infercourse import figures, labnotebook, labs, snippets

SPEC = labs.spec("continuous_batching")
CPU_LENGTHS = [14, 15, 3, 10, 18, 17, 14, 11, 17, 13, 20, 8]


def test_lab_and_spec_draw_the_same_lengths():
    lab = snippets.load("labs/continuous_batching.py")  # imports without vLLM
    args = argparse.Namespace(requests=12, output_min=2, output_max=24)
    assert lab.output_lengths(args) == labs.continuous_batching.output_lengths(12, 2, 24) == CPU_LENGTHS
    assert SPEC.work.engines == len(lab.BATCH_SIZES) + 1 == 4  # an engine per B, then the server
    assert SPEC.work.arrival_s == sum(200 / r for r in (2, 4, 8, 16, 32)) == 193.75  # 100 + 50 + 25 + 12.5 + 6.25
    assert lab.PROMPT_TOKENS + lab.OUTPUT_MAX <= lab.MAX_MODEL_LEN


UNITS = dict(SPEC.units)


def _row(mode, **over):
    row = {
        "max_num_seqs": 4,
        "mode": mode,
        "requests": 12,
        "steps": {"static": 54, "continuous": 48}[mode],
        "step_tokens": 544,
        "prompt_tokens": 384,
        "generated_tokens": 160,
        "wrong_lengths": 0,
        "preemptions": 0,
        "wall_s": 6.0,
        "output_tok_s": 25.0,
        "tpot_p50_ms": 100.0,
        "tpot_p99_ms": 180.0,
        "wait_p50_ms": 100.0,
        "wait_p99_ms": 3000.0,
        **dict.fromkeys(ONLINE_ONLY),
    }
    return {**row, **over}


ONLINE_ONLY = snippets.constant("labs/continuous_batching.py", "ONLINE_ONLY")


def _online_row(rate, **over):
    # 8 requests of 32 prompt tokens, 16 output tokens each: 8 x 16 = 128 generated; the client counted
    # 258 prompt tokens (two prompts re-encoded one token longer), and so did the server
    row = {
        "max_num_seqs": 4,
        "mode": "online",
        "requests": 8,
        "steps": 128,
        "step_tokens": 386,
        "prompt_tokens": 258,
        "generated_tokens": 128,
        "wrong_lengths": 0,
        "preemptions": 0,
        "wall_s": 4.0,
        "output_tok_s": 32.0,
        "tpot_p50_ms": 2.0,
        "tpot_p99_ms": 2.3,
        "wait_p50_ms": None,
        "wait_p99_ms": None,
        "request_rate": rate,
        "failed": 0,
        "ttft_p50_ms": 20.0,
        "ttft_p99_ms": 36.0,
        "server_prompt_tokens": 258,
        "server_generated_tokens": 128,
        "server_requests": 8,
    }
    return {**row, **over}


def _receipt(static=None, continuous=None, kind="cpu", online=(), **settings) -> dict:
    rows = [_row("static", **(static or {})), _row("continuous", **(continuous or {})), *online]
    return make_receipt(
        "continuous_batching",
        rows,
        UNITS,
        kind=kind,
        settings={
            "seed": 0,
            "requests": 12,
            "prompt_tokens": 32,
            "output_min": 2,
            "output_max": 24,
            "output_lengths": CPU_LENGTHS,
            "batch_sizes": [4],
            "max_num_batched_tokens": 64,
            "kv_tokens": 1_048_576,
            "enable_prefix_caching": False,
            "async_scheduling": False,
            "num_prompts": 8,
            "online_output_tokens": 16,
            **settings,
        },
    )


def test_a_receipt_worked_by_hand_passes_every_exact_claim():
    receipt = _receipt()
    labs.validate_receipt(receipt)
    assert claims_passed(receipt) == {
        "tokens_exact": True,
        "histogram_sum": True,
        "steps_exact": True,
        "continuous_fewer_steps": True,
        "no_preemption": True,
        "continuous_faster": None,  # timing: not judged on a CPU receipt
        "online_counts_exact": None,  # no online rows: not judged
        "server_counts_agree": None,
        "online_tradeoff": None,
    }


ONLINE = (_online_row(2.0), _online_row(8.0, output_tok_s=120.0, tpot_p99_ms=2.2))


def test_online_rows_worked_by_hand_pass_and_a_planted_count_fails():
    receipt = _receipt(online=ONLINE)
    labs.validate_receipt(receipt)
    claims = claims_passed(receipt)
    assert (claims["online_counts_exact"], claims["server_counts_agree"], claims["online_tradeoff"]) == (
        True,
        True,
        None,  # timing, on a CPU receipt
    )
    assert claims["tokens_exact"] and claims["steps_exact"]  # the offline claims read only the offline rows
    for over, claim in (
        ({"requests": 7}, "online_counts_exact"),
        ({"failed": 1}, "online_counts_exact"),
        ({"generated_tokens": 127, "server_generated_tokens": 127}, "online_counts_exact"),  # 8 x 16 = 128
        ({"wrong_lengths": 1}, "online_counts_exact"),
        ({"server_prompt_tokens": 257}, "server_counts_agree"),
        ({"server_generated_tokens": 129}, "server_counts_agree"),
        ({"server_requests": 7}, "server_counts_agree"),
    ):
        assert claims_passed(_receipt(online=(_online_row(2.0, **over), ONLINE[1])))[claim] is False, over


def test_online_tradeoff_is_judged_on_gpu_receipts():
    # 8/s: 120 tok/s at 2.2 ms against 2/s: 32 tok/s at 2.3 ms: more throughput but a LOWER p99 TPOT
    assert claims_passed(_receipt(kind="gpu", online=ONLINE))["online_tradeoff"] is False
    faster = (ONLINE[0], _online_row(8.0, output_tok_s=120.0, tpot_p99_ms=2.5))
    assert claims_passed(_receipt(kind="gpu", online=faster))["online_tradeoff"] is True


def test_the_figure_draws_the_online_rows_of_gpu_receipts_only():
    from infercourse.pages import lesson_4a

    gpu_receipt, cpu_receipt = _receipt(kind="gpu", online=ONLINE), _receipt(online=ONLINE)
    points = lesson_4a.measured_points([cpu_receipt, gpu_receipt])
    assert [(name, row["request_rate"]) for name, row in points] == [
        (GPU_MACHINE["name"], 2.0),
        (GPU_MACHINE["name"], 8.0),
    ]
    assert f"measured, {GPU_MACHINE['name']} (p99 TPOT)" in figures.plot_svg(
        lambda ax: lesson_4a.pareto_plot(ax, points), salt="test"
    )
    # no GPU receipt yet: the prediction alone
    assert "measured," not in figures.plot_svg(lambda ax: lesson_4a.pareto_plot(ax, []), salt="test")


def test_one_step_off_fails():
    assert claims_passed(_receipt(static={"steps": 55}))["steps_exact"] is False
    assert claims_passed(_receipt(continuous={"steps": 47}))["steps_exact"] is False
    assert claims_passed(_receipt(async_scheduling=True))["steps_exact"] is None  # the replay assumes it off


def test_the_notebook_compares_engine_steps_with_the_scheduler_s_replay():
    """The notebook's first panel: each offline run's steps beside the replay, exact; online rows, a preempted run
    and async scheduling are not compared (as steps_exact)."""
    receipt = _receipt(online=ONLINE)
    found = labs.compared(receipt)
    # by hand (tests/lessons/test_4a.py's docstring): static, each chunk of 4 ends with its longest request, 15 +
    # 18 + 21 = 54 steps; continuous, the last to end is r10 (20 tokens), in the slot r6 (15 + 14 - 1 = 28) frees:
    # prompt at step 29, last token at 29 + 20 - 1 = 48
    assert [(receipt["results"][c.row]["mode"], c.measured, c.predicted, c.kind) for c in found] == [
        ("static", 54, 54, "exact"),
        ("continuous", 48, 48, "exact"),
    ]
    assert [c.row for c in labs.compared(_receipt(continuous={"steps": 49, "preemptions": 1}))] == [0]
    assert labs.compared(_receipt(async_scheduling=True)) == []
    receipt["results"][1]["steps"] = 47  # one step fewer than the replay
    assert labs.compared(receipt)[1].ratio == 47 / 48
    assert "NOT as predicted" in labs.report(receipt)[1]


def test_a_preempted_run_is_not_held_to_the_preemption_free_replay():
    # a GPU batch at the cache's edge: one preemption makes the continuous run take 49 steps, not the replay's 48
    claims = claims_passed(_receipt(continuous={"steps": 49, "preemptions": 1}))
    assert claims["steps_exact"] is True  # static still matches; the preempted run is left out, with its count
    assert claims["no_preemption"] is False  # the preemption itself is judged where it belongs
    both = claims_passed(_receipt(static={"steps": 60, "preemptions": 2}, continuous={"steps": 49, "preemptions": 1}))
    assert both["steps_exact"] is None


def test_a_short_request_or_a_lost_token_fails():
    assert claims_passed(_receipt(continuous={"wrong_lengths": 1, "generated_tokens": 159}))["tokens_exact"] is False
    assert claims_passed(_receipt(static={"step_tokens": 543}))["histogram_sum"] is False


def test_continuous_more_steps_than_static_fails():
    assert claims_passed(_receipt(continuous={"steps": 55}))["continuous_fewer_steps"] is False


def test_preemption_fails_only_when_the_batch_fit():
    assert claims_passed(_receipt(continuous={"preemptions": 1}))["no_preemption"] is False
    # 4 x (32 + 24) = 224 tokens needed; a cache of 200 may preempt: not judged
    assert claims_passed(_receipt(continuous={"preemptions": 1}, kv_tokens=200))["no_preemption"] is None


def test_throughput_is_judged_on_gpu_receipts():
    assert claims_passed(_receipt(kind="gpu", continuous={"output_tok_s": 30.0}))["continuous_faster"] is True
    assert claims_passed(_receipt(kind="gpu", continuous={"output_tok_s": 20.0}))["continuous_faster"] is False


def test_prediction_replays_the_gpu_workload():
    text = SPEC.prediction()
    # 256 requests, 512-token prompts, 8,192 tokens per step: B = 8 static 15,070 and continuous 9,046
    # steps, the same as the snippet's list scheduling (8,192 / 512 = 16 >= 8 prompts fit one step)
    toy = snippets.load("lesson_4a/batch_steps.py")
    lengths = labs.continuous_batching.output_lengths()
    assert (toy.static_steps(lengths, 8), toy.continuous_steps(lengths, 8)) == (15_070, 9_046)
    assert "| 8 | 15,070 | 9,046 |" in text


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--output-min", "1"], "need 2 <= --output-min <= --output-max"),
        (["--output-max", "600"], "a request needs 1112 tokens but --max-model-len is 1024"),  # 512 + 600
        (["--batch-sizes", "64", "--max-num-batched-tokens", "32"], "at least the largest batch size, 64"),
        (["--rates", "2", "0"], "argument --rates: must be a positive number, got 0"),
        (["--rates", "-1"], "argument --rates: must be a positive number, got -1"),
        (["--online-output-tokens", "1"], "need --online-output-tokens >= 2"),
        (["--online-output-tokens", "600"], "an online request needs 1112 tokens"),  # 512 + 600 > 1024
        (["--port", "70000"], "argument --port: must be a port from 0 (a free one) to 65535, got 70000"),
    ],
)
def test_lab_refuses_bad_input_in_one_line(tmp_path, extra, words):
    """Checked before vLLM is imported: any Python runs it (here the docs environment's)."""
    (tmp_path / "config.json").write_text("{}")
    assert words in lab_refusal("continuous_batching", "--model", str(tmp_path), *extra)


def test_lab_refuses_a_port_in_use_before_the_server_starts(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = lab_refusal("continuous_batching", "--model", str(tmp_path), "--port", str(port))
    assert line == f"error: --port {port} is not a free port on 127.0.0.1; pass another, or 0 for any free one"


def test_the_notebook_exercises_by_hand():
    """Outputs 8, 2, 2, 8 with two slots. Continuous: A and B start (step 1 yields each one's first token), B ends at
    step 2, C runs steps 3-4, D starts at step 5; A ends at step 8, D's 8th token comes at step 12. Static: (A, B)
    takes A's 8 steps, (C, D) D's 8: 16. Batches of 32 with outputs uniform on 16..512: E[n] = 264 over E[max] =
    16 + sum over k = 16..511 of (1 - ((k - 15) / 497)^32), about 512 - 497 / 33 = 496.9."""
    continuous, static, useful = (e.answer() for e in labs.spec("continuous_batching").exercises)
    assert (continuous, static) == (12, 16)
    expected_max = 16 + sum(1 - ((k - 15) / 497) ** 32 for k in range(16, 512))
    assert useful == pytest.approx(100 * 264 / expected_max, rel=1e-12)  # in %
    assert useful == pytest.approx(100 * 264 / (512 - 497 / 33), rel=2e-3)


def test_a_column_the_comparison_covers_only_in_part_is_still_drawn():
    """The notebook's figure leaves out a measured column that a pair panel already draws, but only when that panel
    covers every row: here it covers the 2 offline rows of 4, so the online rows' steps still need their panel."""
    receipt = _receipt(online=[_online_row(2.0), _online_row(8.0)])
    pairs, alone = labnotebook._panels(receipt)
    # static 15 + 18 + 21 = 54 steps; continuous 48 (test above): both as predicted, the online rows not compared
    assert [(c.row, c.measured, c.predicted) for c in pairs[0]] == [(0, 54, 54), (1, 48, 48)]
    assert alone == ["steps", "output_tok_s", "tpot_p99_ms"]
    assert labnotebook.caption(receipt).endswith("; steps (steps); output_tok_s (tokens/s); tpot_p99_ms (ms).")
