"""MkDocs hook: make the build-time figures (matplotlib SVG inside ``<div class="course-figure">``)
readable by screen readers and keep their machinery out of the search index.

- The sentence that introduces a figure (the paragraph right before its ``course-figure`` block) is
  its text alternative: the figure's ``<svg>`` gets ``role="img"`` and ``aria-labelledby`` that
  paragraph. Write that sentence to say what the figure shows; a figure with no paragraph before it
  fails the build.
- matplotlib's ``<metadata>`` (creator "Matplotlib v3..., https://matplotlib.org/") is removed, and
  the drawing is excluded from search (labels would be noise in previews).
- Text in the figures drawn during the build (``svg.fonttype: none``) is SVG ``<text>`` in the
  reader's sans-serif font, not each glyph as a path: a figure is about half the bytes and a third of
  the elements, and its labels stay sharp and selectable.
- matplotlib wraps every artist in a ``<g>`` that holds at most an ``id``; such a group draws nothing of its
  own, so where nothing refers to its id it is replaced by its children (:func:`flatten_groups`): the same
  drawing, a third fewer elements for the phone to lay out.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from mkdocs.exceptions import PluginError

FIGURE = re.compile(r'\s*<div class="course-figure">\s*(?:<p>)?<svg\b')
METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.DOTALL)
SVG = re.compile(r'(<div class="course-figure">\s*(?:<p>)?)(<svg\b.*?</svg>)', re.DOTALL)
SVG_NS, XLINK_NS = "http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"
ET.register_namespace("", SVG_NS)
ET.register_namespace("xlink", XLINK_NS)


def on_config(config):
    import matplotlib

    matplotlib.rcParams["svg.fonttype"] = "none"
    return config


def on_page_content(content, page, config, files):
    if 'class="course-figure"' not in content:
        return content
    parts, done = [], 0
    for count, match in enumerate(FIGURE.finditer(content), 1):
        # The paragraph right before the figure: found backwards from the figure (a forward pattern
        # would scan every paragraph of the page to its end, a fifth of a rebuild on the longest lessons).
        before = content[done : match.start()]
        start = before.rfind("<p>")
        if start < 0 or not before.endswith("</p>") or "</p>" in before[start:-4]:
            raise PluginError(
                f"{page.file.src_uri}: figure {count} has no paragraph right before it; "
                "write the sentence that says what it shows (it becomes the figure's text alternative)"
            )
        ident = f"figure-{count}-text"
        svg = f'<svg role="img" aria-labelledby="{ident}" data-search-exclude="1"'
        parts += [before[:start], f'<p id="{ident}">', before[start + 3 :], match.group()[: -len("<svg")], svg]
        done = match.end()
    parts.append(content[done:])
    content = METADATA.sub("", "".join(parts))
    return SVG.sub(lambda m: m.group(1) + flatten_groups(m.group(2)), content)


def flatten_groups(svg: str) -> str:
    """``svg`` (one ``<svg>`` element, as matplotlib writes it, in the SVG namespace) with every ``<g>`` that has
    no attribute but an ``id`` nothing refers to (``#id``) replaced by its children, in place; the rest unchanged.
    A group with a transform, a style or a clip path, or one another element points to, is kept; an SVG with no
    such group is returned as it came."""
    root = ET.fromstring(svg)
    referred = set(re.findall(r"#([\w.-]+)", svg))
    group = f"{{{SVG_NS}}}g"

    def flatten(parent: ET.Element) -> int:
        removed = sum(flatten(child) for child in list(parent))
        for index, child in reversed(list(enumerate(parent))):
            if child.tag == group and set(child.attrib) <= {"id"} and child.get("id") not in referred:
                parent.remove(child)
                removed += 1
                for offset, grandchild in enumerate(child):
                    parent.insert(index + offset, grandchild)
        return removed

    return ET.tostring(root, encoding="unicode") if flatten(root) else svg  # untouched: byte for byte
