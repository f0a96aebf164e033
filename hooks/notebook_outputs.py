"""MkDocs hook: a lab notebook's page shows the notebook run, with its outputs: the exercises, the lesson's
prediction, the committed receipts through the lesson's claims, and the figure of measured against predicted.

Each ``docs/notebooks/<lab>.ipynb`` is executed top to bottom with ``COMMITTED = True`` (it checks, installs,
downloads and runs nothing, and shows the course's committed receipts: a GPU receipt where one exists, then the
CPU reference), and mkdocs-jupyter renders that executed copy. The notebook a reader downloads from the page is
still the repository's, without outputs: this hook hands mkdocs-jupyter the executed copy only while the page
renders. A notebook that fails (a committed receipt breaks a claim of its lesson) fails the build, naming it.

Executing the 15 notebooks takes about 20 s on two cores, so each executed copy is kept in
``.cache/notebook-runs/<key>/notebooks/<lab>.ipynb``, ``key`` a digest of the notebook, the parameters, the
Python and package versions that shape the outputs, and the content (not the dates) of everything a notebook
reads: ``src/``, ``snippets/labs/``, ``scripts/``, ``receipts/`` and the test models' configs. A build runs only
the notebooks whose key changed, several at a time, and removes the copies it did not use.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority

PARAMETERS = {"COMMITTED": True}
"""What the site's run of a notebook sets (the template's parameter cell explains each)."""
READ = ("src", "snippets/labs", "scripts", "receipts")
"""What a notebook reads at run time, under the project's root..."""
NOT_READ = ("src/infercourse/pages",)
"""...but the page modules, which only mkdocs-macros imports (tests/test_import_rules.py, rule 5): an edit to a page's
values, the commonest while serving, re-runs no notebook."""
MODEL_CONFIGS = ".cache/models/*/config.json"
"""What it reads besides: a committed CPU receipt's model is a test model's folder (``make testmodels``), whose
config its lab's claims and comparison read (``labs.model_config_for``); without it they say n/a."""
VERSIONS = ("matplotlib", "numpy", "ipykernel", "nbclient", "nbconvert")
"""The distributions whose versions change what a run prints or draws."""
CACHE = ".cache/notebook-runs"
TIMEOUT_S = 300

_runs: dict[str, Path] = {}
"""A notebook's ``src_uri`` -> its executed copy, for this build."""
_sources: dict[str, str] = {}
"""A notebook's ``src_uri`` -> the repository's copy, put back once its page is rendered."""


def inputs_digest(root: Path) -> str:
    """A digest of the content of every file under ``READ`` (not ``NOT_READ``) of ``root`` and of
    ``MODEL_CONFIGS``, of ``PARAMETERS``, of the Python version and of the installed versions of ``VERSIONS``."""
    digest = hashlib.sha256(f"{sys.version}|{PARAMETERS!r}\n".encode())
    for name in VERSIONS:
        digest.update(f"{name}=={importlib.metadata.version(name)}\n".encode())
    skip = tuple(root / folder for folder in NOT_READ)
    files = [
        path
        for folder in READ
        for path in sorted((root / folder).rglob("*"))
        if "__pycache__" not in path.parts and not any(path.is_relative_to(s) for s in skip)
    ]
    for path in [*files, *sorted(root.glob(MODEL_CONFIGS))]:
        if path.is_file():
            digest.update(f"{path.relative_to(root)}\n".encode() + path.read_bytes())
    return digest.hexdigest()


def _run(source: Path, target: Path) -> None:
    from infercourse import labnotebook  # as hooks/reload.py left it: the package as it is on disk now

    notebook, error = labnotebook.execute(source, PARAMETERS, TIMEOUT_S)
    if error:
        last = error.strip().splitlines()[-1] if error.strip() else "no message"
        raise PluginError(f"hooks/notebook_outputs.py: {source.name} failed with COMMITTED = True: {last}")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.part")
    nbformat.write(notebook, partial)
    partial.replace(target)  # a build beside this one never reads half a notebook


def on_files(files, config):
    """Execute the notebooks whose executed copy is not kept yet (several at a time: each is its own kernel)."""
    root = Path(config.config_file_path).parent
    inputs = inputs_digest(root)
    _runs.clear()
    todo = []
    for file in files:
        if file.src_uri.startswith("notebooks/") and file.src_uri.endswith(".ipynb"):
            source = Path(file.abs_src_path)
            key = hashlib.sha256(inputs.encode() + source.read_bytes()).hexdigest()[:24]
            target = root / CACHE / key / "notebooks" / source.name
            _runs[file.src_uri] = target
            if not target.is_file():
                todo.append((source, target))
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        list(pool.map(lambda job: _run(*job), todo))
    return files


@event_priority(50)  # before mkdocs-jupyter's on_pre_page, which keys its own cache on the file it renders
def on_pre_page(page, config, files):
    run = _runs.get(page.file.src_uri)
    if run is not None:
        _sources[page.file.src_uri] = page.file.abs_src_path
        page.file.abs_src_path = str(run)
    return page


@event_priority(50)  # before hooks/notebooks.py reads the cells; mkdocs-jupyter copies the source for download later
def on_page_content(html, page, config, files):
    source = _sources.pop(page.file.src_uri, None)
    if source is not None:
        page.file.abs_src_path = source
    return html


def on_post_build(config):
    """Remove the executed copies this build did not use."""
    cache = Path(config.config_file_path).parent / CACHE
    used = {run.parent.parent for run in _runs.values()}
    for entry in cache.iterdir() if cache.is_dir() else ():
        if entry not in used:
            shutil.rmtree(entry, ignore_errors=True)
