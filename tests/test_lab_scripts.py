"""The lesson 0B/0C lab scripts, without vLLM: they parse, show help, and refuse bad input in one line.

(Running them on a real engine is the lab harness's job: CPU vLLM in CI, a GPU for the numbers.)
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT

LABS = ROOT / "snippets" / "labs"


def run(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(LABS / script), *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("script", ["metrics.py", "weights.py"])
def test_help_runs_without_vllm(script):
    result = run(script, "--help")
    assert result.returncode == 0, result.stderr
    assert "--model" in result.stdout and "--load-format" in result.stdout and "--receipt" in result.stdout


@pytest.mark.parametrize("script, args, says", [
    ("metrics.py", ["--max-model-len", "1000"], "--max-model-len 4224"),  # 4096 + 128 tokens needed
    ("metrics.py", ["--repeats", "0"], "--repeats"),
    ("metrics.py", ["--model", "./no/such/folder"], "not found"),
    ("weights.py", ["--max-model-len", "1"], "--max-model-len"),
    ("weights.py", ["--model", "/no/such/folder"], "not found"),
])
def test_bad_input_is_one_line_and_nonzero(script, args, says):
    result = run(script, *args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], result.stderr


@pytest.mark.parametrize("script", ["metrics.py", "weights.py"])
def test_vllm_is_imported_only_inside_main(script):
    text = (LABS / script).read_text()
    head = text.split("def main(", 1)[0]
    assert "import vllm" not in head and "from vllm" not in head
    assert 'if __name__ == "__main__":' in text
