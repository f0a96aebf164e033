"""Values of lesson 2A (the roofline, quantitatively): ridge points, B*, the KV budget, the floors."""

from __future__ import annotations

import math

from infercourse import figures, fmt, labs, memory, notation, registry, roofline, snippets, transformer
from infercourse.labs.batch_decode import LAB, receipts_roofline_svg
from infercourse.pages import fact_link, gpu_rows, lesson_values

P = lesson_values(__name__)

qwen = registry.model(registry.COURSE_MODEL)
cfg = P.add("cfg", qwen.config, "record")
N = transformer.param_count(cfg)
M = P.add("M", roofline.matmul_params(cfg), "params")
b = 2
b_kv = 2
kappa = transformer.kv_bytes_per_token(cfg, b_kv)
g4090 = P.add("g4090", registry.gpu("RTX 4090"), "record")
gh200 = P.add("gh200", registry.gpu("H200"), "record")
P.add("h100", registry.gpu("H100"), "record")
P.add("gpu_rows", gpu_rows(registry.GPUS.values()), "record")
r4090 = P.add("r4090", roofline.ridge_point(g4090), "FLOP/B")
rh200 = P.add("rh200", roofline.ridge_point(gh200), "FLOP/B")
P.add("h200_peak_x", gh200.bf16_dense_tflops / g4090.bf16_dense_tflops, "1")
P.add("h200_bw_x", gh200.bandwidth_gb_s / g4090.bandwidth_gb_s, "1")
S = P.add("S", 512, "tokens")
iatt = P.add("iatt", roofline.attention_intensity(cfg, b_kv), "FLOP/B")
bstar = P.add("bstar", roofline.compute_bound_batch(g4090, b), "sequences")
bstar_n = P.add("bstar_n", math.ceil(bstar), "sequences")
weights = P.add("weights", transformer.weight_bytes(cfg, b), "B")
reserve = P.add("reserve", registry.VLLM_NON_KV_RESERVE_GIB * fmt.GIB, "B")
u = P.add("u", registry.VLLM_DEFAULT_GPU_MEMORY_UTILIZATION, "1")
kv_budget = P.add("kv_budget", memory.kv_budget_bytes(memory.device_total_bytes("RTX 4090"), weights, reserve, u), "B")
fit_tokens = memory.kv_capacity_tokens(kv_budget, kappa)
block = P.add("block_size", registry.VLLM_DEFAULT_BLOCK_SIZE, "tokens")
P.add("s_fit", fit_tokens // block // bstar_n * block, "tokens")

# The capacity table: for each GPU, B* sequences at each context against what its card can give.
contexts = P.add("contexts", [512, 1024, 4096, 32768], "record")
ctx_4k, ctx_32k = P.add("ctx_4k", contexts[2], "tokens"), P.add("ctx_32k", contexts[3], "tokens")
P.add("cuda_cards", " and ".join(registry.gpu(key).name for key in registry.GPU_MEMORY_TOTAL_MIB), "text")


def _capacity_row(key: str, card: registry.GPUFacts) -> dict:
    batch = math.ceil(roofline.compute_bound_batch(card, b))
    cap = memory.kv_budget_bytes(memory.device_total_upper_bytes(key), weights, reserve, u)
    cells = []
    for s in contexts:
        fit = memory.max_sequences(cap, kappa, s)
        cells.append({"need": batch * kappa * s, "fits": fit >= batch, "fit": fit})
    return {"name": card.name, "ridge": roofline.ridge_point(card), "bstar_n": batch, "cells": cells}


P.add("capacity_rows", [_capacity_row(k, g) for k, g in registry.GPUS.items()], "record")

for batch in (1, 64):  # the floor, and lesson 2B's band around it (where a measured step should land)
    floor = P.add(f"f{batch}", roofline.decode_step_floor(g4090, cfg, S, batch, b), "s")
    P.add_band(f"f{batch}", roofline.step_band(floor, cfg["num_hidden_layers"]), "s")
P.add("cache_16x32k", 16 * ctx_32k * kappa, "B")
ipre = P.add("ipre", roofline.linear_intensity(S, b), "FLOP/B")
P.add(
    "prefill_verdicts",
    [
        {
            "name": g.name,
            "ridge": roofline.ridge_point(g),
            "bound": "compute-bound" if ipre > roofline.ridge_point(g) else "memory-bound",
            "end": "." if g is gh200 else ";",
        }  # the sentence's punctuation: the last GPU ends it
        for g in (g4090, gh200)
    ],
    "record",
)
P.add("linear_16", roofline.linear_intensity(16, b), "FLOP/B")
P.add("cache_bstar_4k", bstar_n * ctx_4k * kappa, "B")
P.add("fit_4k", memory.max_sequences(kv_budget, kappa, ctx_4k), "sequences")

# The lab (snippets/labs/batch_decode.py) and vLLM's scheduler defaults it has to change.
lab_prompt = P.add("lab_prompt", LAB.PROMPT_LEN, "tokens")
lab_output = P.add("lab_output", LAB.OUTPUT_LEN, "tokens")
P.add("lab_decode_steps", lab_output - 1, "count")
P.add("lab_context", lab_prompt + lab_output // 2, "tokens")
batches = tuple(x for (x,) in LAB.GRID)
lab_batch = P.add("lab_batch", max(batches), "sequences")
P.add("lab_peak_kv_tokens", lab_batch * (lab_prompt + lab_output), "tokens")
default_tokens, default_seqs = registry.vllm_scheduler_defaults("RTX 4090", "LLM")
default_tokens_h200, default_seqs_h200 = registry.vllm_scheduler_defaults("H200", "LLM")
P.add("llm_batched_tokens", default_tokens, "tokens")
P.add("llm_max_seqs", default_seqs, "sequences")
P.add("serve_batched_tokens", registry.vllm_scheduler_defaults("RTX 4090", "vllm serve")[0], "tokens")
P.add("llm_batched_tokens_h200", default_tokens_h200, "tokens")
P.add("serve_batched_tokens_h200", registry.vllm_scheduler_defaults("H200", "vllm serve")[0], "tokens")
P.add("llm_max_seqs_h200", default_seqs_h200, "sequences")
first_over = P.add("first_over", next(x for x in batches if x * lab_prompt > default_tokens), "sequences")
P.add("first_over_tokens", first_over * lab_prompt, "tokens")
all_prompts = P.add("lab_all_prompt_tokens", lab_batch * lab_prompt, "tokens")
lab_batched = P.add("lab_batched_tokens", min(all_prompts, LAB.MAX_BATCHED_TOKENS), "tokens")
P.add("lab_prefill_steps", math.ceil(all_prompts / lab_batched), "count")

SYMBOLS: list[notation.Symbol] = [
    "P",
    "beta",
    "R",
    "I",
    ("N", f"Here {fmt.count(N)}."),
    ("b", f"Here {b}, BF16."),
    ("b_kv", f"Here {b_kv}, BF16."),
    ("kappa", f"Here {fmt.count(kappa)} B ([lesson 1A](1a-kv-cache.md))."),
    "S",
    "B",
    ("M", f"Here {fmt.count(M)}."),
    "L",
    "h",
    "h_kv",
    "d_h",
    "Bstar",
    "tau",
    "k",
    "j",
    "n",
    "u",
]
P.symbols(SYMBOLS)

P.facts(
    "gpu-h200",
    "gpu-memory-total-h200",
    "gpu-h100",
    "gpu-a100",
    "vllm-scheduler-defaults",
    extra=(
        {
            "what": f"KV budget on the {g4090.name}",
            "value": fmt.gb(kv_budget),
            "source": "[lesson 1A](1a-kv-cache.md#principle) (includes the **assumed** reserve: "
            + fact_link("vllm-non-kv-reserve")
            + ")",
        },
    ),
)

# the committed GPU receipts against the roofline (one sentence while none is committed)
P.add("fig_receipts", figures.Drawing(lambda: receipts_roofline_svg(labs.gpu_receipts("batch_decode"))), "text")

P.figure("fig_roofline", snippets.load("lesson_2a/decode_roofline.py").plot, figsize=(7, 4.6))  # the snippet's plot
