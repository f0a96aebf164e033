"""Values of lesson 1B (attention kernels): the score matrix a naive kernel writes, the bytes a tiled kernel
moves instead, the online softmax, the thread blocks of a decode kernel against the card's SMs, paged
blocks, and which backend vLLM 0.26.0 runs on each card, with the committed CPU receipt of lab 1B.

Every number the page shows is bound here once, with its unit, from the registry, the formula modules, the
lesson's snippet (its functions, applied to the registry's config) and the committed receipts; the page only
looks the names up and formats them.
"""

from __future__ import annotations

import math

from infercourse import registry, roofline, snippets, transformer
from infercourse.labs import attention_backends as lab
from infercourse.pages import lesson_values

LAB = lab.LAB  # the lab's settings, read from its script

P = lesson_values(__name__)

cfg = registry.model(registry.COURSE_MODEL).config
ak = snippets.load("lesson_1b/attention_kernels.py")  # the page's byte counts are the snippet's own functions
P.figure("fig_bytes", ak.plot, figsize=(7, 4.2))  # the snippet's own plot function
g4090, h200 = P.add_cards()
b = 2  # bytes per element: BF16
d_h = P.add("d_h", transformer.head_dim(cfg), "count")
h = P.add("h", cfg["num_attention_heads"], "count")
h_kv = cfg["num_key_value_heads"]
L = P.add("L", cfg["num_hidden_layers"], "count")
P.add("group", h // h_kv, "count")
tile = P.add("tile", ak.TILE, "tokens")
S_long = P.add("S_long", max(ak.CONTEXTS), "tokens")

# --- 1. the score matrix a naive kernel writes: S^2 b per head, h of them per layer ---
score_head = P.add("score_head", S_long**2 * b, "B")
score_layer = P.add("score_layer", score_head * h, "B")
card_bytes = P.add("card_bytes", registry.GPU_MEMORY_TOTAL_MIB["RTX 4090"] * 2**20, "B")  # as CUDA reports it
P.add("score_layer_over_card", score_layer / card_bytes, "1")

# --- 3. bytes through memory, one head: naive, tiled (at most), each tensor once (at least) ---
P.add(
    "bytes_rows",
    [
        {  # MB (10^6 B) per head, the snippet's table with the lower bound added
            "S": s,
            "score_mb": s * s * b / 1e6,
            "naive_mb": ak.naive_bytes(s, d_h, b) / 1e6,
            "tiled_mb": ak.tiled_bytes(s, d_h, b, tile) / 1e6,
            "once_mb": 4 * s * d_h * b / 1e6,
            "ratio": ak.naive_bytes(s, d_h, b) / ak.tiled_bytes(s, d_h, b, tile),
        }
        for s in ak.CONTEXTS
    ],
    "record",
)
P.add("naive_over_tiled", ak.naive_bytes(S_long, d_h, b) / ak.tiled_bytes(S_long, d_h, b, tile), "1")
P.add("naive_over_once", ak.naive_bytes(S_long, d_h, b) / (4 * S_long * d_h * b), "1")
P.add("tiles_long", math.ceil(S_long / tile), "count")
tiled_err, split_err = ak.check()
P.add("tiled_err", f"{tiled_err:.1e}", "text")  # float64 round-off, written as the snippet prints it
P.add("split_err", f"{split_err:.1e}", "text")
kv_head_long = P.add("kv_head_long", 2 * S_long * d_h * b, "B")  # one head's K and V at S_long

# --- decode: the same FLOPs and bytes per key, no S x S matrix, but few thread blocks ---
P.add("att_intensity", 2 * h / (h_kv * b), "FLOP/B")  # (4 L h d_h S) / (2 L h_kv d_h b S)
sms_4090 = P.add("sms_4090", registry.SM_COUNT["RTX 4090"], "count")
sms_h200 = P.add("sms_h200", registry.SM_COUNT["H200"], "count")
blocks_1 = P.add("blocks_1", ak.decode_blocks(1, h_kv), "count")
P.add("busy_1", blocks_1 / sms_4090, "1")
P.add("splits_4090", math.ceil(sms_4090 / blocks_1), "count")
P.add("splits_h200", math.ceil(sms_h200 / blocks_1), "count")
P.add("split_keys", S_long // math.ceil(sms_4090 / blocks_1), "tokens")
P.add("max_splits", registry.FLASH_ATTN_MAX_SPLITS, "count")
P.add("blocks_lab", ak.decode_blocks(LAB.BATCH, h_kv), "count")

# --- paged: block tables and the block size ---
z = P.add("z", registry.VLLM_DEFAULT_BLOCK_SIZE, "tokens")
P.add("table_entries_long", S_long // z, "count")
P.add("z_waste_max", z - 1, "tokens")

# --- which backend vLLM 0.26.0 runs, per card (its rule, read in the source) ---
choices = []
for run in ("default:auto", "default:fp8", "FLASH_ATTN:fp8"):
    requested, dtype = run.split(":")
    choices.append(
        {
            "run": f"`{run}`",
            "r4090": lab.predicted_backend(registry.COMPUTE_CAPABILITY["RTX 4090"], dtype, requested),
            "rh200": lab.predicted_backend(registry.COMPUTE_CAPABILITY["H200"], dtype, requested),
        }
    )
P.add("choices", choices, "record")
P.add("cap_4090", ".".join(map(str, registry.COMPUTE_CAPABILITY["RTX 4090"])), "text")
P.add("cap_h200", ".".join(map(str, registry.COMPUTE_CAPABILITY["H200"])), "text")

# --- the lab: the floors at its contexts, and how much of a step the cache is ---
lab_floor = {
    dtype: [
        lab.step_floor_s(
            g4090, cfg, {"kv_cache_dtype": dtype, "batch": LAB.BATCH, "output_len": LAB.OUTPUT_LEN, "context": s}
        )
        for s in LAB.CONTEXTS
    ]
    for dtype in ("auto", "fp8")
}
P.add("lab_batch", LAB.BATCH, "sequences")
P.add("lab_output", LAB.OUTPUT_LEN, "tokens")
P.add("lab_short", min(LAB.CONTEXTS), "tokens")
P.add("lab_long", max(LAB.CONTEXTS), "tokens")
P.add("floor_short", lab_floor["auto"][0], "s")
P.add("floor_long", lab_floor["auto"][-1], "s")
P.add("floor_long_fp8", lab_floor["fp8"][-1], "s")
kv_long = LAB.BATCH * (max(LAB.CONTEXTS) + LAB.OUTPUT_LEN // 2) * transformer.kv_bytes_per_token(cfg, 2)
weights = roofline.matmul_params(cfg) * 2
P.add("kv_share_long", kv_long / (kv_long + weights), "1")
P.add("fp8_saving_long", 1 - lab_floor["fp8"][-1] / lab_floor["auto"][-1], "1")

# --- the committed CPU receipt: which backend the CPU build ran, and the exact token counts ---
P.cpu_receipt("attention_backends")

SYMBOLS: list[str | tuple[str, str]] = [
    ("d_h", f"Here {d_h}."),
    ("h", f"Here {h}."),
    ("h_kv", f"Here {h_kv}: {h // h_kv} query heads share each key/value head."),
    "S",
    ("b", "Here 2: every tensor on this page is BF16, activations and cache alike."),
    "B",
    "s",
    "mu",
    "Z",
    "o",
    ("B_r", f"Here {tile}."),
    "n_split",
    "n_SM",
    "z",
]
P.symbols(SYMBOLS)

P.facts(
    "gpu-h200",
    "gpu-sm-count-rtx-4090",
    "gpu-sm-count-h200",
    "gpu-compute-capability",
    "vllm-attention-backend-priority",
    "vllm-attention-backend-forced",
    "vllm-flash-attn-version",
    "vllm-flash-attn-fp8-kv",
    "vllm-flashinfer-fp8-kv",
    "vllm-flash-attn-block-size",
    "vllm-flash-attn-splits",
    "vllm-cpu-attention-backend",
    "vllm-attention-layer-backend",
    "vllm-block-size",
)
