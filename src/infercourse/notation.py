"""The course's one table of symbols (``notation.yml``): the Notation page and every lesson's Symbols list.

Each entry has ``id``, ``tex`` (the symbol in TeX), ``meaning``, ``unit`` ("" for an index, "count" for a
plain count), ``first`` (the lesson code, in ``course.yml``, whose Symbols list defines it first) and
optionally ``forms`` (other spellings of the same symbol, such as ``n_r`` for ``n``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import yaml

from infercourse import course

SOURCE = Path(__file__).with_name("notation.yml")
_FIELDS = {"id", "tex", "meaning", "unit", "first", "forms"}


@cache
def symbols() -> dict[str, dict]:
    """All symbols by id, in file order, validated.

    Raises:
        ValueError: an entry lacks a field or has an unknown one, an id or a TeX spelling repeats, or
            ``first`` is not a lesson code of ``course.yml``.
    """
    codes = {lesson["code"] for part in course.parts() for lesson in part["lessons"]}
    table: dict[str, dict] = {}
    spellings: set[str] = set()
    for item in yaml.safe_load(SOURCE.read_text(encoding="utf-8")):
        where = f"{SOURCE.name}, symbol {item.get('id', item)!r}"
        missing = (_FIELDS - {"forms"}) - item.keys()
        if missing or item.keys() - _FIELDS:
            raise ValueError(f"{where}: needs {sorted(_FIELDS - {'forms'})} (and optionally forms), got {sorted(item)}")
        if item["id"] in table:
            raise ValueError(f"{where}: the id repeats")
        if item["first"] not in codes:
            raise ValueError(f"{where}: first {item['first']!r} is not a lesson code of course.yml")
        item.setdefault("forms", [])
        for spelling in [item["tex"], *item["forms"]]:
            if spelling in spellings:
                raise ValueError(f"{where}: {spelling!r} already means something else; a symbol means one thing")
            spellings.add(spelling)
        table[item["id"]] = item
    return table


def definition_markdown(symbol_id: str, note: str = "") -> str:
    """One Symbols-list item: ``- \\(tex\\) (unit): meaning. note``.

    Raises:
        KeyError: no such symbol in the table.
    """
    try:
        entry = symbols()[symbol_id]
    except KeyError:
        raise KeyError(f"no symbol {symbol_id!r} in {SOURCE.name}; add it there first") from None
    unit = f" ({entry['unit']})" if entry["unit"] not in ("", "count") else ""
    return f"- \\({entry['tex']}\\){unit}: {entry['meaning']}.{' ' + note if note else ''}"


Symbol = str | tuple[str, str]
"""A Symbols list item: a symbol id, or (id, lesson-specific note)."""


def symbols_markdown(items: Sequence[Symbol]) -> str:
    """A lesson's Symbols list: one item per symbol id, or (id, note) for a lesson-specific note
    (e.g. the symbol's value for the course's model), then a link to the Notation page.

    Raises:
        KeyError: an id is not in the table.
    """
    lines = [definition_markdown(*((item, "") if isinstance(item, str) else item)) for item in items]
    return (
        "\n".join(lines)
        + "\n\nEvery symbol of the course, with the lesson that defines it: [Notation](../notation.md)."
    )


def table_rows() -> list[dict]:
    """The table for the Notation page: each symbol with its first lesson's label and page."""
    pages = {lesson["code"]: lesson.get("page") for part in course.parts() for lesson in part["lessons"]}
    return [
        {**entry, "tex_md": f"\\({entry['tex']}\\)", "first_page": pages[entry["first"]]}
        for entry in symbols().values()
    ]


# --- Reading symbols out of TeX (for the tests) --------------------------------------------------

_GROUPS = re.compile(r"\\(?:text|mathrm|operatorname|begin|end)\s*\{[^{}]*\}")
_COMMAND = re.compile(r"\\[A-Za-z]+")


def tex_symbols(tex: str) -> tuple[set[str], set[str]]:
    """(ids of the table's symbols used in ``tex``, single letters used that the table lacks).

    Multi-character spellings (``h_{\\text{kv}}``, ``\\kappa``, ``d_h``) are matched first, longest
    first; then ``\\text{...}`` groups and other commands are dropped, and every remaining letter is
    a one-letter symbol (``Nb`` is N times b).
    """
    table = symbols()
    spellings = sorted(
        ((s, e["id"]) for e in table.values() for s in [e["tex"], *e["forms"]]), key=lambda pair: -len(pair[0])
    )
    used: set[str] = set()
    for spelling, symbol_id in spellings:
        if len(spelling) == 1:
            continue
        pattern = re.escape(spelling) + (r"(?![A-Za-z])" if spelling[-1].isalpha() else "")
        if re.search(pattern, tex):
            used.add(symbol_id)
            tex = re.sub(pattern, " ", tex)
    tex = _COMMAND.sub(" ", _GROUPS.sub(" ", tex))
    letters = set(re.findall(r"[A-Za-z]", tex))
    one_letter = {e["tex"]: e["id"] for e in table.values() if len(e["tex"]) == 1}
    used |= {one_letter[x] for x in letters if x in one_letter}
    return used, {x for x in letters if x not in one_letter}
