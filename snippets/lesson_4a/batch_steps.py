"""Static vs continuous batching, counted in engine steps (standard library only).

Each request needs n_i steps: the step that runs its prompt samples its first token, and each later
step one more. A static batch runs until its longest request ends; continuous batching gives a
freed slot to the next waiting request at the very next step (every prompt here fits one step).
"""

import random


# --8<-- [start:steps]
def static_steps(lengths, batch):
    """Steps to run ``lengths`` in chunks of ``batch``, each chunk to its longest request."""
    return sum(max(lengths[k : k + batch]) for k in range(0, len(lengths), batch))


def continuous_steps(lengths, batch):
    """Steps when a request joins at the first step after a slot frees (first come, first served)."""
    free_at = [0] * batch  # the step after which each slot is free
    for n in lengths:
        slot = min(range(batch), key=lambda s: free_at[s])  # the earliest free slot (lowest index on ties)
        free_at[slot] += n
    return max(free_at)


def expected_max(low, high, batch):
    """E[max of ``batch`` lengths uniform on low..high]: low + sum over k of P(max > k)."""
    m = high - low + 1
    return low + sum(1 - ((k - low + 1) / m) ** batch for k in range(low, high))


# --8<-- [end:steps]


def main(requests=256, low=16, high=512, seed=0):
    rng = random.Random(seed)
    lengths = [rng.randint(low, high) for _ in range(requests)]
    tokens = sum(lengths)
    print(f"{requests} requests, outputs uniform on {low}-{high} (seed {seed}), {tokens:,} tokens in all:\n")
    print("| B | static steps | continuous steps | static used | E[n]/E[max n] |")  # a Markdown table
    print("|---:|---:|---:|---:|---:|")
    for batch in (1, 8, 32, 128):
        s, c = static_steps(lengths, batch), continuous_steps(lengths, batch)
        used = tokens / (batch * s)  # share of the static slots that produced a token
        print(f"| {batch} | {s:,} | {c:,} | {used:.3f} | {(low + high) / 2 / expected_max(low, high, batch):.3f} |")


if __name__ == "__main__":
    main()
