"""The committed browser libraries are the versions package.json pins, and mkdocs.yml loads them."""

from __future__ import annotations

import json
import re

import yaml
from fontTools.ttLib import TTFont

from conftest import ROOT

VENDOR = ROOT / "docs" / "assets" / "vendor"


def test_vendored_versions_match_the_pins():
    pins = json.loads((ROOT / "package.json").read_text())["dependencies"]
    lock = json.loads((ROOT / "package-lock.json").read_text())["packages"]
    for name in ("mermaid", "katex", "@fontsource/stix-two-math"):
        assert lock[f"node_modules/{name}"]["version"] == pins[name]
        assert lock[f"node_modules/{name}"]["integrity"].startswith("sha512-")
    assert pins["mermaid"].startswith("11.")
    mermaid = (VENDOR / "mermaid" / "mermaid.esm.min.mjs").read_text(encoding="utf-8")
    assert f'"{pins["mermaid"]}"' in mermaid
    imported = set(re.findall(r'"\./(chunks/mermaid\.esm\.min/[^"]+\.mjs)"', mermaid))
    assert imported and all((VENDOR / "mermaid" / c).is_file() for c in imported), imported
    katex = (VENDOR / "katex" / "katex.min.js").read_text(encoding="utf-8")
    assert f'version:"{pins["katex"]}"' in katex
    # the vendored math font has the OpenType MATH table MathML layout needs (Fontsource's Libertinus Math lacks it)
    font = TTFont(VENDOR / "stix-two-math" / "stix-two-math-latin-400-normal.woff")
    assert "MATH" in font and ord("\U0001d45b") in font.getBestCmap()  # MATHEMATICAL ITALIC SMALL N
    axe_pin = json.loads((ROOT / "package.json").read_text())["devDependencies"]["axe-core"]  # the browser test's
    assert lock["node_modules/axe-core"]["version"] == axe_pin
    axe = (ROOT / "tests" / "vendor" / "axe-core" / "axe.min.js").read_text(encoding="utf-8")
    assert f"axe v{axe_pin}" in axe[:200]


def test_mkdocs_loads_no_remote_script_and_no_math_runtime():
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)
    scripts = config.get("extra_javascript", [])
    # formulas and diagrams are drawn at build time (hooks/math.py, hooks/diagrams.py); the calculators' code loads
    # when one nears the viewport; the scroll cue marks the boxes that scroll sideways
    assert scripts == ["javascripts/calc-loader.js", "javascripts/scroll-cue.js"]
    assert not [s for s in scripts + config.get("extra_css", []) if re.match(r"(https?:)?//", s)]
    assert config["theme"]["font"] is False
