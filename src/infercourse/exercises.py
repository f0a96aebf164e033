"""A lab notebook's exercises: a question about the lab's model, card or settings (most change one of them),
and the answer the course's own functions give. A lab's spec declares them (``EXERCISES`` in
``infercourse/labs/<lab>.py``); the notebook lists them in its "Predict first" section and
:func:`infercourse.labnotebook.check_answers` checks the reader's numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Exercise:
    """One exercise of a lab's notebook: the reader works out a number about the lab (most often with one setting
    changed from the lesson's), and the notebook checks it against the course's own model
    (:func:`infercourse.labnotebook.check_answers`).

    Attributes:
        question: Markdown: which setting changes, from what to what, and what number is asked for (its values
            formatted from the same constants ``answer`` uses, never typed twice).
        answer: computes the answer with the course's functions (no vLLM, no GPU), in ``unit``.
        unit: the answer's unit as the question asks for it (``"steps"``, ``"tokens"``, ``"ms"``, ``"%"``,
            ``"times"`` for a ratio).
        why: Markdown shown with the answer: the arithmetic behind it and the lesson section that teaches it.
        rel_tol: how close an answer must be to count as right: 0 for an exact count, 0.05 for within 5 %.

    Raises:
        ValueError: ``rel_tol`` is negative or 1 or more.
    """

    question: str
    answer: Callable[[], float]
    unit: str
    why: str
    rel_tol: float = 0.0

    def __post_init__(self) -> None:
        if not 0 <= self.rel_tol < 1:
            raise ValueError(f"rel_tol is a fraction in [0, 1), got {self.rel_tol!r}")
