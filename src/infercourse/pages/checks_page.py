"""Values of the page on how the course checks itself (``docs/checks.md``): every lab with the lesson that
runs it and the arguments of its CPU run in CI (``scripts/run_labs.py --cpu``), from the labs' specs."""

from __future__ import annotations

import shlex

from infercourse import course, labs, registry
from infercourse.pages import PageValues

P = PageValues("checks.md")

SECTIONS = ("weights", "quant_nll", "continuous_batching")
"""The labs this page gives a section of their own, whose id is the lab's name."""

_pages = {lesson["code"]: lesson["page"] for lesson in course.live_lessons()}
P.add(
    "cpu_runs",
    [
        {
            "lab": lab,
            "lesson": course.lesson_label(_pages[spec.lesson]),
            "page": _pages[spec.lesson],
            "args": shlex.join(
                [*(["--max-model-len", str(spec.cpu_max_model_len)] if spec.cpu_max_model_len else []), *spec.cpu_args]
            )
            or "(the lab's defaults)",
            "mode": "compiled (torch.compile)" if spec.cpu_compiled else "eager",
            "section": lab in SECTIONS,
        }
        for lab in (lesson["lab"] for lesson in course.live_lessons() if lesson.get("lab"))  # in course order
        for spec in [labs.spec(lab)]
    ],
    "record",
)
P.add("awq_group", registry.AWQ_GROUP_SIZE, "count")
