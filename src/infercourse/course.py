"""The learning path (``course.yml``): parts and lessons, live or planned, for the home page and links."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml

SOURCE = Path(__file__).with_name("course.yml")


@cache
def parts() -> list[dict]:
    """Parts in reading order, each ``{"part": str, "lessons": [{"code", "title", "teaches", "page"}]}`; ``page`` is None for a planned lesson`.

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
    return items


def lesson_label(page: str) -> str:
    """``"Lesson 0A · Inference Flow: Prefill & Decode"`` for a live lesson's page (an anchor is ignored).

    Raises:
        KeyError: no live lesson has that page.
    """
    path = page.split("#")[0]
    for part in parts():
        for lesson in part["lessons"]:
            if lesson.get("page") == path:
                return f"Lesson {lesson['code']} · {lesson['title']}"
    raise KeyError(f"no live lesson at {path!r}; live pages are set in {SOURCE.name}")
