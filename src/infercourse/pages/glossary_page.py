"""Values of the glossary page: its entries, each with the label of the lesson that teaches it."""

from __future__ import annotations

from infercourse import course, glossary
from infercourse.pages import PageValues, fact_link

P = PageValues("glossary.md")
P.add(
    "entries",
    [
        {
            **e,
            "lesson_label": course.lesson_label(e["lesson"]) if e["lesson"] else None,
            "source": fact_link(e["fact"], "") if e["fact"] else None,
        }
        for e in glossary.entries()
    ],
    "record",
)
