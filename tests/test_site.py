"""How the site is built and served, beyond the pages' content: math, search index, figures, serve.

(The build from another working directory is every build in this suite: conftest runs mkdocs from
outside the repository with ``--config-file``.)
"""

from __future__ import annotations

import ast
import json
import re
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import markdown
import pytest
from mkdocs.config import load_config

from conftest import ROOT, copy_project, load_hook, load_script, mkdocs_build


def _markdown() -> markdown.Markdown:
    """Python-Markdown with mkdocs.yml's extensions and settings (snippets left out: it needs the build's files)."""
    config = load_config(str(ROOT / "mkdocs.yml"))
    names = [e for e in config["markdown_extensions"] if e != "pymdownx.snippets"]
    return markdown.Markdown(
        extensions=names, extension_configs={k: v for k, v in config["mdx_configs"].items() if k in names}
    )


def test_dollar_signs_in_prose_stay_text():
    html = _markdown().convert(
        "Set $HF_HOME/$MODEL first; a 4090 rents at $5,$10 per hour.\n\nInline \\(x^2\\) is math."
    )
    assert "$HF_HOME/$MODEL" in html and "$5,$10 per hour" in html, html
    assert html.count('class="arithmatex"') == 1, html


def test_search_index_has_no_tex_and_no_figure_metadata(site):
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    text = " ".join(doc["title"] + " " + doc["text"] for doc in index["docs"])
    text = re.sub(r"<code>.*?</code>", "", text)  # a page may show TeX delimiters as code (ADR-0006)
    assert "\\(" not in text and "\\[" not in text and "\\frac" not in text and "\\kappa" not in text
    assert "matplotlib.org" not in text and "Matplotlib v" not in text
    assert "κ" in text  # the symbol, from the formulas' MathML
    assert "flowchart" not in text and "--&gt;" not in text and "-->" not in text  # mermaid sources (5A has one)
    # A diagram's labels are drawn text, not page text (hooks/diagrams.py: the SVG is left out of search).
    assert "Prompt: S tokens, all known" in (site / "lessons" / "0a-prefill-decode" / "index.html").read_text("utf-8")
    assert "S tokens, all known" not in text


def test_no_page_runs_a_table_of_aligned_columns_into_a_paragraph(site):
    """Build-time output in aligned columns (a snippet's printed table) must come out preformatted: an
    ``exec`` block printing plain text needs ``result="text"``. A paragraph of three or more lines, each
    with a run of spaces between words, is such a table run together (issue 29 item 1)."""
    run_together = []
    for page in sorted(site.rglob("index.html")):
        for body in re.findall(r"<p>(.*?)</p>", page.read_text(encoding="utf-8"), flags=re.S):
            body = re.sub(r"<math\b.*?</math>", "x", body, flags=re.S)  # MathML's spaces between tokens: not shown
            text = re.sub(r"<[^>]+>", "", body)
            lines = [line for line in text.splitlines() if re.search(r"\S {2,}\S", line)]
            if len(lines) >= 3:
                run_together.append(f"{page.parent.relative_to(site)}: {lines[0].strip()[:60]!r}")
    assert run_together == [], 'aligned columns in a paragraph (add result="text" to the exec block): ' + "; ".join(
        run_together
    )


def test_formulas_are_typeset_at_build_time_and_no_math_script_ships(site):
    html = (site / "lessons" / "1a-kv-cache" / "index.html").read_text(encoding="utf-8")
    assert html.count('class="katex"') > 10 and "\\(" not in html and "\\[" not in html
    assert "mathjax" not in html.lower() and "katex.min.js" not in html
    assert not (site / "assets" / "vendor" / "katex" / "katex.min.js").exists()  # build-time only


def test_no_script_holds_up_the_first_paint_and_figures_draw_text_as_text(site):
    """Every page's scripts are deferred (overrides/main.html), so the browser draws before running them;
    figure labels are SVG <text> (hooks/figures.py: svg.fonttype none), not one path per glyph."""
    pages = sorted(site.glob("**/index.html"))
    assert len(pages) > 5
    for page in pages:
        html = page.read_text(encoding="utf-8")
        blocking = [
            tag for tag in re.findall(r"<script\b[^>]*\bsrc=[^>]*>", html) if not re.search(r"\b(defer|async)\b", tag)
        ]
        assert not blocking, f"{page.relative_to(site)}: scripts that block the first paint: {blocking}"
        assert "_markdown_exec_pyodide" not in html, (
            f"{page.relative_to(site)}: loads markdown-exec's unused pyodide assets"
        )
    html = (site / "lessons" / "2a-roofline" / "index.html").read_text(encoding="utf-8")
    figure = html[html.index('<div class="course-figure">') :]
    figure = figure[: figure.index("</svg>")]
    assert "<text " in figure and 'id="DejaVuSans-' not in figure, "figure text drawn as glyph paths"


@pytest.mark.build  # a real build of a copy of the site
def test_a_formula_katex_cannot_parse_fails_the_build(tmp_path):
    project = copy_project(tmp_path / "project")
    page = project / "docs" / "index.md"
    page.write_text(
        page.read_text(encoding="utf-8") + "\n\nBroken: \\(\\frac{1}{\\undefinedmacro}\\)\n", encoding="utf-8"
    )
    result = mkdocs_build(project, tmp_path / "site")
    assert result.returncode != 0
    assert (
        "index.md: KaTeX cannot typeset" in result.stdout + result.stderr
        and "undefinedmacro" in result.stdout + result.stderr
    )


def test_diagrams_are_drawn_at_build_time_and_no_page_ships_mermaid(site):
    """Every diagram is an inline SVG from the build (hooks/diagrams.py), labelled by the paragraph after it;
    no page has a mermaid block left to draw, and the site carries none of mermaid's code."""
    lessons = sorted((site / "lessons").glob("*/index.html"))
    assert len(lessons) >= 5
    for page in sorted(site.glob("**/index.html")):
        html = page.read_text(encoding="utf-8")
        assert '<pre class="mermaid"' not in html and "mermaid.esm" not in html, f"{page.relative_to(site)}"
        for ident in re.findall(r'<div class="course-diagram"><svg [^>]*role="img" aria-labelledby="([^"]+)"', html):
            assert f'<p id="{ident}">' in html, f"{page.relative_to(site)}: {ident} labels no paragraph"
        assert html.count('class="course-diagram"') == html.count('role="img" aria-labelledby="diagram-')
    assert all('<div class="course-diagram"><svg ' in p.read_text(encoding="utf-8") for p in lessons)
    assert not (site / "assets" / "vendor" / "mermaid").exists()


@pytest.mark.build  # a real build of a copy of the site
def test_a_diagram_mermaid_cannot_parse_fails_the_build(tmp_path):
    project = copy_project(tmp_path / "project")
    page = project / "docs" / "index.md"
    broken = "```mermaid\nflowchart LR\n    A[Provisioner (Terraform + Helm)] --> B[Decode]\n```\n\nRead aloud.\n"
    text = page.read_text(encoding="utf-8") + "\n\n" + broken
    page.write_text(text, encoding="utf-8")
    result = mkdocs_build(project, tmp_path / "site")
    log = result.stdout + result.stderr
    assert result.returncode != 0
    # mermaid's "Parse error on line 2" of the diagram: the page's line two after the fence
    bad_line = len(text.splitlines()) - text.splitlines()[::-1].index("```mermaid") + 2
    assert f"index.md:{bad_line}: mermaid cannot draw the diagram that starts 'flowchart LR'" in log, log
    assert "Parse error" in log, log


def test_a_mermaid_error_names_the_page_s_line():
    """hooks/diagrams.py turns mermaid's "Parse error on line N" (of the diagram) into the page's line."""
    diagrams = load_hook("diagrams")
    text = "# Page\n\nText.\n\n```mermaid\nflowchart LR\n    a --> b\n    b -->\n```\n"
    # the fence is line 5, 'flowchart LR' line 6, so the diagram's line 3 is the page's line 8
    assert diagrams._page_line(text, "flowchart LR", "Parse error on line 3:\n...") == 8
    assert diagrams._page_line(text, "flowchart TD", "Parse error on line 3") is None


def test_a_figure_is_labelled_by_the_paragraph_right_before_it():
    """hooks/figures.py on hand-written HTML: each figure's SVG is labelled by the paragraph that ends right
    before its block (whitespace between them only), numbered in page order, and loses matplotlib's
    metadata; a figure with no such paragraph fails with the page and the figure's number."""
    from types import SimpleNamespace

    from mkdocs.exceptions import PluginError

    hook = load_hook("figures")
    page = SimpleNamespace(file=SimpleNamespace(src_uri="probe.md"))
    figure = '<div class="course-figure">\n<svg width="1"><metadata>Matplotlib v3</metadata><g/></svg></div>'
    html = (
        f"<p>Intro.</p><p>The first figure shows A.</p>\n{figure}<p>Between.</p>\n<p>The second shows B.</p> {figure}"
    )
    out = hook.on_page_content(html, page, None, None)
    assert out == (
        '<p>Intro.</p><p id="figure-1-text">The first figure shows A.</p>\n<div class="course-figure">\n'
        '<svg role="img" aria-labelledby="figure-1-text" data-search-exclude="1" width="1"><g/></svg></div>'
        '<p>Between.</p>\n<p id="figure-2-text">The second shows B.</p> <div class="course-figure">\n'
        '<svg role="img" aria-labelledby="figure-2-text" data-search-exclude="1" width="1"><g/></svg></div>'
    )
    unlabelled_cases = (
        figure,
        f"<p>A paragraph.</p><h2>A heading</h2>{figure}",
        f"<p>An unclosed paragraph {figure}",
        f"<p>One</p>\n{figure}{figure}",
    )
    for unlabelled in unlabelled_cases:
        number = unlabelled.count("course-figure")
        with pytest.raises(PluginError, match=f"probe.md: figure {number} has no paragraph right before it"):
            hook.on_page_content(unlabelled, page, None, None)


def test_an_operator_name_gets_tex_s_thin_space_from_the_symbol_beside_it():
    """hooks/math.py: KaTeX's MathML for ``Z \\exp(x)`` and ``\\max_i s_i`` (its markup, written out here) gains TeX's
    thin space between the symbol and the name, which browsers' MathML layout leaves out; ``\\exp(x)`` at the
    start and the name's own parenthesis get none."""
    hook = load_hook("math")
    exp = '<mi>exp</mi><mo>\u2061</mo><mo stretchy="false">(</mo><mi>x</mi><mo stretchy="false">)</mo>'
    limit = "<munder><mrow><mi>max</mi><mo>\u2061</mo></mrow><mi>i</mi></munder>"
    s_i = "<msub><mi>s</mi><mi>i</mi></msub>"
    assert hook._operator_spacing("<mi>Z</mi>" + exp) == "<mi>Z</mi>" + hook.THIN + exp
    assert hook._operator_spacing(exp) == exp
    assert hook._operator_spacing(limit + s_i) == limit + hook.THIN + s_i
    assert hook._operator_spacing("<mo>=</mo>" + limit + "<mo>(</mo>") == "<mo>=</mo>" + limit + "<mo>(</mo>"


def test_a_figure_loses_only_the_groups_that_draw_nothing():
    """hooks/figures.py: a ``<g>`` with nothing but an unreferenced id goes, its children in its place; a group
    with a transform, or whose id a ``<use>`` points to, stays."""
    hook = load_hook("figures")
    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">'
        '<g id="figure_1"><g id="patch_1"><path d="M 0 0"/></g><g><text>a</text><text>b</text></g>'
        '<g transform="scale(2)"><path d="M 1 1"/></g><g id="m1"><path d="M 2 2"/></g>'
        '<use xlink:href="#m1"/></g></svg>'
    )
    flat = hook.flatten_groups(svg)
    assert re.findall(r"<(\w+)", flat) == ["svg", "path", "text", "text", "g", "path", "g", "path", "use"], flat
    assert '<g transform="scale(2)">' in flat and '<g id="m1">' in flat and 'xlink:href="#m1"' in flat


@pytest.mark.browser  # draws in headless chromium
def test_diagram_cache_keeps_only_the_last_build_s_diagrams(tmp_path):
    """hooks/diagrams.py run as MkDocs runs it, on three builds: the first draws in chromium, a build of the
    same diagram starts no browser, a diagram edited away leaves the cache file; a diagram with no
    paragraph after it (its text alternative) fails."""
    from types import SimpleNamespace

    from mkdocs.exceptions import PluginError

    hook = load_hook("diagrams")
    config = SimpleNamespace(config_file_path=str(tmp_path / "mkdocs.yml"), docs_dir=str(ROOT / "docs"))
    page = SimpleNamespace(file=SimpleNamespace(src_uri="probe.md"))
    cache = tmp_path / ".cache" / "mermaid.json"
    fence = '<pre class="mermaid"><code>flowchart LR\n    a --&gt; {}</code></pre>\n<p>Read aloud.</p>'
    started = []

    def build(*ends: str) -> dict:
        hook.on_config(config)
        hook.on_page_content("".join(fence.format(e) for e in ends), page, config, None)
        started.append("page" in hook._state)
        hook.on_post_build(config)
        return json.loads(cache.read_text(encoding="utf-8"))

    assert len(build("b", "c")) == 2 and started == [True]
    assert len(build("c")) == 1 and started == [True, False]  # "b" edited away; "c" came from the cache
    hook.on_config(config)
    with pytest.raises(PluginError, match="diagram 1 has no paragraph right after it"):
        hook.on_page_content(fence.format("c").replace("<p>Read aloud.</p>", ""), page, config, None)


def test_make_serve_on_a_busy_port_says_so_in_one_line():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(
            ["make", "-s", "serve", f"PORT={port}"], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
    assert result.returncode != 0
    assert result.stdout.strip().splitlines() == [
        f"error: port {port} on 127.0.0.1 is in use (another 'make serve'?); stop it or run 'make serve PORT=8001'"
    ], f"exit {result.returncode}; stderr: {result.stderr}"  # once seen empty on a new checkout's first run
    assert "Traceback" not in result.stderr


def _get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read().decode("utf-8")
    except OSError:
        return None


def _wait_for(predicate, seconds: float):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    return None


@pytest.mark.build  # a real `mkdocs serve`, which builds the site
def test_serve_shows_every_kind_of_edit_without_a_restart(tmp_path):
    """A real `mkdocs serve --strict` on loopback, edited as a maintainer would, in one session:

    1. a string of src/infercourse/registry.py that a page shows: the page shows the new string
       (the package is re-imported; the pages that show it are expanded and rendered again);
    2. a prose line in one lesson: that lesson shows it, and another lesson is served byte for byte as
       before (its rendering was reused, hooks/render_cache.py);
    3. a comment in a snippet file that a lesson includes (``--8<--``): the listing shows it; then every
       lesson served (from the caches, after these edits) is byte for byte what a plain ``mkdocs build``
       of the same files makes;
    4. a broken link in one lesson: the rebuild fails strict, and so does the next rebuild after an edit
       to another lesson (a page whose rendering warned is rendered again, so its warning is counted
       again instead of being hidden by the cache).

    Bounded at 5 minutes per wait: a liveness bound, not a speed claim (on a 2-core box whose cores are
    busy a full build takes minutes)."""
    project = copy_project(tmp_path / "project")
    bench = load_script("bench")
    port = bench.free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    with log.open("w", encoding="utf-8") as stderr:
        serve = bench.start_serve(project, port, cwd=tmp_path, stderr=stderr)
    lessons = sorted((project / "docs" / "lessons").glob("*.md"))
    url = {p: f"{base}/lessons/{p.stem}/" for p in lessons}

    def aborted() -> int:
        return log.read_text(encoding="utf-8").count("Aborted with")

    def edit(path: Path, old: str, new: str) -> None:
        text = path.read_text(encoding="utf-8")
        assert text.count(old) >= 1, f"{path.name} has no {old!r} to edit"
        path.write_text(text.replace(old, new, 1), encoding="utf-8")

    try:
        first = _wait_for(lambda: all(_get(u) for u in url.values()) and {p: _get(u) for p, u in url.items()}, 300)
        assert first, "mkdocs serve did not serve the lessons within 300 s"

        # 1. the package
        registry = project / "src" / "infercourse" / "registry.py"
        source = registry.read_text(encoding="utf-8")
        shown = [
            c.value
            for c in ast.walk(ast.parse(source))
            if isinstance(c, ast.Constant)
            and isinstance(c.value, str)
            and len(c.value) >= 15
            and "\n" not in c.value
            and source.count(repr(c.value)[1:-1]) == 1
            and any(c.value in html for html in first.values())
        ]
        assert shown, "no string of registry.py appears on a lesson page; pick another edit for this test"
        old = shown[0]
        edit(registry, old, old + " (edited while serving)")
        page = next(p for p, html in first.items() if old in html)
        assert _wait_for(lambda: old + " (edited while serving)" in (_get(url[page]) or ""), 300), (
            f"{url[page]} still shows the old {old!r} 300 s after the edit"
        )

        # 2. prose in one lesson; another lesson unchanged
        edited, other = lessons[0], lessons[1]

        def served(page: Path) -> str:  # without the live-reload script's build epochs
            return re.sub(r"livereload\(\d+, \d+\)", "livereload()", _get(url[page]) or "")

        before = served(other)
        marker = "A prose line added while serving."
        edit(edited, "\n## ", f"\n{marker}\n\n## ")
        assert _wait_for(lambda: marker in (_get(url[edited]) or ""), 300), f"{url[edited]} never showed the edit"
        assert served(other) == before, f"{url[other]} changed after a prose edit to {edited.name}"

        # 3. a snippet a lesson includes
        included = re.search(r'^--8<-- "(lesson_[^"]+\.py)"$', other.read_text(encoding="utf-8"), re.M)
        assert included, f"{other.name} includes no lesson snippet; pick another page for this test"
        snippet = project / "snippets" / included.group(1)
        text = snippet.read_text(encoding="utf-8")  # the comment goes inside the section the page shows
        start = re.search(r"^# --8<-- \[start:[\w-]+\]\n", text, re.M)
        assert start, f"{snippet.name} marks no section"
        text = text[: start.end()] + "# a comment added while serving\n" + text[start.end() :]
        snippet.write_text(text, encoding="utf-8")
        assert _wait_for(lambda: "a comment added while serving" in (_get(url[other]) or ""), 300), (
            f"{url[other]} never showed the edit to {snippet.name}"
        )

        # 3b. after these edits, every lesson served from the caches is what a plain build of the same files
        # makes (`mkdocs build` never caches), but for the live-reload script that serve appends
        built = mkdocs_build(project, tmp_path / "built", site_url=f"{base}/")
        assert built.returncode == 0, built.stderr[-2000:]
        for page in lessons:
            plain = (tmp_path / "built" / "lessons" / page.stem / "index.html").read_text(encoding="utf-8")
            served_html = _get(url[page]) or ""
            cached = re.sub(r"<script>\nvar livereload = .*?</script>(?=</body>)", "", served_html, flags=re.S)
            assert cached == plain, f"{url[page]} from the serve caches differs from a plain build of the same files"

        # 4. a warning is reported on every rebuild until it is fixed
        failed = aborted()
        edit(edited, marker, marker + " [a broken link](no-such-page.md)")
        assert _wait_for(lambda: aborted() == failed + 1, 300), "a broken link did not fail the strict rebuild"
        edit(other, "\n## ", "\nAnother prose line added while serving.\n\n## ")
        assert _wait_for(lambda: aborted() == failed + 2, 300), (
            "the rebuild after an edit to another lesson passed strict: the broken link's warning was not "
            "reported again"
        )
    finally:
        serve.terminate()
        try:
            serve.wait(timeout=10)
        except subprocess.TimeoutExpired:
            serve.kill()


def test_every_page_has_its_own_meta_description(site):
    pages = sorted(site.glob("**/index.html"))
    descriptions = {}
    for page in pages:
        found = re.findall(r'<meta name="description" content="([^"]*)"', page.read_text(encoding="utf-8"))
        assert len(found) == 1 and found[0].strip(), f"{page.relative_to(site)}: {found}"
        descriptions[page.relative_to(site).as_posix()] = found[0]
    assert len(pages) >= 8
    repeated = {d for d in descriptions.values() if list(descriptions.values()).count(d) > 1}
    assert not repeated, f"pages share a description: {repeated}"


def test_katex_cache_keeps_only_the_last_build_s_formulas(tmp_path):
    """hooks/math.py run as MkDocs runs it (on_config, on_page_content per page, on_post_build), on two
    builds: a formula edited away between them leaves the cache file (one real KaTeX run under Node), and the
    site's math font is cut to what the formulas draw: kappa's italic form is in it, then a's goes with "a + b"."""
    from types import SimpleNamespace

    from fontTools.ttLib import TTFont

    hook = load_hook("math")
    site = tmp_path / "site"
    config = SimpleNamespace(
        config_file_path=str(tmp_path / "mkdocs.yml"), docs_dir=str(ROOT / "docs"), site_dir=str(site)
    )
    page = SimpleNamespace(file=SimpleNamespace(src_uri="probe.md"))
    cache = tmp_path / ".cache" / "katex.json"

    def build(*formulas: str) -> dict:
        hook.on_config(config)
        for tex in formulas:
            assert "katex" in hook.on_page_content(f'<span class="arithmatex">\\({tex}\\)</span>', page, config, None)
        hook.on_post_build(config)
        return json.loads(cache.read_text(encoding="utf-8"))

    def drawn() -> set[int]:
        font = TTFont(site / "assets" / "vendor" / "stix-two-math" / "math.woff")
        assert "MATH" in font  # what stretches the brackets
        return set(font.getBestCmap())

    assert len(build("a + b", "\\kappa", "\\sqrt{2}")) == 3
    assert ord("\u221a") in drawn()  # <msqrt> draws the radical sign; no text in the MathML holds it
    assert {ord("\U0001d44e"), ord("\U0001d705")} <= drawn()  # MATHEMATICAL ITALIC SMALL A and SMALL KAPPA
    assert len(build("\\kappa")) == 1  # "a + b" and the root were edited away: their entries are gone
    assert ord("\U0001d705") in drawn() and ord("\U0001d44e") not in drawn()


def test_bench_refuses_a_lighthouse_that_traces_style_invalidations(tmp_path):
    """scripts/bench.py checks --lighthouse before any build: a Lighthouse whose trace records style
    invalidations (12.2.3's gatherer lists the category; 12.8.2's does not) is refused in one line, since it
    slows the measured page's style recalculation several times over; a path that is no Lighthouse too."""
    bench = load_script("bench")

    def lighthouse(version: str, categories: str) -> str:
        package = tmp_path / version / "lighthouse"
        (package / "cli").mkdir(parents=True)
        (package / "cli" / "index.js").write_text("", encoding="utf-8")
        (package / "package.json").write_text(json.dumps({"version": version}), encoding="utf-8")
        gatherers = package / "core" / "gather" / "gatherers"
        gatherers.mkdir(parents=True)
        (gatherers / "trace.js").write_text(f"return [\n{categories}\n];\n", encoding="utf-8")
        return str(package / "cli" / "index.js")

    tracked = "      'devtools.timeline',\n      'disabled-by-default-devtools.timeline.invalidationTracking',"
    assert bench.lighthouse_version(lighthouse("12.8.2", "      'devtools.timeline',")) == "12.8.2"
    commented = "      // 'disabled-by-default-devtools.timeline.invalidationTracking',"
    assert bench.lighthouse_version(lighthouse("13.0.0", commented)) == "13.0.0"
    with pytest.raises(SystemExit, match=r"Lighthouse 12\.2\.3 traces style invalidations.*lighthouse@12\.8\.2"):
        bench.lighthouse_version(lighthouse("12.2.3", tracked))
    with pytest.raises(SystemExit, match="is not a Lighthouse CLI"):
        bench.lighthouse_version(str(tmp_path / "bin" / "node"))


def test_serve_caches_have_one_switch(monkeypatch):
    """SERVE_CACHES=off: under `mkdocs serve` none of the three caches wraps what it would wrap (the hooks
    loaded as MkDocs loads them); on, each does. The wrapped methods are restored afterwards."""
    from markdown_exec._internal.formatters import python
    from material.plugins.search.plugin import SearchIndex
    from mkdocs.config.config_options import Hooks
    from mkdocs.structure.pages import Page
    from mkdocs_macros.plugin import MacrosPlugin

    originals = [(python, "_run_python"), (Page, "render"), (MacrosPlugin, "render")]
    originals += [(SearchIndex, "add_entry_from_context")]
    saved = [(owner, name, getattr(owner, name)) for owner, name in originals]
    names = ("exec_cache", "render_cache", "search_cache")
    hooks = {name: Hooks("plugins")._load_hook(name, str(ROOT / "hooks" / f"{name}.py")) for name in names}
    try:
        monkeypatch.setenv("SERVE_CACHES", "off")
        for hook in hooks.values():
            hook.on_startup("serve", False)
        wrapped = [f"{owner.__name__}.{name}" for owner, name, f in saved if getattr(owner, name) is not f]
        assert not wrapped, f"SERVE_CACHES=off, yet a serve cache wrapped {wrapped}; gate its on_startup on caches_on()"
        monkeypatch.setenv("SERVE_CACHES", "on")
        for hook in hooks.values():
            hook.on_startup("serve", False)
        unwrapped = [f"{owner.__name__}.{name}" for owner, name, f in saved if getattr(owner, name) is f]
        assert not unwrapped, f"under `mkdocs serve` with the caches on, nothing wrapped {unwrapped}"
    finally:
        for owner, name, f in saved:
            setattr(owner, name, f)


def test_a_moved_internal_fails_naming_the_hook_to_update():
    """hooks/reload.py's wrapped_internal: a serve cache whose target a release moved stops the build with one line
    naming the hook, for a missing attribute, a missing owner and a missing module alike."""
    from mkdocs.exceptions import PluginError

    reload = load_hook("reload")
    page, render = reload.wrapped_internal("render_cache.py", "mkdocs.structure.pages:Page.render")
    assert page.__name__ == "Page" and render is page.render
    for target in ("mkdocs.structure.pages:Page.rendr", "mkdocs.structure.pages:Pag.render", "mkdocs.gone:Page.render"):
        with pytest.raises(PluginError, match=f"^hooks/render_cache.py: {target} is gone .*; update or drop the hook$"):
            reload.wrapped_internal("render_cache.py", target)


def test_each_listing_line_carries_its_indentation():
    """hooks/listings.py: the count of a line's leading spaces, the one thing CSS cannot read (extra.css indents a
    wrapped line's continuation past it); a line without leading spaces, or outside a listing, is left alone."""
    hook = load_hook("listings")
    html = (
        '<span id="__span-0-1"><span class="linenos" data-linenos=" 1 "></span>def f():\n</span>'
        '<span id="__span-0-2"><span class="linenos" data-linenos=" 2 "></span>        return 1\n</span>'
        '<span id="__span-3-7">    x = 1\n</span><p>    text</p>'
    )
    assert hook.indent_lines(html) == (
        '<span id="__span-0-1"><span class="linenos" data-linenos=" 1 "></span>def f():\n</span>'
        '<span id="__span-0-2" style="--i:8ch"><span class="linenos" data-linenos=" 2 "></span>'
        "        return 1\n</span>"
        '<span id="__span-3-7" style="--i:4ch">    x = 1\n</span><p>    text</p>'
    )
