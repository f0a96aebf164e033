"""Shared fixtures: one strict build of the real site per test session, and a localhost server for it."""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def mkdocs_build(project_dir: Path, site_dir: Path) -> subprocess.CompletedProcess:
    """Run ``mkdocs build --strict`` (never ``-v``: it turns anchor validation off) and capture its log."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        cwd=project_dir, env=env, capture_output=True, text=True, timeout=600,
    )


@pytest.fixture(scope="session")
def build(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """The strict build of this repository: (completed process, site directory)."""
    site = tmp_path_factory.mktemp("site")
    result = mkdocs_build(ROOT, site)
    assert result.returncode == 0, f"strict build failed:\n{result.stdout}\n{result.stderr}"
    return result, site


@pytest.fixture(scope="session")
def site(build) -> Path:
    return build[1]


@pytest.fixture(scope="session")
def server(site):
    """Serve the built site on 127.0.0.1 (a free port); yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output readable
        pass
