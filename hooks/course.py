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


def on_config(config):
    nav = config.nav or []
    if PLACEHOLDER not in nav:
        raise PluginError(f"mkdocs.yml nav needs a '- {PLACEHOLDER}' entry where the lessons go (hooks/course.py)")
    at = nav.index(PLACEHOLDER)
    config.nav = [*nav[:at], *course.nav(), *course.notebook_nav(), *nav[at + 1 :]]
    return config
