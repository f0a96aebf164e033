"""Lab 2B, ``snippets/labs/step_overhead.py``: a decode step predicted from a probe of the machine, then
measured, for models of growing size.

Receipt rows, one per (variant, mode, batch): ``variant`` (``L<layers>xW<width>``), ``mode`` (``graphs``:
vLLM's default; ``eager``: ``enforce_eager``), ``layers``, ``width``; ``params`` (the resized model's
parameter count), ``weight_bytes``, ``step_bytes`` (B read per decode step: the matmul weights once and
each sequence's KV cache at the mean context), ``step_flops``; ``floor_ms`` (max(bytes / probe bandwidth,
FLOPs / probe matmul rate)), the measured ``step_ms`` and ``ratio`` = step / floor.

The parameter counts and the floor's arithmetic are exact and checked everywhere (they come from the
config and the receipt's own probe); the claims about time are checked on GPU receipts only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from infercourse import fmt, roofline
from infercourse.exercises import Exercise
from infercourse.labs import core
from infercourse.registry import (
    COURSE_MODEL,
    KERNEL_LAUNCH_US,
    KERNELS_OUTSIDE_LAYERS,
    KERNELS_PER_LAYER,
    LAB_GPU,
    gpu,
    model,
)
from infercourse.transformer import kv_bytes_per_token, param_count

LAB = core.lab_settings("step_overhead")
VARIANTS = tuple(tuple(v) for v in LAB.VARIANTS)
CONTEXT = LAB.PROMPT_LEN + LAB.OUTPUT_LEN // 2
"""Tokens of context a decode step reads per sequence, on average over the run (tokens)."""


def resized(config: Mapping[str, Any], layers: int, width: float) -> dict[str, Any]:
    """``config`` as the lab resizes it (its ``resize``): ``layers`` layers, the :data:`SCALED` sizes times
    ``width``, the head size kept.

    Raises:
        ValueError: a scaled size that is not a whole number.
    """
    out = dict(config)
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    for key in LAB.SCALED:
        scaled = config[key] * width
        if scaled != int(scaled) or scaled < 1:
            raise ValueError(f"width {width:g} makes {key} {config[key]} x {width:g} = {scaled:g}, not whole")
        out[key] = int(scaled)
    out["num_hidden_layers"] = layers
    out["head_dim"] = head_dim
    return out


def step_bytes_and_flops(config: Mapping[str, Any], batch: int, dtype_bytes: int = 2) -> tuple[int, int]:
    """(bytes, FLOPs) of one decode step of ``batch`` sequences at :data:`CONTEXT` tokens: the matmul
    weights once (:func:`infercourse.roofline.matmul_params`: all but an untied input embedding) plus each
    sequence's KV cache; 2 FLOPs per matmul weight and sequence (attention's FLOPs left out: at this
    context they are under 1 % of them)."""
    m = roofline.matmul_params(config)
    return m * dtype_bytes + batch * kv_bytes_per_token(config, dtype_bytes) * CONTEXT, 2 * m * batch


def first_rows(receipt: core.Receipt) -> list[Mapping[str, Any]]:
    """The rows of the fitted line: the first batch, the mode of the first row (the run's default)."""
    rows = receipt["results"]
    return [r for r in rows if r["batch"] == rows[0]["batch"] and r["mode"] == rows[0]["mode"]]


# --- claims ---------------------------------------------------------------------------------------

FLOOR_RTOL = 1e-4
"""The floor the lab printed must equal the one recomputed from the receipt's probe within 0.01 % (it is
rounded to 6 decimals of a millisecond)."""


@core.claim
def params_exact(receipt: core.Receipt) -> core.ClaimResult:
    """Every variant's parameter count, and each row's step bytes and FLOPs, equal the course's formulas
    (``transformer.param_count``, ``roofline.matmul_params``, ``kv_bytes_per_token``) on the resized config."""
    statement = (
        "each variant's parameters (Hugging Face's own build of the resized config) equal the course's "
        "formula, and each row's step bytes and FLOPs equal matmul weights x 2 B + B x kappa x context"
    )
    config = core.model_config_for(receipt)
    if config is None:
        return core.ClaimResult("params_exact", statement, None, f"no config for {receipt['model']!r}")
    wrong = []
    for r in receipt["results"]:
        cfg = resized(config, r["layers"], r["width"])
        want = (param_count(cfg), *step_bytes_and_flops(cfg, r["batch"]))
        got = (r["params"], r["step_bytes"], r["step_flops"])
        if got != want:
            wrong.append(f"{r['variant']} B={r['batch']}: {got} against {want}")
    return core.ClaimResult(
        "params_exact", statement, not wrong, "; ".join(wrong) or f"{len(receipt['results'])} rows exact"
    )


def probe_floor_ms(receipt: core.Receipt, row: Mapping[str, Any]) -> float:
    """The floor (ms) of ``row``'s step on the machine that ran it: max(step bytes / the receipt's probed
    bandwidth, step FLOPs / its probed matmul rate)."""
    probe = receipt["settings"]["probe"]
    bw, peak = probe["bandwidth_gb_s"] * 1e9, probe["matmul_tflops"] * 1e12
    return 1e3 * max(row["step_bytes"] / bw, row["step_flops"] / peak)


@core.claim
def floor_from_probe(receipt: core.Receipt) -> core.ClaimResult:
    """Each row's floor is max(step bytes / probed bandwidth, step FLOPs / probed matmul rate), and its
    ratio is step / floor."""
    probe = receipt["settings"]["probe"]
    wrong = []
    for r in receipt["results"]:
        floor_ms = probe_floor_ms(receipt, r)
        if not math.isclose(r["floor_ms"], floor_ms, rel_tol=FLOOR_RTOL) or not math.isclose(
            r["ratio"], r["step_ms"] / floor_ms, rel_tol=FLOOR_RTOL
        ):
            wrong.append(f"{r['variant']} B={r['batch']}: floor {r['floor_ms']} ms against {floor_ms:.6f}")
    return core.ClaimResult(
        "floor_from_probe",
        "each floor is max(bytes / the probed bandwidth, FLOPs / the probed matmul rate) of this machine",
        not wrong,
        "; ".join(wrong)
        or f"probe {fmt.fixed(probe['bandwidth_gb_s'], 1)} GB/s, {fmt.fixed(probe['matmul_tflops'], 3)} TFLOP/s",
    )


def compare(receipt: core.Receipt) -> list[core.Compared]:
    """Each row's measured decode step beside its floor on the machine that ran it, :func:`probe_floor_ms` from the
    receipt's own probe (a floor: the step sits at or above it)."""
    return core.compare_rows(
        receipt, "step time", "ms", "step_ms", lambda row: probe_floor_ms(receipt, row), kind="floor"
    )


@core.gpu_timing
def never_below_floor(receipt: core.Receipt) -> core.ClaimResult:
    ratios = [r["ratio"] for r in receipt["results"]]
    return core.ClaimResult(
        "never_below_floor",
        "no measured step is faster than its floor (ratio >= 1): the floor is a floor",
        min(ratios) >= 1,
        f"ratios {fmt.fixed(min(ratios), 2)} to {fmt.fixed(max(ratios), 2)}",
    )


@core.gpu_timing
def overhead_shrinks_with_size(receipt: core.Receipt) -> core.ClaimResult:
    rows = first_rows(receipt)
    small, large = rows[0], rows[-1]
    return core.ClaimResult(
        "overhead_shrinks_with_size",
        "the smallest model's step is further above its floor than the largest model's (a larger ratio)",
        small["ratio"] > large["ratio"],
        f"{small['variant']} x{fmt.fixed(small['ratio'], 2)}, {large['variant']} x{fmt.fixed(large['ratio'], 2)}",
    )


def fitted_line(receipt: core.Receipt) -> tuple[float, float, float] | None:
    """(tau_0 in ms, effective bandwidth in GB/s, R^2) of step_ms = tau_0 + step bytes / bandwidth over the
    first batch's rows of the run's default mode; None with fewer than three rows or no spread."""
    rows = first_rows(receipt)
    try:
        a, b, r2 = core.linear_fit([r["step_bytes"] for r in rows], [r["step_ms"] for r in rows])
    except ValueError:
        return None
    return a, (1 / (b * 1e6) if b > 0 else math.inf), r2


@core.gpu_timing
def intercept_positive(receipt: core.Receipt) -> core.ClaimResult:
    statement = "the line step = tau_0 + bytes / bandwidth_eff fitted over the variants has tau_0 > 0"
    fit = fitted_line(receipt)
    if fit is None:
        return core.ClaimResult("intercept_positive", statement, None, "fewer than three variants")
    tau0, bw, r2 = fit
    return core.ClaimResult(
        "intercept_positive",
        statement,
        tau0 > 0,
        f"tau_0 = {fmt.fixed(tau0, 3)} ms, bandwidth_eff {fmt.fixed(bw, 1)} GB/s, R^2 {fmt.fixed(r2, 3)}",
    )


@core.gpu_timing
def graphs_save_time(receipt: core.Receipt) -> core.ClaimResult:
    statement = "on a GPU, the smallest model's step with CUDA graphs is faster than eager at every batch"
    eager = {(r["variant"], r["batch"]): r for r in receipt["results"] if r["mode"] == "eager"}
    pairs = [
        (r, eager[(r["variant"], r["batch"])])
        for r in receipt["results"]
        if r["mode"] == "graphs" and (r["variant"], r["batch"]) in eager
    ]
    if not pairs:
        return core.ClaimResult("graphs_save_time", statement, None, "no variant ran both with graphs and eager")
    return core.ClaimResult(
        "graphs_save_time",
        statement,
        all(g["step_ms"] < e["step_ms"] for g, e in pairs),
        ", ".join(
            f"B={g['batch']}: {fmt.fixed(g['step_ms'], 3)} against {fmt.fixed(e['step_ms'], 3)} ms" for g, e in pairs
        ),
    )


# --- the lesson's expected output -----------------------------------------------------------------


def variant_name(layers: int, width: float) -> str:
    return f"L{layers}xW{width:g}"


def predicted_rows(gpu_name: str = LAB_GPU, model_name: str = COURSE_MODEL) -> list[dict[str, Any]]:
    """Per variant of the lab's default :data:`VARIANTS` and batch of :data:`BATCHES` on ``gpu_name``: the
    roofline floor (s) and the eager launch time (s, low and high, from ``KERNEL_LAUNCH_US``)."""
    facts, config = gpu(gpu_name), model(model_name).config
    rows = []
    for layers, width in VARIANTS:
        cfg = resized(config, layers, width)
        launch = [roofline.launch_overhead_s(layers, us * 1e-6) for us in KERNEL_LAUNCH_US]
        for batch in LAB.BATCHES:
            step_bytes, step_flops = step_bytes_and_flops(cfg, batch)
            rows.append(
                {
                    "variant": variant_name(layers, width),
                    "config": cfg,
                    "params": param_count(cfg),
                    "batch": batch,
                    "step_bytes": step_bytes,
                    "floor_s": roofline.time_floor(facts, step_flops, step_bytes),
                    "launch_s": launch,
                }
            )
    return rows


def prediction(gpu_name: str = LAB_GPU, model_name: str = COURSE_MODEL) -> str:
    """Markdown: the floors and eager launch times of the lab's variants on ``gpu_name``."""
    facts = gpu(gpu_name)
    lines = [
        f"{model_name}'s architecture resized to each variant (layers x width, the head size kept), BF16, "
        f"{fmt.count(LAB.PROMPT_LEN)} + {fmt.count(LAB.OUTPUT_LEN)} tokens per request; "
        f"{fmt.count(facts.bandwidth_gb_s)} GB/s and {fmt.fixed(facts.bf16_dense_tflops)} TFLOP/s. The "
        "floor is max(bytes / bandwidth, FLOPs / peak); eager mode adds about one kernel launch per operation, "
        f"{fmt.fixed(KERNEL_LAUNCH_US[0], 0)}-{fmt.fixed(KERNEL_LAUNCH_US[1], 0)} µs each, unless the GPU's "
        "work hides it (a lower bound: eager PyTorch adds its own dispatch per operation); a CUDA graph replays the "
        "forward pass's kernels with one launch. A measured step sits above its floor.",
        "",
        "| variant | parameters | batch | step bytes (GB) | floor (ms) | eager launches (ms) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in predicted_rows(gpu_name, model_name):
        low, high = (fmt.fixed(s * 1e3, 2) for s in r["launch_s"])
        lines.append(
            f"| {r['variant']} | {fmt.count(r['params'])} | {r['batch']} | {fmt.fixed(r['step_bytes'] / 1e9, 3)} | "
            f"{fmt.fixed(r['floor_s'] * 1e3, 3)} | {low}-{high} |"
        )
    return "\n".join(lines)


def demands() -> list[roofline.Demand]:
    """What each floor of :func:`prediction` asks of the lab's card (a floor asks for exactly the limit)."""
    facts = gpu(LAB_GPU)
    return [
        roofline.decode_demand(facts, r["config"], r["batch"], CONTEXT, r["floor_s"], f"step_overhead: {r['variant']}")
        for r in predicted_rows()
    ]


# --- the notebook's exercises ----------------------------------------------------------------------


def _layers() -> int:
    return model(COURSE_MODEL).config["num_hidden_layers"]


def _eager_launch_s() -> float:
    """Launch time (s) of one eager decode step of the course's model at the slow end of a launch."""
    return roofline.launch_overhead_s(_layers(), KERNEL_LAUNCH_US[1] * 1e-6)


EXERCISES = (
    Exercise(
        f"An eager decode step (no CUDA graph) of {COURSE_MODEL}, {_layers()} layers: how many kernel launches does "
        f"the course assume ({KERNELS_PER_LAYER} per layer, {KERNELS_OUTSIDE_LAYERS} outside the layers)?",
        lambda: roofline.launch_overhead_s(_layers(), 1.0),  # launches x 1 s: the count
        "launches",
        "Every layer launches its norms, projections, attention and activation one by one; a CUDA graph replays "
        "them all as one launch (lesson 2B).",
    ),
    Exercise(
        f"At {KERNEL_LAUNCH_US[1]:g} µs a launch, how long does that eager step spend launching?",
        lambda: _eager_launch_s() * 1e3,
        "ms",
        "Launches × time per launch: CPU time the GPU waits through whenever its kernels are shorter than their "
        "launches (lesson 2B; the lab times eager against graphs).",
        rel_tol=0.02,
    ),
    Exercise(
        f"With that much overhead per step, below how many GB read per step is a decode step on the {LAB_GPU} "
        "overhead-bound (more time in overhead than in moving bytes)?",
        lambda: roofline.overhead_bound_bytes(gpu(LAB_GPU), _eager_launch_s()) / 1e9,
        "GB",
        "W* = τ0 × bandwidth: the bytes the card moves in the overhead's time; a small model below it gains "
        "little from a faster card and much from CUDA graphs (lesson 2B).",
        rel_tol=0.03,
    ),
)


SPEC = core.lab_spec(
    __name__,
    key=("variant", "mode", "batch"),
    header="floor (ms)",
    prediction_basis="the roofline and an assumed launch count",
    columns=(
        core.Column.text("variant"),
        core.Column.text("mode"),
        core.Column.count("batch"),
        core.Column("floor_ms", "floor (ms)", lambda v: fmt.fixed(v, 3)),
        core.Column("step_ms", "step (ms)", lambda v: fmt.fixed(v, 3)),
        core.Column("ratio", "step / floor", lambda v: fmt.fixed(v, 2)),
    ),
    cpu_max_model_len=LAB.MAX_MODEL_LEN,
    cpu_args=("--variants", "1x1,4x2,8x4", "--batches", "1,4"),
    work=core.LabWork(
        engines=len(VARIANTS) + 1,  # the variants, and the smallest again without graphs
        decode_steps=(len(VARIANTS) + 1) * 2 * len(LAB.BATCHES) * LAB.OUTPUT_LEN,  # a warm-up and a timed batch each
        peak_kv_tokens=max(LAB.BATCHES) * (LAB.PROMPT_LEN + LAB.OUTPUT_LEN),
    ),
)
