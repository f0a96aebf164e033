"""Draw how one request's KV cache fills: a block of prompt tokens at prefill, then one token per decode step.

Run it: `python kv_growth.py fig.svg` (needs matplotlib). Each row of the picture is one forward
pass; a filled cell means that token's keys and values are in the cache after that pass.
"""

KV_BYTES_PER_TOKEN = 57_344  # Qwen2.5-7B in bf16: 2 * 28 layers * 4 KV heads * 128 * 2 B
PROMPT_TOKENS = 5  # "The capital of France is"
DECODE_STEPS = 6


def cache_tokens(prompt_tokens, step):
    """Tokens whose K and V are cached after forward pass `step` (0 = prefill, 1.. = decode steps)."""
    if prompt_tokens <= 0 or step < 0:
        raise ValueError(f"need prompt_tokens > 0 and step >= 0, got {prompt_tokens!r}, {step!r}")
    return prompt_tokens + step


def plot(ax, prompt_tokens=PROMPT_TOKENS, decode_steps=DECODE_STEPS, kv_bytes_per_token=KV_BYTES_PER_TOKEN):
    """Draw one row per forward pass, one column per token position, on the matplotlib axes `ax`."""
    from matplotlib.patches import Patch, Rectangle

    total = prompt_tokens + decode_steps
    for step in range(decode_steps + 1):
        row = decode_steps - step  # prefill on top
        for pos in range(cache_tokens(prompt_tokens, step)):
            new = (step == 0) or pos == cache_tokens(prompt_tokens, step) - 1
            color = ("tab:blue" if step == 0 else "tab:orange") if new else "lightgrey"
            ax.add_patch(Rectangle((pos, row), 0.9, 0.8, color=color))
        size_kib = cache_tokens(prompt_tokens, step) * kv_bytes_per_token / 1024
        label = "prefill" if step == 0 else f"decode step {step}"
        ax.text(-0.3, row + 0.4, label, ha="right", va="center", fontsize=9)
        ax.text(total + 0.2, row + 0.4, f"{size_kib:,.0f} KiB", ha="left", va="center", fontsize=9)
    ax.set_xlim(-3.2, total + 2.6)
    ax.set_ylim(-0.2, decode_steps + 1)
    ax.set_xticks([p + 0.45 for p in range(total)], [str(p + 1) for p in range(total)], fontsize=8)
    ax.set_yticks([])
    ax.set_xlabel("token position (KV cache size after the pass on the right)")
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.legend(
        handles=[
            Patch(color="tab:blue", label="KV written by prefill (all prompt tokens at once)"),
            Patch(color="tab:orange", label="KV written by this decode step (one token)"),
            Patch(color="lightgrey", label="KV read again by this step"),
        ],
        fontsize="small",
        loc="upper center",
        bbox_to_anchor=(0.5, -0.2),
        ncol=1,
        frameon=False,
    )


if __name__ == "__main__":
    import sys

    import matplotlib.pyplot as plt

    if len(sys.argv) != 2:
        sys.exit("usage: python kv_growth.py OUT.svg")
    fig, ax = plt.subplots(figsize=(7, 3.6))
    plot(ax)
    fig.savefig(sys.argv[1], bbox_inches="tight")
