"""MkDocs hook: typeset every formula at build time with KaTeX, as MathML, which the browser lays out itself:
a page shows its math at first paint with no script and no style sheet of KaTeX's. Readers download only the
math font, cut at the end of the build to the glyphs the site's formulas use (:func:`math_font_subset`, about
40 kB against the whole font's 0.4 MB), when a page lays out its first formula; they see the browser's own math
font until it arrives (``stylesheets/extra.css``: ``font-display: swap``).

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

import contextlib
import hashlib
import html
import io
import json
import re
import shutil
import subprocess
import unicodedata
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

MATH_FONT = Path("assets") / "vendor" / "stix-two-math" / "stix-two-math-latin-400-normal.woff"
"""The whole math font under ``docs/`` (vendored; mkdocs.yml keeps it out of the site)."""
MATH_FONT_SUBSET = Path("assets") / "vendor" / "stix-two-math" / "math.woff"
"""Where the build writes the cut font in the site (``stylesheets/extra.css`` loads it)."""

_cache = BuildCache()  # formula hash -> its MathML, as the page shows it
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
        _cache[_key(tex, display)] = _for_search(_operator_spacing(out["html"]))


def _for_search(rendered: str) -> str:
    """KaTeX's MathML without the raw TeX (its annotation), with a space between tokens (ignored by MathML)
    so that each symbol, such as κ, is one search term."""
    rendered = re.sub(r'<annotation encoding="application/x-tex">.*?</annotation>', "", rendered, flags=re.DOTALL)
    return re.sub(r"(</m[ion]>)(?=<)", r"\1 ", rendered)


THIN = '<mspace width="0.1667em"></mspace>'
"""TeX's thin space (3 mu), as MathML."""
# KaTeX writes an operator name (\exp, \max, \min, \ln) as <mi>name</mi><mo>&#x2061;</mo>, the invisible
# function application, and under a limit (\max_i) inside <munder><mrow>...</mrow>...</munder>. TeX puts a
# thin space between an ordinary symbol and such an operator, on either side; browsers' MathML layout does
# not (Chromium drew "Z exp" as "Zexp" and "max_i s_i" as "maxs_i"), so the hook writes the space in.
_ORDINARY_END = r"(</mi>|</mn>|</msub>|</msup>|</msubsup>)"
_OPERATOR = r"(?:<munder><mrow>)?<mi>[a-z]{2,}</mi><mo>\u2061</mo>"
_BEFORE_OPERATOR = re.compile(_ORDINARY_END + "(?=" + _OPERATOR + ")")
_AFTER_LIMIT = re.compile(r"(<munder><mrow><mi>[a-z]{2,}</mi><mo>\u2061</mo></mrow>.*?</munder>)(?=<mi>|<msub>|<msup>)")


def _operator_spacing(mathml: str) -> str:
    """KaTeX's MathML with TeX's thin space between an ordinary symbol and an operator name next to it: before
    the name (``Z \\exp``), and after a name with a limit when a symbol follows (``\\max_i s_i``)."""
    return _AFTER_LIMIT.sub(lambda m: m.group(1) + THIN, _BEFORE_OPERATOR.sub(lambda m: m.group(1) + THIN, mathml))


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


def _math_letters(text: str) -> set[str]:
    """The characters a browser may draw for ``text`` in MathML: each one, and for a Latin or Greek letter its
    mathematical italic, bold and bold italic forms (MathML draws a one-letter identifier in italic, and
    ``\\mathbf`` asks for bold); the italic small h is the Planck constant sign, U+210E; and the radical sign,
    U+221A, which ``<msqrt>`` draws though no text holds it."""
    out = set(text) | {"\u210e", "\u221a"}
    for char in set(text):
        found = re.match(r"(?:LATIN|GREEK) (CAPITAL|SMALL) LETTER (\w+)$", unicodedata.name(char, ""))
        for style in ("ITALIC", "BOLD", "BOLD ITALIC") if found else ():
            with contextlib.suppress(KeyError):  # no such form (the italic small h is U+210E, added above)
                out.add(unicodedata.lookup(f"MATHEMATICAL {style} {found.group(1)} {found.group(2)}"))
    return out


def math_font_subset(font: Path, formulas: list[str]) -> bytes:
    """The WOFF font ``font`` cut to the glyphs the MathML ``formulas`` draw (:func:`_math_letters` of their
    text), keeping its OpenType MATH table with the bracket sizes and pieces it names, and its layout features.

    Raises:
        PluginError: the font has no MATH table (a browser could not stretch a bracket with it).
    """
    from fontTools import subset
    from fontTools.ttLib import TTFont

    text = "".join(html.unescape(re.sub(r"<[^>]+>", "", f)) for f in formulas)
    whole = TTFont(font)
    if "MATH" not in whole:
        raise PluginError(f"{font} has no OpenType MATH table: MathML needs a math font")
    options = subset.Options()
    options.layout_features = ["*"]
    options.flavor = "woff"
    cutter = subset.Subsetter(options)
    cutter.populate(unicodes=sorted(ord(c) for c in _math_letters(text) if not c.isspace()))
    cutter.subset(whole)
    out = io.BytesIO()
    whole.save(out)
    return out.getvalue()


def on_post_build(config):
    """Write the math font cut to what the site's formulas draw; write the cache when this build rendered a
    formula or no longer uses one (a formula edited away)."""
    target = Path(config.site_dir) / MATH_FONT_SUBSET
    target.parent.mkdir(parents=True, exist_ok=True)
    used = [_cache[key] for key in _cache.used]  # this build's formulas (the cache may hold older ones)
    target.write_bytes(math_font_subset(Path(config.docs_dir) / MATH_FONT, used))
    _cache.save()
