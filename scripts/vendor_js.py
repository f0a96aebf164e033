"""Refresh the browser libraries the site serves itself (no CDN) from the npm registry.

Installs exactly what package-lock.json pins (versions and integrity hashes) with `npm ci` in a
temporary folder and copies the files the site loads into docs/assets/vendor/. Run `make vendor`
after changing a version in package.json (then `npm install --package-lock-only` to re-pin).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENDOR = ROOT / "docs" / "assets" / "vendor"
FILES = {  # path inside node_modules -> path under docs/assets/vendor
    "mermaid/dist/mermaid.min.js": "mermaid/mermaid.min.js",
    "mermaid/LICENSE": "mermaid/LICENSE",
    "mathjax/es5/tex-svg-full.js": "mathjax/tex-svg-full.js",
    "mathjax/LICENSE": "mathjax/LICENSE",
}


def main() -> int:
    if shutil.which("npm") is None:
        print("error: npm not found; install Node.js (20 or newer) to refresh the vendored files", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("package.json", "package-lock.json"):
            shutil.copy(ROOT / name, tmp)
        subprocess.run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=tmp, check=True)
        for source, target in FILES.items():
            (VENDOR / target).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(Path(tmp) / "node_modules" / source, VENDOR / target)
            print(f"docs/assets/vendor/{target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
