"""What a hook draws at build time (KaTeX's MathML for a formula, mermaid's SVG for a diagram), kept between builds
in one JSON file under ``.cache/``, keyed by a hash of the input and the tool's version.

Not a hook itself: ``hooks/math.py`` and ``hooks/diagrams.py`` import it (MkDocs puts a hook's folder on
``sys.path`` while loading it). A build loads the file (:meth:`BuildCache.load`), looks entries up and stores
what it draws, marks the keys its pages use (:attr:`BuildCache.used`), and at its end writes back exactly those
(:meth:`BuildCache.save`): an entry a page no longer uses leaves the file.
"""

from __future__ import annotations

import json
from pathlib import Path


class BuildCache(dict):
    """``{key: drawn text}`` of one JSON file; storing an entry marks the cache to be written."""

    def __init__(self) -> None:
        super().__init__()
        self.file: Path | None = None
        self.used: set[str] = set()
        self.dirty = False

    def load(self, file: Path) -> None:
        """Start a build: the entries of ``file`` (none where it does not exist yet); no key used so far."""
        self.clear()
        self.file, self.used, self.dirty = file, set(), False
        if file.is_file():
            self.update(json.loads(file.read_text(encoding="utf-8")))

    def __setitem__(self, key: str, value: str) -> None:
        super().__setitem__(key, value)
        self.dirty = True

    def save(self) -> None:
        """End a build: write the file, keeping only the entries this build used, when it drew something or
        no longer uses an entry; then start counting the next build's keys."""
        if self.file is not None and (self.dirty or self.used != self.keys()):
            kept = {key: self[key] for key in self.used}
            self.file.parent.mkdir(parents=True, exist_ok=True)
            self.file.write_text(json.dumps(kept, sort_keys=True), encoding="utf-8")
            self.clear()
            self.update(kept)
            self.dirty = False
        self.used = set()
