"""Custom fences of the site's Markdown (``pymdownx.superfences``'s ``custom_fences`` in ``mkdocs.yml``)."""

from __future__ import annotations

from pymdownx.superfences import fence_code_format


def mermaid(source: str, language: str, class_name: str, options: dict, md, **kwargs) -> str:
    """A ``mermaid`` fence as superfences writes it (``<pre class="mermaid"><code>``, which Material draws),
    marked ``data-search-exclude`` so that Material's search index leaves out the diagram's source
    (it would show as ``flowchart LR a0 --> ...`` in search previews).

    Arguments and return value: those of ``pymdownx.superfences.fence_code_format``, whose output it edits.
    """
    html = fence_code_format(source, language, class_name, options, md, **kwargs)
    return html.replace("<pre ", "<pre data-search-exclude ", 1)
