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
from pathlib import Path
from typing import Any

from infercourse import fmt, labs
from infercourse.registry import LAB_GPU


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
    """Markdown: the lesson's prediction (labelled with its GPU: the receipt's, where the registry has it and the
    prediction depends on the card; else the course's) and this run's receipt as a table in the lesson's columns
    (with efficiency against the floor on a GPU the registry has).

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
    return f"{labs.prediction_for(spec, labs.receipt_gpu(receipt) or LAB_GPU)}\n\n{table}\n"


def _numeric(rows: list[Mapping[str, Any]], key: str) -> bool:
    return all(
        isinstance(row.get(key), (int, float)) and not isinstance(row.get(key), bool) and math.isfinite(row[key])
        for row in rows
    )


def _panels(receipt: Mapping[str, Any]) -> tuple[list[list[labs.Compared]], list[str]]:
    """What :func:`figure` draws: the pairs of measured and predicted values, one list per quantity (the spec's
    ``compare`` first, then the first floored quantity of a GPU the registry has), and the measured numeric
    columns drawn alone."""
    spec = labs.spec(receipt["lab"])
    rows = receipt["results"]
    found = labs.compared(receipt)
    pairs = [[c for c in found if c.quantity == q] for q in dict.fromkeys(c.quantity for c in found)]
    floors = labs.efficiency(receipt) or []
    first = [e for e in floors if e.quantity == floors[0].quantity]  # the first floored quantity of a GPU receipt
    pairs += [[labs.Compared(e.row, e.quantity, e.unit, e.measured, e.floor, "floor") for e in first]] if first else []
    keys = [  # measured columns: not the row's name, nor a prediction the lab wrote beside its measurement
        k
        for k in dict.fromkeys(c.key for c in spec.columns)
        if k not in spec.key and not k.startswith("predicted") and _numeric(rows, k)
    ]
    drawn = {  # a column that a pair panel over every row already draws (its measured, predicted or ratio)
        k
        for k in keys
        for p in pairs
        for shown in ("measured", "predicted", "ratio")
        if len(p) == len(rows) and all(math.isclose(rows[c.row][k], getattr(c, shown), rel_tol=1e-3) for c in p)
    }
    return pairs, [k for k in keys if k not in drawn]


def figure(receipt: Mapping[str, Any]):
    """A matplotlib figure of the receipt, one panel each (bars named by their rows' key values): first the lesson's
    prediction met by the measurement (the spec's ``compare``, over the rows it compares: measured beside predicted,
    the ratio measured / predicted above each pair, or in the title when every count is exactly as predicted; on a
    GPU the registry has, also the first floored quantity beside its roofline floor), then each measured numeric
    column of the lesson's table that no pair panel draws already, one bar per row, in the receipt's unit.

    Returns the ``matplotlib.figure.Figure`` (drawn with pyplot, so Jupyter shows it once).

    Raises:
        KeyError: the receipt's lab has no spec.
    """
    import matplotlib.pyplot as plt

    spec = labs.spec(receipt["lab"])
    rows = receipt["results"]
    names = [" ".join(str(v) for v in spec.row_key(row) if v is not None) for row in rows]
    pairs, keys = _panels(receipt)
    panels = max(len(pairs) + len(keys), 1)
    cols = min(panels, 2)
    lines = math.ceil(panels / cols)
    fig, axes = plt.subplots(lines, cols, figsize=(5 * cols, 3.2 * lines), squeeze=False)
    flat = list(axes.flat)
    for ax, points in zip(flat, pairs, strict=False):  # only the rows compared, each measured beside predicted
        what = _against(points)
        at = range(len(points))
        ax.bar([i - 0.2 for i in at], [c.measured for c in points], width=0.4, label="measured", color="#3f51b5")
        ax.bar([i + 0.2 for i in at], [c.predicted for c in points], width=0.4, label=what, color="#9e9e9e")
        exact = _all_exact(points)
        for i, c in enumerate([] if exact else points):  # how far each measurement sits from the prediction
            top = max(c.measured, c.predicted)
            ax.text(i, top, f"{c.ratio:.2f}×", ha="center", va="bottom", fontsize=7, rotation=90 if len(at) > 8 else 0)
        title = f"{points[0].quantity}: measured and {what}"
        every = f"all {len(points)}" if len(points) > 1 else "1 row"
        ax.set(title=f"{title}\n({every} as predicted: 1.00×)" if exact else title, ylabel=points[0].unit)
        ax.margins(y=0.25)  # room for the ratios above the bars
        ax.legend(fontsize=7)
        ax.set_xticks(at, [names[c.row] for c in points], rotation=30, ha="right", fontsize=8)
    for ax, key in zip(flat[len(pairs) :], keys, strict=False):
        ax.bar(range(len(rows)), [row[key] for row in rows], color="#3f51b5")
        ax.set(title=key, ylabel=receipt["units"].get(key, ""))
        ax.set_xticks(range(len(rows)), names, rotation=30, ha="right", fontsize=8)
    for ax in flat[:panels]:
        ax.set_xlabel(" ".join(spec.key))
    for ax in flat[panels:]:
        ax.set_visible(False)
    machine = receipt["machine"]
    fig.suptitle(f"{receipt['lab']}: {machine['name']} ({machine['kind']}), {receipt['model']}", fontsize=9)
    fig.tight_layout()
    return fig


RECEIPTS_ONLY = (
    "nothing is installed, downloaded or run; section 6 shows the course's committed receipts of this lab instead"
    " (on a machine without a GPU, CPU = True runs vLLM's CPU build, which `make labenv` installs)"
)
"""What the preflight cell says when the notebook runs nothing, after why (:func:`runs_nothing`)."""


def runs_nothing(facts: str) -> str:
    """What the preflight cell prints when the notebook runs nothing: ``facts`` (the preflight's first line, or
    ``""`` when ``COMMITTED = True`` skipped it, as the site's page of a notebook does), why, then
    :data:`RECEIPTS_ONLY`."""
    why = f"{facts}\nCPU = False" if facts else "COMMITTED = True"
    return f"{why}: {RECEIPTS_ONLY}"


def execute(path: Path, parameters: Mapping[str, Any], timeout_s: int = 900):
    """Run the notebook at ``path`` top to bottom in a fresh ``python3`` kernel from its own folder (as JupyterLab
    would), with ``parameters`` set in a cell (tagged "injected-parameters") after the one tagged "parameters"
    (papermill's way). Used by the site's build (``hooks/notebook_outputs.py``) and the tests.

    Returns ``(notebook, error)``: the ``nbformat`` notebook with every output so far, and the failing cell's
    error as nbclient words it, or None when every cell ran. What the cells print is in their outputs; the kernel
    process's own stderr is dropped.

    Raises:
        StopIteration: no cell of the notebook is tagged "parameters".
    """
    import nbformat  # only what executes a notebook needs Jupyter's client
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    notebook = nbformat.read(path, as_version=4)
    at = next(i for i, cell in enumerate(notebook.cells) if "parameters" in cell.metadata.get("tags", []))
    source = "\n".join(f"{name} = {value!r}" for name, value in parameters.items())
    notebook.cells.insert(at + 1, nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]}))
    client = NotebookClient(
        notebook, timeout=timeout_s, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    try:  # the kernel's own log (ipykernel's warning about TCP without encryption) is noise in a build's log
        client.execute(stderr=subprocess.DEVNULL)
    except CellExecutionError as error:
        return notebook, str(error)
    return notebook, None


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
    display(Markdown(f"{FIGURE}{caption(receipt)}"))
    figure(receipt)
    plt.show()
    return passed


FIGURE = "Figure: "
"""How :func:`show`'s caption line starts; the site's build makes the rest the figure's text alternative
(``hooks/notebooks.py``)."""


def caption(receipt: Mapping[str, Any]) -> str:
    """One sentence saying what :func:`figure` draws for ``receipt`` (its caption and its text alternative).

    Raises:
        KeyError: the receipt's lab has no spec.
    """
    spec = labs.spec(receipt["lab"])
    pairs, keys = _panels(receipt)
    said = []
    for p in pairs:
        ratio = "floor" if p[0].kind == "floor" else "predicted"
        how = "all as predicted" if _all_exact(p) else f"measured / {ratio} above each pair"
        rows = f"{len(p)} row{'s' if len(p) > 1 else ''}"
        said.append(f"{p[0].quantity} measured beside the lesson's {_against(p)} ({p[0].kind}) in {rows}, {how}")
    said += [f"{key} ({receipt['units'].get(key) or 'count'})" for key in keys]
    machine = receipt["machine"]
    drawn = "; ".join(said) if said else "no numeric column"
    return f"{machine['name']} ({machine['kind']}), bars named by row ({' '.join(spec.key)}): {drawn}."


def _all_exact(points: list[labs.Compared]) -> bool:
    """Whether every pair of a panel is an exact count measured as predicted (said once, not above each pair)."""
    return all(c.as_predicted for c in points)


def _against(points: list[labs.Compared]) -> str:
    """What a panel's measurements stand beside: "floor" or "prediction"."""
    return "floor" if points[0].kind == "floor" else "prediction"


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
            line = f"the answer is {fmt.number(want)} {e.unit}. {e.why}"
        elif isinstance(given, bool) or not isinstance(given, (int, float)) or not math.isfinite(given):
            line = f'`answers[{k}]` is {given!r}: write a number (in {e.unit}), or "{SHOW}"'
        elif abs(given - want) <= e.rel_tol * abs(want):
            line = f"right: {fmt.number(want)} {e.unit}. {e.why}"
        else:
            off = f"{(given - want) / abs(want):+.0%} off" if want else "off"
            line = (
                f"not quite: {fmt.number(given)} {e.unit} is {off} the course's model"
                + (f" (right within {e.rel_tol:.0%})" if e.rel_tol else " (a count: exactly)")
                + f'; think again, or write "{SHOW}"'
            )
        lines.append(f"{k}. {line}")
    return "\n".join(lines) or NO_EXERCISES
