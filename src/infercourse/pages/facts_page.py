"""Values of the Facts & sources page: every registry fact, its value and where a reader can check it."""

from __future__ import annotations

from infercourse import registry
from infercourse.pages import PageValues

P = PageValues("facts.md")


def source_markdown(source: registry.Source) -> str:
    """A source as Markdown: the document and place, linked where it has an address."""
    return f"[{source.where}]({source.url})" if source.url else source.where


def _group(fact: registry.Fact) -> str:
    if fact.id.startswith("model-"):
        return "Models"
    if fact.id.startswith("gpu-"):
        return "GPUs"
    if fact.id.startswith(("vllm-", "awq-", "autodl-")) and fact.id not in registry.BEHAVIOURS:
        return "vLLM and the lab setup"
    return "Behaviours of vLLM and of the field"


groups: dict[str, list[dict]] = {}
for fact in registry.facts():
    groups.setdefault(_group(fact), []).append(
        {
            "id": fact.id,
            "what": fact.what,
            "value": fact.value,
            "source": source_markdown(fact.source),
            "kind": fact.source.kind,
            "note": fact.source.note,
        }
    )
P.add("groups", [{"title": title, "facts": items} for title, items in groups.items()], "record")
P.add("vllm_tag_url", "https://github.com/vllm-project/vllm/tree/v0.26.0", "text")
