"""Arguments and messages: the parser every lab starts from (:func:`lab_parser`), the argparse
types that refuse a bad count, rate or port before anything slow starts, the input checks a lab runs
before its engine starts, and the two ways a lab talks: a progress line and a one-line failure.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

DTYPES = ("auto", "bfloat16", "float", "float16", "float32", "half")
"""The ``dtype`` values vLLM 0.26.0 accepts (its ``ModelDType`` literal, recorded in
scripts/vllm_api/vllm-0.26.0.json, ``literal_args``; a test holds them equal): a lab's ``--dtype`` choices,
so a typo is refused before the engine starts, not by vLLM after it."""
LOAD_FORMATS = (
    "auto",
    "bitsandbytes",
    "dummy",
    "fastsafetensors",
    "hf",
    "instanttensor",
    "mistral",
    "modelexpress",
    "npcache",
    "pt",
    "runai_streamer",
    "runai_streamer_sharded",
    "safetensors",
    "sharded_state",
    "tensorizer",
)
"""vLLM 0.26.0's built-in weight loaders (its ``LoadFormats`` literal, recorded in scripts/vllm_api/vllm-0.26.0.json,
``load_formats``; a test holds them equal): a lab's ``--load-format`` choices, so ``--load-format dumy`` is refused
at once, not by vLLM after the engine has started (20 to 70 s). ``dummy``: random weights, no download."""
_state = {"lab": "lab", "log": None}


def fail(message: str, code: int = 2) -> None:
    """Print ``error: <message>`` as one line on stderr and exit with ``code`` (2: bad input; 3: a vLLM surprise)."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(code)


def progress(message: str) -> None:
    """Print one progress line, ``[<lab>] <message>``, at once (``scripts/run_labs.py`` streams it)."""
    print(f"[{_state['lab']}] {message}", flush=True)


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
    p.add_argument("--load-format", default="auto", choices=LOAD_FORMATS, help="'dummy' = random weights (no download)")
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
