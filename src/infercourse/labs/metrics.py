"""Lab 0B, ``snippets/labs/metrics.py``: TTFT, TPOT, E2E and the pooled mean ITL per grid row.

Receipt rows: ``prompt_tokens``, ``output_tokens`` (counts); ``ttft_ms``, ``tpot_ms``, ``e2e_ms``
(ms, medians over the lab's repeats); ``tpot_mean_ms`` (ms, the mean TPOT of the repeats) and
``itl_mean_ms`` (ms, the engine's ITL histogram: the sum of the repeats' gaps over their number).

The TTFT and TPOT floors are lab 0A's (:func:`infercourse.labs.core.floors`, shared with lab 0A): one prefill pass,
and one decode step at the mean context S + n/2, kernel by kernel. Three claims are 0A's own and
are shared with it (in core), since this grid contains 0A's prompt-length rows.
"""

from __future__ import annotations

from infercourse import fmt, snippets
from infercourse.exercises import Exercise
from infercourse.labs import core
from infercourse.registry import COURSE_MODEL, LAB_GPU, gpu, model

GRID = core.lab_grid("metrics")
"""(prompt tokens, output tokens) rows of the lab, read from the lab itself."""

ITL_VS_TPOT = 0.02
"""Per row, the pooled mean ITL must be within 2 % of the mean TPOT of the row's requests. All
requests of a row have the same length, so the token-weighted and the request-weighted means are
the same number (lesson 0B, section 3); both come from the same engine timestamps, so only float
rounding separates them (CPU runs here: under 0.01 %). The slack is for a vLLM whose histogram
and per-request stats stamp a token at slightly different points."""


@core.claim
def itl_equals_tpot(receipt: core.Receipt) -> core.ClaimResult:
    """Every row: |mean ITL / mean TPOT - 1| <= ITL_VS_TPOT."""
    worst = max(receipt["results"], key=lambda r: abs(r["itl_mean_ms"] / r["tpot_mean_ms"] - 1))
    gap = worst["itl_mean_ms"] / worst["tpot_mean_ms"] - 1
    return core.ClaimResult(
        "itl_mean_equals_tpot_mean",
        f"with equal lengths per row, the pooled mean ITL equals the mean TPOT within {ITL_VS_TPOT:.0%}",
        abs(gap) <= ITL_VS_TPOT,
        f"largest gap {gap:+.3%} at prompt {worst['prompt_tokens']}, output {worst['output_tokens']} "
        f"(ITL {worst['itl_mean_ms']:.3f} ms, TPOT {worst['tpot_mean_ms']:.3f} ms)",
    )


def compare(receipt: core.Receipt) -> list[core.Compared]:
    """Each row's pooled mean ITL beside its requests' mean TPOT, the number :func:`itl_equals_tpot` says it is
    (equal lengths per row; the same engine timestamps, to the receipt's 4 decimals: exact, on any machine)."""
    return core.compare_rows(receipt, "mean ITL", "ms", "itl_mean_ms", lambda row: row["tpot_mean_ms"])


@core.claim
def tpot_above_floor_gpu(receipt: core.Receipt) -> core.ClaimResult:
    """On a GPU the registry knows, with a model whose config is found: every TPOT is at or above its floor."""
    statement = "on a GPU, every row's TPOT is at or above its roofline floor (efficiency <= 100 %)"
    if receipt["machine"].get("kind") != "gpu":
        return core.ClaimResult("tpot_above_floor_gpu", statement, None, "not applied to a CPU receipt (no GPU floor)")
    facts, config = core.gpu_for_name(receipt["machine"].get("name", "")), core.model_config_for(receipt)
    if facts is None or config is None:
        return core.ClaimResult("tpot_above_floor_gpu", statement, None, "GPU or model not in the registry: no floor")
    eff = core.efficiency(receipt, facts, config)
    worst = max(e.ratio for e in eff)
    return core.ClaimResult("tpot_above_floor_gpu", statement, worst <= 1.0, f"highest efficiency {worst:.0%}")


def e2e_floor_ms(row_floors: dict[str, float]) -> float:
    """A row's E2E floor (ms) from its :func:`~infercourse.labs.core.floors`: TTFT plus the n - 1 decode steps."""
    return (row_floors["ttft_s"] + row_floors["decode_s"]) * 1e3


def prediction(gpu_name: str = LAB_GPU, model_name: str = COURSE_MODEL) -> str:
    """Markdown: the floors of every grid row on ``gpu_name`` for the course's model in BF16."""
    facts, config = gpu(gpu_name), model(model_name).config
    lines = [
        f"{model_name} in BF16 on {fmt.count(facts.bandwidth_gb_s)} GB/s and {fmt.fixed(facts.bf16_dense_tflops)} "
        "TFLOP/s (BF16 dense, FP32 accumulate). TTFT floor = one prefill pass (weight matmuls with the output head "
        "applied to the last position only, plus causal attention); TPOT floor = one decode step at the mean "
        "context S + n/2 (every matmul weight and the cache read once); E2E floor = TTFT + (n − 1) × TPOT. "
        "With one request at a time the mean ITL equals the mean TPOT. A real run is slower than every floor.",
        "",
        *core.floors_table(facts, config, GRID, "E2E floor (ms)", lambda f: fmt.fixed(e2e_floor_ms(f), 0)),
    ]
    return "\n".join(lines)


def _ms(digits: int):
    return lambda v: fmt.fixed(v, digits)


# --- the notebook's exercises ----------------------------------------------------------------------

METRICS = snippets.load("lesson_0b/latency_metrics.py")
"""Lesson 0B's definitions (TTFT, TPOT, ITL, E2E), the exercises' arithmetic."""
ONE = METRICS.Request("one", 0, METRICS.evenly(200, 20, 257))
"""Exercise 1's request: token times in ms after its arrival."""
SHORT, LONG = (
    METRICS.Request("short", 0, METRICS.evenly(100, 60, 3)),
    METRICS.Request("long", 0, METRICS.evenly(150, 20, 11)),
)
"""Exercise 2's requests: few slow gaps, many fast ones."""
E2E_ROW = (1024, 512)
"""The grid row of exercise 3: (prompt tokens, output tokens)."""


def _e2e_floor_ms() -> float:
    return e2e_floor_ms(core.floors(gpu(LAB_GPU), model(COURSE_MODEL).config, *E2E_ROW))


def _gaps(r) -> str:
    return f"{len(r.token_ms)} tokens, {METRICS.itls(r)[0]:g} ms apart"


EXERCISES = (
    Exercise(
        f"A request's first token reaches the client {METRICS.ttft(ONE):g} ms after it arrived, its "
        f"{len(ONE.token_ms)}th and last {METRICS.e2e(ONE):,g} ms after. What is its TPOT?",
        lambda: METRICS.tpot(ONE),
        "ms",
        "TPOT = (last token − first token) / (n − 1): the first token is TTFT's, so n − 1 gaps remain (lesson 0B).",
        rel_tol=0.01,
    ),
    Exercise(
        f"Two requests: one of {_gaps(SHORT)}; one of {_gaps(LONG)}. Their mean TPOT is the mean of the two gaps. What "
        "is the mean ITL, pooled over every gap (what `vllm bench serve` reports)?",
        lambda: METRICS.summary([SHORT, LONG])["mean_itl_ms"],
        "ms",
        "ITL pools the gaps, so every gap counts once: the long request's many gaps outweigh the short one's few, "
        "and the pooled mean leans to the long request's gap (lesson 0B; the lab reads vLLM's ITL histogram).",
        rel_tol=0.02,
    ),
    Exercise(
        f"On the {LAB_GPU}, the E2E floor of the lab's row of {E2E_ROW[0]:,} prompt and {E2E_ROW[1]} output tokens?",
        _e2e_floor_ms,
        "ms",
        "E2E = TTFT + (n − 1) × TPOT: one prefill pass, then n − 1 decode steps, each reading every matmul weight "
        "once (all but the embedding table, a lookup) and the cache (lesson 0B, with lesson 0A's floors).",
        rel_tol=0.05,
    ),
)


SPEC = core.lab_spec(
    __name__,
    # its own claims and the TTFT and TPOT claims lab 0B's metrics share (core)
    claims=(core.ttft_grows, core.tpot_flat, core.tpot_gpu, itl_equals_tpot, tpot_above_floor_gpu),
    key=("prompt_tokens", "output_tokens"),
    header="TPOT (ms)",
    columns=(
        core.Column.count("prompt_tokens", "prompt"),
        core.Column.count("output_tokens", "output"),
        core.Column("ttft_ms", "TTFT (ms)", _ms(1)),
        core.Column("tpot_ms", "TPOT (ms)", _ms(2)),
        core.Column("e2e_ms", "E2E (ms)", _ms(0)),
        core.Column("itl_mean_ms", "mean ITL (ms)", _ms(2)),
    ),
    grid=GRID,
    demands=lambda: core.floor_demands(gpu(LAB_GPU), model(COURSE_MODEL).config, GRID, "metrics"),
    cpu_max_model_len=max(s + n for s, n in GRID),  # 4096 + 128 = 4224
    cpu_args=("--repeats", "3"),
    work=core.sequential_work("metrics"),
)
