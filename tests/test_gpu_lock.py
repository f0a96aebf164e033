"""The GPU route's lock (requirements-labs-gpu.lock, `make lock-gpu`): it holds the direct pins, every install
instruction names it after the preflight, and (lab tier, needs PyPI) every pinned wheel exists for Python 3.10-3.12
on glibc 2.31, the floor the README and the AutoDL page state, and not on 2.28."""

from __future__ import annotations

import re
import subprocess

import pytest

from conftest import ROOT

LOCK = ROOT / "requirements-labs-gpu.lock"
PINS = ROOT / "requirements-labs-gpu.txt"
UV = ROOT / ".venv" / "bin" / "uv"


def _pins(path) -> dict[str, str]:
    found = re.findall(r"^([A-Za-z0-9_.-]+)==([^\s;]+)", path.read_text(), flags=re.M)
    return {name.lower(): version for name, version in found}


def test_the_lock_holds_every_direct_pin():
    direct, locked = _pins(PINS), _pins(LOCK)
    assert {"vllm", "transformers", "modelscope", "modelscope-hub", "matplotlib"} <= set(direct)
    assert {name: locked.get(name) for name in direct} == direct
    assert locked["torch"] == "2.11.0"  # vllm 0.26.0's METADATA: Requires-Dist: torch==2.11.0
    assert LOCK.read_text().startswith("# Made by make lock-gpu from requirements-labs-gpu.txt")


def test_both_lab_environments_pin_the_router_lesson_8a_names():
    from infercourse.registry import VLLM_ROUTER_VERSION

    assert (
        _pins(PINS)["vllm-router"] == _pins(ROOT / "requirements-labs-cpu.lock")["vllm-router"] == VLLM_ROUTER_VERSION
    )


INSTRUCTIONS = [
    ROOT / "README.md",
    ROOT / "snippets" / "labs" / "README.md",
    ROOT / "docs" / "index.md",
    ROOT / "src" / "infercourse" / "autodl.py",
    ROOT / "src" / "infercourse" / "labbox.py",
    ROOT / "scripts" / "run_labs.py",
]


@pytest.mark.parametrize("path", INSTRUCTIONS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_instruction_installs_the_lock_after_the_preflight(path):
    text = path.read_text()
    assert "pip install -r requirements-labs-gpu.txt" not in text  # the pins alone leave the rest to the day
    install = text.index("pip install -r requirements-labs-gpu.lock")
    assert text.index("run_labs.py --check") < install  # the driver is named before anything is installed


@pytest.mark.lab  # asks PyPI for the pinned wheels' metadata (no wheel is downloaded): not in `make check`
@pytest.mark.parametrize("python", ["3.10", "3.11", "3.12"])
def test_every_locked_wheel_exists_on_glibc_2_31_and_not_all_on_2_28(python, tmp_path):
    def resolve(platform: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(UV), "pip", "compile", str(LOCK), "--no-deps", "--only-binary", ":all:", "--quiet"]
            + ["--python-version", python, "--python-platform", platform, "-o", str(tmp_path / "out.txt")],
            capture_output=True,
            text=True,
            timeout=600,
        )

    done = resolve("x86_64-manylinux_2_31")
    assert done.returncode == 0, done.stderr[-2000:]
    older = resolve("x86_64-manylinux_2_28")  # Ubuntu 18.04's glibc is 2.27: llguidance has no wheel for it
    assert older.returncode != 0 and "llguidance" in older.stderr, older.stderr[-2000:]
