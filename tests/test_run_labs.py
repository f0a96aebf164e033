"""scripts/run_labs.py with stand-in labs: it survives a lab that hangs and one that crashes, keeps a first
receipt, stops a lab and all it started on Ctrl-C, and keeps to a time budget.

Each test starts the runner as a real process (and its stand-in labs, timeouts and signals), seconds each, so
these are `slow` (tests/conftest.py): `make test` runs them, `make check` leaves them out.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, gpu_stand_in
from infercourse import course

STAND_INS = {
    # prints a progress line, starts a grandchild (as vLLM starts engine processes) and hangs
    "a_hangs": "import subprocess, sys, time\nprint('[a_hangs] downloading 1/2', flush=True)\n"
    "child = subprocess.Popen(['sleep', '300'])\nopen(sys.argv[0] + '.pid', 'w').write(str(child.pid))\n"
    "try:\n    time.sleep(300)\nexcept KeyboardInterrupt:  # what a lab does: keep its rows (labkit.write_partial)\n"
    "    open(sys.argv[0] + '.interrupted', 'w').write('1')\n    raise\n",
    "b_crashes": "print('[b_crashes] engine start', flush=True)\n"
    "raise RuntimeError('CUDA out of memory (a stand-in)')\n",
    "c_finishes": "print('[c_finishes] done', flush=True)\n",  # writes no receipt
}


def test_runner_survives_a_timeout_and_a_crash_and_goes_on(tmp_path):
    for name, body in STAND_INS.items():
        (tmp_path / f"{name}.py").write_text(body)
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "run_labs.py"),
            "--labs-dir",
            str(tmp_path),
            "--timeout",
            "2",
            "--python",
            sys.executable,
            "--model",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = done.stdout
    assert done.returncode == 1, done.stderr
    assert "=== [1/3] a_hangs ===" in out and "  a_hangs | [a_hangs] downloading 1/2" in out  # streamed
    assert "a_hangs: TIMED OUT (after 2 s" in out
    assert "  b_crashes | RuntimeError: CUDA out of memory (a stand-in)" in out
    assert "b_crashes: CRASHED (exit 1" in out
    assert "  c_finishes | [c_finishes] done" in out and "c_finishes: bad receipt" in out  # it still ran
    table = out[out.index("\nlab ") :].splitlines()
    assert [line.split()[:2] for line in table[2:]] == [
        ["a_hangs", "timed"],
        ["b_crashes", "crashed"],
        ["c_finishes", "bad"],
    ]
    assert (tmp_path / "a_hangs.py.interrupted").is_file()  # a timed-out lab gets Ctrl-C first, then SIGKILL
    grandchild = int((tmp_path / "a_hangs.py.pid").read_text())
    assert (
        not Path(f"/proc/{grandchild}").exists() or "zombie" in Path(f"/proc/{grandchild}/status").read_text().lower()
    )


def test_a_second_run_keeps_the_first_receipt_unless_forced(tmp_path):
    """run_labs never replaces a receipt without --force: the second run's is kept beside it as <lab>.json.new.
    The stand-in "weights" lab writes the committed CPU receipt of lab 0C wherever --receipt points."""
    committed = next((ROOT / "receipts").glob("cpu-*/weights.json"))
    labs_dir, out = tmp_path / "labs", tmp_path / "out"
    labs_dir.mkdir()
    (labs_dir / "weights.py").write_text(
        "import shutil, sys\na = sys.argv\nshutil.copy(a[a.index('--model') + 1], a[a.index('--receipt') + 1])\n"
    )
    run = [sys.executable, str(ROOT / "scripts" / "run_labs.py"), "--labs-dir", str(labs_dir), "--out", str(out)]
    run += ["--python", sys.executable, "--model", str(committed)]  # the stand-in reads the receipt as its "model"
    first = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stdout + first.stderr
    written = out / committed.parent.name / "weights.json"
    written.write_text(written.read_text().replace('"lab": "weights"', '"lab": "weights" '))  # mark the first one
    second = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0 and "kept beside it as weights.json.new (--force replaces)" in second.stdout
    assert '"lab": "weights" ' in written.read_text() and written.with_name("weights.json.new").is_file()
    forced = subprocess.run([*run, "--force"], capture_output=True, text=True, timeout=120)
    assert forced.returncode == 0 and '"lab": "weights" ' not in written.read_text()


def test_ctrl_c_stops_the_running_lab_and_everything_it_started(tmp_path):
    """A real SIGINT to the runner (what Ctrl-C sends; the lab runs in a session of its own, so the terminal's
    SIGINT reaches only the runner): the lab and its grandchild are gone, the lab that finished keeps its row,
    and the runner says so in one line with exit status 130 (128 + SIGINT), no traceback."""
    (tmp_path / "a_finishes.py").write_text("print('[a_finishes] done', flush=True)\n")
    (tmp_path / "b_hangs.py").write_text(
        "import os, subprocess, sys, time\nchild = subprocess.Popen(['sleep', '300'])\n"
        "open(sys.argv[0] + '.pids', 'w').write(f'{os.getpid()} {child.pid}')\n"
        "print('[b_hangs] engine ready', flush=True)\ntime.sleep(300)\n"
    )
    runner = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "run_labs.py"), "--labs-dir", str(tmp_path)]
        + ["--python", sys.executable, "--model", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in runner.stdout:  # wait until the hanging lab has started its grandchild
        if "[b_hangs] engine ready" in line:
            break
    runner.send_signal(signal.SIGINT)
    out, err = runner.communicate(timeout=60)
    assert runner.returncode == 130, err
    assert "Traceback" not in err and err.strip().splitlines() == [
        "interrupted: b_hangs stopped, with every process it started; before it: a_finishes (bad receipt)"
    ], err
    for pid in map(int, (tmp_path / "b_hangs.py.pids").read_text().split()):
        status = Path(f"/proc/{pid}/status")
        assert not status.exists() or "zombie" in status.read_text().lower(), f"process {pid} still runs"


def test_runner_refuses_an_unknown_lab_and_a_bad_timeout(tmp_path):
    run_labs = [sys.executable, str(ROOT / "scripts" / "run_labs.py")]
    done = subprocess.run([*run_labs, "--lab", "nope"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.startswith("error: no lab nope; labs: ")
    done = subprocess.run([*run_labs, "--timeout", "0"], capture_output=True, text=True, timeout=60)
    assert (
        done.returncode == 2 and done.stderr.strip() == "error: --timeout must be a positive number of seconds, got 0"
    )
    done = subprocess.run([*run_labs, "--budget", "-5"], capture_output=True, text=True, timeout=60)
    assert (
        done.returncode == 2 and done.stderr.strip() == "error: --budget must be a positive number of seconds, got -5"
    )


def test_gpu_smoke_dry_run_lists_every_lab_with_its_budget():
    """`make gpu-smoke DRY_RUN=1`'s command: every lab of the course, shortest first, each with its estimate (the
    labs' own LabWork, labbox.lab_minutes) and whether it fits the budget; nothing runs. The estimates are summed
    by hand below from the printed ones, so the verdicts follow from the table itself."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "run_labs.py"), "--dry-run", "--budget", "540"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.strip().splitlines()
    assert header.split() == ["lab", "estimate", "(s)", "budget", "540", "s"]
    table = [(row.split()[0], float(row.split()[1]), " ".join(row.split()[2:])) for row in rows]
    assert sorted(name for name, _, _ in table) == sorted(
        lesson["lab"] for lesson in course.live_lessons() if lesson.get("lab")
    )
    assert [s for _, s, _ in table] == sorted(s for _, s, _ in table)  # shortest first
    used = 0.0
    for name, seconds, verdict in table:  # a lab runs while the running total stays within 540 s
        fits = used + seconds <= 540
        used += seconds if fits else 0
        assert verdict == ("runs" if fits else "skipped: does not fit"), name
    assert 0 < sum(v == "runs" for _, _, v in table) < len(table)


def test_the_budget_cuts_a_lab_s_timeout_and_eager_reaches_every_lab(tmp_path):
    """Stand-in labs (no estimates): one prints its arguments, one hangs; under a 3 s budget the hanging one is
    stopped when the budget runs out, not after --timeout's 1,800 s."""
    (tmp_path / "a_argv.py").write_text("import sys\nprint('ARGV', ' '.join(sys.argv[1:]), flush=True)\n")
    (tmp_path / "b_hangs.py").write_text("import time\ntime.sleep(300)\n")  # past the 60 s below: must be cut
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "run_labs.py"), "--labs-dir", str(tmp_path), "--budget", "3"]
        + ["--eager", "--python", sys.executable, "--model", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    argv = next(line for line in done.stdout.splitlines() if "ARGV" in line)
    assert "--enforce-eager" in argv.split()
    assert "b_hangs: TIMED OUT (after " in done.stdout  # within the run's 60 s: the budget, not --timeout, stopped it


def test_a_budget_too_small_for_any_lab_skips_them_all_and_starts_none():
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "run_labs.py"), "--budget", "1", "--python", sys.executable],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    skipped = [line for line in done.stdout.splitlines() if line.split(" ", 1)[0].endswith(":") and "skipped (" in line]
    labs_in_course = [lesson["lab"] for lesson in course.live_lessons() if lesson.get("lab")]
    assert len(skipped) == len(labs_in_course) and "s of the budget left" in skipped[0]
    assert "claims hold" not in done.stdout and "===" in done.stdout


def _check(tmp_path, *args: str, count: int = 1, **env: str) -> subprocess.CompletedProcess:
    """``run_labs.py --check`` on a stand-in GPU box (conftest.gpu_stand_in: ``count`` RTX 4090s, driver 580,
    vLLM 0.26.0 installed, the card free); ``env`` adds to its environment (a hub cache)."""
    stand_in = gpu_stand_in(tmp_path, "580.65.06", "13.0", 24_000, count=count)
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "run_labs.py"), "--check", "--python", sys.executable, *args],
        env={**stand_in, "HOME": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_names_a_lab_that_needs_more_gpus_than_the_box_has(tmp_path):
    # lab 7A runs tensor parallelism on 2 cards (its spec's LabWork.gpus); this box has one
    done = _check(tmp_path, "--lab", "tensor_parallel", "--load-format", "dummy")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: lab tensor_parallel needs 2 GPUs at once, this machine has 1: rent 2 cards to run it"
    )
    # every lab: the others run here, so it is a note, not an error; two cards: nothing to say
    done = _check(tmp_path, "--load-format", "dummy")
    assert done.returncode == 0, done.stderr
    assert "note: lab tensor_parallel needs 2 GPUs at once, this machine has 1" in done.stdout
    assert done.stdout.strip().endswith("ok: nothing missing")
    assert "note:" not in _check(tmp_path, "--load-format", "dummy", count=2).stdout


def test_check_names_a_download_the_disk_cannot_hold(tmp_path):
    # DeepSeek-V3's BF16 weights, 1.3 TB (671,026,419,200 parameters x 2 B), on this machine's disk
    cache = tmp_path / "hub"
    cache.mkdir()
    args = ("--lab", "weights", "--model", "deepseek-ai/DeepSeek-V3")
    done = _check(tmp_path, *args, HF_HUB_CACHE=str(cache))
    assert done.returncode == 2
    line = done.stderr.strip()
    assert line.startswith("error: ") and f"GB free on the disk of {cache}, the download needs 1342.1 GB" in line
    # a finished (or resumed) download: what the cache holds counts; a sparse file takes no disk here
    with open(cache / "model.safetensors", "wb") as f:
        f.truncate(1_400_000_000_000)
    assert _check(tmp_path, *args, HF_HUB_CACHE=str(cache)).returncode == 0
    assert _check(tmp_path, *args, "--load-format", "dummy").returncode == 0  # random weights: no download


def test_gpu_smoke_installs_from_a_folder_of_wheels_with_no_index(tmp_path):
    """`make gpu-smoke WHEELS=DIR` on a box with no network: pip installs the lock from DIR alone (--no-index), then
    the smoke run starts. Here the lock is one pinned line whose wheel `make test` keeps in .cache/wheels/
    (ModelScope's client), the Python a fresh environment that sees the docs environment's packages (run_labs.py
    needs PyYAML), and DRY_RUN=1 stops before any lab."""
    wheel = next((ROOT / ".cache" / "wheels").glob("modelscope_hub-0.5.1-*.whl"))
    lock = tmp_path / "gpu.lock"
    lock.write_text("modelscope-hub==0.5.1\n")
    env_dir = tmp_path / "box"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=120)
    site = next(env_dir.glob("lib/python3*/site-packages"))
    (site / "docs-env.pth").write_text(next(p for p in sys.path if p.endswith("site-packages")) + "\n")
    python = env_dir / "bin" / "python"
    args = [f"WHEELS={wheel.parent}", f"GPU_LOCK={lock}", f"LAB_PYTHON={python}", "DRY_RUN=1"]
    done = subprocess.run(
        ["make", "-s", "gpu-smoke", *args],
        cwd=ROOT,
        env={**os.environ, "PIP_INDEX_URL": "http://127.0.0.1:9/nothing", "PIP_CONFIG_FILE": os.devnull},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].split()[:2] == ["lab", "estimate"]  # the dry run's table followed
    shown = subprocess.run([python, "-m", "pip", "show", "modelscope-hub"], capture_output=True, text=True)
    assert "Version: 0.5.1" in shown.stdout and str(site) in shown.stdout


FAKE_HUB_CLIENT = """#!/bin/sh
# a stand-in for `hf` / `modelscope`: records its words; fails for a model named in FAIL_ON
echo "$(basename "$0") $*" >> "$LOG"
[ "$2" = "$FAIL_ON" ] && exit 3
echo "downloaded $2"
"""


def _fetch(tmp_path, *args: str, clients=("hf", "modelscope"), **env: str) -> subprocess.CompletedProcess:
    """``run_labs.py --fetch`` with stand-in hub clients (:data:`FAKE_HUB_CLIENT`) on PATH, a hub cache in
    ``tmp_path``; ``env`` adds to the environment."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    for name in clients:
        client = tmp_path / "bin" / name
        client.write_text(FAKE_HUB_CLIENT)
        client.chmod(0o755)
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "run_labs.py"), "--fetch", *args],
        env={
            "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin",
            "HOME": str(tmp_path),
            "HF_HUB_CACHE": str(tmp_path / "hub"),
            "LOG": str(tmp_path / "log"),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_fetch_downloads_every_model_the_labs_load_before_any_runs(tmp_path):
    # lab 3A loads the course model and the AWQ checkpoint its script names (AWQ_MODEL); the dry run prints
    # the downloads and starts none
    done = _fetch(tmp_path, "--lab", "quant_nll", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == [
        "hf download Qwen/Qwen2.5-7B-Instruct",
        "hf download Qwen/Qwen2.5-7B-Instruct-AWQ",
    ]
    assert not (tmp_path / "log").exists()
    # labs 6A and 8A both load Qwen2.5-0.5B (6A's draft, 8A's model): one download, through ModelScope's client
    # when vLLM is told to use it
    done = _fetch(tmp_path, "--lab", "spec_decode", "--lab", "fleet_routing", VLLM_USE_MODELSCOPE="True")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "log").read_text().splitlines() == [
        "modelscope download Qwen/Qwen2.5-7B-Instruct",
        "modelscope download Qwen/Qwen2.5-0.5B-Instruct",
    ]
    assert "downloaded Qwen/Qwen2.5-0.5B-Instruct" in done.stdout and "fetched 2 model(s)" in done.stdout


def test_fetch_stops_at_a_failed_download_and_says_how_to_resume(tmp_path):
    done = _fetch(tmp_path, "--lab", "spec_decode", FAIL_ON="Qwen/Qwen2.5-7B-Instruct")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "error: `hf download Qwen/Qwen2.5-7B-Instruct` failed; run it again (it resumes), then `--fetch` again"
    )
    assert (tmp_path / "log").read_text().splitlines() == ["hf download Qwen/Qwen2.5-7B-Instruct"]  # 0.5B not tried


def test_fetch_refuses_before_downloading_without_a_client_or_with_random_weights(tmp_path):
    done = _fetch(tmp_path, "--lab", "fleet_routing", clients=())
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: `hf` is not installed: install the labs' packages first (pip install -r requirements-labs-gpu.lock)"
    )
    done = _fetch(tmp_path, "--load-format", "dummy")
    assert done.returncode == 2 and "random weights need no download" in done.stderr
    assert not (tmp_path / "log").exists()
