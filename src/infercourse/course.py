"""The learning path (``course.yml``): parts and lessons, live or planned.

``course.yml`` is the one place a lesson's code, title, page, part and lab are written. The home
page lists it (:func:`parts`), ``hooks/course.py`` builds the site's lesson navigation from it
(:func:`nav`) and gives each lesson page its title, and the tests read it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml

SOURCE = Path(__file__).with_name("course.yml")


@cache
def parts() -> list[dict]:
    """Parts in reading order, each ``{"part": str, "lessons": [{"code", "title", "teaches", "page", "lab"}]}``.

    ``page`` (docs-relative) is None for a planned lesson; ``lab`` (a script name under
    ``snippets/labs/`` without ``.py``) is None for a lesson without a lab.

    Raises:
        ValueError: a lesson lacks ``code``, ``title`` or ``teaches``, or a code repeats.
    """
    items = yaml.safe_load(SOURCE.read_text(encoding="utf-8"))
    codes: set[str] = set()
    for part in items:
        for lesson in part["lessons"]:
            missing = {"code", "title", "teaches"} - lesson.keys()
            if missing:
                raise ValueError(f"{SOURCE.name}: lesson {lesson!r} lacks {sorted(missing)}")
            if lesson["code"] in codes:
                raise ValueError(f"{SOURCE.name}: lesson code {lesson['code']!r} repeats")
            codes.add(lesson["code"])
            lesson.setdefault("page", None)
            lesson.setdefault("lab", None)
    return items


def live_lessons() -> list[dict]:
    """Every lesson with a page, in reading order (each as in :func:`parts`)."""
    return [lesson for part in parts() for lesson in part["lessons"] if lesson["page"]]


def lesson_at(page: str) -> dict | None:
    """The live lesson whose page is ``page`` (docs-relative, e.g. ``lessons/0a-prefill-decode.md``), or None."""
    return next((lesson for lesson in live_lessons() if lesson["page"] == page), None)


def nav() -> list[dict]:
    """MkDocs ``nav`` entries for the live lessons: ``[{part: [{"0A · title": page}, ...]}, ...]``.

    Parts without a live lesson are left out.
    """
    entries = []
    for part in parts():
        live = [lesson for lesson in part["lessons"] if lesson["page"]]
        pages = [{f"{lesson['code']} · {lesson['title']}": lesson["page"]} for lesson in live]
        if pages:
            entries.append({part["part"]: pages})
    return entries


def lesson_label(page: str) -> str:
    """``"Lesson 0A · Inference Flow: Prefill & Decode"`` for a live lesson's page (an anchor is ignored).

    Raises:
        KeyError: no live lesson has that page.
    """
    path = page.split("#")[0]
    lesson = lesson_at(path)
    if lesson is None:
        raise KeyError(f"no live lesson at {path!r}; live pages are set in {SOURCE.name}")
    return f"Lesson {lesson['code']} · {lesson['title']}"
