"""The roofline for Qwen2.5-7B's decode step, kernel by kernel, on an RTX 4090 and an H200.

Pure Python, no GPU, no network. Run it: `python decode_roofline.py` prints two Markdown tables;
`python decode_roofline.py --svg fig.svg` also draws the roofline (needs matplotlib).

A decode step runs two kinds of kernels one after the other, each with its own intensity:
- the weight matmuls: every weight read once for B tokens, 2 FLOPs per weight per token;
- attention: each sequence's query against its own cache of S tokens.
The step takes at least the sum of the two kernels' floors, each max(FLOPs / peak, bytes / bandwidth).
"""

import math

# --8<-- [start:floors]
# Qwen2.5-7B-Instruct, from its config.json (lessons 0C and 1A derive these):
MATMUL_PARAMS = 7_070_619_136  # M: weights a token is multiplied by = N minus the input embedding (a lookup)
ATTN_FLOPS_PER_KEY = 401_408  # 4 * 28 layers * 28 query heads * 128: QK^T and PV per cached token
KV_BYTES_PER_TOKEN = 57_344  # kappa: 2 * 28 layers * 4 KV heads * 128 * 2 B (bf16)
WEIGHT_BYTES = 2  # b: bytes per weight in bf16

# GPU datasheets: dense BF16 with FP32 accumulate (TFLOP/s), memory bandwidth (GB/s).
GPUS = {
    "RTX 4090": (165.2, 1008),  # NVIDIA Ada GPU architecture whitepaper, appendix A
    "H200 SXM": (989.0, 4800),  # NVIDIA H200 datasheet (1979 is the 2:4-sparse figure)
}

PREFILL_TOKENS = 512  # the prefill point on the figure: one prompt of S tokens
CONTEXT = 512  # tokens cached per sequence in the batch table
BATCHES = (1, 2, 4, 8, 16, 32, 64)
CONTEXTS = (512, 2048, 8192, 32768)  # for the context table, at a fixed batch
CONTEXT_TABLE_BATCH = 16


def ridge_point(tflops, bandwidth_gb_s):
    """FLOP/byte where the GPU turns from memory-bound to compute-bound."""
    return tflops * 1e12 / (bandwidth_gb_s * 1e9)


def attainable_tflops(tflops, bandwidth_gb_s, intensity):
    """Roofline: min(peak, intensity * bandwidth), in TFLOP/s."""
    return min(tflops, intensity * bandwidth_gb_s * 1e9 / 1e12)


def floor_s(flops, nbytes, tflops, bandwidth_gb_s):
    """One kernel's least time (s): max(FLOPs / peak, bytes / bandwidth)."""
    return max(flops / (tflops * 1e12), nbytes / (bandwidth_gb_s * 1e9))


def matmul_intensity(batch, b=WEIGHT_BYTES):
    """2 M B / (M b) = 2 B / b: the weight matmuls' FLOP/byte, whatever the context."""
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch!r}")
    return 2 * batch / b


def attention_intensity(kappa=KV_BYTES_PER_TOKEN):
    """FLOPs per cached token / bytes per cached token: the same at every batch and context."""
    return ATTN_FLOPS_PER_KEY / kappa


def compute_bound_batch(ridge, b=WEIGHT_BYTES):
    """B* where the matmuls reach the ridge: 2 B / b = R, so B* = R b / 2."""
    return ridge * b / 2


def step_floors(batch, context, tflops, bandwidth_gb_s, m=MATMUL_PARAMS, kappa=KV_BYTES_PER_TOKEN, b=WEIGHT_BYTES):
    """(matmul floor, attention floor) in seconds for one decode step of `batch` sequences."""
    if batch < 1 or context < 1:
        raise ValueError(f"batch and context must be >= 1, got {batch!r}, {context!r}")
    matmuls = floor_s(2 * m * batch, m * b, tflops, bandwidth_gb_s)
    attention = floor_s(batch * ATTN_FLOPS_PER_KEY * context, batch * kappa * context, tflops, bandwidth_gb_s)
    return matmuls, attention


# --8<-- [end:floors]


def print_table(header, rows):
    """Print a Markdown table whose columns are all right-aligned: `header` and each row are cells joined by " | "."""
    print(f"| {header} |")
    print("|" + "---:|" * (header.count(" | ") + 1))
    for row in rows:
        print(f"| {row} |")


def print_batch_table(gpu="RTX 4090", context=CONTEXT, batches=BATCHES):
    """Markdown: per batch size, each kernel's intensity and floor, the step floor and the token rate."""
    tflops, bandwidth = GPUS[gpu]
    ridge = ridge_point(tflops, bandwidth)
    rows = []
    for batch in batches:
        matmuls, attention = step_floors(batch, context, tflops, bandwidth)
        step, intensity = matmuls + attention, matmul_intensity(batch)
        rows.append(
            f"{batch} | {intensity:.0f} | {intensity / ridge * 100:.1f} % | {matmuls * 1e3:.2f} | "
            f"{attention * 1e3:.3f} | {step * 1e3:.2f} | {batch / step:,.0f}"
        )
    print_table(
        "batch B | matmul intensity (FLOP/byte) | of ridge point | matmul floor (ms) | attention floor (ms) | "
        "step floor (ms) | tokens/s ceiling",
        rows,
    )


def print_context_table(gpu="H200 SXM", batch=CONTEXT_TABLE_BATCH, contexts=CONTEXTS):
    """Markdown: at a fixed batch, how the (memory-bound) attention floor grows with the context."""
    tflops, bandwidth = GPUS[gpu]
    rows = []
    for context in contexts:
        matmuls, attention = step_floors(batch, context, tflops, bandwidth)
        step = matmuls + attention
        rows.append(
            f"{context:,} | {batch * KV_BYTES_PER_TOKEN * context / 1e9:.2f} | {matmuls * 1e3:.2f} | "
            f"{attention * 1e3:.2f} | {attention / step * 100:.0f} % | {batch / step:,.0f}"
        )
    print_table(
        "context S | KV read per step (GB) | matmul floor (ms) | attention floor (ms) | "
        "attention share of the step | tokens/s ceiling",
        rows,
    )


def plot(ax, prefill_tokens=PREFILL_TOKENS, batches=BATCHES):
    """Draw each GPU's roofline, log-log, with the decode kernels and prefill on it, on the matplotlib axes `ax`."""
    xs = [2 ** (k / 8) for k in range(-8, 8 * 12 + 1)]  # 0.5 .. 4096 FLOP/byte
    ref = GPUS["RTX 4090"]
    for (name, (tflops, bandwidth)), color in zip(GPUS.items(), ("tab:blue", "tab:red"), strict=True):
        ridge = ridge_point(tflops, bandwidth)
        from_batch = math.ceil(compute_bound_batch(ridge))
        ax.loglog(
            xs,
            [attainable_tflops(tflops, bandwidth, x) for x in xs],
            color=color,
            label=f"{name} roof: ridge {ridge:.0f} FLOP/B,\nmatmuls compute-bound from B = {from_batch}",
        )
        mat = [matmul_intensity(b) for b in batches]
        ax.loglog(mat, [attainable_tflops(tflops, bandwidth, i) for i in mat], "o", color=color, markersize=4)
        att = attention_intensity()
        ax.loglog([att], [attainable_tflops(tflops, bandwidth, att)], "s", color=color, markersize=6)
        pre = matmul_intensity(prefill_tokens)  # a prompt of S tokens is a batch of S for the matmuls
        ax.loglog([pre], [attainable_tflops(tflops, bandwidth, pre)], "*", color=color, markersize=12)
    for b in (batches[0], batches[-1]):
        ax.annotate(
            f"decode matmuls B={b}",
            (matmul_intensity(b), attainable_tflops(*ref, matmul_intensity(b))),
            textcoords="offset points",
            xytext=(4, -12),
            fontsize=8,
        )
    ax.annotate(
        "decode attention (any B, S)",
        (attention_intensity(), attainable_tflops(*ref, attention_intensity())),
        textcoords="offset points",
        xytext=(-20, 10),
        fontsize=8,
    )
    ax.annotate(
        f"prefill matmuls S={prefill_tokens}",
        (matmul_intensity(prefill_tokens), ref[0]),
        textcoords="offset points",
        xytext=(-40, 8),
        fontsize=8,
    )
    ax.set(
        xlabel="arithmetic intensity of a kernel (FLOP/byte), BF16 weights and cache",
        ylabel="attainable TFLOP/s (BF16 dense, FP32 acc.)",
    )
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")


def main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--svg", help="also draw the figure into this SVG file (needs matplotlib)")
    args = parser.parse_args(argv)
    print_batch_table()
    print()
    print_context_table()
    if args.svg:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4.6))
        plot(ax)
        fig.savefig(args.svg, bbox_inches="tight")


if __name__ == "__main__":
    main()
