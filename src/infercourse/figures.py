"""Build-time figures: matplotlib set up once (no display), and a figure as SVG text a page can embed.

A figure is a plotting function of matplotlib axes, ``plot(ax)``, from a page module or a lesson snippet
(whose ``plot`` draws on axes it is given, so that a learner's copy draws the same figure). A page binds
it with :meth:`infercourse.pages.PageValues.figure`, which draws it here (:func:`plot_svg`) when the page is
written.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any


def subplots(*args, salt: str, **kwargs):
    """``matplotlib.pyplot.subplots(*args, **kwargs)`` on the Agg backend (files only, no window):
    ``(figure, axes)``. The one place the build sets matplotlib up.

    ``salt`` (the figure's name, e.g. ``"lesson-5a-ttft"``) seeds the ids of the SVG's elements, so that a
    figure has the same bytes on every build and two figures on one page never share an id (matplotlib's
    ``svg.hashsalt``; unset, it draws random ids)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = salt
    return plt.subplots(*args, **kwargs)


def svg_text(fig) -> str:
    """Lay out ``fig`` (from :func:`subplots`), render it as SVG without a date (the same bytes on every
    build), close it, and return the ``<svg>`` element without the XML prolog, ready to sit inside HTML."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    plt.close(fig)
    svg = buffer.getvalue()
    return svg[svg.index("<svg") :]


def plot_svg(plot: Callable[[Any], None], *, salt: str, figsize=(7, 3.6), **subplots_kw) -> str:
    """``plot(ax)`` drawn on fresh axes (:func:`subplots`; ``subplots_kw`` such as ``nrows=2, sharex=True``
    give an array of axes instead), as SVG text (:func:`svg_text`). ``figsize`` in inches; ``salt`` as in
    :func:`subplots`."""
    fig, ax = subplots(figsize=figsize, salt=salt, **subplots_kw)
    plot(ax)
    return svg_text(fig)


class Drawing:
    """A page's figure, drawn the first time the page writes it (its ``str``), not when the page's values are
    computed: the fast tests compute every page's values and write none of its figures.

    ``draw``: a function of no argument that returns the figure as SVG text (:func:`svg_text`).
    """

    def __init__(self, draw: Callable[[], str]) -> None:
        self._draw = draw
        self._svg: str | None = None

    def __str__(self) -> str:
        if self._svg is None:
            self._svg = self._draw()
        return self._svg
