"""Values of lesson 6A (speculative decoding): the cost of verifying k + 1 tokens, expected tokens per step,
the speedup against acceptance, draft length and batch, the draft's memory, and the counters' arithmetic.
"""

from __future__ import annotations

from infercourse import fmt, memory, registry, roofline, transformer
from infercourse.labs.spec_decode import LAB
from infercourse.pages import lesson_values

P = lesson_values(__name__)

DRAFT = LAB.DRAFT_MODEL
cfg = registry.model(registry.COURSE_MODEL).config
dcfg = registry.model(DRAFT).config
P.add("draft_layers", dcfg["num_hidden_layers"], "count")
P.add("draft_model", DRAFT, "text")
g4090, h200 = P.add_cards()
ctx = P.add("ctx", 1024, "tokens")  # the context every floor below is taken at
k_lab = P.add("k_lab", LAB.K, "tokens")
P.add("V_target", cfg["vocab_size"], "tokens")
P.add("V_draft", dcfg["vocab_size"], "tokens")
P.add("N_draft", transformer.param_count(dcfg), "params")

# --- 1. why verification is nearly free at B = 1: the step floors (RTX 4090, BF16) ---
tau, tau_d, tau_v = roofline.spec_step_floors(g4090, cfg, dcfg, ctx, 1, k_lab)
P.add("tau", tau, "s")
P.add("tau_d", tau_d, "s")
P.add("tau_v", tau_v, "s")
rho = P.add("rho", tau_d / tau, "1")
P.add("verify_ratio", tau_v / tau, "1")
bstar = P.add("bstar", roofline.compute_bound_batch(g4090), "sequences")
P.add("bstar_over_k1", bstar / (k_lab + 1), "sequences")
B_big = P.add("B_big", 64, "sequences")
tau_big, _, tau_v_big = roofline.spec_step_floors(g4090, cfg, dcfg, ctx, B_big, k_lab)
P.add("verify_ratio_big", tau_v_big / tau_big, "1")
P.add("tokens_big", B_big * (k_lab + 1), "tokens")

# --- 2. acceptance and expected tokens per step ---
alpha_ex = P.add("alpha_ex", 0.7, "1")
E_ex = P.add("E_ex", roofline.expected_tokens_per_step(alpha_ex, k_lab), "tokens")
P.add("E_max", roofline.expected_tokens_per_step(1.0, k_lab), "tokens")
P.add("accepted_ex", E_ex - 1, "tokens")

# --- 3. speedup against alpha and k at B = 1 (RTX 4090) ---
ALPHAS = (0.5, 0.6, 0.7, 0.8, 0.9)
KS = (1, 2, 3, 4, 5, 6, 7, 8)
P.add("ks", KS, "record")


def _speedup(g, alpha: float, k: int, batch: int = 1) -> float:
    return roofline.spec_speedup(alpha, k, *roofline.spec_step_floors(g, cfg, dcfg, ctx, batch, k))


def _best_k(g, alpha: float, batch: int = 1) -> int:
    return max(KS, key=lambda k: _speedup(g, alpha, k, batch))


speed_rows = P.add(
    "speed_rows",
    [{"alpha": a, "speedups": [_speedup(g4090, a, k) for k in KS], "best_k": _best_k(g4090, a)} for a in ALPHAS],
    "record",
)
sigma_ex = P.add("sigma_ex", _speedup(g4090, alpha_ex, k_lab), "1")
best_k_ex = P.add("best_k_ex", _best_k(g4090, alpha_ex), "tokens")
P.add("sigma_best_ex", _speedup(g4090, alpha_ex, best_k_ex), "1")
P.add("tpot_spec_ex", (k_lab * tau_d + tau_v) / E_ex, "s")  # problem 1
P.add("draft_time_ex", k_lab * tau_d, "s")
P.add("step_time_ex", k_lab * tau_d + tau_v, "s")
P.add("sigma_free", roofline.expected_tokens_per_step(alpha_ex, k_lab), "1")  # rho = 0, tau_v = tau: sigma = E
# the speed-up over lesson 2B's band: every step (each draft step, the verification, plain decode's) lands
# between its floor plus the graphs' overhead and its floor over the published bandwidth share plus every launch
L_target, L_draft = (
    P.add(f"L_{who}", c["num_hidden_layers"], "count") for who, c in (("target", cfg), ("draft", dcfg))
)
bands = [roofline.step_band(t, layers) for t, layers in ((tau, L_target), (tau_d, L_draft), (tau_v, L_target))]
P.add("tau_d_slow", bands[1][1], "s")
P.add("tau_slow", bands[0][1], "s")
P.add("bw_share", registry.DECODE_BANDWIDTH_SHARE, "1")
P.add("sigma_ex_slow", roofline.spec_speedup(alpha_ex, k_lab, *(band[1] for band in bands)), "1")
P.add("sigma_ex_fast", roofline.spec_speedup(alpha_ex, k_lab, *(band[0] for band in bands)), "1")

# --- 4. batch dependence (k = K, alpha = 0.7) ---
BATCHES = (1, 4, 16, 32, 64, 128)


def _break_even(g, alpha: float, k: int) -> int:
    """The smallest batch (1..1024) at which speculation stops paying (sigma < 1)."""
    return next(b for b in range(1, 1025) if _speedup(g, alpha, k, b) < 1)


batch_rows = P.add(
    "batch_rows",
    [
        {"batch": b, "s4090": _speedup(g4090, alpha_ex, k_lab, b), "sh200": _speedup(h200, alpha_ex, k_lab, b)}
        for b in BATCHES
    ],
    "record",
)
P.add("break_4090", _break_even(g4090, alpha_ex, k_lab), "sequences")
P.add("break_h200", _break_even(h200, alpha_ex, k_lab), "sequences")
P.add("bstar_h200", roofline.compute_bound_batch(h200), "sequences")
# the first batch of the table where a shorter draft beats k = K (the text shows what it gains there)
b_turn = P.add("b_turn", next(b for b in BATCHES if _best_k(g4090, alpha_ex, b) < k_lab), "sequences")
P.add("best_k_turn", _best_k(g4090, alpha_ex, b_turn), "tokens")
P.add("sigma_turn_best", _speedup(g4090, alpha_ex, _best_k(g4090, alpha_ex, b_turn), b_turn), "1")
P.add("sigma_turn_k", _speedup(g4090, alpha_ex, k_lab, b_turn), "1")

# --- 5. the draft's memory comes out of the KV budget (RTX 4090, lesson 1A's budget) ---
kappa = P.add("kappa", transformer.kv_bytes_per_token(cfg, 2), "B/token")
kappa_d = P.add("kappa_d", transformer.kv_bytes_per_token(dcfg, 2), "B/token")
W_d = P.add("W_d", transformer.weight_bytes(dcfg, 2), "B")
kv_budget = P.add("kv_budget", memory.default_kv_budget_bytes("RTX 4090", transformer.weight_bytes(cfg, 2)), "B")
kv_tokens = P.add("kv_tokens", memory.kv_capacity_tokens(kv_budget, kappa), "tokens")
kv_tokens_draft = P.add("kv_tokens_draft", memory.kv_capacity_tokens(kv_budget - W_d, kappa + kappa_d), "tokens")
P.add("kv_loss_share", 1 - kv_tokens_draft / kv_tokens, "1")

# --- problem 2: reading the counters ---
p2_drafts = P.add("p2_drafts", 1000, "count")
p2_per_pos = P.add("p2_per_pos", [800, 620, 480, 370], "record")  # accepted at positions 0..3, k = 4
p2_k = P.add("p2_k", len(p2_per_pos), "tokens")
p2_drafted = P.add("p2_drafted", p2_k * p2_drafts, "tokens")
p2_accepted = P.add("p2_accepted", sum(p2_per_pos), "tokens")
P.add("p2_rate", p2_accepted / p2_drafted, "1")
P.add("p2_mean_len", 1 + p2_accepted / p2_drafts, "tokens")
P.add("p2_first", p2_per_pos[0] / p2_drafts, "1")
P.add("p2_last_cond", p2_per_pos[-1] / p2_per_pos[-2], "1")
P.add("p2_iid", roofline.expected_tokens_per_step(p2_per_pos[0] / p2_drafts, p2_k), "tokens")

# --- problem 3: where the gain ends on each GPU; the H200 floor ---
tau_h, tau_d_h, tau_v_h = roofline.spec_step_floors(h200, cfg, dcfg, ctx, 1, k_lab)
P.add("tau_h200", tau_h, "s")
P.add("rho_h200", tau_d_h / tau_h, "1")
P.add("sigma_h200", _speedup(h200, alpha_ex, k_lab), "1")

# --- the lab ---
P.add("lab_output_tokens", LAB.OUTPUT_TOKENS, "tokens")
P.add("lab_steps_full", roofline.spec_decode_steps(LAB.OUTPUT_TOKENS, k_lab), "count")
P.add("lab_batches", ", ".join(map(str, LAB.BATCHES)), "text")
P.add("lab_pattern", LAB.PATTERN_TOKENS, "tokens")
P.add("lab_prompt", LAB.PROMPT_TOKENS, "tokens")


# --- figures, drawn at build time, each with its text alternative ---
def _alpha_k_plot(ax) -> None:
    for row in speed_rows:
        ax.plot(KS, row["speedups"], marker="o", label=f"α = {row['alpha']:g}")
    ax.axhline(1, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("draft tokens per step, k")
    ax.set_ylabel("speedup σ (floor model)")
    ax.set_title(f"{registry.COURSE_MODEL} + {DRAFT.split('/')[-1]} draft, {g4090.name}, B = 1")
    ax.legend(fontsize=8)


def _batch_plot(ax) -> None:
    batches = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256]
    for g, color in ((g4090, "tab:blue"), (h200, "tab:red")):
        ax.plot(batches, [_speedup(g, alpha_ex, k_lab, b) for b in batches], color=color, label=g.name)
    ax.axhline(1, color="grey", lw=0.8, ls=":")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch B (sequences per step)")
    ax.set_ylabel("speedup σ (floor model)")
    ax.set_title(f"α = {alpha_ex:g}, k = {k_lab}: speculation pays at small batches only")
    ax.legend(fontsize=8)


P.figure(
    "fig_alpha_k",
    _alpha_k_plot,
    alt=f"a line chart of the speedup against k from 1 to {KS[-1]}, one line per acceptance rate. At α = "
    f"{ALPHAS[0]:g} the best is ×{fmt.fixed(max(speed_rows[0]['speedups']), 2)} at k = {speed_rows[0]['best_k']}; at "
    f"α = {alpha_ex:g}, ×{fmt.fixed(max(speed_rows[2]['speedups']), 2)} at k = {speed_rows[2]['best_k']}; at α = "
    f"{ALPHAS[-1]:g}, ×{fmt.fixed(max(speed_rows[-1]['speedups']), 2)} at k = {speed_rows[-1]['best_k']}. A line "
    "rises, flattens and falls again once the extra draft steps cost more than the tokens they add"
    + ("; the highest ones still rise at the last k shown." if speed_rows[-1]["best_k"] == KS[-1] else "."),
)
P.figure(
    "fig_batch",
    _batch_plot,
    alt=f"a line chart of the speedup against the batch, log scale, at α = {alpha_ex:g} and k = {k_lab}. On the "
    f"{g4090.name} it starts at ×{fmt.fixed(batch_rows[0]['s4090'], 2)} at B = 1 and falls below 1 from B = "
    f"{_break_even(g4090, alpha_ex, k_lab)}; on the {h200.name} it starts at "
    f"×{fmt.fixed(batch_rows[0]['sh200'], 2)} and falls below 1 from B = {_break_even(h200, alpha_ex, k_lab)}.",
)

SYMBOLS: list[str | tuple[str, str]] = [
    "k",
    "v",
    "pi",
    "q",
    "alpha",
    "E_k",
    "tau",
    "tau_d",
    "tau_v",
    "tau_0",
    "rho",
    "sigma",
    "B",
    "Bstar",
]
P.symbols(SYMBOLS)

P.facts(
    "model-qwen-qwen2-5-0-5b-instruct",
    "gpu-h200",
    "vllm-spec-methods",
    "vllm-spec-greedy-accept",
    "vllm-spec-equal-vocab",
    "vllm-spec-ngram",
    "vllm-spec-synthetic",
    "vllm-cpu-no-synthetic",
    "vllm-spec-counters",
    "vllm-bench-serve-itl-per-chunk",
    "kernel-launch-cost",
    "kernels-per-decode-step",
    "decode-bandwidth-share",
)
