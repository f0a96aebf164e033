"""Lab 7A, ``snippets/labs/tensor_parallel.py``: what each tensor-parallel rank holds, greedy tokens at
T = 1 and 2, and decode step times.

Receipt rows, one per run (``tp1``, ``shard``, ``tp2``, ``tp2_nccl``, ``allreduce``; key ``run``):
``tensor_parallel_size``, ``outcome`` ("started" or "n/a"), ``reason`` (for n/a), ``ranks`` (results
``LLM.apply_model`` returned), ``qkv_proj_elements``, ``o_proj_elements``, ``gate_up_proj_elements``,
``down_proj_elements`` (one count per rank, summed over layers, from vLLM's shard sizes),
``embed_rows`` and ``lm_head_rows`` (vocabulary rows per rank, padded to vLLM's multiple of 64),
``kv_heads`` (per rank), ``sizes`` (the loaded config's layers, hidden size, heads, KV heads,
head_dim, intermediate size, vocabulary: for ``shard`` the overridden per-rank shape),
``greedy_tokens`` (one list per prompt), ``step_batches`` and ``step_ms`` (decode step, ms). The
``allreduce`` row (no engine; the engine fields null, the others null on engine rows): ``backend`` (nccl,
gloo), ``message_bytes``, ``allreduce_s`` (median s per size), ``sum_exact`` (every rank's first result equal
to the element-wise sum), the fit t = a + n b (``fit_latency_s`` a, ``fit_s_per_byte`` b) and what the ring
model reads from it (``fit_alpha_s`` = a / (2 (T - 1)) per ring step, ``fit_link_gb_s`` = 2 (T - 1) / (T b)).

The count and token claims are exact on any machine, the CPU included (where ``tp2`` runs as two
worker processes); the step-time claims are checked on GPU receipts only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from infercourse import fmt, registry, roofline, transformer
from infercourse.exercises import Exercise
from infercourse.labs import core

LAB = core.lab_settings("tensor_parallel")

STEP_CONTEXT = LAB.STEP_PROMPT_LEN + LAB.STEP_OUTPUT_LEN // 2
"""Mean context (tokens) of the step sweep's decode steps: the prediction's context length."""

TP2_SLACK = 1.15
"""GPU, provisional: the measured t(2)/t(1) may exceed the predicted ratio by 15 % (the model leaves out
the embedding's all-reduce, the logits gather and kernel launch gaps); to be calibrated on GPU receipts."""


def _run(receipt: core.Receipt, name: str) -> dict | None:
    row = next((r for r in receipt["results"] if r["run"] == name), None)
    return row if row is not None and row["outcome"] == "started" else None


def _config(sizes: dict) -> dict:
    """A config mapping for :mod:`infercourse.transformer` from a row's ``sizes``."""
    return {
        "num_hidden_layers": sizes["layers"],
        "hidden_size": sizes["hidden_size"],
        "num_attention_heads": sizes["heads"],
        "num_key_value_heads": sizes["kv_heads"],
        "head_dim": sizes["head_dim"],
        "intermediate_size": sizes["intermediate_size"],
        "vocab_size": sizes["vocab_size"],
    }


def expected_rank(row: dict) -> tuple[dict, int]:
    """(per-rank linear elements by kind, KV heads per rank) a started row must show.

    ``tp1``/``tp2``: :func:`infercourse.transformer.tp_rank_linear_elements` of the row's config at its T.
    ``shard``: the T = 2 rank of the *whole* model, whose config has T times the shard's heads, KV
    heads and intermediate size (so a shard whose head size vLLM re-derived fails).
    """
    config = _config(row["sizes"])
    ranks = row["tensor_parallel_size"]
    if row["run"] == "shard":
        for key in ("num_attention_heads", "num_key_value_heads", "intermediate_size"):
            config[key] *= LAB.EMULATED_T
        ranks = LAB.EMULATED_T
    return transformer.tp_rank_linear_elements(config, ranks), max(1, config["num_key_value_heads"] // ranks)


@core.claim
def rank_counts_exact(receipt: core.Receipt) -> core.ClaimResult:
    """Exact: every rank of every started run holds the formula's linear elements and KV heads."""
    details, ok = [], True
    rows = [r for r in receipt["results"] if r["outcome"] == "started" and r["run"] != "allreduce"]
    for r in rows:
        want, kv = expected_rank(r)
        got = {k: r[f"{k}_elements"] for k in LAB.KINDS}
        good = all(v == [want[k]] * r["ranks"] for k, v in got.items()) and r["kv_heads"] == [kv] * r["ranks"]
        good &= r["ranks"] == r["tensor_parallel_size"]
        ok &= good
        details.append(
            f"{r['run']}: {r['ranks']} rank(s) x ("
            + ", ".join(f"{k} {want[k]:,}" for k in LAB.KINDS)
            + f", KV heads {kv})"
            + ("" if good else f" but got {got}, KV heads {r['kv_heads']}")
        )
    return core.ClaimResult(
        "rank_counts_exact",
        "each rank holds L d (h/T + 2 max(1, h_kv/T)) d_h QKV, L h d_h d / T o_proj, 2 L d f / T gate/up and "
        "L f d / T down_proj weights; the shard run holds exactly a T = 2 rank's",
        bool(rows) and ok,
        "; ".join(details) or "no run started",
    )


def compare(receipt: core.Receipt) -> list[core.Compared]:
    """Each started engine run's qkv_proj elements per rank beside :func:`expected_rank`'s (exact, on any machine);
    of a run's ranks, the one furthest from it, so that a single wrong rank shows."""
    found = []
    for i, r in enumerate(receipt["results"]):
        if r["outcome"] == "started" and r["run"] != "allreduce":
            want = expected_rank(r)[0]["qkv_proj"]
            worst = max(r["qkv_proj_elements"], key=lambda v: abs(v - want), default=0)
            found.append(core.Compared(i, "qkv_proj elements per rank", "elements", worst, want))
    return found


@core.claim
def shards_sum_to_whole(receipt: core.Receipt) -> core.ClaimResult:
    """Exact: the T = 2 ranks' elements and vocabulary rows add up to the T = 1 engine's."""
    whole, split = _run(receipt, "tp1"), _run(receipt, "tp2") or _run(receipt, "tp2_nccl")
    statement = "the two ranks' linear elements and embedding and lm_head rows add up to the T = 1 engine's"
    if whole is None or split is None:
        return core.ClaimResult("shards_sum_to_whole", statement, None, "needs a tp1 and a tp2 run")
    keys = [f"{k}_elements" for k in LAB.KINDS] + ["embed_rows", "lm_head_rows"]
    bad = [f"{k}: {' + '.join(map(str, split[k]))} != {whole[k][0]}" for k in keys if sum(split[k]) != whole[k][0]]
    return core.ClaimResult(
        "shards_sum_to_whole",
        statement,
        not bad,
        "; ".join(bad) or ", ".join(f"{k} {' + '.join(f'{v:,}' for v in split[k])}" for k in keys),
    )


@core.claim
def greedy_tokens_equal(receipt: core.Receipt) -> core.ClaimResult:
    """Exact in float32: T = 2 generates the T = 1 engine's greedy tokens."""
    whole = _run(receipt, "tp1")
    split = [r for r in (_run(receipt, "tp2"), _run(receipt, "tp2_nccl")) if r is not None]
    statement = (
        "in float32, the T = 2 engine's greedy tokens equal the T = 1 engine's (only the order of a sum changes)"
    )
    if whole is None or not split:
        return core.ClaimResult("greedy_tokens_equal", statement, None, "needs a tp1 and a tp2 run")
    same = [r["greedy_tokens"] == whole["greedy_tokens"] for r in split]
    detail = "; ".join(f"{r['run']}: {'same' if s else 'differs'}" for r, s in zip(split, same, strict=True))
    if receipt["load_format"] == "dummy":  # each rank draws its own random shard: another model than T = 1's
        return core.ClaimResult(
            "greedy_tokens_equal", statement, None, f"{detail} [random weights: drawn per rank, not comparable]"
        )
    if receipt["dtype"] != "float32":
        return core.ClaimResult(
            "greedy_tokens_equal", statement, None, f"{detail} [dtype {receipt['dtype']}: a near-tie may flip]"
        )
    return core.ClaimResult("greedy_tokens_equal", statement, all(same), detail)


@core.claim
def allreduce_fit_exact(receipt: core.Receipt) -> core.ClaimResult:
    """Exact on any machine: the sweep covered the lab's sizes, one median time per size, every rank summed
    exactly, and the receipt's fit is the relative least-squares fit of its own times (:func:`least_squares`,
    recomputed here), with
    a finite positive latency a and cost per byte b."""
    row = _run(receipt, "allreduce")
    statement = (
        "the all-reduce sweep times every message size of the lab once each, sums exactly, and its least-squares "
        "fit t = a + n b (in relative error) has a finite a > 0 and b > 0"
    )
    if row is None:
        na = next((r for r in receipt["results"] if r["run"] == "allreduce"), None)
        return core.ClaimResult(
            "allreduce_fit_exact", statement, None, f"n/a: {na['reason']}" if na else "no allreduce run"
        )
    sizes, times = row["message_bytes"], row["allreduce_s"]
    problems = []
    if sizes != list(LAB.ALLREDUCE_BYTES):
        problems.append(f"sizes {sizes} != the lab's {list(LAB.ALLREDUCE_BYTES)}")
    times_ok = len(times) == len(sizes) and all(math.isfinite(t) and t > 0 for t in times)
    if not times_ok:
        problems.append(f"{len(times)} times for {len(sizes)} sizes, or a time not finite and > 0: {times}")
    if row["sum_exact"] is not True:
        problems.append("a rank's all-reduce differs from the element-wise sum")
    a, b = row["fit_latency_s"], row["fit_s_per_byte"]
    if not all(math.isfinite(v) and v > 0 for v in (a, b)):
        problems.append(f"fit a = {a}, b = {b}: not finite and > 0")
    elif times_ok and len(times) >= 2:
        want_a, want_b = least_squares(sizes, times)
        if not (math.isclose(a, want_a, rel_tol=1e-6) and math.isclose(b, want_b, rel_tol=1e-6)):
            problems.append(f"fit ({a:.6g}, {b:.6g}) is not the least-squares fit ({want_a:.6g}, {want_b:.6g})")
    detail = "; ".join(problems) or (
        f"{row['backend']}, {row['ranks']} ranks, {len(sizes)} sizes: a = {a * 1e6:.1f} µs, "
        f"b = {b * 1e9:.4f} ns/B (alpha per ring step {row['fit_alpha_s'] * 1e6:.1f} µs)"
    )
    return core.ClaimResult("allreduce_fit_exact", statement, not problems, detail)


def least_squares(message_bytes: Iterable[float], seconds: Iterable[float]) -> tuple[float, float]:
    """``(a, b)`` of the line t = a + n b through (bytes, s) points that least-squares fits in relative error:
    each residual is divided by its time (``numpy.linalg.lstsq`` on the scaled rows), so a size's time counts
    as much as any other's. A plain fit is led by the largest message (1,000 times the smallest's bytes) and
    on a busy machine put a at -15.6 µs for times of 146-5,422 µs; this fit puts it at 131 µs.

    Raises:
        ValueError: a time that is not positive (the scale would divide by it).
    """
    n = np.asarray(list(message_bytes), dtype=float)
    t = np.asarray(list(seconds), dtype=float)
    if not np.all(t > 0):
        raise ValueError(f"every time must be positive to fit in relative error, got {t.tolist()}")
    design = np.column_stack([np.ones_like(n), n]) / t[:, None]
    solution = np.linalg.lstsq(design, np.ones_like(t))[0]
    return float(solution[0]), float(solution[1])


def fitted_alpha(receipts: Iterable[core.Receipt]) -> dict[str, tuple[float, core.Receipt]]:
    """The measured alpha (s per ring step) of every GPU whose receipt has a started ``allreduce`` row that
    keeps :func:`allreduce_fit_exact`, by the registry's GPU name: ``{name: (alpha_s, receipt)}`` (the newest
    receipt per GPU). CPU receipts and GPUs the registry does not have are left out."""
    found: dict[str, tuple[float, core.Receipt]] = {}
    for receipt in sorted(receipts, key=lambda r: r["date_utc"]):
        facts = core.gpu_for_name(receipt["machine"].get("name", "")) if receipt["machine"]["kind"] == "gpu" else None
        name = next((k for k, v in registry.GPUS.items() if v is facts), None)
        row = _run(receipt, "allreduce")
        if name and row and allreduce_fit_exact(receipt).passed:
            found[name] = (row["fit_alpha_s"], receipt)
    return found


def predicted_ratio(gpu_name: str, config, batch: int) -> float:
    """Predicted t(T = 2) / t(T = 1) of a decode step (:func:`infercourse.roofline.tp_decode_step`)."""
    g, (_, link) = registry.gpu(gpu_name), registry.TP_LINKS[gpu_name]
    alpha = registry.TP_HOP_LATENCY_US[gpu_name] * 1e-6
    one = sum(roofline.tp_decode_step(g, config, STEP_CONTEXT, batch, 1, link, alpha))
    two = sum(roofline.tp_decode_step(g, config, STEP_CONTEXT, batch, 2, link, alpha))
    return two / one


@core.gpu_timing
def tp2_speedup_in_range(receipt: core.Receipt) -> core.ClaimResult:
    whole, split = _run(receipt, "tp1"), _run(receipt, "tp2")
    statement = (
        f"at every batch, 0.5 <= t(T = 2) / t(T = 1) <= {TP2_SLACK:g} x the predicted ratio (two GPUs cannot "
        "more than halve a step; the all-reduces take their share)"
    )
    if whole is None or split is None or not whole["step_ms"]:
        return core.ClaimResult("tp2_speedup_in_range", statement, None, "needs tp1 and tp2 step times")
    facts = core.gpu_for_name(receipt["machine"].get("name", ""))
    gpu_name = next((k for k, v in registry.GPUS.items() if v is facts), "")  # the registry's short name
    details, ok = [], True
    for b, one, two in zip(whole["step_batches"], whole["step_ms"], split["step_ms"], strict=True):
        ratio = two / one
        if gpu_name in registry.TP_LINKS:
            bound = TP2_SLACK * predicted_ratio(gpu_name, _config(whole["sizes"]), b)
            ok &= 0.5 <= ratio <= bound
            details.append(f"B {b}: {ratio:.2f} (0.5-{bound:.2f})")
        else:
            ok &= ratio >= 0.5
            details.append(f"B {b}: {ratio:.2f} (>= 0.5; no link facts for {gpu_name or 'this machine'})")
    return core.ClaimResult("tp2_speedup_in_range", statement, ok, "; ".join(details))


@core.gpu_timing
def shard_step_below_tp2(receipt: core.Receipt) -> core.ClaimResult:
    shard, split = _run(receipt, "shard"), _run(receipt, "tp2")
    statement = "the shard-shape step (one rank's work, no all-reduce) is faster than the real T = 2 step"
    if shard is None or split is None or not shard["step_ms"]:
        return core.ClaimResult("shard_step_below_tp2", statement, None, "needs shard and tp2 step times")
    pairs = list(zip(shard["step_batches"], shard["step_ms"], split["step_ms"], strict=True))
    return core.ClaimResult(
        "shard_step_below_tp2",
        statement,
        all(s < t for _, s, t in pairs),
        "; ".join(f"B {b}: {s:.3f} vs {t:.3f} ms" for b, s, t in pairs),
    )


def prediction(gpu_name: str = registry.LAB_GPU, model_name: str = registry.COURSE_MODEL) -> str:
    """Markdown: predicted decode step floors at T = 1 and 2 on two ``gpu_name`` GPUs, per batch of the sweep."""
    config = registry.model(model_name).config
    g, (link_name, link) = registry.gpu(gpu_name), registry.TP_LINKS[gpu_name]
    alpha_us = registry.TP_HOP_LATENCY_US[gpu_name]
    lines = [
        f"{model_name} in BF16 on two {gpu_name}s over {link_name} ({fmt.fixed(link, 1)} GB/s per direction, "
        f"assumed {fmt.fixed(alpha_us, 1)} µs per ring step), context {STEP_CONTEXT} tokens. "
        "`roofline.tp_decode_step`: compute floor / T (attention / min(T, h_kv)) plus 2 L + 1 ring all-reduces "
        "of B d 2 bytes and the gather of B rows of logits. The shard run measures the T = 2 compute without them.",
        "",
        "| batch B | t(1) floor (ms) | shard floor (ms) | collectives (ms) | t(2) (ms) | t(2) / t(1) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for b in LAB.STEP_BATCHES:
        one = sum(roofline.tp_decode_step(g, config, STEP_CONTEXT, b, 1, link, alpha_us * 1e-6))
        compute, comm = roofline.tp_decode_step(g, config, STEP_CONTEXT, b, 2, link, alpha_us * 1e-6)
        lines.append(
            f"| {b} | {fmt.fixed(one * 1e3, 2)} | {fmt.fixed(compute * 1e3, 2)} | {fmt.fixed(comm * 1e3, 2)} | "
            f"{fmt.fixed((compute + comm) * 1e3, 2)} | {fmt.fixed((compute + comm) / one, 2)} |"
        )
    return "\n".join(lines)


def _per_rank(values) -> str:
    return " + ".join(fmt.count(v) for v in values)


def demands(gpu_name: str = registry.LAB_GPU, model_name: str = registry.COURSE_MODEL) -> list[roofline.Demand]:
    """What the T = 1 and T = 2 step times of :func:`prediction` ask of each ``gpu_name`` card."""
    config = registry.model(model_name).config
    g, (_, link) = registry.gpu(gpu_name), registry.TP_LINKS[gpu_name]
    alpha_s = registry.TP_HOP_LATENCY_US[gpu_name] * 1e-6
    return [
        roofline.decode_demand(
            g,
            config,
            b,
            STEP_CONTEXT,
            sum(roofline.tp_decode_step(g, config, STEP_CONTEXT, b, ranks, link, alpha_s)),
            f"tensor_parallel: T = {ranks} at B = {b}, per card",
            ranks=ranks,
        )
        for b in LAB.STEP_BATCHES
        for ranks in (1, 2)
    ]


# --- the notebook's exercises ----------------------------------------------------------------------

ALLREDUCE_BATCH, ALLREDUCE_RANKS = 64, 4
"""Exercise 2: the decode batch whose hidden states one all-reduce sums, and the ranks of the ring."""


def _cfg() -> dict:
    return dict(registry.model(registry.COURSE_MODEL).config)


EXERCISES = (
    Exercise(
        f"{registry.COURSE_MODEL} at T = 2: how many `qkv_proj` weight elements (biases not counted) does one rank "
        "hold, over all the layers?",
        lambda: transformer.tp_rank_linear_elements(_cfg(), 2)["qkv_proj"],
        "elements",
        "Column-parallel: each rank keeps h / T query heads and h_kv / T KV heads (K and V) of d_h each, times d "
        "inputs, in every layer (lesson 7A; the lab counts them: `rank_counts_exact`).",
    ),
    Exercise(
        f"One ring all-reduce of a decode step's hidden states at batch {ALLREDUCE_BATCH} (BF16) over "
        f"T = {ALLREDUCE_RANKS}: how many bytes does each GPU send?",
        lambda: roofline.ring_allreduce_bytes(ALLREDUCE_BATCH * _cfg()["hidden_size"] * 2, ALLREDUCE_RANKS),
        "bytes",
        "m = B × d × 2 bytes; a ring sends m / T per step for T − 1 steps of reduce-scatter and T − 1 of all-gather: "
        "2 (T − 1) / T × m (lesson 7A).",
    ),
    Exercise(
        f"A decode step at batch 1 on two {registry.LAB_GPU}s (T = 2, PCIe) against one: what speedup does the "
        "step model predict at the lab's context?",
        lambda: 1 / predicted_ratio(registry.LAB_GPU, _cfg(), 1),
        "times",
        "Each rank reads half the weights, but every layer adds two all-reduces, each paying a hop latency: the "
        "collectives eat part of the halving (lesson 7A).",
        rel_tol=0.05,
    ),
)


SPEC = core.lab_spec(
    __name__,
    key=("run",),
    header="qkv_proj",
    prediction_basis="the roofline and the ring all-reduce model",
    columns=(
        core.Column.text("run"),
        core.Column.count("tensor_parallel_size", "T"),
        core.Column("qkv_proj_elements", "QKV per rank", _per_rank),
        core.Column("down_proj_elements", "down_proj per rank", _per_rank),
        core.Column("step_ms", "step at B = 1 (ms)", lambda v: fmt.fixed(v[0], 2) if v else "-"),
        core.Column("fit_alpha_s", "fitted α per ring step (µs)", lambda v: fmt.fixed(v * 1e6, 1)),
    ),
    cpu_args=("--runs", "tp1,tp2,allreduce", "--dtype", "float32", "--step-batches", "none"),
    work=core.LabWork(
        engines=len(LAB.RUNS) - 1,  # the allreduce run starts no engine
        decode_steps=(len(LAB.RUNS) - 1) * 2 * len(LAB.STEP_BATCHES) * LAB.STEP_OUTPUT_LEN,
        peak_kv_tokens=max(LAB.STEP_BATCHES) * (LAB.STEP_PROMPT_LEN + LAB.STEP_OUTPUT_LEN),
        gpus=2,
    ),
)
