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
"""

import re

LOADERS = re.compile(
    r'<script src="">\s*</script>'  # MathJax, with mkdocs-jupyter's empty URL
    r'|<script type="text/x-mathjax-config">.*?</script>'
    r'|<script type="module">(?:(?!</script>).)*?mermaid.*?</script>',
    re.DOTALL,
)

ANCHOR = re.compile(r'<a class="anchor-link" href="(#[^"]*)">')


def on_page_content(html, page, config, files):
    if page.file.src_uri.endswith(".ipynb"):
        html = LOADERS.sub("", html)
        return ANCHOR.sub(r'<a class="headerlink" href="\1" title="Permanent link">', html)
    return html
