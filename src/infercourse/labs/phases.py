"""Lab 0A, ``snippets/labs/phases.py``: prefill (TTFT) and decode (TPOT) as two phases.

Receipt rows: ``prompt_tokens``, ``output_tokens`` (counts), ``ttft_ms``, ``tpot_ms`` (ms),
``decode_s`` (s), one per :data:`GRID` entry, each the median of the lab's repeats; ``engine_steps``
(steps) and ``step_tokens`` (tokens): vLLM's ``vllm:iteration_tokens_total`` histogram over all the
row's repeats (its count and its sum).

Timing claims are checked on GPU receipts only (:func:`~infercourse.labs.core.gpu_timing`); the
step-count claim is exact and checked everywhere, the CPU included.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from infercourse import fmt
from infercourse.exercises import Exercise
from infercourse.labs import core
from infercourse.registry import COURSE_MODEL, LAB_GPU, gpu, model
from infercourse.transformer import kv_bytes_per_token, param_count

GRID = core.lab_grid("phases")
"""(prompt tokens, output tokens) rows of the lab, read from the lab itself."""


# --- claims ---------------------------------------------------------------------------------------

DECODE_R2 = 0.98
DECODE_SPREAD = 2.0
"""Decode time against n-1 at a 128-token prompt (n = 32, 128, 512) must fit a line with R^2 of
at least DECODE_R2, and decode_s/(n-1) may differ by at most DECODE_SPREAD x between rows.
The spread is what tells a line from other shapes: over these three points a decode time growing
with n squared still fits a line with R^2 = 0.981, but its per-step time spreads 16.5x (511/31);
a constant one spreads 16.5x the other way, and 1 s of fixed cost plus 1 ms per token 11x.
Loose because CI's 2-core CPU is shared: runs there (median of 5) gave spreads of 1.1x to 1.4x
and R^2 of 0.998 to 0.9999."""


def expected_steps(prompt_tokens: int, output_tokens: int) -> tuple[int, int]:
    """(engine steps, tokens) that vLLM's ``vllm:iteration_tokens_total`` records for ONE request run alone.

    The prefill runs in ceil(S / max_num_batched_tokens) steps, the last of which yields the first output
    token, then one step per further token. vLLM records a step in its histograms only when the step
    yields output (vLLM 0.26.0, ``vllm/v1/engine/llm_engine.py``:321-331), so a prefill chunk that yields
    none leaves no observation: n steps, whatever the chunking. The prompt's tokens are counted with the
    first token, so the histogram's sum is S + n."""
    return output_tokens, prompt_tokens + output_tokens


@core.claim
def steps_exact(receipt: core.Receipt) -> core.ClaimResult:
    """Every row: vLLM's step count and scheduled tokens equal :func:`expected_steps` x repeats, exactly."""
    repeats, chunk = receipt["settings"]["repeats"], receipt["settings"]["max_num_batched_tokens"]
    wrong = []
    for row in receipt["results"]:
        steps, tokens = expected_steps(row["prompt_tokens"], row["output_tokens"])
        if (row["engine_steps"], row["step_tokens"]) != (repeats * steps, repeats * tokens):
            wrong.append(
                f"prompt {row['prompt_tokens']}, output {row['output_tokens']}: {row['engine_steps']} steps "
                f"/ {row['step_tokens']} tokens, expected {repeats * steps} / {repeats * tokens}"
            )
    return core.ClaimResult(
        "engine_steps_exact",
        "vLLM's vllm:iteration_tokens_total records n steps per request (the steps that yield its tokens; a "
        "prefill chunk that yields none is not recorded) and its S prompt plus n generated tokens",
        not wrong,
        "; ".join(wrong)
        or f"all {len(receipt['results'])} rows exact ({repeats} runs each, max_num_batched_tokens {chunk:,})",
    )


def compare(receipt: core.Receipt) -> list[core.Compared]:
    """Each row's engine steps beside :func:`expected_steps` x the lab's repeats (exact, on any machine)."""
    repeats = receipt["settings"]["repeats"]
    return core.compare_rows(
        receipt,
        f"engine steps ({repeats} runs)",
        "steps",
        "engine_steps",
        lambda row: repeats * expected_steps(row["prompt_tokens"], row["output_tokens"])[0],
    )


def _row(receipt: core.Receipt, s: int, n: int) -> Mapping[str, Any]:
    return core.find_row(receipt, prompt_tokens=s, output_tokens=n)


@core.gpu_timing
def decode_linear(receipt: core.Receipt) -> core.ClaimResult:
    rows = [_row(receipt, 128, n) for n in (32, 128, 512)]
    steps = [r["output_tokens"] - 1 for r in rows]
    decode = [r["decode_s"] for r in rows]
    statement = (
        f"decode time vs n-1 (n = 32, 128, 512; prompt 128) is a line: R^2 >= {DECODE_R2}, "
        f"decode_s/(n-1) within {DECODE_SPREAD}x"
    )
    try:
        _, slope, r2 = core.linear_fit(steps, decode)
    except ValueError as exc:  # e.g. the same decode time for every n: not a line through growth
        return core.ClaimResult("decode_linear_in_output", statement, False, f"no fit: {exc}")
    per_step = [d / s for d, s in zip(decode, steps, strict=True)]
    spread = max(per_step) / min(per_step) if min(per_step) > 0 else math.inf
    return core.ClaimResult(
        "decode_linear_in_output",
        statement,
        r2 >= DECODE_R2 and spread <= DECODE_SPREAD,
        f"R^2 = {r2:.4f}, slope {slope * 1e3:.3f} ms/token, per-step spread x{spread:.2f}",
    )


# --- the lesson's expected output -----------------------------------------------------------------


def prediction(gpu_name: str = LAB_GPU, model_name: str = COURSE_MODEL) -> str:
    """Markdown: the course's model in BF16, its floors per grid row on ``gpu_name`` (after the label)."""
    facts, config = gpu(gpu_name), model(model_name).config
    n_params, kappa = param_count(config), kv_bytes_per_token(config, 2)
    lines = [
        f"{model_name} in BF16 (N = {fmt.count(n_params)} parameters, {fmt.gb(2 * n_params)} of weights, "
        f"κ = {fmt.count(kappa)} B of KV cache per token); {fmt.count(facts.bandwidth_gb_s)} GB/s and "
        f"{fmt.fixed(facts.bf16_dense_tflops)} TFLOP/s (BF16 dense, FP32 accumulate). "
        "Each floor sums the weight-matmul kernels and the attention kernels, each at "
        "max(FLOPs / peak, bytes / bandwidth); the embedding is a lookup, not a product. "
        "TTFT = one prefill pass over the S prompt tokens, the output head applied once (to the last "
        "position); TPOT = one decode step at the run's mean context S + n/2; decode = (n − 1) × TPOT. "
        "These are floors: a real run is slower.",
        "",
        *core.floors_table(facts, config, GRID, "decode floor (s)", lambda f: fmt.fixed(f["decode_s"], 2)),
    ]
    return "\n".join(lines)


# --- the notebook's exercises ----------------------------------------------------------------------


def _growth(quantity: str, name: str, short: int, long: int, why: str) -> Exercise:
    """The exercise: by what factor :func:`floors`' ``quantity`` (``"ttft_s"``, ``"tpot_s"``, shown as ``name``)
    grows on the lab's card from a ``short``- to a ``long``-token prompt (128 output tokens), within 5 %."""

    def answer() -> float:
        facts, config = gpu(LAB_GPU), model(COURSE_MODEL).config
        return core.floors(facts, config, long, 128)[quantity] / core.floors(facts, config, short, 128)[quantity]

    question = (
        f"On the {LAB_GPU}, by what factor does the {name} floor grow from a {short:,}- to a {long:,}-token prompt?"
    )
    return Exercise(question, answer, "times", why, rel_tol=0.05)


EXERCISE_PROMPT, EXERCISE_OUTPUT = 2048, 64
"""The request of the first exercise (tokens): not one of the lab's grid rows."""

EXERCISES = (
    Exercise(
        f"One request with a {EXERCISE_PROMPT:,}-token prompt and {EXERCISE_OUTPUT} output tokens runs alone, as "
        "each of the lab's requests does. How many engine steps does vLLM's `vllm:iteration_tokens_total` record "
        "for it?",
        lambda: expected_steps(EXERCISE_PROMPT, EXERCISE_OUTPUT)[0],
        "steps",
        "One recorded step per output token: the prefill's last step yields the first token and each decode step "
        "one more; a prefill chunk that yields no token is not recorded (the lab checks it: `engine_steps_exact`).",
    ),
    _growth(
        "ttft_s",
        "TTFT",
        1024,
        4096,
        "Prefill multiplies every weight by all S tokens, so it is compute-bound and grows with S; a little faster, "
        "because causal attention grows with S squared (lesson 0A).",
    ),
    _growth(
        "tpot_s",
        "TPOT",
        128,
        4096,
        "A decode step reads every weight once, whatever the context; the KV cache it also reads grows with S but "
        "stays small beside the weights at these lengths (lesson 0A).",
    ),
)


SPEC = core.lab_spec(
    __name__,
    # its own claims and the TTFT and TPOT claims lab 0B's metrics share (core)
    claims=(steps_exact, core.ttft_grows, core.tpot_flat, core.tpot_gpu, decode_linear),
    efficiency=core.efficiency,
    key=("prompt_tokens", "output_tokens"),
    header="TPOT (ms)",
    columns=(
        core.Column.count("prompt_tokens", "prompt"),
        core.Column.count("output_tokens", "output"),
        core.Column("ttft_ms", "TTFT (ms)", lambda v: fmt.fixed(v, 1)),
        core.Column("tpot_ms", "TPOT (ms)", lambda v: fmt.fixed(v, 2)),
        core.Column("decode_s", "decode (s)", lambda v: fmt.fixed(v, 2)),
    ),
    grid=GRID,
    demands=lambda: core.floor_demands(gpu(LAB_GPU), model(COURSE_MODEL).config, GRID, "phases"),
    cpu_max_model_len=max(s + n for s, n in GRID),  # 4096 + 128 = 4224
    cpu_compiled=True,  # the one CPU run that compiles (torch.compile stays covered); the others start eager
    work=core.sequential_work("phases"),
)
