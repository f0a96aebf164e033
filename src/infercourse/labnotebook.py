"""What the lab notebooks (``docs/notebooks/<lab>.ipynb``) call besides the lab runner and labkit: a
command's output streamed into the notebook, a one-line stop, and the run's receipt against its
lesson's prediction, as a table and a figure.

The notebooks are generated from ``templates/lab_notebook.py`` by ``scripts/make_notebooks.py``; this
module keeps their cells short. Standard library and ``infercourse.labs`` at import time;
matplotlib (and IPython) only inside :func:`figure` and :func:`show`.
"""

from __future__ import annotations

import math
import subprocess
from collections.abc import Mapping
from typing import Any

from infercourse import labs


class Stop(Exception):
    """A notebook cell stops here: Jupyter shows ``error: <message>`` as one line, not a traceback
    (IPython prints what ``_render_traceback_`` returns), and the run counts as failed."""

    def _render_traceback_(self) -> list[str]:
        return [f"error: {self}"]


def stream(command: list[str], env: Mapping[str, str] | None = None) -> None:
    """Run ``command``, printing each line of its output (stdout and stderr merged) as it comes.

    Raises:
        Stop: the command is not found or exits non-zero (the message names it and its last line).
    """
    print("$ " + " ".join(command), flush=True)
    try:
        proc = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
        )
    except OSError as exc:
        raise Stop(f"could not run {command[0]!r} ({exc.strerror}); is it installed?") from None
    last = ""
    assert proc.stdout is not None
    for line in proc.stdout:
        print(line, end="", flush=True)
        last = line.strip() or last
    if proc.wait() != 0:
        raise Stop(f"{' '.join(command[:3])} ... exited with {proc.returncode}: {last}")


def comparison(receipt: Mapping[str, Any]) -> str:
    """Markdown: the lesson's prediction for the course's GPU (labelled as such) and this run's receipt
    as a table in the lesson's columns (with efficiency against the floor on a GPU the registry has).

    Raises:
        KeyError: the receipt's lab has no spec.
    """
    spec = labs.spec(receipt["lab"])
    machine = receipt["machine"]
    intro = f"**This run** ({machine['name']}, {machine['kind'].upper()})."
    if machine["kind"] == "cpu":
        intro += (
            f" A CPU run of `{receipt['model']}`: it shows the shape of the result (token, step and block counts"
            " are exact), its times are this CPU's, not a GPU's."
        )
    table = labs.measured_table(spec, [receipt], intro=intro)
    return f"{labs.prediction_label(spec)} {spec.prediction()}\n\n{table}\n"


def _numeric(rows: list[Mapping[str, Any]], key: str) -> bool:
    return all(
        isinstance(row.get(key), (int, float)) and not isinstance(row.get(key), bool) and math.isfinite(row[key])
        for row in rows
    )


def figure(receipt: Mapping[str, Any]):
    """A matplotlib figure of the receipt: one bar chart per measured numeric column of the lesson's
    table (one bar per receipt row, named by its key values, in the receipt's unit); on a GPU the
    registry has, one more panel with each row's first floored quantity beside its roofline floor, the ratio
    measured / floor written above each pair.

    Returns the ``matplotlib.figure.Figure`` (drawn with pyplot, so Jupyter shows it once).

    Raises:
        KeyError: the receipt's lab has no spec.
    """
    import matplotlib.pyplot as plt

    spec = labs.spec(receipt["lab"])
    rows = receipt["results"]
    names = [" ".join(str(v) for v in spec.row_key(row)) for row in rows]
    keys = list(dict.fromkeys(c.key for c in spec.columns if c.key not in spec.key and _numeric(rows, c.key)))
    found = labs.efficiency(receipt) or []
    floors = [e for e in found if e.quantity == found[0].quantity]
    panels = max(len(keys) + (1 if floors else 0), 1)
    cols = min(panels, 2)
    lines = math.ceil(panels / cols)
    fig, axes = plt.subplots(lines, cols, figsize=(5 * cols, 3.2 * lines), squeeze=False)
    flat = list(axes.flat)
    for ax, key in zip(flat, keys, strict=False):
        ax.bar(range(len(rows)), [row[key] for row in rows], color="#3f51b5")
        ax.set(title=key, ylabel=receipt["units"].get(key, ""))
    if floors:
        ax = flat[len(keys)]
        at = [e.row for e in floors]
        ax.bar([i - 0.2 for i in at], [e.measured for e in floors], width=0.4, label="measured", color="#3f51b5")
        ax.bar([i + 0.2 for i in at], [e.floor for e in floors], width=0.4, label="roofline floor", color="#9e9e9e")
        for e in floors:  # how far above its floor each measurement sits
            ax.text(
                e.row, max(e.measured, e.floor), f"{e.measured / e.floor:.2f}×", ha="center", va="bottom", fontsize=7
            )
        ax.set(title=f"{floors[0].quantity}: measured and floor", ylabel=floors[0].unit)
        ax.legend()
    for ax in flat[:panels]:
        ax.set_xticks(range(len(rows)), names, rotation=30, ha="right", fontsize=8)
        ax.set_xlabel(" ".join(spec.key))
    for ax in flat[panels:]:
        ax.set_visible(False)
    machine = receipt["machine"]
    fig.suptitle(f"{receipt['lab']}: {machine['name']} ({machine['kind']}), {receipt['model']}", fontsize=9)
    fig.tight_layout()
    return fig


RECEIPTS_ONLY = (
    "no NVIDIA GPU here and CPU = False: nothing is installed, downloaded or run; section 6 shows the course's "
    "committed receipts of this lab instead (set CPU = True to run vLLM's CPU build, which `make labenv` installs)"
)
"""What the preflight cell says when the notebook runs nothing (no GPU, ``CPU = False``)."""


def committed(lab: str) -> list[dict]:
    """The committed receipts of ``lab`` that stand in for a run when a notebook runs nothing: those measured on a
    GPU first, then the CPU reference (``receipts/<machine>/<lab>.json``).

    Raises:
        Stop: ``lab`` has no committed receipt yet (run it: ``CPU = True``).
        ReceiptError: a committed receipt is malformed or partial.
    """
    found = sorted(labs.committed_receipts(lab), key=lambda r: r["machine"]["kind"] != "gpu")
    if not found:
        raise Stop(f"no committed receipt of {lab} yet: run the lab here (CPU = True) or on a GPU")
    return found


def show(receipt: Mapping[str, Any]) -> bool:
    """Print ``receipt``'s claims report, display :func:`comparison` and :func:`figure` (each shown at once, so a
    cell can show several receipts) and return whether every claim the receipt can decide held.

    Raises:
        KeyError: the receipt's lab has no spec.
    """
    import matplotlib.pyplot as plt
    from IPython.display import Markdown, display

    passed, report = labs.report(receipt)
    print(report)
    display(Markdown(comparison(receipt)))
    figure(receipt)
    plt.show()
    return passed


SHOW = "show"
"""What a reader writes as an answer to see the computed one (:func:`check_answers`)."""
NO_EXERCISES = "This lab has no exercises yet."
"""What :func:`exercises` and :func:`check_answers` say for a lab whose spec declares none."""


def exercises(lab: str) -> str:
    """Markdown: ``lab``'s exercises (its spec's :attr:`~infercourse.labs.LabSpec.exercises`) as a numbered list,
    each question with the unit its answer takes and how close counts (exactly, or within the tolerance); a
    sentence when the lab has none yet.

    Raises:
        KeyError: ``lab`` has no spec.
    """
    found = labs.spec(lab).exercises
    if not found:
        return NO_EXERCISES
    return "\n".join(
        f"{k}. {e.question} ({e.unit}; {f'within {e.rel_tol:.0%}' if e.rel_tol else 'exactly'})"
        for k, e in enumerate(found, 1)
    )


def _number(x: float) -> str:
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,.4g}"


def check_answers(lab: str, answers: Mapping[int, Any]) -> str:
    """Markdown: each of ``lab``'s exercises, numbered from 1, against ``answers[k]``: not answered yet (None or
    missing); right when within the exercise's ``rel_tol`` of the computed answer (exactly, for a count), with
    why; otherwise how far off, in percent, without giving the answer away; :data:`SHOW` gives the answer and
    why. An answer that is not a number says what to write instead. Raises nothing for a wrong answer: the
    notebook goes on.

    Raises:
        KeyError: ``lab`` has no spec.
    """
    lines = []
    for k, e in enumerate(labs.spec(lab).exercises, 1):
        given, want = answers.get(k), e.answer()
        if given is None:
            line = f'not answered yet: write your number as `answers[{k}]`, or `answers[{k}] = "{SHOW}"`'
        elif given == SHOW:
            line = f"the answer is {_number(want)} {e.unit}. {e.why}"
        elif isinstance(given, bool) or not isinstance(given, (int, float)) or not math.isfinite(given):
            line = f'`answers[{k}]` is {given!r}: write a number (in {e.unit}), or "{SHOW}"'
        elif abs(given - want) <= e.rel_tol * abs(want):
            line = f"right: {_number(want)} {e.unit}. {e.why}"
        else:
            off = f"{(given - want) / abs(want):+.0%} off" if want else "off"
            line = (
                f"not quite: {_number(given)} {e.unit} is {off} the course's model"
                + (f" (right within {e.rel_tol:.0%})" if e.rel_tol else " (a count: exactly)")
                + f'; think again, or write "{SHOW}"'
            )
        lines.append(f"{k}. {line}")
    return "\n".join(lines) or NO_EXERCISES
