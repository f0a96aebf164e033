"""The lab scripts and the runner without vLLM: they parse, show help, refuse bad input in one line, and the
runner survives a lab that hangs or crashes (stand-in scripts, real subprocesses).

(Running them on a real engine is the lab harness's job: CPU vLLM in CI, a GPU for the numbers.)
"""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, WHEEL_PACKAGES, cpu_build_site, gpu_stand_in, lab_refusal, run_labkit

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
        ("phases.py", ["--load-format", "dumy"], "argument --load-format: invalid choice: 'dumy'"),
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
    assert says in lab_refusal(script.removesuffix(".py"), *args)


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


def test_a_lab_refuses_an_existing_receipt_before_anything_starts(tmp_path):
    receipt = tmp_path / "phases.json"
    receipt.write_text("{}")
    done = subprocess.run(
        [sys.executable, str(LABS / "phases.py"), "--receipt", str(receipt)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "exists; pass --force to replace it" in done.stderr, done.stderr
    assert receipt.read_text() == "{}"


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
# nvidia-smi and the installed packages are stand-ins here (this machine has no GPU): conftest.gpu_stand_in.


def _preflight(tmp_path, driver: str, cuda: str, free: int, packages=WHEEL_PACKAGES) -> tuple[str, str]:
    env = gpu_stand_in(tmp_path, driver, cuda, free, packages)
    code = "facts, problem = labkit.preflight(); print(labkit.preflight_line(facts)); print(problem)"
    line, problem = run_labkit(code, tmp_path / "site", env)
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
    site = cpu_build_site(tmp_path)
    code = (
        "import os, argparse\n"
        "labkit.prepare(argparse.Namespace(lab='demo', receipt=None, verbose=False))\n"
        "print(os.environ[labkit.CPU_KV_ENV]); print(os.environ[labkit.LOG_CONFIG_ENV])"
    )
    env = {"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)}  # no nvidia-smi on this PATH: a CPU machine
    if user_value:
        env["VLLM_CPU_KVCACHE_SPACE"] = user_value
    lines = run_labkit(code, site, env)
    assert lines[0] == "[demo] preflight: no NVIDIA GPU (CPU); vLLM 0.32.0, torch None"
    assert lines[-2] == expected
    assert ("VLLM_CPU_KVCACHE_SPACE=1 GiB" in "\n".join(lines)) is (user_value is None)
    config = json.loads(Path(lines[-1]).read_text())  # vLLM's log goes to a file in TMPDIR
    assert config["handlers"]["file"]["filename"].startswith(str(tmp_path))


ROWS_AT_THE_END = {
    "weights.py": "one engine, one reading of its weights: its rows exist all at once",
    "expert_coverage.py": "its rows come back from its child engines' runs together and are merged at the end",
}
"""Labs whose rows are not measured one by one, so an interrupted run has none to keep."""


@pytest.mark.parametrize("path", sorted(LABS.glob("*.py")), ids=lambda p: p.name)
def test_every_lab_keeps_its_rows_for_an_interrupted_run(path):
    calls = [
        node
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "measured_rows"
    ]
    if path.name in ROWS_AT_THE_END:
        assert not calls, f"{path.name} now keeps its rows: remove it from ROWS_AT_THE_END"
    else:
        assert calls, (
            f"{path.name}: collect the receipt's rows in `rows = measured_rows(args, UNITS)` (labkit), appending "
            "each as it is measured, so that Ctrl-C keeps them in a partial receipt"
        )
