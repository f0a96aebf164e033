"""The roofline for Qwen2.5-7B: where prefill and batched decode sit on an RTX 4090 and an H200.

Pure Python, no GPU, no network. Run it: `python decode_roofline.py` prints a Markdown table;
`python decode_roofline.py --svg fig.svg` also draws the roofline (needs matplotlib).

Same simple model as lesson 0A: 2 FLOPs per parameter per token, attention's own FLOPs left out;
a step reads every weight once and each sequence's whole KV cache.
"""

# Qwen2.5-7B-Instruct, from its config.json (lesson 0C derives N; lesson 1A derives kappa):
PARAMS = 7_615_616_512  # N: total parameters
KV_BYTES_PER_TOKEN = 57_344  # kappa: 2 * 28 layers * 4 KV heads * 128 * 2 B (bf16)
WEIGHT_BYTES = 2  # b: bytes per weight in bf16

# GPU datasheets: dense BF16 with FP32 accumulate (TFLOP/s), memory bandwidth (GB/s).
GPUS = {
    "RTX 4090": (165.2, 1008),  # NVIDIA Ada GPU architecture whitepaper, appendix A
    "H200 SXM": (989.0, 4800),  # NVIDIA H200 datasheet (1979 is the 2:4-sparse figure)
}

PREFILL_TOKENS = 512  # the prefill point on the figure: one prompt of S tokens
CONTEXT = 512  # tokens of context per sequence for the decode points
BATCHES = (1, 2, 4, 8, 16, 32, 64)


def ridge_point(tflops, bandwidth_gb_s):
    """FLOP/byte where the GPU turns from memory-bound to compute-bound."""
    return tflops * 1e12 / (bandwidth_gb_s * 1e9)


def attainable_tflops(tflops, bandwidth_gb_s, intensity):
    """Roofline: min(peak, intensity * bandwidth), in TFLOP/s."""
    return min(tflops, intensity * bandwidth_gb_s * 1e9 / 1e12)


def prefill_intensity(prompt_len, n=PARAMS, kappa=KV_BYTES_PER_TOKEN, b=WEIGHT_BYTES):
    """2 N S / (N b + kappa S): weights read once for S tokens, S tokens of cache written."""
    return 2 * n * prompt_len / (n * b + kappa * prompt_len)


def decode_bytes(batch, context, n=PARAMS, kappa=KV_BYTES_PER_TOKEN, b=WEIGHT_BYTES):
    """Bytes of one decode step: all weights once + every sequence's cache."""
    if batch < 1 or context < 1:
        raise ValueError(f"batch and context must be >= 1, got {batch!r}, {context!r}")
    return n * b + batch * kappa * context


def decode_intensity(batch, context, n=PARAMS, kappa=KV_BYTES_PER_TOKEN, b=WEIGHT_BYTES):
    """I(B) = 2 N B / (N b + B kappa S)."""
    return 2 * n * batch / decode_bytes(batch, context, n, kappa, b)


def compute_bound_batch(ridge, context, n=PARAMS, kappa=KV_BYTES_PER_TOKEN, b=WEIGHT_BYTES):
    """B* solving I(B) = ridge: ridge N b / (2 N - ridge kappa S); None when 2N <= ridge kappa S."""
    denominator = 2 * n - ridge * kappa * context
    return None if denominator <= 0 else ridge * n * b / denominator


def print_batch_table(gpu="RTX 4090", context=CONTEXT, batches=BATCHES):
    """Markdown: decode intensity, step-time floor and token rate per batch size on one GPU."""
    tflops, bandwidth = GPUS[gpu]
    ridge = ridge_point(tflops, bandwidth)
    print(f"| batch B | bytes per step (GB) | intensity (FLOP/byte) | of ridge point | step floor (ms) | tokens/s ceiling |")
    print("|---:|---:|---:|---:|---:|---:|")
    for batch in batches:
        moved = decode_bytes(batch, context)
        step = max(moved / (bandwidth * 1e9), 2 * PARAMS * batch / (tflops * 1e12))
        print(f"| {batch} | {moved / 1e9:.2f} | {decode_intensity(batch, context):.2f} | "
              f"{decode_intensity(batch, context) / ridge * 100:.1f} % | {step * 1e3:.2f} | {batch / step:,.0f} |")


def figure_svg(context=CONTEXT, prefill_tokens=PREFILL_TOKENS, batches=BATCHES):
    """Return an SVG (text): each GPU's roofline, log-log, with prefill and decode points on it."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "decode-roofline"  # stable ids: the same SVG on every build
    xs = [2 ** (k / 8) for k in range(-8, 8 * 12 + 1)]  # 0.5 .. 4096 FLOP/byte
    fig, ax = plt.subplots(figsize=(7, 4.6))
    for (name, (tflops, bandwidth)), color in zip(GPUS.items(), ("tab:blue", "tab:red")):
        ax.loglog(xs, [attainable_tflops(tflops, bandwidth, x) for x in xs], color=color,
                  label=f"{name} roof (ridge {ridge_point(tflops, bandwidth):.0f} FLOP/byte)")
        dec = [decode_intensity(b, context) for b in batches]
        ax.loglog(dec, [attainable_tflops(tflops, bandwidth, i) for i in dec], "o", color=color, markersize=4)
        pre = prefill_intensity(prefill_tokens)
        ax.loglog([pre], [attainable_tflops(tflops, bandwidth, pre)], "*", color=color, markersize=12)
    for b, i in ((batches[0], decode_intensity(batches[0], context)), (batches[-1], decode_intensity(batches[-1], context))):
        ax.annotate(f"decode B={b}", (i, attainable_tflops(*GPUS["RTX 4090"], i)), textcoords="offset points",
                    xytext=(4, -12), fontsize=8)
    ax.annotate(f"prefill S={prefill_tokens}", (prefill_intensity(prefill_tokens), 165.2), textcoords="offset points",
                xytext=(-30, 8), fontsize=8)
    ax.set_xlabel(f"arithmetic intensity (FLOP/byte); decode points: context {context} tokens, B = {batches[0]}..{batches[-1]}")
    ax.set_ylabel("attainable TFLOP/s (BF16 dense, FP32 acc.)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")
    fig.tight_layout()
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    plt.close(fig)
    svg = buffer.getvalue()
    return svg[svg.index("<svg"):]  # drop the XML prolog so the SVG can sit inside HTML


def main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--svg", help="also write the figure to this SVG file")
    args = parser.parse_args(argv)
    print_batch_table()
    if args.svg:
        with open(args.svg, "w") as f:
            f.write(figure_svg())


if __name__ == "__main__":
    main()
