"""The real strict build: zero warnings, failing snippets fail it, every internal link and anchor resolves."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from bs4 import BeautifulSoup

from conftest import ROOT, copy_project, mkdocs_build
from infercourse import course, glossary

LESSON = "lessons/0a-prefill-decode/index.html"
LIVE_LESSONS = [lesson["page"] for p in course.parts() for lesson in p["lessons"] if lesson["page"]]


def test_strict_build_has_no_warnings(build):
    result, site = build
    log = result.stdout + result.stderr
    assert not re.search(r"\bWARNING\b", log), log
    assert (site / LESSON).is_file()


def test_snippet_that_raises_fails_the_build(tmp_path):
    project = copy_project(tmp_path / "project")
    snippet = project / "snippets" / "lesson_0a" / "phase_intensity.py"
    text = snippet.read_text()
    broken = text.replace(
        '    """Print prefill and decode intensity per length as a Markdown table."""\n',
        '    """Print prefill and decode intensity per length as a Markdown table."""\n'
        '    raise RuntimeError("snippet made to fail")\n',
    )
    assert broken != text, "the snippet no longer has the line this test edits"
    snippet.write_text(broken)
    result = mkdocs_build(project, tmp_path / "site")
    assert result.returncode != 0
    assert "snippet made to fail" in result.stdout + result.stderr


def _ids(html: str) -> set[str]:
    soup = BeautifulSoup(html, "html.parser")
    return {tag["id"] for tag in soup.find_all(id=True)} | {
        tag["name"] for tag in soup.find_all("a", attrs={"name": True})
    }


def test_every_internal_link_and_anchor_resolves(site):
    pages = {path: path.read_text(encoding="utf-8") for path in site.rglob("*.html")}
    ids = {path: _ids(html) for path, html in pages.items()}
    broken, checked = [], 0
    for path, html in pages.items():
        soup = BeautifulSoup(html, "html.parser")
        for tag in soup.find_all(True):
            for attr in ("href", "src", "xlink:href"):
                url = tag.get(attr)
                if not url or not isinstance(url, str):
                    continue
                parts = urlsplit(url)
                if parts.scheme or parts.netloc or url.startswith(("mailto:", "data:", "javascript:")):
                    continue
                checked += 1
                if not parts.path:
                    target = path
                elif parts.path.startswith("/"):  # 404.html links from the site root (site_url's path is /)
                    target = site / unquote(parts.path).lstrip("/")
                else:
                    target = (path.parent / unquote(parts.path)).resolve()
                if target.is_dir():
                    target = target / "index.html"
                if not target.exists():
                    broken.append(f"{path.relative_to(site)}: {attr}={url} (no file)")
                elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in ids[target]:
                    broken.append(f"{path.relative_to(site)}: {attr}={url} (no anchor)")
    assert checked > 100, f"only {checked} links found; is the site empty?"
    assert not broken, "\n".join(broken)


def test_link_check_sees_a_broken_anchor(tmp_path):
    """The checker above must be able to fail: a page with a dangling anchor is reported."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "index.html").write_text('<a href="../b/#missing">x</a>' + "<a href='#top' id='top'></a>" * 101)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "index.html").write_text('<h1 id="present">b</h1>')
    try:
        test_every_internal_link_and_anchor_resolves(tmp_path)
    except AssertionError as error:
        assert "../b/#missing (no anchor)" in str(error)
    else:
        raise AssertionError("a dangling anchor was not reported")


def test_page_shows_what_the_snippet_printed(site):
    html = (site / LESSON).read_text(encoding="utf-8")
    soup = BeautifulSoup(html, "html.parser")
    rows = [[c.get_text(strip=True) for c in tr.find_all("td")] for tr in soup.find_all("tr")]
    # Exact N = 7,615,616,512 and kappa = 57,344 B: I = 2*N*S / (2*N + kappa*S); worked by hand:
    # S=128:  1,949,597,827,072 / (15,231,233,024 + 7,340,032)   = 127.94 -> "127.9"
    # S=1024: 15,596,782,616,576 / (15,231,233,024 + 58,720,256) = 1,020.08 -> "1,020.1"
    assert ["128", "127.9", "1.00", "128"] in rows
    assert ["1,024", "1,020.1", "1.00", "1,024"] in rows
    assert html.count("<svg") >= 2, "the build-time figures are missing"


def _rows(site, page):
    soup = BeautifulSoup((site / page).read_text(encoding="utf-8"), "html.parser")
    return [[c.get_text(strip=True) for c in tr.find_all("td")] for tr in soup.find_all("tr")]


def test_lesson_1a_shows_what_the_snippet_printed(site):
    rows = _rows(site, "lessons/1a-kv-cache/index.html")
    # kappa by hand: 2*28*4*128*2 = 57,344; 2*40*40*128*2 = 819,200; 61*(512+64)*2 = 70,272
    assert any(r[:5] == ["Qwen/Qwen2.5-7B-Instruct", "GQA", "K and V: 4 heads × 128", "57,344", "28,672"] for r in rows)
    assert any(r[:2] == ["meta-llama/Llama-2-13b-hf", "MHA"] and r[3] == "819,200" for r in rows)
    assert any(r[:2] == ["deepseek-ai/DeepSeek-V3", "MLA"] and r[3] == "70,272" for r in rows)
    # capacity by hand (tests/test_kv_roofline.py): 110,160 tokens; 110,160 / 8,192 = 13.45
    assert any(r[:4] == ["bf16", "57,344", "5.88", "110,160"] and r[5] == "13.45" for r in rows)


def test_lesson_2a_shows_what_the_snippet_printed(site):
    html = (site / "lessons/2a-roofline/index.html").read_text(encoding="utf-8")
    rows = _rows(site, "lessons/2a-roofline/index.html")
    # B = 1, S = 512, kernel by kernel: matmuls 7,070,619,136 * 2 B / 1.008e12 B/s = 14.029 ms;
    # attention 57,344 * 512 = 29,360,128 B / 1.008e12 = 0.029 ms; step 14.058 ms -> 1 / 0.014058 = 71 tokens/s
    assert ["1", "1", "0.6 %", "14.03", "0.029", "14.06", "71"] in rows
    assert html.count("<svg") >= 1, "the build-time roofline figure is missing"


def _built(site: Path, page: str) -> Path:
    return site / page.removesuffix(".md") / "index.html"


def test_every_live_lesson_is_built_and_in_the_nav(site):
    assert len(LIVE_LESSONS) >= 3
    nav = (site / "index.html").read_text(encoding="utf-8")
    for page in LIVE_LESSONS:
        assert _built(site, page).is_file(), page
        assert page.removesuffix(".md") + "/" in nav, f"{page} is live in course.yml but not in the nav"


def test_tooltips_on_every_lesson_equal_the_glossary_definitions(site):
    """One source: every <abbr title> on a lesson is, word for word, the glossary.yml tooltip of its term
    (term, Chinese term, definition)."""
    definition = {word: glossary.tooltip(e) for e in glossary.entries() for word in e["abbr"]}
    for page in LIVE_LESSONS:
        soup = BeautifulSoup(_built(site, page).read_text(encoding="utf-8"), "html.parser")
        abbrs = soup.select(".md-content abbr")
        assert abbrs, f"{page}: no glossary tooltip at all"
        for abbr in abbrs:
            word = abbr.get_text()
            assert word in definition, f"{page}: tooltip on {word!r}, which no glossary entry claims"
            assert abbr["title"] == definition[word], f"{page}: tooltip of {word!r} differs from glossary.yml"
    glossary_page = BeautifulSoup((site / "glossary" / "index.html").read_text(encoding="utf-8"), "html.parser")
    for e in glossary.entries():
        heading = glossary_page.find(id=e["id"])
        assert heading is not None, e["id"]
        assert " ".join(heading.find_next("p").get_text().split()) == " ".join(e["definition"].split())


def test_lesson_0b_shows_the_worked_example(site):
    soup = BeautifulSoup(_built(site, "lessons/0b-metrics.md").read_text(encoding="utf-8"), "html.parser")
    rows = [[" ".join(c.get_text().split()) for c in tr.find_all(["td", "th"])] for tr in soup.find_all("tr")]
    # request C: arrives at 100 ms, tokens at 400, 430, 460, 610, 640 -> TTFT 300, TPOT 240/4 = 60, E2E 540
    assert ["C", "100", "5", "300", "60.0", "30, 30, 150, 30", "540", "no"] in rows
    # mean TPOT (60+20+60)/3 = 46.67 in both runs; mean ITL 560/16 = 35.00 mixed, 560/12 = 46.67 same length
    assert ["mean TPOT (ms), request-weighted", "46.67", "46.67"] in rows
    assert ["mean ITL (ms), token-weighted", "35.00", "46.67"] in rows
    # lab prediction, prompt 128, output 128, kernel by kernel (M = 7,070,619,136, head H = 544,997,376):
    # TTFT: matmuls max((2(M-H)*128 + 2H) / 165.2e12 = 10.119 ms, 2M B / 1.008e12 = 14.029 ms)
    #       + attention max(401,408*128*129/2 / 165.2e12, 57,344*128 / 1.008e12) = 0.020 ms -> 14.049 -> "14.0"
    # TPOT at mean context 192: 14.029 + 57,344*192 / 1.008e12 = 14.040 ms -> "14.04"
    # E2E: 14.049 + 127 * 14.040 = 1,797.1 ms -> "1,797"
    assert ["128", "128", "14.0", "14.04", "1,797"] in rows


def test_lesson_0c_shows_the_module_tables(site):
    soup = BeautifulSoup(_built(site, "lessons/0c-transformer.md").read_text(encoding="utf-8"), "html.parser")
    rows = [[" ".join(c.get_text().split()) for c in tr.find_all(["td", "th"])] for tr in soup.find_all("tr")]
    # hand counts from each config.json (lesson 0C's formula): Qwen2.5-7B 7,615,616,512;
    # Qwen2.5-0.5B 494,032,768; Llama-3-8B 8,030,261,248; Qwen3-4B 4,022,468,096
    for total in ("7,615,616,512", "494,032,768", "8,030,261,248", "4,022,468,096"):
        assert ["total N", "", "", total] in rows, total
    assert ["MLP gate, up, down", "3 × 3,584 × 18,944", "203,685,888", "5,703,204,864"] in rows  # x 28
    assert ["q_norm, k_norm", "2 × 128", "256", "9,216"] in rows  # Qwen3-4B, 36 layers
    # attention at 8,192 tokens: 4*28*28*128*8192 = 3,288,334,336 = 23.3 % of 2M = 14,141,238,272
    assert ["8,192", "3,288,334,336", "23.3 %"] in rows


def test_no_template_debris_in_lesson_text(site):
    """Jinja slips that a strict build does not catch: table rows turned into paragraphs, runaway strings."""
    for page in LIVE_LESSONS:
        soup = BeautifulSoup(_built(site, page).read_text(encoding="utf-8"), "html.parser")
        content = soup.select_one(".md-content")
        for tag in content.select("pre, code, svg, script, .arithmatex"):
            tag.decompose()
        stray_rows = [p.get_text()[:80] for p in content.find_all("p") if p.get_text().lstrip().startswith("|")]
        assert not stray_rows, f"{page}: table rows rendered as text: {stray_rows}"
        long_words = [w[:60] for w in content.get_text(" ").split() if len(w) > 40 and "/" not in w]
        assert not long_words, f"{page}: runaway strings: {long_words}"
        assert "{{" not in content.get_text() and "{%" not in content.get_text(), f"{page}: unrendered Jinja"


# --- lessons show excerpts, not files ------------------------------------------------------------
MAX_ELEMENTS = 4_000
"""Issue 29's goal: HTML elements of a lesson's page."""
MAX_CODE_LINES = 300
"""Highlighted code lines one lesson page may inline (issue: pages taught with excerpts, the file a click away)."""


def code_lines(html: str) -> int:
    """Lines of highlighted code (Pygments' ``<div class="highlight">`` blocks) in a built page."""
    soup = BeautifulSoup(html, "html.parser")
    return sum(block.get_text().rstrip("\n").count("\n") + 1 for block in soup.select("div.highlight code"))


def test_no_lesson_inlines_more_than_300_code_lines(site):
    counts = {page: code_lines(_built(site, page).read_text(encoding="utf-8")) for page in LIVE_LESSONS}
    over = {page: n for page, n in counts.items() if n > MAX_CODE_LINES}
    assert not over, (
        f"lessons inline more than {MAX_CODE_LINES} code lines: {over}; show sections of the file "
        "('# --8<-- [start:NAME]' in the file, snippets.excerpts) and link the whole file"
    )


def test_no_lesson_has_more_than_4000_elements(site):
    """Every element is one a phone styles and lays out (Lighthouse's DOM size; issue 29's goal is 4,000 a lesson).
    MathML formulas, tooltips at first use, flattened figure groups and excerpts of the lesson snippets in place
    of whole files brought the lessons from 4,200-12,500 to 2,600-3,950 (2026-12-06)."""
    counts = {
        page: len(BeautifulSoup(_built(site, page).read_text(encoding="utf-8"), "html.parser").find_all(True))
        for page in LIVE_LESSONS
    }
    over = {page: n for page, n in counts.items() if n > MAX_ELEMENTS}
    assert not over, f"lessons over {MAX_ELEMENTS} HTML elements: {over}; show excerpts, not whole files or tables"


def test_code_line_count_sees_a_whole_file():
    """The count above can fail: 301 lines of one listing (what a whole lab script inlined gives) are 301."""
    listing = "\n".join(f"<span>line {i}</span>" for i in range(301))
    html = f'<div class="highlight"><pre><span></span><code>{listing}\n</code></pre></div>'
    assert code_lines(html) == 301 > MAX_CODE_LINES


def test_each_lab_script_is_published_whole_and_linked_from_its_lesson(site):
    """hooks/code_files.py: code/labs/<lab>.py is the source byte for byte, and the lesson links it."""
    for lesson in (lesson for lesson in course.live_lessons() if lesson.get("lab")):
        script = f"{lesson['lab']}.py"
        assert (site / "code" / "labs" / script).read_bytes() == (ROOT / "snippets" / "labs" / script).read_bytes()
        html = _built(site, lesson["page"]).read_text(encoding="utf-8")
        assert f'href="../../code/labs/{script}"' in html, f"{lesson['page']} does not link the whole {script}"
