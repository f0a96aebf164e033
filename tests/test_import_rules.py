"""Who may import what, read from the source with ``ast`` (nothing is imported to check it).

1. Build-time snippets (``snippets/lesson_*/``) are standalone files a reader copies: no ``infercourse``.
2. Lab scripts (``snippets/labs/*.py``) run on a GPU box that installs only vLLM
   (``requirements-labs-gpu.txt``): the standard library, ``labkit`` (their shared helper package, next
   to them) and vLLM with the two packages vLLM itself installs and the labs need directly, ``torch``
   (device name, memory) and ``transformers`` (a model's config); nothing else. One bridge, in
   ``labkit/receipt.py`` alone: inside a clone of this repository it reads the registry through
   ``infercourse.labs.core`` (a GPU's datasheet figures, the receipts folder's name), and a copy of
   the lab outside the repository runs without it.
3. Lab specs (``src/infercourse/labs/<lab>.py``) import ``infercourse.labs.core`` (``from infercourse.labs import
   core``, then ``core.claim``, ``core.Column``...) and the formula
   modules, never another spec or the package ``infercourse.labs`` (its ``__init__`` imports them:
   a cycle). What two labs share lives in ``core``.
4. The build (``hooks/``, ``src/infercourse/``) never imports a lab script: no ``labkit`` or ``vllm``.
   A page module reads a lab's constants with ``infercourse.snippets.constant("labs/<lab>.py", NAME)``
   (the file is parsed, not run) and a page shows the lab's code with ``--8<--``.
5. Only ``infercourse.macros`` (and the page modules themselves) import ``infercourse.pages``: a lab notebook's
   run never reads a page module, so hooks/notebook_outputs.py leaves them out of what its runs are keyed on
   (an edit to a page's values, under ``make serve``, re-runs no notebook).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from conftest import ROOT

LAB_SCRIPT_THIRD_PARTY = {"labkit", "vllm", "torch", "transformers"}
NOT_FOR_SPECS = {"infercourse.labs", "infercourse.macros", "infercourse.labbox"}
"""Besides other specs: the package (a cycle) and the build-side modules. (``infercourse.snippets``, the one
reader of a lab script's constants, imports nothing of the package: ``core.lab_settings`` uses it.)"""


def imports(path: Path, package: str = "") -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path``, at any depth; ``from a import b``
    gives ``a.b`` (b may be a module), ``from a import *`` gives ``a``. Relative imports resolve against
    ``package``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}".rstrip(".")
            # each name imported (``a.b``), or the module itself for ``from a import *``: ``from
            # infercourse.labs import core`` imports core, not the package's other names
            found += [(node.lineno, base if alias.name == "*" else f"{base}.{alias.name}") for alias in node.names]
    return found


def violations(paths, allowed, package: str = "") -> list[str]:
    return [
        f"{p.relative_to(ROOT)}:{line}: imports {name}"
        for p in paths
        for line, name in imports(p, package)
        if not allowed(p, name)
    ]


def _top(name: str) -> str:
    return name.split(".")[0]


def lesson_snippet_rule(path: Path, name: str) -> bool:
    return _top(name) != "infercourse"


def lab_script_rule(path: Path, name: str) -> bool:
    if path.as_posix().endswith("labkit/receipt.py") and name in {"infercourse.labs", "infercourse.labs.core"}:
        return True  # `from infercourse.labs import core`, guarded: the one bridge (docstring, rule 2)
    return _top(name) in sys.stdlib_module_names or _top(name) in LAB_SCRIPT_THIRD_PARTY


def spec_rule(path: Path, name: str) -> bool:
    if not name.startswith("infercourse."):
        return True
    if name.startswith("infercourse.labs.core"):
        return True
    own = f"infercourse.labs.{path.stem}"
    if name == own or name.startswith(own + "."):
        return True
    # "from infercourse.labs.core import x" also yields infercourse.labs.core.x (allowed above); any other
    # name under infercourse.labs is the package or another spec
    return not (
        name in NOT_FOR_SPECS
        or name.startswith("infercourse.labs.")
        or any(name.startswith(m + ".") for m in NOT_FOR_SPECS - {"infercourse.labs"})
    )


def build_rule(path: Path, name: str) -> bool:
    return _top(name) not in {"labkit", "vllm"}


def pages_rule(path: Path, name: str) -> bool:
    inside = path.name == "macros.py" or path.parent.name == "pages"
    return inside or not (name == "infercourse.pages" or name.startswith("infercourse.pages."))


LESSON_SNIPPETS = sorted(ROOT.glob("snippets/lesson_*/*.py"))
LAB_SCRIPTS = sorted(ROOT.glob("snippets/labs/*.py"))
LABKIT = sorted(ROOT.glob("snippets/labs/labkit/*.py"))
SPECS = sorted(p for p in ROOT.glob("src/infercourse/labs/*.py") if p.name != "__init__.py")
BUILD = sorted([*ROOT.glob("hooks/*.py"), *ROOT.glob("src/infercourse/**/*.py")])


@pytest.mark.parametrize(
    "paths, rule, package",
    [
        (LESSON_SNIPPETS, lesson_snippet_rule, ""),
        (LAB_SCRIPTS, lab_script_rule, ""),
        (LABKIT, lab_script_rule, "labkit"),
        (SPECS, spec_rule, "infercourse.labs"),
        (BUILD, build_rule, "infercourse"),
        (BUILD, pages_rule, "infercourse"),
    ],
    ids=[
        "lesson snippets: no infercourse",
        "lab scripts: stdlib, labkit, vllm, torch, transformers",
        "labkit: the same, and its one bridge",
        "lab specs: core and formula modules",
        "build: no lab script",
        "infercourse.pages: macros only",
    ],
)
def test_import_rule(paths, rule, package):
    assert paths, "no files found: the layout changed; update this test"
    found = violations(paths, rule, package)
    assert not found, "import rule broken (see tests/test_import_rules.py):\n" + "\n".join(found)


# --- the checks themselves see a violation -----------------------------------------------------------


@pytest.mark.parametrize(
    "source, rule, package, path",
    [
        ("from infercourse.registry import model\n", lesson_snippet_rule, "", "snippets/lesson_0a/x.py"),
        ("def f():\n    import numpy\n", lab_script_rule, "", "snippets/labs/x.py"),
        ("from infercourse.labs.phases import floors\n", spec_rule, "infercourse.labs", "metrics.py"),
        ("from infercourse.labs import efficiency\n", spec_rule, "infercourse.labs", "metrics.py"),
        ("from infercourse.labs import *\n", spec_rule, "infercourse.labs", "metrics.py"),
        ("from infercourse import labs\n", spec_rule, "infercourse.labs", "metrics.py"),
        ("from . import phases\n", spec_rule, "infercourse.labs", "metrics.py"),
        ("import labkit\n", build_rule, "infercourse", "hooks/x.py"),
        ("from infercourse.pages import lesson_0a\n", pages_rule, "infercourse", "src/infercourse/labnotebook.py"),
        ("from .pages import values_for\n", pages_rule, "infercourse", "src/infercourse/labs/core.py"),
    ],
)
def test_a_planted_violation_is_found(tmp_path, monkeypatch, source, rule, package, path):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    planted = tmp_path / path
    planted.parent.mkdir(parents=True, exist_ok=True)
    planted.write_text(source)
    assert violations([planted], rule, package), source


def test_allowed_imports_pass(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    spec = tmp_path / "metrics.py"
    spec.write_text(
        "from infercourse.labs.core import floors\nfrom infercourse import fmt, roofline\n"
        "from infercourse.labs import core\n"
    )
    lab = tmp_path / "lab.py"
    lab.write_text(
        "import argparse\nfrom labkit import fail\ndef main():\n    from vllm import LLM\n    import torch\n"
    )
    assert violations([spec], spec_rule, "infercourse.labs") == []
    assert violations([lab], lab_script_rule) == []
