"""Lab 2A, ``snippets/labs/batch_decode.py``: decode steps at growing batch sizes.

Receipt rows, one per batch size: ``batch`` (sequences), ``step_ms`` (ms: the steady window in which
all B requests decode, over its n - 1 steps), ``median_tpot_ms`` (ms), ``tokens_per_s``,
``bytes_per_step`` (B: M b + B kappa S at the run's mean context), ``achieved_gb_s`` (GB/s) and
``memory_floor_ms`` (ms: bytes / the GPU's datasheet bandwidth; null where the device has none) and
``preemptions`` (requests vLLM preempted while the batch ran: ``vllm:num_preemptions``).

Timing claims are checked on GPU receipts only; "no preemption" is exact and checked everywhere.

The CPU run uses fewer, smaller batches (``cpu_args``); the lesson documents the GPU grid.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from infercourse import figures, fmt
from infercourse.exercises import Exercise
from infercourse.labs import core
from infercourse.registry import COURSE_MODEL, LAB_GPU, GPUFacts, gpu, model
from infercourse.roofline import Demand, compute_bound_batch, decode_demand, decode_kernel_floors, decode_step_floor
from infercourse.transformer import kv_bytes_per_token

GRID = core.lab_grid("batch_decode")
"""Batch sizes of the GPU run, one-element rows, read from the lab itself."""

LAB = core.lab_settings("batch_decode")
"""The lab's default prompt and output lengths (tokens), read from the lab itself: its one home."""
LARGEST_BATCH = max(b for (b,) in GRID)
"""The largest batch of the GPU run (sequences)."""
"""The lab's cap on tokens per engine step (vLLM profiles its activations at this size)."""

PER_TOKEN_GAIN = 0.5
"""From the smallest to the largest batch, the step time may grow by at most this fraction of the
batch ratio (step(Bmax)/step(Bmin) <= 0.5 x Bmax/Bmin): the time per generated token at least halves.
The roofline floors on the RTX 4090 give 1.15x for 64x the batch at the lab's mean context (EXERCISES[1]); CPU runs grow
far less than the batch too (their steps are dominated by fixed per-step work)."""

GPU_STEP_GROWTH = 2.0
"""On a GPU, step(64) / step(1) must stay under 2 (the lesson's "well under 2x"; the floors say 1.15x)."""


def _rows(receipt: core.Receipt) -> list[Mapping[str, Any]]:
    return sorted(receipt["results"], key=lambda r: r["batch"])


def _mean_context(receipt: core.Receipt) -> int:
    s = receipt["settings"]
    return int(s["prompt_len"] + s["output_len"] // 2)


def step_floor_ms(gpu_facts: GPUFacts, config: Mapping[str, Any], batch: int, context: int, b: int = 2) -> float:
    """:func:`~infercourse.roofline.decode_step_floor` in ms for one row (weights and cache ``b`` bytes wide)."""
    return decode_step_floor(gpu_facts, config, context, batch, weight_bytes=b, kv_dtype_bytes=b) * 1e3


def efficiency(receipt: core.Receipt, gpu_facts: GPUFacts, config: Mapping[str, Any]) -> list[core.Efficiency]:
    """Per row, the measured step time (ms) against the per-kernel step floor at the run's mean context."""
    b = core.dtype_bytes(config, receipt.get("dtype", "auto"))
    ctx = _mean_context(receipt)
    return [
        core.Efficiency(i, "step", "ms", row["step_ms"], step_floor_ms(gpu_facts, config, row["batch"], ctx, b))
        for i, row in enumerate(receipt["results"])
    ]


def compare(receipt: core.Receipt) -> list[core.Compared]:
    """Each row's step time beside the memory floor the lab recorded for the GPU that ran it (``memory_floor_ms``:
    M b + B kappa S bytes / its datasheet bandwidth); none on a CPU, which has no datasheet bandwidth."""
    return core.compare_rows(
        receipt,
        "step time",
        "ms",
        "step_ms",
        lambda row: row["memory_floor_ms"],
        kind="floor",
        where=lambda row: row["memory_floor_ms"] is not None,
    )


@core.claim
def no_preemption(receipt: core.Receipt) -> core.ClaimResult:
    """No request was preempted in any batch (a recomputed request would skew that batch's step time)."""
    hit = [f"B={r['batch']}: {r['preemptions']}" for r in _rows(receipt) if r["preemptions"]]
    return core.ClaimResult(
        "no_preemption",
        "no request is preempted (vllm:num_preemptions stays 0 in every batch)",
        not hit,
        "preempted: " + ", ".join(hit) + "; the KV cache is too small for the batch, so the step times are skewed"
        if hit
        else "0 in every batch",
    )


@core.gpu_timing
def throughput_rises(receipt: core.Receipt) -> core.ClaimResult:
    rows = _rows(receipt)
    rates = [r["tokens_per_s"] for r in rows]
    ok = len(rows) >= 2 and all(b > a for a, b in zip(rates, rates[1:], strict=False))
    return core.ClaimResult(
        "throughput_rises_with_batch",
        "output tokens/s rises with every larger batch",
        ok,
        " -> ".join(f"B={r['batch']}: {r['tokens_per_s']:.0f}" for r in rows),
    )


@core.gpu_timing
def step_grows_less_than_batch(receipt: core.Receipt) -> core.ClaimResult:
    rows = _rows(receipt)
    lo, hi = rows[0], rows[-1]
    growth, ratio = hi["step_ms"] / lo["step_ms"], hi["batch"] / lo["batch"]
    return core.ClaimResult(
        "step_grows_less_than_batch",
        f"from the smallest to the largest batch the step time grows by at most {PER_TOKEN_GAIN} x the batch ratio",
        len(rows) >= 2 and growth <= PER_TOKEN_GAIN * ratio,
        f"step {lo['step_ms']:.3f} -> {hi['step_ms']:.3f} ms (x{growth:.2f}) for {ratio:g}x the batch",
    )


@core.claim
def step_nearly_flat_gpu(receipt: core.Receipt) -> core.ClaimResult:
    statement = f"on a GPU, step(64) / step(1) < {GPU_STEP_GROWTH}"
    batches = {r["batch"]: r for r in receipt["results"]}
    if receipt["machine"].get("kind") != "gpu" or not {1, 64} <= set(batches):
        return core.ClaimResult("step_nearly_flat_gpu", statement, None, "needs a GPU receipt with batches 1 and 64")
    growth = batches[64]["step_ms"] / batches[1]["step_ms"]
    return core.ClaimResult("step_nearly_flat_gpu", statement, growth < GPU_STEP_GROWTH, f"x{growth:.2f}")


@core.claim
def bandwidth_below_datasheet(receipt: core.Receipt) -> core.ClaimResult:
    statement = "the achieved bandwidth never exceeds the GPU's datasheet bandwidth"
    facts = core.gpu_for_name(receipt["machine"].get("name", "")) if receipt["machine"].get("kind") == "gpu" else None
    if facts is None:
        return core.ClaimResult("bandwidth_below_datasheet", statement, None, "not a GPU the registry has")
    top = max(r["achieved_gb_s"] for r in receipt["results"])
    return core.ClaimResult(
        "bandwidth_below_datasheet",
        statement,
        top <= facts.bandwidth_gb_s,
        f"highest {top:.0f} GB/s vs {facts.bandwidth_gb_s:,} GB/s",
    )


def prediction(gpu_name: str = LAB_GPU, model_name: str = COURSE_MODEL) -> str:
    """Markdown: per batch size, each kernel's floor and the step floor on ``gpu_name`` (after the label)."""
    facts, config = gpu(gpu_name), model(model_name).config
    ctx = LAB.PROMPT_LEN + LAB.OUTPUT_LEN // 2
    peak = LARGEST_BATCH * (LAB.PROMPT_LEN + LAB.OUTPUT_LEN)
    lines = [
        f"{model_name} in BF16, every sequence at the run's mean context of {LAB.PROMPT_LEN} + {LAB.OUTPUT_LEN}/2 = "
        f"{fmt.count(ctx)} tokens; {fmt.count(facts.bandwidth_gb_s)} GB/s and {fmt.fixed(facts.bf16_dense_tflops)} "
        "TFLOP/s (BF16 dense, FP32 accumulate). Step floor = weight-matmul floor + attention floor, each "
        "max(FLOPs / peak, bytes / bandwidth). A real step is slower than its floor. "
        f"The largest batch keeps {LARGEST_BATCH} × ({LAB.PROMPT_LEN} + {LAB.OUTPUT_LEN}) = {fmt.count(peak)} tokens "
        f"in the KV cache, {fmt.gib(peak * kv_bytes_per_token(config, 2))} at "
        f"{fmt.count(kv_bytes_per_token(config, 2))} B/token; "
        f"the lab caps `max_num_batched_tokens` at {fmt.count(LAB.MAX_BATCHED_TOKENS)} so that vLLM's activation "
        "profile leaves room for it, prints what vLLM allocated, and records preemptions.",
        "",
        "| batch | matmul floor (ms) | attention floor (ms) | step floor (ms) | tokens/s ceiling |",
        "|---:|---:|---:|---:|---:|",
    ]
    for (batch,) in GRID:
        linear, attention = decode_kernel_floors(facts, config, ctx, batch)
        step = linear + attention
        lines.append(
            f"| {batch} | {fmt.fixed(linear * 1e3, 2)} | {fmt.fixed(attention * 1e3, 3)} | "
            f"{fmt.fixed(step * 1e3, 2)} | {fmt.count(batch / step)} |"
        )
    return "\n".join(lines)


def demands(gpu_name: str = LAB_GPU, model_name: str = COURSE_MODEL) -> list[Demand]:
    """What each step floor of :func:`prediction` asks of ``gpu_name`` (the physics check's input)."""
    facts, config = gpu(gpu_name), model(model_name).config
    ctx = LAB.PROMPT_LEN + LAB.OUTPUT_LEN // 2
    return [
        decode_demand(facts, config, b, ctx, decode_step_floor(facts, config, ctx, b), f"batch_decode: B = {b}")
        for (b,) in GRID
    ]


def measured_points(receipt: core.Receipt) -> list[tuple[int, float, float]]:
    """Per row of a receipt: (batch, the weight matmuls' intensity 2B/b in FLOP/byte, the matmul
    FLOP/s the step achieved, 2 M B / step time). M is the receipt's ``matmul_params``.

    Raises:
        KeyError: the receipt's settings lack ``matmul_params`` (an older receipt).
    """
    b = core.dtype_bytes(model(COURSE_MODEL).config, receipt.get("dtype", "auto"))
    m = receipt["settings"]["matmul_params"]
    return [
        (row["batch"], 2 * row["batch"] / b, 2 * m * row["batch"] / (row["step_ms"] / 1e3)) for row in _rows(receipt)
    ]


def receipts_roofline_svg(receipts: Sequence[core.Receipt]) -> str:
    """HTML for lesson 2A: each GPU receipt's decode matmuls (intensity, achieved FLOP/s) drawn against
    that GPU's roofline (an SVG), or one sentence saying no GPU receipt is committed yet.

    Receipts from a GPU the registry does not know are left out (there is no roof to draw).
    """
    drawn = [(r, g) for r in receipts if (g := core.gpu_for_name(r["machine"]["name"])) is not None]
    if not drawn:
        return (
            "<p><em>None yet: the first GPU receipt of this lab is drawn here against its GPU's roofline "
            "(CPU receipts are not).</em></p>"
        )
    return (
        '<div class="course-figure">'
        + figures.plot_svg(lambda ax: _receipts_plot(ax, drawn), salt="batch-decode-receipts", figsize=(7, 4.2))
        + "</div>"
    )


def _receipts_plot(ax, drawn: list[tuple[core.Receipt, GPUFacts]]) -> None:
    """Each receipt's measured points on its GPU's roofline, on the matplotlib axes ``ax``."""
    for receipt, facts in drawn:
        points = measured_points(receipt)
        ridge = facts.bf16_dense_tflops / facts.bandwidth_gb_s * 1e3  # FLOP/byte
        xs = sorted({0.5 * points[0][1], *(x for _, x, _ in points), ridge, 4 * ridge})
        ax.loglog(
            xs,
            [min(facts.bf16_dense_tflops, x * facts.bandwidth_gb_s / 1e3) for x in xs],
            label=(
                f"{facts.name} roof ({fmt.count(facts.bandwidth_gb_s)} GB/s, "
                f"{fmt.fixed(facts.bf16_dense_tflops)} TFLOP/s)"
            ),
        )
        ax.loglog(
            [x for _, x, _ in points],
            [y / 1e12 for _, _, y in points],
            "o",
            label=f"measured: {receipt['machine']['name']}, vLLM {receipt['versions'].get('vllm')}, "
            f"{receipt['date_utc'][:10]}",
        )
    ax.set(xlabel="weight-matmul intensity 2B/b (FLOP/byte)", ylabel="matmul TFLOP/s (BF16 dense)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small", loc="upper left")


# --- the notebook's exercises ----------------------------------------------------------------------

MEAN_CONTEXT = LAB.PROMPT_LEN + LAB.OUTPUT_LEN // 2
"""The lab's mean context over its decode steps (tokens), at its default lengths."""


def _step_floor_ms(batch: int) -> float:
    return step_floor_ms(gpu(LAB_GPU), model(COURSE_MODEL).config, batch, MEAN_CONTEXT)


EXERCISES = (
    Exercise(
        f"At about what batch do the {LAB_GPU}'s BF16 weight matmuls reach its ridge point (B*)?",
        lambda: compute_bound_batch(gpu(LAB_GPU)),
        "sequences",
        "A weight matmul does 2 × B FLOPs per weight it reads (b = 2 bytes), so its intensity is B FLOP/byte; it "
        "reaches the ridge R = peak / bandwidth at B* = R b / 2 (lesson 2A).",
        rel_tol=0.05,
    ),
    Exercise(
        f"On the {LAB_GPU}, at the lab's mean context ({MEAN_CONTEXT} tokens), by what factor does the decode step "
        f"floor grow from batch 1 to batch {LARGEST_BATCH}?",
        lambda: _step_floor_ms(LARGEST_BATCH) / _step_floor_ms(1),
        "times",
        "Below B* a step is memory-bound: the weights are read once for the whole batch and only the KV cache, "
        "B × κ × S bytes, grows with B (lesson 2A).",
        rel_tol=0.05,
    ),
    Exercise(
        f"And the ceiling on output tokens per second at batch {LARGEST_BATCH} (B / step floor)?",
        lambda: LARGEST_BATCH / (_step_floor_ms(LARGEST_BATCH) / 1e3),
        "tokens/s",
        "B tokens per step, one step per floor: the batch multiplies the tokens a step makes while the step itself "
        "barely grows (lesson 2A).",
        rel_tol=0.05,
    ),
)


SPEC = core.lab_spec(
    __name__,
    key=("batch",),
    header="tokens/s",
    columns=(
        core.Column.count("batch"),
        core.Column("step_ms", "step (ms)", lambda v: fmt.fixed(v, 2)),
        core.Column.count("tokens_per_s", "tokens/s"),
        core.Column("achieved_gb_s", "achieved GB/s", lambda v: fmt.fixed(v, 0)),
    ),
    grid=None,  # the CPU run uses fewer batches (cpu_args); GRID above is the GPU run's
    cpu_max_model_len=128,
    cpu_args=("--batches", "1,2,4,8", "--prompt-len", "64", "--output-len", "32"),
    work=core.LabWork(
        engines=1,
        decode_steps=2 * LAB.OUTPUT_LEN * len(GRID),  # a warm-up and a timed batch per size
        peak_kv_tokens=LARGEST_BATCH * (LAB.PROMPT_LEN + LAB.OUTPUT_LEN),
    ),
)
