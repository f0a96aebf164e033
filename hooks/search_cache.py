"""MkDocs hook: under `mkdocs serve`, a rebuild re-indexes for search only the pages whose HTML changed.

Material's search plugin parses every page's HTML on every build (its formulas, figures and diagrams are
thousands of elements: about a third of a rebuild after a prose edit). While serving, this hook keeps each
page's search entries keyed by what they are made from (the page's address, title, front matter and
HTML) and reuses them when none of that changed, so the index is the one a full parse would give.
`mkdocs build` (and so every test and the published site) parses every page: the cache lives only in the
serving process.

It wraps ``SearchIndex.add_entry_from_context`` of Material's search plugin (mkdocs-material 9.8; the
build fails loudly if it moves).
"""

from __future__ import annotations

import copy
import hashlib

from mkdocs.exceptions import PluginError
from reload import caches_on  # hooks/reload.py: MkDocs puts a hook's folder on sys.path while loading it


def on_startup(command, dirty):
    if not caches_on(command):  # `mkdocs serve` only, and SERVE_CACHES=off turns every cache off
        return
    try:
        from material.plugins.search.plugin import SearchIndex
    except ImportError as error:
        raise PluginError(f"hooks/search_cache.py: Material's search moved ({error}); update the hook") from error
    add = getattr(SearchIndex, "add_entry_from_context", None)
    if add is None:
        raise PluginError("hooks/search_cache.py: no SearchIndex.add_entry_from_context in Material; update the hook")
    if getattr(add, "cached", False):
        return
    kept: dict[str, tuple[str, list[dict]]] = {}  # page address -> (key, its entries)

    def cached(self, page):
        key = hashlib.sha256(repr((page.url, page.title, sorted(page.meta.items()), page.content)).encode()).hexdigest()
        if kept.get(page.url, ("",))[0] != key:
            before = len(self.entries)
            add(self, page)
            kept[page.url] = (key, copy.deepcopy(self.entries[before:]))
        else:
            self.entries.extend(copy.deepcopy(kept[page.url][1]))

    cached.cached = True
    SearchIndex.add_entry_from_context = cached
