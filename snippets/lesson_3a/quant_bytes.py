"""What BF16, FP8 and AWQ 4-bit weights mean for Qwen2.5-7B's memory and decode floor on an RTX 4090.

Pure Python, no GPU, no network. Run it: `python quant_bytes.py` prints one Markdown table.

Only the decoder's linear projections are quantised; the embedding and the output head stay 16-bit.
A decode step reads every matmul weight once, so its weight floor is bytes / bandwidth; the batch
at which the matmuls turn compute-bound is B* = R b / 2, with R the ridge point of the math the
kernel runs (BF16 for weight-only AWQ, FP8 for W8A8) and b the bytes stored per weight.
"""

import math

# --8<-- [start:bytes]
# Qwen2.5-7B-Instruct, from its config.json (lesson 0C derives these):
PARAMS = 7_615_616_512  # N: every parameter
LINEAR_WEIGHTS = 6_525_288_448  # N_q: q, k, v, o, gate, up, down of 28 layers (what AWQ and FP8 quantise)
EMBEDDING = 544_997_376  # V d = 152,064 x 3,584: the input embedding; the output head has as many (untied)
KV_BYTES_PER_TOKEN = 57_344  # kappa in BF16 (lesson 1A)

GROUP = 128  # AWQ group size: one fp16 scale (2 B) and one 4-bit zero (0.5 B) per 128 weights

# RTX 4090, NVIDIA Ada whitepaper, appendix A (dense, FP32 accumulate):
BF16_TFLOPS, FP8_TFLOPS, BANDWIDTH_GB_S = 165.2, 330.3, 1008
DEVICE_BYTES = 24_564 * 2**20  # what CUDA reports for the "24 GB" card
UTILIZATION = 0.92  # vLLM's gpu_memory_utilization default
RESERVE_BYTES = 2 * 2**30  # ASSUMED: activations, non-torch memory, CUDA graphs
BLOCK = 16  # tokens per KV block


def bytes_per_quantised_weight(fmt, group=GROUP):
    """B per linear-layer weight: 2 (BF16), 1 (FP8; one scale per tensor is negligible), 0.5 + 2.5 / G (AWQ)."""
    return {"bf16": 2.0, "fp8": 1.0, "awq": 0.5 + (2 + 0.5) / group}[fmt]


def weight_bytes(fmt):
    """All weights: the linear layers at the format's bytes, everything else at 2 B."""
    return LINEAR_WEIGHTS * bytes_per_quantised_weight(fmt) + 2 * (PARAMS - LINEAR_WEIGHTS)


def matmul_bytes(fmt):
    """What one decode step reads for its matmuls: all weights but the input embedding (a row lookup)."""
    return weight_bytes(fmt) - 2 * EMBEDDING


def weight_floor_ms(fmt):
    """The least time of one decode step's matmuls at small batch: bytes / bandwidth (ms)."""
    return matmul_bytes(fmt) / (BANDWIDTH_GB_S * 1e9) * 1e3


def compute_bound_batch(fmt):
    """B* = R b_bar / 2 with b_bar = matmul bytes / matmul parameters and R at the kernel's math peak."""
    matmul_params = PARAMS - EMBEDDING
    b_bar = matmul_bytes(fmt) / matmul_params
    peak = FP8_TFLOPS if fmt == "fp8" else BF16_TFLOPS  # W8A8 multiplies in FP8; AWQ dequantises to BF16
    ridge = peak * 1e12 / (BANDWIDTH_GB_S * 1e9)
    return ridge * b_bar / 2


def kv_tokens(fmt):
    """Tokens of BF16 KV cache that fit beside the weights, in whole blocks."""
    budget = DEVICE_BYTES * UTILIZATION - weight_bytes(fmt) - RESERVE_BYTES
    return int(budget // (KV_BYTES_PER_TOKEN * BLOCK)) * BLOCK


# --8<-- [end:bytes]


def print_table():
    print("| format | B per quantised weight | weights (GB) | weight floor (ms) | B* (rounded up) | KV tokens |")
    print("|---|---:|---:|---:|---:|---:|")
    for fmt in ("bf16", "fp8", "awq"):
        print(
            f"| {fmt} | {bytes_per_quantised_weight(fmt):.4f} | {weight_bytes(fmt) / 1e9:.2f} | "
            f"{weight_floor_ms(fmt):.2f} | {math.ceil(compute_bound_batch(fmt))} | {kv_tokens(fmt):,} |"
        )


if __name__ == "__main__":
    print_table()
