"""MkDocs hook: under `mkdocs serve`, a prose edit does not re-run every build-time snippet.

markdown-exec runs each ``exec="on"`` Python block on every build. While serving, this hook keeps
each block's printed output keyed by the block's code, its options and a fingerprint of everything
a snippet can read (hooks/reload.py's: the files under ``src/``, ``snippets/`` and ``receipts/``: path,
size, mtime).
A block is re-run when its code or any of those files changed, so the page still shows what that
code printed. Blocks in a markdown-exec ``session`` (shared state) are never cached. `mkdocs build`
(and so every test and the published site) runs every block: the cache lives only in the serving
process.

It wraps markdown-exec's ``_run_python`` (markdown-exec 1.12; the build fails loudly if it moves).
"""

from __future__ import annotations

import hashlib
import sys

from mkdocs.exceptions import PluginError
from reload import caches_on  # hooks/reload.py: MkDocs puts a hook's folder on sys.path while loading it


def _run_python_module():
    try:
        from markdown_exec._internal.formatters import python
    except ImportError as error:
        raise PluginError(
            f"hooks/exec_cache.py: markdown-exec's layout changed ({error}); update or drop the hook"
        ) from error
    if not hasattr(python, "_run_python"):
        raise PluginError("hooks/exec_cache.py: markdown-exec has no _run_python any more; update or drop the hook")
    return python


def on_startup(command, dirty):
    if not caches_on(command):  # `mkdocs serve` only, and SERVE_CACHES=off turns every cache off
        return
    python = _run_python_module()
    if getattr(python._run_python, "cached", False):
        return
    run, outputs = python._run_python, {}

    def cached(code, returncode=None, session=None, id=None, **extra):  # noqa: A002 (markdown-exec's name)
        if session:
            return run(code, returncode, session, id, **extra)
        key = hashlib.sha256(
            repr((code, returncode, id, sorted(extra.items()), python.course_inputs)).encode()
        ).hexdigest()
        if key not in outputs:
            outputs[key] = run(code, returncode, session, id, **extra)
        return outputs[key]

    cached.cached = True
    python._run_python = cached


def on_pre_build(config):
    # hooks/reload.py's fingerprint of the inputs, set before the plugins load. Kept on markdown-exec's
    # module: serve reloads this hook's module on each rebuild, the wrapper stays.
    _run_python_module().course_inputs = sys.modules["infercourse"].build_inputs
