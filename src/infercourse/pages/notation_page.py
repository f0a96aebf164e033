"""Values of the Notation page: the course's one table of symbols (``notation.yml``)."""

from __future__ import annotations

from infercourse import course, notation
from infercourse.pages import PageValues

P = PageValues("notation.md")
P.add(
    "symbol_rows",
    [{**row, "first_label": course.lesson_label(row["first_page"])} for row in notation.table_rows()],
    "record",
)
