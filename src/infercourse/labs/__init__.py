"""The GPU labs' receipts, the claims their lessons make, and the lessons' expected output.

A lab (``snippets/labs/<lab>.py``) writes a JSON *receipt* with ``--receipt`` (through
``snippets/labs/labkit/``). Each lab declares, in ONE module here, ``infercourse/labs/<lab>.py``,
a ``SPEC`` (:class:`~infercourse.labs.core.LabSpec`): its row schema and units, its claims, its
roofline floors (optional), its GPU prediction and its table of committed GPU receipts.

One module per lab, found by name (``pkgutil``), rather than one shared file: the specs are
independent, each is read next to its lab, and adding a lab touches only its own module. Shared
pieces (the receipt envelope, the spec's shape, row lookup, line fit, GPU names) are in
:mod:`infercourse.labs.core`.

This package checks what is common once: :func:`validate_receipt` (the envelope for every lab,
then the lab's rows), :func:`check` / :func:`report` (the lab's claims, plus efficiency against
the floor on a GPU the registry has), :func:`expected_output` (what a lesson page prints).

Committed receipts live in ``receipts/<machine-slug>/<lab>.json`` (one folder per machine).
How to add a lab: ``snippets/labs/README.md``.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePath
from typing import Any

from infercourse import fmt
from infercourse.labs.core import (
    LABS_DIR,
    RECEIPTS_DIR,
    ROOT,
    SCHEMA_VERSION,
    ClaimResult,
    Column,
    Compared,
    Efficiency,
    LabSpec,
    LabWork,
    ReceiptError,
    dtype_bytes,
    envelope_problems,
    find_row,
    gpu_for_name,
    lab_grid,
    lab_models,
    linear_fit,
    machine_slug,
    model_config_for,
)
from infercourse.registry import GPUS, LAB_GPU, gpu

__all__ = [
    "LABS_DIR",
    "RECEIPTS_DIR",
    "ROOT",
    "SCHEMA_VERSION",
    "ClaimResult",
    "Column",
    "Compared",
    "Efficiency",
    "LabSpec",
    "LabWork",
    "ReceiptError",
    "dtype_bytes",
    "find_row",
    "gpu_for_name",
    "lab_grid",
    "lab_models",
    "linear_fit",
    "machine_slug",
    "model_config_for",
    "SPECS",
    "lab_scripts",
    "wired",
    "spec",
    "validate_receipt",
    "load_receipt",
    "committed_receipts",
    "check",
    "report",
    "efficiency",
    "compared",
    "receipt_gpu",
    "prediction_for",
    "expected_output",
]

_NOT_SPECS = {"core"}


def _discover() -> dict[str, LabSpec]:
    found = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name in _NOT_SPECS or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        spec_ = getattr(module, "SPEC", None)
        if not isinstance(spec_, LabSpec) or spec_.lab != info.name:
            raise ImportError(f"{module.__name__} must define SPEC = LabSpec(lab={info.name!r}, ...)")
        found[info.name] = spec_
    return dict(sorted(found.items()))


SPECS: Mapping[str, LabSpec] = _discover()
"""Every wired lab's spec, by lab name (one module ``infercourse/labs/<lab>.py`` each)."""


def lab_scripts(labs_dir: Path | str = LABS_DIR) -> list[str]:
    """Names of the lab scripts in ``labs_dir``: every ``<name>.py`` but ``_*`` (the code the labs share is the
    package ``labkit/``, a folder)."""
    return sorted(p.stem for p in Path(labs_dir).glob("*.py") if not p.name.startswith("_"))


def wired(labs_dir: Path | str = LABS_DIR) -> list[str]:
    """The labs the harness runs: each script in ``labs_dir`` that has a spec here (tests/test_labs.py
    fails for a script without one)."""
    return [lab for lab in lab_scripts(labs_dir) if lab in SPECS]


def spec(lab: str) -> LabSpec:
    """The spec of ``lab``.

    Raises:
        KeyError: ``lab`` has no spec; the message lists the labs that have one.
    """
    if lab not in SPECS:
        raise KeyError(f"lab {lab!r} has no spec; labs with a spec: {', '.join(SPECS)}")
    return SPECS[lab]


def validate_receipt(receipt: Mapping[str, Any]) -> None:
    """Check a receipt: the envelope every lab writes, then the rows and units its lab's spec declares.

    Envelope: ``schema`` (== 1), ``lab``, ``command``, ``git_commit`` (str or null), ``date_utc``
    (``YYYY-MM-DDTHH:MM:SSZ``), ``machine`` (``kind`` "gpu" with ``name``, ``memory_gib``,
    ``driver``, ``cuda_driver_api``; or "cpu" with ``name``, ``cores``), ``versions`` (``vllm``,
    ``torch``, ``transformers``, ``python``), ``model``, ``load_format``, ``dtype``,
    ``max_model_len``, ``settings``, ``engine_start_s`` (s), ``units``, ``results`` (non-empty).
    Rows: the spec's keys and types, every number finite and non-negative; units: the spec's plus
    ``engine_start_s: "s"``.

    Raises:
        ReceiptError: listing every problem found (a lab without a spec is one).
    """
    if not isinstance(receipt, Mapping):
        raise ReceiptError(f"a receipt is a JSON object, got {type(receipt).__name__}")
    problems = envelope_problems(receipt)
    lab = receipt.get("lab")
    if isinstance(lab, str):
        if lab in SPECS:
            problems += SPECS[lab].row_problems(receipt)
        else:
            problems.append(f"receipt: lab {lab!r} has no spec in infercourse.labs (have: {', '.join(SPECS)})")
    if problems:
        raise ReceiptError("; ".join(problems))


def load_receipt(path: Path | str) -> dict:
    """Read and validate one receipt file.

    Raises:
        FileNotFoundError: no such file.
        ReceiptError: not UTF-8 text, not JSON, or not the schema (:func:`validate_receipt`).
    """
    path = Path(path)
    try:
        receipt = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ReceiptError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start}): a receipt is JSON") from None
    except json.JSONDecodeError as exc:
        raise ReceiptError(f"{path} is not JSON: {exc}") from None
    try:
        validate_receipt(receipt)
    except ReceiptError as exc:
        raise ReceiptError(f"{path}: {exc}") from None
    return receipt


def committed_receipts(lab: str, receipts_dir: Path | str = RECEIPTS_DIR) -> list[dict]:
    """Every ``<receipts_dir>/<machine-slug>/<lab>.json``, validated, sorted by machine slug.

    Raises:
        ReceiptError: a committed receipt does not follow the schema, or is partial (an interrupted run's).
    """
    found = [load_receipt(p) for p in sorted(Path(receipts_dir).glob(f"*/{lab}.json"))]
    partial = [r["command"] for r in found if r.get("partial")]
    if partial:
        raise ReceiptError(f"a partial receipt of {lab} (an interrupted run: {partial[0]}) is committed; rerun the lab")
    return found


def gpu_receipts(lab: str | None = None, receipts_dir: Path | str = RECEIPTS_DIR) -> list[dict]:
    """Every committed receipt of ``lab`` (None: of every wired lab) that was measured on a GPU (not a
    CPU smoke run).

    Raises:
        ReceiptError: a committed receipt does not follow the schema.
    """
    return [
        r
        for name in ([lab] if lab else wired())
        for r in committed_receipts(name, receipts_dir)
        if r["machine"]["kind"] == "gpu"
    ]


def efficiency(receipt: Mapping[str, Any]) -> list[Efficiency] | None:
    """For a GPU receipt, its lab's measured quantities against their roofline floors on that GPU.

    Returns None where there is nothing to compare with: a CPU receipt, a GPU the registry does not
    have, a model whose config cannot be found, or a lab whose spec declares no floors.

    Raises:
        KeyError: the receipt's lab has no spec.
    """
    lab_spec = spec(receipt["lab"])
    machine = receipt.get("machine", {})
    facts = gpu_for_name(machine.get("name", "")) if machine.get("kind") == "gpu" else None
    config = model_config_for(receipt)
    if lab_spec.efficiency is None or facts is None or config is None:
        return None
    return lab_spec.efficiency(receipt, facts, config)


def compared(receipt: Mapping[str, Any]) -> list[Compared]:
    """Each row's main quantity beside the lesson's prediction for the machine that ran it (its spec's
    ``compare``; empty for a lab that declares none, or a partial receipt).

    Raises:
        KeyError: the receipt's lab has no spec.
        ReceiptError: a row lacks a key the comparison needs.
    """
    lab_spec = spec(receipt["lab"])
    return [] if lab_spec.compare is None or receipt.get("partial") else lab_spec.compare(receipt)


def check(receipt: Mapping[str, Any]) -> list[ClaimResult]:
    """Validate a receipt and run it through its lab's claims.

    Raises:
        ReceiptError: the receipt breaks the schema or lacks a row a claim needs.
        KeyError: the receipt's lab has no spec.
    """
    lab = receipt.get("lab") if isinstance(receipt, Mapping) else None
    if isinstance(lab, str):
        spec(lab)  # KeyError, naming the wired labs, before the schema's longer message
    validate_receipt(receipt)
    claims = SPECS[receipt["lab"]].claims
    if receipt.get("partial"):  # written by an interrupted run (labkit.write_partial): its rows, no verdict
        note = f"partial receipt ({receipt['settings'].get('partial', 'interrupted')}): not judged"
        return [ClaimResult(getattr(c, "__name__", "claim"), "", None, note) for c in claims]
    return [claim(receipt) for claim in claims]


def report(receipt: Mapping[str, Any]) -> tuple[bool, str]:
    """Check a receipt; return (all applicable claims passed, a readable report with one line per
    claim and, for a GPU receipt, each measured quantity against the GPU's floor).

    Raises:
        ReceiptError, KeyError: as :func:`check`.
    """
    results = check(receipt)
    m = receipt["machine"]
    lines = [
        f"{receipt['lab']} on {m['name']} ({m['kind']}), vLLM {receipt['versions'].get('vllm')}, "
        f"model {receipt['model']} ({receipt['load_format']}), {receipt['date_utc']}"
    ]
    for r in results:
        mark = {True: "PASS", False: "FAIL", None: "n/a "}[r.passed]
        lines.append(f"  {mark} {r.claim}: {r.statement} -- {r.detail}")
    lab_spec = SPECS[receipt["lab"]]
    pairs = compared(receipt)
    if pairs:
        lines.append("  against the lesson's prediction for this machine:")
    for quantity in dict.fromkeys(c.quantity for c in pairs):
        these = [c for c in pairs if c.quantity == quantity]
        if len(these) > 1 and all(c.as_predicted for c in these):
            lines.append(f"    {quantity}: all {len(these)} rows as predicted, exactly")
            continue
        for c in these:
            row = receipt["results"][c.row]
            name = " ".join(f"{k}={row[k]}" for k in lab_spec.key)
            verdict = ("as predicted" if c.as_predicted else "NOT as predicted") if c.kind == "exact" else c.kind
            lines.append(
                f"    {name}: {c.quantity} measured {fmt.number(c.measured)} {c.unit}, "
                f"predicted {fmt.number(c.predicted)} {c.unit} ({verdict}; {c.ratio:.2f}x)"
            )
    eff = efficiency(receipt)
    if eff:
        lines.append("  against the roofline floor on this GPU:")
        for e in eff:
            row = receipt["results"][e.row]
            name = " ".join(f"{k}={row[k]}" for k in lab_spec.key)
            lines.append(
                f"    {name}: {e.quantity} measured {e.measured:.2f} {e.unit}, floor {e.floor:.2f} {e.unit}, "
                f"efficiency {e.ratio:.0%}"
            )
    elif m["kind"] == "gpu" and lab_spec.efficiency is not None:
        lines.append(f"  no floor: GPU {m['name']!r} or model {receipt['model']!r} is not in the registry")
    return all(r.passed is not False for r in results), "\n".join(lines)


# --- the lesson's expected output -----------------------------------------------------------------


def prediction_label(lab_spec: LabSpec, gpu_name: str = LAB_GPU) -> str:
    """The bold first words of every prediction: "Prediction for the <GPU> from <basis>, not a measurement."."""
    return f"**Prediction for the {gpu(gpu_name).name} from {lab_spec.prediction_basis}, not a measurement.**"


def receipt_gpu(receipt: Mapping[str, Any]) -> str | None:
    """The registry's short name (``"H200"``) of the GPU that made ``receipt``, or None: a CPU receipt, or a GPU
    the registry does not have (:func:`gpu_for_name`)."""
    machine = receipt.get("machine", {})
    facts = gpu_for_name(machine.get("name", "")) if machine.get("kind") == "gpu" else None
    return next((name for name, f in GPUS.items() if f is facts), None)


def prediction_for(lab_spec: LabSpec, gpu_name: str = LAB_GPU) -> str:
    """Markdown: :func:`prediction_label` and ``lab_spec``'s prediction, for ``gpu_name`` (a registry short name)
    where its ``prediction`` takes a ``gpu_name``; for the course's GPU otherwise (a prediction of bytes, counts or
    NLL, the same on every card).

    Raises:
        KeyError: ``gpu_name`` is not in the registry.
    """
    gpu(gpu_name)  # KeyError naming the registry's GPUs
    if "gpu_name" not in inspect.signature(lab_spec.prediction).parameters:
        gpu_name = LAB_GPU
        return f"{prediction_label(lab_spec, gpu_name)} {lab_spec.prediction()}"
    return f"{prediction_label(lab_spec, gpu_name)} {lab_spec.prediction(gpu_name=gpu_name)}"


def model_label(model: str) -> str:
    """How a table names a receipt's ``model``: a hub id (``owner/name``) as it is, in backticks; a local
    folder (an absolute or relative path, e.g. ``/home/me/.cache/models/tiny-qwen2``) by its last part and
    "(local folder)", since the machine's own path means nothing to a reader."""
    if model.startswith(("/", ".", "~")) or model.count("/") > 1:
        return f"`{PurePath(model).name}` (local folder)"
    return f"`{model}`"


def measured_table(
    lab_spec: LabSpec, receipts: Sequence[Mapping[str, Any]], intro: str = "**Measured (committed receipts).**"
) -> str:
    """Markdown table of committed receipts: machine, vLLM, date, model, the spec's columns and, where the spec has
    floors and a row has one (a GPU the registry has), the efficiency of each row's first floored quantity.
    ``intro``: the bold words above the table. What every row shares (the machine, vLLM, date and model of a single
    receipt, say) is said once after ``intro`` instead of repeated in a column, so that the measured columns fit a
    phone; so is a missing efficiency (no floor for that machine)."""
    if not receipts:
        return (
            f"*No GPU receipt is committed yet.* Run `python scripts/run_labs.py` on a GPU box and commit "
            f"`receipts/<machine>/{lab_spec.lab}.json` to show measurements here."
        )
    context = {
        "machine": lambda r: r["machine"]["name"],
        "vLLM": lambda r: str(r["versions"].get("vllm")),
        "date": lambda r: r["date_utc"][:10],
        "model": lambda r: f"{model_label(r['model'])} ({r['load_format']})",
    }
    shared = {k: f(receipts[0]) for k, f in context.items() if len({f(r) for r in receipts}) == 1}
    varying = [k for k in context if k not in shared]
    effs = []
    for receipt in receipts:
        eff: dict[int, Efficiency] = {}
        for found in efficiency(receipt) or []:
            eff.setdefault(found.row, found)
        effs.append(eff)
    floors = lab_spec.efficiency is not None and any(effs)
    head = [*varying, *(c.header for c in lab_spec.columns)] + (["efficiency"] if floors else [])
    align = ["---"] * len(varying) + ["---:" if c.align_right else "---" for c in lab_spec.columns]
    align += ["---:"] if floors else []
    if shared:
        intro += " " + "; ".join(f"{k} {v}" for k, v in shared.items()) + "."
    if floors:
        intro += " Efficiency = floor on that GPU / measured."
    elif lab_spec.efficiency is not None:
        intro += " No roofline floor for this machine in the registry, so no efficiency."
    lines = [intro, "", "| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    for receipt, eff in zip(receipts, effs, strict=True):
        for i, row in enumerate(receipt["results"]):
            cells = [context[k](receipt) for k in varying]
            cells += ["-" if row[c.key] is None else c.format(row[c.key]) for c in lab_spec.columns]
            if floors:
                cells.append(f"{e.quantity} {fmt.pct(e.ratio, 0)}" if (e := eff.get(i)) else "n/a")
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def expected_output(lab: str, receipts_dir: Path | str = RECEIPTS_DIR) -> str:
    """Markdown for a lesson's "expected output" of ``lab``: the prediction for the course's GPU
    (labelled as a prediction, not a measurement) and a table of the committed GPU receipts of that
    lab (CPU receipts prove a lab runs, not how fast a GPU is; they are not shown).

    Raises:
        KeyError: ``lab`` has no spec.
        ReceiptError: a committed receipt does not follow the schema.
    """
    lab_spec = spec(lab)
    measured = gpu_receipts(lab, receipts_dir)
    return f"{prediction_label(lab_spec)} {lab_spec.prediction()}\n\n{measured_table(lab_spec, measured)}\n"
