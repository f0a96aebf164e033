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

# hooks/reload.py: MkDocs puts a hook's folder on sys.path while loading it
from reload import to_wrap

ADD_ENTRY = "material.plugins.search.plugin:SearchIndex.add_entry_from_context"
"""What this hook wraps: Material's method that indexes one page for search."""


def on_startup(command, dirty):
    found = to_wrap(command, "search_cache.py", ADD_ENTRY)  # None: not `mkdocs serve`, SERVE_CACHES=off, or done
    if found is None:
        return
    SearchIndex, add = found
    kept: dict[str, tuple[str, list[dict]]] = {}  # page address -> (key, its entries)

    def cached(self, page):
        key = hashlib.sha256(repr((page.url, page.title, sorted(page.meta.items()), page.content)).encode()).hexdigest()
        if kept.get(page.url, ("",))[0] != key:
            before = len(self.entries)
            add(self, page)
            kept[page.url] = (key, copy.deepcopy(self.entries[before:]))
        else:
            self.entries.extend(copy.deepcopy(kept[page.url][1]))

    cached.serve_cache = True
    SearchIndex.add_entry_from_context = cached
