"""MkDocs hook: the lessons' navigation, from ``src/infercourse/course.yml``.

``mkdocs.yml``'s ``nav`` holds the pages that are not lessons and one entry, :data:`PLACEHOLDER`,
where this hook puts the live lessons by part, each as "0A · <title>", then the lab notebooks
(``docs/notebooks/``, one per lesson with a lab). That nav title is the
page's title too (Material writes it as the page heading and in ``<title>``), so a lesson page has
no ``title:`` front matter and no ``# heading`` of its own; ``tests/test_course.py`` holds that.
"""

from mkdocs.exceptions import PluginError

from infercourse import course

PLACEHOLDER = "course.yml"
LESSON_SEARCH_BOOST = 4
"""Material's search boost of every lesson page (front matter ``search: boost:``, set here for all of them):
a reader who searches a topic ("KV cache") gets the lesson that teaches it before the reference pages that
mention it more often (Facts, Receipts). Measured 2026-12-05: with no boost or 2, "KV cache" listed Facts
first; with 4, lesson 1A. tests/test_browser.py holds it for three topics."""


def on_config(config):
    nav = config.nav or []
    if PLACEHOLDER not in nav:
        raise PluginError(f"mkdocs.yml nav needs a '- {PLACEHOLDER}' entry where the lessons go (hooks/course.py)")
    at = nav.index(PLACEHOLDER)
    config.nav = [*nav[:at], *course.nav(), *course.notebook_nav(), *nav[at + 1 :]]
    return config


def on_page_markdown(markdown, page, **kwargs):
    if page.file.src_uri.startswith("lessons/"):
        page.meta.setdefault("search", {}).setdefault("boost", LESSON_SEARCH_BOOST)
    return markdown
