"""The real strict build: zero warnings, failing snippets fail it, every internal link and anchor resolves."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from urllib.parse import unquote, urlsplit

from bs4 import BeautifulSoup

from conftest import ROOT, mkdocs_build

LESSON = "lessons/0a-prefill-decode/index.html"


def test_strict_build_has_no_warnings(build):
    result, site = build
    log = result.stdout + result.stderr
    assert not re.search(r"\bWARNING\b", log), log
    assert (site / LESSON).is_file()


def test_snippet_that_raises_fails_the_build(tmp_path):
    project = tmp_path / "project"
    for name in ("docs", "snippets", "hooks", "src", "mkdocs.yml"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, project / name)
    snippet = project / "snippets" / "lesson_0a" / "phase_intensity.py"
    text = snippet.read_text()
    broken = text.replace('    """Print prefill and decode intensity per length as a Markdown table."""\n',
                          '    """Print prefill and decode intensity per length as a Markdown table."""\n'
                          '    raise RuntimeError("snippet made to fail")\n')
    assert broken != text, "the snippet no longer has the line this test edits"
    snippet.write_text(broken)
    result = mkdocs_build(project, tmp_path / "site")
    assert result.returncode != 0
    assert "snippet made to fail" in result.stdout + result.stderr


def _ids(html: str) -> set[str]:
    soup = BeautifulSoup(html, "html.parser")
    return {tag["id"] for tag in soup.find_all(id=True)} | {tag["name"] for tag in soup.find_all("a", attrs={"name": True})}


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
    # B = 1, S = 512: bytes 15,231,233,024 + 29,360,128 = 15.26 GB; floor 15,260,593,152 / 1.008e12 = 15.14 ms
    assert any(r[:3] == ["1", "15.26", "1.00"] and r[4] == "15.14" for r in rows)
    assert html.count("<svg") >= 1, "the build-time roofline figure is missing"
