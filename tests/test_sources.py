"""Sources a reader can open: every registry fact names one, the Facts & sources page lists them all,
each lesson's Facts used links into it, and nothing in the repository cites a file it does not contain."""

from __future__ import annotations

import re
import subprocess

import pytest
from bs4 import BeautifulSoup

from conftest import ROOT
from infercourse import course, registry

LESSONS = [lesson["page"] for p in course.parts() for lesson in p["lessons"] if lesson["page"]]
UNLINKED = {
    "gpu-memory-total-rtx-4090": "public nvidia-smi logs have no one address; the page says so",
    "gpu-memory-total-h200": "public nvidia-smi logs have no one address; the page says so",
}
"""Facts whose source has no address, and why (assumptions need none)."""


def test_every_fact_has_an_openable_source():
    problems = []
    for fact in registry.facts():
        src = fact.source
        if not src.where.strip():
            problems.append(f"{fact.id}: no source named")
        if src.kind != "assumption" and fact.id not in UNLINKED and not src.url.startswith("https://"):
            problems.append(f"{fact.id}: a {src.kind} source needs an address a reader can open")
        vllm_source = src.kind == "primary" and "github.com/vllm-project/vllm/blob/v0.26.0/" in src.url
        if vllm_source and (not re.search(r"#L\d+", src.url) or not re.search(r"`:\d+", src.where)):
            problems.append(f"{fact.id}: a vLLM source needs file:line at v0.26.0")
    assert not problems, "\n".join(problems)


def test_fact_ids_are_unique_and_stable():
    ids = [fact.id for fact in registry.facts()]
    assert len(ids) == len(set(ids))
    assert registry.model_fact_id("Qwen/Qwen2.5-7B-Instruct") == "model-qwen-qwen2-5-7b-instruct"
    assert registry.gpu_fact_id("RTX 4090") == "gpu-rtx-4090"


def test_a_source_kind_is_checked():
    with pytest.raises(ValueError, match="kind"):
        registry.Source("somewhere", "https://example.org", "tertiary")


def test_vllm_source_cites_file_and_line():
    # arg_utils.py:2460 is the 70 GiB test of EngineArgs.get_batch_defaults in the 0.26.0 release
    src = registry.vllm_source("vllm/engine/arg_utils.py", 2460)
    assert src.url == "https://github.com/vllm-project/vllm/blob/v0.26.0/vllm/engine/arg_utils.py#L2460"
    assert src.where == "vLLM 0.26.0, `vllm/engine/arg_utils.py`:2460" and src.kind == "primary"


def test_scheduler_defaults_per_device_class_and_entry_point():
    # vllm/engine/arg_utils.py:2460-2479 at v0.26.0: >= 70 GiB and not an A100 -> 16384/8192 tokens, 1024 seqs;
    # otherwise 8192 (LLM) / 2048 (serve) tokens, 256 seqs. RTX 4090: 24 GB < 70 GiB; H200: 141 GB = 131 GiB.
    assert registry.vllm_scheduler_defaults("RTX 4090", "LLM") == (8192, 256)
    assert registry.vllm_scheduler_defaults("RTX 4090", "vllm serve") == (2048, 256)
    assert registry.vllm_scheduler_defaults("H200", "LLM") == (16384, 1024)
    assert registry.vllm_scheduler_defaults("H200", "vllm serve") == (8192, 1024)
    assert registry.vllm_scheduler_defaults("A100", "LLM") == (8192, 256)  # 80 GB, but an A100
    with pytest.raises(KeyError, match="entry point"):
        registry.vllm_scheduler_defaults("H200", "api")


@pytest.mark.build
def test_facts_page_lists_every_fact_and_lessons_link_into_it(site):
    facts_html = (site / "facts" / "index.html").read_text(encoding="utf-8")
    ids = {tag["id"] for tag in BeautifulSoup(facts_html, "html.parser").find_all(id=True)}
    missing = [fact.id for fact in registry.facts() if fact.id not in ids]
    assert not missing, f"not on the Facts & sources page: {missing}"
    for page in LESSONS:
        built = site / page.removesuffix(".md") / "index.html"
        soup = BeautifulSoup(built.read_text(encoding="utf-8"), "html.parser")
        table = soup.find(id="facts-used").find_next("table")
        links = [a["href"] for a in table.find_all("a", href=True) if "facts/#" in a["href"]]
        assert links, f"{page}: its Facts used table links nowhere into Facts & sources"


# --- Nothing cites a file the repository does not contain -----------------------------------------

FORBIDDEN = re.compile(r"FACTS\.md|DESIGN\.md|/work/|\bseed/")
"""Files of the project's working notes, outside the repository: never cite them."""
PATH = re.compile(r"`((?:snippets|src|scripts|tests|docs|hooks)/[A-Za-z0-9_./-]+\.(?:py|md|yml|yaml|json|txt|js|css))`")
"""A repository path written in backticks (placeholders such as `<lab>` do not match)."""


def _tracked_text_files() -> list:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [
        ROOT / n
        for n in names
        if not n.startswith("docs/assets/vendor/")
        and (ROOT / n).is_file()
        and (ROOT / n).suffix in {".py", ".md", ".yml", ".yaml", ".toml", ".txt", ".cfg", ""}
    ]


def citation_problems(name: str, text: str) -> list[str]:
    problems = [f"{name}: cites {m.group(0)!r}, which is not in the repository" for m in FORBIDDEN.finditer(text)]
    problems += [
        f"{name}: cites `{m.group(1)}`, which does not exist"
        for m in PATH.finditer(text)
        if not (ROOT / m.group(1)).exists()
    ]
    return problems


def test_nothing_cites_a_file_the_repository_lacks():
    problems = []
    for path in _tracked_text_files():
        if path.name == "test_sources.py":
            continue  # this file names the forbidden files in order to find them
        problems += citation_problems(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8", errors="replace"))
    assert not problems, "\n".join(problems)


def test_the_citation_check_can_fail():
    assert citation_problems("x.py", "# checked in the project's FACTS.md")
    assert citation_problems("x.md", "see `snippets/labs/no_such_lab.py`")
    assert not citation_problems("x.md", "see `snippets/labs/phases.py` and `snippets/labs/<lab>.py`")


VLLM_CITATION = re.compile(r"^vLLM 0\.26\.0, `([^`]+)`:(\d+)(?:-(\d+))?$")
WHEEL_026 = next((ROOT / ".cache" / "wheels").glob("vllm-0.26.0-*.whl"), None)


def citation_misses(citations: list[tuple[str, int, int]], files: dict[str, int]) -> list[str]:
    """The citations ``(path, first line, last line)`` that ``files`` (path -> its number of lines) cannot hold."""
    return [
        f"{path}:{first}-{last}" + (" (no such file)" if path not in files else f" (the file has {files[path]} lines)")
        for path, first, last in citations
        if path not in files or not 1 <= first <= last <= files[path]
    ]


@pytest.mark.skipif(WHEEL_026 is None, reason="the vllm 0.26.0 wheel is not in .cache/wheels/ (`make vllm-signatures`)")
def test_every_vllm_citation_names_lines_the_0_26_0_wheel_has():
    """A fact read in vLLM 0.26.0's source (``registry.vllm_source``) names a file of the wheel learners install and
    lines that file has: a citation copied from another release, or a typo in a path, fails here."""
    import zipfile

    citations = [
        (m[1], int(m[2]), int(m[3] or m[2]))
        for fact in registry.facts()
        if (m := VLLM_CITATION.match(fact.source.where))
    ]
    assert len(citations) > 30, f"only {len(citations)} facts cite vLLM 0.26.0's source: the pattern drifted"
    with zipfile.ZipFile(WHEEL_026) as zf:
        wanted = {path for path, _, _ in citations}
        files = {name: zf.read(name).count(b"\n") + 1 for name in zf.namelist() if name in wanted}
    assert not citation_misses(citations, files), citation_misses(citations, files)
    # the check can fail: a file the wheel lacks, and lines past a file's end
    assert citation_misses([("vllm/no_such.py", 1, 2), ("vllm/envs.py", 1, 10**6)], files | {"vllm/envs.py": 900})
