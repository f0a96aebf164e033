"""Sources a reader can open: every registry fact names one, the Facts & sources page lists them all,
each lesson's Facts used links into it, and nothing in the repository cites a file it does not contain."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from bs4 import BeautifulSoup

from conftest import ROOT, load_script
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


WHEEL_026 = next((ROOT / ".cache" / "wheels").glob("vllm-0.26.0-*.whl"), None)
LAB_SITE = ROOT / ".venv-labs" / "lib" / "python3.11" / "site-packages"
CITATIONS = json.loads((ROOT / "src" / "infercourse" / "vllm_citations.json").read_text())
vllm_citations = load_script("vllm_citations")


def test_every_fact_citing_vllm_0_26_0_has_a_fingerprint_of_its_lines():
    """``src/infercourse/vllm_citations.json`` (``scripts/vllm_citations.py``) holds every fact that cites vLLM
    0.26.0's source, at the place the registry cites: a new or moved citation needs the script run again."""
    cited = {f.id: c for f in registry.facts() if (c := registry.vllm_citation(f.source))}
    assert len(cited) > 30, f"only {len(cited)} facts cite vLLM 0.26.0's source: the pattern drifted"
    assert {k: v["cited"] for k, v in CITATIONS["facts"].items()} == {
        k: f"{path}:{first}-{last}" for k, (path, first, last) in cited.items()
    }, "run scripts/vllm_citations.py (make vllm-signatures)"


@pytest.mark.skipif(WHEEL_026 is None, reason="the vllm 0.26.0 wheel is not in .cache/wheels/ (`make vllm-signatures`)")
@pytest.mark.skipif(not (LAB_SITE / "vllm").is_dir(), reason="no lab environment (`make labenv`)")
def test_the_cited_lines_are_the_0_26_0_wheel_s_and_the_cpu_build_s_are_as_recorded():
    """Re-read from the wheel: a fact citing another release's lines, a path the wheel lacks or lines past a
    file's end fails; so does a cited line edited after the fingerprint was taken."""
    assert vllm_citations.citations(WHEEL_026, LAB_SITE) == CITATIONS
    # the check can fail: a citation one line off has another fingerprint; a file the wheel lacks is refused
    text = "a\nb\nc\n"
    assert vllm_citations.fingerprint(vllm_citations.cited_lines(text, 1, 2)) != vllm_citations.fingerprint(
        vllm_citations.cited_lines(text, 2, 3)
    )
    with pytest.raises(ValueError, match="ends at line 4"):
        vllm_citations.cited_lines(text, 2, 4)


def test_the_cpu_build_status_of_cited_lines():
    cited = ["def f():", "    return 1"]
    assert vllm_citations.cpu_status(cited, 1, "def f():\n    return 1\n") == "same lines"
    assert vllm_citations.cpu_status(cited, 1, "# new\ndef f():\n    return 1\n") == "moved"
    assert vllm_citations.cpu_status(cited, 1, "def f():\n    return 2\n") == "lines differ"
    assert vllm_citations.cpu_status(cited, 1, None) == "no file"


def test_each_behaviour_checked_beyond_its_citation_is_tied_to_its_test_or_lab():
    """ADR-0009's ``CHECKS``: the name that ties a fact to its test or lab is in the fact's text and in that test's
    function (an API-surface check) or that lab script (a CPU run); every fact it names cites vLLM 0.26.0."""
    import ast

    from infercourse.pages import adr_0009

    facts = {f.id: f for f in registry.facts() if registry.vllm_citation(f.source)}
    for fact_id, (how, where, name) in adr_0009.CHECKS.items():
        fact = facts[fact_id]
        assert name in f"{fact.what} {fact.value}", (fact_id, name)
        path, _, function = where.partition("::")
        text = (ROOT / path).read_text()
        if how == "API surface":
            node = next(n for n in ast.walk(ast.parse(text)) if getattr(n, "name", None) == function)
            text = ast.get_source_segment(text, node)
        else:
            assert how == "CPU run" and path.startswith("snippets/labs/"), (fact_id, how, where)
        assert name in text, (fact_id, where, name)
    # the check can fail: a lab that does not read the name, and a fact whose text does not name it
    assert "vllm:spec_decode_num_accepted_tokens" not in (ROOT / "snippets/labs/phases.py").read_text()
    assert "prompt_lookup_m" not in facts["vllm-spec-counters"].value
