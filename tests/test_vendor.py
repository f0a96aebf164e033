"""The committed browser libraries are the versions package.json pins, and mkdocs.yml loads them."""

from __future__ import annotations

import json
import re

import yaml

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
    # the math font extra.css names is the one vendored, and it has the OpenType MATH table MathML layout needs
    css = (ROOT / "docs" / "stylesheets" / "extra.css").read_text(encoding="utf-8")
    font = VENDOR / "stix-two-math" / "stix-two-math-latin-400-normal.woff2"
    assert f'url("../assets/vendor/{font.relative_to(VENDOR).as_posix()}")' in css
    assert {"cmap", "MATH"} <= set(_woff2_table_tags(font.read_bytes()))
    axe_pin = json.loads((ROOT / "package.json").read_text())["devDependencies"]["axe-core"]  # the browser test's
    assert lock["node_modules/axe-core"]["version"] == axe_pin
    axe = (ROOT / "tests" / "vendor" / "axe-core" / "axe.min.js").read_text(encoding="utf-8")
    assert f"axe v{axe_pin}" in axe[:200]


def _woff2_table_tags(data: bytes) -> list[str]:
    """The table tags in a WOFF2 font's directory (W3C WOFF2 section 5.2): per table a flags byte, whose low six
    bits index the known tags (``fontTools``' list of them) or are 63 with the tag spelled out after; then the
    table's length, and a transformed length where the table is transformed (glyf and loca at transform 0, any
    other table at a transform other than 0), each a UIntBase128."""
    from fontTools.ttLib.woff2 import woff2KnownTags

    assert data[:4] == b"wOF2", "not a WOFF2 file"
    count, at, tags = int.from_bytes(data[12:14], "big"), 48, []
    for _ in range(count):
        flags, at = data[at], at + 1
        if flags & 0x3F == 0x3F:
            tag, at = data[at : at + 4].decode("latin-1"), at + 4
        else:
            tag = woff2KnownTags[flags & 0x3F]
        tags.append(tag)
        transformed = (flags >> 6 == 0) == (tag in ("glyf", "loca"))
        for _length in range(2 if transformed else 1):
            while data[at] & 0x80:  # UIntBase128: seven bits a byte; the last byte has its top bit clear
                at += 1
            at += 1
    return tags


def test_mkdocs_loads_no_remote_script_and_no_math_runtime():
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)
    scripts = config.get("extra_javascript", [])
    assert scripts == ["javascripts/calc-loader.js"]  # formulas and diagrams are drawn at build time (hooks/math.py,
    # hooks/diagrams.py); the calculators' code loads when one nears the viewport
    assert not [s for s in scripts + config.get("extra_css", []) if re.match(r"(https?:)?//", s)]
    assert config["theme"]["font"] is False
