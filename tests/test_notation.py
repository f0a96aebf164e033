"""One notation: a symbol means what notation.yml says on every page, and is defined before it is used."""

from __future__ import annotations

import importlib
import re

import pytest

from conftest import ROOT
from infercourse import course, macros, notation
from infercourse.pages import PAGES

# reading order
LESSONS = [(lesson["code"], lesson["page"]) for p in course.parts() for lesson in p["lessons"] if lesson["page"]]
DEFINITION = re.compile(
    r"^[ \t]*(?:[-*][ \t]+)?(?:\*\*Symbols\.?\*\*[ \t]*)?"  # start of a line or list item, optional "**Symbols**"
    r"\\\((?P<tex>[^()\n]*?)\\\)(?:[ \t]*\([^()\n]*\))?:[ \t]*(?P<text>[^\n]*)",  # \(X\) (unit): meaning
    re.MULTILINE,
)
"""A definition as a Symbols list writes one: at the start of a line (or list item), ``\\(X\\): meaning``
or ``\\(X\\) (unit): meaning``."""


def _symbols_of(page: str) -> list[str]:
    module = importlib.import_module(f"infercourse.pages.{PAGES[page]}")
    return [item if isinstance(item, str) else item[0] for item in module.SYMBOLS]


def _tex_spans(text: str) -> list[str]:
    """The page's TeX formulas (what the build sets aside, code blocks left out)."""
    return [span for span in macros.protect(text)[1] if span.startswith(("\\(", "\\[", "$$"))]


def definition_problems(text: str) -> list[str]:
    """Hand-written definitions ``\\(X\\): meaning`` (at a line's start) that the table does not back."""
    by_tex = {spelling: e for e in notation.symbols().values() for spelling in [e["tex"], *e["forms"]]}
    problems = []
    for m in DEFINITION.finditer(text):
        entry = by_tex.get(m["tex"].strip())
        if entry is None:
            problems.append(f"\\({m['tex']}\\) is defined but is not in notation.yml")
        elif not m["text"].lower().startswith(entry["meaning"][:25].lower()):
            problems.append(
                f"\\({m['tex']}\\) is defined as {m['text'][:50]!r}; notation.yml says {entry['meaning']!r}"
            )
    return problems


def test_table_is_valid_and_every_symbol_used_somewhere():
    listed = {s for _, page in LESSONS for s in _symbols_of(page)}
    assert set(notation.symbols()) == listed, f"in the table but in no Symbols list: {set(notation.symbols()) - listed}"


def test_first_lesson_is_the_first_symbols_list_in_reading_order():
    first_seen: dict[str, str] = {}
    for code, page in LESSONS:
        for symbol in _symbols_of(page):
            first_seen.setdefault(symbol, code)
    wrong = {
        s: (e["first"], first_seen.get(s)) for s, e in notation.symbols().items() if first_seen.get(s) != e["first"]
    }
    assert not wrong, f"symbol: (table's first, first Symbols list): {wrong}"


@pytest.mark.parametrize("index", range(len(LESSONS)), ids=[code for code, _ in LESSONS])
def test_every_symbol_a_lesson_uses_is_defined_there_or_earlier(index):
    code, page = LESSONS[index]
    defined = {s for _, earlier in LESSONS[: index + 1] for s in _symbols_of(earlier)}
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    used, unknown = set(), set()
    for span in _tex_spans(text):
        u, x = notation.tex_symbols(span)
        used |= u
        unknown |= x
    assert not unknown, f"{page}: letters in TeX that notation.yml lacks: {sorted(unknown)}"
    assert used <= defined, f"{page}: used before any Symbols list defines them: {sorted(used - defined)}"


@pytest.mark.parametrize("page", [page for _, page in LESSONS] + ["index.md", "glossary.md"])
def test_no_page_defines_a_symbol_against_the_table(page):
    problems = definition_problems((ROOT / "docs" / page).read_text(encoding="utf-8"))
    assert not problems, f"{page}: " + "; ".join(problems)


def test_the_definition_check_can_fail():
    """A page that writes R for the memory reserve (R is the ridge point) is caught; the table's meaning passes."""
    assert definition_problems("- \\(R\\): the memory reserve vLLM keeps besides the weights.")
    assert definition_problems("- \\(Z\\): something the table does not have.")
    assert not definition_problems("- \\(R\\): ridge point, \\(P / \\beta\\), in FLOP/byte.")


def test_a_letter_used_but_not_in_the_table_is_reported():
    assert notation.tex_symbols("x^2 + N b")[1] == {"x"}
    assert notation.tex_symbols("2 L h_{\\text{kv}} d_h b_{\\text{kv}}")[0] == {"L", "h_kv", "d_h", "b_kv"}


def test_a_spelling_cannot_mean_two_things(tmp_path, monkeypatch):
    table = tmp_path / "notation.yml"
    table.write_text(
        "- {id: R, tex: 'R', meaning: 'ridge point', unit: '', first: 2A}\n"
        "- {id: R2, tex: 'R', meaning: 'memory reserve', unit: 'B', first: 1A}\n"
    )
    monkeypatch.setattr(notation, "SOURCE", table)
    notation.symbols.cache_clear()
    try:
        with pytest.raises(ValueError, match="already means something else"):
            notation.symbols()
    finally:
        monkeypatch.undo()
        notation.symbols.cache_clear()


def test_the_generated_lists_pass_the_definition_check():
    """What the table renders is read back as a definition with the table's meaning (the check sees the unit form)."""
    rendered = notation.symbols_markdown(["R", "S", ("kappa", "Here 57,344 B.")])
    assert len(DEFINITION.findall(rendered)) == 3 and not definition_problems(rendered)
    assert definition_problems(rendered.replace("ridge point", "memory reserve"))


RAW_TEX = re.compile(r"[A-Za-z]_[A-Za-z0-9{]|[\u0370-\u03ff]|\\[a-z]+|[a-z]\u0304")
"""What reads as a formula typed as plain text: ``F_attn``, a Greek letter, a TeX command, ``n̄``."""


def raw_tex(meaning: str) -> list[str]:
    """The formula-like bits of a symbol's meaning outside ``\\( \\)`` and ``code``: each should be a formula."""
    prose = re.sub(r"\\\(.*?\\\)|`[^`]*`", " ", meaning)
    return RAW_TEX.findall(prose)


def test_a_meaning_writes_its_formulas_as_formulas():
    """A symbol's meaning is Markdown on the notation page and in each Symbols list: ``(F_attn: ...)`` showed as
    typed, so every formula in it is written ``\\( \\)``."""
    typed = {s["id"]: raw_tex(s["meaning"]) for s in notation.symbols().values() if raw_tex(s["meaning"])}
    assert not typed, f"notation.yml: write these as \\( \\) formulas: {typed}"
    assert raw_tex("the ridge point, P_fp8 / β") == ["P_f", "β"]  # the check sees what it must
    assert raw_tex(r"the ridge point, \(P_{\text{fp8}} / \beta\), `kv_lora_rank`") == []
