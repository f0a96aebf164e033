"""The tooltips: glossary.yml through the Markdown extension ``infercourse.glossary`` (mkdocs.yml)."""

from __future__ import annotations

import markdown
from bs4 import BeautifulSoup

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
