"""Page values: every number a page shows, named, computed in Python, each with its unit.

One module per page (:data:`PAGES`), e.g. :mod:`infercourse.pages.lesson_2a`. A module builds a
:class:`PageValues` from the registry and the formulas; the build (:mod:`infercourse.macros`)
hands exactly those names to the page, which only looks them up and formats them
(``{{ kappa | count }}``). A page computes nothing and binds no name: ``tests/test_page_values.py``
parses every page's template and fails on an assignment, arithmetic, a call or a comparison.

Why Python and not Jinja: a name bound twice in a template silently changes every later use
(lesson 2A once printed 8,192 tokens as "0.00 GB"); here :meth:`PageValues.add` refuses a second
binding, and the values are importable, so tests check them against hand arithmetic.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from difflib import get_close_matches
from functools import cache
from types import MappingProxyType
from typing import Any

from infercourse import figures, registry

UNITS = {
    "B": "bytes (the page writes them as GB = 10^9 B or GiB = 2^30 B)",
    "s": "seconds (the page writes them as ms)",
    "1": "a plain ratio or fraction (the page may write it as %)",
    "FLOP": "floating-point operations",
    "FLOP/B": "arithmetic intensity, FLOP per byte",
    "FLOP/s": "floating-point operations per second",
    "B/token": "bytes per token",
    "B/param": "bytes per parameter",
    "params": "a parameter count",
    "tokens": "a token count",
    "sequences": "a count of sequences (requests)",
    "requests/s": "requests per second",
    "tokens/s": "tokens per second",
    "ms": "milliseconds (the lesson 0B example is written in ms)",
    "count": "any other whole count (layers, heads, steps, blocks)",
    "text": "words, a name or a Markdown fragment",
    "record": "a registry record or a list of them (a page reads its fields)",
    "min": "minutes (a time estimate)",
    "CNY": "Chinese yuan (the page writes ¥)",
}
"""The units a page value may carry. The template test allows ``gb``/``gib`` only on ``B``, ``ms``
only on ``s`` and ``pct`` only on ``1``, so a token count can never be printed as gigabytes."""


RATE_UNITS = ("requests/s", "tokens/s")
"""Units of a predicted rate: a page value in one of them says what it asks of the card (``demand``)."""


@dataclass(frozen=True)
class Value:
    """One named page value: ``value`` in ``unit`` (a key of :data:`UNITS`); for a rate, ``demand``: what
    it asks of the card (:class:`infercourse.roofline.Demand`, or several), or a sentence saying why it
    asks nothing of one."""

    value: Any
    unit: str
    demand: Any = None


class PageValues:
    """The named values of one page; a name can be bound once only.

    Args:
        page: the page's path under ``docs/``, e.g. ``"lessons/2a-roofline.md"``.
    """

    def __init__(self, page: str) -> None:
        self.page = page
        self._values: dict[str, Value] = {}

    def add(self, name: str, value: Any, unit: str, demand: Any = None) -> Any:
        """Bind ``name`` to ``value`` in ``unit`` and return ``value`` (for use in later values).

        ``demand``: required for a rate (:data:`RATE_UNITS`) and for no other unit: what the predicted
        rate asks of the card, an :class:`infercourse.roofline.Demand` (or a list of them), which
        ``tests/test_physics.py`` holds to the card's peak and bandwidth; or a sentence saying why the
        value asks nothing of a card (a made-up example, say).

        Raises:
            ValueError: ``name`` is already bound on this page, is not an identifier, ``unit``
                is not one of :data:`UNITS`, or a rate comes without its ``demand``.
        """
        if not name.isidentifier():
            raise ValueError(f"{self.page}: page value name {name!r} is not an identifier")
        if name in self._values:
            raise ValueError(f"{self.page}: {name!r} is bound twice; give the second value its own name")
        if unit not in UNITS:
            raise ValueError(f"{self.page}: {name!r} has unit {unit!r}; use one of {', '.join(UNITS)}")
        if (unit in RATE_UNITS) != (demand is not None):
            raise ValueError(
                f"{self.page}: {name!r} is in {unit}: "
                + (
                    "a predicted rate must say what it asks of the card; pass demand=roofline.Demand(...) "
                    "(e.g. roofline.serving_demand or decode_demand), or a sentence saying why it asks nothing"
                    if demand is None
                    else f"only a rate ({', '.join(RATE_UNITS)}) takes a demand"
                )
            )
        self._values[name] = Value(value, unit, demand)
        return value

    def figure(
        self, name: str, plot: Callable[[Any], None], alt: str | None = None, figsize=(7, 3.6), **subplots_kw
    ) -> None:
        """Bind ``name`` to the figure ``plot(ax)`` draws (a function of matplotlib axes; ``figsize`` in inches,
        ``subplots_kw`` such as ``ncols=2`` for several axes), drawn as SVG text only when the page is written
        (:class:`infercourse.figures.Drawing`), and, when given, ``<name>_alt`` to ``alt``: the sentence the
        page shows beside it, which says what the figure shows for a reader who cannot see it. The SVG's ids
        are seeded with the page and the name, so two figures never share one.

        Raises:
            ValueError: as :meth:`add`.
        """
        salt = f"{self.page.rpartition('/')[2].removesuffix('.md')}-{name}"
        self.add(
            name, figures.Drawing(lambda: figures.plot_svg(plot, salt=salt, figsize=figsize, **subplots_kw)), "text"
        )
        if alt is not None:
            self.add(f"{name}_alt", alt, "text")

    def add_cards(self) -> tuple[registry.GPUFacts, registry.GPUFacts]:
        """Bind the course's two cards from the registry, ``g4090`` (the RTX 4090 the labs are sized for) and
        ``h200`` (the H200 the lessons compare it with), and return them in that order.

        Raises:
            ValueError: as :meth:`add` (either name is already bound).
        """
        return self.add("g4090", registry.gpu("RTX 4090"), "record"), self.add("h200", registry.gpu("H200"), "record")

    def add_band(self, name: str, band: tuple[float, float], unit: str) -> tuple[float, float]:
        """Bind a band's two ends as ``<name>_lo`` and ``<name>_hi`` in ``unit`` (e.g. lesson 2B's
        :func:`infercourse.roofline.step_band` around a floor) and return them.

        Raises:
            ValueError: as :meth:`add`; or ``band`` is not two values, low first.
        """
        lo, hi = band
        if not lo <= hi:
            raise ValueError(f"{self.page}: band {name!r} runs from {lo!r} down to {hi!r}; give the low end first")
        return self.add(f"{name}_lo", lo, unit), self.add(f"{name}_hi", hi, unit)

    def cpu_receipt(self, lab: str) -> dict[str, Any]:
        """Bind what a lesson shows of its lab's committed CPU receipt and return the receipt: ``cpu_table`` (the
        measured table, :func:`infercourse.labs.measured_table`), ``cpu_claims`` (each claim as checked there:
        holds, FAILS or n/a, with its detail), ``cpu_machine`` and ``cpu_vllm`` (the CPU build's own version).

        Raises:
            LookupError: no CPU receipt of ``lab`` is committed (the message says how to make one).
        """
        from infercourse import labs

        cpu = [r for r in labs.committed_receipts(lab) if r["machine"]["kind"] == "cpu"]
        if not cpu:
            raise LookupError(f"no committed CPU receipt of {lab}: `make labs-cpu LAB={lab} OUT=receipts`")
        receipt = cpu[0]
        table = labs.measured_table(labs.spec(lab), [receipt], intro="**Measured (committed CPU receipt).**")
        self.add("cpu_table", table, "text")
        verdict = {True: "holds", False: "FAILS", None: "n/a"}
        claims = [{"claim": c.claim, "passed": verdict[c.passed], "detail": c.detail} for c in labs.check(receipt)]
        self.add("cpu_claims", claims, "record")
        self.add("cpu_machine", receipt["machine"]["name"], "text")
        self.add("cpu_vllm", receipt["versions"]["vllm"], "text")
        return receipt

    def symbols(self, symbols: list[str | tuple[str, str]]) -> None:
        """Bind ``symbols``: the lesson's table of symbols (:func:`infercourse.notation.symbols_markdown` of
        ``notation.yml`` names, each optionally with a note for this lesson), as Markdown.

        Raises:
            KeyError: a name is not in ``notation.yml``.
        """
        from infercourse import notation

        self.add("symbols", notation.symbols_markdown(symbols), "text")

    def facts(self, *fact_ids: str, extra: tuple[dict, ...] = ()) -> None:
        """Bind ``facts_used``: a lesson's "Facts used" rows (:func:`facts_used`): first the two facts its
        baseline box names (the course model's config and the lab card's datasheet figures), then
        ``fact_ids`` (one already listed is not repeated), then ``extra``.

        Raises:
            KeyError: an id is not a registry fact.
        """
        from infercourse import registry

        baseline = (registry.model_fact_id(registry.COURSE_MODEL), registry.gpu_fact_id(registry.LAB_GPU))
        ids = list(dict.fromkeys((*baseline, *fact_ids)))
        self.add("facts_used", facts_used(*ids, extra=extra), "record")

    def values(self) -> Mapping[str, Value]:
        """All values, by name (read-only)."""
        return MappingProxyType(self._values)


def _pages() -> Mapping[str, str]:
    from infercourse import course

    pages = {
        "index.md": "home",
        "glossary.md": "glossary_page",
        "notation.md": "notation_page",
        "facts.md": "facts_page",
        "autodl.md": "autodl_page",
        "receipts.md": "receipts_page",
        "checks.md": "checks_page",
        "drills.md": "drills_page",
        "adr/0009-vllm-behaviours.md": "adr_0009",
    }
    for part in course.parts():
        for lesson in part["lessons"]:
            if lesson["page"]:
                pages[lesson["page"]] = f"lesson_{lesson['code'].lower()}"
    return MappingProxyType(pages)


PAGES: Mapping[str, str] = _pages()
"""Each page (path under ``docs/``) that shows values, and its module in this package: the reference
pages by name, and every live lesson of ``course.yml`` as ``lesson_<code>`` (lesson 2A: ``lesson_2a``)."""


@cache
def values_for(page: str) -> Mapping[str, Value]:
    """The values of ``page`` (a path under ``docs/``); empty for a page with no module.

    Raises:
        ValueError: as :meth:`PageValues.add`, from the page's module.
    """
    module_name = PAGES.get(page)
    if module_name is None:
        return MappingProxyType({})
    module = importlib.import_module(f"{__name__}.{module_name}")
    return module.P.values()


def lesson_values(module: str) -> PageValues:
    """The values every lesson shows, for the lesson whose page module is ``module`` (its ``__name__``,
    e.g. ``"infercourse.pages.lesson_0a"``); ``course.yml`` gives the lesson's page and lab.

    Binds what every lesson's baseline box names: the pinned vLLM release (``vllm_gpu_version``), the
    course's model (``course_model``) and the lab card (``lab_gpu``); for a lesson with a snippet, ``code``
    (its marked excerpts and a link to the whole file, :func:`infercourse.snippets.excerpts`); and, for a
    lesson with a lab, ``lab_box`` (:func:`infercourse.labbox.lab_box` of the lab's script), ``lab_code``
    (the script's excerpts and link) and ``expected_output`` (:func:`infercourse.labs.expected_output`: the
    prediction and the committed GPU receipts, as Markdown). The page writes ``{{ code }}``,
    ``{{ lab_box }}``, ``{{ lab_code }}`` and ``{{ expected_output }}``.

    Raises:
        KeyError: ``module`` is not ``infercourse.pages.lesson_<code>`` of a live lesson in ``course.yml``.
    """
    from infercourse import course, labbox, labs, registry, snippets

    code = module.rpartition(".lesson_")[2].upper()
    lesson = next((item for item in course.live_lessons() if item["code"] == code), None)
    if lesson is None:
        raise KeyError(f"{module} is not the page module of a live lesson; name it lesson_<code> after course.yml")
    values = PageValues(lesson["page"])
    values.add("vllm_gpu_version", registry.VLLM_GPU_VERSION, "text")
    values.add("course_model", registry.COURSE_MODEL, "text")
    values.add("lab_gpu", registry.gpu(registry.LAB_GPU), "record")
    if lesson["snippet"]:
        values.add("code", snippets.excerpts(lesson["snippet"]), "text")
    if lesson["lab"]:
        values.add("lab_box", labbox.lab_box(f"{lesson['lab']}.py"), "text")
        values.add("lab_code", snippets.excerpts(f"labs/{lesson['lab']}.py"), "text")
        values.add("expected_output", labs.expected_output(lesson["lab"]), "text")
    return values


def gpu_rows(gpus) -> list[dict]:
    """One row per card of ``gpus`` (:class:`~infercourse.registry.GPUFacts`) for a page's table of cards: its
    name, BF16 dense TFLOP/s, bandwidth (GB/s), ridge point (FLOP/B, :func:`infercourse.roofline.ridge_point`)
    and the source of those figures."""
    from infercourse import roofline

    return [
        {
            "name": g.name,
            "bf16_dense_tflops": g.bf16_dense_tflops,
            "bandwidth_gb_s": g.bandwidth_gb_s,
            "ridge": roofline.ridge_point(g),
            "source": g.source,
        }
        for g in gpus
    ]


def facts_used(*fact_ids: str, extra: tuple[dict, ...] = ()) -> list[dict]:
    """A lesson's "Facts used" rows: each registry fact of ``fact_ids`` in the registry's own words (what, value)
    with its source linked to the Facts & sources page, then the ``extra`` rows (``{"what", "value",
    "source"}``) for what the registry does not hold (a lesson's own assumption, a link to another lesson).

    Raises:
        KeyError: an id is not a registry fact (the message lists where to find the ids).
    """
    from infercourse import registry

    by_id = {fact.id: fact for fact in registry.facts()}
    missing = [fact_id for fact_id in fact_ids if fact_id not in by_id]
    if missing:
        hints = [f"{m!r}: did you mean {close[0]!r}?" for m in missing if (close := get_close_matches(m, by_id, 1))]
        raise KeyError(
            f"no registry fact {missing}; the ids are listed by infercourse.registry.facts(). {' '.join(hints)}".strip()
        )
    rows = [{"what": by_id[i].what, "value": by_id[i].value, "source": fact_link(i)} for i in fact_ids]
    return rows + list(extra)


def fact_link(fact_id: str, docs_root: str = "../") -> str:
    """A lesson's "Facts used" source cell: the fact's source, linked to its entry on the Facts & sources page.

    ``docs_root`` is the way from the page to ``docs/`` ("../" from a lesson, "" from a top-level page).

    Raises:
        KeyError: no registry fact has that id.
    """
    from infercourse import registry

    for fact in registry.facts():
        if fact.id == fact_id:
            return f"[{fact.source.where}]({docs_root}facts.md#{fact_id}) ({fact.source.kind})"
    raise KeyError(f"no registry fact {fact_id!r}; the ids are listed by infercourse.registry.facts()")
