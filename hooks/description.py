"""MkDocs hook: each page's meta description (search engines' snippet) is its own opening sentence(s).

A page's front matter ``description`` wins; otherwise the first paragraph of the rendered page, tags
stripped, cut at a word boundary under 160 characters. (Without this every page repeats
``site_description``.)
"""

import html
import re

LIMIT = 160


def on_page_content(content, page, config, files):
    if page.meta.get("description"):
        return content
    match = re.search(r"<p>(.*?)</p>", content, re.DOTALL)
    if match:
        text = " ".join(html.unescape(re.sub(r"<[^>]+>", "", match.group(1))).split())
        if len(text) > LIMIT:
            text = text[: text.rfind(" ", 0, LIMIT - 1)].rstrip(",;:") + "…"
        page.meta["description"] = text
    return content
