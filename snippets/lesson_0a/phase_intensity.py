"""Arithmetic intensity of prefill and decode: FLOPs per byte moved to or from GPU memory.

Pure Python, no GPU, no network. Run it: `python phase_intensity.py` prints a Markdown table;
`python phase_intensity.py --svg fig.svg` also draws the figure (needs matplotlib).

The model is deliberately simple (lesson 0A says so too):
- a forward pass costs 2 FLOPs per parameter per token (one multiply-add); attention's own
  FLOPs (the QK^T and PV products, which grow with context) are left out;
- every weight is read from memory once per forward pass, the embedding table included
  (really a gather of a few rows);
- bytes moved = weights (N * b) + the KV cache written (prefill) or read (decode).
"""

from dataclasses import dataclass

# --8<-- [start:intensity]
# Qwen2.5-7B-Instruct, from its config.json (lesson "Transformer, the infra view" derives both):
PARAMS = 7_615_616_512  # N: total parameters, untied embeddings
KV_BYTES_PER_TOKEN = 57_344  # kappa = 2 (K and V) * 28 layers * 4 KV heads * 128 head size * 2 B (bf16)
WEIGHT_BYTES = 2  # b: bytes per weight in bf16

# GPU datasheets: dense BF16 with FP32 accumulate (TFLOP/s), memory bandwidth (GB/s).
GPUS = {
    "RTX 4090": (165.2, 1008),  # NVIDIA Ada GPU architecture whitepaper, appendix A
    "H200 SXM": (989.0, 4800),  # NVIDIA H200 datasheet
}

LENGTHS = (128, 1024, 8192)  # prompt length S (prefill) = context length (decode), in tokens


@dataclass(frozen=True)
class Model:
    """What decides the regime: parameter count N, KV bytes per token kappa, bytes per weight b."""

    params: int
    kv_bytes_per_token: int
    weight_bytes: float = WEIGHT_BYTES

    def __post_init__(self):
        for name in ("params", "kv_bytes_per_token", "weight_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{name} must be a positive number, got {value!r}")


def _check_length(name, tokens):
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens <= 0:
        raise ValueError(f"{name} must be a positive whole number of tokens, got {tokens!r}")


def prefill_intensity(model, prompt_len):
    """FLOP/byte of one prefill pass over `prompt_len` tokens.

    FLOPs 2*N*S; bytes: the weights once (N*b), reused by all S tokens, plus S tokens of KV written.
    """
    _check_length("prompt_len", prompt_len)
    flops = 2 * model.params * prompt_len
    bytes_moved = model.params * model.weight_bytes + model.kv_bytes_per_token * prompt_len
    return flops / bytes_moved


def decode_intensity(model, context_len):
    """FLOP/byte of one decode step that extends a context of `context_len` tokens by one.

    FLOPs 2*N for the single new token; bytes: all weights plus the whole KV cache read.
    """
    _check_length("context_len", context_len)
    flops = 2 * model.params
    bytes_moved = model.params * model.weight_bytes + model.kv_bytes_per_token * context_len
    return flops / bytes_moved


def ridge_point(tflops, bandwidth_gb_s):
    """Intensity (FLOP/byte) where a GPU turns from memory-bound to compute-bound."""
    return tflops * 1e12 / (bandwidth_gb_s * 1e9)


def print_table(model, lengths=LENGTHS):
    """Print prefill and decode intensity per length as a Markdown table."""
    print("| tokens S | prefill FLOP/byte | decode FLOP/byte (context S) | prefill / decode |")
    print("|---:|---:|---:|---:|")
    for s in lengths:
        pre, dec = prefill_intensity(model, s), decode_intensity(model, s)
        print(f"| {s:,} | {pre:,.1f} | {dec:.2f} | {pre / dec:,.0f} |")


# --8<-- [end:intensity]


def plot(ax, model, max_len=32_768):
    """Draw both intensities against length, log-log, with each GPU's ridge point, on the matplotlib axes `ax`."""
    lengths = [2**k for k in range(int(max_len).bit_length()) if 2**k <= max_len]
    ax.loglog(lengths, [prefill_intensity(model, s) for s in lengths], marker="o", label="prefill, prompt of S tokens")
    ax.loglog(lengths, [decode_intensity(model, s) for s in lengths], marker="s", label="decode, context of S tokens")
    for (name, (tflops, bandwidth)), style in zip(GPUS.items(), ("--", ":"), strict=True):
        ridge = ridge_point(tflops, bandwidth)
        ax.axhline(ridge, color="grey", linestyle=style, label=f"{name} ridge point ({ridge:.0f} FLOP/byte)")
    ax.set(
        xlabel="tokens S (prompt length for prefill, context length for decode)",
        ylabel="arithmetic intensity (FLOP/byte)",
    )
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small", loc="upper left")


def main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--svg", help="also draw the figure into this SVG file (needs matplotlib)")
    args = parser.parse_args(argv)
    qwen = Model(PARAMS, KV_BYTES_PER_TOKEN)
    print_table(qwen)
    if args.svg:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4.2))
        plot(ax, qwen)
        fig.savefig(args.svg, bbox_inches="tight")


if __name__ == "__main__":
    main()
