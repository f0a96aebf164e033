"""The receipt: one JSON file per run, with the same envelope for every lab (schema, lab, command,
commit, date, machine, versions, model) around the lab's own settings, units and rows. Paths inside the
repository are written relative to it, so a receipt names no folder of the machine that ran it.

The repository's ``src/`` is read only where the registry is wanted (:func:`registry_bandwidth_gb_s`,
:func:`check_receipt_folder`); a copy of the labs outside the repository skips those.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path

from .cli import fail
from .machine import CPU_KV_ENV, ENGINE_IN_PROCESS_ENV, THREADS_ENV, git_commit, machine, versions

SCHEMA = 1
"""Receipt schema version (``infercourse.labs`` reads this one)."""
_LABS = Path(__file__).resolve().parents[1]
REPOSITORY = _LABS.parents[1] if (_LABS.parent.name, _LABS.name) == ("snippets", "labs") else None
"""The course repository these files sit in (as ``snippets/labs/labkit/``), or None for a copy elsewhere.
A receipt writes paths inside it relative to it, so that it names no folder of the machine that ran it."""


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


_kept: dict = {}
"""The rows list of :func:`measured_rows`, with the lab's arguments and units, for :func:`write_partial`."""


def measured_rows(args, units: dict) -> list[dict]:
    """A new, empty list for the rows the lab measures (the list it hands :func:`write_receipt` at the end), kept
    for an interrupted run: append each row as soon as it is measured, and if the run stops on Ctrl-C before
    the end, :func:`write_partial` still writes the rows measured so far (``labkit.prepare``'s handler calls it).
    ``args`` is :func:`lab_parser`'s namespace, ``units`` the lab's ``UNITS``."""
    rows: list[dict] = []
    _kept.update(args=args, units=units, rows=rows)
    return rows


def write_partial() -> tuple[Path, int] | None:
    """Write the rows of :func:`measured_rows` measured so far to ``--receipt``, marked ``"partial": true`` (no claim
    is judged on it; the Receipts page and the course's checks refuse it), and return ``(path, rows)``; None, writing
    nothing, when the lab kept no list, measured no row yet or has no ``--receipt``. The engine start is unknown
    there (0); ``settings`` say which run stopped it."""
    args, rows = _kept.get("args"), _kept.get("rows")
    if args is None or not rows or getattr(args, "receipt", None) is None:
        return None
    settings = {"partial": f"interrupted after {len(rows)} row(s); rerun the lab for the rest"}
    write_receipt(args, _kept["units"], list(rows), 0.0, settings, partial=True)
    return Path(args.receipt), len(rows)


def write_receipt(
    args, units: dict, results: list[dict], engine_start_s: float, settings: dict, partial: bool = False
) -> dict | None:
    """Write the JSON receipt of one run to ``args.receipt`` and print ``receipt: <path>``; return it
    (None, writing nothing, when ``args.receipt`` is None). ``partial``: the run stopped before its end
    (:func:`write_partial`); the receipt says so, ``"partial": true``, and nothing is printed.

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
    if partial:
        receipt["partial"] = True
    path = Path(args.receipt)
    text = json.dumps(receipt, indent=2) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as exc:  # checked before the run (check_receipt_arg); keep the measurements anyway
        print(text)
        fail(f"could not write the receipt to {path} ({exc}); it is printed above", 3)
    if not partial:
        print(f"receipt: {path}")
    return receipt
