"""A toy paged KV cache with automatic prefix caching, the way vLLM 0.26.0 decides what a prompt reuses.

Pure Python, no GPU, no model: it tracks token ids and blocks, not keys and values. Run it:
`python prefix_blocks.py` prints, for a few prompts, the blocks each one holds, the slots it wastes
and the tokens it finds cached. Block size 16 (vLLM on CUDA); sha256 over (parent hash, block
tokens), as vLLM's default `prefix_caching_hash_algo`.
"""

import hashlib
import random

# --8<-- [start:cache]
BLOCK_SIZE = 16  # tokens per KV block


def block_hashes(token_ids, block_size=BLOCK_SIZE):
    """One hash per FULL block, each chained to the one before (a partial last block gets none)."""
    hashes, parent = [], b""
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        block = token_ids[start : start + block_size]
        parent = hashlib.sha256(parent + repr(tuple(block)).encode()).digest()
        hashes.append(parent)
    return hashes


class PrefixCache:
    """The set of block hashes computed so far (vLLM also keeps the blocks and evicts them LRU)."""

    def __init__(self, block_size=BLOCK_SIZE):
        self.block_size, self.cached = block_size, set()
        self.queries = self.hits = 0  # tokens, like vllm:prefix_cache_queries / _hits

    def admit(self, token_ids):
        """Look a prompt up, then cache its full blocks. Returns its cached tokens (num_cached_tokens)."""
        if not token_ids:
            raise ValueError("a prompt needs at least one token")
        hashes = block_hashes(token_ids, self.block_size)
        limit = (len(token_ids) - 1) // self.block_size  # at most prompt - 1 tokens: the last one is recomputed
        hit_blocks = 0
        for h in hashes[:limit]:
            if h not in self.cached:
                break  # the chain breaks at the first miss: later blocks cannot match
            hit_blocks += 1
        self.cached.update(hashes)
        cached = hit_blocks * self.block_size
        self.queries, self.hits = self.queries + len(token_ids), self.hits + cached
        return cached

    def reset(self):
        self.cached.clear()


def blocks_and_waste(tokens, block_size=BLOCK_SIZE):
    """(blocks a sequence of `tokens` holds, slots of its last block left empty)."""
    blocks = -(-tokens // block_size)
    return blocks, blocks * block_size - tokens


# --8<-- [end:cache]


def main():
    rng = random.Random(0)
    system = [rng.randrange(32000) for _ in range(2000)]  # a 2,000-token system prompt
    cache = PrefixCache()
    print("| request | prompt tokens | blocks | empty slots | cached tokens | recomputed |")
    print("|---|---:|---:|---:|---:|---:|")
    prompts = [
        ("user A", system + [rng.randrange(32000) for _ in range(64)]),
        ("user B", system + [rng.randrange(32000) for _ in range(64)]),
        ("user A again", None),  # the exact same prompt as user A
        ("other app", [rng.randrange(32000) for _ in range(300)]),
    ]
    prompts[2] = ("user A again", prompts[0][1])
    for name, prompt in prompts:
        cached = cache.admit(prompt)
        blocks, empty = blocks_and_waste(len(prompt))
        print(f"| {name} | {len(prompt):,} | {blocks} | {empty} | {cached:,} | {len(prompt) - cached:,} |")
    print(f"\nqueries {cache.queries:,} tokens, hits {cache.hits:,} tokens: hit rate {cache.hits / cache.queries:.1%}")


if __name__ == "__main__":
    main()
