"""Lab 1A, ``snippets/labs/kv_capacity.py``: the KV capacity vLLM allocates, against the prediction.

Receipt rows, one per engine the lab starts (key ``run``):

- ``capacity``: the engine at the defaults; ``fp8`` (optional): the same with an FP8 cache, on the
  capacity run's attention backend where the GPU allows (else vLLM's choice, else ``n/a``);
- ``over-ask``: an engine whose ``kv_cache_memory_bytes`` holds about half of one
  ``max_model_len`` request, which must refuse to start with vLLM's own reason.

Each row: ``kv_cache_dtype``, ``attention_backend`` (from vLLM's log; null where it logs none, as
vLLM's CPU build does), ``budget_source`` (where ``kv_budget_bytes`` comes from:
``VLLM_CPU_KVCACHE_SPACE`` or ``kv_cache_memory_bytes``, exact; on a GPU vLLM's own "Available KV
cache memory", to 0.01 GiB), ``kv_budget_bytes`` (B), ``kv_bytes_per_token`` (kappa, B/token),
``block_size`` (tokens), ``num_blocks`` (blocks), ``kv_tokens`` (tokens: blocks x block size),
``predicted_kv_tokens`` (tokens: the lesson's prediction, on a GPU from an assumed reserve; shown,
not checked), ``reported_max_concurrency`` (requests: vLLM's start-up log), ``outcome``
("started", "n/a", "expected error", "other error"), ``reason`` (vLLM's root cause where a run did not
do what it should) and ``estimated_max_model_len`` (tokens: vLLM's estimate in its refusal). Values
the run does not have are null.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infercourse import fmt, memory
from infercourse.exercises import Exercise
from infercourse.labs import core
from infercourse.registry import (
    COURSE_MODEL,
    LAB_GPU,
    VLLM_DEFAULT_BLOCK_SIZE,
    VLLM_DEFAULT_GPU_MEMORY_UTILIZATION,
    VLLM_NON_KV_RESERVE_GIB,
    model,
)
from infercourse.transformer import kv_bytes_per_token, weight_bytes

MAX_MODEL_LEN = 8192
"""The lab's default ``--max-model-len`` (tokens); tests check it against the script."""

LOG_ROUNDING_BYTES = 0.005 * 2**30
"""vLLM logs "Available KV cache memory: X GiB" rounded to 0.01 GiB (``vllm/utils/mem_utils.py:
format_gib``): a budget read from it is exact to half of that. On a GPU the check is against this
figure, what vLLM says it had after profiling (activations, CUDA graphs, non-torch memory), not
against the lesson's assumed reserve; that prediction is kept on the page and in the receipt as
teaching. With an exact budget (``VLLM_CPU_KVCACHE_SPACE``, ``kv_cache_memory_bytes``) the
tolerance is one block."""

CONCURRENCY_TOLERANCE = 0.005
"""vLLM prints the maximum concurrency with 2 decimals: half of the last digit."""

NO_FP8_REASON = (
    "no fp8 run in this receipt (--no-fp8; vllm-cpu 0.32.0 has an FP8 cache on x86 with "
    "AVX-512 or AMX, vLLM 0.26.0 on CUDA)"
)


def _started(receipt: core.Receipt) -> list[Mapping[str, Any]]:
    return [r for r in receipt["results"] if r["outcome"] == "started" and r["run"] != "over-ask"]


def _exact(row: Mapping[str, Any]) -> bool:
    return row["budget_source"] in ("VLLM_CPU_KVCACHE_SPACE", "kv_cache_memory_bytes")


def _from_log(row: Mapping[str, Any]) -> bool:
    return row["budget_source"].startswith("vLLM's log")


def token_tolerance(row: Mapping[str, Any]) -> float:
    """How far a row's tokens may be from budget / kappa: one block, plus the log's rounding in tokens."""
    return row["block_size"] + (LOG_ROUNDING_BYTES / row["kv_bytes_per_token"] if _from_log(row) else 0)


@core.claim
def capacity_matches_budget(receipt: core.Receipt) -> core.ClaimResult:
    name = "capacity_matches_budget"
    statement = (
        "every started engine's KV tokens equal budget / (kappa x block) in whole blocks, the budget being "
        "exact (CPU) or vLLM's own 'Available KV cache memory' (GPU, to 0.01 GiB)"
    )
    details, ok, checked = [], True, 0
    for row in _started(receipt):
        if row["kv_budget_bytes"] is None or not (_exact(row) or _from_log(row)):
            details.append(f"{row['run']}: no budget vLLM reported ({row['budget_source']})")
            continue
        checked += 1
        exact_tokens = row["kv_budget_bytes"] / row["kv_bytes_per_token"]
        ok &= abs(row["kv_tokens"] - exact_tokens) <= token_tolerance(row)
        details.append(
            f"{row['run']}: engine {fmt.count(row['kv_tokens'])} tokens, budget "
            f"{fmt.count(row['kv_budget_bytes'])} B / {fmt.count(row['kv_bytes_per_token'])} B = "
            f"{fmt.count(round(exact_tokens))} ({row['budget_source']})"
        )
        if row["predicted_kv_tokens"] is not None and not _exact(row):
            details.append(f"the lesson predicted {fmt.count(row['predicted_kv_tokens'])} with an assumed reserve")
    return core.ClaimResult(name, statement, ok if checked else None, "; ".join(details) or "no started engine")


def compare(receipt: core.Receipt) -> list[core.Compared]:
    """Each started engine's KV tokens beside :func:`~infercourse.memory.kv_capacity_tokens` of its exact budget
    (exact; a GPU's budget read from vLLM's log, rounded to 0.01 GiB, predicts them only to 0.005 GiB / kappa)."""
    return core.compare_rows(
        receipt,
        "KV tokens",
        "tokens",
        "kv_tokens",
        lambda row: memory.kv_capacity_tokens(row["kv_budget_bytes"], row["kv_bytes_per_token"], row["block_size"]),
        where=lambda row: row["outcome"] == "started" and row["run"] != "over-ask" and _exact(row),
    )


@core.claim
def concurrency_is_tokens_over_len(receipt: core.Receipt) -> core.ClaimResult:
    name = "concurrency_is_tokens_over_len"
    statement = (
        "the maximum concurrency vLLM reports = KV tokens / max_model_len (the request rounded up to whole blocks)"
    )
    rows = [r for r in _started(receipt) if r["reported_max_concurrency"] is not None]
    if not rows:
        return core.ClaimResult(name, statement, None, "no started engine reported its concurrency")
    details, ok = [], True
    for r in rows:
        blocks = -(-receipt["max_model_len"] // r["block_size"])
        expected = r["kv_tokens"] / (blocks * r["block_size"])
        ok &= abs(r["reported_max_concurrency"] - expected) <= CONCURRENCY_TOLERANCE
        details.append(
            f"{r['run']}: reported {r['reported_max_concurrency']:.2f}x, "
            f"{fmt.count(r['kv_tokens'])} / {fmt.count(blocks * r['block_size'])} = {expected:.2f}x"
        )
    return core.ClaimResult(name, statement, ok, "; ".join(details))


@core.claim
def overask_refused(receipt: core.Receipt) -> core.ClaimResult:
    row = core.find_row(receipt, run="over-ask")
    estimate = row["estimated_max_model_len"]
    ok = row["outcome"] == "expected error" and (estimate is None or estimate < receipt["max_model_len"])
    shown = f"; vLLM estimates a maximum model length of {fmt.count(estimate)}" if estimate is not None else ""
    return core.ClaimResult(
        "overask_refused",
        f"an engine whose cache cannot hold one max_model_len request refuses to start with "
        f"vLLM's reason ({receipt['settings'].get('over_ask_reason', 'the cache is too small')!r})",
        ok,
        f"{fmt.count(row['kv_budget_bytes'])} B for {fmt.count(receipt['max_model_len'])} tokens: "
        f"{row['outcome']}{shown}",
    )


@core.claim
def fp8_doubles_tokens(receipt: core.Receipt) -> core.ClaimResult:
    name = "fp8_doubles_tokens"
    statement = "an FP8 cache holds twice the tokens per byte of budget of the model-dtype cache"
    try:
        fp8 = core.find_row(receipt, run="fp8")
    except core.ReceiptError:
        return core.ClaimResult(name, statement, None, NO_FP8_REASON)
    base = core.find_row(receipt, run="capacity")
    if fp8["outcome"] == "n/a":
        return core.ClaimResult(name, statement, None, f"the fp8 engine could not run here: {fp8['reason']}")
    if fp8["kv_tokens"] is None or not base["kv_tokens"] or not fp8["kv_budget_bytes"] or not base["kv_budget_bytes"]:
        return core.ClaimResult(name, statement, False, f"fp8 run: {fp8['outcome']}")
    scale = fp8["kv_budget_bytes"] / base["kv_budget_bytes"]  # 1 with an exact budget; GPU runs profile their own
    expected = 2 * base["kv_tokens"] * scale
    slack = token_tolerance(fp8) + 2 * scale * (token_tolerance(base) - base["block_size"])
    backends = f" (backends: {base['attention_backend'] or '-'} / {fp8['attention_backend'] or '-'})"
    return core.ClaimResult(
        name,
        statement,
        abs(fp8["kv_tokens"] - expected) <= slack,
        f"{fmt.count(fp8['kv_tokens'])} fp8 tokens against 2 x {fmt.count(base['kv_tokens'])} x "
        f"{scale:.4f} (budget ratio) = {fmt.count(round(expected))}{backends}",
    )


def overask_usable_tokens(max_model_len: int, block_size: int) -> int:
    """Tokens the over-ask cache is given: half the blocks of one request plus one (the block vLLM's
    CPU build keeps back as its null block; on CUDA, vLLM 0.26.0 counts it in its estimate)."""
    return (-(-max_model_len // block_size) // 2 + 1) * block_size


def prediction(model_name: str = COURSE_MODEL, gpu_name: str = LAB_GPU) -> str:
    """Markdown: the budget, capacity, concurrency and over-ask the lab should show on ``gpu_name``."""
    config = model(model_name).config
    kappa, kappa_fp8 = kv_bytes_per_token(config, 2), kv_bytes_per_token(config, 1)
    total, weights = memory.device_total_bytes(gpu_name), weight_bytes(config, 2)
    reserve = VLLM_NON_KV_RESERVE_GIB * 2**30
    budget = memory.kv_budget_bytes(total, weights, reserve, VLLM_DEFAULT_GPU_MEMORY_UTILIZATION)
    tokens, tokens_fp8 = memory.kv_capacity_tokens(budget, kappa), memory.kv_capacity_tokens(budget, kappa_fp8)
    usable = overask_usable_tokens(MAX_MODEL_LEN, VLLM_DEFAULT_BLOCK_SIZE)
    return "\n".join(
        [
            f"{model_name} in BF16 at `--max-model-len {MAX_MODEL_LEN}`: budget = {fmt.gib(total)} x "
            f"{VLLM_DEFAULT_GPU_MEMORY_UTILIZATION} - {fmt.gib(weights)} of weights - {fmt.gib(reserve)} "
            f"(**assumed** reserve) = {fmt.gib(budget)}; kappa = {fmt.count(kappa)} B/token, blocks of "
            f"{VLLM_DEFAULT_BLOCK_SIZE} tokens. The engine's own figures differ by the error in the assumed "
            "reserve: vLLM profiles its activations and CUDA graphs and logs the memory it kept for the cache "
            '("Available KV cache memory"); the lab checks the engine against that figure, exactly.',
            "",
            f"| run | KV dtype | KV tokens | max concurrency at {fmt.count(MAX_MODEL_LEN)} tokens | outcome |",
            "|---|---|---:|---:|---|",
            f"| capacity | bf16 | {fmt.count(tokens)} | {fmt.fixed(memory.max_concurrency(tokens, MAX_MODEL_LEN), 2)}x "
            "| started |",
            f"| fp8 | fp8 | {fmt.count(tokens_fp8)} | "
            f"{fmt.fixed(memory.max_concurrency(tokens_fp8, MAX_MODEL_LEN), 2)}x | started |",
            f"| over-ask | bf16 | {fmt.count(usable)} given | - | refused: the KV cache one request needs is "
            f"larger than the available KV cache memory; estimated maximum model length {fmt.count(usable)} |",
        ]
    )


# --- the notebook's exercises ----------------------------------------------------------------------


def _cfg() -> Mapping[str, Any]:
    return model(COURSE_MODEL).config


def _kappa(kv_bytes: int = 2) -> int:
    return kv_bytes_per_token(_cfg(), kv_bytes)


def _budget() -> float:
    return memory.default_kv_budget_bytes(LAB_GPU, weight_bytes(_cfg(), 2))


EXERCISES = (
    Exercise(
        f"How many bytes of KV cache does one token of {COURSE_MODEL} take in BF16 (κ)?",
        _kappa,
        "bytes",
        f"κ = 2 (K and V) × {_cfg()['num_hidden_layers']} layers × {_cfg()['num_key_value_heads']} KV heads × "
        f"{_cfg()['hidden_size'] // _cfg()['num_attention_heads']} dimensions × 2 B: grouped-query attention keeps "
        "few KV heads (lesson 1A).",
    ),
    Exercise(
        f"The lesson's KV budget on the {LAB_GPU} (vLLM's defaults, the course's reserve), the cache in FP8 (1 byte "
        "per element, `kv_cache_dtype=fp8`): how many times the BF16 cache's tokens does it hold?",
        lambda: memory.kv_capacity_tokens(_budget(), _kappa(1)) / memory.kv_capacity_tokens(_budget(), _kappa()),
        "times",
        "κ halves and the budget stays, so the tokens double, to within one block (the lab checks it: "
        "`fp8_doubles_tokens`).",
        rel_tol=0.01,
    ),
    Exercise(
        f"On the {LAB_GPU} with vLLM's defaults (`gpu_memory_utilization` {VLLM_DEFAULT_GPU_MEMORY_UTILIZATION}) and "
        f"the course's assumed {VLLM_NON_KV_RESERVE_GIB} GiB besides weights and cache, how many whole "
        f"{MAX_MODEL_LEN:,}-token requests fit in the KV cache at once?",
        lambda: memory.max_sequences(_budget(), _kappa(), MAX_MODEL_LEN),
        "requests",
        f"Budget = memory × utilization − weights − reserve; each request takes whole blocks of "
        f"{VLLM_DEFAULT_BLOCK_SIZE} tokens × κ bytes (lesson 1A).",
    ),
)


SPEC = core.lab_spec(
    __name__,
    key=("run",),
    header="KV tokens",
    prediction_basis="the KV budget with an assumed reserve",
    columns=(
        core.Column.text("run"),
        core.Column.text("kv_cache_dtype", "KV dtype"),
        core.Column.count("kv_tokens", "KV tokens"),
        core.Column.count("predicted_kv_tokens", "predicted"),
        core.Column("reported_max_concurrency", "max concurrency", lambda v: f"{fmt.fixed(v, 2)}x"),
        core.Column.text("outcome"),
    ),
    cpu_max_model_len=512,
    cpu_args=("--no-fp8",),
    work=core.LabWork(engines=3, decode_steps=0, peak_kv_tokens=MAX_MODEL_LEN),  # capacity, fp8, over-ask; no decoding,
)
