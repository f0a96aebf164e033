"""MkDocs hook: a build imports the course package afresh when a file it may read changed, so `mkdocs serve`
shows an edit to src/infercourse on the next reload without a restart, and a prose edit reuses what the
package computed (the page values and the figures they draw: most of a rebuild's time otherwise).

MkDocs serve reloads mkdocs.yml and its plugins on each rebuild, but Python keeps modules it has
imported: mkdocs-macros and the build-time snippets would keep reading the first `infercourse`
they saw. Before the plugins load (highest priority) this hook fingerprints everything the package and the
snippets can read (the files under ``INPUTS``: path, size, mtime, and the versions of the packages the serve
caches wrap); when that changed since the package was
imported, it drops the package's modules, so they read the files as they are now. The fingerprint is kept
as ``infercourse.build_inputs``; hooks/exec_cache.py keys snippet outputs on it.
"""

import hashlib
import importlib
import importlib.metadata
import os
import sys
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority

INPUTS = ("src", "snippets", "receipts", "hooks")
WRAPPED = ("mkdocs", "mkdocs-material", "mkdocs-macros-plugin", "markdown-exec", "pymdown-extensions", "jinja2")
"""The distributions whose internals the serve caches wrap (hooks/exec_cache.py, render_cache.py,
search_cache.py) or whose output they keep: their installed versions are part of the fingerprint."""
SWITCH = "SERVE_CACHES"
"""``SERVE_CACHES=off make serve`` (or ``mkdocs serve``): no serve cache at all; every rebuild is a full build."""


def caches_on(command: str) -> bool:
    """Whether the serve caches run: under ``mkdocs serve`` only, unless ``SERVE_CACHES=off``."""
    return command == "serve" and os.environ.get(SWITCH, "on") != "off"


WRAPPER_MARK = "serve_cache"
"""The attribute a serve cache sets on its wrapper, so that a rebuild (which runs on_startup again) wraps once."""


def to_wrap(command: str, hook: str, target: str) -> tuple[object, object] | None:
    """What the serve cache ``hook`` (its file name) is to wrap now: :func:`wrapped_internal` of ``target``, or
    None when the caches are off (:func:`caches_on`) or ``target`` is already a wrapper (:data:`WRAPPER_MARK`).

    Raises:
        PluginError: as :func:`wrapped_internal`.
    """
    if not caches_on(command):
        return None
    holder, attribute = wrapped_internal(hook, target)
    return None if hasattr(attribute, WRAPPER_MARK) else (holder, attribute)


def wrapped_internal(hook: str, target: str) -> tuple[object, object]:
    """What the serve cache ``hook`` (its file name) wraps: ``target``, ``"module:Owner.name"`` or
    ``"module:name"``, a dependency's internal that any release may move. Returns (its owner: the class or the
    module, the attribute).

    Raises:
        PluginError: the module, the owner or the attribute is gone; the message names the hook to update.
    """
    module, _, path = target.partition(":")
    *owners, name = path.split(".")
    try:
        holder = importlib.import_module(module)
        for owner in owners:
            holder = getattr(holder, owner)
        return holder, getattr(holder, name)
    except (ImportError, AttributeError) as error:
        raise PluginError(f"hooks/{hook}: {target} is gone ({error}); update or drop the hook") from error


def fingerprint(root: Path) -> str:
    """A digest of the path, size and modification time of every file under ``INPUTS`` of ``root``, and of
    the installed versions of ``WRAPPED``."""
    digest = hashlib.sha256()
    for name in WRAPPED:
        digest.update(f"{name}=={importlib.metadata.version(name)}\n".encode())
    for folder in INPUTS:
        for path in sorted((root / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                stat = path.stat()
                digest.update(f"{path.relative_to(root)}|{stat.st_size}|{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


@event_priority(100)
def on_config(config):
    inputs = fingerprint(Path(config.config_file_path).parent)
    if getattr(sys.modules.get("infercourse"), "build_inputs", None) == inputs:
        return config
    for name in [n for n in sys.modules if n == "infercourse" or n.startswith("infercourse.")]:
        del sys.modules[name]
    import infercourse

    infercourse.build_inputs = inputs
    return config
