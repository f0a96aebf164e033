"""MkDocs hook: on the glossary page itself, a term used in another entry links to that entry instead of
carrying its tooltip (:func:`infercourse.glossary.link_terms`)."""

from __future__ import annotations


def on_page_content(html, page, config, files):
    if page.file.src_uri != "glossary.md":
        return html
    from infercourse import glossary  # imported per build: hooks/reload.py re-imports src/infercourse

    return glossary.link_terms(html)
