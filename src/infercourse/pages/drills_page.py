"""Values of the interview-drills page: estimation problems generated from the registry, each answered by the same
functions the lessons use, with its working and the trap it sets.

Every problem is a record ``{"id", "topic", "question", "answer", "working", "trap", "lesson"}`` (``id``: its number
on the page): ``working`` is a
list of lines (each a step with its numbers), ``lesson`` the page (under ``docs/``) that teaches it. The numbers in
the text are formatted here with :mod:`infercourse.fmt`, once; the page only lays the records out.
``tests/test_drills.py`` recomputes a sample of the answers by hand.
"""

from __future__ import annotations

import math

from infercourse import fmt, memory, registry, roofline, transformer
from infercourse.pages import PageValues

P = PageValues("drills.md")

DENSE = ("Qwen/Qwen2.5-7B-Instruct", "meta-llama/Meta-Llama-3-8B", "Qwen/Qwen3-4B", "meta-llama/Llama-2-13b-hf")
MOE = ("allenai/OLMoE-1B-7B-0924-Instruct", "Qwen/Qwen3-30B-A3B")
CARDS = ("RTX 4090", "H200", "A100")
CONTEXT = 1024
"""Tokens of context the decode problems assume (a typical chat turn)."""
PROMPT = 2048
"""Prompt tokens of the prefill problems."""
BATCH = 32
"""Sequences of the batched decode and cost problems."""

TOPICS = ("Memory", "Decode", "Prefill", "Parallelism", "Mixture of experts", "Speculative decoding", "Fleet", "Cost")
"""The page's sections, in the order the course teaches them."""

problems: list[dict] = []


def _add(topic: str, lesson: str, question: str, answer: str, working: list[str], trap: str) -> None:
    if topic not in TOPICS:
        raise ValueError(f"drill topic {topic!r} is not one of {TOPICS}")
    problems.append(
        {
            "topic": topic,
            "lesson": lesson,
            "question": question,
            "answer": answer,
            "working": working,
            "trap": trap,
        }
    )


def _short(name: str) -> str:
    return name.split("/")[-1]


# --- 1. weights and the KV budget (lesson 1A) ---
for name, card in [(m, c) for m in DENSE[:3] for c in ("RTX 4090", "A100")] + [
    (DENSE[3], "RTX 4090"),
    (MOE[1], "H200"),
]:
    cfg, gpu = registry.model(name).config, registry.gpu(card)
    n, weights = transformer.param_count(cfg), transformer.weight_bytes(cfg)
    total = memory.device_total_upper_bytes(card)
    try:
        budget = memory.default_kv_budget_bytes(card, weights)
    except ValueError:  # the weights and the reserve leave nothing: vLLM refuses to start
        budget = 0
    kappa = transformer.kv_bytes_per_token(cfg)
    tokens = memory.kv_capacity_tokens(budget, kappa) if budget else 0
    _add(
        "Memory",
        "lessons/1a-kv-cache.md",
        f"{_short(name)} in BF16 on one {gpu.name} with vLLM's defaults: do the weights fit, and how many tokens of "
        "KV cache are left?",
        f"weights {fmt.gb(weights)}; {fmt.count(tokens)} tokens of KV cache"
        if tokens
        else f"no: {fmt.gb(weights)} of weights leave nothing for the cache, and vLLM refuses to start",
        [
            f"N = {fmt.count(n)} parameters from config.json; W = 2N = {fmt.gb(weights)} ({fmt.gib(weights)})",
            f"the card: {fmt.gib(total)} as CUDA reports it (or the datasheet's), times gpu_memory_utilization "
            f"{registry.VLLM_DEFAULT_GPU_MEMORY_UTILIZATION}, less W and a {registry.VLLM_NON_KV_RESERVE_GIB:g} GiB "
            f"reserve: {fmt.gib(budget)} for the cache",
            f"κ = {fmt.count(kappa)} B per token; whole blocks of {registry.VLLM_DEFAULT_BLOCK_SIZE} tokens: "
            f"{fmt.count(tokens)} tokens",
        ],
        "GB against GiB: a checkpoint's size is in GB (10^9 B), a card's memory as CUDA reports it in GiB "
        "(2^30 B); and the reserve and gpu_memory_utilization come off before the cache gets anything.",
    )

# --- 1b. quantised weights and an FP8 cache on the 24 GB card (lessons 3A, 1A) ---
for name, weights_kind, kv_bytes in (
    ("Qwen/Qwen2.5-7B-Instruct", "awq", 2),
    ("meta-llama/Meta-Llama-3-8B", "bf16", 1),
    ("meta-llama/Llama-2-13b-hf", "awq", 2),
):
    cfg, card = registry.model(name).config, registry.LAB_GPU
    stored: float = (
        transformer.awq_weight_bytes(cfg, registry.AWQ_GROUP_SIZE)
        if weights_kind == "awq"
        else transformer.weight_bytes(cfg)
    )
    budget = memory.default_kv_budget_bytes(card, stored)
    kappa = transformer.kv_bytes_per_token(cfg, kv_bytes)
    tokens = memory.kv_capacity_tokens(budget, kappa)
    setting = "4-bit AWQ weights" if weights_kind == "awq" else "BF16 weights and an FP8 KV cache"
    _add(
        "Memory",
        "lessons/3a-quantisation.md",
        f"{_short(name)} with {setting} on one {card}: how many tokens of KV cache does vLLM allocate?",
        f"{fmt.count(tokens)} tokens",
        [
            (
                f"AWQ stores each linear weight in 4 bits plus a 16-bit scale and a 4-bit zero point per group of "
                f"{registry.AWQ_GROUP_SIZE}; embeddings and head stay 16-bit: {fmt.gb(stored)}"
                if weights_kind == "awq"
                else f"BF16 weights {fmt.gb(stored)}; an FP8 cache stores 1 B per element"
            ),
            f"budget after weights and reserve: {fmt.gib(budget)}; κ = {fmt.count(kappa)} B per token",
            f"whole blocks of {registry.VLLM_DEFAULT_BLOCK_SIZE} tokens: {fmt.count(tokens)} tokens",
        ],
        "4-bit weights are not a quarter of BF16 (the scales, zero points and 16-bit embeddings stay), and an FP8 "
        "cache halves the cache, not the weights.",
    )

# --- 2. kappa: KV bytes per token (lesson 0A, 1A) ---
for name in (*DENSE, "deepseek-ai/DeepSeek-V3"):
    cfg = registry.model(name).config
    kappa = transformer.kv_bytes_per_token(cfg)
    if transformer.is_mla(cfg):
        working = [
            f"MLA caches one latent of kv_lora_rank = {cfg['kv_lora_rank']} plus a RoPE key of "
            f"{cfg['qk_rope_head_dim']} per layer, for all {cfg['num_attention_heads']} heads at once",
            f"κ = L (r + d_rope) b = {cfg['num_hidden_layers']} x {cfg['kv_lora_rank'] + cfg['qk_rope_head_dim']} "
            f"x 2 = {fmt.count(kappa)} B",
        ]
        per_head = cfg["num_hidden_layers"] * cfg["num_attention_heads"] * 2
        per_head *= cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"] + cfg["v_head_dim"]
        trap = (
            "MLA caches no per-head K and V: a full key "
            f"({cfg['qk_nope_head_dim'] + cfg['qk_rope_head_dim']}) and value ({cfg['v_head_dim']}) for each of the "
            f"{cfg['num_attention_heads']} heads would be {fmt.count(per_head)} B, "
            f"{fmt.fixed(per_head / kappa, 0)} times more."
        )
    else:
        d_h, h, h_kv = transformer.head_dim(cfg), cfg["num_attention_heads"], cfg["num_key_value_heads"]
        naive = 2 * cfg["num_hidden_layers"] * h * d_h * 2
        working = [
            f"K and V for each of L = {cfg['num_hidden_layers']} layers, h_kv = {h_kv} key/value heads of "
            f"d_h = {d_h}, 2 B each (BF16)",
            f"κ = 2 L h_kv d_h b = {fmt.count(kappa)} B per token",
        ]
        trap = (
            f"using the {h} query heads instead of the {h_kv} KV heads gives {fmt.count(naive)} B, "
            f"{fmt.fixed(naive / kappa, 0)} times too much (GQA)"
            if h != h_kv
            else "this model has as many KV heads as query heads (no GQA): the cache is large per token"
        )
    _add(
        "Memory",
        "lessons/1a-kv-cache.md",
        f"How many bytes of KV cache does {_short(name)} store per token in BF16?",
        f"{fmt.count(kappa)} B per token",
        working,
        trap,
    )

# --- 3. the decode floor at batch 1 (lessons 0A, 2A) ---
for name, card in [(m, c) for m in DENSE[:2] for c in CARDS]:
    cfg, gpu = registry.model(name).config, registry.gpu(card)
    floor = roofline.decode_step_floor(gpu, cfg, CONTEXT)
    m = roofline.matmul_params(cfg)
    _add(
        "Decode",
        "lessons/2a-roofline.md",
        f"{_short(name)} in BF16 on one {gpu.name}, one sequence with {fmt.count(CONTEXT)} tokens of context: the "
        "least time per output token, and the tokens/s it allows?",
        f"{fmt.ms(floor, 2)} per token, at most {fmt.fixed(1 / floor, 0)} tokens/s",
        [
            f"the matmul weights M = N - the input embedding (a lookup) = {fmt.count(m)}: {fmt.gb(2 * m)} read once",
            f"plus {fmt.count(CONTEXT)} x κ = {fmt.gb(CONTEXT * transformer.kv_bytes_per_token(cfg), 3)} of cache",
            f"at {fmt.count(gpu.bandwidth_gb_s)} GB/s: {fmt.ms(floor, 2)}; the FLOPs take far less",
        ],
        "dividing FLOPs by the peak gives microseconds: batch-1 decode is bound by bytes, and the input "
        "embedding is not read whole (one row per token).",
    )

# --- 4. the batch that reaches the ridge point (lesson 2A, 3A) ---
for card in ("RTX 4090", "H200", "A100"):
    gpu = registry.gpu(card)
    b_star = roofline.compute_bound_batch(gpu)
    working = [
        f"ridge R = peak / bandwidth = {fmt.count(gpu.bf16_dense_tflops * 1e3)} GFLOP/s / "
        f"{fmt.count(gpu.bandwidth_gb_s)} GB/s = {fmt.fixed(roofline.ridge_point(gpu), 1)} FLOP/B",
        "a weight read once serves B tokens at 2 FLOPs each: 2B / b FLOP per byte, b = 2 in BF16",
        f"2B / b = R: B* = R b / 2 = {fmt.fixed(b_star, 1)}",
    ]
    if card in registry.FP8_DENSE_TFLOPS:
        fp8 = roofline.compute_bound_batch(gpu, 1, registry.FP8_DENSE_TFLOPS[card])
        working.append(f"W8A8 FP8: b = 1 and the FP8 peak: B* = {fmt.fixed(fp8, 1)}")
    _add(
        "Decode",
        "lessons/2a-roofline.md",
        f"At what batch do a BF16 model's decode matmuls reach the {gpu.name}'s ridge point, and which model is it "
        "for?",
        f"B* = {fmt.fixed(b_star, 1)} sequences, for every model",
        working,
        "B* does not depend on the model: both FLOPs and bytes scale with the weights.",
    )

# --- 5. the prefill floor (lesson 0A, 4B) ---
for name, card in (("Qwen/Qwen2.5-7B-Instruct", "RTX 4090"), ("Qwen/Qwen2.5-7B-Instruct", "H200"), (DENSE[1], "A100")):
    cfg, gpu = registry.model(name).config, registry.gpu(card)
    floor = roofline.prefill_floor(gpu, cfg, PROMPT)
    _add(
        "Prefill",
        "lessons/0a-prefill-decode.md",
        f"The least TTFT of a {fmt.count(PROMPT)}-token prompt to {_short(name)} on one {gpu.name}?",
        f"{fmt.ms(floor, 1)}",
        [
            f"about 2 M FLOPs per prompt token for the matmuls, {fmt.count(PROMPT)} tokens at once: compute-bound",
            f"at {fmt.count(gpu.bf16_dense_tflops)} TFLOP/s dense BF16, plus causal attention: {fmt.ms(floor, 1)}",
        ],
        "a prefill is bound by FLOPs, not bytes: bandwidth gives a figure far too small.",
    )

# --- 6. tensor-parallel degrees (lesson 7A) ---
for name in DENSE:
    cfg = registry.model(name).config
    sizes = transformer.tp_sizes(cfg)
    powers = [2**i for i in range(1, cfg["num_attention_heads"].bit_length()) if 2**i <= cfg["num_attention_heads"]]
    ruled_out = [t for t in powers if t not in sizes]
    _add(
        "Parallelism",
        "lessons/7a-tensor-parallelism.md",
        f"Into how many GPUs can vLLM split {_short(name)} with tensor parallelism?",
        ", ".join(map(str, sizes)),
        [
            f"T must divide the {cfg['num_attention_heads']} query heads and the MLP width "
            f"{fmt.count(cfg['intermediate_size'])}",
            f"T and the {cfg['num_key_value_heads']} KV heads must divide one another (past h_kv each KV head is "
            "copied)",
        ],
        "the heads decide, not the GPUs at hand: "
        + (
            f"{' and '.join(map(str, ruled_out))} GPUs are ruled out here."
            if ruled_out
            else f"here every power of two up to the {cfg['num_attention_heads']} heads works."
        ),
    )

# --- 7. concurrent sequences (lesson 1A, 5A) ---
for name, card, context in (
    ("Qwen/Qwen2.5-7B-Instruct", "RTX 4090", 8192),
    ("meta-llama/Meta-Llama-3-8B", "RTX 4090", 8192),
    ("Qwen/Qwen2.5-7B-Instruct", "H200", 32768),
):
    cfg = registry.model(name).config
    budget = memory.default_kv_budget_bytes(card, transformer.weight_bytes(cfg))
    kappa = transformer.kv_bytes_per_token(cfg)
    seqs = memory.max_sequences(budget, kappa, context)
    blocks = memory.kv_capacity_tokens(budget, kappa) // registry.VLLM_DEFAULT_BLOCK_SIZE
    _add(
        "Memory",
        "lessons/5a-paged-attention.md",
        f"How many {fmt.count(context)}-token sequences of {_short(name)} fit in one {card}'s KV cache at once?",
        f"{fmt.count(seqs)}",
        [
            f"budget {fmt.gib(budget)} / (κ {fmt.count(kappa)} B x {registry.VLLM_DEFAULT_BLOCK_SIZE} tokens) = "
            f"{fmt.count(blocks)} whole blocks",
            f"each sequence takes {math.ceil(context / registry.VLLM_DEFAULT_BLOCK_SIZE)} blocks: {fmt.count(seqs)}",
        ],
        "the cache is allocated in whole blocks, and the weights and the reserve come off the card first.",
    )

# --- 8. mixture of experts (lesson 7B) ---
for name, batch in ((MOE[0], 8), (MOE[0], 64), (MOE[1], 16)):
    cfg = registry.model(name).config
    experts, top_k = transformer.moe_experts(cfg)
    touched = roofline.expected_experts_touched(experts, top_k, batch)
    read = 2 * roofline.moe_step_params(cfg, touched)[0]
    parts = transformer.moe_param_breakdown(cfg)
    _add(
        "Mixture of experts",
        "lessons/7b-mixture-of-experts.md",
        f"{_short(name)} decodes {batch} sequences: how many of its {experts} experts does each MoE layer read per "
        "step (uniform routing), and how many bytes of weights does the step read?",
        f"{fmt.fixed(touched, 1)} experts per layer; {fmt.gb(read)} of weights",
        [
            f"each token picks k = {top_k} of E = {experts}: E (1 - (1 - k/E)^B) = {fmt.fixed(touched, 1)}",
            f"the weights every token needs plus that many experts in each of {parts['moe_layers']} layers, 2 B each: "
            f"{fmt.gb(read)} (one token alone: {fmt.gb(2 * roofline.moe_step_params(cfg, top_k)[0])})",
        ],
        "the active parameters are per token; a batch reads the union of its tokens' experts, so batching "
        "costs a MoE model bytes a dense one never pays.",
    )

# --- 9. speculative decoding (lesson 6A) ---
for alpha, k in ((0.6, 4), (0.8, 4), (0.8, 8)):
    expected = roofline.expected_tokens_per_step(alpha, k)
    _add(
        "Speculative decoding",
        "lessons/6a-speculative-decoding.md",
        f"A draft proposes k = {k} tokens, each accepted with probability alpha = {alpha}: how many tokens does one "
        "target step emit on average?",
        f"{fmt.fixed(expected, 2)} tokens",
        [
            "the accepted prefix plus one token the target samples itself",
            f"(1 - alpha^(k+1)) / (1 - alpha) = (1 - {alpha}^{k + 1}) / {fmt.fixed(1 - alpha, 1)} = "
            f"{fmt.fixed(expected, 2)}",
        ],
        f"not 1 + k alpha = {fmt.fixed(1 + k * alpha, 1)}: a rejection ends the step, so later drafts count less.",
    )

# --- 10. a fleet: routing and the prefix cache, cold starts, adapters, the ridge of a rented card (lesson 8A) ---
FLEET = "lessons/8a-serving-a-fleet.md"
groups, asks, replicas, shared, own = 5, 8, 2, 1000, 50
cached = memory.cached_prefix_tokens(shared, shared + own)
hits = {p: memory.fleet_prefix_hits(p, groups, asks, replicas, cached) for p in memory.ROUTING_POLICIES}
_add(
    "Fleet",
    FLEET,
    f"{groups} system prompts of {fmt.count(shared)} tokens are each sent {asks} times (each with its own "
    f"{own}-token question, the prompts interleaved) to {replicas} vLLM replicas, blocks of "
    f"{registry.VLLM_DEFAULT_BLOCK_SIZE}. How many prompt tokens do the replicas find cached with round robin, and "
    "with session affinity?",
    f"round robin {fmt.count(hits['round_robin'])}, affinity {fmt.count(hits['consistent_hash'])} tokens",
    [
        f"one hit finds the prefix's full blocks: floor({fmt.count(shared)} / {registry.VLLM_DEFAULT_BLOCK_SIZE}) x "
        f"{registry.VLLM_DEFAULT_BLOCK_SIZE} = {fmt.count(cached)} tokens",
        f"round robin: {groups} prompts and {replicas} replicas share no factor, so each prompt reaches both and is "
        f"computed twice: {groups} x ({asks} - 2) x {fmt.count(cached)} = {fmt.count(hits['round_robin'])}",
        f"affinity: each prompt computed once: {groups} x ({asks} - 1) x {fmt.count(cached)} = "
        f"{fmt.count(hits['consistent_hash'])}",
    ],
    "a prefix is computed once per replica it reaches, not once per fleet; and only whole blocks are cached "
    f"({fmt.count(cached)}, not {fmt.count(shared)}).",
)
cfg = registry.model(registry.COURSE_MODEL).config
weights = 2 * transformer.param_count(cfg)
rates = registry.COLD_START_RATES_GB_S
_add(
    "Fleet",
    FLEET,
    f"A new replica of {_short(registry.COURSE_MODEL)} in BF16 must first get its weights. How long does that take "
    "from each source: " + ", ".join(f"{where} at {rate:g} GB/s" for where, rate in rates.items()) + "?",
    "; ".join(f"{where}: {fmt.fixed(weights / (rate * 1e9), 1)} s" for where, rate in rates.items()),
    [
        f"weights: 2 B x {fmt.count(transformer.param_count(cfg))} parameters = {fmt.gb(weights)}",
        *(f"{fmt.gb(weights)} / {rate:g} GB/s = {fmt.fixed(weights / (rate * 1e9), 1)} s" for rate in rates.values()),
    ],
    "GB are 10^9 bytes on both sides; and this is only the first part of a cold start: vLLM then profiles memory "
    "and captures CUDA graphs.",
)
llama = registry.model("meta-llama/Meta-Llama-3-8B").config
rank = 16
adapter = transformer.lora_adapter_bytes(llama, rank)
_add(
    "Fleet",
    FLEET,
    f"How many bytes is a rank-{rank} LoRA adapter of Meta-Llama-3-8B on all seven projections, in BF16, and how "
    "many fit in 1 GiB of host memory?",
    f"{fmt.count(adapter)} B ({fmt.gb(adapter, 3)}); {2**30 // adapter} per GiB",
    [
        "a projection from d_in to d_out gains r (d_in + d_out) weights",
        f"summed over q, k, v, o, gate, up, down of {llama['num_hidden_layers']} layers, x {rank} x 2 B = "
        f"{fmt.count(adapter)} B",
    ],
    "k and v are narrow under GQA (8 KV heads x 128), so they cost far less than q and o; the embedding and the "
    "head are not adapted.",
)
ridge = {card: roofline.compute_bound_batch(registry.gpu(card)) for card in ("H20", "RTX 4090")}
_add(
    "Fleet",
    FLEET,
    "At what batch do a BF16 model's decode matmuls turn compute-bound on an H20, and on an RTX 4090?",
    f"H20: B* = {fmt.fixed(ridge['H20'], 0)}; RTX 4090: B* = {fmt.fixed(ridge['RTX 4090'], 0)}",
    [
        f"B* = R b / 2 with R = peak / bandwidth: H20 {registry.gpu('H20').bf16_dense_tflops:g} TFLOP/s / "
        f"{registry.gpu('H20').bandwidth_gb_s:g} GB/s = {fmt.fixed(roofline.ridge_point(registry.gpu('H20')), 0)} "
        "FLOP/B",
        f"RTX 4090: {fmt.fixed(roofline.ridge_point(registry.gpu('RTX 4090')), 0)} FLOP/B",
    ],
    f"the H20's bandwidth does not make it fast: past a batch of about {fmt.fixed(ridge['H20'], 0)} its decode waits "
    "on its tensor cores.",
)

# --- 11. cost per million output tokens (lesson 4A's ceiling, AutoDL's price) ---
rent = registry.AUTODL_RTX_4090
for name, batch in (("Qwen/Qwen2.5-7B-Instruct", 1), ("Qwen/Qwen2.5-7B-Instruct", BATCH), (MOE[0], BATCH)):
    cfg, gpu = registry.model(name).config, registry.gpu(rent.card)
    if transformer.is_moe(cfg):
        step = sum(roofline.moe_decode_kernel_floors(gpu, cfg, CONTEXT, batch))
    else:
        step = roofline.decode_step_floor(gpu, cfg, CONTEXT, batch)
    rate = batch / step
    cny = roofline.cost_per_million_tokens(rent.cny_per_hour, rate)
    _add(
        "Cost",
        "lessons/4a-continuous-batching.md",
        f"{_short(name)} on one {gpu.name} at ¥{rent.cny_per_hour:g} per hour, {batch} sequence"
        f"{'s' if batch > 1 else ''} decoding at {fmt.count(CONTEXT)} tokens of context: the least ¥ per million "
        "output tokens?",
        f"¥{fmt.fixed(cny, 2)} per million tokens, at the floor (a real engine costs more)",
        [
            f"step floor {fmt.ms(step, 2)} for {batch} tokens: at most {fmt.fixed(rate, 0)} tokens/s",
            f"¥{rent.cny_per_hour:g} / 3,600 s / {fmt.fixed(rate, 0)} tokens/s x 10^6 = ¥{fmt.fixed(cny, 2)}",
        ],
        "the floor gives the least cost; the batch is what makes it cheap, since a step costs nearly the same at "
        "batch 1 as at 32 for a dense model (not for a MoE one).",
    )

problems.sort(key=lambda p: TOPICS.index(p["topic"]))  # stable: each topic's problems in the order written
for number, problem in enumerate(problems, 1):
    problem["id"] = number
P.add("sections", [{"topic": t, "drills": [p for p in problems if p["topic"] == t]} for t in TOPICS], "record")
P.add("n_drills", len(problems), "count")
P.add("context", CONTEXT, "tokens")
P.add("price", f"¥{rent.cny_per_hour:g}", "text")
