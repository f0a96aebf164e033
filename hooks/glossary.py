"""MkDocs hook: write the abbreviation list (tooltips) from the glossary's one source.

pymdownx.snippets appends ``.cache/generated/abbreviations.md`` to every page (mkdocs.yml,
``auto_append``); this hook writes that file from ``src/infercourse/glossary.yml`` before any
page is rendered, so the tooltips and the glossary page never disagree.
"""

from pathlib import Path

from infercourse.glossary import abbreviations_markdown


def on_config(config):
    out = Path(config.config_file_path).parent / ".cache" / "generated" / "abbreviations.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    text = abbreviations_markdown()
    if not out.is_file() or out.read_text(encoding="utf-8") != text:  # unchanged file: no live-reload loop
        out.write_text(text, encoding="utf-8")
    return config
