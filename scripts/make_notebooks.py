"""Generate every lab's notebook, ``docs/notebooks/<lab>.ipynb``, from its script and the one template.

    make notebooks                                      # = .venv/bin/python scripts/make_notebooks.py
    .venv/bin/python scripts/make_notebooks.py --check  # exit 1 when a committed notebook is not what this makes

The script stays the source: a notebook is ``templates/lab_notebook.py`` (jupytext's percent format:
the reader's predictions, preflight, install, model download, the lab, its receipt against the lesson's
prediction), read with jupytext, with the lab's name, lesson, title, the script's docstring and the spec's
exercises (``EXERCISES``) filled in. Cell ids are the
lab's name and the cell's number, so the same inputs give the same bytes and ``--check`` (run by
``tests/test_notebooks.py``) finds a stale or hand-edited notebook. A lab is every script with a spec
(``infercourse.labs.wired``); its lesson is the one ``course.yml`` gives it.

Exit status: 0 when written (or, with ``--check``, all up to date); 1 when ``--check`` finds a problem
(one line each on stderr).
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

import jupytext

from infercourse import course, labnotebook, labs, snippets

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "templates" / "lab_notebook.py"
OUT = ROOT / "docs" / "notebooks"
KERNEL = {"name": "python3", "display_name": "Python 3", "language": "python"}
"""Jupyter's default Python kernel: the Python JupyterLab runs in, the one the install cell fills."""
SPHINX_ROLE = re.compile(r":(?:data|func|class|meth|attr|mod):`~?([^`]+)`")
"""A cross-reference in a docstring (``:func:`name```): shown in the notebook as code, ``name``."""


def number_constants(script: Path) -> dict[str, str]:
    """The script's module constants whose value is a number or a tuple of numbers, as written in the notebook.

    Read by :func:`infercourse.snippets.constants` (never by importing the lab, which imports vLLM):
    ``REQUESTS = 256`` gives ``{"REQUESTS": "256"}``, ``RATES = (2, 4)`` gives ``{"RATES": "(2, 4)"}``.
    Names bound to anything else (strings, patterns, computed values) are names of code and stay as they are.
    """
    literals = snippets.constants(str(script.resolve().relative_to(snippets.SNIPPETS_DIR)))
    return {name: repr(value) for name, value in literals.items() if name.isupper() and _numeric(value)}


def _numeric(value) -> bool:
    if isinstance(value, tuple):
        return bool(value) and all(_numeric(v) for v in value)
    return isinstance(value, int | float) and not isinstance(value, bool)


def docstring(script: Path) -> str:
    """``script``'s docstring as the notebook shows it: its number constants' names replaced by their values,
    Sphinx cross-references as code."""
    tree = ast.parse(script.read_text(encoding="utf-8"))
    text = SPHINX_ROLE.sub(r"`\1`", ast.get_docstring(tree) or "")
    constants = number_constants(script)
    if not constants:
        return text
    names = re.compile(r"\b(" + "|".join(sorted(constants, key=len, reverse=True)) + r")\b")
    return names.sub(lambda m: constants[m.group(1)], text)


def lessons_by_lab() -> dict[str, dict]:
    """Each live lesson with a lab, by lab name (``course.yml``)."""
    return {lesson["lab"]: lesson for lesson in course.live_lessons() if lesson["lab"]}


def notebook(lab: str, template: str | None = None) -> str:
    """The ``.ipynb`` text of ``lab``'s notebook.

    Raises:
        KeyError: no live lesson in ``course.yml`` names ``lab``.
        ValueError: the template leaves a ``__NAME__`` placeholder unfilled.
    """
    by_lab = lessons_by_lab()
    lesson, step_model = by_lab[lab], by_lab["step_overhead"]  # the lesson of the step's overheads too
    script = labs.LABS_DIR / f"{lab}.py"
    values = {
        "__LAB__": lab,
        "__LESSON__": lesson["code"],
        "__TITLE__": lesson["title"],
        # the lesson's Markdown file, which JupyterLab opens; hooks/notebooks.py makes it the site's page
        "__LESSON_URL__": "../" + lesson["page"],
        "__DOCSTRING__": docstring(script),
        "__MODEL_ID__": labs.spec(lab).work.model,  # the model the lab loads by default (its LabWork)
        "__EXERCISES__": labnotebook.exercises(lab),
        # the lesson of the step model's overheads, which the comparison's ratios point to
        "__STEP_MODEL_LESSON__": step_model["code"],
        "__STEP_MODEL_URL__": "../" + step_model["page"],
        "__ANSWER_SLOTS__": ", ".join(f"{k}: None" for k in range(1, len(labs.spec(lab).exercises) + 1)),
    }
    pattern = re.compile("|".join(re.escape(k) for k in sorted(values, key=len, reverse=True)))
    nb = jupytext.reads(template if template is not None else TEMPLATE.read_text(encoding="utf-8"), fmt="py:percent")
    for i, cell in enumerate(nb.cells):
        cell.source = pattern.sub(lambda m: values[m.group(0)], cell.source)
        left = re.findall(r"__[A-Z][A-Z_]*__", cell.source)
        if left:
            raise ValueError(f"{TEMPLATE.name}: placeholder {left[0]} has no value in make_notebooks.notebook")
        cell.id = f"{lab}-{i}"
    nb.metadata = {"kernelspec": KERNEL, "language_info": {"name": "python"}}
    return jupytext.writes(nb, fmt="ipynb")


def _shown(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def problems(out: Path = OUT) -> list[str]:
    """What differs between the committed notebooks in ``out`` and what :func:`notebook` makes."""
    found = []
    want = {f"{lab}.ipynb": notebook(lab) for lab in labs.wired()}
    for name, text in want.items():
        path = out / name
        if not path.is_file():
            found.append(f"{_shown(path)} is missing: run `make notebooks`")
        elif path.read_text(encoding="utf-8") != text:
            found.append(
                f"{_shown(path)} is stale or hand-edited: edit snippets/labs/{name[:-6]}.py or "
                f"{TEMPLATE.relative_to(ROOT)}, then run `make notebooks`"
            )
    for path in sorted(out.glob("*.ipynb")):
        if path.name not in want:
            found.append(f"{_shown(path)} is no lab's notebook: delete it, or give the lab a spec")
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Generate docs/notebooks/<lab>.ipynb from each lab script.")
    p.add_argument("--check", action="store_true", help="only compare; exit 1 when a notebook differs")
    args = p.parse_args(argv)
    if args.check:
        found = problems()
        for line in found:
            print(f"error: {line}", file=sys.stderr)
        return 1 if found else 0
    OUT.mkdir(parents=True, exist_ok=True)
    for lab in labs.wired():
        (OUT / f"{lab}.ipynb").write_text(notebook(lab), encoding="utf-8")
        print(f"wrote {(OUT / f'{lab}.ipynb').relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
