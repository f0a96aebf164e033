"""How fast the site is to edit and to read, measured on this machine (figures to report, not a test).

Prints:
- build: wall time of `mkdocs build --strict`, with build-time snippets (markdown-exec) on and off,
  and their ratio;
- reload: a real `mkdocs serve` on loopback; a one-line prose edit to a lesson, time until the
  served page shows it;
- bytes: for every page of the sitemap loaded in headless chromium (desktop), what it requests,
  gzip-compressed (what a server with compression transfers), and raw;
- Lighthouse (optional, `--lighthouse PATH` to its CLI, e.g. node_modules/.bin/lighthouse):
  performance, accessibility, best practices and SEO for the home page, the glossary and each lesson,
  mobile and desktop, the median of --runs runs, against a local static server that gzips like any web
  host, offline; with the load average, since the performance score drops when other work shares the machine.

Usage: .venv/bin/python scripts/bench.py [--lighthouse PATH] [--runs N]   (or `make bench`)
"""

from __future__ import annotations

import argparse
import functools
import gzip
import http.server
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
PROJECT = ("docs", "snippets", "hooks", "overrides", "src", "receipts", "mkdocs.yml")
ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _copy_project(dest: Path, *, exec_on: bool = True) -> Path:
    for name in PROJECT:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, dest / name)
    if not exec_on:  # markdown-exec out: its blocks stay plain code blocks (and anchors they print go missing)
        config = dest / "mkdocs.yml"
        text = re.sub(r"\n  - markdown-exec\b.*\n(?:      .*\n)*", "\n", config.read_text(encoding="utf-8"))
        config.write_text(text.replace("\nstrict: true\n", "\nstrict: false\n"), encoding="utf-8")
    for name in ("katex.json", "mermaid.json"):  # formulas and diagrams already drawn: measure what an edit costs
        cache = ROOT / ".cache" / name
        if cache.is_file():
            (dest / ".cache").mkdir(exist_ok=True)
            shutil.copy(cache, dest / ".cache" / name)
    return dest


def _build_seconds(project: Path, site: Path, site_url: str | None = None) -> float:
    env = {**ENV, "PYTHONPATH": str(project / "src"), **({"SITE_URL": site_url} if site_url else {})}
    start = time.perf_counter()
    strict = ["--strict"] if "strict: true" in (project / "mkdocs.yml").read_text(encoding="utf-8") else []
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", *strict, "-f", str(project / "mkdocs.yml"), "-d", str(site)],
        cwd=project.parent,
        env=env,
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"error: the build failed:\n{result.stderr[-2000:]}")
    return elapsed


def bench_build(tmp: Path, runs: int) -> None:
    times = {}
    for exec_on in (True, False):
        project = _copy_project(tmp / f"exec-{exec_on}", exec_on=exec_on)
        times[exec_on] = min(_build_seconds(project, tmp / f"site-{exec_on}-{i}") for i in range(runs))
    print(
        f"build: {times[True]:.1f} s with snippets run, {times[False]:.1f} s without "
        f"(exec on/off ratio {times[True] / times[False]:.2f}; best of {runs})"
    )


def _get(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read().decode("utf-8")
    except OSError:
        return ""


def start_serve(project: Path, port: int, *, cwd: Path, stderr=subprocess.DEVNULL) -> subprocess.Popen:
    """Start ``mkdocs serve --strict --livereload`` of the copy ``project`` on 127.0.0.1:``port``, from ``cwd``,
    with the copy's own package ahead of the editable install; its log goes to ``stderr`` (a file, or nowhere).
    The caller waits for the first page and terminates the process."""
    return subprocess.Popen(
        [sys.executable, "-m", "mkdocs", "serve", "--strict", "--config-file", str(project / "mkdocs.yml")]
        + ["--dev-addr", f"127.0.0.1:{port}", "--livereload"],
        cwd=cwd,
        env={**ENV, "PYTHONPATH": str(project / "src"), "SITE_URL": f"http://127.0.0.1:{port}/"},
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )


def bench_reload(tmp: Path, runs: int) -> None:
    project = _copy_project(tmp / "serve")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    lesson = sorted((project / "docs" / "lessons").glob("*.md"))[0]
    url = f"{base}/lessons/{lesson.stem}/"
    serve = start_serve(project, port, cwd=tmp)
    try:
        deadline = time.monotonic() + 120
        while "</html>" not in _get(url):
            if time.monotonic() > deadline:
                sys.exit("error: mkdocs serve did not serve the page within 120 s")
            time.sleep(0.2)
        time.sleep(2)  # let the first build's file-watcher settle
        seconds = []
        for i in range(runs):
            marker = f"Bench edit number {i} at {time.time_ns()}."
            with lesson.open("a", encoding="utf-8") as f:
                f.write(f"\n{marker}\n")
            start = time.perf_counter()
            while marker not in _get(url):
                if time.perf_counter() - start > 120:
                    sys.exit("error: the edit did not show within 120 s")
                time.sleep(0.05)
            seconds.append(time.perf_counter() - start)
            time.sleep(1)
        print(
            f"reload: a prose edit shows after {min(seconds):.1f} s (best of {runs}; all: "
            f"{', '.join(f'{s:.1f}' for s in seconds)} s)"
        )
    finally:
        serve.terminate()
        serve.wait(timeout=20)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    """A static server like any web host: gzip when the browser accepts it, no log lines."""

    def log_message(self, *args):
        pass

    def send_head(self):
        if "gzip" not in self.headers.get("Accept-Encoding", ""):
            return super().send_head()
        path = Path(self.translate_path(self.path))
        if path.is_dir():
            if not self.path.split("?")[0].endswith("/"):
                return super().send_head()  # the redirect to the slash
            path = path / "index.html"
        if not path.is_file():
            return super().send_head()
        body = gzip.compress(path.read_bytes(), 6)
        self.send_response(200)
        self.send_header("Content-Type", self.guess_type(str(path)))
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return io.BytesIO(body)


def bench_bytes(tmp: Path) -> tuple[Path, str, http.server.ThreadingHTTPServer]:
    from playwright.sync_api import sync_playwright

    site = tmp / "site-bytes"
    port_probe = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    base = f"http://127.0.0.1:{port_probe.server_address[1]}"
    _build_seconds(_copy_project(tmp / "bytes"), site, site_url=f"{base}/")
    threading.Thread(target=port_probe.serve_forever, daemon=True).start()
    paths = [urlsplit(u).path for u in re.findall(r"<loc>([^<]+)</loc>", (site / "sitemap.xml").read_text())]
    print("bytes per page (desktop, everything requested until the network is idle; gzip -6 of each file):")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        for path in paths:
            context = browser.new_context(viewport={"width": 1280, "height": 800})
            page = context.new_page()
            requests: list = []
            page.on("request", lambda request, into=requests: into.append(request))
            page.goto(base + path, wait_until="networkidle")
            page.wait_for_timeout(500)
            urls = [r.url for r in requests]
            files = [site / urlsplit(u).path.lstrip("/") for u in dict.fromkeys(urls) if u.startswith(base)]
            files = [f / "index.html" if f.is_dir() else f for f in files]
            raw = sum(f.stat().st_size for f in files if f.is_file())
            packed = sum(len(gzip.compress(f.read_bytes(), 6)) for f in files if f.is_file())
            print(f"  {path:45} {packed / 1e6:5.2f} MB compressed, {raw / 1e6:5.2f} MB raw, {len(files)} requests")
            context.close()
        browser.close()
    return site, base, port_probe


def _lighthouse_scores(cli: str, url: str, preset: str) -> list[int] | str:
    """One Lighthouse run: [performance, accessibility, best practices, SEO] as 0-100, or why it failed."""
    args = [
        cli,
        url,
        "--quiet",
        "--output=json",
        "--output-path=stdout",
        f"--chrome-path={CHROMIUM}",
        "--chrome-flags=--headless --no-sandbox --disable-gpu",
        "--only-categories=performance,accessibility,best-practices,seo",
    ]
    if preset == "desktop":
        args.append("--preset=desktop")
    result = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        return f"failed ({result.stderr.strip().splitlines()[-1:]})"
    report = json.loads(result.stdout)
    scores = [report["categories"][c]["score"] for c in ("performance", "accessibility", "best-practices", "seo")]
    if None in scores:  # Lighthouse could not score a category (e.g. no largest contentful paint was seen)
        return f"failed (no score: {(report.get('runtimeError') or {}).get('code', 'a metric errored')})"
    return [round(100 * s) for s in scores]


LIGHTHOUSE_PIN = "12.8.2"  # the newest release that runs on Node 20 (13.x needs Node 22.19)


def lighthouse_version(cli: str) -> str:
    """The version of the Lighthouse whose CLI is ``cli`` (node_modules/.bin/lighthouse or its cli/index.js).

    Exits with one line before any build if ``cli`` is not a Lighthouse CLI, or if that Lighthouse
    records style invalidations in its trace (``disabled-by-default-devtools.timeline.invalidationTracking``,
    in 12.2.3 and other older releases; gone from 12.8.2): with it on, Chromium records every invalidation
    and the measured page's style recalculations run several times slower (lesson 0A, mobile, this machine:
    total blocking time 4,360-8,560 ms under 12.2.3 against 1,090 ms under 12.8.2), so its performance
    score measures the tracing as much as the page.
    """
    package = Path(cli).resolve().parents[1]
    try:
        version = json.loads((package / "package.json").read_text(encoding="utf-8"))["version"]
        trace = (package / "core" / "gather" / "gatherers" / "trace.js").read_text(encoding="utf-8")
    except (OSError, ValueError, KeyError):
        sys.exit(
            f"error: {cli} is not a Lighthouse CLI (no lighthouse package beside it); install one with "
            f"'npm install -E --prefix /tmp/lh lighthouse@{LIGHTHOUSE_PIN}' and pass "
            "--lighthouse /tmp/lh/node_modules/.bin/lighthouse"
        )
    if re.search(r"^\s*'disabled-by-default-devtools\.timeline\.invalidationTracking'", trace, re.M):
        sys.exit(
            f"error: Lighthouse {version} traces style invalidations, which slows the measured page's style "
            f"recalculation several times over; use {LIGHTHOUSE_PIN}: "
            f"'npm install -E --prefix /tmp/lh lighthouse@{LIGHTHOUSE_PIN}'"
        )
    return version


LIGHTHOUSE_PAGES = ("/", "/glossary/", "/notebooks/spec_decode/")
"""Pages measured besides the lessons: issue 29's goals name the home page and the glossary; issue 34's, the lab
notebooks' pages (lab 6A's: the longest claims report and a 12-row figure)."""


def bench_lighthouse(cli: str, version: str, site: Path, base: str, runs: int) -> None:
    paths = [urlsplit(u).path for u in re.findall(r"<loc>([^<]+)</loc>", (site / "sitemap.xml").read_text())]
    pages = [p for p in paths if p in LIGHTHOUSE_PAGES] + [p for p in paths if "/lessons/" in p]
    print(
        f"Lighthouse {version} (performance / accessibility / best practices / SEO, each the "
        f"median of {runs} runs; "
        "the performance score follows this machine's load, given as the 1-minute load average):"
    )
    for path in pages:
        row = []
        for preset in ("mobile", "desktop"):
            results = [_lighthouse_scores(cli, base + path, preset) for _ in range(runs)]
            failed = [r for r in results if isinstance(r, str)]
            if failed:
                row.append(f"{preset}: {failed[0]}")
                continue
            medians = [sorted(column)[len(column) // 2] for column in zip(*results, strict=True)]
            row.append(f"{preset} {'/'.join(map(str, medians))}")
        load = os.getloadavg()[0]
        print(f"  {path:45} {'   '.join(row)}   (load {load:.1f})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", type=int, default=3, help="repeats for build and reload (best is reported) and Lighthouse (median)"
    )
    parser.add_argument("--lighthouse", help="path to the lighthouse CLI (npm package 'lighthouse'); skipped if absent")
    args = parser.parse_args()
    if args.runs < 1:
        sys.exit("error: --runs must be 1 or more")
    # Checked before the builds: a wrong CLI costs seconds, not minutes.
    version = lighthouse_version(args.lighthouse) if args.lighthouse else None
    with tempfile.TemporaryDirectory(prefix="bench-") as name:
        tmp = Path(name)
        bench_build(tmp, args.runs)
        bench_reload(tmp, args.runs)
        site, base, httpd = bench_bytes(tmp)
        if args.lighthouse:
            bench_lighthouse(args.lighthouse, version, site, base, args.runs)
        httpd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
