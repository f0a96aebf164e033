"""Lab 1A, ``snippets/labs/kv_capacity.py``: the KV capacity vLLM allocates, against the prediction.

Receipt rows, one per engine the lab starts (key ``run``):

- ``capacity``: the engine at the defaults; ``fp8`` (optional): the same with an FP8 cache;
- ``over-ask``: an engine whose ``kv_cache_memory_bytes`` holds about half of one
  ``max_model_len`` request, which must refuse to start with vLLM's own reason.

Each row: ``kv_cache_dtype``, ``budget_source`` (where ``kv_budget_bytes`` comes from:
``VLLM_CPU_KVCACHE_SPACE`` or ``kv_cache_memory_bytes``, exact; on a GPU an ``estimate`` with an
assumed reserve), ``kv_budget_bytes`` (B), ``kv_bytes_per_token`` (kappa, B/token),
``block_size`` (tokens), ``num_blocks`` (blocks), ``kv_tokens`` (tokens: blocks x block size),
``predicted_kv_tokens`` (tokens), ``reported_max_concurrency`` (requests: vLLM's start-up log),
``outcome`` ("started", "expected error", "other error") and ``estimated_max_model_len`` (tokens:
vLLM's estimate in its refusal). Values the run does not have are null.
"""

from __future__ import annotations

from typing import Any, Mapping

from infercourse import fmt, memory
from infercourse.labs.core import ClaimResult, Column, LabSpec, Receipt, ReceiptError, find_row
from infercourse.registry import (COURSE_MODEL, LAB_GPU, VLLM_DEFAULT_BLOCK_SIZE,
                                  VLLM_DEFAULT_GPU_MEMORY_UTILIZATION, VLLM_NON_KV_RESERVE_GIB, model)
from infercourse.transformer import kv_bytes_per_token, weight_bytes

MAX_MODEL_LEN = 8192
"""The lab's default ``--max-model-len`` (tokens); tests check it against the script."""

GPU_BUDGET_TOLERANCE = 0.10
"""On a GPU the budget is an estimate: device total x utilization - weights - an ASSUMED reserve
(``registry.VLLM_NON_KV_RESERVE_GIB``) for activations, non-torch memory and CUDA graphs, which vLLM
measures by profiling and the lab cannot know beforehand. The engine's tokens must be within this
fraction of the prediction from that estimate; the miss is the reserve's error (the cache is what
is left, so a reserve off by x bytes moves the cache by x bytes). With an exact budget
(``VLLM_CPU_KVCACHE_SPACE``, ``kv_cache_memory_bytes``) the tolerance is one block."""

FP8_GPU_TOLERANCE = 0.02
"""On a GPU the BF16 and FP8 engines each profile their own reserve, so their budgets differ a
little: FP8 tokens / BF16 tokens must be within 2 % of 2 (an assumption until a GPU receipt shows
the spread). With an exact budget both engines have the same bytes: within one block of 2x."""

CONCURRENCY_TOLERANCE = 0.005
"""vLLM prints the maximum concurrency with 2 decimals: half of the last digit."""

NO_FP8_REASON = ("no fp8 run in this receipt (--no-fp8; vllm-cpu 0.32.0 has an FP8 cache on x86 with "
                 "AVX-512 or AMX, vLLM 0.26.0 on CUDA)")


def _started(receipt: Receipt) -> list[Mapping[str, Any]]:
    return [r for r in receipt["results"] if r["outcome"] == "started" and r["run"] != "over-ask"]


def _exact(row: Mapping[str, Any]) -> bool:
    return not row["budget_source"].startswith("estimate")


def predicted_tokens(row: Mapping[str, Any]) -> int:
    """Tokens the row's budget holds: :func:`infercourse.memory.kv_capacity_tokens` (whole blocks).

    Raises:
        ValueError: a non-positive budget, kappa or block size (as ``kv_capacity_tokens``).
    """
    return memory.kv_capacity_tokens(row["kv_budget_bytes"], row["kv_bytes_per_token"], row["block_size"])


def capacity_matches_budget(receipt: Receipt) -> ClaimResult:
    claim = "capacity_matches_budget"
    statement = (f"the engine's KV tokens equal budget / (kappa x block) in whole blocks: within one block for an "
                 f"exact budget, within {fmt.pct(GPU_BUDGET_TOLERANCE, 0)} for a GPU estimate")
    row = find_row(receipt, run="capacity")
    if row["kv_budget_bytes"] is None or row["kv_tokens"] is None or not row["kv_budget_bytes"]:
        return ClaimResult(claim, statement, None, f"no budget known ({row['budget_source']})")
    predicted, tokens = predicted_tokens(row), row["kv_tokens"]
    if _exact(row):
        ok = abs(tokens - predicted) <= row["block_size"]
    else:
        ok = predicted > 0 and abs(tokens - predicted) <= GPU_BUDGET_TOLERANCE * predicted
    detail = (f"engine {fmt.count(tokens)} tokens, predicted {fmt.count(predicted)} from "
              f"{fmt.count(row['kv_budget_bytes'])} B ({row['budget_source']})")
    if not _exact(row) and "reserve_gib_assumed" in receipt["settings"]:
        detail += f"; reserve vLLM kept: about {fmt.gib(implied_reserve_bytes(receipt, row))} (to one block)"
    return ClaimResult(claim, statement, ok, detail)


def implied_reserve_bytes(receipt: Receipt, row: Mapping[str, Any]) -> float:
    """The reserve (B) a GPU engine really kept besides weights and cache: the assumed reserve plus
    what the estimated budget had beyond the cache it got (``kv_tokens`` x kappa), to one block."""
    assumed = receipt["settings"]["reserve_gib_assumed"] * 2**30
    return assumed + row["kv_budget_bytes"] - row["kv_tokens"] * row["kv_bytes_per_token"]


def concurrency_is_tokens_over_len(receipt: Receipt) -> ClaimResult:
    claim = "concurrency_is_tokens_over_len"
    statement = ("the maximum concurrency vLLM reports = KV tokens / max_model_len "
                 "(the request rounded up to whole blocks)")
    rows = [r for r in _started(receipt) if r["reported_max_concurrency"] is not None]
    if not rows:
        return ClaimResult(claim, statement, None, "no started engine reported its concurrency")
    details, ok = [], True
    for r in rows:
        blocks = -(-receipt["max_model_len"] // r["block_size"])
        expected = r["kv_tokens"] / (blocks * r["block_size"])
        ok &= abs(r["reported_max_concurrency"] - expected) <= CONCURRENCY_TOLERANCE
        details.append(f"{r['run']}: reported {r['reported_max_concurrency']:.2f}x, "
                       f"{fmt.count(r['kv_tokens'])} / {fmt.count(blocks * r['block_size'])} = {expected:.2f}x")
    return ClaimResult(claim, statement, ok, "; ".join(details))


def overask_refused(receipt: Receipt) -> ClaimResult:
    row = find_row(receipt, run="over-ask")
    estimate = row["estimated_max_model_len"]
    ok = row["outcome"] == "expected error" and (estimate is None or estimate < receipt["max_model_len"])
    shown = f"; vLLM estimates a maximum model length of {fmt.count(estimate)}" if estimate is not None else ""
    return ClaimResult("overask_refused",
                       f"an engine whose cache cannot hold one max_model_len request refuses to start with "
                       f"vLLM's reason ({receipt['settings'].get('over_ask_reason', 'the cache is too small')!r})",
                       ok, f"{fmt.count(row['kv_budget_bytes'])} B for {fmt.count(receipt['max_model_len'])} tokens: "
                       f"{row['outcome']}{shown}")


def fp8_doubles_tokens(receipt: Receipt) -> ClaimResult:
    claim, statement = "fp8_doubles_tokens", "an FP8 cache holds twice the tokens of the model-dtype cache"
    try:
        fp8 = find_row(receipt, run="fp8")
    except ReceiptError:
        return ClaimResult(claim, statement, None, NO_FP8_REASON)
    base = find_row(receipt, run="capacity")
    if fp8["kv_tokens"] is None or not base["kv_tokens"]:
        return ClaimResult(claim, statement, False, f"fp8 run: {fp8['outcome']}")
    ratio = fp8["kv_tokens"] / base["kv_tokens"]
    if _exact(fp8) and _exact(base):
        ok = abs(fp8["kv_tokens"] - 2 * base["kv_tokens"]) <= fp8["block_size"]
    else:
        ok = abs(ratio - 2) <= 2 * FP8_GPU_TOLERANCE
    return ClaimResult(claim, statement, ok, f"{fmt.count(fp8['kv_tokens'])} / {fmt.count(base['kv_tokens'])} "
                                             f"tokens = {ratio:.3f}x")


def overask_usable_tokens(max_model_len: int, block_size: int) -> int:
    """Tokens the over-ask cache can use: half the blocks of one request (the lab gives one more
    block, which vLLM keeps back as its null block)."""
    return (-(-max_model_len // block_size) // 2) * block_size


def prediction(model_name: str = COURSE_MODEL, gpu_name: str = LAB_GPU) -> str:
    """Markdown: the budget, capacity, concurrency and over-ask the lab should show on ``gpu_name``."""
    config = model(model_name).config
    kappa, kappa_fp8 = kv_bytes_per_token(config, 2), kv_bytes_per_token(config, 1)
    total, weights = memory.device_total_bytes(gpu_name), weight_bytes(config, 2)
    reserve = VLLM_NON_KV_RESERVE_GIB * 2**30
    budget = memory.kv_budget_bytes(total, weights, reserve, VLLM_DEFAULT_GPU_MEMORY_UTILIZATION)
    tokens, tokens_fp8 = memory.kv_capacity_tokens(budget, kappa), memory.kv_capacity_tokens(budget, kappa_fp8)
    usable = overask_usable_tokens(MAX_MODEL_LEN, VLLM_DEFAULT_BLOCK_SIZE)
    return "\n".join([
        f"{model_name} in BF16 at `--max-model-len {MAX_MODEL_LEN}`: budget = {fmt.gib(total)} x "
        f"{VLLM_DEFAULT_GPU_MEMORY_UTILIZATION} - {fmt.gib(weights)} of weights - {fmt.gib(reserve)} "
        f"(**assumed** reserve) = {fmt.gib(budget)}; kappa = {fmt.count(kappa)} B/token, blocks of "
        f"{VLLM_DEFAULT_BLOCK_SIZE} tokens. The engine's own figures may differ by the error in the assumed "
        f"reserve (the claim allows {fmt.pct(GPU_BUDGET_TOLERANCE, 0)}).",
        "",
        "| run | KV dtype | KV tokens | max concurrency at "
        f"{fmt.count(MAX_MODEL_LEN)} tokens | outcome |",
        "|---|---|---:|---:|---|",
        f"| capacity | bf16 | {fmt.count(tokens)} | {fmt.fixed(memory.max_concurrency(tokens, MAX_MODEL_LEN), 2)}x "
        "| started |",
        f"| fp8 | fp8 | {fmt.count(tokens_fp8)} | "
        f"{fmt.fixed(memory.max_concurrency(tokens_fp8, MAX_MODEL_LEN), 2)}x | started |",
        f"| over-ask | bf16 | {fmt.count(usable)} usable | - | refused: the KV cache one request needs is "
        f"larger than the available KV cache memory; estimated maximum model length about {fmt.count(usable)} |",
    ])


SPEC = LabSpec(
    lab="kv_capacity",
    lesson="1A",
    row={"run": str, "kv_cache_dtype": str, "budget_source": str, "kv_budget_bytes": (int, type(None)),
         "kv_bytes_per_token": int, "block_size": int, "num_blocks": (int, type(None)),
         "kv_tokens": (int, type(None)), "predicted_kv_tokens": (int, type(None)),
         "reported_max_concurrency": (int, float, type(None)), "outcome": str,
         "estimated_max_model_len": (int, type(None))},
    units={"kv_budget_bytes": "B", "kv_bytes_per_token": "B/token", "block_size": "tokens", "num_blocks": "blocks",
           "kv_tokens": "tokens", "predicted_kv_tokens": "tokens", "reported_max_concurrency": "requests",
           "estimated_max_model_len": "tokens"},
    key=("run",),
    header="KV tokens",
    claims=(capacity_matches_budget, concurrency_is_tokens_over_len, overask_refused, fp8_doubles_tokens),
    prediction=prediction,
    prediction_basis="the KV budget with an assumed reserve",
    columns=(Column("run", "run", str, align_right=False), Column("kv_cache_dtype", "KV dtype", str, align_right=False),
             Column("kv_tokens", "KV tokens", lambda v: "-" if v is None else fmt.count(v)),
             Column("predicted_kv_tokens", "predicted", lambda v: "-" if v is None else fmt.count(v)),
             Column("reported_max_concurrency", "max concurrency",
                    lambda v: "-" if v is None else f"{fmt.fixed(v, 2)}x"),
             Column("outcome", "outcome", str, align_right=False)),
    cpu_max_model_len=512,
    cpu_args=("--no-fp8",),
)
