"""Refresh the browser libraries the site serves itself (no CDN) from the npm registry.

Installs exactly what package-lock.json pins (versions and integrity hashes) with `npm ci` in a
temporary folder and copies the files the site loads into docs/assets/vendor/. Run `make vendor`
after changing a version in package.json (then `npm install --package-lock-only` to re-pin).

Mermaid runs at build time in headless chromium (hooks/diagrams.py; mkdocs.yml keeps it out of the site).
KaTeX: ``katex.min.js`` runs at build time under Node (hooks/math.py; mkdocs.yml keeps it out of the
site) and writes MathML, which browsers lay out themselves; readers get no KaTeX file. The math font the MathML
is set in (STIX Two Math, SIL Open Font License, as Fontsource packages it, with its OpenType MATH table, which
stretches brackets and places scripts) is vendored as WOFF, which fontTools reads without brotli: the build
serves a subset of it (hooks/math.py), never the whole font.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENDOR = ROOT / "docs" / "assets" / "vendor"
FILES = {  # path inside node_modules (a glob) -> folder under docs/assets/vendor
    # the ES module build and its chunks: hooks/diagrams.py runs it in headless chromium at build time
    "mermaid/dist/mermaid.esm.min.mjs": "mermaid",
    "mermaid/dist/chunks/mermaid.esm.min/*.mjs": "mermaid/chunks/mermaid.esm.min",
    "mermaid/LICENSE": "mermaid",
    "katex/dist/katex.min.js": "katex",
    "katex/LICENSE": "katex",
    "@fontsource/stix-two-math/files/stix-two-math-latin-400-normal.woff": "stix-two-math",
    "@fontsource/stix-two-math/LICENSE": "stix-two-math",
}
TEST_VENDOR = ROOT / "tests" / "vendor"
TEST_FILES = {  # for the browser test only, never served: the accessibility checker (tests/test_calculators.py)
    "axe-core/axe.min.js": "axe-core",
    "axe-core/LICENSE": "axe-core",
}


def main() -> int:
    if shutil.which("npm") is None:
        print("error: npm not found; install Node.js (20 or newer) to refresh the vendored files", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("package.json", "package-lock.json"):
            shutil.copy(ROOT / name, tmp)
        subprocess.run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=tmp, check=True)
        shutil.rmtree(VENDOR, ignore_errors=True)
        shutil.rmtree(TEST_VENDOR, ignore_errors=True)
        for pattern, target_folder in [
            *((p, VENDOR / f) for p, f in FILES.items()),
            *((p, TEST_VENDOR / f) for p, f in TEST_FILES.items()),
        ]:
            sources = sorted((Path(tmp) / "node_modules").glob(pattern))
            if not sources:
                print(f"error: {pattern} is not in the npm package; update FILES in {__file__}", file=sys.stderr)
                return 1
            for source in sources:
                target = target_folder / source.name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(source, target)
                print(target.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
