"""Lab 1B, ``snippets/labs/attention_backends.py``: the same decode on each attention backend, beside its floor.

Receipt rows, one per (run, context) of a run whose engine started, or one per run vLLM refused: ``run``
(``backend:kv_cache_dtype``), ``requested_backend`` (``default``: vLLM's choice), ``kv_cache_dtype``,
``outcome`` (``started`` or ``refused``) and vLLM's ``reason``; ``backend`` (what the model's attention layers
run), ``capability`` (the GPU's compute capability, None on a CPU), ``cpu_refusal`` (the backend vLLM's CPU
build said it cannot use); ``context``, ``batch``, ``output_len``; ``kv_bytes_per_token`` (B/token),
``step_ms`` (the timed batch's all-decoding step) and ``histogram_tokens`` (how far
``vllm:iteration_tokens_total``'s sum moved over the warm-up and the timed batch).

Which backend vLLM picks is predicted from its 0.26.0 source (:func:`predicted_backend`) and checked on GPU
receipts; the token counts and the CPU build's backend are exact and checked everywhere; the claims about
time are checked on GPU receipts only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infercourse import fmt, roofline
from infercourse.exercises import Exercise
from infercourse.labs import core
from infercourse.registry import COMPUTE_CAPABILITY, COURSE_MODEL, LAB_GPU, SM_COUNT, GPUFacts, gpu, model

LAB = core.lab_settings("attention_backends")
REFUSED = "refused"

# --- which backend vLLM 0.26.0 runs: its rule, from the source (registry facts of lesson 1B) ----------

PRIORITY = ("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION")
"""vLLM 0.26.0's order for a model without MLA on a CUDA card below compute capability 10 (registry fact
``vllm-attention-backend-priority``: ``vllm/platforms/cuda.py``:143-162); 10.x tries FLASHINFER first."""


def backend_accepts(backend: str, capability: tuple[int, int], kv_cache_dtype: str) -> bool:
    """Whether ``backend`` accepts a 128-wide BF16 head with a ``kv_cache_dtype`` cache on a card of
    ``capability`` in vLLM 0.26.0: FLASH_ATTN from 8.0, an FP8 cache only with FlashAttention 3 on 9.x
    (facts ``vllm-flash-attn-fp8-kv``, ``vllm-flash-attn-version``); FLASHINFER on 8.0 to 12.1, FP8 included
    (``vllm-flashinfer-fp8-kv``); TRITON_ATTN and FLEX_ATTENTION everywhere (the checks this lab's model can
    fail; block size, sinks and MLA are not in play).

    Raises:
        ValueError: a backend or dtype outside the lab's (``snippets/labs/attention_backends.py`` BACKENDS).
    """
    if kv_cache_dtype not in ("auto", "fp8"):
        raise ValueError(f"kv_cache_dtype must be 'auto' or 'fp8', got {kv_cache_dtype!r}")
    if backend == "FLASH_ATTN":
        return capability >= (8, 0) and (kv_cache_dtype == "auto" or capability[0] == 9)
    if backend == "FLASHINFER":
        return (8, 0) <= capability <= (12, 1)
    if backend in ("TRITON_ATTN", "FLEX_ATTENTION"):
        return True
    raise ValueError(f"no rule for backend {backend!r}; known: {', '.join(PRIORITY)}")


def predicted_backend(capability: tuple[int, int], kv_cache_dtype: str, requested: str = LAB.DEFAULT) -> str:
    """The backend vLLM 0.26.0 runs for the course's model on a CUDA card of ``capability`` with a
    ``kv_cache_dtype`` cache: for ``requested`` = ``"default"`` the first of :data:`PRIORITY` that accepts
    (FLASHINFER first on 10.x); a forced backend is checked alone and is ``"refused"`` when it does not
    accept (fact ``vllm-attention-backend-forced``: no fallback).

    Raises:
        ValueError: as :func:`backend_accepts`.
    """
    if requested != LAB.DEFAULT:
        return requested if backend_accepts(requested, capability, kv_cache_dtype) else REFUSED
    order = ("FLASHINFER", "FLASH_ATTN", *PRIORITY[2:]) if capability[0] == 10 else PRIORITY
    return next(b for b in order if backend_accepts(b, capability, kv_cache_dtype))


def _capability(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


def _started(receipt: core.Receipt) -> list[Mapping[str, Any]]:
    return [r for r in receipt["results"] if r["outcome"] == "started"]


def _runs(receipt: core.Receipt) -> dict[str, list[Mapping[str, Any]]]:
    """Each run's rows, in the receipt's order."""
    runs: dict[str, list[Mapping[str, Any]]] = {}
    for r in receipt["results"]:
        runs.setdefault(r["run"], []).append(r)
    return runs


# --- claims ---------------------------------------------------------------------------------------


def expected_histogram_tokens(row: Mapping[str, Any]) -> int:
    """Tokens a started row's engine steps ran: 2 B (S + n), a warm-up and a timed batch of B requests of S
    prompt tokens and n output tokens each (every prompt and generated token counted once)."""
    return 2 * row["batch"] * (row["context"] + row["output_len"])


@core.claim
def histogram_tokens_exact(receipt: core.Receipt) -> core.ClaimResult:
    """Every started row: the step histogram's sum moved by :func:`expected_histogram_tokens`."""
    wrong, rows = [], _started(receipt)
    for r in rows:
        want = expected_histogram_tokens(r)
        if r["histogram_tokens"] != want:
            wrong.append(f"{r['run']} S={r['context']}: {r['histogram_tokens']:,} against {want:,}")
    return core.ClaimResult(
        "histogram_tokens_exact",
        "vllm:iteration_tokens_total grows by 2 B (S + n) per context, whatever the backend",
        bool(rows) and not wrong,
        "; ".join(wrong) or f"{len(rows)} rows exact",
    )


def compare(receipt: core.Receipt) -> list[core.Compared]:
    """Each started row's scheduled tokens (the step histogram's sum) beside :func:`expected_histogram_tokens`, as
    :func:`histogram_tokens_exact` (the step time beside its floor is :func:`efficiency`'s, on a GPU)."""
    return core.compare_rows(
        receipt,
        "scheduled tokens",
        "tokens",
        "histogram_tokens",
        expected_histogram_tokens,
        where=lambda r: r["outcome"] == "started",
    )


@core.claim
def one_backend_per_engine(receipt: core.Receipt) -> core.ClaimResult:
    """Every started engine's attention layers all run one backend, and it is named."""
    mixed = {r["run"]: r["backend"] for r in _started(receipt) if not r["backend"] or "," in r["backend"]}
    return core.ClaimResult(
        "one_backend_per_engine",
        "all of an engine's attention layers run one backend, read from the layers themselves",
        not mixed,
        ", ".join(f"{k}: {v}" for k, v in mixed.items()) or "one backend per engine",
    )


@core.claim
def cpu_build_runs_cpu_attn(receipt: core.Receipt) -> core.ClaimResult:
    """On vLLM's CPU build every engine runs CPU_ATTN, and one that forced another backend logged that it
    cannot use it (fact ``vllm-cpu-attention-backend``)."""
    statement = "vLLM's CPU build runs CPU_ATTN whatever is asked, and says so for a forced backend"
    if receipt["machine"].get("kind") == "gpu":
        return core.ClaimResult("cpu_build_runs_cpu_attn", statement, None, "a GPU receipt: see choice_as_predicted")
    wrong = []
    for run, rows in _runs(receipt).items():
        r = rows[0]
        forced = r["requested_backend"] not in (LAB.DEFAULT, "CPU_ATTN")
        if r["backend"] != "CPU_ATTN" or r["cpu_refusal"] != (r["requested_backend"] if forced else None):
            wrong.append(f"{run}: ran {r['backend']}, logged refusal of {r['cpu_refusal']}")
    return core.ClaimResult(
        "cpu_build_runs_cpu_attn", statement, not wrong, "; ".join(wrong) or "every run on CPU_ATTN"
    )


@core.claim
def choice_as_predicted(receipt: core.Receipt) -> core.ClaimResult:
    """On a GPU: every run's outcome (the backend its layers ran, or vLLM's refusal) is
    :func:`predicted_backend`'s for the receipt's compute capability."""
    statement = "on a GPU, the backend vLLM ran (or its refusal) is what its 0.26.0 source predicts for the card"
    if receipt["machine"].get("kind") != "gpu":
        return core.ClaimResult("choice_as_predicted", statement, None, "a CPU receipt: see cpu_build_runs_cpu_attn")
    capability = next((r["capability"] for r in receipt["results"] if r["capability"]), None)
    if capability is None:
        return core.ClaimResult("choice_as_predicted", statement, None, "no engine started, so no compute capability")
    cap, wrong, seen = _capability(capability), [], []
    for run, rows in _runs(receipt).items():
        r = rows[0]
        want = predicted_backend(cap, r["kv_cache_dtype"], r["requested_backend"])
        got = r["backend"] if r["outcome"] == "started" else REFUSED
        seen.append(f"{run} -> {got}")
        if got != want:
            wrong.append(f"{run}: {got}, predicted {want}")
    return core.ClaimResult(
        "choice_as_predicted",
        statement,
        not wrong,
        f"capability {capability}: " + ("; ".join(wrong) or ", ".join(seen)),
    )


@core.gpu_timing
def step_grows_with_context(receipt: core.Receipt) -> core.ClaimResult:
    """Every started engine: the step at its longest context is slower than at its shortest."""
    pairs = {run: (rows[0], rows[-1]) for run, rows in _runs(receipt).items() if rows[0]["outcome"] == "started"}
    return core.ClaimResult(
        "step_grows_with_context",
        "on every backend, a decode step over a longer context is slower (it reads more KV cache)",
        all(long["step_ms"] > short["step_ms"] for short, long in pairs.values()),
        "; ".join(
            f"{run}: {fmt.fixed(short['step_ms'], 3)} -> {fmt.fixed(long['step_ms'], 3)} ms"
            for run, (short, long) in pairs.items()
        ),
    )


def step_floor_s(facts: GPUFacts, config: Mapping[str, Any], row: Mapping[str, Any]) -> float:
    """The roofline floor (s) of one row's decode step: the matmul weights once and B caches at the mean
    context S + n/2, at 1 B per cache element for an FP8 cache (:func:`infercourse.roofline.decode_step_floor`)."""
    kv_b = 1 if row["kv_cache_dtype"] == "fp8" else 2
    context = row["context"] + row["output_len"] // 2
    return roofline.decode_step_floor(facts, config, context, row["batch"], kv_dtype_bytes=kv_b)


def efficiency(receipt: core.Receipt, facts: GPUFacts, config: Mapping[str, Any]) -> list[core.Efficiency]:
    """Per started row, the measured step (ms) against its floor on ``facts``."""
    return [
        core.Efficiency(i, "step", "ms", r["step_ms"], step_floor_s(facts, config, r) * 1e3)
        for i, r in enumerate(receipt["results"])
        if r["outcome"] == "started"
    ]


# --- the lesson's expected output -----------------------------------------------------------------


def predicted_rows(gpu_name: str = LAB_GPU, model_name: str = COURSE_MODEL) -> list[dict[str, Any]]:
    """Per run of the lab's :data:`RUNS` on ``gpu_name``: the backend vLLM 0.26.0 runs (or ``refused``) and,
    for a run that starts, the step floor (s) at each of :data:`CONTEXTS`."""
    facts, config, cap = gpu(gpu_name), model(model_name).config, COMPUTE_CAPABILITY[gpu_name]
    rows = []
    for run in LAB.RUNS:
        requested, dtype = run.split(":")
        backend = predicted_backend(cap, dtype, requested)
        base = {"run": run, "kv_cache_dtype": dtype, "batch": LAB.BATCH, "output_len": LAB.OUTPUT_LEN}
        floors = (
            [] if backend == REFUSED else [step_floor_s(facts, config, {**base, "context": s}) for s in LAB.CONTEXTS]
        )
        rows.append({**base, "backend": backend, "floors_s": floors})
    return rows


def prediction(gpu_name: str = LAB_GPU, model_name: str = COURSE_MODEL) -> str:
    """Markdown: each run's backend on ``gpu_name`` and its step floors at the lab's contexts."""
    facts, (major, minor) = gpu(gpu_name), COMPUTE_CAPABILITY[gpu_name]
    lines = [
        f"{model_name} in BF16, {LAB.BATCH} requests decoding {LAB.OUTPUT_LEN} tokens after prompts of "
        + ", ".join(fmt.count(s) for s in LAB.CONTEXTS)
        + f" tokens, on {gpu_name} (compute capability {major}.{minor}, {fmt.count(facts.bandwidth_gb_s)} GB/s). "
        "The backend is vLLM 0.26.0's rule read in its source; the floor is one decode step at the mean context "
        "S + n/2: the matmul weights and every sequence's cache read once (1 B per element for an FP8 cache). "
        "Every backend's measured step sits above it; what differs between backends is how far.",
        "",
        "| run | backend | " + " | ".join(f"floor at {fmt.count(s)} (ms)" for s in LAB.CONTEXTS) + " |",
        "|---|---|" + "---:|" * len(LAB.CONTEXTS),
    ]
    for r in predicted_rows(gpu_name, model_name):
        cells = [fmt.fixed(f * 1e3, 2) for f in r["floors_s"]] or ["-"] * len(LAB.CONTEXTS)
        lines.append(f"| {r['run']} | {r['backend']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def demands() -> list[roofline.Demand]:
    """What each floor of :func:`prediction` asks of the lab's card (a floor asks for exactly the limit)."""
    facts, config = gpu(LAB_GPU), model(COURSE_MODEL).config
    return [
        roofline.decode_demand(
            facts,
            config,
            r["batch"],
            s + LAB.OUTPUT_LEN // 2,
            floor,
            f"attention_backends: {r['run']} at {s}",
            kv_dtype_bytes=1 if r["kv_cache_dtype"] == "fp8" else 2,
        )
        for r in predicted_rows()
        for s, floor in zip(LAB.CONTEXTS, r["floors_s"], strict=False)
    ]


# --- the notebook's exercises ----------------------------------------------------------------------


def _floor_at_longest(kv_cache_dtype: str) -> float:
    """The step floor (s) of the lab's batch at its longest context with a ``kv_cache_dtype`` cache."""
    row = {"kv_cache_dtype": kv_cache_dtype, "context": max(LAB.CONTEXTS), "output_len": LAB.OUTPUT_LEN}
    return step_floor_s(gpu(LAB_GPU), model(COURSE_MODEL).config, {**row, "batch": LAB.BATCH})


EXERCISES = (
    Exercise(
        f"One attention head over a {max(LAB.CONTEXTS):,}-token prompt: how many GB would naive attention's S × S "
        "score matrix take in BF16?",
        lambda: max(LAB.CONTEXTS) ** 2 * 2 / 1e9,
        "GB",
        f"S² scores × 2 B for one head; a layer's {model(COURSE_MODEL).config['num_attention_heads']} heads need "
        f"{model(COURSE_MODEL).config['num_attention_heads'] * max(LAB.CONTEXTS) ** 2 * 2 / 1e9:.0f} GB to write and "
        "read back: FlashAttention never writes the matrix and computes it tile by tile in on-chip memory "
        "(lesson 1B).",
        rel_tol=0.02,
    ),
    Exercise(
        f"A decode step of the lab's batch of {LAB.BATCH}, attention run by one thread block per (sequence, KV "
        f"head): what share of the {LAB_GPU}'s {SM_COUNT[LAB_GPU]} SMs do its blocks occupy?",
        lambda: 100 * LAB.BATCH * model(COURSE_MODEL).config["num_key_value_heads"] / SM_COUNT[LAB_GPU],
        "%",
        "B × h_kv blocks: with few KV heads most SMs idle, which is why decode kernels split the keys of a sequence "
        "across blocks (FlashDecoding's split-KV; lesson 1B).",
        rel_tol=0.01,
    ),
    Exercise(
        f"At the lab's longest context and batch {LAB.BATCH} on the {LAB_GPU}, the decode step floor with a BF16 KV "
        "cache divided by the floor with an FP8 one?",
        lambda: _floor_at_longest("auto") / _floor_at_longest("fp8"),
        "times",
        "The cache read halves, the weights' read does not: the step saves half the cache's share of it, so the "
        "factor is 1 / (1 − share / 2) (lesson 1B; the lab times both).",
        rel_tol=0.02,
    ),
)


SPEC = core.lab_spec(
    __name__,
    key=("run", "context"),
    header="step (ms)",
    prediction_basis="vLLM 0.26.0's source and the roofline",
    columns=(
        core.Column.text("run"),
        core.Column.text("backend"),
        core.Column.count("context"),
        core.Column("step_ms", "step (ms)", lambda v: fmt.fixed(v, 2)),
    ),
    cpu_max_model_len=256,
    cpu_args=("--runs", "default:auto,FLASH_ATTN:auto", "--contexts", "32,128", "--batch", "2", "--output-len", "8"),
    work=core.LabWork(
        engines=len(LAB.RUNS),  # a refused one stops before loading weights
        decode_steps=sum(bool(r["floors_s"]) for r in predicted_rows()) * len(LAB.CONTEXTS) * 2 * LAB.OUTPUT_LEN,
        peak_kv_tokens=LAB.BATCH * (max(LAB.CONTEXTS) + LAB.OUTPUT_LEN),
    ),
)
