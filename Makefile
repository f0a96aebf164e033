# The one entry point. CI (.ci/run) calls `make test`; a reader needs only `make serve` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CHROMIUM ?= /usr/bin/chromium
export NO_MKDOCS_2_WARNING := 1  # silence the Material end-of-life banner in build logs

.PHONY: serve build test chromium lock vendor clean

# --- environments -------------------------------------------------------------------------
# The docs/test environment, made from the lock of exact versions. Rebuilt when the lock changes.
$(STAMP): requirements.lock pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python 3.11 or run 'make PYTHON=/path/to/python3.11 ...'"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $@

# Debian's chromium for the browser test (playwright drives it; no browser download).
chromium:
	@if [ -x "$(CHROMIUM)" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; \
	else echo "error: $(CHROMIUM) missing and not root; install Debian's 'chromium' package"; exit 1; fi; \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null

# --- the site -----------------------------------------------------------------------------
serve: $(STAMP)
	$(BIN)/mkdocs serve --strict --dev-addr 127.0.0.1:8000 --livereload

build: $(STAMP)
	$(BIN)/mkdocs build --strict

# --- tests --------------------------------------------------------------------------------
test: $(STAMP) chromium
	$(BIN)/pytest

# --- maintainer tools ---------------------------------------------------------------------
# Re-solve the lock from pyproject.toml (needs PyPI).
lock: $(STAMP)
	$(BIN)/pip install --quiet uv==0.13.9
	$(BIN)/uv pip compile pyproject.toml --extra test --python-version 3.11.7 --no-header -o requirements.lock

# Refresh the committed mermaid / MathJax files from the npm registry (versions and integrity in package-lock.json).
vendor:
	$(BIN)/python scripts/vendor_js.py

clean:
	rm -rf site .cache
