"""mkdocs-macros entry point, confined: a page sees only its own values and the number formats.

Each page's names come from its module in :mod:`infercourse.pages` (``{{ kappa | count }}``);
nothing else is callable from a page. Before rendering, fenced code blocks and TeX formulas
(``\\( \\)``, ``\\[ \\]``, ``$$ $$``) are set aside and put back unchanged afterwards, so Jinja
never sees them: a mermaid hexagon ``A{{x}}``, a shell ``${#A[@]}`` or a TeX ``{{x}}`` is published
as written. Jinja comments are spelled ``<!--# #-->`` (mkdocs.yml), so ``## H {#id}`` is plain
Markdown. Why this plugin is kept and confined rather than replaced: ``docs/adr/0006-page-values.md``.
"""

from __future__ import annotations

import re

from infercourse import fmt
from infercourse.pages import values_for

_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})")
_TEX = re.compile(r"\\\((?:.|\n)*?\\\)|\\\[(?:.|\n)*?\\\]|\$\$(?:.|\n)*?\$\$")
_MARK = "\ue000{}\ue001"  # private-use characters: never in a page, never special to Jinja or Markdown


def protect(markdown: str) -> tuple[str, list[str]]:
    """Replace every fenced code block and TeX formula by a marker; return the text and the originals.

    A fence opens with three or more backticks or tildes (indented or not) and closes at the first
    later line of at least as many of the same character and nothing else; an unclosed fence runs
    to the end, as in Markdown.
    """
    kept: list[str] = []

    def keep(text: str) -> str:
        kept.append(text)
        return _MARK.format(len(kept) - 1)

    out, block, fence = [], [], None
    for line in markdown.splitlines(keepends=True):
        if fence is None:
            opened = _FENCE_OPEN.match(line)
            if opened:
                fence, block = opened.group(1), [line]
            else:
                out.append(line)
            continue
        block.append(line)
        if re.fullmatch(rf"[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*\r?\n?", line):
            out.append(keep("".join(block)))
            fence = None
    if fence is not None:
        out.append(keep("".join(block)))
    return _TEX.sub(lambda m: keep(m.group(0)), "".join(out)), kept


def restore(markdown: str, kept: list[str]) -> str:
    """Put back what :func:`protect` set aside (a marker repeated by a Jinja loop is restored each time)."""
    return re.sub("\ue000(\\d+)\ue001", lambda m: kept[int(m.group(1))], markdown)


_injected: set[str] = set()
_kept: list[str] = []


def on_pre_page_macros(env) -> None:
    """Give the page its own values (and only those), and set its code and TeX aside."""
    global _kept
    for name in _injected:
        env.variables.pop(name, None)
    _injected.clear()
    page = env.page.file.src_path.replace("\\", "/")
    for name, value in values_for(page).items():
        if name in env.variables:
            raise ValueError(f"{page}: page value {name!r} hides mkdocs-macros' own variable; rename it")
        env.variables[name] = value.value
        _injected.add(name)
    env.markdown, _kept = protect(env.markdown)


def on_post_page_macros(env) -> None:
    """Put the page's code blocks and TeX back, exactly as written."""
    env.markdown = restore(env.markdown, _kept)


def define_env(env) -> None:
    """Register the number formats (the only filters a page needs). The page values are those of the
    package as imported: hooks/reload.py imports it afresh when a file under src/, snippets/ or receipts/
    changed, so ``mkdocs serve`` shows an edited page module and a prose edit reuses the values."""
    for name in ("count", "fixed", "gb", "gib", "pct", "ms", "tflop"):
        env.filter(getattr(fmt, name), name)
