"""The glossary: one source (``glossary.yml``) for the glossary page and every page's tooltips.

The tooltips come from this module used as a Markdown extension (:func:`makeExtension`).

Each entry has ``term`` (as written in prose), ``id`` (the anchor on the glossary page),
``definition`` (plain text: it is also the tooltip), ``zh`` (the term Chinese engineering writing uses for
it) with ``zh_source`` (the address of a Chinese text that uses it, or null where none was found and the
rendering is the course's own), and optionally ``abbr`` (the exact words
that get the tooltip; none means no tooltip), ``vllm`` (the vLLM parameter or metric name),
``lesson`` (a docs-relative link to the lesson that teaches it) and ``fact`` (the id of the registry
fact, :func:`infercourse.registry.facts`, that backs the definition).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from xml.etree import ElementTree

import yaml

SOURCE = Path(__file__).with_name("glossary.yml")
DOCS_DIR = Path(__file__).resolve().parents[2] / "docs"
"""The pages a ``lesson:`` link points into (``lessons/2b-launch-overhead.md#principle``)."""
_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_FIELDS = {"term", "id", "zh", "zh_source", "definition", "abbr", "vllm", "lesson", "fact"}
_REQUIRED = {"term", "id", "zh", "zh_source", "definition"}
_HAN = re.compile(r"[\u3400-\u9fff]+")


@cache
def entries() -> list[dict]:
    """All glossary entries, in file order, validated; absent optional fields are None ([] for ``abbr``).

    Raises:
        ValueError: an entry lacks ``term``/``id``/``zh``/``zh_source``/``definition``, has an unknown
            field, a ``zh`` without Chinese characters, a ``zh_source`` that is neither null nor an
            http(s) address, a malformed or repeated ``id``, a term (English or Chinese, ignoring case and
            spacing) that an earlier entry already has, two entries claim the same tooltip word, or a
            ``lesson`` link names a page under ``docs/`` that does not exist or an anchor (``{ #id }``) that
            page does not set.
    """
    items = yaml.safe_load(SOURCE.read_text(encoding="utf-8"))
    seen_ids: set[str] = set()
    seen_abbr: set[str] = set()
    seen_terms: dict[tuple[str, str], str] = {}  # ("term" or "zh", normalised) -> the id of the entry with it
    for item in items:
        where = f"{SOURCE.name}, entry {item.get('term', item)!r}"
        missing = _REQUIRED - item.keys()
        if missing:
            raise ValueError(f"{where}: missing {sorted(missing)}")
        if item.keys() - _FIELDS:
            raise ValueError(f"{where}: unknown fields {sorted(item.keys() - _FIELDS)}; allowed: {sorted(_FIELDS)}")
        if not _ID.match(item["id"]) or item["id"] in seen_ids:
            raise ValueError(f"{where}: id {item['id']!r} must be unique, lowercase letters, digits and '-'")
        seen_ids.add(item["id"])
        if not _HAN.search(str(item["zh"])):
            raise ValueError(f"{where}: zh {item['zh']!r} has no Chinese characters; give the Chinese term")
        if item["zh_source"] is not None and not str(item["zh_source"]).startswith(("https://", "http://")):
            raise ValueError(f"{where}: zh_source must be an http(s) address or null, got {item['zh_source']!r}")
        for key in ("term", "zh"):
            norm = (key, " ".join(str(item[key]).lower().split()))
            if norm in seen_terms:
                raise ValueError(
                    f"{where}: {key} {item[key]!r} is already the {key} of entry {seen_terms[norm]!r}; "
                    "add to that entry instead of repeating it under a new id"
                )
            seen_terms[norm] = item["id"]
        for word in item.get("abbr", []):
            if word in seen_abbr:
                raise ValueError(f"{where}: tooltip word {word!r} is claimed twice")
            seen_abbr.add(word)
        if item.get("lesson"):
            _check_lesson_link(where, item["lesson"])
        item.setdefault("abbr", [])
        item.setdefault("vllm", None)
        item.setdefault("lesson", None)
        item.setdefault("fact", None)
    return items


def _check_lesson_link(where: str, link: str) -> None:
    """Refuse a ``lesson:`` link to a missing page or to an anchor the page does not set, naming the entry."""
    page, _, anchor = link.partition("#")
    path = DOCS_DIR / page
    if not path.is_file():
        raise ValueError(f"{where}: lesson {link!r}: no page docs/{page}")
    text = path.read_text(encoding="utf-8")
    if anchor and f"#{anchor} }}" not in text:
        ids = re.findall(r"\{ #([\w-]+) \}", text)
        raise ValueError(f"{where}: lesson {link!r}: docs/{page} sets no anchor #{anchor} (it has {', '.join(ids)})")


def tooltip(item: dict) -> str:
    """The tooltip of an entry, in both languages on one line: ``"KV cache · 键值缓存（KV 缓存）: The keys ..."``."""
    return f"{item['term']} · {item['zh']}: {' '.join(item['definition'].split())}"


def tooltips() -> dict[str, str]:
    """``{word: tooltip}`` for every tooltip word (``abbr``): :func:`tooltip` of its entry."""
    return {word: tooltip(item) for item in entries() for word in item["abbr"]}


def chinese_words() -> list[str]:
    """Every run of Chinese characters in the entries' ``zh`` terms, in file order, each once
    (``"键值缓存（KV 缓存）"`` gives ``"键值缓存"`` and ``"缓存"``): the words the search index must keep
    whole (``hooks/search_zh.py`` adds them to jieba's dictionary)."""
    return list(dict.fromkeys(run for item in entries() for run in _HAN.findall(item["zh"])))


_ABBR = re.compile(r'<abbr title="[^"]*">([^<]+)</abbr>')
_H2_ID = re.compile(r'<h2 id="([^"]+)"')
_NO_LINK = re.compile(r"<(h[1-6]|a)\b.*?</\1>", re.S)


def link_terms(html: str) -> str:
    """The glossary page's HTML with each tooltip (``<abbr>``) made a link to its word's entry (``#id``): there the
    definition is on the page, a tap away, and a tooltip repeating it would only add bytes. A word inside its own
    entry, a heading or a link (an entry's lesson) becomes plain text. Text without tooltips is returned unchanged."""
    target = {word: item["id"] for item in entries() for word in item["abbr"]}
    html = _NO_LINK.sub(lambda m: _ABBR.sub(r"\1", m.group(0)), html)  # no link in a heading or in a link
    parts = _H2_ID.split(html)  # [before, id, section, id, section, ...]
    out = [_ABBR.sub(r"\1", parts[0])]
    for entry_id, section in zip(parts[1::2], parts[2::2], strict=True):
        out.append(f'<h2 id="{entry_id}"')
        out.append(
            _ABBR.sub(
                lambda m, here=entry_id: (
                    m.group(1)
                    if target.get(m.group(1)) in (None, here)
                    else f'<a href="#{target[m.group(1)]}">{m.group(1)}</a>'
                ),
                section,
            )
        )
    return "".join(out)


SECTION_TAGS = ("h1", "h2")
"""A tooltip is given at a term's first use in each section a heading of these levels starts."""


def makeExtension(**kwargs):  # noqa: N802 (the name Python-Markdown looks for)
    """The Markdown extension ``infercourse.glossary`` (mkdocs.yml): Python-Markdown's ``abbr`` with
    :func:`tooltips` as its glossary, so every page gets the tooltips and can still define its own
    ``*[word]: ...`` abbreviations; then each word keeps its tooltip at its first use in a section
    (:data:`SECTION_TAGS`) only, the later uses plain text (a page with a tooltip on every use of "KV cache"
    had hundreds of them, each an element a phone lays out and a screen reader announces)."""
    from markdown.extensions.abbr import AbbrExtension
    from markdown.treeprocessors import Treeprocessor

    class FirstUseOnly(Treeprocessor):
        def run(self, root: ElementTree.Element) -> None:
            parent = {child: el for el in root.iter() for child in el}
            seen: set[str | None] = set()  # an abbr always has its word as text
            for el in list(root.iter()):
                if el.tag in SECTION_TAGS:
                    seen = set()
                elif el.tag == "abbr" and el.text in seen:
                    _unwrap(el, parent[el])
                elif el.tag == "abbr":
                    seen.add(el.text)

    class GlossaryExtension(AbbrExtension):
        def extendMarkdown(self, md):  # noqa: N802 (Python-Markdown's name)
            super().extendMarkdown(md)
            md.treeprocessors.register(FirstUseOnly(md), "glossary_first_use", 6)  # after abbr's (7)

    return GlossaryExtension(glossary=tooltips(), **kwargs)


def _unwrap(el, parent) -> None:
    """Replace the element ``el`` (a child of ``parent``) by its text, keeping the text that follows it."""
    index = list(parent).index(el)
    text = (el.text or "") + (el.tail or "")
    if index == 0:
        parent.text = (parent.text or "") + text
    else:
        before = parent[index - 1]
        before.tail = (before.tail or "") + text
    parent.remove(el)
