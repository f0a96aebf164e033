"""MkDocs hook: draw every mermaid diagram at build time, so no page loads mermaid (a reader gets an inline
SVG at first paint, also in print and after an instant navigation, with no script).

Mermaid lays a diagram out by measuring its text in a browser, so this hook runs the committed mermaid
(``docs/assets/vendor/mermaid/``, pinned in package.json; mkdocs.yml keeps it out of the site) in headless
chromium through Playwright, once per diagram it has not drawn before. Results are cached in
``.cache/mermaid.json`` by mermaid's bytes, the drawing settings and the diagram's source; the file keeps
only the diagrams of the last build, and a build whose diagrams are all cached starts no browser. A diagram
mermaid cannot parse fails the build with the page and mermaid's message.

How a drawn diagram looks and reads:
- Colours are Material's own mermaid style sheet (its ``themeCSS``, read from the installed theme), whose
  CSS variables the page resolves: the same SVG is right in the light and the dark palette.
- Text is set in one Arial-metric font stack (``FONT``), the one it was measured in: a label fits its box
  on any reader's machine.
- On a narrow screen the SVG shrinks only until its 16 px labels would draw at 12 px
  (``MIN_LABEL_PX``); below that its box scrolls sideways (extra.css).
- The paragraph right after a diagram (its read-aloud) is its text alternative: the SVG gets
  ``role="img"`` and ``aria-labelledby`` that paragraph; a diagram with no paragraph after it fails the
  build. The SVG is left out of the search index (its labels would be noise in previews).

The browser is the one ``make chromium`` installs (``/usr/bin/chromium``, or ``CHROMIUM``).
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import os
import re
from pathlib import Path

import material
from build_cache import BuildCache  # hooks/build_cache.py: MkDocs puts a hook's folder on sys.path while loading it
from mkdocs.exceptions import PluginError

# superfences' default fence for ```mermaid (mkdocs.yml: custom_fences, class mermaid), then the paragraph after it.
DIAGRAM = re.compile(r'<pre class="mermaid"><code>(.*?)</code></pre>(\s*<p>)?', re.DOTALL)
ROLE = ' role="graphics-document document"'  # mermaid's, replaced by role="img" and the label
FONT = 'Arial, "Liberation Sans", Helvetica, sans-serif'
LABEL_PX, MIN_LABEL_PX = 16, 12  # Lighthouse calls text under 12 px illegible
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
ORIGIN = "http://diagrams.invalid"  # served by Playwright's router from the vendored files; never the network
RENDER_PAGE = """<!doctype html><meta charset="utf-8"><style>body { font: 16px __FONT__; }</style>
<script type="module">
import mermaid from "./mermaid.esm.min.mjs";
window.drawAll = async (config, diagrams) => {
  mermaid.initialize(config);
  const out = [];
  for (const [id, text] of diagrams) {
    try { out.push({svg: (await mermaid.render(id, text)).svg}); }
    catch (e) { out.push({error: String(e && e.message || e)}); document.getElementById("d" + id)?.remove(); }
  }
  return out;
};
</script>""".replace("__FONT__", FONT)

_cache = BuildCache()  # diagram source hash -> its SVG
_state: dict = {}


def _material_theme_css() -> str:
    """The style sheet Material's bundle gives mermaid (``mermaid.initialize({themeCSS: ...})``)."""
    bundle = next((Path(material.__file__).parent / "templates" / "assets" / "javascripts").glob("bundle.*.min.js"))
    found = re.search(r'="(\.node circle[^"]*--md-mermaid-node-bg-color[^"]*)"', bundle.read_text(encoding="utf-8"))
    if not found:
        raise PluginError(f"hooks/diagrams.py: no mermaid themeCSS in {bundle}; Material changed, update the hook")
    return found.group(1).replace("var(--md-mermaid-font-family)", FONT)


def on_config(config):
    root = Path(config.config_file_path).parent
    library = Path(config.docs_dir) / "assets" / "vendor" / "mermaid"
    if not (library / "mermaid.esm.min.mjs").is_file():
        raise PluginError(f"{library}/mermaid.esm.min.mjs is missing: run `make vendor` (what package.json pins)")
    settings = {
        "startOnLoad": False,
        "fontFamily": FONT,
        "themeCSS": _material_theme_css(),
        "sequence": {  # Material's sizes, in the measured font
            **{f"{part}FontSize": f"{LABEL_PX}px" for part in ("actor", "message", "note")},
            **{f"{part}FontFamily": FONT for part in ("actor", "message", "note")},
        },
    }
    version = hashlib.sha256((library / "mermaid.esm.min.mjs").read_bytes() + json.dumps(settings).encode())
    _state.update(library=library, settings=settings, version=version.hexdigest()[:16])
    _cache.load(root / ".cache" / "mermaid.json")
    return config


def _key(source: str) -> str:
    return hashlib.sha256(f"{_state['version']}|{source}".encode()).hexdigest()


def _browser_page():
    """The render page in headless chromium, started on first use and kept for the rest of the build."""
    if "page" in _state:
        return _state["page"]
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as error:
        raise PluginError(f"the build draws diagrams with Playwright, which is not installed ({error})") from error
    if not os.path.exists(CHROMIUM):
        raise PluginError(
            f"{CHROMIUM} not found: the build draws mermaid diagrams in headless chromium; run `make chromium` "
            "(Debian's chromium) or set CHROMIUM=/path/to/chromium"
        )
    library = _state["library"]

    def serve(route):
        name = route.request.url.removeprefix(ORIGIN + "/")
        if name == "render.html":
            return route.fulfill(body=RENDER_PAGE, content_type="text/html")
        path = (library / name).resolve()
        if library.resolve() in path.parents and path.is_file():
            return route.fulfill(path=str(path), content_type="text/javascript")
        return route.fulfill(status=404)

    playwright = sync_playwright().start()
    _state["playwright"] = playwright
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
    page = browser.new_page()
    page.route("**/*", lambda route: serve(route) if route.request.url.startswith(ORIGIN) else route.abort())
    page.goto(f"{ORIGIN}/render.html")
    page.wait_for_function("window.drawAll !== undefined", timeout=60_000)
    _state["page"] = page
    return page


def _close_browser() -> None:
    playwright = _state.pop("playwright", None)
    _state.pop("page", None)
    if playwright is not None:
        playwright.stop()


def _min_width(svg: str) -> str:
    """Give the SVG the least width at which its labels draw at MIN_LABEL_PX (from its viewBox width)."""
    box = re.search(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+)', svg)
    if not box:
        raise PluginError("hooks/diagrams.py: mermaid drew an SVG without a viewBox; update the hook")
    least = math.ceil(float(box.group(1)) * MIN_LABEL_PX / LABEL_PX)
    return svg.replace(' style="', f' style="min-width: {least}px; ', 1)


def _page_line(page_text: str, first: str, error: str) -> int | None:
    """The line of the page (1-based) where mermaid's error points: the diagram's first line, found after a
    ```` ```mermaid ```` fence, plus the line mermaid names ("Parse error on line N") less one; None when the
    diagram is not found in the page's text (a diagram made by a macro)."""
    lines = page_text.splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.strip().startswith("```mermaid") and lines[i + 1].strip() == first:
            found = re.search(r"on line (\d+)", error)
            return i + 2 + (int(found.group(1)) - 1 if found else 0)
    return None


def _draw(sources: list[str], where: str, source_path: str | None = None) -> None:
    """Draw the diagrams not in the cache; fail on the first one mermaid cannot parse, naming the page's line."""
    missing = list(dict.fromkeys(s for s in sources if _key(s) not in _cache))
    if not missing:
        return
    ids = [f"diagram-{_key(s)[:12]}" for s in missing]
    drawn = _browser_page().evaluate(
        "([config, diagrams]) => window.drawAll(config, diagrams)",
        [_state["settings"], [[i, s] for i, s in zip(ids, missing, strict=True)]],
    )
    for source, out in zip(missing, drawn, strict=True):
        if "error" in out:
            first = source.strip().splitlines()[0]
            page_text = Path(source_path).read_text(encoding="utf-8") if source_path else ""  # only on an error
            line = _page_line(page_text, first, out["error"])
            at = f"{where}:{line}" if line else where
            raise PluginError(f"{at}: mermaid cannot draw the diagram that starts {first!r}: {out['error']}")
        _cache[_key(source)] = out["svg"]


def on_page_content(content, page, config, files):
    if 'class="mermaid"' not in content:
        return content
    sources = [html.unescape(m.group(1)) for m in DIAGRAM.finditer(content)]
    _draw(sources, page.file.src_uri, getattr(page.file, "abs_src_path", None))  # None: a page made in memory
    _cache.used.update(_key(s) for s in sources)
    count = 0

    def inline(match: re.Match) -> str:
        nonlocal count
        count += 1
        if not match.group(2):
            raise PluginError(
                f"{page.file.src_uri}: diagram {count} has no paragraph right after it; write the paragraph "
                "that reads it aloud (it becomes the diagram's text alternative)"
            )
        ident, svg = f"diagram-{count}-text", _cache[_key(html.unescape(match.group(1)))]
        if ROLE not in svg:
            raise PluginError(f"{page.file.src_uri}: diagram {count}: mermaid's SVG has no {ROLE}; update the hook")
        svg = _min_width(svg).replace(ROLE, f' role="img" aria-labelledby="{ident}" data-search-exclude="1"', 1)
        return f'<div class="course-diagram">{svg}</div>' + match.group(2).replace("<p>", f'<p id="{ident}">')

    content = DIAGRAM.sub(inline, content)
    if 'class="mermaid"' in content:
        raise PluginError(f"{page.file.src_uri}: a mermaid block in a form this hook does not draw; update the hook")
    return content


def on_post_build(config):
    """Close the browser; write the cache when this build drew a diagram or no longer uses one."""
    _close_browser()
    _cache.save()


def on_build_error(error):
    _close_browser()
