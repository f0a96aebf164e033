"""Speculative sampling on a toy vocabulary: acceptance, the exact output distribution, tokens per step.

Standard library only. Run: python snippets/lesson_6a/rejection_sampling.py
"""

import random

# --8<-- [start:acceptance]
TARGET = {"the": 0.50, "a": 0.30, "cat": 0.15, "dog": 0.05}  # pi(x): the target model's next token
DRAFT = {"the": 0.30, "a": 0.50, "cat": 0.05, "dog": 0.15}  # q(x): the draft model's next token
K = 4  # draft tokens per step
STEPS = 200_000  # simulated target steps
SEED = 0


def acceptance(pi, q):
    """alpha = sum over x of min(pi(x), q(x)): the chance a drafted token is kept."""
    return sum(min(pi[x], q[x]) for x in pi)


def output_distribution(pi, q):
    """Exact distribution of the token one draft-and-verify emits at one position.

    Draft x with q(x), keep it with min(1, pi(x)/q(x)); on a rejection, sample from the residual
    max(0, pi - q), normalised. Kept: min(pi, q)(x); rejected then x: (1 - alpha) * residual(x).
    """
    alpha = acceptance(pi, q)
    residual = {x: max(0.0, pi[x] - q[x]) for x in pi}
    total = sum(residual.values())
    return {x: min(pi[x], q[x]) + (1 - alpha) * residual[x] / total for x in pi}


def expected_tokens(alpha, k):
    """E = (1 - alpha^(k+1)) / (1 - alpha): accepted drafts plus the target's own token."""
    return k + 1 if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)


def simulate(alpha, k, steps, rng):
    """Mean tokens per target step when each draft token is kept with probability alpha, stopping
    at the first rejection; the target always adds one token (a correction or the bonus)."""
    total = 0
    for _ in range(steps):
        kept = 0
        while kept < k and rng.random() < alpha:
            kept += 1
        total += kept + 1
    return total / steps


# --8<-- [end:acceptance]


def main():
    alpha = acceptance(TARGET, DRAFT)
    out = output_distribution(TARGET, DRAFT)
    print(f"alpha = sum min(pi, q) = {alpha:.2f}")
    print(f"{'token':<6} {'pi (target)':>11} {'q (draft)':>10} {'emitted':>8}")
    for x in TARGET:
        print(f"{x:<6} {TARGET[x]:>11.2f} {DRAFT[x]:>10.2f} {out[x]:>8.4f}")
    rng = random.Random(SEED)
    print(f"\n{'k':>2} {'E formula':>10} {'E simulated':>12}")
    for k in range(1, K + 1):
        print(f"{k:>2} {expected_tokens(alpha, k):>10.4f} {simulate(alpha, k, STEPS, rng):>12.4f}")


if __name__ == "__main__":
    main()
