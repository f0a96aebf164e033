"""The glossary in two languages: glossary.yml through the Markdown extension ``infercourse.glossary``
(tooltips), the glossary page, and Chinese words in the built search index (the browser's search for a
Chinese term: tests/test_browser.py)."""

from __future__ import annotations

import json
import re

import markdown
import pytest
import yaml
from bs4 import BeautifulSoup

from conftest import ROOT
from infercourse import glossary


def test_every_tooltip_word_gets_its_glossary_definition_as_title():
    tips = glossary.tooltips()
    assert tips, "no tooltip words in glossary.yml"
    md = markdown.Markdown(extensions=["infercourse.glossary"])
    for word, definition in tips.items():
        abbr = BeautifulSoup(md.reset().convert(f"a {word} b"), "html.parser").find_all("abbr")
        assert [(a.get_text(), a["title"]) for a in abbr] == [(word, definition)]


def test_a_page_can_still_define_its_own_abbreviation():
    html = markdown.markdown("XYZ here\n\n*[XYZ]: a page's own term", extensions=["infercourse.glossary"])
    assert '<abbr title="a page\'s own term">XYZ</abbr>' in html


def test_a_word_has_its_tooltip_at_its_first_use_in_each_section_only():
    md = markdown.Markdown(extensions=["infercourse.glossary"])
    page = "# Title\n\nTTFT, then TTFT *and* TTFT.\n\n- TTFT in a list\n\n## Next\n\nTTFT again, and TPOT.\n"
    soup = BeautifulSoup(md.convert(page), "html.parser")
    assert [(a.find_parent(["p", "li"]).get_text()[:4], a.get_text()) for a in soup.find_all("abbr")] == [
        ("TTFT", "TTFT"),  # section "Title": its first use only
        ("TTFT", "TTFT"),  # section "Next": TTFT again, and TPOT's first use
        ("TTFT", "TPOT"),
    ]
    assert soup.find("p").get_text() == "TTFT, then TTFT and TTFT."  # the later uses stay, as plain text


def test_on_the_glossary_page_a_term_links_to_its_entry_instead_of_a_tooltip():
    kv = '<abbr title="KV cache · ...">KV cache</abbr>'
    ridge = '<abbr title="ridge point · ...">ridge point</abbr>'
    html = (
        f"<p>Intro: {kv}.</p>"
        f'<h2 id="kv-cache">KV cache</h2><p>Read per step; see the {ridge}. Own word: {kv}.</p>'
        f'<h2 id="ridge-point">Ridge point</h2><p>Where a {kv} read turns compute-bound.</p>'
        f'<h2 id="paged">Paged {kv}</h2><p>Taught in: <a href="../lessons/1a/">Lesson 1A · The {kv}</a></p>'
    )
    assert glossary.link_terms(html) == (
        "<p>Intro: KV cache.</p>"
        '<h2 id="kv-cache">KV cache</h2><p>Read per step; see the <a href="#ridge-point">ridge point</a>. '
        "Own word: KV cache.</p>"
        '<h2 id="ridge-point">Ridge point</h2><p>Where a <a href="#kv-cache">KV cache</a> read turns compute-bound.</p>'
        '<h2 id="paged">Paged KV cache</h2>'  # no link inside a heading, nor inside a link
        '<p>Taught in: <a href="../lessons/1a/">Lesson 1A · The KV cache</a></p>'
    )


def test_the_built_glossary_page_has_no_tooltip(site):
    html = (site / "glossary" / "index.html").read_text(encoding="utf-8")
    assert "<abbr" not in html and '<a href="#kv-cache">KV cache</a>' in html


def test_tooltip_shows_both_languages():
    # written out from glossary.yml's TTFT entry: term, middle dot, its zh, colon, the definition's first words
    assert glossary.tooltips()["TTFT"].startswith("TTFT · 首 token 时延: Time to first token")


def test_every_term_has_a_chinese_term_and_says_where_it_comes_from():
    for e in glossary.entries():
        assert re.search(r"[\u3400-\u9fff]", e["zh"]), e["id"]
        assert e["zh_source"] is None or e["zh_source"].startswith(("https://", "http://")), e["id"]
    # the field's standard renderings of the headline terms (issue 15's examples)
    zh = {e["id"]: e["zh"] for e in glossary.entries()}
    assert (zh["prefill"], zh["decode"], zh["ttft"], zh["arithmetic-intensity"]) == (
        "预填充",
        "解码",
        "首 token 时延",
        "算术强度",
    )
    assert "键值缓存" in zh["kv-cache"] and "屋顶线模型" in zh["roofline"]


def _first() -> dict:
    return yaml.safe_load(glossary.SOURCE.read_text(encoding="utf-8"))[0]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda e: e.pop("zh"), "missing ['zh']"),
        (lambda e: e.update(zh="prefill"), "no Chinese characters"),
        (lambda e: e.update(zh_source="a blog"), "zh_source must be an http(s) address or null"),
        # a repeated term under a new id (entry 0's, with other case and spacing), in either language
        (lambda e: e.update(term=str(_first()["term"]).upper() + " "), "is already the term of entry"),
        (lambda e: e.update(zh=_first()["zh"]), "is already the zh of entry"),
        # a lesson link to an anchor its page does not set, or to no page (named here, not by a strict build)
        (
            lambda e: e.update(lesson="lessons/0a-prefill-decode.md#principl"),
            "docs/lessons/0a-prefill-decode.md sets no anchor #principl (it has intuition, mental-model",
        ),
        (lambda e: e.update(lesson="lessons/0z-nothing.md#principle"), "no page docs/lessons/0z-nothing.md"),
    ],
)
def test_an_entry_without_a_proper_chinese_term_is_refused(tmp_path, monkeypatch, change, message):
    items = yaml.safe_load(glossary.SOURCE.read_text(encoding="utf-8"))
    change(items[1])
    bad = tmp_path / "glossary.yml"
    bad.write_text(yaml.safe_dump(items, allow_unicode=True), encoding="utf-8")
    monkeypatch.setattr(glossary, "SOURCE", bad)
    glossary.entries.cache_clear()
    try:
        with pytest.raises(ValueError, match=re.escape(message)):
            glossary.entries()
    finally:
        glossary.entries.cache_clear()


def test_glossary_page_shows_each_chinese_term_and_its_source(site):
    soup = BeautifulSoup((site / "glossary" / "index.html").read_text(encoding="utf-8"), "html.parser")
    for e in glossary.entries():
        heading = soup.find(id=e["id"])
        assert e["zh"] in heading.get_text(), e["id"]
        line = heading.find_next("p").find_next("p")
        assert line.get_text().startswith(f"中文: {e['zh']}"), (e["id"], line.get_text())
        links = [a["href"] for a in line.find_all("a")]
        assert links == ([e["zh_source"]] if e["zh_source"] else []), e["id"]


def _search_separator() -> re.Pattern:
    """The search plugin's ``separator`` of mkdocs.yml (a JavaScript regex; this one reads the same in Python)."""
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    return re.compile(re.search(r"^\s+separator: '(.*)'$", text, re.M).group(1))


def test_search_index_keeps_every_chinese_term_a_whole_token(site):
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    separator = re.compile(index["config"]["separator"])
    assert separator.pattern == _search_separator().pattern
    docs = [d for d in index["docs"] if d["location"].startswith("glossary/")]
    tokens = {t for d in docs for field in (d["title"], d["text"]) for t in separator.split(field) if t}
    missing = [w for w in glossary.chinese_words() if w not in tokens]
    assert not missing, f"Chinese glossary words not whole tokens of the search index: {missing}"
