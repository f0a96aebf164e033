"""MkDocs hook: export the registry facts the calculators read to ``assets/calc/registry.json``.

The calculators run in the browser (docs/javascripts/calc/, ADR-0008). Their formulas are a JavaScript
port; their facts (model configs, GPU figures, vLLM defaults) are not ported: this hook writes them from
:func:`infercourse.calculators.registry_export` on every build (and every ``mkdocs serve`` rebuild), so
an edit to the registry reaches the calculators with no second copy to keep in step.
"""

from __future__ import annotations

import json

from mkdocs.structure.files import File


def on_files(files, config):
    from infercourse.calculators import registry_export  # imported per build: hooks/reload.py drops old modules

    content = json.dumps(registry_export(), sort_keys=True, separators=(",", ":"))
    files.append(File.generated(config, "assets/calc/registry.json", content=content))
    return files
