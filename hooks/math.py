"""MkDocs hook: typeset every formula at build time with KaTeX, so a page shows its math at first paint
with no script (readers download KaTeX's style sheet and the few fonts a page uses, nothing else; the
two most used are preloaded).

pymdownx.arithmatex (generic mode) leaves ``<span class="arithmatex">\\(...\\)</span>`` and
``<div class="arithmatex">\\[...\\]</div>`` in the page; this hook replaces their TeX with KaTeX's
HTML (drawn) and MathML (read by screen readers and by the search index; the drawn copy is excluded
from search, and the TeX annotation is dropped, so search previews show symbols, not TeX).

KaTeX is the committed ``docs/assets/vendor/katex/katex.min.js`` (pinned in package.json), run by
Node.js once per page that has a formula it has not rendered before; results are cached in
``.cache/katex.json`` by KaTeX's bytes and the formula, and the file keeps only the formulas of the
last build. A formula KaTeX cannot parse fails the build with the page and the formula.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import shutil
import subprocess
from pathlib import Path

from build_cache import BuildCache  # hooks/build_cache.py: MkDocs puts a hook's folder on sys.path while loading it
from mkdocs.exceptions import PluginError
from mkdocs.utils import get_relative_url

FORMULA = re.compile(r'<(span|div) class="arithmatex">(.*?)</\1>', re.DOTALL)
DELIMITERS = {"\\(": "\\)", "\\[": "\\]"}
# Reads [[tex, display], ...] on stdin, writes [{"html": ...} | {"error": ...}, ...] on stdout.
RENDER_JS = r"""
const katex = require(process.argv[1]);
let input = "";
process.stdin.on("data", d => { input += d; }).on("end", () => {
  const out = JSON.parse(input).map(([tex, displayMode]) => {
    const options = {displayMode, throwOnError: true, strict: "error", output: "htmlAndMathml"};
    try { return {html: katex.renderToString(tex, options)}; }
    catch (e) { return {error: String(e.message)}; }
  });
  process.stdout.write(JSON.stringify(out));
});
"""

# KaTeX's fonts are `font-display: block`: a formula is blank until its font arrives, and the browser asks
# for a font only after the style sheets are in and the page is laid out. A page with formulas preloads
# the two faces nearly every formula draws with (roman text and numbers; italic variables, class
# mathnormal), so they arrive with the style sheets and the formulas show at first paint; rarer faces
# (bold, big delimiters) still load on use. Font file -> what in the page shows it is used.
PRELOADED_FONTS = {"KaTeX_Main-Regular.woff2": 'class="katex"', "KaTeX_Math-Italic.woff2": "mathnormal"}

_cache = BuildCache()  # formula hash -> KaTeX's HTML
_state: dict = {}


def on_config(config):
    root = Path(config.config_file_path).parent
    katex_js = Path(config.docs_dir) / "assets" / "vendor" / "katex" / "katex.min.js"
    if not katex_js.is_file():
        raise PluginError(f"{katex_js} is missing: run `make vendor` (copies the KaTeX that package.json pins)")
    _state.update(katex_js=katex_js, version=hashlib.sha256(katex_js.read_bytes()).hexdigest()[:16])
    _cache.load(root / ".cache" / "katex.json")
    return config


def _key(tex: str, display: bool) -> str:
    return hashlib.sha256(f"{_state['version']}|{display}|{tex}".encode()).hexdigest()


def _render(formulas: list[tuple[str, bool]], where: str) -> None:
    """Render the formulas not in the cache with one Node process; fail on the first KaTeX error."""
    missing = list(dict.fromkeys(f for f in formulas if _key(*f) not in _cache))
    if not missing:
        return
    node = shutil.which("node")
    if node is None:
        raise PluginError(
            "node not found: the build typesets formulas with KaTeX under Node.js (18 or newer); "
            "install it (Debian: apt-get install nodejs)"
        )
    result = subprocess.run(
        [node, "-e", RENDER_JS, str(_state["katex_js"])],
        input=json.dumps(missing),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode != 0:
        raise PluginError(f"KaTeX under Node failed on {where}: {result.stderr.strip()[-500:]}")
    for (tex, display), out in zip(missing, json.loads(result.stdout), strict=True):
        if "error" in out:
            raise PluginError(f"{where}: KaTeX cannot typeset {tex!r}: {out['error']}")
        _cache[_key(tex, display)] = _for_search(out["html"])


def _for_search(rendered: str) -> str:
    """Keep the MathML (symbols such as κ, one search term each) in the search index, leave out the drawn
    copy and the raw TeX.

    Material's search parser compares elements by tag name, so a ``data-search-exclude`` span ends at
    the first nested ``</span>``: the drawn copy moves into a ``<katex-html>`` element (KaTeX's style
    sheet selects it by class, and an unknown element is inline like a span) that nothing nests in.
    """
    rendered = re.sub(r'<annotation encoding="application/x-tex">.*?</annotation>', "", rendered, flags=re.DOTALL)
    start = rendered.index('<span class="katex-html"')
    # A space between MathML tokens (ignored by MathML) makes each symbol its own search term.
    mathml = re.sub(r"(</m[ion]>)(?=<)", r"\1 ", rendered[:start])
    rendered, start = mathml + rendered[start:], len(mathml)
    depth, end = 0, start
    for tag in re.finditer(r"<(/?)span\b", rendered[start:]):
        depth += -1 if tag.group(1) else 1
        if depth == 0:
            end = start + tag.start()
            break
    inner = rendered[rendered.index(">", start) + 1 : end]
    return (
        rendered[:start]
        + '<katex-html class="katex-html" aria-hidden="true" data-search-exclude="1">'
        + inner
        + "</katex-html>"
        + rendered[end + len("</span>") :]
    )


def _formula(match: re.Match) -> tuple[str, bool]:
    text = html.unescape(match.group(2)).strip()
    opening = text[:2]
    if opening in DELIMITERS and text.endswith(DELIMITERS[opening]):
        return text[2:-2].strip(), opening == "\\["
    return text, True  # \begin{env}...\end{env}: a display block


def on_page_content(content, page, config, files):
    formulas = [_formula(m) for m in FORMULA.finditer(content)]
    if not formulas:
        return content
    _render(formulas, page.file.src_uri)
    _cache.used.update(_key(*f) for f in formulas)
    return FORMULA.sub(
        lambda m: f'<{m.group(1)} class="arithmatex">{_cache[_key(*_formula(m))]}</{m.group(1)}>', content
    )


def on_post_page(output, page, config):
    """Preload PRELOADED_FONTS on a page that uses them, ahead of its first style sheet."""
    links = "".join(
        f'<link rel="preload" href="{get_relative_url("assets/vendor/katex/fonts/" + name, page.url)}" '
        'as="font" type="font/woff2" crossorigin>'
        for name, used in PRELOADED_FONTS.items()
        if used in output
    )
    return output.replace('<link rel="stylesheet"', links + '<link rel="stylesheet"', 1) if links else output


def on_post_build(config):
    """Write the cache when this build rendered a formula or no longer uses one (a formula edited away)."""
    _cache.save()
