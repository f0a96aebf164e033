"""Import a lesson snippet (a standalone file under ``snippets/``) as a module.

Snippets are written to be copied and run on their own, so they are not part of this package.
The build (for prose numbers) imports lesson snippets through :func:`load` and reads lab scripts'
constants with :func:`constant` (it never imports a lab); the tests may import both.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

SNIPPETS_DIR = Path(__file__).resolve().parents[2] / "snippets"


def _file(relative_path: str) -> Path:
    """The file ``snippets/<relative_path>``.

    Raises:
        FileNotFoundError: no such file.
    """
    path = SNIPPETS_DIR / relative_path
    if not path.is_file():
        raise FileNotFoundError(f"no snippet at {path}; paths are relative to {SNIPPETS_DIR}")
    return path


def load(relative_path: str) -> ModuleType:
    """Import ``snippets/<relative_path>`` and return the module (its ``__main__`` block does not run).

    A folder with an ``__init__.py`` (``labs/labkit``) is a package: it is imported under its own name,
    as the labs import it, so the module returned is the one they use.

    Raises:
        FileNotFoundError: no such snippet file or package.
        ValueError: the file is not a Python module (its name does not end in ``.py``).
    """
    path = SNIPPETS_DIR / relative_path
    if (path / "__init__.py").is_file():
        sys.path.insert(0, str(path.parent))
        try:
            return importlib.import_module(path.name)
        finally:
            sys.path.remove(str(path.parent))
    path = _file(relative_path)
    name = "snippet_" + relative_path.replace("/", "_").removesuffix(".py")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"{path} is not a Python module; load a snippet whose name ends in .py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up here
    sys.path.insert(0, str(path.parent))  # as `python snippets/labs/x.py` would: labs import labkit from there
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


_REQUIRED = object()


def constants(relative_path: str) -> dict[str, Any]:
    """Every top-level literal assignment ``NAME = <literal>`` of ``snippets/<relative_path>``, by name, read
    with ``ast`` (the file is never imported or run). The one reader of a snippet's or lab script's
    constants: pages, lab specs (``infercourse.labs.core.lab_settings``) and the notebook generator use it.
    An assignment that is not a literal (a call, a name, arithmetic) is left out; a name assigned twice keeps
    its last literal.

    Raises:
        FileNotFoundError: no such snippet file.
    """
    found = {}
    for node in ast.parse(_file(relative_path).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                found[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return found


def constant(relative_path: str, name: str, default: Any = _REQUIRED) -> Any:
    """The value of a top-level constant ``NAME = <literal>`` in ``snippets/<relative_path>`` (:func:`constants`);
    ``default`` where the file assigns no such literal (when given).

    For lab scripts, which the docs build must not import (they import vLLM and their helpers):
    a page can still show a prediction for exactly the grid the lab runs.

    Raises:
        FileNotFoundError: no such snippet file.
        ValueError: the file has no top-level literal assignment to ``name`` and no ``default`` is given.
    """
    found = constants(relative_path)
    if name in found:
        return found[name]
    if default is not _REQUIRED:
        return default
    raise ValueError(f"name {name!r} is not assigned a literal at the top level of {relative_path}")


SECTION_START = re.compile(r"^[ \t]*# --8<-- \[start:([\w-]+)\][ \t]*$", re.M)
"""A section marker of pymdownx.snippets (``# --8<-- [start:engine]``): the part of a snippet a lesson shows."""


def excerpts(relative_path: str) -> str:
    """Markdown for the code of ``snippets/<relative_path>`` on a page: one listing per section the file marks
    (``# --8<-- [start:NAME]`` ... ``# --8<-- [end:NAME]``, in file order), each included by pymdownx.snippets
    and numbered as in the whole file, then a link to the whole file (``code/<relative_path>``, published by
    ``hooks/code_files.py``). A page shows excerpts of a file, never the whole file; the link is written
    relative to a page one folder below ``docs/`` (``lessons/<page>.md``).

    Raises:
        FileNotFoundError: no such snippet file.
        ValueError: the file marks no section.
    """
    text = _file(relative_path).read_text(encoding="utf-8")
    starts = {m.group(1): text.count("\n", 0, m.start()) + 2 for m in SECTION_START.finditer(text)}
    if not starts:
        raise ValueError(
            f"snippets/{relative_path} marks no section for its lesson; put '# --8<-- [start:NAME]' and "
            "'# --8<-- [end:NAME]' around the lines the lesson explains"
        )
    listings = [
        f'```python title="snippets/{relative_path}: {name} (excerpt)" linenums="{first}"\n'
        f'--8<-- "{relative_path}:{name}"\n```'
        for name, first in starts.items()
    ]
    lines = text.count("\n")
    return "\n\n".join(listings) + (
        f"\n\nThe whole file ({lines} lines): [`snippets/{relative_path}`](../code/{relative_path})."
    )
