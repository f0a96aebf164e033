"""Lesson 4A: the replay of vLLM's scheduler, static batching's waste, the page's headline values, the
lesson's snippet, and lab continuous_batching's claims and prediction, on cases worked by hand.

The lab's CPU run (tests/test_labs.py runs it): 12 requests of 32 prompt tokens, B = 4, 64 tokens per
step, output lengths random.Random(0).randint(2, 24) x 12 = 14, 15, 3, 10, 18, 17, 14, 11, 17, 13, 20, 8.
By hand: in each chunk the first two prompts take step 1 (2 x 32 = 64 tokens); step 2 carries two decodes,
the third prompt (32) and 30 tokens of the fourth; step 3 the fourth's last 2 tokens, which sample its first
token. First tokens at steps 1, 1, 2, 3; a request ends at first + n - 1:
  chunk 1 (14, 15, 3, 10): ends 14, 15, 4, 12 -> 15 steps
  chunk 2 (18, 17, 14, 11): ends 18, 17, 15, 13 -> 18
  chunk 3 (17, 13, 20, 8): ends 17, 13, 21, 10 -> 21          static = 15 + 18 + 21 = 54
Continuous: r0-r3 as in chunk 1 (end 14, 15, 4, 12); a freed slot is refilled the next step, and a 32-token
prompt always fits beside three decodes: r4 (18) starts 5, ends 22; r5 (17) 13-29; r6 (14) 15-28;
r7 (11) 16-26; r8 (17) 23-39; r9 (13) 27-39; r10 (20) 29-48; r11 (8) 30-37 -> 48 steps.
Histogram sum: 12 x 32 + 160 = 544 tokens (160 = the lengths' sum).
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys

import pytest

from conftest import CPU_MACHINE, GPU_MACHINE, ROOT, make_receipt
from infercourse import batching, labs, snippets
from infercourse.pages import values_for

SPEC = labs.spec("continuous_batching")
PAGE = values_for("lessons/4a-continuous-batching.md")
CPU_LENGTHS = [14, 15, 3, 10, 18, 17, 14, 11, 17, 13, 20, 8]


def _v(name: str):
    return PAGE[name].value


# --- the replay of the scheduler --------------------------------------------------------------------


def test_schedule_by_hand_with_a_chunked_prompt():
    # prompts 4, 4, 4; outputs 3, 1, 2; 2 slots; 6 tokens per pass.
    # pass 1: r0 takes 4 (samples), r1 takes 2 of 4 (no sample). pass 2: r0 decode 1, r1's last 2 (samples,
    # n = 1: leaves); r2 waits (2 running). pass 3: r0 decode (3rd token, leaves), r2 takes 4 (samples).
    # pass 4: r2 decode (2nd token). Held KV after each pass: 6, 9, 10, 5.
    run = batching.schedule([4, 4, 4], [3, 1, 2], 2, 6)
    assert (run.steps, run.passes) == (4, 4)
    assert (run.first_token_step, run.last_token_step) == ((1, 2, 3), (3, 2, 4))
    assert (run.peak_running, run.peak_kv_tokens) == (2, 10)


def test_a_pass_that_carries_only_part_of_a_prompt_is_not_a_step():
    # a 10-token prompt with 4 tokens per pass: passes 1, 2 carry 4 each, pass 3 the last 2 and samples;
    # pass 4 decodes. vLLM's histogram sees 2 steps.
    run = batching.schedule([10], [2], 1, 4)
    assert (run.steps, run.passes, run.first_token_step, run.last_token_step) == (2, 4, (3,), (4,))


def test_static_against_continuous_by_hand():
    # outputs 5, 1, 1, 5 (1-token prompts), 2 slots. Static: chunks (5, 1) and (1, 5): 5 + 5 = 10.
    # Continuous: slot A r0 steps 1-5; slot B r1 1, r2 2, r3 3-7: 7.
    assert batching.static_steps([1] * 4, [5, 1, 1, 5], 2, 100) == 10
    assert batching.schedule([1] * 4, [5, 1, 1, 5], 2, 100).steps == 7


def test_the_cpu_run_by_hand():
    prompts = [32] * 12
    assert [batching.schedule(prompts[k : k + 4], CPU_LENGTHS[k : k + 4], 4, 64).steps for k in (0, 4, 8)] == [
        15,
        18,
        21,
    ]
    assert batching.static_steps(prompts, CPU_LENGTHS, 4, 64) == 54
    run = batching.schedule(prompts, CPU_LENGTHS, 4, 64)
    assert run.steps == 48
    assert run.first_token_step == (1, 1, 2, 3, 5, 13, 15, 16, 23, 27, 29, 30)
    assert run.last_token_step == (14, 15, 4, 12, 22, 29, 28, 26, 39, 39, 48, 37)


@pytest.mark.parametrize(
    "args, words",
    [
        (([], [], 1, 1), "at least one request"),
        (([1, 2], [1], 1, 1), "one output length per prompt"),
        (([0], [1], 1, 1), r"prompt_tokens\[0\]"),
        (([1], [1], 0, 1), "max_num_seqs"),
        (([1], [1], 1, True), "max_num_batched_tokens"),
    ],
)
def test_schedule_refuses_bad_input(args, words):
    with pytest.raises(ValueError, match=words):
        batching.schedule(*args)


# --- static batching's waste --------------------------------------------------------------------------


def test_expected_max_and_useful_fraction_by_hand():
    # two lengths uniform on {1, 2}: max = 1 only if both are 1 (1/4): E = 1/4 + 2 * 3/4 = 1.75; E[n] = 1.5
    assert batching.expected_max_uniform(1, 2, 2) == pytest.approx(1.75, rel=1e-15)
    assert batching.useful_fraction(1, 2, 2) == pytest.approx(6 / 7, rel=1e-15)
    assert batching.useful_fraction(7, 7, 32) == 1  # equal lengths waste nothing
    # SPEC-PARTS section 4A: uniform 1..512, E[max] = 455.6, 497.0, 504.6 at B = 8, 32, 64
    assert [round(batching.expected_max_uniform(1, 512, b), 1) for b in (8, 32, 64)] == [455.6, 497.0, 504.6]
    with pytest.raises(ValueError, match="high"):
        batching.expected_max_uniform(5, 4, 2)


# --- the page's headline values ------------------------------------------------------------------------


def test_lesson_4a_headline_values():
    # vLLM 0.26.0 defaults (vllm/engine/arg_utils.py:2460-2479): RTX 4090 LLM 8,192 / 256, serve 2,048;
    # H200 (141 GB >= 70 GiB, not an A100) LLM 16,384 / 1,024, serve 8,192
    assert (_v("llm_tokens"), _v("llm_seqs"), _v("serve_tokens")) == (8192, 256, 2048)
    assert (_v("h200_tokens"), _v("h200_seqs"), _v("h200_serve_tokens")) == (16384, 1024, 8192)
    # 512 + 256 tokens: mean context 512 + 128 = 640; lesson 1A's 110,160 tokens of KV hold
    # 110,160 // 768 = 143 requests (768 = 48 blocks of 16)
    assert (_v("c_mean"), _v("S_res"), _v("kv_tokens"), _v("B_kv")) == (640, 768, 110_160, 143)
    # floors at context 640 (SPEC-PARTS 4A table): RTX 4090 14.07, 15.19, 16.36, 18.69, 31.23 ms; H200 2.95 ms at B = 1
    rows = {r["B"]: r for r in _v("step_rows")}
    assert [round(rows[b]["t_4090"] * 1e3, 2) for b in (1, 32, 64, 128, 256)] == [14.07, 15.19, 16.36, 18.69, 31.23]
    assert round(rows[1]["t_h200"] * 1e3, 2) == 2.95
    # X with the 1 ms overhead at B = 32: 32 / 16.19 ms = 1,976 tokens/s
    assert rows[32]["xo_4090"] == pytest.approx(32 / (rows[32]["t_4090"] + 0.001), rel=1e-12)
    assert round(rows[32]["xo_4090"]) == 1976
    # Little's law at B = 143: floor 19.2 ms (SPEC-PARTS) + 1 ms; 143 / (256 x t)
    assert _v("t_kv") == pytest.approx(0.0202, abs=5e-5)
    assert _v("lam_kv") == pytest.approx(143 / (256 * _v("t_kv")), rel=1e-12)
    # H200 at 1,024: floor 22.47 ms (SPEC-PARTS) + 1 ms
    assert _v("t_h200") == pytest.approx(0.02347, abs=5e-5)
    # problem 2: U(32) on 1..512 = 256.5 / 497.0 = 0.516
    assert _v("p2_u") == pytest.approx(256.5 / 497.0, abs=1e-4)
    # the CPU run (module docstring): 15 + 18 + 21 = 54 static, 48 continuous, 544 tokens
    assert (_v("cpu_chunks"), _v("cpu_static"), _v("cpu_continuous"), _v("cpu_step_tokens")) == (
        [15, 18, 21],
        54,
        48,
        544,
    )


def test_the_page_describes_the_cpu_run_the_test_makes():
    args = snippets.load("labs/continuous_batching.py").parse_args(list(SPEC.cpu_args))
    assert args.batch_sizes == [_v("cpu_B")] and args.requests == _v("cpu_n")
    assert args.prompt_tokens == _v("cpu_prompt") and args.max_num_batched_tokens == _v("cpu_budget")
    assert (args.output_min, args.output_max) == (2, 24)
    assert _v("cpu_lengths_text") == ", ".join(map(str, CPU_LENGTHS))
    assert " and ".join(f"{r:g}" for r in args.rates) == _v("cpu_rates") == "2 and 8"
    assert (args.num_prompts, args.online_output_tokens) == (_v("cpu_num_prompts"), _v("cpu_online_out")) == (8, 16)
    assert _v("cpu_online_generated") == 8 * 16 == 128
    assert args.parts == ["offline", "online"]


# --- the lesson's snippet --------------------------------------------------------------------------------


def test_snippet_counts_steps_like_the_replay():
    toy = snippets.load("lesson_4a/batch_steps.py")
    assert toy.static_steps([5, 1, 1, 5], 2) == 10 and toy.continuous_steps([5, 1, 1, 5], 2) == 7
    assert toy.expected_max(1, 2, 2) == pytest.approx(1.75, rel=1e-15)
    # prompts that fit one step: the snippet and the replay agree on a longer case
    assert toy.continuous_steps(CPU_LENGTHS, 4) == batching.schedule([1] * 12, CPU_LENGTHS, 4, 1000).steps


# --- the lab ---------------------------------------------------------------------------------------------


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


ONLINE_ONLY = (
    "request_rate",
    "failed",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "server_prompt_tokens",
    "server_generated_tokens",
    "server_requests",
)


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
        machine=GPU_MACHINE if kind == "gpu" else CPU_MACHINE,
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


def _claims(receipt) -> dict:
    return {r.claim: r.passed for r in labs.check(receipt)}


def test_a_receipt_worked_by_hand_passes_every_exact_claim():
    receipt = _receipt()
    labs.validate_receipt(receipt)
    assert _claims(receipt) == {
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
    claims = _claims(receipt)
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
        assert _claims(_receipt(online=(_online_row(2.0, **over), ONLINE[1])))[claim] is False, over


def test_online_tradeoff_is_judged_on_gpu_receipts():
    # 8/s: 120 tok/s at 2.2 ms against 2/s: 32 tok/s at 2.3 ms: more throughput but a LOWER p99 TPOT
    assert _claims(_receipt(kind="gpu", online=ONLINE))["online_tradeoff"] is False
    faster = (ONLINE[0], _online_row(8.0, output_tok_s=120.0, tpot_p99_ms=2.5))
    assert _claims(_receipt(kind="gpu", online=faster))["online_tradeoff"] is True


def test_the_figure_draws_the_online_rows_of_gpu_receipts_only():
    from infercourse.pages import lesson_4a

    gpu_receipt, cpu_receipt = _receipt(kind="gpu", online=ONLINE), _receipt(online=ONLINE)
    points = lesson_4a.measured_points([cpu_receipt, gpu_receipt])
    assert [(name, row["request_rate"]) for name, row in points] == [
        (GPU_MACHINE["name"], 2.0),
        (GPU_MACHINE["name"], 8.0),
    ]
    assert f"measured, {GPU_MACHINE['name']} (p99 TPOT)" in lesson_4a.pareto_figure(points)
    assert "measured," not in lesson_4a.pareto_figure([])  # no GPU receipt yet: the prediction alone


def test_rate_points_by_hand():
    # RTX 4090 (1,008 GB/s), Qwen2.5-7B: 14,141,238,272 B of weights read per step (no embedding table),
    # 57,344 B/token of KV at a mean context of 512 + 256 / 2 = 640, plus the 1 ms overhead:
    # t(B) = (14,141,238,272 + B x 36,700,160) / 1.008e12 + 0.001
    # rate 2, n = 256: t(7) = 15.2839 ms, 512 x t(7) = 7.83 > 7; t(8) = 15.3203 ms, 512 x t(8) = 7.84 <= 8
    # rate 32 with a cap of 128: t(128) = 19.6893 ms, 8,192 x t(128) = 161.3 > 128: past the knee,
    # X = 128 / 19.6893 ms = 6,501 tokens/s; Little's law at the cap: 128 / (256 x t(128)) = 25.39 requests/s
    from infercourse.registry import COURSE_MODEL, STEP_OVERHEAD_S, gpu, model

    g, cfg = gpu("RTX 4090"), model(COURSE_MODEL).config
    low = batching.rate_point(g, cfg, 2, 256, 640, STEP_OVERHEAD_S, 128)
    assert (low["B"], low["knee"], low["x"]) == (8, False, 512)
    assert low["tpot"] == pytest.approx(0.0153203, abs=1e-7)
    high = batching.rate_point(g, cfg, 32, 256, 640, STEP_OVERHEAD_S, 128)
    assert (high["B"], high["knee"], round(high["x"])) == (128, True, 6501)
    assert batching.batch_at_rate(g, cfg, 32, 256, 640, STEP_OVERHEAD_S, 128) is None
    rows = _v("rate_rows")
    assert [r["B"] for r in rows] == [8, 16, 34, 73, 128] and _v("online_cap") == 128  # min(128, B_kv = 143)
    assert _v("lam_knee") == pytest.approx(25.39, abs=0.005) and _v("knee_rates") == "32"
    with pytest.raises(ValueError, match="rate"):
        batching.batch_at_rate(g, cfg, 0, 256, 640, STEP_OVERHEAD_S, 128)


def test_one_step_off_fails():
    assert _claims(_receipt(static={"steps": 55}))["steps_exact"] is False
    assert _claims(_receipt(continuous={"steps": 47}))["steps_exact"] is False
    assert _claims(_receipt(async_scheduling=True))["steps_exact"] is None  # the replay assumes it off


def test_a_short_request_or_a_lost_token_fails():
    assert _claims(_receipt(continuous={"wrong_lengths": 1, "generated_tokens": 159}))["tokens_exact"] is False
    assert _claims(_receipt(static={"step_tokens": 543}))["histogram_sum"] is False


def test_continuous_more_steps_than_static_fails():
    assert _claims(_receipt(continuous={"steps": 55}))["continuous_fewer_steps"] is False


def test_preemption_fails_only_when_the_batch_fit():
    assert _claims(_receipt(continuous={"preemptions": 1}))["no_preemption"] is False
    # 4 x (32 + 24) = 224 tokens needed; a cache of 200 may preempt: not judged
    assert _claims(_receipt(continuous={"preemptions": 1}, kv_tokens=200))["no_preemption"] is None


def test_throughput_is_judged_on_gpu_receipts():
    assert _claims(_receipt(kind="gpu", continuous={"output_tok_s": 30.0}))["continuous_faster"] is True
    assert _claims(_receipt(kind="gpu", continuous={"output_tok_s": 20.0}))["continuous_faster"] is False


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
        (["--rates", "2", "0"], "--rates must be positive and finite (requests/s), got 2.0 0.0"),
        (["--rates", "-1"], "--rates must be positive"),
        (["--online-output-tokens", "1"], "need --num-prompts >= 1 and --online-output-tokens >= 2"),
        (["--online-output-tokens", "600"], "an online request needs 1112 tokens"),  # 512 + 600 > 1024
        (["--port", "70000"], "--port 70000 is not a free port"),
    ],
)
def test_lab_refuses_bad_input_in_one_line(tmp_path, extra, words):
    """Checked before vLLM is imported: any Python runs it (here the docs environment's)."""
    (tmp_path / "config.json").write_text("{}")
    lab = ROOT / "snippets" / "labs" / "continuous_batching.py"
    done = subprocess.run(
        [sys.executable, str(lab), "--model", str(tmp_path), *extra], capture_output=True, text=True, timeout=60
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert words in lines[0]


def test_lab_refuses_a_port_in_use_before_the_server_starts(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    lab = ROOT / "snippets" / "labs" / "continuous_batching.py"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, str(lab), "--model", str(tmp_path), "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and lines == [
        f"error: --port {port} is not a free port on 127.0.0.1; pass another, or 0 for any free one"
    ]
