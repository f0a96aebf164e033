"""Headless Debian chromium, driven by Playwright, reads every built page the way readers do.

The site is served on the origin it was built for (conftest: ``SITE_URL``), so Material's instant
navigation is live. Every page in the sitemap (lessons, home, glossary, ADRs, whatever is added) is
loaded at desktop (1280 px) and phone (390 px) width, in the light and the dark palette; on each,
every formula and every diagram must have a real rendered size, nothing may make the page scroll
sideways, code must not be cut, figure text must be readable, no console error and no request may
leave the machine. Separate checks: instant navigation keeps the page (a marker a reload would
erase), printing shows every collapsed block and every diagram, search finds symbols and shows no raw TeX.
"""

from __future__ import annotations

import os
import re
from urllib.parse import quote, urlsplit

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

from infercourse import course

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
ARGS = [  # no GPU, no background traffic to Google from the browser itself
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWS = {  # name: (width, height, prefers-color-scheme, Material's scheme)
    "desktop-light": (1280, 800, "light", "default"),
    "desktop-dark": (1280, 800, "dark", "slate"),
    "phone-light": (390, 844, "light", "default"),
    "phone-dark": (390, 844, "dark", "slate"),
}
# Smallest glyph box of figure text we accept, CSS px. A digit is ~0.73 em tall in DejaVu Sans, so
# 7 px of median glyph height is a ~9.5 px font; Lighthouse calls text under 12 px small, 9-10 px is
# the floor of a chart's tick label that people still read.
MIN_FIGURE_GLYPH_PX = 7
# Smallest font a diagram's labels may be drawn at, CSS px (its font size times the drawn/natural width);
# Lighthouse counts text under 12 px as illegible.
MIN_DIAGRAM_FONT_PX = 12
# Least size (width, height) of a drawn formula, CSS px: one that did not draw has none; the narrowest drawn, the
# italic i alone, is 3.9 px wide in STIX Two Math at the page's 1.1 em (measured in chromium).
MIN_FORMULA_PX = (2, 4)
# Smallest font a code listing may be set in, CSS px: Lighthouse counts text under 12 px as illegible, and on
# lesson 0A (its collapsed labkit listing) half the page's text is code, Material's 0.85 em = 10.9 px.
MIN_CODE_FONT_PX = 12
# Formulas and diagrams are drawn at build time (hooks/math.py, hooks/diagrams.py): once the page is
# loaded, nothing is left to typeset and no diagram is left as mermaid source.
READY = """() => {
  const math = [...document.querySelectorAll('.md-content .arithmatex')];
  const typeset = math.every(el => el.querySelector('math'));
  return typeset && document.querySelectorAll('.md-content pre.mermaid').length === 0;
}"""
# Everything the checks need from one page, measured after every <details> is opened (a formula in a
# collapsed answer has no size until then). Sizes are CSS px of what is drawn: the <math> element KaTeX
# wrote for a formula, the inline <svg> for a diagram.
STATE = """() => {
  document.querySelectorAll('.md-content details').forEach(d => { d.open = true; });
  const W = window.innerWidth;
  const size = el => { const r = el.getBoundingClientRect(); return [r.width, r.height]; };
  const drawnSize = els => els.map(size).reduce((a, b) => [Math.max(a[0], b[0]), Math.max(a[1], b[1])], [0, 0]);
  const shown = el => el.checkVisibility();
  const formulas = [...document.querySelectorAll('.md-content .arithmatex')].filter(shown).map(el => {
    const [w, h] = drawnSize([...el.querySelectorAll('math')]);
    return {what: el.textContent.trim().slice(0, 50), w, h};
  });
  const diagrams = [...document.querySelectorAll('.md-content .course-diagram')].map(el => {
    const svg = el.querySelector('svg');
    const [w, h] = svg ? size(svg) : [0, 0];
    const box = svg && svg.viewBox.baseVal;  // drawn px per px of the diagram's own coordinates
    const scale = box && box.width ? svg.getBoundingClientRect().width / box.width : 1;
    const font = svg ? [...svg.querySelectorAll('.nodeLabel, .edgeLabel, text')].filter(t => t.textContent.trim())
      .map(t => parseFloat(getComputedStyle(t).fontSize) * scale).sort((a, b) => a - b) : [];
    const label = svg && document.getElementById(svg.getAttribute('aria-labelledby'));
    return {w, h, font: font.length ? font[Math.floor(font.length / 2)] : 0,
            name: svg && svg.getAttribute('role') === 'img' && label ? label.textContent.trim() : ''};
  });
  const clipped = el => { for (let a = el.parentElement; a; a = a.parentElement) {
      if (a === document.body) return false;
      if (getComputedStyle(a).overflowX !== 'visible') return true; } return false; };
  const wide = document.documentElement.scrollWidth > W
    ? [...document.body.querySelectorAll('*')].filter(el => el.getBoundingClientRect().right > W + 1 && !clipped(el))
        .slice(0, 4).map(el => `<${el.tagName.toLowerCase()} class="${el.className.baseVal ?? el.className}"> `
                               + `${Math.round(el.getBoundingClientRect().right)} px`)
    : [];
  const cutCode = [...document.querySelectorAll('.md-content pre > code')]
    .filter(c => shown(c) && c.scrollWidth > c.clientWidth + 1)
    .map(c => c.textContent.split('\\n').reduce((a, b) => (b.length > a.length ? b : a)).trim().slice(0, 60));
  const figures = [...document.querySelectorAll('.md-content .course-figure svg')].filter(shown).map(svg => {
    const glyphs = [...svg.querySelectorAll('text, g[id^="text_"]')].map(g => g.getBoundingClientRect().height)
      .filter(h => h > 0).sort((a, b) => a - b);
    return {median: glyphs.length ? glyphs[Math.floor(glyphs.length / 2)] : 0,
            name: svg.getAttribute('aria-label') || (svg.querySelector(':scope > title') || {}).textContent
                  || (document.getElementById(svg.getAttribute('aria-labelledby')) || {}).textContent || ''};
  });
  const codeFont = Math.min(...[...document.querySelectorAll('.md-content pre > code')]
    .map(c => parseFloat(getComputedStyle(c).fontSize)));
  return {scheme: document.body.getAttribute('data-md-color-scheme'), scrollWidth: document.documentElement.scrollWidth,
          W, formulas, diagrams, wide, cutCode, figures, codeFont,
          pendingDiagrams: document.querySelectorAll('.md-content pre.mermaid').length};
}"""


# Boxes that scroll sideways with no fade at the edge where more of them lies. Each is looked at on screen, as
# a reader meets it: javascripts/scroll-cue.js measures a box when it comes on screen (a figure or diagram below
# the first screen is not even laid out before: content-visibility: auto) once a layout has given its size: the fade
# is there within a few frames (10 frames, 170 ms, is the most this waits).
UNCUED = """async () => {
  const frame = () => new Promise(done => requestAnimationFrame(done));
  const uncued = el => el.scrollWidth > el.clientWidth + 1 && el.scrollLeft === 0
    && getComputedStyle(el).maskImage === 'none';
  const out = [];
  for (const el of document.querySelectorAll('.md-content :is(.course-figure, .course-diagram, '
                                             + '.md-typeset__scrollwrap, div.arithmatex)')) {
    if (!el.checkVisibility()) continue;
    el.scrollIntoView({block: 'center'});
    for (let n = 0; n < 10 && (n < 2 || uncued(el)); n++) await frame();
    if (uncued(el)) out.push(el.className);
  }
  window.scrollTo(0, 0);
  return out;
}"""


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} not found: run `make chromium` (installs Debian's chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def pages(site) -> list[str]:
    """Every page the sitemap lists, as a path from the site root ('/', '/lessons/0a-prefill-decode/', ...)."""
    urls = re.findall(r"<loc>([^<]+)</loc>", (site / "sitemap.xml").read_text(encoding="utf-8"))
    paths = [urlsplit(u).path for u in urls]
    assert "/" in paths and "/glossary/" in paths and sum(p.startswith("/lessons/") for p in paths) >= 3, paths
    return paths


class Watch:
    """Console errors, uncaught exceptions and requests that leave the machine, for one browser page."""

    def __init__(self, page):
        self.errors, self.outside = [], []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on(
            "request",
            lambda r: (
                self.outside.append(r.url)
                if urlsplit(r.url).scheme in ("http", "https")
                and urlsplit(r.url).hostname not in ("127.0.0.1", "localhost")
                else None
            ),
        )

    def take(self) -> tuple[list[str], list[str]]:
        errors, outside = self.errors[:], self.outside[:]
        self.errors.clear(), self.outside.clear()
        return errors, outside


def _open(browser, width: int, height: int, scheme: str = "light"):
    context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
    page = context.new_page()
    return context, page, Watch(page)


def _wait_ready(page) -> str | None:
    try:
        page.wait_for_function(READY, timeout=20_000)
    except PlaywrightTimeout:
        return "formulas or diagrams still untypeset after 20 s"
    # The fade at a scrolling box's edge (javascripts/scroll-cue.js) is set by a ResizeObserver the script starts in
    # the frame after the page is shown, and reports in the layout after: two frames later every box has its mark.
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
    return None


def _problems(path: str, state: dict, scheme: str) -> list[str]:
    """What is wrong with one page's measured state, one line per fault."""
    out = []
    if state["scheme"] != scheme:
        out.append(f"palette is {state['scheme']!r}, expected {scheme!r}")
    out += [
        f"formula drawn {f['w']:.0f}×{f['h']:.0f} px: {f['what']!r}"
        for f in state["formulas"]
        if f["w"] < MIN_FORMULA_PX[0] or f["h"] < MIN_FORMULA_PX[1]
    ]
    out += [
        f"diagram {i} drawn {d['w']:.0f}×{d['h']:.0f} px"
        for i, d in enumerate(state["diagrams"])
        if d["w"] < 50 or d["h"] < 20
    ]
    out += [f"diagram {i} without a text alternative" for i, d in enumerate(state["diagrams"]) if not d["name"]]
    out += [
        f"diagram {i} text drawn at {d['font']:.1f} px (median label), under {MIN_DIAGRAM_FONT_PX}"
        for i, d in enumerate(state["diagrams"])
        if 0 < d["font"] < MIN_DIAGRAM_FONT_PX
    ]
    if state["pendingDiagrams"]:
        out.append(f"{state['pendingDiagrams']} mermaid blocks left as text")
    if state["scrollWidth"] > state["W"]:
        out.append(f"page is {state['scrollWidth']} px wide on a {state['W']} px screen: {state['wide']}")
    out += [f"code line cut (scrolls inside its box): {line!r}" for line in state["cutCode"]]
    out += [f"a {name} box scrolls sideways with no fade at its edge" for name in state["uncued"]]
    if state["codeFont"] < MIN_CODE_FONT_PX:  # Infinity on a page with no listing
        out.append(f"code listings set at {state['codeFont']:.1f} px, under {MIN_CODE_FONT_PX}")
    out += [
        f"figure text {f['median']:.1f} px tall (median glyph), under {MIN_FIGURE_GLYPH_PX}"
        for f in state["figures"]
        if f["median"] < MIN_FIGURE_GLYPH_PX
    ]
    out += [
        "figure without a text alternative (aria-label, aria-labelledby or <title>)"
        for f in state["figures"]
        if not f["name"].strip()
    ]
    return [f"{path}: {line}" for line in out]


@pytest.mark.parametrize("view", VIEWS)
def test_every_page_renders_on_every_screen(browser, server, pages, view):
    width, height, prefers, scheme = VIEWS[view]
    context, page, watch = _open(browser, width, height, prefers)
    problems, formulas, diagrams = [], 0, 0
    for path in pages:
        page.goto(server + path, wait_until="load")
        late = _wait_ready(page)
        state = page.evaluate(STATE) | {"uncued": page.evaluate(UNCUED)}
        problems += [f"{path}: {late}"] if late else []
        problems += _problems(path, state, scheme)
        errors, outside = watch.take()
        problems += [f"{path}: console error: {e[:200]}" for e in errors]
        problems += [f"{path}: request left the machine: {u}" for u in outside]
        formulas += len(state["formulas"])
        diagrams += len(state["diagrams"])
    context.close()
    print(
        f"\n{view}: {len(pages)} pages, {formulas} formulas and {diagrams} diagrams measured, {len(problems)} problems"
    )
    assert formulas > 20 and diagrams > 3, (formulas, diagrams)
    assert not problems, "\n".join(problems)


def test_instant_navigation_keeps_the_page(browser, server, pages):
    """Clicking a nav link swaps the content without a reload (a JS marker survives), and the new
    page's formulas and diagrams are drawn."""
    context, page, watch = _open(browser, 1280, 800)
    page.goto(server + "/", wait_until="load")
    page.evaluate("window.__notReloaded = 'marker'")
    lessons = [p for p in pages if p.startswith("/lessons/")]
    for path in lessons[:2] + ["/glossary/", lessons[-1]]:
        page.click(f"nav.md-nav--primary a.md-nav__link[href$='{path.rstrip('/').rsplit('/', 1)[-1]}/']")
        page.wait_for_url(f"**{path}")
        # The URL changes before the new content is in: wait for the new page's canonical link (Material
        # swaps head and content together), then for its formulas and diagrams.
        page.wait_for_function(f"document.querySelector('link[rel=canonical]').href.endsWith('{path}')")
        late = _wait_ready(page)
        assert late is None, f"{path} after instant navigation: {late}"
        assert page.evaluate("window.__notReloaded") == "marker", f"clicking to {path} reloaded the page"
        state = page.evaluate(STATE)
        flat = [f for f in state["formulas"] if f["w"] < MIN_FORMULA_PX[0] or f["h"] < MIN_FORMULA_PX[1]] + [
            d for d in state["diagrams"] if d["w"] < 50
        ]
        assert not flat and not state["pendingDiagrams"], f"{path} after instant navigation: {flat}"
    errors, outside = watch.take()
    assert not errors and not outside, (errors, outside)
    context.close()


def test_no_page_loads_a_diagram_or_math_runtime(browser, server, pages):
    """Diagrams are SVG from the build (hooks/diagrams.py): a lesson scrolled to its diagram has asked for
    no script but the theme's own and the calculators' small loader (ADR-0008), and nothing of mermaid."""
    context, page, watch = _open(browser, 390, 600)
    scripts = []
    page.on("request", lambda r: scripts.append(r.url) if r.resource_type == "script" or "mermaid" in r.url else None)
    lesson = next(p for p in pages if p.startswith("/lessons/"))
    page.goto(server + lesson, wait_until="networkidle")
    page.evaluate("document.querySelector('.md-content .course-diagram').scrollIntoView()")
    page.wait_for_timeout(500)
    assert page.evaluate(READY), f"{lesson}: formulas or diagrams left to draw"
    ours = ("/assets/javascripts/", "/javascripts/calc-loader.js", "/javascripts/scroll-cue.js")
    theirs = [u for u in scripts if "mermaid" in u or not urlsplit(u).path.startswith(ours)]
    assert scripts and not theirs, f"{lesson}: requested besides the theme's scripts: {theirs}"
    errors, outside = watch.take()
    assert not errors and not outside, (errors, outside)
    context.close()


def test_no_lesson_prints_in_more_than_20_a4_pages(browser, server):
    """Every lesson printed to A4 as a reader's browser would (its print style sheet): at most 20 pages (issue 29;
    lesson 0A printed in 42 when it inlined labkit.py whole, 2B and 8A in 21-22 before tables took the page's
    width on paper and diagrams were capped at 9 cm). Fewer than 5 would mean the page printed empty."""
    context, page, _ = _open(browser, 1280, 800)
    counts = {}
    for lesson in course.live_lessons():
        page.goto(server + "/" + lesson["page"].removesuffix(".md") + "/", wait_until="load")
        counts[lesson["code"]] = len(re.findall(rb"/Type\s*/Page[^s]", page.pdf(format="A4")))
    context.close()
    wrong = {code: n for code, n in counts.items() if not 5 <= n <= 20}
    assert not wrong, f"lessons that print in more than 20 A4 pages (or under 5): {wrong}"


WRAPPED = """async () => {
  const frame = () => new Promise(done => requestAnimationFrame(done));
  const flush = [];
  let wrapped = 0;
  for (const box of document.querySelectorAll('.md-content .highlight')) {
    box.scrollIntoView({block: 'center'});  // a listing is laid out only near the screen (content-visibility)
    await frame(); await frame();
    for (const line of box.querySelectorAll('code > span[id^="__span"]')) {
      const code = [...line.childNodes].filter(n => !(n.classList && n.classList.contains('linenos')));
      if (!code.length) continue;
      const range = document.createRange();
      range.setStartBefore(code[0]); range.setEndAfter(code[code.length - 1]);
      const rows = [...range.getClientRects()].filter(r => r.width > 1);
      if (!rows.length) continue;
      // the line's first word and the rows after it; a deep line whose first word does not fit beside its
      // indentation starts on its second row, at the continuation's indent, and all of it stays there: skipped
      const token = [...line.children].find(c => !c.classList.contains('linenos'));
      const first = token ? token.getClientRects()[0] : rows[0];
      if (first.top > Math.min(...rows.map(r => r.top)) + 2) continue;
      const later = rows.filter(r => r.top > first.top + 2);
      if (!later.length) continue;
      wrapped += 1;
      if (Math.min(...later.map(r => r.left)) <= first.left + 1) flush.push(line.textContent.trim().slice(0, 50));
    }
  }
  return {wrapped, flush};
}"""


def test_a_wrapped_code_line_continues_right_of_where_code_lines_start(browser, server):
    """On a phone a long line of a listing wraps (no listing scrolls sideways); its continuation must start right of
    the line's own first word, never under the line numbers nor at a shallower indentation, so that it cannot read
    as a line of its own (a wrapped `return ...` once read as dedented). hooks/listings.py and extra.css do it."""
    context, page, _ = _open(browser, 390, 844)
    page.goto(server + "/lessons/7b-mixture-of-experts/", wait_until="load")
    found = page.evaluate(WRAPPED)
    context.close()
    assert found["wrapped"] > 5, f"only {found['wrapped']} wrapped lines on 7B at 390 px: nothing to check"
    assert not found["flush"], f"wrapped lines whose continuation starts left of the line's start: {found['flush'][:5]}"


def test_print_shows_every_collapsed_block_and_every_diagram(browser, server, pages):
    """Printed (or saved as PDF), a page shows the body of every <details> (answers, listings) and every
    diagram drawn, not its mermaid source. The page is loaded on screen, never scrolled (its diagrams never
    near the viewport), and then switched to print media without a `beforeprint` event (as a headless
    print to PDF does): all of it must show by the page and its print style sheet alone, not by a script."""
    context, page, _ = _open(browser, 1280, 800)
    hidden, blocks, diagrams = [], 0, 0
    for path in pages:
        page.emulate_media(media="screen")
        page.goto(server + path, wait_until="load")
        page.emulate_media(media="print")
        state = page.evaluate("""() => ({
          blocks: [...document.querySelectorAll('.md-content details')].map(d => ({
            title: d.querySelector('summary').textContent.trim().slice(0, 40),
            shown: [...d.children].filter(c => c.tagName !== 'SUMMARY')
                     .some(c => c.getBoundingClientRect().height > 0 && c.checkVisibility())})),
          diagrams: [...document.querySelectorAll('.md-content .course-diagram svg')]
            .map(svg => svg.getBoundingClientRect()).map(r => [r.width, r.height]),
          sources: document.querySelectorAll('.md-content pre.mermaid').length})""")
        blocks += len(state["blocks"])
        diagrams += len(state["diagrams"])
        hidden += [f"{path}: {b['title']!r}" for b in state["blocks"] if not b["shown"]]
        hidden += [f"{path}: diagram drawn {w:.0f}×{h:.0f} px" for w, h in state["diagrams"] if w < 50 or h < 20]
        hidden += [f"{path}: {state['sources']} diagrams printed as mermaid source"] if state["sources"] else []
    context.close()
    assert blocks >= 10 and diagrams >= 10, f"only {blocks} collapsed blocks and {diagrams} diagrams found"
    assert not hidden, "missing from print:\n" + "\n".join(hidden)


def _search(browser, server, query: str):
    """Open the site's search for ``query`` (Material's deep link ``/?q=``) at 1280 px and wait for its first
    result; fails the test, with the search's own message, when nothing is found. Returns (context, page, watch)."""
    context, page, watch = _open(browser, 1280, 800)
    page.goto(f"{server}/?q={quote(query)}", wait_until="load")
    try:
        page.wait_for_selector(".md-search-result__item", timeout=15_000)
    except PlaywrightTimeout:
        pytest.fail(f"search for {query!r} found nothing ({page.inner_text('.md-search-result__meta')!r})")
    return context, page, watch


@pytest.mark.parametrize("query, expect", [("κ", "κ"), ("simplifications", "simplifications")])
def test_search_finds_symbols_and_shows_no_raw_tex(browser, server, query, expect):
    context, page, watch = _search(browser, server, query)
    text = page.inner_text(".md-search-result")
    assert expect.lower() in text.lower(), text[:500]
    raw = re.findall(r"\\[(\[]|\\[a-zA-Z]+\{", text)
    assert not raw, f"raw TeX in the search previews for {query!r}: {raw[:5]}\n{text[:800]}"
    errors, outside = watch.take()
    assert not errors and not outside, (errors, outside)
    context.close()


@pytest.mark.parametrize(
    "query, lesson",
    [("KV cache", "/lessons/1a-kv-cache/"), ("roofline", "/lessons/2a-roofline/"), ("PagedAttention", "/lessons/5a")],
)
def test_search_lists_the_lesson_on_a_topic_first(browser, server, query, lesson):
    """A reader who searches a lesson's topic gets the lesson first, not a reference page that mentions the term
    more often (Facts, Receipts, Glossary): lessons carry a search boost (hooks/course.py)."""
    context, page, watch = _search(browser, server, query)
    hrefs = page.eval_on_selector_all(".md-search-result__link", "links => links.map(a => a.href)")
    errors, outside = watch.take()
    context.close()
    first = urlsplit(hrefs[0]).path
    assert first.startswith(lesson), (
        f"search for {query!r}: first {first}, then {[urlsplit(h).path for h in hrefs[1:6]]}"
    )
    assert not errors and not outside, (errors, outside)


@pytest.mark.parametrize(
    "query, anchor", [("预填充", "prefill"), ("分页注意力", "pagedattention"), ("Goodput", "goodput")]
)
def test_search_in_either_language_finds_the_glossary_entry(browser, server, query, anchor):
    """A glossary term found by its Chinese or its English name (mkdocs.yml's search separator, jieba at build time)."""
    context, page, watch = _search(browser, server, query)
    for _ in range(5):  # Material renders 10 results and more as the list is scrolled
        page.eval_on_selector(".md-search__scrollwrap", "w => w.scrollTo(0, w.scrollHeight)")
        page.wait_for_timeout(200)
    hrefs = page.eval_on_selector_all(".md-search-result__link", "links => links.map(a => a.href)")
    errors, outside = watch.take()
    context.close()
    found = [(urlsplit(h).path, urlsplit(h).fragment) for h in hrefs]
    assert ("/glossary/", anchor) in found, (query, found[:20])
    assert not errors and not outside, (errors, outside)
