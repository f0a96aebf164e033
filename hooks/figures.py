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
"""

from __future__ import annotations

import re

from mkdocs.exceptions import PluginError

FIGURE = re.compile(r'\s*<div class="course-figure">\s*(?:<p>)?<svg\b')
METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.DOTALL)


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
    return METADATA.sub("", "".join(parts))
