"""MkDocs hook: each line of a listing carries its own indentation (``style="--i:8ch"`` on pymdownx.highlight's
line span), so that where a long line wraps on a narrow screen, its continuation is indented past the line's own
start (``docs/stylesheets/extra.css``), never under the line numbers, and a wrapped Python line keeps its block."""

from __future__ import annotations

import re

LINE = re.compile(r'<span id="(__span-[\d-]+)">((?:<span class="linenos"[^>]*></span>)?)( +)')
"""The start of a listing line (``line_spans: __span`` in mkdocs.yml) with its line number and leading spaces."""


def indent_lines(html: str) -> str:
    """``html`` with every listing line that starts with spaces marked with their count (``--i``, in ``ch``)."""
    return LINE.sub(lambda m: f'<span id="{m[1]}" style="--i:{len(m[3])}ch">{m[2]}{m[3]}', html)


def on_page_content(html, page, config, files):
    return indent_lines(html)
