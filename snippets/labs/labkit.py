"""What every lab script shares: argument checks, a preflight, progress lines, vLLM's log in a file,
a one-line failure that names vLLM's root cause, the receipt (machine, versions, commit) and vLLM's
per-request times and metrics; for a lab that serves, ``vllm serve`` on loopback (:func:`serve`,
:func:`vllm_cli`) and its ``/metrics`` (:func:`served_metrics`).

A lab runs as ``python snippets/labs/<lab>.py``; Python puts the script's folder on ``sys.path``,
so the lab does ``from labkit import ...``. Copy this file next to a lab to run it elsewhere.

Standard library only at import time: vLLM is never imported here, and torch only inside
:func:`machine` when ``nvidia-smi`` is missing. The vLLM API check (``scripts/check_vllm_api.py``)
analyses this file like a lab: the vLLM objects read here are ``RequestOutput.metrics`` fields
(:func:`request_times`) and ``LLM.get_metrics()`` entries (:func:`metric_totals`, :func:`cache_config`);
every string it hands vLLM or reads from it is a module-level constant (metric names, environment
variables, log patterns) so that a checker can compare them with the pinned releases.

The repository's ``src/`` is read only where the registry is wanted (:func:`registry_bandwidth_gb_s`,
:func:`check_receipt_folder`); a copy of the lab outside the repository skips those.

The receipt's envelope (every key but ``settings``, ``units`` and ``results``) is the same for
every lab; ``infercourse.labs`` validates it, and each lab's spec there validates its rows.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import platform
import random
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

SCHEMA = 1
"""Receipt schema version (``infercourse.labs`` reads this one)."""

LOG_CONFIG_ENV = "VLLM_LOGGING_CONFIG_PATH"
"""vLLM's variable naming a JSON ``logging.config.dictConfig`` file; :func:`prepare` points it at one
that sends vLLM's log to a file (engine-core processes inherit it)."""
CPU_KV_ENV = "VLLM_CPU_KVCACHE_SPACE"
"""vLLM's CPU build: GiB of KV cache. Unset, it takes a share of the machine's RAM, which a shared or
small machine may not have; :func:`prepare` sets :data:`CPU_KV_DEFAULT_GIB` when it is unset."""
CPU_KV_DEFAULT_GIB = "1"
"""GiB of KV cache on vLLM's CPU build unless the user set ``VLLM_CPU_KVCACHE_SPACE``: the labs' largest
CPU need is 8,192 tokens of Qwen2.5-7B's 57,344 B (0.44 GiB); the tiny test model needs far less."""
VLLM_DTYPES = ("auto", "bfloat16", "float", "float16", "float32", "half")
"""The ``dtype`` values vLLM 0.26.0 accepts (its ``ModelDType`` literal, recorded in
scripts/vllm_api/vllm-0.26.0.json, ``literal_args``; a test holds them equal): a lab's ``--dtype`` choices,
so a typo is refused before the engine starts, not by vLLM after it."""
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
ROOT_CAUSE = re.compile(r"\b([A-Z]\w*(?:Error|Exception)): (.+)")
"""A Python exception line in vLLM's log (``ValueError: ...``); the last one is the root cause."""
GENERIC_CAUSES = ("Engine core initialization failed", "See root cause above", "check the stack trace above")
"""Wrapper messages that only point back at the real cause."""

STEP_TOKENS_METRIC = "vllm:iteration_tokens_total"
"""vLLM's histogram of tokens scheduled per engine step: its count is the number of steps, its sum the
tokens they processed (prompt and generated). Exact on any machine: the CPU checks use it."""
CACHE_CONFIG_METRIC = "vllm:cache_config_info"
"""vLLM's gauge whose labels are the engine's cache config (``num_gpu_blocks``, ``block_size``, ``cache_dtype``)."""
PREEMPTIONS_METRIC = "vllm:num_preemptions"
"""vLLM's counter of requests preempted (evicted from the KV cache and recomputed) for lack of blocks."""
FINISHED_METRIC = "vllm:request_success"
"""vLLM's counter of finished requests; a server records it in the same pass as its other per-step metrics."""

COMPLETIONS_PATH = "/v1/completions"
"""The OpenAI-compatible completions endpoint :func:`stream_completion` posts to."""
LOOPBACK = "127.0.0.1"
"""The address a lab's server listens on: this machine only."""
SERVER_START_TIMEOUT_S = 1800
"""How long :func:`serve` waits for ``/health`` (s): a first run downloads the weights (15 GB)."""
SERVER_STOP_TIMEOUT_S = 60
"""How long :func:`serve` lets a server shut down after SIGTERM before it sends SIGKILL (s)."""
CPU_BUILD_DIST = "vllm-cpu"
"""The distribution name of vLLM's CPU build. Its ``vllm`` command fails before it parses anything: it
asks the package metadata of ``vllm`` for its ``--version`` (vllm/entrypoints/cli/main.py), which only
the GPU build has. vLLM itself falls back to ``vllm-cpu`` + ``"+cpu"`` elsewhere
(vllm/platforms/__init__.py: ``vllm_version_matches_substr``); :func:`vllm_cli` does the same."""
_CLI = "from vllm.entrypoints.cli.main import main; main()"
_CLI_CPU = (
    "import importlib.metadata as md; v = md.version; "
    f"md.version = lambda n: v({CPU_BUILD_DIST!r}) + '+cpu' if n == 'vllm' else v(n); " + _CLI
)

_HERE = Path(__file__).resolve().parent
REPOSITORY = _HERE.parents[1] if (_HERE.parent.name, _HERE.name) == ("snippets", "labs") else None
"""The course repository this file sits in (as ``snippets/labs/labkit.py``), or None for a copy elsewhere.
A receipt writes paths inside it relative to it, so that it names no folder of the machine that ran it."""

_state = {"lab": "lab", "log": None}


def fail(message: str, code: int = 2) -> None:
    """Print ``error: <message>`` as one line on stderr and exit with ``code`` (2: bad input; 3: a vLLM surprise)."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(code)


def engine_core_in_process() -> None:
    """Run vLLM's engine core in this process, whatever the user's environment says (call it before vLLM
    is imported). ``LLM.generate`` then adds every request of a call before it drives the first step, so
    a busy machine cannot split one batch's arrival over several steps, and ``LLM.apply_model`` sees the
    model. By default the engine core is a separate process that starts stepping as requests arrive."""
    os.environ[ENGINE_IN_PROCESS_ENV] = "0"


def check_model_arg(model: str) -> None:
    """Refuse, before the slow engine start, a ``--model`` that cannot work: a path that is not a
    folder, or a folder without ``config.json``. A hub id (``Qwen/Qwen2.5-7B-Instruct``: one ``/``, its
    organisation not a folder here) passes. A path counts as local when it starts with ``/``, ``.`` or ``~``,
    has two or more ``/`` (``models/qwen/7b``), or starts with a folder that exists here (``models/qwen``)."""
    folder = Path(model).expanduser()
    parts = model.split("/")
    local = model.startswith(("/", ".", "~")) or len(parts) > 2 or (len(parts) == 2 and Path(parts[0]).is_dir())
    if local and not folder.is_dir():
        fail(f"model folder {model} not found; pass --model with an existing folder or a hub id")
    if folder.is_dir() and not (folder / "config.json").is_file():
        fail(f"model folder {model} has no config.json; pass a folder saved with save_pretrained (or a hub id)")


def check_receipt_arg(receipt: Path | None, force: bool = False) -> None:
    """Refuse, before the slow engine start, a ``--receipt`` that cannot be written: a folder, a path
    under a file, or a place this user may not write; and one that exists, unless ``force`` (``--force``):
    a receipt is a measurement, never replaced by accident. (A run that ends unable to save is a paid run lost.)"""
    if receipt is None:
        return
    path = Path(receipt).expanduser()
    if path.is_dir():
        fail(f"--receipt {receipt} is a folder; pass a file name, e.g. {path / 'receipt.json'}")
    if path.exists() and not force:
        fail(f"--receipt {receipt} exists; pass --force to replace it, or another path to keep both")
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        fail(f"--receipt {receipt}: {parent} is a file, not a folder; pass a path in a folder")
    if not os.access(path if path.exists() else parent, os.W_OK):
        fail(f"--receipt {receipt} is not writable by this user; pass a path you can write")


def whole(text: str) -> int:
    """argparse ``type`` of a count (tokens, requests, repeats, batch sizes, blocks): a whole number >= 1.

    Raises:
        argparse.ArgumentTypeError: anything else (argparse names the flag; :func:`lab_parser` prints one line).
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {value}")
    return value


def whole_list(text: str) -> tuple[int, ...]:
    """argparse ``type`` of a list of counts (batch sizes): comma-separated whole numbers >= 1, increasing.

    Raises:
        argparse.ArgumentTypeError: anything else (``1,,4``, ``0,4``, ``8,4``, ``4,4``, text).
    """
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not comma-separated whole numbers (like 1,16,64)") from None
    if min(values) < 1 or list(values) != sorted(set(values)):
        raise argparse.ArgumentTypeError(f"must be increasing whole numbers >= 1, got {text}")
    return values


def positive(text: str) -> float:
    """argparse ``type`` of a rate, a size or a bandwidth: a finite number > 0.

    Raises:
        argparse.ArgumentTypeError: anything else (``0``, ``-5``, ``nan``, ``inf``, text).
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def port(text: str) -> int:
    """argparse ``type`` of a TCP port: 0 (the system picks a free one) to 65535.

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port from 0 (a free one) to 65535, got {value}")
    return value


class _LabParser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse prints the usage and exits 2; a lab's every refusal is one line
        fail(f"{message} (see --help)")


def lab_parser(lab: str, description: str, max_model_len: int) -> argparse.ArgumentParser:
    """An argument parser for the lab ``lab`` (the script's name, e.g. ``"phases"``; the parsed
    arguments carry it as ``args.lab``, which :func:`prepare` and :func:`write_receipt` read) with the
    flags every lab takes; a lab adds its own to it.

    ``--model`` (hub id or local folder; default the course's model), ``--load-format`` (``dummy``
    = random weights of the real architecture), ``--max-model-len`` (tokens, default
    ``max_model_len``), ``--receipt`` (where to write the JSON receipt), ``--enforce-eager`` (vLLM's
    ``enforce_eager``: no torch.compile and no CUDA graphs; a lab passes it to every engine it starts, and
    its receipt's ``settings`` record it) and ``-v`` (vLLM's log on the terminal instead of a file).
    A bad argument (a count of 0 with :func:`whole`, an unknown flag) is one ``error:`` line and exit 2,
    before anything slow starts.
    """
    _state["lab"] = lab  # progress() lines name it
    p = _LabParser(description=description)
    p.set_defaults(lab=lab)
    p.add_argument("--model", default="Qwen/Qwen2.5-7B-Instruct", help="hub id or local folder")
    p.add_argument("--load-format", default="auto", help="'dummy' = random weights (no download)")
    p.add_argument("--max-model-len", type=whole, default=max_model_len, help="context length the engine reserves")
    p.add_argument("--receipt", type=Path, help="write the measurements as JSON to this file")
    p.add_argument("--force", action="store_true", help="replace an existing --receipt")
    p.add_argument(
        "--enforce-eager",
        action="store_true",
        help="no compilation or CUDA graphs: a faster start, slower steps (the CPU runs; counts and tokens unchanged)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="show vLLM's own log here (default: a file)")
    return p


def engine_flags(args) -> list[str]:
    """The engine flags of ``lab_parser`` that a lab hands on to a child engine process or to ``vllm serve``
    (both spell them as vLLM does): ``--load-format``, ``--max-model-len`` and, when set, ``--enforce-eager``."""
    flags = ["--load-format", args.load_format, "--max-model-len", str(args.max_model_len)]
    return flags + (["--enforce-eager"] if args.enforce_eager else [])


def progress(message: str) -> None:
    """Print one progress line, ``[<lab>] <message>``, at once (``scripts/run_labs.py`` streams it)."""
    print(f"[{_state['lab']}] {message}", flush=True)


def _nvidia_smi(query: str) -> list[str] | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        return [part.strip() for part in out.splitlines()[0].split(",")]
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


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
    gpu = _nvidia_smi("name,driver_version,memory.total,memory.free")
    if gpu is None:
        facts["device"] = "cpu"
        if facts["vllm"] is None:
            return facts, (
                f"{NOT_INSTALLED}, and nvidia-smi finds no NVIDIA GPU: on this machine run the labs on vLLM's CPU "
                "build (make labs-cpu, from the repository); on a GPU box: pip install -r requirements-labs-gpu.lock"
            )
        return facts, None
    name, driver, total, free = gpu
    header = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30).stdout
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", header)  # not vLLM: nvidia-smi
    facts.update(
        device="gpu",
        gpu=name,
        driver=driver,
        driver_cuda=cuda.group(1) if cuda else None,
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


def prepare(args) -> None:
    """Everything a lab does after parsing its arguments and before importing vLLM.

    Refuses a bad ``--receipt``; prints the preflight line and stops on its problem (exit 2); on
    vLLM's CPU build sets ``VLLM_CPU_KVCACHE_SPACE`` to :data:`CPU_KV_DEFAULT_GIB` when unset; sends
    vLLM's log to ``<tmp>/infercourse-labs/<lab>-<pid>.log`` unless ``-v`` (through
    :data:`LOG_CONFIG_ENV`, so engine-core processes write there too).
    """
    lab = _state["lab"] = args.lab
    check_receipt_arg(getattr(args, "receipt", None), getattr(args, "force", False))
    check_receipt_folder(getattr(args, "receipt", None), machine())
    facts, problem = preflight()
    progress(f"preflight: {preflight_line(facts)}")
    if problem:
        fail(problem)
    if facts["device"] == "cpu" and not os.environ.get(CPU_KV_ENV):
        os.environ[CPU_KV_ENV] = CPU_KV_DEFAULT_GIB
        progress(f"vLLM's CPU build: {CPU_KV_ENV}={CPU_KV_DEFAULT_GIB} GiB of KV cache (set it to change)")
    if not getattr(args, "verbose", False):
        folder = Path(tempfile.gettempdir()) / "infercourse-labs"
        folder.mkdir(exist_ok=True)
        log = folder / f"{lab}-{os.getpid()}.log"
        config = folder / f"{lab}-{os.getpid()}.logging.json"
        config.write_text(
            json.dumps(
                {
                    "version": 1,
                    "disable_existing_loggers": False,
                    "formatters": {"plain": {"format": "%(levelname)s %(asctime)s %(name)s: %(message)s"}},
                    "handlers": {"file": {"class": "logging.FileHandler", "filename": str(log), "formatter": "plain"}},
                    "loggers": {"vllm": {"handlers": ["file"], "level": "INFO", "propagate": False}},
                }
            )
        )
        os.environ[LOG_CONFIG_ENV] = str(config)
        _state["log"] = log
        progress(f"vLLM's log: {log} (-v shows it here)")


def check_grid(args, grid) -> None:
    """Refuse, before the slow engine start, a model folder that cannot work or a (prompt, output)
    grid that does not fit in ``--max-model-len`` (``--repeats`` >= 1: argparse, :func:`whole`)."""
    check_model_arg(args.model)
    need = max(prompt + output for prompt, output in grid)
    if need > args.max_model_len:
        fail(
            f"the grid needs {need} tokens (prompt + output) but --max-model-len is {args.max_model_len}; "
            f"pass --max-model-len {need} or more"
        )


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


def root_cause(text: str) -> str | None:
    """The last exception line (``SomeError: why``) in ``text`` that is not a wrapper pointing elsewhere."""
    causes = [
        f"{m.group(1)}: {m.group(2).strip()}"
        for m in ROOT_CAUSE.finditer(text)
        if not any(g in m.group(2) for g in GENERIC_CAUSES)
    ]
    return causes[-1] if causes else None


def child_run(
    script: str, arguments: list[str], log: Path, row_tag: str, timeout_s: int, unset: tuple[str, ...] = ()
) -> dict:
    """Run ``script --child --verbose ARGUMENTS`` in a fresh Python process: one engine per process, so
    nothing of one engine's memory lingers into the next. vLLM's log goes to the child's stdout (the
    log-config variable is dropped for it) and is kept in ``log``; ``unset`` names further environment
    variables the child runs without.

    Returns ``{"row", "text", "code", "cause"}``: the JSON after the child's last ``row_tag`` line (None
    if it did not start), its whole output, its exit code (None after ``timeout_s`` seconds) and, when
    it failed, the cause: its own ``error:`` line, else vLLM's root cause, else the exit code.
    """
    command = [sys.executable, os.path.abspath(script), "--child", "--verbose", *arguments]
    env = {k: v for k, v in os.environ.items() if k not in (LOG_CONFIG_ENV, *unset)}
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout_s)
        text, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        text, code = f"{exc.stdout or ''}{exc.stderr or ''}\ntimed out after {timeout_s} s", None
    log.write_text(text)
    rows = [json.loads(line[len(row_tag) :]) for line in text.splitlines() if line.startswith(row_tag)]
    failed = not (code == 0 and rows)
    own = [line.removeprefix("error: ") for line in text.splitlines() if line.startswith("error: ")]
    cause = ((own[-1] if own else None) or root_cause(text) or f"exit {code}, no error line") if failed else None
    return {"row": None if failed else rows[-1], "text": text, "code": code, "cause": cause}


def stream_completion(
    url: str, payload: dict, on_event=None, timeout_s: float = 600
) -> list[tuple[float, int, str | None]]:
    """POST ``payload`` (an OpenAI completions request: model, prompt, max_tokens, ...) to the server at
    ``url`` with ``stream`` and vLLM's ``return_token_ids`` on, and read its server-sent events as they come.

    Returns one ``(time, tokens, finish_reason)`` per event that carried tokens or a finish reason:
    ``time.perf_counter()`` at its arrival (s), how many token ids it carried (vLLM merges the tokens of
    several steps into one event when the reader falls behind), and the finish reason (None until the
    last). ``on_event``, if given, is called with each event as it arrives (from this thread), so that
    another thread can watch a stream in flight. ``timeout_s`` bounds each wait for data, not the stream.

    Exits (code 3) with one line when the server refuses the request or the connection breaks.
    """
    body = json.dumps({**payload, "stream": True, "return_token_ids": True}).encode()
    request = urllib.request.Request(url + COMPLETIONS_PATH, body, {"Content-Type": "application/json"})
    events = []
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            for line in response:
                if not line.startswith(b"data: {"):
                    continue  # blank separators and the closing "data: [DONE]"
                now = time.perf_counter()
                choice = json.loads(line[len(b"data: ") :])["choices"][0]
                if choice.get("token_ids") or choice.get("finish_reason"):
                    events.append((now, len(choice.get("token_ids") or []), choice.get("finish_reason")))
                    if on_event is not None:
                        on_event(events[-1])
    except urllib.error.HTTPError as exc:
        fail(f"the server at {url} refused a completion ({exc.code}): {exc.read().decode(errors='replace')[:300]}", 3)
    except (OSError, urllib.error.URLError) as exc:
        fail(f"the stream from {url} broke: {exc}", 3)
    return events


def served_metric_totals(url: str, name: str) -> tuple[float, float]:
    """:func:`metric_totals` of a server: ``(sum, count)`` of the histogram ``name`` on its ``/metrics`` page
    (samples ``<name>_sum`` and ``<name>_count``), or ``(value, 0)`` of the counter ``name`` (sample
    ``<name>_total``), summed over label sets (engines) by :func:`served_metrics`; exits (code 3) when it
    is missing."""
    samples = served_metrics(url)
    if f"{name}_sum" in samples:
        return samples[f"{name}_sum"], samples[f"{name}_count"]
    if f"{name}_total" in samples:
        return samples[f"{name}_total"], 0
    fail(f"the server at {url} reports no {name!r} metric", 3)


def engine_failure(exc: Exception, model: str, log_text: str = "") -> None:
    """Exit (code 3) with one line for an engine that would not start: vLLM's root cause first (from its
    log, where the engine-core process wrote it, else from the exception), then where the full log is."""
    log = _state["log"]
    if log is not None and not log_text:
        with contextlib.suppress(OSError):
            log_text = Path(log).read_text(errors="replace")
    message = " | ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    cause = root_cause(log_text) or root_cause(f"{type(exc).__name__}: {message}") or f"{type(exc).__name__}: {message}"
    where = f"; vLLM's log: {log}" if log is not None else ""
    fail(f"vLLM could not start an engine for {model!r}: {cause[:400]}{where}")


def start_llm(args, **engine_args):
    """Start vLLM's offline engine (``LLM``) for ``args.model``; return ``(llm, engine_start_s)``, the
    second in seconds from the call to ``LLM(...)`` to its return (weights loaded, KV cache allocated).

    ``args`` is :func:`lab_parser`'s namespace: ``model``, ``load_format``, ``max_model_len`` and
    ``enforce_eager`` come from it. ``engine_args`` are the lab's other ``LLM(...)`` keywords; a lab may
    give ``load_format`` or ``enforce_eager`` itself to override its flag. ``scripts/check_vllm_api.py``
    checks the keywords of every call of this function against the pinned releases, as it checks ``LLM``'s.

    Exits (code 2) when vLLM is not importable, and (code 3) with vLLM's root cause when the engine does
    not start (:func:`engine_failure`).
    """
    try:
        from vllm import LLM
    except ImportError as exc:
        fail(f"vLLM is not importable ({exc}); install it: pip install -r requirements-labs-gpu.lock")
    progress(f"starting the engine for {args.model} (a first run downloads the weights)")
    started = time.perf_counter()
    try:
        llm = LLM(
            model=args.model,
            load_format=engine_args.pop("load_format", args.load_format),
            max_model_len=args.max_model_len,
            enforce_eager=engine_args.pop("enforce_eager", args.enforce_eager),
            **engine_args,
        )
    except Exception as exc:  # vLLM raises many kinds; one line names the root cause
        engine_failure(exc, args.model)
    engine_start_s = time.perf_counter() - started
    progress(f"engine ready after {engine_start_s:.0f} s")
    return llm, engine_start_s


def random_prompt(rng, length: int, vocab_size: int, special: set[int]) -> dict:
    """A prompt of exactly ``length`` token ids drawn with ``rng`` (a ``random.Random``) from the
    vocabulary minus ``special`` ids (no early end of sequence, no chat template)."""
    ids = []
    while len(ids) < length:
        token = rng.randrange(vocab_size)
        if token not in special:
            ids.append(token)
    return {"prompt_token_ids": ids}


# --8<-- [start:request_times]
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
    return {
        "ttft_ms": m.first_token_latency * 1e3,
        "tpot_ms": decode_s / (n - 1) * 1e3,
        "decode_s": decode_s,
        "generated_tokens": n,
    }


# --8<-- [end:request_times]


def decode_step_s(outputs, output_len: int) -> float:
    """Seconds per engine step while every request of one batch decodes, from the engine's own clock.

    ``outputs``: the ``RequestOutput`` list of one ``llm.generate`` of B requests, each asked for
    exactly ``output_len`` tokens (``ignore_eos=True``). Requests reach the engine core one by one, so
    their prefills may end in a few consecutive steps: d = distinct first-token times - 1. Request i
    decodes from its first-token step k_i to k_i + n - 1, so the window from the last first token to
    the first last token holds n - 1 - d steps, all of them pure decode, and the step time is
    (min last_token_ts - max first_token_ts) / (n - 1 - d).

    Exits (code 3) when a request made another number of tokens, the engine kept no metrics, or
    fewer than half of the n - 1 steps are all-decoding (raise ``max_num_batched_tokens`` /
    ``max_num_seqs`` or the output length).
    """
    firsts, lasts = [], []
    for out in outputs:
        made = request_times(out)["generated_tokens"]
        if made != output_len:
            fail(f"asked for {output_len} tokens, the engine made {made}", 3)
        firsts.append(out.metrics.first_token_ts), lasts.append(out.metrics.last_token_ts)
    d = len(set(firsts)) - 1
    steps = output_len - 1 - d
    window_s = min(lasts) - max(firsts)
    if steps < (output_len - 1) / 2 or window_s <= 0:
        fail(
            f"batch {len(outputs)}: prefills spread over {d + 1} steps, leaving {steps} all-decoding steps of "
            f"{output_len - 1}; raise max_num_batched_tokens / max_num_seqs or the output length",
            3,
        )
    return window_s / steps


def decode_step_sweep(llm, params, batches, prompt_len: int, output_len: int, seed: int) -> list[float]:
    """Decode step time (ms) at each batch size of ``batches``: per batch an untimed warm-up ``generate``,
    then a measured one of fresh random ``prompt_len``-token prompts, timed by :func:`decode_step_s`.

    ``params``: the lab's ``SamplingParams`` asking exactly ``output_len`` tokens (``ignore_eos=True``);
    the engine needs ``max_num_seqs`` >= the largest batch. Exits (code 3) as :func:`decode_step_s` does.
    """
    tokenizer = llm.get_tokenizer()
    vocab, special, rng = len(tokenizer), set(tokenizer.all_special_ids), random.Random(seed)
    step_ms = []
    for batch in batches:
        for _ in range(2):  # an untimed warm-up batch, then the measured one
            prompts = [random_prompt(rng, prompt_len, vocab, special) for _ in range(batch)]
            outputs = llm.generate(prompts, params, use_tqdm=False)
        step_ms.append(decode_step_s(outputs, output_len) * 1e3)
    return step_ms


def cache_config(llm) -> dict:
    """The labels of :data:`CACHE_CONFIG_METRIC`: the engine's cache config, every value a string
    (blocks x block size = the tokens of KV cache it allocated); exits (code 3) when missing."""
    for metric in llm.get_metrics():
        if metric.name == CACHE_CONFIG_METRIC:
            return metric.labels
    fail(f"vLLM reports no {CACHE_CONFIG_METRIC} metric; start the engine with disable_log_stats=False", 3)


def metric_totals(llm, name: str) -> tuple[float, float]:
    """``(sum, count)`` of the histogram ``name`` in ``llm.get_metrics()`` (a counter: ``(value, 0)``),
    over all engines; exits (code 3) when this vLLM has no such metric (start with disable_log_stats=False)."""
    found = [metric for metric in llm.get_metrics() if metric.name == name]
    if not found:
        fail(f"this vLLM reports no {name!r} metric; start the engine with disable_log_stats=False", 3)
    if hasattr(found[0], "count"):
        return sum(metric.sum for metric in found), sum(metric.count for metric in found)
    return sum(metric.value for metric in found), 0


def vllm_cli(*words: str) -> list[str]:
    """The command line of ``vllm WORDS...`` (``vllm serve ...``, ``vllm bench serve ...``) run by this
    Python, so the server and the benchmark use the lab's own environment. On vLLM's CPU build the same
    ``main()`` runs with its one failing version lookup answered (:data:`CPU_BUILD_DIST`)."""
    try:
        metadata.version("vllm")
        code = _CLI
    except metadata.PackageNotFoundError:
        code = _CLI_CPU
    return [sys.executable, "-c", code, *words]


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port nobody listens on at ``host`` now (the system picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_free(port: int, host: str = LOOPBACK) -> bool:
    """Whether a server could listen on ``host:port`` now (with ``SO_REUSEADDR``, as servers such as
    uvicorn bind: a closed connection's TIME_WAIT does not count, a listening socket does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _server_child() -> None:
    """In the server's process before ``exec``: its own process group (so it and every process it starts
    can be stopped together; ``Popen(process_group=...)`` needs Python 3.11) and SIGTERM when the lab
    dies, even by SIGKILL (Linux ``prctl``)."""
    os.setpgid(0, 0)
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1


def _group_alive(pgid: int) -> bool:
    """Whether any process of the process group ``pgid`` is left (signal 0 tests, sends nothing)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to ``proc``'s process group (the server and every process it started), then return once
    every process of it has exited (an engine core frees its GPU memory only then, and the next server of
    a lab needs it); SIGKILL to what is left after :data:`SERVER_STOP_TIMEOUT_S` s."""
    deadline = time.monotonic() + SERVER_STOP_TIMEOUT_S
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=SERVER_STOP_TIMEOUT_S)
    while _group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    while _group_alive(proc.pid) and time.monotonic() < deadline + 30:
        time.sleep(0.2)


@contextlib.contextmanager
def serve(
    command: list[str],
    port: int,
    log: Path,
    host: str = LOOPBACK,
    timeout_s: float = SERVER_START_TIMEOUT_S,
    unset: tuple[str, ...] = (),
):
    """Start a server (``command``, which must listen on ``host:port``), wait until ``GET /health``
    answers 200, and yield ``(base_url, start_s)``: ``"http://host:port"`` and the seconds it took.

    The server runs in its own process group with its output (stdout and stderr) in ``log``; ``unset``
    names environment variables it runs without. Leaving the block, normally, on an exception or on
    Ctrl-C, stops the whole group: SIGTERM, then SIGKILL after :data:`SERVER_STOP_TIMEOUT_S` s. If the
    lab itself is stopped or killed (SIGTERM, SIGKILL), Linux sends the server SIGTERM
    (``PR_SET_PDEATHSIG``), and vLLM's server stops its engine processes itself.

    Exits (code 3, one line with the root cause from ``log``) when the server ends before it is
    healthy or is not healthy after ``timeout_s`` seconds; exits (code 2) when the port is taken.
    """
    if not port_free(port, host):
        fail(f"port {port} on {host} is in use; pass another --port (0 picks a free one)")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    url = f"http://{host}:{port}"
    started = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, preexec_fn=_server_child)
    try:
        while True:
            code = proc.poll()
            if code is not None:
                cause = root_cause(Path(log).read_text(errors="replace")) or "no error line"
                fail(f"the server stopped (exit {code}) before it was ready: {cause[:400]} (log: {log})", 3)
            if time.perf_counter() - started > timeout_s:
                fail(f"the server was not ready after {timeout_s:.0f} s (log: {log})", 3)
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/health", timeout=5) as answer:
                if answer.status == 200:
                    break
            time.sleep(1)
        yield url, time.perf_counter() - started
    finally:
        _stop(proc)


def served_metrics(url: str) -> dict[str, float]:
    """Every sample of the server's ``GET <url>/metrics`` (Prometheus' text format), summed over its label
    sets: ``{"vllm:prompt_tokens_total": 516.0, "vllm:iteration_tokens_total_count": 256.0, ...}``.
    A counter's sample name ends in ``_total``, a histogram's in ``_sum`` / ``_count`` / ``_bucket``.

    Exits (code 3) when the server does not answer."""
    try:
        with urllib.request.urlopen(f"{url}/metrics", timeout=30) as answer:
            text = answer.read().decode()
    except (OSError, urllib.error.URLError) as exc:
        fail(f"the server at {url} did not answer /metrics: {exc}", 3)
    totals: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.split("{", 1)[0].split(" ", 1)[0], line.rsplit(" ", 1)[-1]
            totals[name] = totals.get(name, 0.0) + float(value)
    return totals


def _course():
    """``infercourse.labs.core`` of the repository this file is in (standard library only: it runs in
    the lab environment), or None for a copy of the lab outside the repository."""
    src = REPOSITORY / "src" if REPOSITORY else None
    if src is None or not (src / "infercourse" / "labs" / "core.py").is_file():
        return None
    if str(src) not in sys.path:
        sys.path.append(str(src))
    try:
        from infercourse.labs import core
    except ImportError:
        return None
    return core


def registry_bandwidth_gb_s(gpu_name: str) -> float | None:
    """The datasheet bandwidth (GB/s) of the GPU ``gpu_name`` (as nvidia-smi names it) from the course's
    registry, or None: a GPU the registry does not have, or a copy of the lab outside the repository."""
    core = _course()
    facts = None if core is None else core.gpu_for_name(gpu_name)
    return None if facts is None else float(facts.bandwidth_gb_s)


def check_receipt_folder(receipt: Path | None, this_machine: dict) -> None:
    """Refuse ``receipts/<slug>/<lab>.json`` when ``<slug>`` names another machine than this one (the
    committed receipts are filed by machine; ``infercourse.labs.core.machine_slug`` names the folder)."""
    core = _course()
    if receipt is None or core is None or Path(receipt).parent.parent.name != "receipts":
        return
    slug = core.machine_slug(this_machine)
    if Path(receipt).parent.name != slug:
        fail(
            f"--receipt {receipt} is in another machine's folder; this machine's is "
            f"{Path(receipt).parent.parent / slug}/"
        )


def machine() -> dict:
    """The GPU (``kind`` "gpu": name, memory_gib, driver, cuda_driver_api) via nvidia-smi, else via
    torch (driver and CUDA driver API then None), else the CPU (``kind`` "cpu": model name, cores)."""
    try:
        line = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.splitlines()[0]
        name, memory_mib, driver = (part.strip() for part in line.split(","))
        header = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30).stdout
        cuda = re.search(r"CUDA Version:\s*([\d.]+)", header)  # not vLLM: nvidia-smi's header
        return {
            "kind": "gpu",
            "name": name,
            "memory_gib": round(int(memory_mib) / 1024, 1),
            "driver": driver,
            "cuda_driver_api": cuda.group(1) if cuda else None,
        }
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        pass
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


def repository_path(text: str) -> str:
    """``text`` with an absolute path inside :data:`REPOSITORY` made relative to it
    (``.cache/models/tiny-qwen2``); anything else unchanged (a hub id, a relative path, a folder elsewhere)."""
    path = Path(text)
    if REPOSITORY is None or not path.is_absolute():
        return text
    for candidate in (path, path.resolve()):  # as written (.cache may be a link to a data disk), then resolved
        try:
            return candidate.relative_to(REPOSITORY).as_posix()
        except ValueError:
            continue
    return text


def portable_path(text: str) -> str:
    """``text`` as a receipt's command writes it: :func:`repository_path`, and an absolute path outside
    the repository as ``.../<last part>`` (a temporary folder's name says nothing)."""
    kept = repository_path(text)
    return f".../{Path(kept).name}" if Path(kept).is_absolute() else kept


def write_receipt(args, units: dict, results: list[dict], engine_start_s: float, settings: dict) -> dict | None:
    """Write the JSON receipt of one run to ``args.receipt`` and print ``receipt: <path>``; return it
    (None, writing nothing, when ``args.receipt`` is None).

    The envelope is every lab's: schema, lab (``args.lab``, :func:`lab_parser`'s), the command (paths as
    :func:`portable_path` writes them), git commit, UTC date, machine, versions, and from ``args`` (the
    parsed command line) model (a folder inside the repository relative to it), load_format, dtype
    (``"auto"`` when the lab has no ``--dtype``: vLLM's default) and max_model_len.

    The lab gives ``units`` (unit of every measured row key; ``engine_start_s`` in s is added),
    ``results`` (one dict per row, the keys of its ``ROW``), ``engine_start_s`` (s from ``LLM(...)``
    called to returned) and ``settings``: what it fixed (e.g. repeats). Added unless the lab sets them:
    ``enforce_eager`` from ``args``, and from the environment ``VLLM_ENABLE_V1_MULTIPROCESSING`` (``"0"``:
    the engine core ran in the lab's process), ``OMP_NUM_THREADS`` and ``VLLM_CPU_KVCACHE_SPACE`` (None
    when unset).
    """
    if args.receipt is None:
        return None
    receipt = {
        "schema": SCHEMA,
        "lab": args.lab,
        "command": shlex.join(["python", *(portable_path(word) for word in sys.argv)]),
        "git_commit": git_commit(),
        "date_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine(),
        "versions": versions(),
        "model": repository_path(args.model),
        "load_format": args.load_format,
        "dtype": getattr(args, "dtype", "auto"),
        "max_model_len": args.max_model_len,
        "settings": {
            "enforce_eager": args.enforce_eager,
            ENGINE_IN_PROCESS_ENV: os.environ.get(ENGINE_IN_PROCESS_ENV, "1"),
            THREADS_ENV: os.environ.get(THREADS_ENV),
            CPU_KV_ENV: os.environ.get(CPU_KV_ENV),
            **settings,
        },
        "engine_start_s": round(engine_start_s, 3),
        "units": {**units, "engine_start_s": "s"},
        "results": results,
    }
    path = Path(args.receipt)
    text = json.dumps(receipt, indent=2) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as exc:  # checked before the run (check_receipt_arg); keep the measurements anyway
        print(text)
        fail(f"could not write the receipt to {path} ({exc}); it is printed above", 3)
    print(f"receipt: {path}")
    return receipt
