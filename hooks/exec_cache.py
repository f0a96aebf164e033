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

# hooks/reload.py: MkDocs puts a hook's folder on sys.path while loading it
from reload import to_wrap, wrapped_internal

RUN_PYTHON = "markdown_exec._internal.formatters.python:_run_python"
"""What this hook wraps: markdown-exec's function that runs a ``python exec`` block."""


def on_startup(command, dirty):
    found = to_wrap(command, "exec_cache.py", RUN_PYTHON)  # None: not `mkdocs serve`, SERVE_CACHES=off, or done
    if found is None:
        return
    (python, run), outputs = found, {}

    def cached(code, returncode=None, session=None, id=None, **extra):  # noqa: A002 (markdown-exec's name)
        if session:
            return run(code, returncode, session, id, **extra)
        key = hashlib.sha256(
            repr((code, returncode, id, sorted(extra.items()), python.course_inputs)).encode()
        ).hexdigest()
        if key not in outputs:
            outputs[key] = run(code, returncode, session, id, **extra)
        return outputs[key]

    cached.serve_cache = True
    python._run_python = cached


def on_pre_build(config):
    # hooks/reload.py's fingerprint of the inputs, set before the plugins load. Kept on markdown-exec's
    # module: serve reloads this hook's module on each rebuild, the wrapper stays.
    wrapped_internal("exec_cache.py", RUN_PYTHON)[0].course_inputs = sys.modules["infercourse"].build_inputs
