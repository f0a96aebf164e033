"""Values of lesson 7A (tensor parallelism): what each rank holds, the all-reduces a decode step pays,
the step model t(T) on two RTX 4090s (PCIe) and two H200s (NVLink), and the scaling-efficiency figure.
"""

from __future__ import annotations

from infercourse import fmt, labs, memory, registry, roofline, snippets, transformer
from infercourse.labs import tensor_parallel as tp_lab
from infercourse.pages import lesson_values

P = lesson_values(__name__)

MODEL = registry.COURSE_MODEL
cfg = registry.model(MODEL).config
L = P.add("L", cfg["num_hidden_layers"], "count")
d = P.add("d", cfg["hidden_size"], "count")
P.add("h", cfg["num_attention_heads"], "count")
h_kv = P.add("h_kv", cfg["num_key_value_heads"], "count")
P.add("I", cfg["intermediate_size"], "count")
g4090, h200 = P.add_cards()
link_4090_name, link_4090 = registry.TP_LINKS["RTX 4090"]
link_h200_name, link_h200 = registry.TP_LINKS["H200"]
P.add("link_4090_name", link_4090_name, "text")
P.add("link_h200_name", link_h200_name, "text")
P.add("beta_4090", f"{link_4090:g} GB/s", "text")  # the registry's figure, as the page writes it
P.add("beta_h200", f"{link_h200:g} GB/s", "text")
P.add("beta_h200_both", f"{2 * link_h200:g} GB/s", "text")
# alpha per ring step: the lab's fitted value where a committed GPU receipt has the all-reduce sweep, else the
# course's labelled assumption (registry.TP_HOP_LATENCY_US)
fitted = tp_lab.fitted_alpha(labs.committed_receipts("tensor_parallel"))


def _alpha(gpu: str) -> tuple[float, str]:
    if gpu in fitted:
        alpha, receipt = fitted[gpu]
        machine, day = receipt["machine"]["name"], receipt["date_utc"][:10]
        return alpha, f"a measured (lab 7A's all-reduce fit on {machine}, {day})"
    return registry.TP_HOP_LATENCY_US[gpu] * 1e-6, "an assumed"


alpha_4090, basis_4090 = _alpha("RTX 4090")
alpha_h200, basis_h200 = _alpha("H200")
P.add("alpha_4090", alpha_4090, "s")
P.add("alpha_h200", alpha_h200, "s")
P.add("alpha_4090_basis", basis_4090, "text")
P.add("alpha_h200_basis", basis_h200, "text")
P.add("hbm_4090", f"{g4090.bandwidth_gb_s:g} GB/s", "text")

# --- the split: per-rank linear weights at T = 2, all-reduces per step ---
rank2 = transformer.tp_rank_linear_elements(cfg, 2)
whole = transformer.tp_rank_linear_elements(cfg, 1)
P.add("qkv_rank2", rank2["qkv_proj"], "params")
P.add("down_rank2", rank2["down_proj"], "params")
P.add("linear_whole", sum(whole.values()), "params")
P.add("linear_rank2", sum(rank2.values()), "params")
n_ar = P.add("n_ar", 2 * L + 1, "count")  # two per layer and the vocabulary-parallel embedding's
P.add("vocab", cfg["vocab_size"], "count")

# --- what TP buys: weights and KV per GPU ---
W = transformer.weight_bytes(cfg, 2)
P.add("W", W, "B")
P.add("Mb", roofline.matmul_params(cfg) * 2, "B")  # what a decode step reads: every weight but the embedding
P.add("W_rank2", W / 2, "B")
kappa = P.add("kappa", transformer.kv_bytes_per_token(cfg, 2), "B/token")
P.add("kappa_rank2", kappa // 2, "B/token")
P.add("kappa_rank4", kappa // 4, "B/token")
P.add("tp_sizes", ", ".join(map(str, transformer.tp_sizes(cfg))), "text")

# --- what TP costs: messages and one all-reduce ---
m1 = P.add("m1", 1 * d * 2, "B")
m64 = P.add("m64", 64 * d * 2, "B")
ar1_4090 = P.add("ar1_4090", roofline.ring_allreduce_time(m1, 2, link_4090, alpha_4090), "s")
ar64_4090 = P.add("ar64_4090", roofline.ring_allreduce_time(m64, 2, link_4090, alpha_4090), "s")
P.add("ar1_h200", roofline.ring_allreduce_time(m1, 2, link_h200, alpha_h200), "s")
P.add("ar_growth_4090", ar64_4090 / ar1_4090, "1")
P.add("gather1_4090", roofline.logits_gather_time(cfg, 1, 2, link_4090, alpha_4090), "s")
P.add("ar64_h200", roofline.ring_allreduce_time(m64, 2, link_h200, alpha_h200), "s")
# the batch where T = 2's bandwidth term m / beta equals its latency term 2 alpha: B = 2 alpha beta / (2 d)
P.add("B_cross_4090", 2 * alpha_4090 * link_4090 * 1e9 / (2 * d), "sequences")
P.add("B_cross_h200", 2 * alpha_h200 * link_h200 * 1e9 / (2 * d), "sequences")

# --- the step model t(T) at context S ---
S = P.add("S", 1024, "tokens")


def _step(g, link, alpha, batch, ranks, config=cfg):
    compute, comm = roofline.tp_decode_step(g, config, S, batch, ranks, link, alpha)
    return compute, comm, compute + comm


rows = []
for g, link, alpha in ((g4090, link_4090, alpha_4090), (h200, link_h200, alpha_h200)):
    for batch in (1, 64):
        t1 = _step(g, link, alpha, batch, 1)[2]
        compute, comm, t2 = _step(g, link, alpha, batch, 2)
        rows.append(
            {
                "gpu": g.name,
                "B": batch,
                "t1": t1,
                "compute2": compute,
                "comm2": comm,
                "t2": t2,
                "speedup": t1 / t2,
                "eta": t1 / (2 * t2),
            }
        )
step_rows = P.add("step_rows", rows, "record")
r4090_1 = step_rows[0]
for key, unit in (("t1", "s"), ("compute2", "s"), ("comm2", "s"), ("t2", "s"), ("speedup", "1"), ("eta", "1")):
    P.add(f"{key}_4090", r4090_1[key], unit)
P.add("comm_share_4090", r4090_1["comm2"] / r4090_1["t2"], "1")

# --- a model that does not fit one RTX 4090: Llama-2-13B in BF16 ---
big = "meta-llama/Llama-2-13b-hf"
P.add("big", big, "text")
big_cfg = registry.model(big).config
W_big = P.add("W_big", transformer.weight_bytes(big_cfg, 2), "B")
P.add("D_4090", memory.device_total_bytes("RTX 4090"), "B")
P.add("W_big_rank2", W_big / 2, "B")
big_t2 = _step(g4090, link_4090, alpha_4090, 1, 2, big_cfg)
P.add("big_compute2", big_t2[0], "s")
P.add("big_comm2", big_t2[1], "s")
P.add("big_t2", big_t2[2], "s")
P.add("big_n_ar", 2 * big_cfg["num_hidden_layers"] + 1, "count")

# --- prefill under TP: TTFT's floor, compute halved, the collectives carry S d 2 bytes each ---
PROMPTS = (512, 2048, 8192)
prompt_short, prompt_2k, prompt_long = (
    P.add(name, s, "tokens") for name, s in zip(("prompt_short", "prompt_2k", "prompt_long"), PROMPTS, strict=True)
)
prefill_rows = []
for g, link, alpha in ((g4090, link_4090, alpha_4090), (h200, link_h200, alpha_h200)):
    for prompt in PROMPTS:
        ttft1 = sum(roofline.tp_prefill_step(g, cfg, prompt, 1, link, alpha))
        compute, comm = roofline.tp_prefill_step(g, cfg, prompt, 2, link, alpha)
        prefill_rows.append(
            {
                "gpu": g.name,
                "S": prompt,
                "ttft1": ttft1,
                "compute2": compute,
                "comm2": comm,
                "ttft2": compute + comm,
                "speedup": ttft1 / (compute + comm),
                "comm_vs_compute": comm / compute,
            }
        )
prefill_rows = P.add("prefill_rows", prefill_rows, "record")
p2k = next(r for r in prefill_rows if r["gpu"] == g4090.name and r["S"] == prompt_2k)
P.add("m2k", prompt_2k * d * 2, "B")
P.add("p2k_comm", p2k["comm2"], "s")
P.add("p2k_compute", p2k["compute2"], "s")
P.add("p2k_ratio", p2k["comm_vs_compute"], "1")
_shares_4090 = [r["comm_vs_compute"] for r in prefill_rows if r["gpu"] == g4090.name]
P.add("prefill_share_min", min(_shares_4090), "1")
P.add("prefill_share_max", max(_shares_4090), "1")
P.add("ar2k_4090", roofline.ring_allreduce_time(2048 * d * 2, 2, link_4090, alpha_4090), "s")

# --- problems ---
# P1: efficiency at T = 4 on PCIe (B = 1) for the course model
p1 = _step(g4090, link_4090, alpha_4090, 1, 4)
P.add("p1_compute", p1[0], "s")
P.add("p1_comm", p1[1], "s")
P.add("p1_t4", p1[2], "s")
P.add("p1_eta", r4090_1["t1"] / (4 * p1[2]), "1")
P.add("p1_ar", roofline.ring_allreduce_time(m1, 4, link_4090, alpha_4090), "s")
P.add("p1_gather", roofline.logits_gather_time(cfg, 1, 4, link_4090, alpha_4090), "s")
# P2: replicas vs TP on two RTX 4090s at B = 64 per engine: tokens/s
p2_batch = P.add("p2_batch", 64, "sequences")  # per engine; step_rows[1] is at this batch
p2_all = P.add("p2_all", 2 * p2_batch, "sequences")
r4090_64 = step_rows[1]
P.add("p2_t1", r4090_64["t1"], "s")
P.add("p2_t2", r4090_64["t2"], "s")
P.add(
    "p2_dp_tps",
    p2_all / r4090_64["t1"],
    "tokens/s",
    roofline.decode_demand(g4090, cfg, 64, S, r4090_64["t1"], "each of two replicas at B = 64"),
)
P.add(
    "p2_tp_tps",
    p2_batch / r4090_64["t2"],
    "tokens/s",
    roofline.decode_demand(g4090, cfg, 64, S, r4090_64["t2"], "TP = 2 at B = 64, per card", ranks=2),
)
tp128_t2 = P.add("p2_tp128_t2", _step(g4090, link_4090, alpha_4090, p2_all, 2)[2], "s")
P.add(
    "p2_tp128_tps",
    p2_all / tp128_t2,
    "tokens/s",
    roofline.decode_demand(g4090, cfg, p2_all, S, tp128_t2, "TP = 2 at B = 128, per card", ranks=2),
)
# KV room per card: one replica holds all weights, a TP = 2 rank half of them (lesson 1A's budget and reserve)
reserve = registry.VLLM_NON_KV_RESERVE_GIB * 2**30
D4090 = memory.device_total_bytes("RTX 4090")
P.add("p2_kv_replica", memory.kv_budget_bytes(D4090, W, reserve), "B")
P.add("p2_kv_rank", memory.kv_budget_bytes(D4090, W / 2, reserve), "B")
P.add("p2_kv_need", 64 * S * kappa, "B")
P.add("p2_kv_need_rank", 128 * S * kappa // 2, "B")

# --- the snippet ---
mlp = snippets.load("lesson_7a/megatron_mlp.py")
P.add("snip_D", mlp.D, "count")
P.add("snip_F", mlp.F, "count")

# --- figure: scaling efficiency against T ---
T_GRID = (1, 2, 4)  # the course model's 28 heads allow T = 1, 2, 4, 7, 14, 28; 4 = h_kv


def _eta(g, link, alpha, batch, ranks):
    return _step(g, link, alpha, batch, 1)[2] / (ranks * _step(g, link, alpha, batch, ranks)[2])


def _efficiency_plot(ax) -> None:
    for g, link, alpha, name, color in (
        (h200, link_h200, alpha_h200, link_h200_name, "tab:red"),
        (g4090, link_4090, alpha_4090, link_4090_name, "tab:blue"),
    ):
        for batch, style in ((1, "-o"), (64, "--s")):
            ax.plot(
                T_GRID,
                [_eta(g, link, alpha, batch, t) for t in T_GRID],
                style,
                color=color,
                label=f"{g.name}, {name}, B = {batch}",
            )
    ax.set_xticks(T_GRID)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("tensor-parallel degree T")
    ax.set_ylabel("scaling efficiency t(1) / (T t(T))")
    ax.set_title(f"{MODEL}, decode at S = {S:,}: floors plus assumed all-reduce latency")
    ax.legend(fontsize=8)


P.figure("fig_eta", _efficiency_plot)
eta4 = {
    g.name: _eta(g, link, alpha, 1, 4)
    for g, link, alpha in ((g4090, link_4090, alpha_4090), (h200, link_h200, alpha_h200))
}
P.add(
    "fig_eta_alt",
    "a line chart of scaling efficiency against T = 1, 2, 4, for both GPUs at batch 1 and 64. Efficiency "
    f"falls as T grows on both links, because the {n_ar} all-reduces and the gather per step cost about the "
    f"same while the compute shrinks as 1/T: at batch 1 and T = 4 it is {fmt.pct(eta4[g4090.name])} on the "
    f"{g4090.name}s and {fmt.pct(eta4[h200.name])} on the {h200.name}s. The lines rest on assumed all-reduce "
    "latencies.",
    "text",
)

SYMBOLS: list[str | tuple[str, str]] = [
    "T_tp",
    "L",
    "d",
    "h",
    "h_kv",
    "d_h",
    "f",
    "N",
    "b",
    "B",
    "S",
    "kappa",
    "m_ar",
    "alpha_ar",
    "beta_link",
    "t_ar",
    "t_gather",
    "V",
    "tau",
    "eta",
]
P.symbols(SYMBOLS)
P.facts(
    "model-meta-llama-llama-2-13b-hf",
    "gpu-h200",
    "link-pcie-4-0-x16",
    "link-h200-nvlink",
    "tp-hop-latency",
    "vllm-row-parallel-all-reduce",
    "vllm-vocab-parallel",
    "vllm-kv-head-replication",
    "vllm-custom-all-reduce-needs-p2p",
    "geforce-no-p2p",
    "vllm-qwen2-head-dim",
)
