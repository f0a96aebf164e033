"""Headless Debian chromium, driven by Playwright, loads the built site from localhost.

On the lesson page every formula must be typeset by MathJax, every mermaid block drawn as an SVG,
with no console error and no request to any host but localhost; the same after an instant
navigation away and back.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import sync_playwright

from infercourse import course

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
ARGS = [  # no GPU, no background traffic to Google from the browser itself
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
# Material draws mermaid into a *closed* shadow root; open it so the test can look inside.
OPEN_SHADOW_ROOTS = """
const attach = Element.prototype.attachShadow;
Element.prototype.attachShadow = function (init) { return attach.call(this, {...init, mode: "open"}); };
"""
RENDER_STATE = """() => {
  const math = [...document.querySelectorAll('.md-content .arithmatex')];
  const raw = math.filter(el => !el.querySelector('mjx-container')).map(el => el.textContent.slice(0, 60));
  const errors = [...document.querySelectorAll('.md-content mjx-merror')].map(el => el.textContent);
  const pending = document.querySelectorAll('.md-content pre.mermaid').length;
  const drawn = [...document.querySelectorAll('.md-content div.mermaid')];
  const withSvg = drawn.filter(el => el.shadowRoot && el.shadowRoot.querySelector('svg'));
  const broken = withSvg.filter(el => /Syntax error|Parse error/.test(el.shadowRoot.textContent));
  const text = document.querySelector('.md-content').innerText;
  return {math: math.length, raw, errors, pending, diagrams: drawn.length, svgs: withSvg.length,
          broken: broken.length, rawDelimiters: /\\\\[(\\[]/.test(text)};
}"""
READY = """() => {
  const math = document.querySelectorAll('.md-content .arithmatex');
  const done = [...math].every(el => el.querySelector('mjx-container'));
  return done && document.querySelectorAll('.md-content pre.mermaid').length === 0;
}"""


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} not found: run `make chromium` (installs Debian's chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


def _check_rendered(page, where: str) -> dict:
    page.wait_for_function(READY, timeout=30_000)
    state = page.evaluate(RENDER_STATE)
    assert state["math"] > 0, f"{where}: no formulas found"
    assert not state["raw"], f"{where}: formulas left untypeset: {state['raw']}"
    assert not state["errors"], f"{where}: MathJax errors: {state['errors']}"
    assert not state["rawDelimiters"], f"{where}: raw \\( or \\[ left in the page text"
    assert state["diagrams"] > 0 and state["svgs"] == state["diagrams"], f"{where}: {state}"
    assert state["broken"] == 0, f"{where}: a mermaid diagram failed to parse"
    return state


LESSONS = [l["page"].removeprefix("lessons/").removesuffix(".md") for p in course.parts() for l in p["lessons"] if l["page"]]


@pytest.mark.parametrize("lesson", LESSONS)
def test_lesson_renders_offline_and_after_instant_navigation(browser, server, lesson):
    context = browser.new_context()
    page = context.new_page()
    page.add_init_script(OPEN_SHADOW_ROOTS)
    requests, console_errors = [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: console_errors.append(str(e)))

    page.goto(f"{server}/lessons/{lesson}/", wait_until="networkidle")
    first = _check_rendered(page, "first load")

    page.click("a.md-nav__link[href$='glossary/']")  # instant navigation (XHR, no reload)
    page.wait_for_url("**/glossary/")
    page.click(f"a.md-nav__link[href$='{lesson}/']")
    page.wait_for_url(f"**/{lesson}/")
    again = _check_rendered(page, "after instant navigation")
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1, "navigation reloaded the page"
    assert (again["math"], again["diagrams"]) == (first["math"], first["diagrams"])

    outside = [u for u in requests if urlsplit(u).hostname not in ("127.0.0.1", "localhost") and not u.startswith("data:")]
    assert not outside, f"requests left the machine: {outside}"
    assert not console_errors, f"console errors: {console_errors}"
    print(f"\nbrowser check {lesson}: {first['math']} formulas typeset, {first['svgs']} diagrams drawn, "
          f"{len(console_errors)} console errors, {len(outside)} outside requests, {len(requests)} requests in all")
    context.close()
