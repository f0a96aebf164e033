"""Values of lesson 8A (serving a fleet): the prefix hits each routing policy leaves, the hash's luck, cold starts
from three sources, LoRA adapter bytes, what sampling and a grammar mask add to a step, KV offload against
recompute, the cost of a million tokens on the cards AutoDL rents, and the committed CPU receipt of lab 8A.

Every number the page shows is bound here once, with its unit, from the registry, the formula modules and the
committed receipts (tests/lessons/test_8a.py checks the headline values by hand); the page only looks the names
up and formats them.
"""

from __future__ import annotations

from infercourse import memory, registry, roofline, transformer
from infercourse.labs import fleet_routing as lab
from infercourse.pages import lesson_values

LAB = lab.LAB  # the lab's settings, read from its script

P = lesson_values(__name__)

cfg = registry.model(registry.COURSE_MODEL).config
g4090 = P.add("g4090", registry.gpu("RTX 4090"), "record")
N = transformer.param_count(cfg)
W = P.add("W", 2 * N, "B")  # BF16 weights as loaded
kappa = P.add("kappa", transformer.kv_bytes_per_token(cfg), "B/token")

# --- 1. routing: the lab's workload, predicted ---
pred = lab.predicted()
P.add("lab_model", LAB.MODEL, "text")
P.add("n_grp", LAB.GROUPS, "count")
P.add("n_ask", LAB.ROUNDS, "count")
n_rep = P.add("n_rep", LAB.REPLICAS, "count")
P.add("prefix_tokens", LAB.PREFIX_TOKENS, "tokens")
P.add("suffix_tokens", LAB.SUFFIX_TOKENS, "tokens")
P.add("block", registry.VLLM_DEFAULT_BLOCK_SIZE, "tokens")
P.add("c_hit", pred["cached"], "tokens")
total_prompt = LAB.GROUPS * LAB.ROUNDS * pred["prompt"]
P.add("total_prompt", total_prompt, "tokens")
P.add(
    "policy_rows",
    [
        {
            "policy": policy,
            "m": memory.prefix_computations(policy, LAB.GROUPS, LAB.ROUNDS, LAB.REPLICAS),
            "hits": hits,
            "rate": hits / total_prompt,
        }
        for policy, hits in pred["hits"].items()
    ],
    "record",
)
P.add("miss_s", pred["miss_s"], "s")
P.add("hit_s", pred["hit_s"], "s")
P.add("hash_all_one", n_rep * (1 / n_rep) ** LAB.GROUPS, "1")  # every prefix on the same one of the replicas
P.add("router_version", registry.VLLM_ROUTER_VERSION, "text")
P.add("balance_abs", registry.VLLM_ROUTER_CACHE_AWARE["balance_abs_threshold"], "count")
P.add("balance_rel", registry.VLLM_ROUTER_CACHE_AWARE["balance_rel_threshold"], "1")
P.add("session_header", LAB.SESSION_HEADER, "text")

# --- 2. autoscaling and cold start: the course model's weights from three sources ---
P.add(
    "cold_rows",
    [{"where": where, "rate": rate, "t": W / (rate * 1e9)} for where, rate in registry.COLD_START_RATES_GB_S.items()],
    "record",
)
price_4090 = P.add("price_4090", registry.AUTODL_CNY_PER_HOUR["RTX 4090"], "CNY")
P.add("idle_day", 24 * price_4090, "CNY")

# --- 3. multi-LoRA: adapter bytes ---
r16 = P.add("r16", 16, "count")  # vLLM's default max_lora_rank (fact vllm-max-lora-rank)
lora16 = P.add("lora16", transformer.lora_adapter_bytes(cfg, r16), "B")
P.add("lora64", transformer.lora_adapter_bytes(cfg, 64), "B")
P.add("lora_share", lora16 / W, "1")
P.add("adapters_per_gib", 2**30 // lora16, "count")

# --- 4. sampling and structured output, per decode step ---
V = P.add("V", cfg["vocab_size"], "count")
b_big = P.add("b_big", 256, "sequences")  # vLLM's default max_num_seqs on a 24 GB card
P.add("logits_bytes", b_big * V * 4, "B")  # float32 logits, one row per sequence
P.add("logits_share", b_big * V * 4 / W, "1")
P.add("mask_bytes", 4 * -(-V // 32), "B")  # int32 words, one bit per token

# --- 5. KV offload: bring a sequence's cache back, or prefill it again ---
S_off = P.add("S_off", 8192, "tokens")
link = P.add("pcie", registry.COLD_START_RATES_GB_S["host memory (PCIe 4.0 x16)"], "1")  # GB/s, pinned copies
t_load = P.add("t_load", kappa * S_off / (link * 1e9), "s")
t_recompute = P.add("t_recompute", roofline.prefill_floor(g4090, cfg, S_off), "s")
P.add("offload_speedup", t_recompute / t_load, "1")
P.add("kv_off_bytes", kappa * S_off, "B")

# --- 6. cost per million tokens, from the decode and prefill floors ---
PROMPT, OUTPUT = 1024, 256  # the request the table prices: a 1,024-token prompt, 256 tokens out
P.add("cost_prompt", PROMPT, "tokens")
P.add("cost_output", OUTPUT, "tokens")
context = PROMPT + OUTPUT // 2  # mean context over the decode steps


def _cost_row(card: str, price_cny: float, where: str) -> dict:
    """One card's decode and prefill ceilings for the course model and their cost per million tokens."""
    g = registry.gpu(card)
    budget = memory.default_kv_budget_bytes(card, W)
    batch = min(b_big, memory.max_sequences(budget, kappa, PROMPT + OUTPUT))
    floor = roofline.decode_step_floor(g, cfg, context, batch)
    high = roofline.step_band(floor, cfg["num_hidden_layers"])[1]
    out_fast, out_slow = batch / floor, batch / high  # tokens/s: at the floor, at the top of the band
    prefill_tok_s = PROMPT / roofline.prefill_floor(g, cfg, PROMPT)
    price_usd = price_cny / registry.CNY_PER_USD
    return {
        "card": card,
        "where": where,
        "price": price_cny,
        "ridge": roofline.ridge_point(g),
        "batch": batch,
        "out_fast": out_fast,
        "cny_out_low": roofline.cost_per_million_tokens(price_cny, out_fast),
        "cny_out_high": roofline.cost_per_million_tokens(price_cny, out_slow),
        "usd_out_low": roofline.cost_per_million_tokens(price_usd, out_fast),
        "usd_out_high": roofline.cost_per_million_tokens(price_usd, out_slow),
        "cny_in": roofline.cost_per_million_tokens(price_cny, prefill_tok_s),
    }


cost_rows = [_cost_row(card, price, "AutoDL") for card, price in registry.AUTODL_CNY_PER_HOUR.items()]
cost_rows.append(_cost_row("H200", registry.CLOUD_H200_USD_PER_HOUR * registry.CNY_PER_USD, "AWS"))
P.add("cost_rows", cost_rows, "record")
P.add("cheapest", min(cost_rows, key=lambda r: r["cny_out_low"])["card"], "text")
P.add("cny_per_usd", registry.CNY_PER_USD, "1")
h20 = next(r for r in cost_rows if r["card"] == "H20")
P.add("h20_ridge", h20["ridge"], "1")
P.add("ridge_4090", roofline.ridge_point(g4090), "1")
row_4090 = cost_rows[0]
P.add(
    "x_4090",
    row_4090["out_fast"],
    "tokens/s",
    demand=roofline.decode_demand(
        g4090, cfg, row_4090["batch"], context, row_4090["batch"] / row_4090["out_fast"], "8A: decode ceiling"
    ),
)
P.add("b_4090", row_4090["batch"], "sequences")

# --- the committed CPU receipt: exact placements and hits on the tiny model ---
receipt = P.cpu_receipt("fleet_routing")
s = receipt["settings"]
P.add("cpu_prefix", s["prefix_tokens"], "tokens")
P.add("cpu_block", s["block_size"], "tokens")
P.add(
    "cpu_hits",
    {p: sum(r["cached_tokens"] for r in receipt["results"] if r["policy"] == p) for p in LAB.POLICIES},
    "record",
)

SYMBOLS: list[str | tuple[str, str]] = [
    "N",
    "n_grp",
    "n_ask",
    "n_rep",
    "m_rep",
    "C",
    "S",
    "W",
    "beta_src",
    "t_cold",
    "r_lora",
    "d_in",
    "d_out",
    "L",
    "b",
    "V",
    "B",
    "kappa",
    "t_load",
    "beta_link",
    "P",
    "beta",
    "R",
    "tau",
    "tau_0",
    "X",
    "p_hr",
]
P.symbols(SYMBOLS)

P.facts(
    "vllm-router-cache-aware",
    "vllm-dp-load-balancer",
    "vllm-max-loras",
    "vllm-max-lora-rank",
    "vllm-max-cpu-loras",
    "vllm-structured-output-bitmask",
    "vllm-flashinfer-sampler",
    "vllm-kv-offloading-size",
    "autodl-prices",
    "cloud-h200-price",
    "cny-per-usd",
    "cold-start-rates",
    "gpu-rtx-4090d",
    "gpu-l20",
    "gpu-h20",
    "gpu-a800",
    "gpu-h200",
    "vllm-block-size",
)
