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

The step, token and preemption claims are exact on any machine; the throughput claim is checked on
GPU receipts only (:func:`~infercourse.labs.core.gpu_timing`).
"""

from __future__ import annotations

from infercourse import fmt
from infercourse.batching import schedule, static_steps, step_time, useful_fraction
from infercourse.labs.core import ClaimResult, Column, LabSpec, LabWork, Receipt, gpu_timing, lab_constant
from infercourse.registry import COURSE_MODEL, LAB_GPU, gpu, model

BATCH_SIZES = tuple(lab_constant("continuous_batching", "BATCH_SIZES"))
REQUESTS = lab_constant("continuous_batching", "REQUESTS")
PROMPT_TOKENS = lab_constant("continuous_batching", "PROMPT_TOKENS")
OUTPUT_MIN = lab_constant("continuous_batching", "OUTPUT_MIN")
OUTPUT_MAX = lab_constant("continuous_batching", "OUTPUT_MAX")
MAX_NUM_BATCHED_TOKENS = lab_constant("continuous_batching", "MAX_NUM_BATCHED_TOKENS")
SEED = lab_constant("continuous_batching", "SEED")


def output_lengths(
    requests: int = REQUESTS, low: int = OUTPUT_MIN, high: int = OUTPUT_MAX, seed: int = SEED
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


def _pairs(receipt: Receipt) -> dict[int, dict[str, dict]]:
    pairs: dict[int, dict[str, dict]] = {}
    for r in receipt["results"]:
        pairs.setdefault(r["max_num_seqs"], {})[r["mode"]] = r
    return pairs


def tokens_exact(receipt: Receipt) -> ClaimResult:
    want = sum(receipt["settings"]["output_lengths"])
    bad = [
        f"B={r['max_num_seqs']} {r['mode']}: {r['wrong_lengths']} wrong, {r['generated_tokens']} tokens"
        for r in receipt["results"]
        if r["wrong_lengths"] or r["generated_tokens"] != want
    ]
    return ClaimResult(
        "tokens_exact",
        "every request produced exactly its n_i tokens (max_tokens with ignore_eos), in every run",
        not bad,
        "; ".join(bad) or f"all {len(receipt['results'])} runs: {want:,} tokens, none wrong",
    )


def histogram_sum(receipt: Receipt) -> ClaimResult:
    prompt = receipt["settings"]["prompt_tokens"]
    details, ok = [], True
    for r in receipt["results"]:
        want = r["requests"] * prompt + r["generated_tokens"]
        ok &= r["step_tokens"] == want and r["prompt_tokens"] == r["requests"] * prompt
        details.append(f"B={r['max_num_seqs']} {r['mode']}: {r['step_tokens']:,} (expected {want:,})")
    return ClaimResult(
        "histogram_sum",
        "the vllm:iteration_tokens_total histogram's sum grows by prompt tokens + generated tokens",
        ok,
        "; ".join(details),
    )


def steps_exact(receipt: Receipt) -> ClaimResult:
    settings = receipt["settings"]
    statement = "engine steps equal the replay of vLLM's scheduler (static: chunk by chunk; continuous: one call)"
    if settings.get("async_scheduling") is not False:
        return ClaimResult("steps_exact", statement, None, "async scheduling on: the replay assumes it off")
    details, ok = [], True
    for batch, runs in sorted(_pairs(receipt).items()):
        want = predicted_steps(settings, batch)
        for mode in ("static", "continuous"):
            got = runs[mode]["steps"]
            ok &= got == want[mode]
            details.append(f"B={batch} {mode}: {got} (expected {want[mode]})")
    return ClaimResult("steps_exact", statement, ok, "; ".join(details))


def continuous_fewer_steps(receipt: Receipt) -> ClaimResult:
    pairs = sorted(_pairs(receipt).items())
    return ClaimResult(
        "continuous_fewer_steps",
        "at every max_num_seqs, continuous batching takes no more engine steps than static batching",
        all(runs["continuous"]["steps"] <= runs["static"]["steps"] for _, runs in pairs),
        "; ".join(f"B={b}: {runs['continuous']['steps']} vs {runs['static']['steps']}" for b, runs in pairs),
    )


def no_preemption(receipt: Receipt) -> ClaimResult:
    settings = receipt["settings"]
    need = max(settings["batch_sizes"]) * (settings["prompt_tokens"] + max(settings["output_lengths"]))
    statement = "no preemption when the largest batch fits in the KV cache: B x (prompt + longest output) tokens"
    if need > settings["kv_tokens"]:
        return ClaimResult(
            "no_preemption", statement, None, f"{need:,} tokens > {settings['kv_tokens']:,} in the cache: may preempt"
        )
    got = [r["preemptions"] for r in receipt["results"]]
    return ClaimResult(
        "no_preemption", statement, not any(got), f"{need:,} <= {settings['kv_tokens']:,} tokens; preemptions {got}"
    )


@gpu_timing
def continuous_faster(receipt: Receipt) -> ClaimResult:
    pairs = sorted(_pairs(receipt).items())
    return ClaimResult(
        "continuous_faster",
        "at every max_num_seqs, continuous batching produces more output tokens per second than static",
        all(runs["continuous"]["output_tok_s"] > runs["static"]["output_tok_s"] for _, runs in pairs),
        "; ".join(
            f"B={b}: {runs['continuous']['output_tok_s']:,.0f} vs {runs['static']['output_tok_s']:,.0f} tok/s"
            for b, runs in pairs
        ),
    )


def prediction(gpu_name: str = LAB_GPU, model_name: str = COURSE_MODEL) -> str:
    """Markdown: per batch size, the exact engine steps of both modes and the decode floor on ``gpu_name``."""
    facts, config = gpu(gpu_name), model(model_name).config
    settings = {
        "output_lengths": output_lengths(),
        "prompt_tokens": PROMPT_TOKENS,
        "max_num_batched_tokens": MAX_NUM_BATCHED_TOKENS,
    }
    context = PROMPT_TOKENS + (OUTPUT_MIN + OUTPUT_MAX) // 4  # mean context over a request's decode
    lines = [
        f"{model_name} in BF16 on the {gpu_name}: {REQUESTS} requests of {PROMPT_TOKENS} prompt tokens, outputs "
        f"uniform on {OUTPUT_MIN}-{OUTPUT_MAX} (seed {SEED}), {fmt.count(MAX_NUM_BATCHED_TOKENS)} tokens per step. "
        "Steps are exact (the replay of vLLM's scheduler, `batching.schedule`); the step floor is lesson 2A's "
        f"decode floor at a mean context of {context} tokens; E[n]/E[max n] is static batching's useful fraction.",
        "",
        "| max_num_seqs | static steps | continuous steps | steps saved | E[n]/E[max n] | step floor (ms) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for batch in BATCH_SIZES:
        steps = predicted_steps(settings, batch)
        saved = 1 - steps["continuous"] / steps["static"]
        lines.append(
            f"| {batch} | {fmt.count(steps['static'])} | {fmt.count(steps['continuous'])} | {fmt.pct(saved)} | "
            f"{fmt.fixed(useful_fraction(OUTPUT_MIN, OUTPUT_MAX, batch), 2)} | "
            f"{fmt.fixed(step_time(facts, config, batch, context) * 1e3, 2)} |"
        )
    return "\n".join(lines)


def _work() -> LabWork:
    lengths = output_lengths()
    prompts = [PROMPT_TOKENS] * REQUESTS
    runs = [schedule(prompts, lengths, b, MAX_NUM_BATCHED_TOKENS) for b in BATCH_SIZES]
    return LabWork(
        engines=len(BATCH_SIZES),
        decode_steps=sum(
            run.steps + static_steps(prompts, lengths, b, MAX_NUM_BATCHED_TOKENS)
            for b, run in zip(BATCH_SIZES, runs, strict=True)
        ),
        peak_kv_tokens=max(run.peak_kv_tokens for run in runs),
    )


SPEC = LabSpec(
    lab="continuous_batching",
    lesson="4A",
    row={
        "max_num_seqs": int,
        "mode": str,
        "requests": int,
        "steps": int,
        "step_tokens": int,
        "prompt_tokens": int,
        "generated_tokens": int,
        "wrong_lengths": int,
        "preemptions": int,
        "wall_s": (int, float),
        "output_tok_s": (int, float),
        "tpot_p50_ms": (int, float),
        "tpot_p99_ms": (int, float),
        "wait_p50_ms": (int, float),
        "wait_p99_ms": (int, float),
    },
    units=lab_constant("continuous_batching", "UNITS"),
    key=("max_num_seqs", "mode"),
    header="TPOT p99 (ms)",
    claims=(tokens_exact, histogram_sum, steps_exact, continuous_fewer_steps, no_preemption, continuous_faster),
    prediction=prediction,
    prediction_basis="a replay of vLLM's scheduler and the roofline",
    columns=(
        Column("max_num_seqs", "B", fmt.count),
        Column("mode", "mode", str, align_right=False),
        Column("steps", "steps", fmt.count),
        Column("output_tok_s", "tok/s", lambda v: fmt.fixed(v, 0)),
        Column("tpot_p99_ms", "TPOT p99 (ms)", lambda v: fmt.fixed(v, 2)),
        Column("wait_p99_ms", "wait p99 (ms)", lambda v: fmt.fixed(v, 0)),
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
    ),
    work=_work(),
)
