"""Values of lesson <code> (<title>): copy to src/infercourse/pages/lesson_<code>.py (lower-case code).

Every number the page shows is bound here once, with its unit (infercourse.pages.UNITS), from the
registry and the formula modules; the page only looks the names up and formats them. `lesson_values`
binds what every lesson shows (baseline, and from course.yml's `lab:` the lab box and the expected output).
"""

from __future__ import annotations

from infercourse import registry, transformer
from infercourse.pages import lesson_values

P = lesson_values(__name__)

cfg = registry.model(registry.COURSE_MODEL).config
P.add("N", transformer.param_count(cfg), "params")
P.add("L", cfg["num_hidden_layers"], "count")
SYMBOLS: list[str | tuple[str, str]] = ["N", "L"]  # ids in notation.yml; test_notation reads SYMBOLS
P.symbols(SYMBOLS)
# the registry facts the page uses, by id (registry.facts()), shown in the registry's own words and linked;
# the course model's and the lab card's come first without being named
P.facts("vllm-block-size")
