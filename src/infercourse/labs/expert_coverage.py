"""Lab 7B, ``snippets/labs/expert_coverage.py``: experts touched per decode step, and the step time, against the batch.

Receipt rows, one per (mode, batch): ``mode`` (``eager``: the engine whose routers are hooked and counted;
``graphs``: vLLM's default engine, timed only), ``batch`` (requests decoding together), ``router_steps`` (the
router calls of exactly B tokens each MoE layer saw in the timed batch: its decode steps), ``experts_mean``,
``experts_min`` and ``experts_max`` (distinct experts per (layer, decode step)), and ``step_ms`` (the timed batch's
all-decoding step, ms). The counts are null on a ``graphs`` row. ``settings`` holds E (``experts``), k
(``top_k``) and the MoE layers hooked.

The counts are exact or bounded by probability and checked everywhere; the claims about time are checked on
GPU receipts only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infercourse import fmt, roofline
from infercourse.exercises import Exercise
from infercourse.labs import core
from infercourse.registry import LAB_GPU, GPUFacts, gpu, model
from infercourse.transformer import moe_experts

LAB = core.lab_settings("expert_coverage")
"""The lab's model, batch sizes and lengths (tokens), read from the lab itself: their one home."""

Z_BOUND = 3.0
"""A measured mean may exceed the uniform-routing expectation by at most this many standard errors: each mean
averages the decode steps of every MoE layer, whose spread under uniform routing is
:func:`~infercourse.roofline.experts_touched_sd` (treating the samples as independent)."""

MOE_STEP_GROWTH = 2.0
"""On a GPU the step at the largest batch must exceed the step at batch 1 by more than this factor: lesson 2A's
bar for a dense model the other way round (its step(64) / step(1) stays under 2; its floors say 1.13), because a
MoE step reads more experts as the batch grows (OLMoE on the RTX 4090: the floors say 5.8)."""


def _eager(receipt: core.Receipt) -> list[Mapping[str, Any]]:
    return sorted((r for r in receipt["results"] if r["mode"] == "eager"), key=lambda r: r["batch"])


def _timed_mode(receipt: core.Receipt) -> str:
    """The engine whose step times the claims read: vLLM's default (``graphs``) when it ran, else ``eager``."""
    return "graphs" if any(r["mode"] == "graphs" for r in receipt["results"]) else "eager"


def _timed(receipt: core.Receipt) -> list[Mapping[str, Any]]:
    """The rows of :func:`_timed_mode`'s engine, by batch."""
    mode = _timed_mode(receipt)
    return sorted((r for r in receipt["results"] if r["mode"] == mode), key=lambda r: r["batch"])


def _ek(receipt: core.Receipt) -> tuple[int, int]:
    return receipt["settings"]["experts"], receipt["settings"]["top_k"]


# --- claims ---------------------------------------------------------------------------------------


@core.claim
def router_steps_exact(receipt: core.Receipt) -> core.ClaimResult:
    """Every counted row: each MoE layer routed exactly B tokens in n - 1 calls of the timed batch (B requests of
    n output tokens: one prefill step makes the first token, n - 1 decode steps the rest, every request in each)."""
    want = receipt["settings"]["output_len"] - 1
    rows = _eager(receipt)
    wrong = [f"B={r['batch']}: {r['router_steps']}" for r in rows if r["router_steps"] != want]
    return core.ClaimResult(
        "router_steps_exact",
        "every MoE layer's router sees exactly n - 1 decode steps of B tokens in the timed batch",
        bool(rows) and not wrong,
        ("; ".join(wrong) + f" against {want}") if wrong else f"{want} at every batch ({len(rows)} batches)",
    )


@core.claim
def one_token_touches_k(receipt: core.Receipt) -> core.ClaimResult:
    """At batch 1 every (layer, decode step) touches exactly k experts: one token picks k different ones."""
    _, top_k = _ek(receipt)
    ones = [r for r in _eager(receipt) if r["batch"] == 1]
    statement = "one token touches exactly k experts in every layer and step"
    if not ones:
        return core.ClaimResult("one_token_touches_k", statement, None, "no counted batch of 1")
    r = ones[0]
    return core.ClaimResult(
        "one_token_touches_k",
        statement,
        r["experts_min"] == r["experts_max"] == top_k,
        f"k = {top_k}: from {r['experts_min']} to {r['experts_max']}",
    )


def uniform_bound(receipt: core.Receipt, row: Mapping[str, Any]) -> float:
    """The most a row's mean may reach: E (1 - (1 - k/E)^B) plus :data:`Z_BOUND` standard errors of a mean over
    ``router_steps`` x MoE layers samples."""
    experts, top_k = _ek(receipt)
    samples = max(row["router_steps"] * receipt["settings"]["moe_layers"], 1)
    sd = roofline.experts_touched_sd(experts, top_k, row["batch"])
    return roofline.expected_experts_touched(experts, top_k, row["batch"]) + Z_BOUND * sd / samples**0.5


@core.claim
def coverage_at_most_uniform(receipt: core.Receipt) -> core.ClaimResult:
    """Every counted row's mean stays at or under the uniform-routing expectation (within :data:`Z_BOUND`
    standard errors): a router that prefers some experts, or tokens that pick alike, touch fewer."""
    experts, top_k = _ek(receipt)
    rows, over, shown = _eager(receipt), [], []
    for r in rows:
        expected, bound = roofline.expected_experts_touched(experts, top_k, r["batch"]), uniform_bound(receipt, r)
        shown.append(f"B={r['batch']}: {r['experts_mean']:g} / {expected:.2f} (at most {bound:.2f})")
        if r["experts_mean"] > bound:
            over.append(f"B={r['batch']}")
    return core.ClaimResult(
        "coverage_at_most_uniform",
        f"the experts touched per step stay at or under E (1 - (1 - k/E)^B), uniform routing's mean, within "
        f"{Z_BOUND:g} standard errors",
        bool(rows) and not over,
        ("above the bound at " + ", ".join(over) + "; " if over else "") + "measured / expected: " + ", ".join(shown),
    )


def compare(receipt: core.Receipt) -> list[core.Compared]:
    """Each counted (eager) row's mean experts touched per MoE layer and step beside uniform routing's expectation
    E (1 - (1 - k/E)^B), :func:`~infercourse.roofline.expected_experts_touched` of the receipt's E and k."""
    experts, top_k = _ek(receipt)
    return core.compare_rows(
        receipt,
        "experts touched",
        "experts",
        "experts_mean",
        lambda row: roofline.expected_experts_touched(experts, top_k, row["batch"]),
        kind="estimate",
        where=lambda row: row["mode"] == "eager",
    )


@core.claim
def coverage_grows_with_batch(receipt: core.Receipt) -> core.ClaimResult:
    """The mean count never falls as the batch grows, and the largest batch touches more than the smallest."""
    rows = _eager(receipt)
    means = [r["experts_mean"] for r in rows]
    ok = len(rows) >= 2 and all(b >= a for a, b in zip(means, means[1:], strict=False)) and means[-1] > means[0]
    return core.ClaimResult(
        "coverage_grows_with_batch",
        "a larger batch touches more experts per step, until it touches them all",
        ok,
        " -> ".join(f"B={r['batch']}: {r['experts_mean']:g}" for r in rows),
    )


@core.gpu_timing
def step_grows_with_batch(receipt: core.Receipt) -> core.ClaimResult:
    """From batch 1 to the largest, the step time grows by more than :data:`MOE_STEP_GROWTH`."""
    rows = _timed(receipt)
    lo, hi = rows[0], rows[-1]
    growth = hi["step_ms"] / lo["step_ms"]
    return core.ClaimResult(
        "step_grows_with_batch",
        f"the step at the largest batch takes more than {MOE_STEP_GROWTH:g} x the step at the smallest "
        "(a dense model's stays under that)",
        len(rows) >= 2 and growth > MOE_STEP_GROWTH,
        f"{lo['mode']}: B={lo['batch']} {lo['step_ms']:.3f} ms -> "
        f"B={hi['batch']} {hi['step_ms']:.3f} ms (x{growth:.2f})",
    )


# --- floors ---------------------------------------------------------------------------------------


def step_floor_s(
    facts: GPUFacts, config: Mapping[str, Any], batch: int, context: int, experts_touched: float | None = None
) -> float:
    """The floor (s) of one decode step of ``batch`` sequences with ``context`` tokens each, with
    ``experts_touched`` per MoE layer (default: uniform routing's expectation):
    :func:`~infercourse.roofline.moe_decode_kernel_floors`, summed."""
    return sum(roofline.moe_decode_kernel_floors(facts, config, context, batch, experts_touched))


def _mean_context(prompt_len: int, output_len: int) -> int:
    """A run's mean context over its decode steps (tokens): the prompt plus half the output."""
    return prompt_len + output_len // 2


def efficiency(receipt: core.Receipt, facts: GPUFacts, config: Mapping[str, Any]) -> list[core.Efficiency]:
    """Per timed row, the measured step (ms) against its floor on ``facts`` at the run's mean context, with the
    experts the eager engine counted at that batch (uniform routing's expectation where it did not count)."""
    counted = {r["batch"]: r["experts_mean"] for r in _eager(receipt)}
    context = _mean_context(receipt["settings"]["prompt_len"], receipt["settings"]["output_len"])
    mode = _timed_mode(receipt)
    return [
        core.Efficiency(
            i,
            "step",
            "ms",
            r["step_ms"],
            step_floor_s(facts, config, r["batch"], context, counted.get(r["batch"])) * 1e3,
        )
        for i, r in enumerate(receipt["results"])
        if r["mode"] == mode
    ]


# --- the lesson's expected output -----------------------------------------------------------------


def predicted_rows(gpu_name: str = LAB_GPU) -> list[dict[str, Any]]:
    """Per batch of :data:`BATCHES`: uniform routing's experts touched per MoE layer, the weight bytes a step reads
    (B, BF16) and the step floor and band (s) on ``gpu_name`` for :data:`MODEL`."""
    facts, config = gpu(gpu_name), model(LAB.MODEL).config
    experts, top_k = moe_experts(config)
    rows = []
    for batch in LAB.BATCHES:
        touched = roofline.expected_experts_touched(experts, top_k, batch)
        floor = step_floor_s(facts, config, batch, _mean_context(LAB.PROMPT_LEN, LAB.OUTPUT_LEN))
        rows.append(
            {
                "batch": batch,
                "experts": touched,
                "weight_bytes": 2 * roofline.moe_step_params(config, touched)[0],
                "floor_s": floor,
                "band_s": roofline.step_band(floor, config["num_hidden_layers"]),
            }
        )
    return rows


def prediction(gpu_name: str = LAB_GPU) -> str:
    """Markdown: per batch, the experts touched, bytes and step floor of :data:`MODEL` on ``gpu_name``."""
    facts, config = gpu(gpu_name), model(LAB.MODEL).config
    lines = [
        f"{LAB.MODEL} in BF16 ({moe_experts(config)[0]} experts, {moe_experts(config)[1]} per token), prompts of "
        f"{LAB.PROMPT_LEN} tokens decoding {LAB.OUTPUT_LEN}, on {gpu_name} ({fmt.count(facts.bandwidth_gb_s)} GB/s). "
        "Experts touched: uniform routing's expectation per MoE layer, the most a batch reaches on "
        "average (the counted "
        "run may land a little under it). Floor: the weights every step needs, those experts and the batch's KV "
        "cache, read once; band: the floor plus the launch overhead lesson 2B bounds.",
        "",
        "| batch | experts touched | weights read (GB) | floor (ms) | band (ms) |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in predicted_rows(gpu_name):
        low, high = r["band_s"]
        lines.append(
            f"| {r['batch']} | {fmt.fixed(r['experts'], 1)} | {fmt.fixed(r['weight_bytes'] / 1e9, 2)} | "
            f"{fmt.fixed(r['floor_s'] * 1e3, 2)} | {fmt.fixed(low * 1e3, 2)}-{fmt.fixed(high * 1e3, 2)} |"
        )
    return "\n".join(lines)


def demands() -> list[roofline.Demand]:
    """What each floor of :func:`prediction` asks of the lab's card (a floor asks for exactly the limit)."""
    facts, config = gpu(LAB_GPU), model(LAB.MODEL).config
    return [
        roofline.moe_decode_demand(
            facts,
            config,
            r["batch"],
            _mean_context(LAB.PROMPT_LEN, LAB.OUTPUT_LEN),
            r["floor_s"],
            f"expert_coverage: B={r['batch']}",
        )
        for r in predicted_rows()
    ]


# --- the notebook's exercises ----------------------------------------------------------------------


def _row(batch: int) -> dict[str, Any]:
    return next(r for r in predicted_rows() if r["batch"] == batch)


def _routing() -> str:
    experts, top_k = moe_experts(model(LAB.MODEL).config)
    return f"{LAB.MODEL} routes each token to k = {top_k} of E = {experts} experts in every MoE layer."


EXERCISES = (
    Exercise(
        f"{_routing()} Two sequences decode together, their routers choosing independently and uniformly: how many "
        "distinct experts does a MoE layer run per step, on average?",
        lambda: _row(2)["experts"],
        "experts",
        "An expert is missed by one token with probability 1 − k / E, by all B tokens with (1 − k / E)^B: "
        "E [1 − (1 − k / E)^B] are touched (lesson 7B; the lab counts them with a hook on the router).",
        rel_tol=0.02,
    ),
    Exercise(
        "The same at batch 16?",
        lambda: _row(16)["experts"],
        "experts",
        "The same formula: coverage climbs fast and saturates near E, so a batch soon reads nearly every expert "
        "(lesson 7B).",
        rel_tol=0.03,
    ),
    Exercise(
        "How many times batch 1's weight bytes does a decode step at batch 16 read (BF16)?",
        lambda: _row(16)["weight_bytes"] / _row(1)["weight_bytes"],
        "times",
        "Attention, routers and the output head are read once whatever the batch; each touched expert adds its "
        "three matrices in every MoE layer, so the bytes grow with the experts touched, not with B (lesson 7B).",
        rel_tol=0.05,
    ),
)


SPEC = core.lab_spec(
    __name__,
    key=("mode", "batch"),
    header="experts/step",
    prediction_basis="uniform routing and the roofline",
    columns=(
        core.Column.text("mode"),
        core.Column.count("batch"),
        core.Column("experts_mean", "experts per step", lambda v: "-" if v is None else fmt.fixed(v, 2)),
        core.Column("step_ms", "step (ms)", lambda v: fmt.fixed(v, 2)),
    ),
    cpu_max_model_len=256,
    cpu_args=(
        "--model",
        ".cache/models/tiny-qwen3-moe",
        "--modes",
        "eager",
        "--batches",
        "1,2,4,8,16",
        "--prompt-len",
        "16",
        "--output-len",
        "16",
    ),
    work=core.LabWork(
        engines=len(LAB.MODES),
        decode_steps=len(LAB.MODES) * len(LAB.BATCHES) * 2 * LAB.OUTPUT_LEN,
        peak_kv_tokens=max(LAB.BATCHES) * (LAB.PROMPT_LEN + LAB.OUTPUT_LEN),
        model=LAB.MODEL,
    ),
)
