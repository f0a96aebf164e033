"""Run lab receipts through the claims their lessons make; print PASS/FAIL per claim.

    python scripts/check_receipts.py                      # every committed receipts/*/*.json
    python scripts/check_receipts.py path/to/phases.json  # the ones you name

For a GPU receipt it also prints each measured quantity its lab's spec floors (phases: TPOT)
against that GPU's roofline floor (efficiency = floor / measured). Claims and tolerances: the lab's
spec, src/infercourse/labs/<lab>.py. Needs only the standard library and this repository's src/
(no install).

Exit status: 0 when every applicable claim holds, 1 when one does not, 2 on a missing or
malformed receipt, or one of a lab with no spec (one line on stderr).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from infercourse.labs import RECEIPTS_DIR, ReceiptError, load_receipt, report  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    paths = [Path(a) for a in (sys.argv[1:] if argv is None else argv)] or sorted(RECEIPTS_DIR.glob("*/*.json"))
    if not paths:
        print(f"no receipts under {RECEIPTS_DIR}; run `make labs` on a GPU box first")
        return 0
    ok = True
    for path in paths:
        try:
            passed, text = report(load_receipt(path))
        except (OSError, ReceiptError, KeyError) as exc:
            print(f"error: {path}: {exc}", file=sys.stderr)
            return 2
        print(f"{path}:\n{text}")
        ok &= passed
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
