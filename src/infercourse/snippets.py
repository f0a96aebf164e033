"""Import a lesson snippet (a standalone file under ``snippets/``) as a module.

Snippets are written to be copied and run on their own, so they are not part of this package.
The build (for prose numbers) and the tests import them through :func:`load`.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SNIPPETS_DIR = Path(__file__).resolve().parents[2] / "snippets"


def load(relative_path: str) -> ModuleType:
    """Import ``snippets/<relative_path>`` and return the module (its ``__main__`` block does not run).

    Raises:
        FileNotFoundError: no such snippet file.
    """
    path = SNIPPETS_DIR / relative_path
    if not path.is_file():
        raise FileNotFoundError(f"no snippet at {path}; paths are relative to {SNIPPETS_DIR}")
    name = "snippet_" + relative_path.replace("/", "_").removesuffix(".py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module
