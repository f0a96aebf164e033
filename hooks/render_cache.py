"""MkDocs hook: under `mkdocs serve`, a rebuild expands and converts to HTML only the pages whose
Markdown changed, and compiles the theme's templates once.

MkDocs renders every page's Markdown on every rebuild (highlighting each code listing, running each
snippet, expanding each include): most of a rebuild after a one-page prose edit. While serving, this
hook keeps each page's rendered result keyed by everything the conversion reads: the page's path and
its Markdown after mkdocs-macros, every file's address (links resolve against them), mkdocs.yml (the
extensions and their settings), and hooks/reload.py's fingerprint of ``src/``, ``snippets/`` and
``receipts/`` (the glossary, included snippets, build-time code and receipts). A page whose render
logged a warning is never kept, so a strict `mkdocs serve` reports it again on the next rebuild.
mkdocs-macros' expansion of each page (Jinja compiles the whole page as a template) is kept the same
way, keyed by the page's text, front matter and path, mkdocs.yml and that fingerprint: a page sees only
its own values and the number formats (src/infercourse/macros.py), all computed from ``src/``.
The hooks that run on the rendered HTML (formulas, diagrams, figures, descriptions) still run on every
page. `mkdocs build` (and so every test and the published site) renders every page: the cache lives
only in the serving process.

Each rebuild also makes a new Jinja environment, which compiles every theme template again (a fifth
of a rebuild); while serving, the environment gets an in-memory bytecode cache, which Jinja keys by the
template's name and source, so an edited template is compiled afresh.

It wraps ``mkdocs.structure.pages.Page.render`` (MkDocs 1.6) and ``MacrosPlugin.render`` (mkdocs-macros
1.x); the build fails loudly if either moves.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import sys
from pathlib import Path

import jinja2
from mkdocs.plugins import event_priority

# hooks/reload.py: MkDocs puts a hook's folder on sys.path while loading it
from reload import to_wrap, wrapped_internal

# What Page.render sets on the page (MkDocs 1.6, mkdocs/structure/pages.py).
RESULTS = ("content", "toc", "_title_from_render", "present_anchor_ids", "links_to_anchors")


class _Warnings(logging.Handler):
    """Counts the records at WARNING or above that reach the ``mkdocs`` logger (what strict counts)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


class _Templates(jinja2.BytecodeCache):
    """Compiled templates in memory, for the life of the serving process (Jinja checks each source's checksum)."""

    def __init__(self) -> None:
        self.compiled: dict[str, bytes] = {}

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        if bucket.key in self.compiled:
            bucket.bytecode_from_string(self.compiled[bucket.key])

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        self.compiled[bucket.key] = bucket.bytecode_to_string()


class _Kept:
    """What the serving process keeps between rebuilds (on the wrapped function: serve reloads this module)."""

    def __init__(self) -> None:
        self.inputs = ""  # this build's mkdocs.yml, fingerprint and file addresses, as one digest
        self.pages: dict[str, tuple[str, dict]] = {}  # page path -> (key, what Page.render set)
        self.markdown: dict[tuple[str, bool], tuple[str, str]] = {}  # (page path, is its title) -> (key, output)
        self.templates = _Templates()


def _digest(*parts) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def on_startup(command, dirty):
    found = to_wrap(command, "render_cache.py", "mkdocs.structure.pages:Page.render")  # None: off, or done
    if found is None:
        return
    Page, render = found
    MacrosPlugin, expand = wrapped_internal("render_cache.py", "mkdocs_macros.plugin:MacrosPlugin.render")
    kept = _Kept()

    def cached_render(self, config, files):
        key = _digest(kept.inputs, self.markdown)
        path = self.file.src_uri
        if kept.pages.get(path, ("",))[0] == key:
            results = copy.deepcopy(kept.pages[path][1])
            links = results.pop("links_to_anchors")
            for name, value in results.items():
                setattr(self, name, value)
            if links is not None:  # kept by path: this build's File objects are new ones
                self.links_to_anchors = {files.get_file_from_path(p): v for p, v in links.items()}
            return
        warnings = _Warnings()
        logger = logging.getLogger("mkdocs")
        logger.addHandler(warnings)
        try:
            render(self, config, files)
        finally:
            logger.removeHandler(warnings)
        if warnings.count == 0:
            results = {name: getattr(self, name) for name in RESULTS}
            if results["links_to_anchors"] is not None:
                results["links_to_anchors"] = {f.src_uri: v for f, v in results["links_to_anchors"].items()}
            kept.pages[path] = (key, copy.deepcopy(results))

    def cached_expand(self, markdown, force_rendering=False):
        # A page sees its own values and the number formats only (src/infercourse/macros.py): what it
        # expands to follows from its text, front matter and path, mkdocs.yml and the files under src/
        # (kept.inputs also holds the file addresses, which expansion does not read: stricter, never stale).
        page = self.page
        key = _digest(kept.inputs, page.file.src_uri, sorted(page.meta.items()), markdown, force_rendering)
        slot = (page.file.src_uri, markdown == page.title)
        if kept.markdown.get(slot, ("",))[0] != key:
            kept.markdown[slot] = (key, expand(self, markdown, force_rendering))
        return kept.markdown[slot][1]

    cached_render.kept = kept
    cached_render.serve_cache = True
    Page.render = cached_render
    MacrosPlugin.render = cached_expand


@event_priority(-100)  # after every other on_files (hooks/calculators.py adds a file): the addresses pages see
def on_files(files, config):
    from mkdocs.structure.pages import Page

    kept = getattr(Page.render, "kept", None)  # only under `mkdocs serve`
    if kept is not None:  # hooks/reload.py (on_config) has fingerprinted the inputs
        kept.inputs = _digest(
            Path(config.config_file_path).read_bytes(),
            sys.modules["infercourse"].build_inputs,
            [(f.src_uri, f.dest_uri, f.url) for f in files],  # links resolve against them: once per build
        )
    return files


def on_env(env, config, files):
    from mkdocs.structure.pages import Page

    kept = getattr(Page.render, "kept", None)
    if kept is not None:
        env.bytecode_cache = kept.templates
    return env
