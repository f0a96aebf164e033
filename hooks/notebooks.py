"""MkDocs hook: a lab notebook's page (mkdocs-jupyter) loads nothing from a CDN, and its headings' links
are the site's.

nbconvert's HTML template, which mkdocs-jupyter extends, writes a MathJax loader (with mkdocs-jupyter's
default ``custom_mathjax_url`` an empty ``<script src="">`` and its ``text/x-mathjax-config``) and a
module that imports mermaid from cdnjs when the page has a mermaid output. The lab notebooks have
neither formulas nor diagrams, and the site typesets formulas at build time and serves its own
mermaid; so both loaders are removed from every notebook page. ``tests/test_notebooks.py`` checks the
built pages for any CDN address.

nbconvert marks a heading's permalink ``class="anchor-link"``; it becomes the theme's ``headerlink``,
which looks like every other page's and which the search index leaves out of section titles (else
every notebook section would be found as "1. Preflight¶").

A notebook links to its lesson as the repository's Markdown file, ``../lessons/<page>.md``, which
JupyterLab opens from ``docs/notebooks/``; on the site that link becomes the lesson's page.

A formula in a markdown cell, written as Jupyter writes it, ``$...$`` inline and ``$$...$$`` on its own, becomes
the site's ``arithmatex`` span or block, which ``hooks/math.py`` then typesets with KaTeX like every lesson's (this
hook must come before it in ``mkdocs.yml``). ``\\(...\\)`` and ``\\[...\\]``, the lessons' spelling, do not survive
a notebook's Markdown (it takes the backslash as an escape and shows "(y^2)"), so a markdown cell holding one fails
the build with the notebook, the cell and the fix. A notebook's link to a page of the site that does not exist,
or to an anchor its page lacks, fails the build too (MkDocs checks only Markdown pages' links). A display formula
becomes a ``<span>`` too (it sits inside the cell's ``<p>``); its ``\\[`` delimiter makes it a display formula.

An output image (the figure of a notebook run, hooks/notebook_outputs.py) takes as its text alternative the
caption line right before it ("Figure: ...", written by ``infercourse.labnotebook.show``), not nbconvert's "No
description has been provided for this image"; an image with no caption before it fails the build.

Of the stylesheets mkdocs-jupyter inlines (JupyterLab's, 575 kB, on every notebook page), each page keeps only the
rules an element of its own can match and the custom properties those read (:func:`used_css`): about 17 kB.

An output image is written beside its page (``output-<n>.png``) and loaded lazily, not inlined as base64.

A code cell's source box scrolls sideways on a phone, so it takes ``tabindex="0"`` (a keyboard scrolls it too).

A code cell's ``<pre>``, its copy button's hidden copy of the source and "Copied!" carry ``data-search-exclude``, which
Material's search plugin honours (material/plugins/search/plugin.py, 9.8.2), so a search finds a
notebook by its words, not by ``import sys``. The innermost elements carry it, not the cell's
``<div>``: that plugin matches elements by tag, so the first inner ``</div>`` would end the exclusion.
"""

import base64
import itertools
import json
import posixpath
import re
import struct
from pathlib import Path

from mkdocs.exceptions import PluginError

from infercourse.labnotebook import FIGURE

LOADERS = re.compile(
    r'<script src="">\s*</script>'  # MathJax, with mkdocs-jupyter's empty URL
    r'|<script type="text/x-mathjax-config">.*?</script>'
    r'|<script type="module">(?:(?!</script>).)*?mermaid.*?</script>',
    re.DOTALL,
)

CODE = re.compile(
    r'<div class="highlight-ipynb hl-\w+"><pre(?=>)'  # a code cell's source, highlighted
    r'|<div class="clipboard-copy-txt" id="[^"]*"(?=>)'  # the same source, for the copy button
    r'|<span class="notice" hidden=""(?=>Copied!)'  # the copy button's notice
)
"""The parts of a code cell left out of the search index."""
SCROLLS = re.compile(r'<div class="highlight-ipynb hl-\w+"(?=>)')
"""A code cell's source box, which scrolls sideways on a phone: focusable, so a keyboard scrolls it too."""

LESSON = re.compile(r'href="\.\./lessons/([^"#]+)\.md(#[^"]*)?"')
"""A notebook's link to its lesson's Markdown file (``../lessons/<page>.md``, which opens in JupyterLab)."""

ANCHOR = re.compile(r'<a class="anchor-link" href="(#[^"]*)">')


MARKDOWN_CELL = re.compile(r'(<div class="[^"]*jp-RenderedMarkdown[^"]*"[^>]*>)(.*?)(</div>)', re.DOTALL)
"""A markdown cell's rendered HTML (nbconvert's ``jp-RenderedMarkdown``), which holds no ``<div>`` of its own."""
DISPLAY = re.compile(r"(?<!\\)\$\$(.+?)(?<!\\)\$\$", re.DOTALL)
INLINE = re.compile(r"(?<![\\$])\$(?=\S)(.+?)(?<=\S)(?<![\\$])\$(?!\d)", re.DOTALL)
"""``$$...$$`` and ``$...$`` as nbconvert leaves them (a ``$`` followed by a digit after the closing one is a price,
not math: "$5 and $6")."""
CODE_SPAN = re.compile(r"<(code|pre)\b.*?</\1>", re.DOTALL)
LATEX_DELIMITERS = re.compile(r"\\[(\[]")
"""What a cell's Markdown source may not hold outside code: ``\\(`` or ``\\[`` (see the module's docstring)."""
NO_ALT = ' alt="No description has been provided for this image"'
"""What nbconvert writes on an output image that has no text alternative (nbconvert/exporters/html.py, 7.x)."""
CAPTIONED = re.compile(rf"(<p>{FIGURE}(.*?)</p>(?:(?!<p>{FIGURE}).)*?<img){NO_ALT}", re.DOTALL)
"""An output image after its caption line (:func:`infercourse.labnotebook.show` writes it right before)."""
HREF = re.compile(r'href="([^"#:]+\.md)(#[^"]*)?"')
_links: list[tuple[str, str, str]] = []


def check_cells(notebook: dict, name: str) -> None:
    """Refuse a markdown cell of ``notebook`` (its JSON) that spells a formula ``\\(...\\)`` or ``\\[...\\]``.

    Raises:
        PluginError: naming the notebook ``name``, the cell (1-based) and the fix.
    """
    for number, cell in enumerate(notebook.get("cells", []), 1):
        if cell.get("cell_type") != "markdown":
            continue
        source = "".join(cell.get("source", []))
        prose = re.sub(r"`[^`]*`", "", source)
        if LATEX_DELIMITERS.search(prose):
            raise PluginError(
                f"{name}, cell {number}: a formula written \\(...\\) or \\[...\\] loses its backslashes in a "
                "notebook's Markdown; write it $...$ (inline) or $$...$$ (display), as Jupyter does"
            )


def typeset_cells(html: str) -> str:
    """Mark each formula of each markdown cell in ``html`` (a notebook page) as the site's arithmatex span or block,
    for ``hooks/math.py``; code spans and blocks are left alone."""

    def cell(m: re.Match) -> str:
        parts, last = [], 0
        for code in CODE_SPAN.finditer(m.group(2)):
            parts += [_formulas(m.group(2)[last : code.start()]), code.group(0)]
            last = code.end()
        parts.append(_formulas(m.group(2)[last:]))
        return m.group(1) + "".join(parts) + m.group(3)

    return MARKDOWN_CELL.sub(cell, html)


def _formulas(text: str) -> str:
    text = DISPLAY.sub(lambda m: f'<span class="arithmatex">\\[{m.group(1)}\\]</span>', text)  # inside a <p>
    return INLINE.sub(lambda m: f'<span class="arithmatex">\\({m.group(1)}\\)</span>', text)


def notebook_links(html: str, src_uri: str) -> list[tuple[str, str]]:
    """``(docs-relative Markdown file, anchor)`` of every link from a notebook page's cells to another page."""
    folder = posixpath.dirname(src_uri)
    return [
        (posixpath.normpath(posixpath.join(folder, m.group(1))), (m.group(2) or "").lstrip("#"))
        for m in HREF.finditer(html)
    ]


CLASS, ID = re.compile(r"\.(-?[_a-zA-Z][\w-]*)"), re.compile(r"#(-?[_a-zA-Z][\w-]*)")
NOT = re.compile(r":(?:not|is|where|has)\([^()]*\)")
"""A selector's parts that need not all be on the page for it to match: ``:not(.a)``, ``:is(.a, .b)``..."""
VAR = re.compile(r"var\(\s*(--[\w-]+)")
STYLE = re.compile(r"(<style[^>]*>)(.*?)(</style>)", re.DOTALL)
WORDS = re.compile(r'\s(class|id)="([^"]*)"')


def _selector_used(selector: str, names: dict[str, set[str]]) -> bool:
    """Whether every class and id ``selector`` asks for (outside ``:not(...)``, ``:is(...)``...) is in the content
    of the page (PurgeCSS's rule); a selector under ``:root`` that is not the page's root (``.w :root``) never is.
    Attributes do not count: the theme sets some outside the content (``data-md-color-scheme`` on ``<body>``)."""
    if re.search(r"\S\s*:root", selector):
        return False
    bare = NOT.sub("", selector)
    return set(CLASS.findall(bare)) <= names["class"] and set(ID.findall(bare)) <= names["id"]


def _rules(nodes, names: dict[str, set[str]]) -> list:
    """The style rules of ``nodes`` (tinycss2) some element of the page can match: (selectors, declarations) and
    (``@media ...``, rules inside). Other at-rules (keyframes, font faces) are dropped: no notebook page uses one."""
    import tinycss2

    kept: list = []
    for node in nodes:
        if node.type == "qualified-rule":
            selectors, current = [], []  # split at the top level's commas (tinycss2 nests ":is(a, b)" in a token)
            for token in [*node.prelude, None]:
                if token is None or (token.type == "literal" and token.value == ","):
                    selectors.append(tinycss2.serialize(current).strip())
                    current = []
                else:
                    current.append(token)
            used = [s for s in selectors if _selector_used(s, names)]
            if used:
                body = tinycss2.parse_declaration_list(node.content, skip_whitespace=True, skip_comments=True)
                kept.append((",".join(used), [d for d in body if d.type == "declaration"]))
        elif node.type == "at-rule" and node.lower_at_keyword in ("media", "supports") and node.content:
            inner = _rules(tinycss2.parse_rule_list(node.content, skip_whitespace=True, skip_comments=True), names)
            if inner:
                kept.append((f"@{node.at_keyword}{tinycss2.serialize(node.prelude)}", inner))
    return kept


def _declarations(rules: list):
    for head, body in rules:
        yield from _declarations(body) if head.startswith("@") else body


def used_css(css: str, html: str) -> str:
    """``css`` less what no element of ``html`` can use: rules whose selectors name a class or id the page lacks,
    and custom properties (``--jp-...``) that no kept declaration reads, directly or through another.

    mkdocs-jupyter inlines JupyterLab's whole stylesheet (575 kB, 4,520 selectors) on every notebook page; a phone
    spent half a second of main-thread time styling with it (Lighthouse, mobile: total blocking time 540 ms against
    190 ms, performance 49 against 82, on one machine). What a page uses is about 17 kB.
    """
    import tinycss2

    names: dict[str, set[str]] = {"class": set(), "id": set()}
    for kind, value in WORDS.findall(STYLE.sub("", html)):
        names[kind].update(value.split() if kind == "class" else [value])
    rules = _rules(tinycss2.parse_stylesheet(css, skip_whitespace=True, skip_comments=True), names)
    read: set[str] = set()
    grew = True
    while grew:  # a custom property read by a kept declaration may itself read others
        before = len(read)
        for d in _declarations(rules):
            if not d.name.startswith("--") or d.name in read:
                read.update(VAR.findall(tinycss2.serialize(d.value)))
        grew = len(read) > before

    def write(rules: list) -> str:
        out = []
        for head, body in rules:
            if head.startswith("@"):
                inner = write(body)
                out.append(f"{head}{{{inner}}}" if inner else "")
                continue
            kept = [
                f"{d.name}:{tinycss2.serialize(d.value).strip()}{'!important' if d.important else ''}"
                for d in body
                if not d.name.startswith("--") or d.name in read
            ]
            out.append(f"{head}{{{';'.join(kept)}}}" if kept else "")
        return "".join(out)

    return write(rules)


def _attribute(html: str) -> str:
    """The text of an HTML fragment, as an attribute's value (tags dropped, its entities kept, quotes escaped)."""
    return re.sub(r"<[^>]+>", "", html).replace('"', "&quot;")


def on_page_content(html, page, config, files):
    if page.file.src_uri.endswith(".ipynb"):
        check_cells(json.loads(Path(page.file.abs_src_path).read_text(encoding="utf-8")), page.file.src_uri)
        for target, anchor in notebook_links(html, page.file.src_uri):
            _links.append((page.file.src_uri, target, anchor))
        html = CAPTIONED.sub(lambda m: f'{m.group(1)} alt="{_attribute(m.group(2))}"', html)
        if NO_ALT in html:
            raise PluginError(f"{page.file.src_uri}: an output image has no '{FIGURE}' line before it (its alt text)")
        sheets = [m.group(2) for m in STYLE.finditer(html)]  # one stylesheet: a block reads another's properties
        html = STYLE.sub("", html) + f"<style>{used_css(''.join(sheets), html)}</style>"
        html = typeset_cells(html)
        html = LOADERS.sub("", html)
        html = CODE.sub(r"\g<0> data-search-exclude", html)
        html = SCROLLS.sub(r'\g<0> tabindex="0"', html)
        html = LESSON.sub(lambda m: f'href="../../lessons/{m.group(1)}/{m.group(2) or ""}"', html)
        return ANCHOR.sub(r'<a class="headerlink" href="\1" title="Permanent link">', html)
    return html


INLINE_PNG = re.compile(r'src="data:image/png;base64,([A-Za-z0-9+/=\s]+)"')


def on_post_page(output, page, config):
    """A notebook page's output images (nbconvert inlines each as base64: 60-200 kB of the page's HTML) become files
    beside the page, ``output-<n>.png``, loaded lazily with their size given (the page does not move as they load)."""
    if not page.file.src_uri.endswith(".ipynb"):
        return output
    folder = Path(config.site_dir) / Path(page.file.dest_uri).parent
    count = itertools.count(1)

    def to_file(match: re.Match) -> str:
        png = base64.b64decode(match.group(1))
        name = f"output-{next(count)}.png"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(png)
        width, height = struct.unpack(">II", png[16:24])  # the PNG header's IHDR chunk
        return f'src="{name}" width="{width}" height="{height}" loading="lazy" decoding="async"'

    return INLINE_PNG.sub(to_file, output)


def on_post_build(config):
    """Fail the build on a notebook's link to a missing page, or to an anchor its built page lacks."""
    site, docs = Path(config.site_dir), Path(config.docs_dir)
    bad = []
    for notebook, target, anchor in _links:
        if not (docs / target).is_file():
            bad.append(f"{notebook} links {target}, which is not a page of the site")
            continue
        built = site / Path(target).with_suffix("") / "index.html"
        if anchor and built.is_file() and f'id="{anchor}"' not in built.read_text(encoding="utf-8"):
            bad.append(f"{notebook} links {target}#{anchor}, an anchor that page does not have")
    _links.clear()
    if bad:
        raise PluginError("; ".join(bad))
