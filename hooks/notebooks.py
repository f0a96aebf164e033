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

A code cell's ``<pre>``, its copy button's hidden copy of the source and "Copied!" carry ``data-search-exclude``, which
Material's search plugin honours (material/plugins/search/plugin.py, 9.8.2), so a search finds a
notebook by its words, not by ``import sys``. The innermost elements carry it, not the cell's
``<div>``: that plugin matches elements by tag, so the first inner ``</div>`` would end the exclusion.
"""

import json
import posixpath
import re
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
        html = typeset_cells(html)
        html = LOADERS.sub("", html)
        html = CODE.sub(r"\g<0> data-search-exclude", html)
        html = LESSON.sub(lambda m: f'href="../../lessons/{m.group(1)}/{m.group(2) or ""}"', html)
        return ANCHOR.sub(r'<a class="headerlink" href="\1" title="Permanent link">', html)
    return html


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
