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
    for name in ("mermaid", "mathjax"):
        assert lock[f"node_modules/{name}"]["version"] == pins[name]
        assert lock[f"node_modules/{name}"]["integrity"].startswith("sha512-")
    assert pins["mermaid"].startswith("11.") and pins["mathjax"].startswith("3.")
    mermaid = (VENDOR / "mermaid" / "mermaid.min.js").read_text(encoding="utf-8")
    assert f'version:"{pins["mermaid"]}"' in mermaid
    assert 'globalThis["mermaid"]' in mermaid  # Material uses an existing global instead of its CDN copy
    mathjax = (VENDOR / "mathjax" / "tex-svg-full.js").read_text(encoding="utf-8")
    assert f'VERSION="{pins["mathjax"]}"' in mathjax


def test_mkdocs_loads_config_before_mathjax_and_no_remote_script():
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
    Loader.add_constructor("!ENV", lambda loader, node: None)  # site_url: !ENV [SITE_URL, ...] (MkDocs' tag)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)
    scripts = config["extra_javascript"]
    assert scripts.index("javascripts/mathjax-config.js") < scripts.index("assets/vendor/mathjax/tex-svg-full.js")
    assert not [s for s in scripts + config.get("extra_css", []) if re.match(r"(https?:)?//", s)]
    assert config["theme"]["font"] is False
