"""MkDocs hook: typeset every formula at build time with KaTeX, as MathML, which the browser lays out itself:
a page shows its math at first paint with no script and no style sheet of KaTeX's. Readers download only the
math font (``docs/assets/vendor/stix-two-math/``, 0.4 MB), when a page lays out its first formula, and see the
browser's own math font until it arrives (``stylesheets/extra.css``: ``font-display: swap``). It is not
preloaded: on Lighthouse's slow phone link a preload held the lesson's largest paint from 1.7 s to 5.4 s.

pymdownx.arithmatex (generic mode) leaves ``<span class="arithmatex">\\(...\\)</span>`` and
``<div class="arithmatex">\\[...\\]</div>`` in the page; this hook replaces their TeX with KaTeX's MathML
(``output: "mathml"``), which screen readers read and the search index keeps (the TeX annotation is
dropped, so search previews show symbols, not TeX). KaTeX's other output, its HTML drawing, made a lesson
several thousand elements heavier (a third to a half of its page) and most of its layout time on a phone.

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

FORMULA = re.compile(r'<(span|div) class="arithmatex">(.*?)</\1>', re.DOTALL)
DELIMITERS = {"\\(": "\\)", "\\[": "\\]"}
# Reads [[tex, display], ...] on stdin, writes [{"html": ...} | {"error": ...}, ...] on stdout.
RENDER_JS = r"""
const katex = require(process.argv[1]);
let input = "";
process.stdin.on("data", d => { input += d; }).on("end", () => {
  const out = JSON.parse(input).map(([tex, displayMode]) => {
    const options = {displayMode, throwOnError: true, strict: "error", output: "mathml"};
    try { return {html: katex.renderToString(tex, options)}; }
    catch (e) { return {error: String(e.message)}; }
  });
  process.stdout.write(JSON.stringify(out));
});
"""

_cache = BuildCache()  # formula hash -> KaTeX's HTML
_state: dict = {}


def on_config(config):
    root = Path(config.config_file_path).parent
    katex_js = Path(config.docs_dir) / "assets" / "vendor" / "katex" / "katex.min.js"
    if not katex_js.is_file():
        raise PluginError(f"{katex_js} is missing: run `make vendor` (copies the KaTeX that package.json pins)")
    # KaTeX's bytes and this hook's (how it calls KaTeX and what it does to the output): a change to either is
    # a new version, so no formula is served from the cache as older code typeset it
    version = hashlib.sha256(katex_js.read_bytes() + Path(__file__).read_bytes())
    _state.update(katex_js=katex_js, version=version.hexdigest()[:16])
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
    """KaTeX's MathML without the raw TeX (its annotation), with a space between tokens (ignored by MathML)
    so that each symbol, such as κ, is one search term."""
    rendered = re.sub(r'<annotation encoding="application/x-tex">.*?</annotation>', "", rendered, flags=re.DOTALL)
    return re.sub(r"(</m[ion]>)(?=<)", r"\1 ", rendered)


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


def on_post_build(config):
    """Write the cache when this build rendered a formula or no longer uses one (a formula edited away)."""
    _cache.save()
