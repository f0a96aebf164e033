"""Attention three ways: naive, tiled with an online softmax, and split along the keys for decode.

NumPy only (matplotlib for the figure), no GPU. Run it: `python attention_kernels.py` checks that the
three give the same output to round-off, then prints what each moves through the GPU's memory.

Naive attention writes the whole S x S score matrix to memory, reads it back for the softmax, writes the
probabilities and reads them again for the product with V. A tiled kernel (FlashAttention's method) keeps a
tile of queries on chip, streams the keys and values past it tile by tile, and folds each tile into a
running maximum, sum and weighted sum (the online softmax), so the S x S matrix never leaves the chip.
Decode has one query per sequence: to give every multiprocessor work, a split-K kernel (FlashDecoding's
method) cuts the keys into chunks, reduces each chunk alone and merges the partial results by their
log-sum-exp.
"""

import math

import numpy as np

HEAD_DIM = 128  # d_h of Qwen2.5-7B: hidden 3584 / 28 query heads (config.json)
QUERY_HEADS, KV_HEADS = 28, 4  # Qwen2.5-7B: 7 query heads share each K/V head (GQA)
TILE = 128  # query rows a tile holds (FlashAttention 2's block for d_h = 128); keys stream past in tiles too
BYTES = 2  # BF16
CONTEXTS = (1024, 4096, 16384, 32768)
SMS = 128  # streaming multiprocessors of an RTX 4090 (NVIDIA Ada GPU architecture whitepaper, appendix A)


# --8<-- [start:attention]
def naive_attention(q, k, v):
    """softmax(q k^T / sqrt(d)) v with the whole score matrix in memory; q: (S_q, d), k and v: (S_k, d)."""
    scores = q @ k.T / math.sqrt(q.shape[1])
    p = np.exp(scores - scores.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v


def online_step(m, denom, acc, q, k_tile, v_tile):
    """Fold one tile of keys and values into each query row's running max m, sum of exponentials denom and
    weighted sum acc (the output is acc / denom once every tile is folded in)."""
    s = q @ k_tile.T / math.sqrt(q.shape[1])
    m_new = np.maximum(m, s.max(axis=1))
    rescale = np.exp(m - m_new)  # what was summed under the old max, shrunk to the new one
    p = np.exp(s - m_new[:, None])
    return m_new, denom * rescale + p.sum(axis=1), acc * rescale[:, None] + p @ v_tile


def tiled_attention(q, k, v, tile=TILE):
    """FlashAttention's order: per tile of query rows, stream K and V tile by tile; no S x S matrix."""
    out = np.empty_like(q)
    for i in range(0, len(q), tile):
        qi = q[i : i + tile]
        m, denom, acc = np.full(len(qi), -np.inf), np.zeros(len(qi)), np.zeros_like(qi)
        for j in range(0, len(k), tile):
            m, denom, acc = online_step(m, denom, acc, qi, k[j : j + tile], v[j : j + tile])
        out[i : i + tile] = acc / denom[:, None]
    return out


def split_kv_decode(q, k, v, splits):
    """One decode query over S keys cut into `splits` chunks, each reduced alone (one thread block each on a
    GPU) into its output o_i and log-sum-exp lse_i, then merged: o = sum_i exp(lse_i - lse) o_i."""
    outs, lses = [], []
    for k_chunk, v_chunk in zip(np.array_split(k, splits), np.array_split(v, splits), strict=True):
        m, denom, acc = online_step(np.full(1, -np.inf), np.zeros(1), np.zeros((1, q.shape[1])), q, k_chunk, v_chunk)
        outs.append(acc / denom[:, None])
        lses.append(m + np.log(denom))
    lse = np.logaddexp.reduce(lses)
    return sum(np.exp(lse_i - lse)[:, None] * o_i for lse_i, o_i in zip(lses, outs, strict=True))


# --8<-- [end:attention]


# --8<-- [start:bytes]
def naive_bytes(s, d=HEAD_DIM, b=BYTES):
    """Bytes one head moves for S queries over S keys, naively: Q, K, V read and O written once (4 S d), the
    S x S scores written and read back, the probabilities written and read back (4 S^2)."""
    return b * (4 * s * d + 4 * s * s)


def tiled_bytes(s, d=HEAD_DIM, b=BYTES, tile=TILE):
    """Bytes one head moves with tiles, at most: Q read and O written once, K and V read once per query
    tile; at least 4 S d (each once) when the re-reads hit the L2 cache instead of memory."""
    return b * (2 * s * d + 2 * s * d * math.ceil(s / tile))


def decode_blocks(batch, kv_heads=KV_HEADS, splits=1):
    """Thread blocks of a decode attention kernel that gives each (sequence, K/V head) pair one block per
    split of its keys: a block reads its pair's keys once for all the query heads that share them."""
    return batch * kv_heads * splits


# --8<-- [end:bytes]


def check(s=1000, seed=0):
    """Largest |difference| from naive attention of the tiled output (S = s, not a multiple of the tile) and
    of the split decode of the last query (8 splits), in float64."""
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((s, HEAD_DIM)) for _ in range(3))
    ref = naive_attention(q, k, v)
    return np.abs(tiled_attention(q, k, v) - ref).max(), np.abs(split_kv_decode(q[-1:], k, v, 8) - ref[-1:]).max()


def plot(ax, contexts=CONTEXTS):
    """Draw the bytes one head moves against S, naive and tiled (at most and at least), on the matplotlib axes `ax`."""
    xs = [2 ** (k / 4) for k in range(4 * 8, 4 * 15 + 1)]  # 256 .. 32,768 tokens
    ax.loglog(xs, [naive_bytes(x) for x in xs], color="tab:red", label="naive: the S x S matrix written, read twice")
    ax.loglog(xs, [tiled_bytes(x) for x in xs], color="tab:blue", label=f"tiled, K and V re-read per {TILE} queries")
    ax.loglog(xs, [4 * x * HEAD_DIM * BYTES for x in xs], "--", color="tab:blue", label="tiled, each tensor once")
    ax.set(xlabel="tokens S (queries = keys, one head, BF16)", ylabel="bytes through memory")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small", loc="upper left")


def main():
    """Check the three methods agree, then print the bytes table and the decode blocks."""
    tiled_err, split_err = check()
    print(f"largest difference from naive attention: tiled {tiled_err:.1e}, split decode {split_err:.1e}")
    print()
    print("| S | score matrix per head (MB) | naive (MB) | tiled, at most (MB) | naive / tiled |")
    print("|---:|---:|---:|---:|---:|")
    for s in CONTEXTS:
        naive, tiled = naive_bytes(s), tiled_bytes(s)
        print(f"| {s:,} | {s * s * BYTES / 1e6:,.1f} | {naive / 1e6:,.1f} | {tiled / 1e6:,.1f} | {naive / tiled:.2f} |")
    print()
    one = decode_blocks(1)
    print(f"decode at batch 1: {one} blocks for {SMS} SMs; {math.ceil(SMS / one)} splits fill them")


if __name__ == "__main__":
    main()
