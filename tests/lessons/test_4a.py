"""Lesson 4A: its formulas, the lesson's snippet and the page's headline values, on values worked by hand.

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

import pytest

from infercourse import batching, labs, snippets
from infercourse.pages import values_for

SPEC = labs.spec("continuous_batching")
PAGE = "lessons/4a-continuous-batching.md"
CPU_LENGTHS = [14, 15, 3, 10, 18, 17, 14, 11, 17, 13, 20, 8]


def _v(name: str):
    return values_for(PAGE)[name].value


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


def test_expected_max_and_useful_fraction_by_hand():
    # two lengths uniform on {1, 2}: max = 1 only if both are 1 (1/4): E = 1/4 + 2 * 3/4 = 1.75; E[n] = 1.5
    assert batching.expected_max_uniform(1, 2, 2) == pytest.approx(1.75, rel=1e-15)
    assert batching.useful_fraction(1, 2, 2) == pytest.approx(6 / 7, rel=1e-15)
    assert batching.useful_fraction(7, 7, 32) == 1  # equal lengths waste nothing
    # SPEC-PARTS section 4A: uniform 1..512, E[max] = 455.6, 497.0, 504.6 at B = 8, 32, 64
    assert [round(batching.expected_max_uniform(1, 512, b), 1) for b in (8, 32, 64)] == [455.6, 497.0, 504.6]
    with pytest.raises(ValueError, match="high"):
        batching.expected_max_uniform(5, 4, 2)


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
    # decode alone at B = 143: floor 19.2 ms (SPEC-PARTS) + 1 ms
    assert _v("t_kv_decode") == pytest.approx(0.0202, abs=5e-5)
    # serving at B = 143 (tests/labs/test_continuous_batching.py writes t(B) out): P = 143 x 512 / 256 = 286
    # prompt tokens; t = 0.243606 x 143 + 0.0365227 x 143 + 1 = 41.058 ms; 143 / (256 x t) = 13.60 requests/s
    assert (_v("S_arr_kv"), _v("step_tokens_kv")) == (286, 429)
    assert _v("t_kv") == pytest.approx(0.041058, abs=5e-6)
    assert _v("lam_kv") == pytest.approx(143 / (256 * 0.041058), rel=2e-4)
    # over lesson 2B's band for tau_0 (0.024 to 1.716 ms) the same step is 40.082 to 41.774 ms:
    # 143 / (256 x 41.774 ms) = 13.372 and 143 / (256 x 40.082 ms) = 13.937 requests/s
    assert (_v("tau0_lo"), _v("tau0_hi")) == pytest.approx((0.024e-3, 1.716e-3))
    assert (_v("t_kv_fast"), _v("t_kv_slow")) == pytest.approx((0.040082, 0.041774), abs=5e-6)
    assert (_v("lam_kv_slow"), _v("lam_kv_fast")) == pytest.approx((13.372, 13.937), abs=2e-3)
    # at B = 1 the overhead costs tau_0 / (14.07 ms + tau_0): 0.024 / 14.095 = 0.17 % to 1.716 / 15.786 = 10.9 %
    assert (_v("x1_4090_overhead_loss_lo"), _v("x1_4090_overhead_loss_hi")) == pytest.approx((0.0017, 0.1087), abs=1e-4)
    # H200 SXM (989 TFLOP/s, 4,800 GB/s) at B = 1,024: linear 1,024 x 40,243,725,312 / 989e12 = 41.668 ms,
    # attention 1,024 x 36,814,848 / 4.8e12 = 7.854 ms, + 1 ms = 50.52 ms
    assert _v("t_h200") == pytest.approx(0.05052, abs=5e-6)
    # a request: 2 x 6,525,288,448 x 767 + 2 x 544,997,376 x 256 + 401,408 x (767 x 768 / 2) = 10,407,057,031,168
    # FLOP, so the card's peak carries 165.2e12 / 1.0407e13 = 15.87 requests/s; leaving the prompts out
    # gives 143 / (256 x 20.2 ms) = 27.6 requests/s, 27.6 x 1.0407e13 / 165.2e12 = 174 % of the peak
    assert _v("req_flops") == 10_407_057_031_168
    assert _v("lam_peak") == pytest.approx(15.874, abs=5e-4)
    assert round(_v("lam_naive"), 1) == 27.6 and round(_v("naive_share"), 2) == 1.74
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
    assert args.parts == ["offline", "online"]


def test_snippet_counts_steps_like_the_replay():
    toy = snippets.load("lesson_4a/batch_steps.py")
    assert toy.static_steps([5, 1, 1, 5], 2) == 10 and toy.continuous_steps([5, 1, 1, 5], 2) == 7
    assert toy.expected_max(1, 2, 2) == pytest.approx(1.75, rel=1e-15)
    # prompts that fit one step: the snippet and the replay agree on a longer case
    assert toy.continuous_steps(CPU_LENGTHS, 4) == batching.schedule([1] * 12, CPU_LENGTHS, 4, 1000).steps


def test_rate_points_by_hand():
    # RTX 4090 (1,008 GB/s, 165.2 TFLOP/s), Qwen2.5-7B: M = 7,070,619,136 matmul parameters (14,141,238,272 B
    # read per step), of which H = 152,064 x 3,584 = 544,997,376 the output head; 57,344 B/token of KV;
    # attention 4 x 28 x 28 x 128 = 401,408 FLOP per key. A serving step at B with 512-token prompts and
    # 256-token answers carries P = 2B prompt tokens and B decodes at c = 512 + 128 = 640:
    #   linear max(2 (M - H) 3B + 2 H B, 2 M) = max(B x 40,243,725,312 / 165.2e12, 14.0290 ms)
    #          = max(0.243606 B, 14.0290) ms
    #   attention keys B x 640 + (B / 256) x 512 x 513 / 2 = 1,153 B; bytes 57,344 x 642 B = 36,814,848 B
    #   -> memory-bound: 0.0365227 B ms
    #   t(B) = max(0.243606 B, 14.0290) + 0.0365227 B + 1 (overhead) ms
    # rate 2: t(7) = 15.2847 ms, 512 x t(7) = 7.83 > 7; t(8) = 15.3212 ms, 512 x t(8) = 7.84 <= 8: B = 8
    # rate 32, cap 128: t(128) = 31.1816 + 4.6749 + 1 = 36.8565 ms, 8,192 x t(128) = 302 > 128: past the knee,
    # which is at the cap: 128 / (256 x 36.8565 ms) = 13.566 requests/s, X = 128 / 36.8565 ms = 3,473 tokens/s
    from infercourse.registry import COURSE_MODEL, STEP_OVERHEAD_S, gpu, model

    g, cfg = gpu("RTX 4090"), model(COURSE_MODEL).config
    online = batching.Server(g, cfg, 512, 256, STEP_OVERHEAD_S, 128, 8192)
    low = batching.rate_point(online, 2)
    assert (low["B"], low["knee"], low["x"]) == (8, False, 512)
    assert low["tpot"] == pytest.approx(0.0153212, abs=1e-7)
    high = batching.rate_point(online, 32)
    assert (high["B"], high["knee"], round(high["x"])) == (128, True, 3473)
    assert high["tpot"] == pytest.approx(0.0368565, abs=1e-7)
    assert batching.batch_at_rate(online, 32) is None
    rows = _v("rate_rows")
    assert [r["B"] for r in rows] == [8, 16, 34, 128, 128] and _v("online_cap") == 128  # min(128, B_kv = 143)
    assert _v("lam_knee") == pytest.approx(13.566, abs=0.0005) and _v("knee_rates") == "16 and 32"
    # a budget of 300 tokens per step holds 3B <= 300: B = 100 at most, so the knee moves there
    assert batching.max_request_rate(batching.Server(g, cfg, 512, 256, STEP_OVERHEAD_S, 128, 300))["B"] == 100
    with pytest.raises(ValueError, match="at least 3"):  # one request's share: 1 decode + 512 / 256 prompt tokens
        batching.max_request_rate(batching.Server(g, cfg, 512, 256, STEP_OVERHEAD_S, 128, 2))
    with pytest.raises(ValueError, match="rate"):
        batching.batch_at_rate(online, 0)
