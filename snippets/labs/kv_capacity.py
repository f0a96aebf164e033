"""Lab 1A: how many tokens of KV cache vLLM finds room for, against the lesson's prediction.

Starts one engine, reads the KV capacity it allocated (``cache_config.num_gpu_blocks`` x
``block_size``, which the engine core reports back to the front end at start-up), prints it with
the maximum concurrency at ``--max-model-len``, and compares it with the prediction

    tokens = (device total * gpu_memory_utilization - weights - reserve) / kappa

where kappa = 2 * L * n_kv * d_h * b comes from the model's config. The start-up log lines
"Model loading took ... GiB", "Available KV cache memory: ... GiB" and "GPU KV cache size: N tokens"
are captured and parsed too, so the receipt shows the reserve vLLM really kept.

Then (unless --skip-overask) it shuts its engine down and, in a fresh Python process (so no memory
of the first engine can linger), starts a second engine whose KV budget (``kv_cache_memory_bytes``)
holds only half of ``--max-model-len``. That start must fail with vLLM's own reason, "... KV cache
is needed, which is larger than the available KV cache memory ... the estimated maximum model
length is N"; any other failure (out of memory, a bad flag) is reported as such, not as the
expected one. On vLLM's CPU backend the child runs without ``VLLM_CPU_KVCACHE_SPACE``, which
would otherwise replace the small budget.

Run (GPU, vLLM 0.26.0):  python snippets/labs/kv_capacity.py --receipt kv_capacity.json
No hub access:           python snippets/labs/kv_capacity.py --model PATH --load-format dummy

Standalone: imports only the standard library and vLLM (vLLM, torch inside ``main``).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

LAB = "kv_capacity"
SEED = 0
LOG_PATTERNS = {  # start-up log lines of vLLM's engine core (GiB = 2^30 B)
    "weights_gib": r"Model loading took ([\d.]+) GiB",
    "available_kv_gib": r"Available KV cache memory: ([\d.]+) GiB",
    "log_kv_tokens": r"GPU KV cache size: ([\d,]+) tokens",
    "log_max_concurrency": r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x",
    "estimated_max_model_len": r"estimated maximum model length is ([\d,]+)",
}
OVERASK_REASON = "larger than the available KV cache memory"  # vLLM's message when max_model_len cannot fit once


def fail(message: str, code: int = 2) -> None:
    """Print one line saying what is wrong and exit with ``code``."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(code)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Read vLLM's KV-cache capacity and compare it with the prediction.")
    p.add_argument("--model", default="Qwen/Qwen2.5-7B-Instruct", help="hub id or local folder")
    p.add_argument("--load-format", default="auto", help="'dummy' = random weights (no download)")
    p.add_argument("--max-model-len", type=int, default=8192, help="context per request the engine must hold")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.92, help="vLLM 0.26.0's default is 0.92")
    p.add_argument("--kv-cache-dtype", default="auto", help="'auto' (= model dtype) or 'fp8'")
    p.add_argument("--reserve-gib", type=float, default=2.0,
                   help="assumed non-KV, non-weight memory for the prediction (GiB); the receipt shows the real one")
    p.add_argument("--skip-overask", action="store_true", help="do not start the second (failing) engine")
    p.add_argument("--receipt", type=Path, help="write the measurements as JSON to this file")
    p.add_argument("--overask-child", type=int, metavar="BYTES", help=argparse.SUPPRESS)  # internal: the over-ask engine
    return p.parse_args(argv)


def check_input(args) -> None:
    looks_like_path = args.model.startswith(("/", ".", "~"))
    if looks_like_path and not Path(args.model).expanduser().is_dir():
        fail(f"model folder {args.model} not found; pass --model with an existing folder or a hub id")
    if args.max_model_len < 16:
        fail(f"--max-model-len must be at least 16, got {args.max_model_len}")
    if not 0 < args.gpu_memory_utilization <= 1:
        fail(f"--gpu-memory-utilization must be in (0, 1], got {args.gpu_memory_utilization}")
    if args.kv_cache_dtype not in ("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16"):
        fail(f"--kv-cache-dtype must be auto, bfloat16 or fp8, got {args.kv_cache_dtype!r}")


@contextlib.contextmanager
def captured_output(path: Path):
    """Send this process's and its children's stdout and stderr (file descriptors 1 and 2) to ``path``."""
    sys.stdout.flush(), sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 1), os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush(), sys.stderr.flush()
            os.dup2(saved[0], 1), os.dup2(saved[1], 2)
            os.close(saved[0]), os.close(saved[1])


def parse_log(text: str) -> dict:
    """The last value of each ``LOG_PATTERNS`` line found in the start-up log (None where absent)."""
    found = {}
    for key, pattern in LOG_PATTERNS.items():
        values = re.findall(pattern, text)
        found[key] = float(values[-1].replace(",", "")) if values else None
    return found


def kv_bytes_per_token(hf_config, dtype_bytes: int) -> int:
    """kappa (B/token): 2 * L * n_kv * d_h * b, or L * (kv_lora_rank + qk_rope_head_dim) * b for MLA."""
    cfg = getattr(hf_config, "text_config", hf_config)
    layers = cfg.num_hidden_layers
    if getattr(cfg, "kv_lora_rank", None):
        return layers * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) * dtype_bytes
    d_h = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return 2 * layers * cfg.num_key_value_heads * d_h * dtype_bytes


def param_count(hf_config) -> int:
    """Parameters of the model built on PyTorch's meta device (no memory, no weights; tied ones once)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_config)
    return sum(p.numel() for p in model.parameters())


def device_total_bytes() -> int | None:
    """Device memory as CUDA reports it (nvidia-smi memory.total, MiB -> B), or None without a GPU."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30, check=True).stdout.splitlines()[0]
        return int(out.split(",")[1]) * 2**20
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        return None


def machine() -> dict:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30, check=True).stdout.splitlines()[0]
        name, mib, driver = (s.strip() for s in out.split(","))
        return {"kind": "gpu", "name": name, "memory_total_mib": int(mib), "driver": driver}
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        return {"kind": "cpu", "cores": os.cpu_count()}


def start_engine(LLM, args, log_path: Path, **overrides):
    """Build ``LLM`` with the lab's settings; its start-up output goes to ``log_path``."""
    settings = dict(model=args.model, load_format=args.load_format, max_model_len=args.max_model_len,
                    gpu_memory_utilization=args.gpu_memory_utilization, kv_cache_dtype=args.kv_cache_dtype,
                    seed=SEED, enable_prefix_caching=False)
    settings.update(overrides)
    with captured_output(log_path):
        return LLM(**settings)


def run_overask(args, budget: int) -> dict:
    """Start an engine with a KV budget of ``budget`` bytes in a fresh process; classify how it ends.

    Returns a dict with ``kv_cache_memory_bytes``, ``outcome`` ("expected error", "started" or
    "other error"), ``error`` (the last line of the child's output), ``estimated_max_model_len`` and
    ``line`` (one line for the report).
    """
    command = [sys.executable, os.path.abspath(__file__), "--model", args.model, "--load-format", args.load_format,
               "--max-model-len", str(args.max_model_len), "--kv-cache-dtype", args.kv_cache_dtype,
               "--gpu-memory-utilization", str(args.gpu_memory_utilization), "--overask-child", str(budget)]
    env = {k: v for k, v in os.environ.items() if k != "VLLM_CPU_KVCACHE_SPACE"}  # it would override the budget
    try:
        child = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
        text, code = child.stdout + child.stderr, child.returncode
    except subprocess.TimeoutExpired as exc:
        text, code = f"{exc.stdout or ''}{exc.stderr or ''}\ntimed out after 1800 s", None
    estimated = parse_log(text)["estimated_max_model_len"]
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    reason = next((l for l in lines if OVERASK_REASON in l), lines[-1] if lines else "")
    asked = f"{args.max_model_len:,} tokens in a cache for {args.max_model_len // 2:,}"
    if code == 0:
        outcome, line = "started", f"over-ask ({asked}): the engine started; this backend did not refuse it"
    elif OVERASK_REASON in text:
        outcome = "expected error"
        line = (f"over-ask ({asked}): refused as expected, the KV cache is {OVERASK_REASON}"
                + (f"; vLLM estimates a maximum model length of {int(estimated):,}" if estimated else ""))
    else:
        outcome, line = "other error", f"over-ask ({asked}): failed for ANOTHER reason: {reason[:200]}"
    return {"kv_cache_memory_bytes": budget, "outcome": outcome, "error": reason[:500] if code else None,
            "estimated_max_model_len": estimated, "line": line}


def main(argv=None) -> int:
    args = parse_args(argv)
    check_input(args)
    try:
        from vllm import LLM
    except ImportError as exc:
        fail(f"vLLM is not importable ({exc}); install vllm==0.26.0")
    if args.overask_child is not None:  # the child of run_overask: start, and let any error end the process
        LLM(model=args.model, load_format=args.load_format, max_model_len=args.max_model_len,
            gpu_memory_utilization=args.gpu_memory_utilization, kv_cache_dtype=args.kv_cache_dtype,
            seed=SEED, enable_prefix_caching=False, kv_cache_memory_bytes=args.overask_child)
        return 0

    log_path = Path(tempfile.mkdtemp(prefix="kv_capacity_")) / "engine.log"
    started = time.perf_counter()
    try:
        llm = start_engine(LLM, args, log_path)
    except Exception as exc:  # vLLM raises many kinds; the message says which
        fail(f"vLLM could not start: {type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]} (log: {log_path})")
    engine_start_s = time.perf_counter() - started
    log = parse_log(log_path.read_text(errors="replace"))

    engine = llm.llm_engine
    cache_config = engine.vllm_config.cache_config
    model_config = engine.vllm_config.model_config
    blocks, block_size = cache_config.num_gpu_blocks, cache_config.block_size
    kv_tokens = blocks * block_size if blocks else None
    if kv_tokens is None and log["log_kv_tokens"] is not None:
        kv_tokens = int(log["log_kv_tokens"])
    if kv_tokens is None:
        fail(f"could not read the KV capacity (num_gpu_blocks is unset and the log has no 'GPU KV cache size'); log: {log_path}", 3)

    import torch

    weight_dtype_bytes = torch.empty((), dtype=model_config.dtype).element_size()
    kv_dtype_bytes = 1 if str(cache_config.cache_dtype).startswith("fp8") else weight_dtype_bytes
    kappa = kv_bytes_per_token(model_config.hf_config, kv_dtype_bytes)
    n_params = param_count(model_config.hf_config)
    total = device_total_bytes()
    predicted = None
    if total is not None:
        budget = total * args.gpu_memory_utilization - n_params * weight_dtype_bytes - args.reserve_gib * 2**30
        predicted = max(0, int(budget // (kappa * block_size)) * block_size)
    reserve_gib = None
    if total is not None and log["weights_gib"] is not None and log["available_kv_gib"] is not None:
        reserve_gib = total * args.gpu_memory_utilization / 2**30 - log["weights_gib"] - log["available_kv_gib"]

    print(f"{args.model} ({args.load_format} weights), KV dtype {cache_config.cache_dtype}, engine start {engine_start_s:.1f} s")
    print(f"kappa = {kappa:,} B/token, parameters N = {n_params:,}, block size {block_size}")
    print(f"KV capacity (engine): {kv_tokens:,} tokens = {blocks} blocks x {block_size}; "
          f"{kv_tokens * kappa / 2**30:.2f} GiB of cache")
    print(f"maximum concurrency at {args.max_model_len:,} tokens per request: {kv_tokens / args.max_model_len:.2f}x")
    if predicted is not None:
        print(f"prediction with a {args.reserve_gib} GiB reserve: {predicted:,} tokens "
              f"(engine / prediction = {kv_tokens / predicted:.3f})" if predicted else "prediction: nothing fits")
    if reserve_gib is not None:
        print(f"reserve vLLM kept besides weights and KV (from its log): {reserve_gib:.2f} GiB")

    overask = None
    if not args.skip_overask:
        with contextlib.suppress(Exception):  # free the device before the second engine starts
            engine.engine_core.shutdown()
        del llm, engine
        gc.collect()
        overask = run_overask(args, (args.max_model_len // 2) * kappa)  # holds half of one max-length request
        print(overask["line"])

    if args.receipt:
        receipt = {
            "schema": 1, "lab": LAB, "command": shlex.join(["python", *sys.argv]),
            "date_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "machine": machine(),
            "model": args.model, "load_format": args.load_format, "max_model_len": args.max_model_len,
            "gpu_memory_utilization": args.gpu_memory_utilization, "kv_cache_dtype": str(cache_config.cache_dtype),
            "engine_start_s": round(engine_start_s, 3),
            "units": {"kv_bytes_per_token": "B/token", "device_total_bytes": "B", "*_gib": "GiB (2^30 B)"},
            "results": {"kv_tokens": kv_tokens, "num_gpu_blocks": blocks, "block_size": block_size,
                        "kv_bytes_per_token": kappa, "params": n_params, "device_total_bytes": total,
                        "predicted_kv_tokens": predicted, "reserve_gib_assumed": args.reserve_gib,
                        "reserve_gib_measured": reserve_gib, "max_concurrency": kv_tokens / args.max_model_len,
                        **log, "overask": overask},
        }
        args.receipt.parent.mkdir(parents=True, exist_ok=True)
        args.receipt.write_text(json.dumps(receipt, indent=2) + "\n")
        print(f"receipt: {args.receipt}")
    return 0


if __name__ == "__main__":  # vLLM starts its engine in a subprocess (spawn): the guard is required
    raise SystemExit(main())
