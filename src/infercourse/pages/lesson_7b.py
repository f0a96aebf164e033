"""Values of lesson 7B (mixture of experts and expert parallelism): total against active parameters, the experts a
batch reaches, what that does to a decode step's bytes and to the batch that reaches the ridge point, what expert
parallelism sends against tensor parallelism, and the committed CPU receipt of lab 7B.

Every number the page shows is bound here once, with its unit, from the registry, the formula modules and the
committed receipts (tests/lessons/test_7b.py holds the snippet's formula to roofline's); the page only looks the
names up and formats them.
"""

from __future__ import annotations

from infercourse import fmt, memory, registry, roofline, snippets, transformer
from infercourse.labs import expert_coverage as lab
from infercourse.pages import lesson_values

LAB = lab.LAB  # the lab's settings, read from its script

P = lesson_values(__name__)

g4090 = P.add("g4090", registry.gpu("RTX 4090"), "record")
NAMES = {"olmoe": LAB.MODEL, "qwen3": "Qwen/Qwen3-30B-A3B", "ds": "deepseek-ai/DeepSeek-V3"}
SHORT = {"olmoe": "OLMoE-1B-7B", "qwen3": "Qwen3-30B-A3B", "ds": "DeepSeek-V3"}  # table rows, narrow on a phone
cfgs = {key: registry.model(name).config for key, name in NAMES.items()}
parts = {key: transformer.moe_param_breakdown(c) for key, c in cfgs.items()}
ek = {key: transformer.moe_experts(c) for key, c in cfgs.items()}

# --- 1. total against active ---
q3 = parts["qwen3"]
P.add("q3_total", q3["total"], "params")
P.add("q3_active", q3["active"], "params")
P.add("q3_bf16", 2 * q3["total"], "B")
P.add("q3_active_share", q3["active"] / q3["total"], "1")
E_q3, k_q3 = P.add("E_q3", ek["qwen3"][0], "count"), P.add("k_q3", ek["qwen3"][1], "count")

# --- 3. the parameter table, from each config.json ---
P.add(
    "param_rows",
    [
        {
            "short": SHORT[key],
            "E": ek[key][0],
            "k": ek[key][1],
            "total": parts[key]["total"],
            "active": parts[key]["active"],
            "share": parts[key]["active"] / parts[key]["total"],
            "card": registry.model(NAMES[key]).card_params,
            "bf16": 2 * parts[key]["total"],
        }
        for key in NAMES
    ],
    "record",
)
ds = parts["ds"]
P.add("ds_shared", ds["shared_experts"], "params")
P.add("ds_dense_layers", cfgs["ds"]["num_hidden_layers"] - ds["moe_layers"], "count")
P.add("ds_routed_share", ds["routed_experts"] / ds["total"], "1")
P.add("ds_fp8", transformer.fp8_weight_bytes(cfgs["ds"]), "B")

# --- experts a batch reaches: E (1 - (1 - k/E)^B), and the snippet's formula agrees ---
coverage_batches = (1, 8, 64, 256)
P.add("cov_batches", list(coverage_batches), "record")
cov = {key: [roofline.expected_experts_touched(*ek[key], b) for b in coverage_batches] for key in NAMES}
P.add(
    "cov_rows",
    [{"short": SHORT[key], "E": ek[key][0], "k": ek[key][1], "counts": cov[key]} for key in NAMES],
    "record",
)
E_ol, k_ol = P.add("E_ol", ek["olmoe"][0], "count"), P.add("k_ol", ek["olmoe"][1], "count")
P.add("ol_8", roofline.expected_experts_touched(E_ol, k_ol, 8), "1")  # experts, a real-valued expectation
P.add("ol_sd_8", roofline.experts_touched_sd(E_ol, k_ol, 8), "1")
P.add("ol_miss_64", (1 - k_ol / E_ol) ** 64, "1")

# --- a decode step's bytes and floor: OLMoE on the RTX 4090, against the course's dense model ---
ol_cfg, dense_cfg = cfgs["olmoe"], registry.model(registry.COURSE_MODEL).config
context = LAB.PROMPT_LEN + LAB.OUTPUT_LEN // 2
read_1 = P.add("read_1", 2 * roofline.moe_step_params(ol_cfg, k_ol)[0], "B")
read_all = P.add("read_all", 2 * roofline.moe_step_params(ol_cfg, E_ol)[0], "B")
floor = {b: sum(roofline.moe_decode_kernel_floors(g4090, ol_cfg, context, b)) for b in (1, 64)}
dense = {b: roofline.decode_step_floor(g4090, dense_cfg, context, b) for b in (1, 64)}
P.add("ol_floor_1", floor[1], "s")
P.add("ol_floor_64", floor[64], "s")
P.add("ol_growth", floor[64] / floor[1], "1")
P.add("dense_growth", dense[64] / dense[1], "1")
P.add("dense_model", registry.COURSE_MODEL, "text")
P.add("moe_step_growth", lab.MOE_STEP_GROWTH, "1")
P.add("context", context, "tokens")

# --- the batch at which the experts' matmuls reach the ridge point ---
b_star = P.add("b_star", roofline.compute_bound_batch(g4090), "tokens")
h200 = P.add("h200", registry.gpu("H200"), "record")
b_star_h200 = P.add("b_star_h200", roofline.compute_bound_batch(h200), "tokens")
P.add(
    "b_star_rows",
    [
        {
            "short": SHORT[key],
            "ratio": ek[key][0] / ek[key][1],
            "b": b_star * ek[key][0] / ek[key][1],
            "b_h200": b_star_h200 * ek[key][0] / ek[key][1],
        }
        for key in NAMES
    ],
    "record",
)

# --- expert parallelism against tensor parallelism, per MoE layer and GPU (DeepSeek-V3, one 8-GPU node) ---
T = P.add("ep_gpus", 8, "count")  # an 8-GPU node, the unit DeepSeek-V3's deployments and vLLM's examples start from
ep_tokens = P.add("ep_tokens", 2048, "tokens")  # one step's tokens over the whole node
d_ds = P.add("d_ds", cfgs["ds"]["hidden_size"], "count")
k_ds = P.add("k_ds", ek["ds"][1], "count")
a2a = P.add("a2a", roofline.ep_all_to_all_bytes(ep_tokens, k_ds, T, d_ds), "B")
allreduce = P.add("allreduce", 2 * roofline.ring_allreduce_bytes(ep_tokens * d_ds * 2, T), "B")
P.add("ep_over_tp", a2a / allreduce, "1")
P.add("a2a_fp8", roofline.ep_all_to_all_bytes(ep_tokens, k_ds, T, d_ds, 1.5), "B")  # FP8 out, BF16 back
P.add("a2a_gather", roofline.ring_allreduce_bytes(ep_tokens * d_ds * 2, T), "B")  # vLLM's default exchange
kappa_ds = P.add("kappa_ds", transformer.kv_bytes_per_token(cfgs["ds"]), "B/token")

# --- the lab's model on a 24 GB card, and the 4-bit alternative ---
ol = parts["olmoe"]
P.add("lab_model", LAB.MODEL, "text")
ol_weights = P.add("ol_weights", 2 * ol["total"], "B")
P.add("ol_total", ol["total"], "params")
P.add("ol_active", ol["active"], "params")
P.add("ol_layers", ol["moe_layers"], "count")
kappa_ol = P.add("kappa_ol", transformer.kv_bytes_per_token(ol_cfg), "B/token")
budget_ol = memory.default_kv_budget_bytes("RTX 4090", ol_weights)
ol_kv_tokens = memory.kv_capacity_tokens(budget_ol, kappa_ol, registry.VLLM_DEFAULT_BLOCK_SIZE)
P.add("ol_kv_tokens", ol_kv_tokens, "tokens")
P.add("ol_max_seqs", ol_kv_tokens // context, "sequences")
q3_4bit = P.add("q3_4bit", transformer.awq_weight_bytes(cfgs["qwen3"], registry.AWQ_GROUP_SIZE), "B")
budget_q3 = memory.default_kv_budget_bytes("RTX 4090", q3_4bit)
kappa_q3 = transformer.kv_bytes_per_token(cfgs["qwen3"])
P.add("q3_kv_tokens", memory.kv_capacity_tokens(budget_q3, kappa_q3, registry.VLLM_DEFAULT_BLOCK_SIZE), "tokens")
P.add("lab_prompt", LAB.PROMPT_LEN, "tokens")
P.add("lab_output", LAB.OUTPUT_LEN, "tokens")
P.add("lab_steps", LAB.OUTPUT_LEN - 1, "count")
P.add("lab_bmax", max(LAB.BATCHES), "sequences")
P.add("z_bound", lab.Z_BOUND, "1")


# --- figure: a decode step's floor against the batch, MoE against dense ---
fig_batches = [1, 2, 4, 8, 16, 32, 64, 128, 256]
P.add("fig_bmax", max(fig_batches), "sequences")


def _floor_plot(ax) -> None:
    batches = fig_batches
    moe = [sum(roofline.moe_decode_kernel_floors(g4090, ol_cfg, context, b)) * 1e3 for b in batches]
    every = [sum(roofline.moe_decode_kernel_floors(g4090, ol_cfg, context, b, E_ol)) * 1e3 for b in batches]
    few = [sum(roofline.moe_decode_kernel_floors(g4090, ol_cfg, context, b, k_ol)) * 1e3 for b in batches]
    ax.semilogx(batches, moe, "o-", color="tab:blue", label=f"{LAB.MODEL}: uniform routing")
    ax.semilogx(batches, every, ":", color="tab:blue", label=f"the same, all {E_ol} experts read")
    ax.semilogx(batches, few, "--", color="tab:blue", label=f"the same, only {k_ol} experts read")
    ax.semilogx(
        batches,
        [roofline.decode_step_floor(g4090, dense_cfg, context, b) * 1e3 for b in batches],
        "s-",
        color="tab:red",
        label=f"{registry.COURSE_MODEL} (dense)",
    )
    ax.set_xlabel("sequences in the batch, B")
    ax.set_ylabel(f"decode step floor on the {g4090.name} (ms)")
    ax.set_ylim(bottom=0)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)


P.figure(
    "fig_floor",
    _floor_plot,
    alt=f"a line chart on a logarithmic batch axis. {LAB.MODEL}'s step floor on the {g4090.name} rises from "
    f"{fmt.ms(floor[1])} at one sequence to {fmt.ms(floor[64])} at 64, between a dashed line that reads only "
    f"{k_ol} experts per layer and a dotted one that reads all {E_ol}, which it meets from about 32 sequences "
    f"on; {registry.COURSE_MODEL}'s floor barely moves, from {fmt.ms(dense[1])} to {fmt.ms(dense[64])}.",
)

# --- the committed CPU receipt: exact router counts on the tiny MoE ---
receipt = P.cpu_receipt("expert_coverage")
P.add("cpu_E", receipt["settings"]["experts"], "count")
P.add("cpu_k", receipt["settings"]["top_k"], "count")
P.add("cpu_prompt", receipt["settings"]["prompt_len"], "tokens")
P.add("cpu_output", receipt["settings"]["output_len"], "tokens")
P.add("cpu_steps", receipt["settings"]["output_len"] - 1, "count")

SYMBOLS: list[str | tuple[str, str]] = [
    "n_e",
    "k_e",
    "f_e",
    "L_moe",
    "d",
    "N",
    "N_act",
    "n_touch",
    "B",
    "b",
    "kappa",
    "S",
    "Bstar",
    "R",
    "T_ep",
    "T_tp",
]
P.symbols(SYMBOLS)

P.facts(
    "model-allenai-olmoe-1b-7b-0924-instruct",
    "model-qwen-qwen3-30b-a3b",
    "model-deepseek-ai-deepseek-v3",
    "vllm-enable-expert-parallel",
    "vllm-ep-size",
    "vllm-all2all-backend",
    "vllm-eplb",
    "vllm-moe-router-gate",
    "vllm-return-routed-experts",
    "vllm-block-size",
)

P.figure("fig_coverage", snippets.load("lesson_7b/moe_routing.py").plot, figsize=(7, 4.2))  # the snippet's plot
