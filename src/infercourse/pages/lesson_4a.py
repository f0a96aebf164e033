"""Values of lesson 4A (Continuous batching): the scheduler's budgets and vLLM's defaults, the step-time
model and throughput X(B) = B / t(B), Little's law, static batching's useful fraction, exact engine
steps of the lab's workloads, and the latency-throughput figure.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from infercourse import batching, fmt, labs, memory, registry, roofline, transformer
from infercourse.labs.continuous_batching import LAB, online_rows
from infercourse.pages import lesson_values

P = lesson_values(__name__)

cfg = registry.model(registry.COURSE_MODEL).config
kappa = P.add("kappa", transformer.kv_bytes_per_token(cfg, 2), "B/token")
g4090, h200 = P.add_cards()
tau0 = P.add("tau0", registry.STEP_OVERHEAD_S, "s")
# lesson 2B's band for tau_0 (CUDA graphs to every kernel launched); the point value must sit inside it
tau0_lo, tau0_hi = P.add_band("tau0", roofline.overhead_band_s(P.add("layers", cfg["num_hidden_layers"], "count")), "s")
if not tau0_lo <= tau0 <= tau0_hi:
    raise ValueError(f"the assumed tau_0 = {tau0 * 1e3:g} ms lies outside lesson 2B's band: use a value inside it")

# --- the three budgets: vLLM 0.26.0's defaults per device class and entry point ---
llm_tokens, llm_seqs = registry.vllm_scheduler_defaults("RTX 4090", "LLM")
P.add("llm_tokens", llm_tokens, "tokens")
P.add("llm_seqs", llm_seqs, "sequences")
P.add("serve_tokens", registry.vllm_scheduler_defaults("RTX 4090", "vllm serve")[0], "tokens")
h200_tokens, h200_seqs = registry.vllm_scheduler_defaults("H200", "LLM")
P.add("h200_tokens", h200_tokens, "tokens")
h200_seqs = P.add("h200_seqs", h200_seqs, "sequences")
P.add("h200_serve_tokens", registry.vllm_scheduler_defaults("H200", "vllm serve")[0], "tokens")
P.add("large_gib", registry.VLLM_LARGE_DEVICE_MIN_GIB, "count")

# --- the workload of section 3: 512 prompt tokens, 256 output tokens ---
S_in = P.add("S_in", 512, "tokens")
n_bar = P.add("n_bar", 256, "tokens")
c_mean = P.add("c_mean", S_in + n_bar // 2, "tokens")  # mean context over a request's decode
S_res = P.add("S_res", S_in + n_bar, "tokens")  # what a request holds at its end
weights = transformer.weight_bytes(cfg, 2)
kv_budget = P.add("kv_budget", memory.default_kv_budget_bytes("RTX 4090", weights), "B")
kv_tokens = P.add("kv_tokens", memory.kv_capacity_tokens(kv_budget, kappa, registry.VLLM_DEFAULT_BLOCK_SIZE), "tokens")
B_kv = P.add("B_kv", memory.max_sequences(kv_budget, kappa, S_res), "sequences")
P.add("B_kv_h200", memory.max_sequences(memory.default_kv_budget_bytes("H200", weights), kappa, S_res), "sequences")


def _row(batch: int) -> dict:
    row: dict[str, float] = {"B": batch}
    for key, g in (("4090", g4090), ("h200", h200)):
        floor = batching.step_time(g, cfg, batch, c_mean)
        row[f"t_{key}"] = floor
        row[f"x_{key}"] = batch / floor
        row[f"xo_{key}"] = batching.throughput(g, cfg, batch, c_mean, tau0)
    return row


step_rows = P.add("step_rows", [_row(b) for b in (1, 32, 64, 128, 256)], "record")
r1 = step_rows[0]
P.add("x1_4090_overhead_loss", 1 - r1["xo_4090"] / r1["x_4090"], "1")
for end, t0 in (("lo", tau0_lo), ("hi", tau0_hi)):  # the same loss, tau_0 / (tau + tau_0), over 2B's band
    P.add(f"x1_4090_overhead_loss_{end}", t0 / (r1["t_4090"] + t0), "1")

# --- serving: prompts arrive as requests finish; the binding budget is KV on the RTX 4090, max_num_seqs on
# the H200; the knee (Little's law) with every step carrying the B decodes and the B S_in / n_bar prompt tokens
P.add("S_arr_kv", B_kv * S_in / n_bar, "tokens")
P.add("step_tokens_kv", batching.step_tokens(B_kv, S_in, n_bar), "tokens")
knee_4090 = batching.max_request_rate(batching.Server(g4090, cfg, S_in, n_bar, tau0, B_kv, llm_tokens))
knee_h200 = batching.max_request_rate(batching.Server(h200, cfg, S_in, n_bar, tau0, h200_seqs, h200_tokens))
if (knee_4090["B"], knee_h200["B"]) != (B_kv, h200_seqs):
    raise ValueError(f"the page puts the knee at the binding budget, B = {B_kv} and {h200_seqs}: rewrite it")
t_kv = P.add("t_kv", knee_4090["tpot"], "s")
# the same knee over lesson 2B's band for tau_0: the rate at its slow end and at its fast end
for end, t0 in (("slow", tau0_hi), ("fast", tau0_lo)):
    k = batching.max_request_rate(batching.Server(g4090, cfg, S_in, n_bar, t0, B_kv, llm_tokens))
    P.add(f"t_kv_{end}", k["tpot"], "s")
    P.add(f"lam_kv_{end}", k["rate"], "requests/s", k["demand"])
P.add("x_kv", knee_4090["x"], "tokens/s", knee_4090["demand"])
lam_kv = P.add("lam_kv", knee_4090["rate"], "requests/s", knee_4090["demand"])
t_h200 = P.add("t_h200", knee_h200["tpot"], "s")
P.add("x_h200", knee_h200["x"], "tokens/s", knee_h200["demand"])
P.add("lam_h200", knee_h200["rate"], "requests/s", knee_h200["demand"])
tpot_slo = P.add("tpot_slo", 0.050, "s")
# what a request costs, and the card's ceiling whatever the scheduler does: peak / FLOP per request
req_flops = P.add("req_flops", roofline.request_flops(cfg, S_in, n_bar), "FLOP")
P.add("req_prefill_flops", roofline.request_flops(cfg, S_in, 1), "FLOP")
peak_4090 = g4090.bf16_dense_tflops * 1e12
lam_peak = P.add(
    "lam_peak",
    peak_4090 / req_flops,
    "requests/s",
    roofline.Demand(g4090, peak_4090, 0, "the RTX 4090's peak over one request's FLOPs"),
)
P.add("knee_share", knee_4090["demand"].flop_s / peak_4090, "1")
# the same knee with the prompts left out (decode steps only): a rate no card can carry
t_decode = P.add("t_kv_decode", batching.step_time(g4090, cfg, B_kv, c_mean, tau0), "s")
lam_naive = P.add(
    "lam_naive",
    B_kv / (n_bar * t_decode),
    "requests/s",
    "the counter-example the page shows: the knee with the prompts left out, to show it asks too much",
)
P.add("naive_share", lam_naive * req_flops / peak_4090, "1")

# --- static batching's waste: outputs uniform on 1..512 ---
n_lo = P.add("n_lo", 1, "tokens")
n_hi = P.add("n_hi", 512, "tokens")
P.add("n_mean", (n_lo + n_hi) / 2, "tokens")
waste_rows = P.add(
    "waste_rows",
    [
        {"B": b, "emax": batching.expected_max_uniform(n_lo, n_hi, b), "u": batching.useful_fraction(n_lo, n_hi, b)}
        for b in (2, 8, 32, 64, 256)
    ],
    "record",
)
P.add("u_limit", (n_lo + n_hi) / 2 / n_hi, "1")

# --- problem 2: static vs continuous at B = 32 on the RTX 4090 ---
p2_B = P.add("p2_B", 32, "sequences")
p2_u = P.add("p2_u", batching.useful_fraction(n_lo, n_hi, p2_B), "1")
p2_t = P.add("p2_t", batching.serving_step_time(g4090, cfg, p2_B, S_in, n_bar, tau0), "s")
_p2_demand = roofline.serving_demand(g4090, cfg, p2_B / n_bar / p2_t, S_in, n_bar, p2_t, "B = 32, continuous")
p2_x = P.add("p2_x", p2_B / p2_t, "tokens/s", _p2_demand)
P.add("p2_x_static", p2_u * p2_B / p2_t, "tokens/s", _p2_demand)
P.add("p2_gain", 1 / p2_u, "1")

# --- the lab's workload, GPU and CPU, replayed exactly ---
lab_requests = P.add("lab_requests", LAB.REQUESTS, "sequences")
lab_prompt = P.add("lab_prompt", LAB.PROMPT_TOKENS, "tokens")
lab_lo = P.add("lab_lo", LAB.OUTPUT_MIN, "tokens")
lab_hi = P.add("lab_hi", LAB.OUTPUT_MAX, "tokens")
lab_budget = P.add("lab_budget", LAB.MAX_NUM_BATCHED_TOKENS, "tokens")
P.add("lab_batches", ", ".join(str(b) for b in LAB.BATCH_SIZES), "text")
P.add("lab_full_prompts", lab_budget // lab_prompt, "sequences")

# the online part: one server, max_num_seqs = the largest B, vllm bench serve at each rate
lab_rates = LAB.RATES
P.add("lab_rates", ", ".join(f"{r:g}" for r in lab_rates), "text")
P.add("lab_num_prompts", LAB.NUM_PROMPTS, "sequences")
lab_online_out = P.add("lab_online_out", LAB.ONLINE_OUTPUT_TOKENS, "tokens")
lab_server_seqs = P.add("lab_server_seqs", max(LAB.BATCH_SIZES), "sequences")
online_cap = P.add("online_cap", min(lab_server_seqs, B_kv), "sequences")
online = batching.Server(g4090, cfg, lab_prompt, lab_online_out, tau0, online_cap, lab_budget)
rate_rows = P.add("rate_rows", [batching.rate_point(online, r) for r in lab_rates], "record")
lab_knee = batching.max_request_rate(online)
P.add("lam_knee", lab_knee["rate"], "requests/s", lab_knee["demand"])
P.add("knee_rates", " and ".join(f"{r['rate']:g}" for r in rate_rows if r["knee"]), "text")


def measured_points(receipts) -> list[tuple[str, Mapping[str, Any]]]:
    """``(GPU name, online row)`` of every online row of the GPU receipts among ``receipts`` (CPU receipts
    prove the lab runs, not how fast a GPU is: they are left out)."""
    return [(r["machine"]["name"], row) for r in receipts if r["machine"]["kind"] == "gpu" for row in online_rows(r)]


_measured = measured_points(labs.committed_receipts("continuous_batching"))

# the CPU run: 12 requests, 32-token prompts, outputs 2..24, B = 4, 64 tokens per step
cpu_n = P.add("cpu_n", 12, "sequences")
cpu_prompt = P.add("cpu_prompt", 32, "tokens")
cpu_B = P.add("cpu_B", 4, "sequences")
cpu_budget = P.add("cpu_budget", 64, "tokens")
_rng = random.Random(LAB.SEED)
cpu_lengths = [_rng.randint(2, 24) for _ in range(cpu_n)]
P.add("cpu_lengths_text", ", ".join(str(n) for n in cpu_lengths), "text")
_cpu_prompts = [cpu_prompt] * cpu_n
cpu_chunks = P.add(
    "cpu_chunks",
    [
        batching.schedule(_cpu_prompts[k : k + cpu_B], cpu_lengths[k : k + cpu_B], cpu_B, cpu_budget).steps
        for k in range(0, cpu_n, cpu_B)
    ],
    "record",
)
P.add("cpu_chunk_max", [max(cpu_lengths[k : k + cpu_B]) for k in range(0, cpu_n, cpu_B)], "record")
P.add("cpu_static", sum(cpu_chunks), "count")
P.add("cpu_continuous", batching.schedule(_cpu_prompts, cpu_lengths, cpu_B, cpu_budget).steps, "count")
P.add("cpu_step_tokens", cpu_n * cpu_prompt + sum(cpu_lengths), "tokens")
P.add("cpu_generated", sum(cpu_lengths), "tokens")
P.add("cpu_first_fit", cpu_budget // cpu_prompt, "sequences")

# --- the figures ---
PARETO_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def pareto_plot(ax, measured: list[tuple[str, Mapping[str, Any]]]) -> None:
    """The latency-throughput figure: the predicted curves, the lab's rates predicted, and ``measured``
    (:func:`measured_points`) as crosses."""
    for g, color, cap in ((g4090, "tab:blue", B_kv), (h200, "tab:red", h200_seqs)):
        batches = [b for b in PARETO_BATCHES if b < cap] + [cap]
        steps = [batching.serving_step_time(g, cfg, b, S_in, n_bar, tau0) for b in batches]
        tpot = [t * 1e3 for t in steps]
        tput = [b / t for b, t in zip(batches, steps, strict=True)]
        ax.plot(tpot, tput, "o-", color=color, markersize=4, label=f"{g.name} (B = 1 to {cap:,})")
        for b, x, y in zip(batches, tpot, tput, strict=True):
            if b in (1, 32, cap):
                ax.annotate(f"B={b:,}", (x, y), textcoords="offset points", xytext=(6, -4), fontsize=9, color=color)
    ax.plot(
        [r["tpot"] * 1e3 for r in rate_rows],
        [r["x"] for r in rate_rows],
        "s",
        color="tab:green",
        markersize=6,
        fillstyle="none",
        label=f"predicted, {g4090.name}, lab rates (requests/s)",
    )
    for r in rate_rows:
        ax.annotate(
            f"{r['rate']:g}/s", (r["tpot"] * 1e3, r["x"]), textcoords="offset points", xytext=(-8, 6), fontsize=9
        )
    for k, machine in enumerate(dict.fromkeys(name for name, _ in measured)):
        rows = [row for name, row in measured if name == machine]
        ax.plot(
            [row["tpot_p99_ms"] for row in rows],
            [row["output_tok_s"] for row in rows],
            "x",
            color=f"C{k + 4}",
            markersize=8,
            label=f"measured, {machine} (p99 TPOT)",
        )
    ax.axvline(tpot_slo * 1e3, color="grey", linestyle=":", label=f"a {tpot_slo * 1e3:.0f} ms TPOT target")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("TPOT (ms, log scale): the step time predicted, the p99 measured")
    ax.set_ylabel("output tokens/s, X(B) (log scale)")
    ax.set_title(f"Qwen2.5-7B, BF16, context {c_mean}: X vs TPOT as B grows", fontsize=10)
    ax.legend(fontsize=9, loc="lower right")


def _timeline_plot(axes) -> None:
    prompts = [cpu_prompt] * 8
    lengths = cpu_lengths[:8]
    static_first, static_last, offset = [], [], 0
    for k in range(0, 8, cpu_B):
        run = batching.schedule(prompts[k : k + cpu_B], lengths[k : k + cpu_B], cpu_B, cpu_budget)
        static_first += [offset + s for s in run.first_token_step]
        static_last += [offset + s for s in run.last_token_step]
        offset += run.passes
    cont = batching.schedule(prompts, lengths, cpu_B, cpu_budget)
    for ax, (title, first, last) in zip(
        axes,
        (
            ("static: each chunk of 4 runs to its longest", static_first, static_last),
            (
                "continuous: a freed slot is refilled next step",
                cont.first_token_step,
                cont.last_token_step,
            ),
        ),
        strict=True,
    ):
        for i, (f, ell) in enumerate(zip(first, last, strict=True)):
            ax.barh(i, ell - f + 1, left=f - 0.5, color=f"C{i % 10}", edgecolor="black", linewidth=0.5)
            ax.text(f, i, f"n={lengths[i]}", va="center", fontsize=9)
        ax.set_yticks(range(8), [f"r{i}" for i in range(8)], fontsize=9)
        ax.invert_yaxis()
        ax.set_title(f"{title}: {max(last)} steps", fontsize=10)
    axes[1].set_xlabel(f"engine step (B = {cpu_B}, {cpu_budget} tokens per step, {cpu_prompt}-token prompts)")


fig_static = [batching.schedule([cpu_prompt] * 4, cpu_lengths[k : k + 4], cpu_B, cpu_budget).passes for k in (0, 4)]
P.add("fig_static_steps", sum(fig_static), "count")
P.add("fig_cont_steps", batching.schedule([cpu_prompt] * 8, cpu_lengths[:8], cpu_B, cpu_budget).steps, "count")
P.figure("fig_timeline", _timeline_plot, nrows=2, figsize=(6, 4.8), sharex=True)
P.figure("fig_pareto", lambda ax: pareto_plot(ax, _measured), figsize=(6, 4.2))
_t1 = batching.serving_step_time(g4090, cfg, 1, S_in, n_bar, tau0)
P.add(
    "fig_pareto_alt",
    "a line chart of output tokens per second against TPOT, one point per batch size. On the "
    f"{g4090.name} the curve climbs from {fmt.count(round(1 / _t1))} tokens/s at B = 1 "
    f"({fmt.ms(_t1)} per step) to {fmt.count(round(B_kv / t_kv))} tokens/s at B = {B_kv}, where the KV "
    f"cache is full, as TPOT rises to {fmt.ms(t_kv)}; on the {h200.name} it climbs to "
    f"{fmt.count(round(h200_seqs / t_h200))} tokens/s at the default max_num_seqs of {h200_seqs:,} "
    f"({fmt.ms(t_h200)} per step, {'right' if t_h200 > tpot_slo else 'left'} of a dotted "
    f"{fmt.ms(tpot_slo, 0)} TPOT target). Squares mark the lab's "
    f"online request rates on the {g4090.name}: "
    + "; ".join(
        f"{r['rate']:g} per second at {fmt.count(round(r['x']))} tokens/s and {fmt.ms(r['tpot'])}"
        + (" (past the knee: the batch stays at its cap and the queue grows)" if r["knee"] else "")
        for r in rate_rows
    )
    + ". "
    + (
        "Crosses mark measurements (p99 TPOT against output tokens/s) from committed GPU receipts: "
        + "; ".join(
            f"{name} at {row['request_rate']:g} per second, {fmt.count(round(row['output_tok_s']))} tokens/s at "
            f"{fmt.fixed(row['tpot_p99_ms'], 1)} ms"
            for name, row in _measured
        )
        + "."
        if _measured
        else "No GPU receipt of the lab's online part is committed yet, so no measured point is drawn."
    ),
    "text",
)

SYMBOLS: list[str | tuple[str, str]] = [
    "B",
    "n",
    "tau",
    "tau_0",
    "X",
    "c",
    "lambda",
    "n_bar",
    "S",
    "S_arr",
    "tau_s",
    "E",
    "U",
]
P.symbols(SYMBOLS)

P.facts(
    "gpu-h200",
    "gpu-memory-total-h200",
    "vllm-scheduler-defaults",
    "vllm-scheduler-running-first",
    "vllm-preemption-victim",
    "vllm-preemption-recompute",
    "vllm-iteration-tokens",
    "vllm-async-scheduling-default",
    "step-overhead-assumed",
    "kernel-launch-cost",
    "kernels-per-decode-step",
    "vllm-non-kv-reserve",
)
