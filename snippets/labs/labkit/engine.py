"""One vLLM engine: what a lab does before importing vLLM (:func:`prepare`), starting ``LLM`` with
the lab's flags (:func:`start_llm`), one engine per child process (:func:`child_run`), and a failure
line that names vLLM's root cause rather than its wrapper.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .cli import _state, check_receipt_arg, fail, progress
from .machine import (
    CPU_KV_DEFAULT_GIB,
    CPU_KV_ENV,
    ENGINE_IN_PROCESS_ENV,
    LOG_CONFIG_ENV,
    machine,
    preflight,
    preflight_line,
)
from .receipt import check_receipt_folder, write_partial

ROOT_CAUSE = re.compile(r"\b([A-Z]\w*(?:Error|Exception)): (.+)")
"""A Python exception line in vLLM's log (``ValueError: ...``); the last one is the root cause."""
GENERIC_CAUSES = ("Engine core initialization failed", "See root cause above", "check the stack trace above")
"""Wrapper messages that only point back at the real cause."""


def engine_core_in_process() -> None:
    """Run vLLM's engine core in this process, whatever the user's environment says (call it before vLLM
    is imported). ``LLM.generate`` then adds every request of a call before it drives the first step, so
    a busy machine cannot split one batch's arrival over several steps, and ``LLM.apply_model`` sees the
    model. By default the engine core is a separate process that starts stepping as requests arrive."""
    os.environ[ENGINE_IN_PROCESS_ENV] = "0"


def prepare(args, logs: str | None = None) -> Path | None:
    """Everything a lab does after parsing its arguments and before importing vLLM; for a lab that starts its
    engines (and servers) one by one, ``logs`` says how their logs are named (``"<run>.log"``) and the fresh
    folder they go to is returned (:func:`log_folder`), else None.

    Makes Ctrl-C one line, not a traceback (:func:`_interrupted`), and a ``KeyboardInterrupt`` even where the lab
    was started with SIGINT ignored (a background job of a script: ``run_labs.py`` passes Ctrl-C on to a lab so it
    keeps its measured rows); refuses a bad ``--receipt``; prints the
    preflight line and stops on its problem (exit 2); on
    vLLM's CPU build sets ``VLLM_CPU_KVCACHE_SPACE`` to :data:`CPU_KV_DEFAULT_GIB` when unset; sends
    vLLM's log to ``<tmp>/infercourse-labs/<lab>-<pid>.log`` unless ``-v`` (through
    :data:`LOG_CONFIG_ENV`, so engine-core processes write there too).
    """
    lab = _state["lab"] = args.lab
    sys.excepthook = _interrupted
    signal.signal(signal.SIGINT, signal.default_int_handler)  # inherited as ignored from a background job: not here
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
    return None if logs is None else log_folder(args, logs)


def run_lab(argv, parse_args, check_input, child, parent, logs: str) -> int:
    """The ``main`` of a lab that starts each engine in a fresh child process of its own script (:func:`child_run`):
    parse the command line (``parse_args(argv)``) and check it (``check_input(args)``, before anything slow);
    then either run this process's one engine (``--child``: ``child(args)``) or, as the parent, :func:`prepare`
    and ``parent(args, log_folder)``, which starts the children one by one, each logging to
    ``log_folder/<name>`` (``logs`` says how the names read, e.g. ``"<run>.log"``). Returns the exit status."""
    args = parse_args(argv)
    check_input(args)
    if args.child:
        return child(args)
    return parent(args, prepare(args, logs=logs))


def log_folder(args, names: str) -> Path:
    """A fresh folder for the logs of the engines (and servers) a lab starts one by one, after :func:`prepare`;
    one progress line says where it is and how its logs are named (``names``, e.g. ``"<run>.log"``)."""
    folder = Path(tempfile.mkdtemp(prefix=f"{args.lab}_"))
    progress(f"each engine's log: {folder}/{names}")
    return folder


def _interrupted(kind, value, traceback) -> None:
    """A lab's ``sys.excepthook`` from :func:`prepare` on: Ctrl-C (``KeyboardInterrupt``) ends the lab with one
    line on stderr, not a traceback, after writing the rows measured so far to its receipt, marked partial
    (:func:`labkit.receipt.write_partial`); Python still exits as a process stopped by SIGINT (status 130 in a
    shell). Any other exception is printed as Python prints it."""
    if issubclass(kind, KeyboardInterrupt):
        log = _state["log"]
        where = f"; vLLM's log: {log}" if log is not None else ""
        kept = write_partial()
        if kept is None:
            print(f"interrupted: {_state['lab']} stopped before it wrote its receipt{where}", file=sys.stderr)
        else:
            path, rows = kept
            print(
                f"interrupted: {_state['lab']} stopped; the {rows} row(s) measured so far are in {path}, marked "
                f"partial{where}",
                file=sys.stderr,
            )
        return
    sys.__excepthook__(kind, value, traceback)


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
