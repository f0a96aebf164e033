"""Page values never touch code or TeX, and standard Markdown that looks like Jinja builds (ADR-0006)."""

from __future__ import annotations

import html
import re

import pytest

from conftest import copy_project, mkdocs_build

pytestmark = pytest.mark.build

PAGE = """---
title: Syntax probe
---

# Syntax probe

## A heading with an id {#probe-heading}

Prose with a value: {{ page.title }}.

```bash
A=(x y); echo "${#A[@]} {{ x }} {% raw %}"
```

```mermaid
flowchart TD
    A --> B{{hexagon}}
```

A formula \\(x^{{2}} = {{ x }}\\) and a display

\\[
\\frac{{a}}{{ b }}
\\]
"""


def test_code_tex_and_look_alike_syntax_publish_as_written(tmp_path):
    project = copy_project(tmp_path / "project")
    (project / "docs" / "probe.md").write_text(PAGE, encoding="utf-8")
    config = project / "mkdocs.yml"
    config.write_text(config.read_text().replace("  - Home: index.md\n", "  - Home: index.md\n  - Probe: probe.md\n"))
    result = mkdocs_build(project, tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    built = (tmp_path / "site" / "probe" / "index.html").read_text(encoding="utf-8")
    text = html.unescape(re.sub(r"<[^>]+>", "", built))
    assert 'id="probe-heading"' in built
    assert "Prose with a value: Probe." in text
    assert 'echo "${#A[@]} {{ x }} {% raw %}"' in text
    # The diagram reached mermaid as written (hooks/diagrams.py draws it at build time): B{{hexagon}} is a
    # hexagon node labelled "hexagon", not a Jinja lookup.
    diagram = built[built.index('<div class="course-diagram">') :]
    diagram = diagram[: diagram.index("</svg>")]
    assert re.search(r'<g class="node default"[^>]*><polygon ', diagram) and ">hexagon<" in diagram, diagram[-3000:]
    # The TeX reached KaTeX as written (hooks/math.py typesets it at build time; its MathML is what is
    # left of the source): {{ x }} is the TeX group {x}, not a Jinja lookup (which would have failed the
    # strict build: no page value is called x), and {{ b }} the group {b} under the fraction.
    mathml = [
        re.sub(r"\s+", "", html.unescape(re.sub(r"<[^>]+>", " ", m)))
        for m in re.findall(r"<math\b.*?</math>", built, re.S)
    ]
    assert mathml == ["x2=x", "ab"], mathml
    assert "<mfrac>" in built
