"""Print the mutation score of the last ``make mutation`` run: killed of all mutants, and the survivors by module.

Reads mutmut's own accounts (``mutmut export-cicd-stats``, ``mutmut results``) in ``mutants/``; run from the
repository root after ``mutmut run``. Exit status 1 with one line when there is no run to read.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from pathlib import Path

MUTMUT = Path(sys.executable).with_name("mutmut")


def main() -> int:
    stats = Path("mutants/mutmut-cicd-stats.json")
    done = subprocess.run([MUTMUT, "export-cicd-stats"], capture_output=True, text=True)
    if done.returncode != 0 or not stats.is_file():
        print("error: no mutmut run to read in mutants/; run 'make mutation' first", file=sys.stderr)
        return 1
    s = json.loads(stats.read_text())
    print(
        f"mutation score: {s['killed']:,} of {s['total']:,} mutants killed ({s['killed'] / s['total']:.1%}); "
        f"{s['survived']:,} survived, {s['no_tests']:,} reached by no test, {s['timeout']:,} timed out"
    )
    results = subprocess.run([MUTMUT, "results"], capture_output=True, text=True, check=True).stdout
    survivors = collections.Counter(
        line.strip().split(".x")[0] for line in results.splitlines() if line.strip().endswith(": survived")
    )
    for module, count in survivors.most_common():
        print(f"  {module}: {count} survived")
    return 0


if __name__ == "__main__":
    sys.exit(main())
