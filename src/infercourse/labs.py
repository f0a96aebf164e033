"""The GPU labs' receipts and the claims their lessons make, written as checks.

A lab (``snippets/labs/<lab>.py``) writes a JSON *receipt* when run with ``--receipt``. This
module holds what every lab's receipt must contain (:func:`validate_receipt`), the relations each
lesson tells the reader to observe (:data:`CLAIMS`, run by :func:`check`), the roofline floor a
GPU receipt is compared with (:func:`efficiency`), and the Markdown a lesson shows as the lab's
expected output (:func:`expected_output`).

Labs stay standalone (a learner copies one file), so they do not import this module; a test
runs each lab and validates its receipt here, so the schema cannot drift unnoticed.

Committed receipts live in ``receipts/<machine-slug>/<lab>.json`` (one folder per machine).

Units: times in the receipts' units (``ttft_ms``, ``tpot_ms`` in ms, ``decode_s`` in s); floors
in seconds unless a name says ms; bandwidths and FLOP/s as the registry states them.
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from infercourse import fmt
from infercourse.registry import COURSE_MODEL, GPUS, LAB_GPU, GPUFacts, gpu, model
from infercourse.roofline import time_floor
from infercourse.transformer import BYTES_PER_DTYPE, kv_bytes_per_token, param_count

ROOT = Path(__file__).resolve().parents[2]
LABS_DIR = ROOT / "snippets" / "labs"
RECEIPTS_DIR = ROOT / "receipts"
SCHEMA_VERSION = 1


def lab_grid(lab: str) -> tuple[tuple[int, int], ...]:
    """The ``GRID`` constant of ``snippets/labs/<lab>.py``, read with ``ast`` (the lab is not imported).

    Raises:
        FileNotFoundError: no such lab.
        ValueError: the lab has no module-level ``GRID = ...`` literal.
    """
    path = LABS_DIR / f"{lab}.py"
    if not path.is_file():
        raise FileNotFoundError(f"no lab {lab!r}: {path} does not exist")
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "GRID" for t in node.targets):
            return tuple(tuple(pair) for pair in ast.literal_eval(node.value))
    raise ValueError(f"{path} has no module-level GRID literal")


PHASES_GRID = lab_grid("phases")
"""(prompt tokens, output tokens) rows of the phases lab, read from the lab itself."""


# --- receipts -------------------------------------------------------------------------------------

_TOP = {
    "schema": int, "lab": str, "command": str, "git_commit": (str, type(None)), "date_utc": str,
    "machine": dict, "versions": dict, "model": str, "load_format": str, "dtype": str,
    "max_model_len": int, "settings": dict, "engine_start_s": (int, float), "units": dict, "results": list,
}
_ROW = {"prompt_tokens": int, "output_tokens": int, "ttft_ms": (int, float), "tpot_ms": (int, float),
        "decode_s": (int, float)}
_UNITS = {"ttft_ms": "ms", "tpot_ms": "ms", "decode_s": "s", "engine_start_s": "s"}


class ReceiptError(ValueError):
    """A receipt does not follow the schema; the message lists every problem found."""


def validate_receipt(receipt: Mapping[str, Any]) -> None:
    """Check a receipt against the one schema all labs write (see ``snippets/labs/phases.py``).

    Required: ``schema`` (== 1), ``lab``, ``command``, ``git_commit`` (str or null), ``date_utc``
    (``YYYY-MM-DDTHH:MM:SSZ``), ``machine`` (``kind`` "gpu" with ``name``, ``memory_gib``,
    ``driver``, ``cuda_driver_api``; or "cpu" with ``name``, ``cores``), ``versions`` (``vllm``,
    ``torch``, ``transformers``, ``python``), ``model``, ``load_format``, ``dtype``,
    ``max_model_len``, ``settings``, ``engine_start_s`` (s), ``units`` (each measured key's
    unit), ``results`` (rows with ``prompt_tokens``, ``output_tokens``, ``ttft_ms``, ``tpot_ms``,
    ``decode_s``; finite, non-negative).

    Raises:
        ReceiptError: listing every problem found.
    """
    problems: list[str] = []

    def typed(obj: Mapping[str, Any], spec: Mapping[str, Any], where: str) -> None:
        for key, kind in spec.items():
            if key not in obj:
                problems.append(f"{where}: missing {key!r}")
            elif not isinstance(obj[key], kind) or isinstance(obj[key], bool):
                problems.append(f"{where}: {key!r} is {type(obj[key]).__name__}, expected {kind}")

    if not isinstance(receipt, Mapping):
        raise ReceiptError(f"a receipt is a JSON object, got {type(receipt).__name__}")
    typed(receipt, _TOP, "receipt")
    if receipt.get("schema") not in (None, SCHEMA_VERSION) and isinstance(receipt.get("schema"), int):
        problems.append(f"receipt: schema {receipt['schema']}, this checker reads {SCHEMA_VERSION}")
    if isinstance(receipt.get("date_utc"), str) and not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", receipt["date_utc"]):
        problems.append(f"receipt: date_utc {receipt['date_utc']!r} is not YYYY-MM-DDTHH:MM:SSZ")
    machine = receipt.get("machine")
    if isinstance(machine, Mapping):
        need = {"gpu": ("name", "memory_gib", "driver", "cuda_driver_api"), "cpu": ("name", "cores")}.get(machine.get("kind"))
        if need is None:
            problems.append(f"machine: kind must be 'gpu' or 'cpu', got {machine.get('kind')!r}")
        else:
            problems += [f"machine: missing {k!r}" for k in need if k not in machine]
    versions = receipt.get("versions")
    if isinstance(versions, Mapping):
        problems += [f"versions: missing {k!r}" for k in ("vllm", "torch", "transformers", "python") if k not in versions]
    units = receipt.get("units")
    if isinstance(units, Mapping):
        problems += [f"units: {k!r} must be {u!r}, got {units.get(k)!r}" for k, u in _UNITS.items() if units.get(k) != u]
    for i, row in enumerate(receipt.get("results") or []):
        if not isinstance(row, Mapping):
            problems.append(f"results[{i}]: not an object")
            continue
        typed(row, _ROW, f"results[{i}]")
        for key in ("ttft_ms", "tpot_ms", "decode_s"):
            value = row.get(key)
            if isinstance(value, (int, float)) and not (math.isfinite(value) and value >= 0):
                problems.append(f"results[{i}]: {key} = {value!r} is not a finite non-negative number")
    if isinstance(receipt.get("results"), list) and not receipt["results"]:
        problems.append("receipt: results is empty")
    if problems:
        raise ReceiptError("; ".join(problems))


def load_receipt(path: Path | str) -> dict:
    """Read and validate one receipt file.

    Raises:
        FileNotFoundError: no such file.
        ReceiptError: not JSON, or not the schema (:func:`validate_receipt`).
    """
    path = Path(path)
    try:
        receipt = json.loads(path.read_text())
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
        ReceiptError: a committed receipt does not follow the schema.
    """
    return [load_receipt(p) for p in sorted(Path(receipts_dir).glob(f"*/{lab}.json"))]


def machine_slug(machine: Mapping[str, Any]) -> str:
    """The receipts folder name of a machine: ``"NVIDIA GeForce RTX 4090"`` -> ``"rtx-4090"``;
    a CPU gets ``"cpu-"`` plus its model, e.g. ``"cpu-amd-epyc"``.

    Raises:
        ValueError: ``machine`` has no ``name``.
    """
    name = machine.get("name")
    if not name:
        raise ValueError(f"machine has no name: {dict(machine)!r}")
    words = [w for w in re.split(r"[^a-z0-9]+", str(name).lower()) if w and w not in ("nvidia", "geforce", "tesla")]
    slug = "-".join(words)
    return f"cpu-{slug}" if machine.get("kind") == "cpu" else slug


_FORM_FACTOR = re.compile(r"^(SXM\d*|HBM\d*E?)$")


def gpu_for_name(device_name: str) -> GPUFacts | None:
    """The registry entry for a GPU as nvidia-smi / torch name it, or None if the registry has none.

    ``"NVIDIA GeForce RTX 4090"`` -> RTX 4090; ``"NVIDIA H100 80GB HBM3"`` -> H100 (SXM);
    ``"NVIDIA A100-SXM4-80GB"`` -> A100 80GB. Variants with other figures are NOT matched:
    ``"RTX 4090 D"``, ``"H100 PCIe"``, ``"H200 NVL"`` and ``"A100-SXM4-40GB"`` give None (a
    memory size in the name must equal the registry's).
    """
    tokens = [t for t in re.split(r"[^A-Z0-9]+", device_name.upper()) if t and t not in ("NVIDIA", "GEFORCE", "TESLA")]
    sizes = [int(t[:-2]) for t in tokens if re.fullmatch(r"\d+GB", t)]
    core = [t for t in tokens if not re.fullmatch(r"\d+GB", t) and not _FORM_FACTOR.match(t)]
    for key, facts in GPUS.items():
        if core == key.upper().split() and all(s == round(facts.memory_gb) for s in sizes):
            return facts
    return None


# --- the roofline floors of the phases lab --------------------------------------------------------

def _dtype_bytes(config: Mapping[str, Any], dtype: str) -> int:
    name = (config.get("torch_dtype") or config.get("dtype") or "bfloat16") if dtype == "auto" else dtype
    name = {"bf16": "bfloat16", "half": "float16", "fp16": "float16", "float": "float32"}.get(name, name)
    if name not in BYTES_PER_DTYPE:
        raise ValueError(f"dtype {name!r} has no byte width here; known: {', '.join(BYTES_PER_DTYPE)}")
    return BYTES_PER_DTYPE[name]


def phases_floors(gpu_facts: GPUFacts, config: Mapping[str, Any], prompt_tokens: int, output_tokens: int,
                  dtype_bytes: int = 2) -> dict[str, float]:
    """Roofline floors (s) of one phases-lab row on ``gpu_facts``, for a dense model ``config``.

    With N parameters, b bytes per weight, kappa KV bytes per token, S prompt tokens, n output tokens:
    TTFT floor = time_floor(2*N*S FLOP, N*b + kappa*S bytes); TPOT floor = time_floor(2*N FLOP,
    N*b + kappa*(S + n/2) bytes) (one step at the run's mean context); decode floor = (n-1) * TPOT
    floor. Attention FLOPs are left out (the lesson's first model).

    Returns:
        ``{"ttft_s", "tpot_s", "decode_s"}``.

    Raises:
        ValueError: a count is not positive, or a config key is missing.
    """
    if prompt_tokens <= 0 or output_tokens <= 0:
        raise ValueError(f"token counts must be positive, got S={prompt_tokens!r}, n={output_tokens!r}")
    n_params = param_count(config)
    kappa = kv_bytes_per_token(config, dtype_bytes)
    weights = n_params * dtype_bytes
    ttft = time_floor(gpu_facts, 2 * n_params * prompt_tokens, weights + kappa * prompt_tokens)
    tpot = time_floor(gpu_facts, 2 * n_params, weights + kappa * (prompt_tokens + output_tokens / 2))
    return {"ttft_s": ttft, "tpot_s": tpot, "decode_s": (output_tokens - 1) * tpot}


def model_config_for(receipt: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The config of a receipt's model: the registry's for a hub id it knows, else a local folder's
    ``config.json`` (e.g. the config-only folder run with ``--load-format dummy``), else None."""
    name = receipt.get("model", "")
    try:
        return model(name).config
    except KeyError:
        pass
    path = Path(name).expanduser()
    if not path.is_absolute():
        path = ROOT / path
    try:
        return json.loads((path / "config.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None


def efficiency(receipt: Mapping[str, Any]) -> list[dict] | None:
    """For a GPU receipt: per row, the TPOT floor (ms) on that GPU and floor / measured TPOT.

    Returns None where there is no floor to compare with: a CPU receipt, a GPU the registry does
    not have, or a model whose config cannot be found. Otherwise rows
    ``{"prompt_tokens", "output_tokens", "tpot_ms", "tpot_floor_ms", "efficiency"}`` (efficiency
    is a fraction; 1.0 would be the datasheet bandwidth).
    """
    machine = receipt.get("machine", {})
    facts = gpu_for_name(machine.get("name", "")) if machine.get("kind") == "gpu" else None
    config = model_config_for(receipt)
    if facts is None or config is None:
        return None
    b = _dtype_bytes(config, receipt.get("dtype", "auto"))
    rows = []
    for row in receipt["results"]:
        floor_ms = phases_floors(facts, config, row["prompt_tokens"], row["output_tokens"], b)["tpot_s"] * 1e3
        rows.append({"prompt_tokens": row["prompt_tokens"], "output_tokens": row["output_tokens"],
                     "tpot_ms": row["tpot_ms"], "tpot_floor_ms": floor_ms, "efficiency": floor_ms / row["tpot_ms"]})
    return rows


# --- claims ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ClaimResult:
    """One claim checked on one receipt. ``passed`` is None when the claim does not apply to it."""

    claim: str
    statement: str
    passed: bool | None
    detail: str


def _row(receipt: Mapping[str, Any], prompt_tokens: int, output_tokens: int) -> Mapping[str, Any]:
    for row in receipt["results"]:
        if (row["prompt_tokens"], row["output_tokens"]) == (prompt_tokens, output_tokens):
            return row
    raise ReceiptError(f"receipt has no row for prompt {prompt_tokens}, output {output_tokens} tokens")


TTFT_STEP = 1.2
"""Each longer prompt in the phases grid (1024 vs 128, 4096 vs 1024 tokens: 8x and 4x the work)
must raise TTFT at least this much. Loose on purpose: even where a short prompt is memory-bound
(RTX 4090 floor at 128 tokens: 15.1 ms, set by the weights), 1024 tokens are compute-bound
(94.4 ms floor), a 6x step."""

TPOT_VS_TTFT = 0.1
"""TPOT's relative growth from a 128- to a 4096-token prompt must stay under this fraction of
TTFT's. The one form of "barely moves" that is honest on both machines: on the RTX 4090 the floors
give +1.5 % for TPOT against +2,400 % for TTFT; on the CPU smoke run with the tiny model (whose
4096-token KV cache, 4.2 MB, outweighs its 2.9 MB of weights) TPOT does grow (+25 % to +80 % in
runs here), but TTFT grows 40- to 50-fold."""

TPOT_GPU_TOLERANCE = 0.25
"""On a GPU with the course's model, TPOT at a 4096-token prompt must be within 25 % of TPOT at
128. The roofline floor says +1.5 % (the prompt's KV, 0.23 GB, against 15.2 GB of weights); the
slack covers attention kernels that read the KV cache less efficiently than GEMV reads weights.
Not applied to CPU receipts: there the tiny model's KV cache outweighs its weights, so the claim's
premise does not hold (see TPOT_VS_TTFT)."""

DECODE_R2 = 0.98
DECODE_SPREAD = 2.0
"""Decode time against n-1 at a 128-token prompt (n = 32, 128, 512) must fit a line with R^2 of
at least DECODE_R2, and decode_s/(n-1) may differ by at most DECODE_SPREAD x between rows.
The spread is what tells a line from other shapes: over these three points a decode time growing
with n squared still fits a line with R^2 = 0.981, but its per-step time spreads 16.5x (511/31);
a constant one spreads 16.5x the other way, and 1 s of fixed cost plus 1 ms per token 11x.
Loose because CI's 2-core CPU is shared: runs there (median of 5) gave spreads of 1.1x to 1.4x
and R^2 of 0.998 to 0.9999."""


def _ttft_grows(receipt: Mapping[str, Any]) -> ClaimResult:
    t = [_row(receipt, s, 128)["ttft_ms"] for s in (128, 1024, 4096)]
    ok = t[1] >= TTFT_STEP * t[0] and t[2] >= TTFT_STEP * t[1]
    return ClaimResult("ttft_grows_with_prompt",
                       f"TTFT(4096) > TTFT(1024) > TTFT(128) at 128 output tokens, each step at least {TTFT_STEP}x",
                       ok, f"TTFT {t[0]:.2f} / {t[1]:.2f} / {t[2]:.2f} ms (x{t[1] / t[0]:.2f}, x{t[2] / t[1]:.2f})")


def _tpot_flat(receipt: Mapping[str, Any]) -> ClaimResult:
    short, long = _row(receipt, 128, 128), _row(receipt, 4096, 128)
    tpot_growth = long["tpot_ms"] / short["tpot_ms"] - 1
    ttft_growth = long["ttft_ms"] / short["ttft_ms"] - 1
    ok = tpot_growth <= TPOT_VS_TTFT * ttft_growth
    return ClaimResult("tpot_flat_vs_ttft",
                       f"from a 128- to a 4096-token prompt TPOT grows by less than {TPOT_VS_TTFT} x TTFT's growth",
                       ok, f"TPOT {short['tpot_ms']:.3f} -> {long['tpot_ms']:.3f} ms ({tpot_growth:+.1%}); "
                           f"TTFT {short['ttft_ms']:.2f} -> {long['ttft_ms']:.2f} ms ({ttft_growth:+.0%})")


def _tpot_gpu(receipt: Mapping[str, Any]) -> ClaimResult:
    statement = f"on a GPU, TPOT at a 4096-token prompt is within {TPOT_GPU_TOLERANCE:.0%} of TPOT at 128"
    if receipt["machine"].get("kind") != "gpu":
        return ClaimResult("tpot_within_tolerance_gpu", statement, None,
                           "not applied to a CPU receipt (tiny model: KV cache outweighs weights)")
    ratio = _row(receipt, 4096, 128)["tpot_ms"] / _row(receipt, 128, 128)["tpot_ms"]
    return ClaimResult("tpot_within_tolerance_gpu", statement, abs(ratio - 1) <= TPOT_GPU_TOLERANCE,
                       f"TPOT(4096)/TPOT(128) = {ratio:.3f}")


def linear_fit(xs: list[float], ys: list[float]) -> tuple[float, float, float]:
    """Least-squares line y = a + b*x: returns (a, b, R^2).

    Raises:
        ValueError: fewer than 3 points, lengths differ, or all x (or all y) equal.
    """
    if len(xs) != len(ys) or len(xs) < 3:
        raise ValueError(f"need at least 3 (x, y) pairs of equal length, got {len(xs)} and {len(ys)}")
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        raise ValueError("x or y values are all equal; no line to fit")
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    intercept = my - slope * mx
    ss_res = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys))
    return intercept, slope, 1 - ss_res / syy


def _decode_linear(receipt: Mapping[str, Any]) -> ClaimResult:
    rows = [_row(receipt, 128, n) for n in (32, 128, 512)]
    steps = [r["output_tokens"] - 1 for r in rows]
    decode = [r["decode_s"] for r in rows]
    statement = (f"decode time vs n-1 (n = 32, 128, 512; prompt 128) is a line: R^2 >= {DECODE_R2}, "
                 f"decode_s/(n-1) within {DECODE_SPREAD}x")
    try:
        _, slope, r2 = linear_fit(steps, decode)
    except ValueError as exc:  # e.g. the same decode time for every n: not a line through growth
        return ClaimResult("decode_linear_in_output", statement, False, f"no fit: {exc}")
    per_step = [d / s for d, s in zip(decode, steps)]
    spread = max(per_step) / min(per_step) if min(per_step) > 0 else math.inf
    return ClaimResult("decode_linear_in_output", statement, r2 >= DECODE_R2 and spread <= DECODE_SPREAD,
                       f"R^2 = {r2:.4f}, slope {slope * 1e3:.3f} ms/token, per-step spread x{spread:.2f}")


CLAIMS: Mapping[str, tuple[Callable[[Mapping[str, Any]], ClaimResult], ...]] = {
    "phases": (_ttft_grows, _tpot_flat, _tpot_gpu, _decode_linear),
}
"""Per lab, the checks of what its lesson tells the reader to observe."""


def check(receipt: Mapping[str, Any]) -> list[ClaimResult]:
    """Validate a receipt and run it through its lab's claims.

    Raises:
        ReceiptError: the receipt breaks the schema or lacks a row a claim needs.
        KeyError: the receipt's lab has no claims registered.
    """
    validate_receipt(receipt)
    lab = receipt["lab"]
    if lab not in CLAIMS:
        raise KeyError(f"no claims for lab {lab!r}; known labs: {', '.join(CLAIMS)}")
    return [claim(receipt) for claim in CLAIMS[lab]]


def report(receipt: Mapping[str, Any]) -> tuple[bool, str]:
    """Check a receipt; return (all applicable claims passed, a readable report with one line per
    claim and, for a GPU receipt, TPOT against the GPU's floor).

    Raises:
        ReceiptError, KeyError: as :func:`check`.
    """
    results = check(receipt)
    m = receipt["machine"]
    lines = [f"{receipt['lab']} on {m['name']} ({m['kind']}), vLLM {receipt['versions'].get('vllm')}, "
             f"model {receipt['model']} ({receipt['load_format']}), {receipt['date_utc']}"]
    for r in results:
        mark = {True: "PASS", False: "FAIL", None: "n/a "}[r.passed]
        lines.append(f"  {mark} {r.claim}: {r.statement} -- {r.detail}")
    eff = efficiency(receipt)
    if eff:
        lines.append("  TPOT against the roofline floor on this GPU:")
        lines += [f"    S={e['prompt_tokens']:>5} n={e['output_tokens']:>4}: measured {e['tpot_ms']:.2f} ms, "
                  f"floor {e['tpot_floor_ms']:.2f} ms, efficiency {e['efficiency']:.0%}" for e in eff]
    elif m["kind"] == "gpu":
        lines.append(f"  no floor: GPU {m['name']!r} or model {receipt['model']!r} is not in the registry")
    return all(r.passed is not False for r in results), "\n".join(lines)


# --- the lesson's expected output -----------------------------------------------------------------

def _prediction_phases(gpu_name: str = LAB_GPU, model_name: str = COURSE_MODEL) -> str:
    facts, config = gpu(gpu_name), model(model_name).config
    n_params, kappa = param_count(config), kv_bytes_per_token(config, 2)
    lines = [
        f"**Prediction for the {facts.name} from the roofline, not a measurement.** {model_name} in BF16 "
        f"(N = {fmt.count(n_params)} parameters, {fmt.gb(2 * n_params)} of weights, "
        f"κ = {fmt.count(kappa)} B of KV cache per token); {fmt.count(facts.bandwidth_gb_s)} GB/s and "
        f"{fmt.fixed(facts.bf16_dense_tflops)} TFLOP/s (BF16 dense, FP32 accumulate). "
        "Floors: TTFT = max(2NS FLOP / peak, (Nb + κS) B / bandwidth); TPOT = one step at the run's "
        "mean context, (Nb + κ(S + n/2)) B / bandwidth; decode = (n − 1) × TPOT. A real run is slower.",
        "",
        "| prompt tokens | output tokens | TTFT floor (ms) | TPOT floor (ms) | decode floor (s) |",
        "|---:|---:|---:|---:|---:|",
    ]
    for s, n in PHASES_GRID:
        f = phases_floors(facts, config, s, n, 2)
        lines.append(f"| {fmt.count(s)} | {fmt.count(n)} | {fmt.fixed(f['ttft_s'] * 1e3, 1)} | "
                     f"{fmt.fixed(f['tpot_s'] * 1e3, 2)} | {fmt.fixed(f['decode_s'], 2)} |")
    return "\n".join(lines)


def _measured_phases(receipts: list[dict]) -> str:
    if not receipts:
        return ("*No GPU receipt is committed yet.* Run `make labs` on a GPU box and commit "
                "`receipts/<machine>/phases.json` to show measurements here.")
    lines = [
        "**Measured (committed receipts).** Efficiency = TPOT floor on that GPU / measured TPOT.",
        "",
        "| machine | vLLM | date | model | prompt | output | TTFT (ms) | TPOT (ms) | decode (s) | efficiency |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for receipt in receipts:
        eff = {(e["prompt_tokens"], e["output_tokens"]): e["efficiency"] for e in efficiency(receipt) or []}
        m = receipt["machine"]
        for row in receipt["results"]:
            e = eff.get((row["prompt_tokens"], row["output_tokens"]))
            lines.append(
                f"| {m['name']} | {receipt['versions'].get('vllm')} | {receipt['date_utc'][:10]} | "
                f"`{receipt['model']}` ({receipt['load_format']}) | {fmt.count(row['prompt_tokens'])} | "
                f"{fmt.count(row['output_tokens'])} | {fmt.fixed(row['ttft_ms'], 1)} | {fmt.fixed(row['tpot_ms'], 2)} | "
                f"{fmt.fixed(row['decode_s'], 2)} | {fmt.pct(e, 0) if e is not None else 'n/a'} |")
    return "\n".join(lines)


def expected_output(lab: str, receipts_dir: Path | str = RECEIPTS_DIR) -> str:
    """Markdown for a lesson's "expected output" of ``lab``: the roofline prediction for the course's
    GPU (labelled as a prediction) and, beside it, a table of the committed GPU receipts of that lab
    (CPU receipts prove a lab runs, not how fast a GPU is; they are not shown).

    Raises:
        KeyError: no expected output is defined for ``lab``.
        ReceiptError: a committed receipt does not follow the schema.
    """
    if lab != "phases":
        raise KeyError(f"no expected output for lab {lab!r}; known: phases")
    gpu_receipts = [r for r in committed_receipts(lab, receipts_dir) if r["machine"]["kind"] == "gpu"]
    return _prediction_phases() + "\n\n" + _measured_phases(gpu_receipts) + "\n"
