"""Lab 1A: how many tokens of KV cache vLLM finds room for, against the lesson's prediction.

Each engine starts in a fresh Python process (this script with ``--child``), so nothing of one
engine's memory lingers into the next, and its start-up log is captured whole. Runs:

1. ``capacity``: an engine at the defaults. The child reads the capacity vLLM allocated through
   ``LLM.get_metrics()`` (the ``vllm:cache_config_info`` gauge carries the cache config as labels:
   ``num_gpu_blocks`` and ``block_size``), and the model's facts (parameters, kappa) from the
   engine's own config (so every file is read through vLLM, and ``VLLM_USE_MODELSCOPE`` covers it).
   From the start-up log (:data:`LOG_PATTERNS`): the attention backend vLLM chose, the KV memory it
   says it had ("Available KV cache memory: X GiB", on a GPU) and the "Maximum concurrency".
2. ``fp8`` (unless ``--no-fp8``): the same with ``kv_cache_dtype="fp8"`` (one byte per element),
   asked to use the capacity run's attention backend. Where that backend cannot store an FP8 cache
   (FlashAttention before sm_90, e.g. the RTX 4090), vLLM's own choice is tried; where that fails
   too (FlashInfer compiles kernels with nvcc), the row says ``n/a`` with vLLM's reason and the lab
   goes on.
3. ``over-ask``: an engine whose cache (``kv_cache_memory_bytes``) holds only about half of one
   ``--max-model-len`` request (:func:`overask_budget`). It must refuse to start with vLLM's own
   reason (the cache needed "is larger than the available KV cache memory", with "the estimated
   maximum model length"); any other failure is reported as what it is, not as the expected one.

The check: tokens = floor(budget / (kappa * block_size)) * block_size, with kappa =
2 * L * n_kv * d_h * b from the model's config and the budget the engine had:

- on vLLM's CPU backend, ``VLLM_CPU_KVCACHE_SPACE`` (GiB; it replaces ``kv_cache_memory_bytes``,
  so the over-ask child runs without it): exact, and so is ``kv_cache_memory_bytes``;
- on a GPU, what vLLM says it had (its log, to 0.01 GiB). The lesson's prediction (device total *
  ``gpu_memory_utilization`` - weights - an assumed ``--reserve-gib``) is printed beside it.

Run (GPU, vLLM 0.26.0):

    python snippets/labs/kv_capacity.py --receipt receipts/rtx-4090/kv_capacity.json

No hub access (random weights):

    python snippets/labs/kv_capacity.py --model PATH --load-format dummy

Imports the standard library and labkit (vLLM, torch and transformers only in the child).
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path

from labkit.cli import check_model_arg, engine_flags, fail, lab_parser, progress, whole
from labkit.engine import child_run, run_lab, start_llm
from labkit.machine import nvidia_smi
from labkit.measure import cache_config, kv_bytes_per_token, param_count
from labkit.receipt import measured_rows, write_receipt

LAB = "kv_capacity"
SEED = 0
MAX_MODEL_LEN = 8192  # the default context per request: the lesson's 8,192-token example
GPU_MEMORY_UTILIZATION = 0.92  # vLLM 0.26.0's default
RESERVE_GIB = 2.0  # assumed non-KV, non-weight memory on a GPU (GiB = 2^30 B); the lesson's assumption
OVERASK_REASON = "larger than the available KV cache memory"  # vLLM's message when one max_model_len request cannot fit
ROW_TAG = "KV_CAPACITY_ROW "  # the child's one line of results on stdout, JSON after the tag
LOG_PATTERNS = {  # start-up log lines (vLLM 0.26.0 writes "GPU KV cache size", vllm-cpu 0.32.0 "CPU KV cache size")
    "reported_max_concurrency": r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x",
    "estimated_max_model_len": r"estimated maximum model length is ([\d,]+)",
    "available_kv_gib": r"Available KV cache memory: ([\d.]+) GiB",
}
BACKEND_PATTERN = r"Using (?:AttentionBackendEnum\.)?(\w+) (?:attention )?backend(?: out of|\.)"
"""vLLM 0.26.0's log lines naming the attention backend it selected (``vllm/platforms/cuda.py``): chosen,
"Using FLASH_ATTN attention backend out of potential backends: [...]." (:482-490); forced by
``attention_backend``, "Using AttentionBackendEnum.FLASHINFER backend." (:422, an enum's ``%s``)."""
CHILD_TIMEOUT_S = 1800


# The receipt's rows: UNITS gives every measured key's unit, ROW every key's JSON type ("number": an int
# or a float; "| None": may be null). The lab's spec (src/infercourse/labs/) reads both.
UNITS = {
    "kv_budget_bytes": "B",
    "kv_bytes_per_token": "B/token",
    "block_size": "tokens",
    "num_blocks": "blocks",
    "kv_tokens": "tokens",
    "predicted_kv_tokens": "tokens",
    "reported_max_concurrency": "requests",
    "estimated_max_model_len": "tokens",
}
ROW = {
    "run": "str",
    "kv_cache_dtype": "str",
    "attention_backend": "str | None",
    "budget_source": "str",
    "kv_budget_bytes": "int | None",
    "kv_bytes_per_token": "int",
    "block_size": "int | None",
    "num_blocks": "int | None",
    "kv_tokens": "int | None",
    "predicted_kv_tokens": "int | None",
    "reported_max_concurrency": "number | None",
    "outcome": "str",
    "reason": "str | None",
    "estimated_max_model_len": "int | None",
}


def parse_args(argv=None) -> argparse.Namespace:
    p = lab_parser(
        LAB, "Read vLLM's KV-cache capacity and compare it with the prediction.", max_model_len=MAX_MODEL_LEN
    )
    p.add_argument(
        "--reserve-gib",
        type=float,  # 0 is allowed: checked in [0, 1024) below
        default=RESERVE_GIB,
        help="GPU only: assumed non-KV, non-weight memory for the prediction (GiB)",
    )
    p.add_argument("--no-fp8", action="store_true", help="skip the FP8-cache engine")
    # internal: one engine in this process; prints its row after ROW_TAG
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--kv-cache-dtype", default="auto", help=argparse.SUPPRESS)
    p.add_argument("--kv-cache-memory-bytes", type=whole, help=argparse.SUPPRESS)
    p.add_argument("--attention-backend", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def check_input(args) -> None:
    check_model_arg(args.model)
    if args.max_model_len < 32:
        fail(f"--max-model-len must be at least 32, got {args.max_model_len}")
    if not 0 <= args.reserve_gib < 1024:
        fail(f"--reserve-gib must be in [0, 1024), got {args.reserve_gib}")


def device_total_bytes() -> int | None:
    """GPU memory as CUDA reports it (nvidia-smi memory.total, MiB -> B), or None without a GPU."""
    found = nvidia_smi("memory.total")
    return int(found[0]) * 2**20 if found and found[0].isdigit() else None


# --8<-- [start:engine]
def child(args) -> int:
    """Start one engine, print its row (``ROW_TAG`` + JSON) and exit; vLLM's errors end the process."""
    llm, engine_start_s = start_llm(
        args,
        seed=SEED,
        gpu_memory_utilization=GPU_MEMORY_UTILIZATION,
        kv_cache_dtype=args.kv_cache_dtype,
        kv_cache_memory_bytes=args.kv_cache_memory_bytes,
        attention_backend=args.attention_backend,
        enable_prefix_caching=False,
        disable_log_stats=False,
    )
    labels = cache_config(llm)
    import torch

    model_config = llm.llm_engine.vllm_config.model_config  # read through vLLM: its hub switch applies
    b = torch.empty((), dtype=model_config.dtype).element_size()
    print(
        ROW_TAG
        + json.dumps(
            {
                "num_blocks": int(labels["num_gpu_blocks"]),
                "block_size": int(labels["block_size"]),
                "cache_dtype": labels["cache_dtype"],
                "engine_start_s": engine_start_s,
                "params": param_count(model_config.hf_config),
                "weight_dtype_bytes": b,
                "kv_bytes_per_token": kv_bytes_per_token(model_config.hf_config, b),
            }
        ),
        flush=True,
    )
    return 0


# --8<-- [end:engine]


def run_child(
    args, kv_cache_dtype: str, kv_cache_memory_bytes: int | None, log_dir: Path, name: str, backend: str | None = None
) -> dict:
    """Run this script with ``--child`` in a fresh process (vLLM's log on its stdout, kept in
    ``log_dir/<name>.log``); return its row (None if it did not start), the log's figures, the
    selected backend, the root cause of a failure, the log text and the exit code.

    With ``kv_cache_memory_bytes`` the child runs without ``VLLM_CPU_KVCACHE_SPACE``, which would
    replace that budget on vLLM's CPU backend.
    """
    arguments = ["--model", args.model, *engine_flags(args)]
    arguments += ["--kv-cache-dtype", kv_cache_dtype]
    unset: tuple[str, ...] = ()
    if kv_cache_memory_bytes is not None:
        arguments += ["--kv-cache-memory-bytes", str(kv_cache_memory_bytes)]
        unset = ("VLLM_CPU_KVCACHE_SPACE",)
    if backend:
        arguments += ["--attention-backend", backend]
    log = log_dir / f"{name}.log"
    run = child_run(__file__, arguments, log, ROW_TAG, CHILD_TIMEOUT_S, unset)
    found = {}
    for key, pattern in LOG_PATTERNS.items():
        values = re.findall(pattern, run["text"])
        found[key] = float(values[-1].replace(",", "")) if values else None
    backends = re.findall(BACKEND_PATTERN, run["text"])
    return {**run, "log": log, "backend": backends[-1] if backends else None, **found}


def predicted_budget(args, n_params: int, weight_dtype_bytes: int) -> tuple[int | None, str]:
    """The KV budget (B) the lesson predicts for an engine started without ``kv_cache_memory_bytes``.

    vLLM's CPU backend: ``VLLM_CPU_KVCACHE_SPACE`` GiB, exactly. A GPU: device total * utilization -
    weights - the assumed reserve. (None, "unknown") on a CPU without that variable.
    """
    total = device_total_bytes()
    if total is not None:
        estimate = total * GPU_MEMORY_UTILIZATION - n_params * weight_dtype_bytes - args.reserve_gib * 2**30
        return max(0, int(estimate)), (
            f"estimate: device total x {GPU_MEMORY_UTILIZATION} - weights - {args.reserve_gib:g} GiB assumed reserve"
        )
    space = os.environ.get("VLLM_CPU_KVCACHE_SPACE", "")
    if space:
        return int(space) * 2**30, "VLLM_CPU_KVCACHE_SPACE"
    return None, "unknown"


def overask_budget(max_model_len: int, block_size: int, kappa: int) -> int:
    """Bytes for half the blocks of one ``max_model_len`` request, plus the one block vLLM keeps back
    (vllm-cpu 0.32.0 subtracts a null block before its check; with only that, it fails differently)."""
    blocks = -(-max_model_len // block_size)
    return (blocks // 2 + 1) * block_size * kappa


def engine_row(name: str, got: dict, kappa: int, budget: int | None, source: str, predicted: int | None) -> dict:
    """One receipt row of a started (or, with ``got["row"]`` None, an ``n/a``) engine."""
    row = got["row"] or {}
    block = row.get("block_size")
    available = got["available_kv_gib"]
    if available is not None:  # a GPU: check against what vLLM says it had (to 0.01 GiB)
        budget, source = round(available * 2**30), "vLLM's log: Available KV cache memory (0.01 GiB)"
    return {
        "run": name,
        "kv_cache_dtype": row.get("cache_dtype", "fp8" if name == "fp8" else "auto"),
        "attention_backend": got["backend"],
        "budget_source": source,
        "kv_budget_bytes": budget,
        "kv_bytes_per_token": kappa,
        "block_size": block,
        "num_blocks": row.get("num_blocks"),
        "kv_tokens": None if not row else row["num_blocks"] * block,
        "predicted_kv_tokens": predicted,
        "reported_max_concurrency": got["reported_max_concurrency"],
        "outcome": "started" if row else "n/a",
        "reason": got["cause"],
        "estimated_max_model_len": None,
    }


def parent(args, log_dir: Path) -> int:
    """Start each engine in a child process of this script, one by one, collect their rows and write the
    receipt."""
    progress(f"engine 1/3: capacity at the defaults ({args.model}; a first run downloads the weights)")
    got = run_child(args, "auto", None, log_dir, "capacity")
    if got["row"] is None:
        fail(f"the capacity engine did not start: {got['cause'][:400]} (log: {got['log']})")
    facts = got["row"]
    n_params, b, kappa = facts["params"], facts["weight_dtype_bytes"], facts["kv_bytes_per_token"]
    engine_start_s = facts["engine_start_s"]
    budget, source = predicted_budget(args, n_params, b)
    bs = facts["block_size"]

    def predicted(kappa_run: int, block: int) -> int | None:
        return None if budget is None else int(budget // (kappa_run * block)) * block

    rows = measured_rows(args, UNITS)
    rows.append(engine_row("capacity", got, kappa, budget, source, predicted(kappa, bs)))
    if not args.no_fp8:
        kappa_fp8 = kappa // b
        backend = got["backend"]
        progress(f"engine 2/3: fp8 cache on the capacity run's backend ({backend or 'vLLM default'})")
        fp8 = run_child(args, "fp8", None, log_dir, "fp8", backend)
        if fp8["row"] is None and backend:
            progress(f"fp8 on {backend} did not start ({fp8['cause'][:200]}); trying vLLM's own choice of backend")
            first = fp8["cause"]
            fp8 = run_child(args, "fp8", None, log_dir, "fp8-auto")
            if fp8["row"] is None:
                fp8["cause"] = f"on {backend}: {first}; on vLLM's choice: {fp8['cause']}"
        if fp8["row"] is None:
            progress(f"fp8: n/a ({fp8['cause'][:300]})")
        rows.append(
            engine_row(
                "fp8",
                fp8,
                kappa_fp8,
                budget,
                source,
                predicted(kappa_fp8, fp8["row"]["block_size"] if fp8["row"] else bs),
            )
        )

    # the over-ask: a cache for about half of one max_model_len request
    progress("engine 3/3: over-ask, a cache for half of one max_model_len request (must be refused)")
    over_budget = overask_budget(args.max_model_len, bs, kappa)
    got = run_child(args, "auto", over_budget, log_dir, "over-ask")
    reason = None
    if got["code"] == 0:
        outcome = "started"
    elif OVERASK_REASON in got["text"]:
        outcome = "expected error"
    else:
        outcome, reason = "other error", got["cause"]
        print(f"over-ask failed for ANOTHER reason (log: {got['log']}): {reason[:300]}")
    estimated = got["estimated_max_model_len"]
    rows.append(
        {
            "run": "over-ask",
            "kv_cache_dtype": "auto",
            "attention_backend": got["backend"],
            "budget_source": "kv_cache_memory_bytes",
            "kv_budget_bytes": over_budget,
            "kv_bytes_per_token": kappa,
            "block_size": bs,
            "num_blocks": None,
            "kv_tokens": None,
            "predicted_kv_tokens": (int(over_budget // (kappa * bs)) - 1) * bs,  # less the null block
            "reported_max_concurrency": None,
            "outcome": outcome,
            "reason": reason,
            "estimated_max_model_len": None if estimated is None else int(estimated),
        }
    )

    print(
        f"{args.model} ({args.load_format} weights), N = {n_params:,}, kappa = {kappa:,} B/token, "
        f"max_model_len {args.max_model_len:,}, engine start {engine_start_s:.1f} s; predicted budget: {source}"
    )
    print(
        f"{'run':<9} {'dtype':<10} {'backend':<12} {'budget (B)':>15} {'KV tokens':>11} {'predicted':>11} "
        f"{'concurrency':>11}  outcome"
    )
    for r in rows:
        show = [r["kv_budget_bytes"], r["kv_tokens"], r["predicted_kv_tokens"]]
        show = [f"{v:,}" if v is not None else "-" for v in show]
        conc = f"{r['reported_max_concurrency']:.2f}x" if r["reported_max_concurrency"] is not None else "-"
        extra = (
            f" (vLLM estimates max_model_len {r['estimated_max_model_len']:,})" if r["estimated_max_model_len"] else ""
        )
        extra += f": {r['reason'][:200]}" if r["reason"] else ""
        print(
            f"{r['run']:<9} {r['kv_cache_dtype']:<10} {r['attention_backend'] or '-':<12} {show[0]:>15} "
            f"{show[1]:>11} {show[2]:>11} {conc:>11}  {r['outcome']}{extra}"
        )
    settings = {
        "gpu_memory_utilization": GPU_MEMORY_UTILIZATION,
        "reserve_gib_assumed": args.reserve_gib,
        "device_total_bytes": device_total_bytes(),
        "predicted_budget_bytes": budget,
        "predicted_budget_source": source,
        "params": n_params,
        "weight_dtype_bytes": b,
        "fp8_run": not args.no_fp8,
        "enable_prefix_caching": False,
        "over_ask_reason": OVERASK_REASON,
    }
    write_receipt(args, UNITS, rows, engine_start_s, settings)
    return 0


def main(argv=None) -> int:
    return run_lab(argv, parse_args, check_input, child, parent, logs="<run>.log")


if __name__ == "__main__":  # vLLM 0.26.0 forks its engine process by default, but may spawn (CPU build, CUDA
    # already initialised); a spawned child re-imports this file, so the guard is required
    raise SystemExit(main())
