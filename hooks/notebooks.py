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

A code cell's ``<pre>``, its copy button's hidden copy of the source and "Copied!" carry ``data-search-exclude``, which
Material's search plugin honours (material/plugins/search/plugin.py, 9.8.2), so a search finds a
notebook by its words, not by ``import sys``. The innermost elements carry it, not the cell's
``<div>``: that plugin matches elements by tag, so the first inner ``</div>`` would end the exclusion.
"""

import re

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


def on_page_content(html, page, config, files):
    if page.file.src_uri.endswith(".ipynb"):
        html = LOADERS.sub("", html)
        html = CODE.sub(r"\g<0> data-search-exclude", html)
        html = LESSON.sub(lambda m: f'href="../../lessons/{m.group(1)}/{m.group(2) or ""}"', html)
        return ANCHOR.sub(r'<a class="headerlink" href="\1" title="Permanent link">', html)
    return html
