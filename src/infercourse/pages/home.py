"""Values of the home page: the learning path (each lesson with its reading time and its lab's minutes and yuan on
the lab card), the lab card, and whether any GPU receipt is committed yet."""

from __future__ import annotations

from infercourse import course, labbox, labs, registry
from infercourse.pages import PageValues

P = PageValues("index.md")
P.add("vllm_gpu_version", registry.VLLM_GPU_VERSION, "text")
P.add("lab_gpu", registry.gpu(registry.LAB_GPU), "record")


def _lesson(lesson: dict) -> dict:
    """A lesson of the path as the home page lists it: course.yml's fields, and for a live lesson ``read_min``
    (:func:`infercourse.course.reading_minutes`), and for one with a lab ``lab_min`` and ``lab_cny`` (the lab's
    own run on the lab card, the estimate of scripts/run_labs.py: :func:`infercourse.labbox.lab_minutes`)."""
    row = {**lesson, "read_min": course.reading_minutes(lesson["page"]) if lesson["page"] else None}
    if lesson["page"] and lesson["lab"]:
        row["lab_min"] = labbox.lab_minutes(lesson["lab"])["run"]
        row["lab_cny"] = labbox.lab_cny(lesson["lab"], row["lab_min"])
    return row


P.add("parts", [{**part, "lessons": [_lesson(x) for x in part["lessons"]]} for part in course.parts()], "record")
P.add("no_gpu_receipts", not labs.gpu_receipts(), "record")
