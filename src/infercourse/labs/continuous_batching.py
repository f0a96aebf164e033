"""Lab 4A, ``snippets/labs/continuous_batching.py``: static against continuous batching, in engine steps.

Receipt rows, two per batch size (key ``max_num_seqs``, ``mode`` = ``"static"`` or ``"continuous"``):
``requests``; ``steps`` and ``step_tokens`` (how far the count and the sum of vLLM's
``vllm:iteration_tokens_total`` histogram moved over the run); ``prompt_tokens`` and
``generated_tokens`` (tokens sent and produced); ``wrong_lengths`` (requests whose output length is
not their n_i); ``preemptions`` (growth of ``vllm:num_preemptions``); ``wall_s``; ``output_tok_s``;
``tpot_p50_ms`` / ``tpot_p99_ms`` and ``wait_p50_ms`` / ``wait_p99_ms`` (per request, from
``RequestOutput.metrics``; the wait runs from the workload's start to the request's first scheduling).
``settings`` holds the seeded ``output_lengths``, ``prompt_tokens``, ``max_num_batched_tokens``,
``async_scheduling`` and the engine's ``kv_tokens``.

The online part adds one row per request rate (``mode`` = ``"online"``, ``request_rate`` in requests/s,
``max_num_seqs`` = the server's): ``requests`` completed and ``failed`` (``vllm bench serve``'s counts),
``prompt_tokens`` / ``generated_tokens`` (its totals), ``wrong_lengths`` (requests whose output is not
``online_output_tokens`` long), ``tpot_*`` and ``ttft_p50_ms`` / ``ttft_p99_ms`` (its percentiles), ``wall_s``
and ``output_tok_s``; ``server_prompt_tokens``, ``server_generated_tokens``, ``server_requests``,
``steps``, ``step_tokens`` and ``preemptions`` from how far the server's own counters moved over the run.
Keys that only one part fills are None in the other's rows.

The step, token, count and preemption claims are exact on any machine; the throughput claims are checked
on GPU receipts only (:func:`~infercourse.labs.core.gpu_timing`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infercourse import fmt
from infercourse.batching import Server, rate_point, schedule, static_steps, step_time, useful_fraction
from infercourse.exercises import Exercise
from infercourse.labs import core
from infercourse.memory import default_kv_budget_bytes, max_sequences
from infercourse.registry import COURSE_MODEL, LAB_GPU, STEP_OVERHEAD_S, gpu, model
from infercourse.roofline import Demand, decode_demand
from infercourse.transformer import kv_bytes_per_token, weight_bytes

LAB = core.lab_settings("continuous_batching")
OFFLINE_MODES = ("static", "continuous")


def output_lengths(
    requests: int = LAB.REQUESTS, low: int = LAB.OUTPUT_MIN, high: int = LAB.OUTPUT_MAX, seed: int = LAB.SEED
) -> list[int]:
    """The lab's seeded output lengths (the script's ``output_lengths``: ``random.Random(seed).randint``)."""
    import random

    rng = random.Random(seed)
    return [rng.randint(low, high) for _ in range(requests)]


def predicted_steps(settings, batch: int) -> dict[str, int]:
    """``{"static", "continuous"}`` engine steps of a receipt's workload at ``max_num_seqs`` = ``batch``
    (:func:`~infercourse.batching.static_steps`, :func:`~infercourse.batching.schedule`)."""
    lengths = settings["output_lengths"]
    prompts = [settings["prompt_tokens"]] * len(lengths)
    budget = settings["max_num_batched_tokens"]
    return {
        "static": static_steps(prompts, lengths, batch, budget),
        "continuous": schedule(prompts, lengths, batch, budget).steps,
    }


def _offline(receipt: core.Receipt) -> list[Mapping[str, Any]]:
    return [r for r in receipt["results"] if r["mode"] in OFFLINE_MODES]


def online_rows(receipt: core.Receipt) -> list[Mapping[str, Any]]:
    """The online part's rows of a receipt (mode "online"), by request rate (none: an offline-only run)."""
    return sorted((r for r in receipt["results"] if r["mode"] == "online"), key=lambda r: r["request_rate"])


def _pairs(receipt: core.Receipt) -> dict[int, dict[str, Mapping[str, Any]]]:
    pairs: dict[int, dict[str, Mapping[str, Any]]] = {}
    for r in _offline(receipt):
        pairs.setdefault(r["max_num_seqs"], {})[r["mode"]] = r
    return pairs


def _no_rows(name: str, statement: str, part: str) -> core.ClaimResult:
    return core.ClaimResult(name, statement, None, f"the receipt has no {part} rows (--parts)")


@core.claim
def tokens_exact(receipt: core.Receipt) -> core.ClaimResult:
    statement = "every request produced exactly its n_i tokens (max_tokens with ignore_eos), in every run"
    rows = _offline(receipt)
    if not rows:
        return _no_rows("tokens_exact", statement, "offline")
    want = sum(receipt["settings"]["output_lengths"])
    bad = [
        f"B={r['max_num_seqs']} {r['mode']}: {r['wrong_lengths']} wrong, {r['generated_tokens']} tokens"
        for r in rows
        if r["wrong_lengths"] or r["generated_tokens"] != want
    ]
    return core.ClaimResult(
        "tokens_exact", statement, not bad, "; ".join(bad) or f"all {len(rows)} runs: {want:,} tokens, none wrong"
    )


@core.claim
def histogram_sum(receipt: core.Receipt) -> core.ClaimResult:
    prompt = receipt["settings"]["prompt_tokens"]
    details, ok = [], True
    if not _offline(receipt):
        return _no_rows("histogram_sum", "the step histogram's sum = prompt + generated tokens", "offline")
    for r in _offline(receipt):
        want = r["requests"] * prompt + r["generated_tokens"]
        ok &= r["step_tokens"] == want and r["prompt_tokens"] == r["requests"] * prompt
        details.append(f"B={r['max_num_seqs']} {r['mode']}: {r['step_tokens']:,} (expected {want:,})")
    return core.ClaimResult(
        "histogram_sum",
        "the vllm:iteration_tokens_total histogram's sum grows by prompt tokens + generated tokens",
        ok,
        "; ".join(details),
    )


@core.claim
def steps_exact(receipt: core.Receipt) -> core.ClaimResult:
    settings = receipt["settings"]
    statement = "engine steps equal the replay of vLLM's scheduler (static: chunk by chunk; continuous: one call)"
    if settings.get("async_scheduling") is not False:
        return core.ClaimResult("steps_exact", statement, None, "async scheduling on: the replay assumes it off")
    if not _pairs(receipt):
        return _no_rows("steps_exact", statement, "offline")
    details, ok, compared = [], True, 0
    for batch, runs in sorted(_pairs(receipt).items()):
        want = predicted_steps(settings, batch)
        for mode in ("static", "continuous"):
            got, preempted = runs[mode]["steps"], runs[mode]["preemptions"]
            if preempted:  # a preempted request recomputes its prompt: the preemption-free replay does not apply
                details.append(f"B={batch} {mode}: {got}, {preempted} preemptions: not compared (see no_preemption)")
                continue
            compared += 1
            ok &= got == want[mode]
            details.append(f"B={batch} {mode}: {got} (expected {want[mode]})")
    return core.ClaimResult("steps_exact", statement, ok if compared else None, "; ".join(details))


def compare(receipt: core.Receipt) -> list[core.Compared]:
    """Each offline run's engine steps beside :func:`predicted_steps` (the scheduler's replay), where
    :func:`steps_exact` compares them: async scheduling off, no preemption."""
    settings = receipt["settings"]
    return core.compare_rows(
        receipt,
        "engine steps",
        "steps",
        "steps",
        lambda r: predicted_steps(settings, r["max_num_seqs"])[r["mode"]],
        where=lambda r: (
            settings.get("async_scheduling") is False and r["mode"] in OFFLINE_MODES and not r["preemptions"]
        ),
    )


@core.claim
def continuous_fewer_steps(receipt: core.Receipt) -> core.ClaimResult:
    pairs = sorted(_pairs(receipt).items())
    if not pairs:
        return _no_rows("continuous_fewer_steps", "continuous batching takes no more steps than static", "offline")
    return core.ClaimResult(
        "continuous_fewer_steps",
        "at every max_num_seqs, continuous batching takes no more engine steps than static batching",
        all(runs["continuous"]["steps"] <= runs["static"]["steps"] for _, runs in pairs),
        "; ".join(f"B={b}: {runs['continuous']['steps']} vs {runs['static']['steps']}" for b, runs in pairs),
    )


@core.claim
def no_preemption(receipt: core.Receipt) -> core.ClaimResult:
    settings = receipt["settings"]
    if not _offline(receipt):
        return _no_rows("no_preemption", "no preemption when the largest batch fits in the KV cache", "offline")
    need = max(settings["batch_sizes"]) * (settings["prompt_tokens"] + max(settings["output_lengths"]))
    statement = "no preemption when the largest batch fits in the KV cache: B x (prompt + longest output) tokens"
    if need > settings["kv_tokens"]:
        return core.ClaimResult(
            "no_preemption", statement, None, f"{need:,} tokens > {settings['kv_tokens']:,} in the cache: may preempt"
        )
    got = [r["preemptions"] for r in _offline(receipt)]
    return core.ClaimResult(
        "no_preemption", statement, not any(got), f"{need:,} <= {settings['kv_tokens']:,} tokens; preemptions {got}"
    )


@core.gpu_timing
def continuous_faster(receipt: core.Receipt) -> core.ClaimResult:
    pairs = sorted(_pairs(receipt).items())
    if not pairs:
        return _no_rows("continuous_faster", "continuous batching produces more tokens/s than static", "offline")
    return core.ClaimResult(
        "continuous_faster",
        "at every max_num_seqs, continuous batching produces more output tokens per second than static",
        all(runs["continuous"]["output_tok_s"] > runs["static"]["output_tok_s"] for _, runs in pairs),
        "; ".join(
            f"B={b}: {runs['continuous']['output_tok_s']:,.0f} vs {runs['static']['output_tok_s']:,.0f} tok/s"
            for b, runs in pairs
        ),
    )


@core.claim
def online_counts_exact(receipt: core.Receipt) -> core.ClaimResult:
    statement = (
        "online, at every rate: all num_prompts requests completed, none failed, each made exactly "
        "online_output_tokens tokens (--ignore-eos)"
    )
    rows = online_rows(receipt)
    if not rows:
        return _no_rows("online_counts_exact", statement, "online")
    n, out = receipt["settings"]["num_prompts"], receipt["settings"]["online_output_tokens"]
    ok, details = True, []
    for r in rows:
        good = (r["requests"], r["failed"], r["wrong_lengths"], r["generated_tokens"]) == (n, 0, 0, n * out)
        ok &= good
        details.append(
            f"{r['request_rate']:g}/s: {r['requests']} completed, {r['failed']} failed, {r['generated_tokens']:,} "
            f"tokens (expected {n} x {out} = {n * out:,})"
        )
    return core.ClaimResult("online_counts_exact", statement, ok, "; ".join(details))


@core.claim
def server_counts_agree(receipt: core.Receipt) -> core.ClaimResult:
    statement = (
        "online, at every rate: the server's /metrics counters moved by the client's sums (prompt tokens, "
        "generated tokens, finished requests)"
    )
    rows = online_rows(receipt)
    if not rows:
        return _no_rows("server_counts_agree", statement, "online")
    pairs = (("server_prompt_tokens", "prompt_tokens"), ("server_generated_tokens", "generated_tokens"))
    ok, details = True, []
    for r in rows:
        ok &= all(r[a] == r[b] for a, b in pairs) and r["server_requests"] == r["requests"]
        details.append(
            f"{r['request_rate']:g}/s: prompt {r['server_prompt_tokens']:,} vs {r['prompt_tokens']:,}, generated "
            f"{r['server_generated_tokens']:,} vs {r['generated_tokens']:,}, requests {r['server_requests']} vs "
            f"{r['requests']}"
        )
    return core.ClaimResult("server_counts_agree", statement, ok, "; ".join(details))


@core.gpu_timing
def online_tradeoff(receipt: core.Receipt) -> core.ClaimResult:
    statement = "online: the highest rate buys more output tokens/s than the lowest at a higher p99 TPOT"
    rows = online_rows(receipt)
    if len(rows) < 2:
        return _no_rows("online_tradeoff", statement, "online (two rates or more)")
    low, high = rows[0], rows[-1]
    return core.ClaimResult(
        "online_tradeoff",
        statement,
        high["output_tok_s"] > low["output_tok_s"] and high["tpot_p99_ms"] > low["tpot_p99_ms"],
        f"{low['request_rate']:g}/s: {low['output_tok_s']:,.0f} tok/s at {low['tpot_p99_ms']:.1f} ms; "
        f"{high['request_rate']:g}/s: {high['output_tok_s']:,.0f} tok/s at {high['tpot_p99_ms']:.1f} ms",
    )


def online_points(gpu_name: str = LAB_GPU, model_name: str = COURSE_MODEL) -> tuple[int, list[dict]]:
    """``(KV room, points)`` of the online part on ``gpu_name``: how many whole requests of
    PROMPT_TOKENS + ONLINE_OUTPUT_TOKENS vLLM's default KV cache holds, and per rate of RATES the
    :func:`~infercourse.batching.rate_point` of a server capped at the smaller of that and the largest
    ``max_num_seqs``, MAX_NUM_BATCHED_TOKENS per step."""
    facts, config = gpu(gpu_name), model(model_name).config
    per_request = LAB.PROMPT_TOKENS + LAB.ONLINE_OUTPUT_TOKENS
    kv_seqs = max_sequences(
        default_kv_budget_bytes(gpu_name, weight_bytes(config)), kv_bytes_per_token(config), per_request
    )
    online = Server(
        facts,
        config,
        LAB.PROMPT_TOKENS,
        LAB.ONLINE_OUTPUT_TOKENS,
        STEP_OVERHEAD_S,
        min(max(LAB.BATCH_SIZES), kv_seqs),
        LAB.MAX_NUM_BATCHED_TOKENS,
    )
    return kv_seqs, [rate_point(online, rate) for rate in LAB.RATES]


def prediction(gpu_name: str = LAB_GPU, model_name: str = COURSE_MODEL) -> str:
    """Markdown: per batch size, the exact engine steps of both modes and the decode floor on ``gpu_name``."""
    facts, config = gpu(gpu_name), model(model_name).config
    settings = {
        "output_lengths": output_lengths(),
        "prompt_tokens": LAB.PROMPT_TOKENS,
        "max_num_batched_tokens": LAB.MAX_NUM_BATCHED_TOKENS,
    }
    context = LAB.PROMPT_TOKENS + (LAB.OUTPUT_MIN + LAB.OUTPUT_MAX) // 4  # mean context over a request's decode
    lines = [
        f"{model_name} in BF16 on the {gpu_name}: {LAB.REQUESTS} requests of {LAB.PROMPT_TOKENS} prompt tokens, "
        f"outputs uniform on {LAB.OUTPUT_MIN}-{LAB.OUTPUT_MAX} (seed {LAB.SEED}), "
        f"{fmt.count(LAB.MAX_NUM_BATCHED_TOKENS)} tokens per step. "
        "Steps are exact (the replay of vLLM's scheduler, `batching.schedule`); the step floor is lesson 2A's "
        f"decode floor at a mean context of {context} tokens; E[n]/E[max n] is static batching's useful fraction.",
        "",
        "| max_num_seqs | static steps | continuous steps | steps saved | E[n]/E[max n] | step floor (ms) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for batch in LAB.BATCH_SIZES:
        steps = predicted_steps(settings, batch)
        saved = 1 - steps["continuous"] / steps["static"]
        lines.append(
            f"| {batch} | {fmt.count(steps['static'])} | {fmt.count(steps['continuous'])} | {fmt.pct(saved)} | "
            f"{fmt.fixed(useful_fraction(LAB.OUTPUT_MIN, LAB.OUTPUT_MAX, batch), 2)} | "
            f"{fmt.fixed(step_time(facts, config, batch, context) * 1e3, 2)} |"
        )
    kv_seqs, points = online_points(gpu_name, model_name)
    lines += [
        "",
        f"Online: one server with max_num_seqs {max(LAB.BATCH_SIZES)} (its KV cache holds {kv_seqs} whole requests), "
        f"{LAB.NUM_PROMPTS} requests per rate of {LAB.PROMPT_TOKENS} prompt "
        f"and {LAB.ONLINE_OUTPUT_TOKENS} output tokens. Below the knee a rate is carried by the smallest batch B with "
        "B >= rate x n x t(B) (Little's law), where a step t(B) carries the B decodes and the prompt tokens "
        "arriving meanwhile, B x prompt / n, plus lesson 4A's assumed overhead; past the knee the server runs at "
        "its highest sustainable rate and the queue, and TTFT, grow.",
        "",
        "| rate (/s) | B | TPOT (ms) | output tok/s |",
        "|---:|---:|---:|---:|",
    ]
    for r in points:
        lines.append(
            f"| {r['rate']:g} | {r['B']}{' (past the knee)' if r['knee'] else ''} | "
            f"{fmt.fixed(r['tpot'] * 1e3, 2)} | {fmt.count(round(r['x']))} |"
        )
    return "\n".join(lines)


def demands(gpu_name: str = LAB_GPU, model_name: str = COURSE_MODEL) -> list[Demand]:
    """What :func:`prediction`'s step floors and online rates ask of ``gpu_name`` (the physics check's input)."""
    facts, config = gpu(gpu_name), model(model_name).config
    context = LAB.PROMPT_TOKENS + (LAB.OUTPUT_MIN + LAB.OUTPUT_MAX) // 4
    floors = [
        decode_demand(facts, config, b, context, step_time(facts, config, b, context), f"step floor at B = {b}")
        for b in LAB.BATCH_SIZES
    ]
    return floors + [point["demand"] for point in online_points(gpu_name, model_name)[1]]


def _work() -> core.LabWork:
    """Offline: one engine per B and the replayed steps. Online: one server, the requests' arrival time
    (NUM_PROMPTS / rate per rate), then the last request's ONLINE_OUTPUT_TOKENS steps per rate, and a KV
    cache for the largest B of full online requests."""
    lengths = output_lengths()
    prompts = [LAB.PROMPT_TOKENS] * LAB.REQUESTS
    runs = [schedule(prompts, lengths, b, LAB.MAX_NUM_BATCHED_TOKENS) for b in LAB.BATCH_SIZES]
    return core.LabWork(
        engines=len(LAB.BATCH_SIZES) + 1,
        decode_steps=sum(
            run.steps + static_steps(prompts, lengths, b, LAB.MAX_NUM_BATCHED_TOKENS)
            for b, run in zip(LAB.BATCH_SIZES, runs, strict=True)
        )
        + len(LAB.RATES) * LAB.ONLINE_OUTPUT_TOKENS,
        peak_kv_tokens=max(
            max(run.peak_kv_tokens for run in runs),
            max(LAB.BATCH_SIZES) * (LAB.PROMPT_TOKENS + LAB.ONLINE_OUTPUT_TOKENS),
        ),
        arrival_s=sum(LAB.NUM_PROMPTS / rate for rate in LAB.RATES),
    )


# --- the notebook's exercises ----------------------------------------------------------------------

TOY_PROMPTS, TOY_OUTPUTS, TOY_SEQS, TOY_BUDGET = (8, 8, 8, 8), (8, 2, 2, 8), 2, 64
"""Exercises 1 and 2: four requests in arrival order (prompt and output tokens), two slots, 64 tokens per step."""


def _toy() -> str:
    return (
        f"Four requests arrive together, prompts of {TOY_PROMPTS[0]} tokens, outputs of "
        f"{', '.join(map(str, TOY_OUTPUTS))} tokens in that order; `max_num_seqs` = {TOY_SEQS}, "
        f"`max_num_batched_tokens` = {TOY_BUDGET}."
    )


EXERCISES = (
    Exercise(
        f"{_toy()} With continuous batching (vLLM's scheduler, async scheduling off as in the lab's offline runs), "
        "how many engine steps until the last token?",
        lambda: schedule(TOY_PROMPTS, TOY_OUTPUTS, TOY_SEQS, TOY_BUDGET).steps,
        "steps",
        "A finished request frees its slot at once and the next one is admitted in the following step; its prompt's "
        "step also yields its first token (lesson 4A; the lab counts steps: `steps_exact`).",
    ),
    Exercise(
        f"{_toy()} With static batching, in batches of {TOY_SEQS} run to their end, how many steps?",
        lambda: static_steps(TOY_PROMPTS, TOY_OUTPUTS, TOY_SEQS, TOY_BUDGET),
        "steps",
        "Each batch lasts as long as its longest request; a short request's slot idles until the batch ends "
        "(lesson 4A).",
    ),
    Exercise(
        f"Static batches of {LAB.BATCH_SIZES[1]} requests, outputs uniform on {LAB.OUTPUT_MIN}..{LAB.OUTPUT_MAX} "
        "tokens as in the lab: what share of the decode slots produce a token?",
        lambda: 100 * useful_fraction(LAB.OUTPUT_MIN, LAB.OUTPUT_MAX, LAB.BATCH_SIZES[1]),
        "%",
        "E[n] / E[max n]: the mean output over the expected longest of the batch, which nears the top of the range "
        "as the batch grows (lesson 4A).",
        rel_tol=0.01,
    ),
)


SPEC = core.lab_spec(
    __name__,
    key=("max_num_seqs", "mode", "request_rate"),
    header="TPOT p99 (ms)",
    prediction_basis="a replay of vLLM's scheduler and the roofline",
    columns=(
        core.Column.count("max_num_seqs", "B"),
        core.Column.text("mode"),
        core.Column("request_rate", "rate (/s)", lambda v: f"{v:g}"),
        core.Column.count("steps"),
        core.Column("output_tok_s", "tok/s", lambda v: fmt.fixed(v, 0)),
        core.Column("tpot_p99_ms", "TPOT p99 (ms)", lambda v: fmt.fixed(v, 2)),
        core.Column("wait_p99_ms", "wait p99 (ms)", lambda v: fmt.fixed(v, 0)),
        core.Column("ttft_p99_ms", "TTFT p99 (ms)", lambda v: fmt.fixed(v, 0)),
    ),
    cpu_max_model_len=256,
    cpu_args=(
        "--batch-sizes",
        "4",
        "--requests",
        "12",
        "--prompt-tokens",
        "32",
        "--output-min",
        "2",
        "--output-max",
        "24",
        "--max-num-batched-tokens",
        "64",
        "--rates",
        "2",
        "8",
        "--num-prompts",
        "8",
        "--online-output-tokens",
        "16",
    ),
    work=_work(),
)
