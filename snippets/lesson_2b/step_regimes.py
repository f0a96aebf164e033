"""Which regime a decode step is in, and which CUDA graph vLLM runs it in.

Pure Python, no GPU, no network. Run it: `python step_regimes.py` prints two Markdown tables.

A decode step costs at least its roofline floor, max(bytes / bandwidth, FLOPs / peak). In eager mode it
also launches about one kernel per operation, and each launch costs the CPU a few microseconds; when the
launches take longer than the GPU's work, the step is overhead-bound. A CUDA graph replays all the
step's kernels with one launch, but only at the batch sizes it was captured at: a batch in between is
padded up to the next captured size.
"""

# --8<-- [start:regimes]
# Qwen2.5 at B = 1, BF16: the weights a token is multiplied by (M: N minus the input embedding; the
# 0.5B's head is tied to its embedding, so it counts once) and the decoder layers, from config.json.
MODELS = {
    "Qwen2.5-0.5B": (494_032_768, 24),
    "Qwen2.5-7B": (7_070_619_136, 28),
}
BANDWIDTH_GB_S = 1008  # RTX 4090, NVIDIA Ada GPU architecture whitepaper, appendix A
LAUNCH_US = 5.0  # CPU time of one kernel launch: 4-6 µs measured on an RTX 5070 Ti (the course's registry)
KERNELS_PER_LAYER = 10  # norm, QKV, RoPE, KV write, attention, O, norm, gate-up, SiLU x mul, down
KERNELS_OUTSIDE = 6  # embedding, final norm, head, about three for sampling

MAX_NUM_SEQS = 256  # vLLM 0.26.0's LLM(...) default on a card under 70 GiB
MAX_NUM_BATCHED_TOKENS = 8192
MAX_CAPTURE = 512  # vLLM's ceiling on the largest captured size


def regimes():
    """Per model: the bytes floor and the eager launch time at B = 1 (ms), and which one is larger."""
    rows = []
    for name, (matmul_params, layers) in MODELS.items():
        floor_ms = matmul_params * 2 / (BANDWIDTH_GB_S * 1e9) * 1e3  # every weight read once, 2 B each
        launch_ms = (KERNELS_PER_LAYER * layers + KERNELS_OUTSIDE) * LAUNCH_US / 1e3
        rows.append((name, floor_ms, launch_ms, "overhead" if launch_ms > floor_ms else "memory"))
    return rows


def capture_sizes(max_num_seqs, max_num_batched_tokens):
    """vLLM 0.26.0's default CUDA-graph sizes: 1, 2, 4, every 8 below 256, every 16 from 256 up to the
    largest, min(2 x max_num_seqs, 512, max_num_batched_tokens)."""
    largest = min(2 * max_num_seqs, MAX_CAPTURE, max_num_batched_tokens)
    sizes = [s for s in (1, 2, 4) if s <= largest]
    sizes += list(range(8, min(largest + 1, 256), 8)) + list(range(256, largest + 1, 16))
    if max_num_batched_tokens <= largest:
        sizes.append(max_num_batched_tokens)
    return sorted(set(sizes))


def padded(batch, sizes):
    """The graph a batch runs in: the smallest captured size >= batch; None above the largest (no graph)."""
    return next((s for s in sizes if s >= batch), None)


# --8<-- [end:regimes]


def main():
    """Print the two tables."""
    print("| model | bytes floor (ms) | eager launches (ms) | bound by |")
    print("|---|---:|---:|---|")
    for name, floor_ms, launch_ms, bound in regimes():
        print(f"| {name} | {floor_ms:.2f} | {launch_ms:.2f} | {bound} |")
    sizes = capture_sizes(MAX_NUM_SEQS, MAX_NUM_BATCHED_TOKENS)
    print()
    print(
        f"{len(sizes)} captured sizes, {sizes[0]} to {sizes[-1]} tokens per step; a step runs padded to the next one:"
    )
    print()
    print("| tokens in the step | runs as | padding rows |")
    print("|---:|---:|---:|")
    for tokens in (1, 3, 9, 100, 300, 513):  # above max_num_seqs: steps that mix prefill chunks with decodes
        size = padded(tokens, sizes)
        print(f"| {tokens} | {size or 'no graph'} | {'-' if size is None else size - tokens} |")


if __name__ == "__main__":
    main()
