"""Decode-first scheduling under a token budget: how a long prompt is cut into chunks beside running decoders.

A toy of vLLM's scheduler (CPU only, no vLLM): each engine step carries at most `budget` tokens; the
decoders already running take one token each first, and the waiting prompt gets what is left. With
chunking off the prompt must fit in one step whole. Prints, per budget, the steps until the prompt's
first token, the chunks it was cut into and the most tokens any step carried.
"""

from __future__ import annotations

import math


# --8<-- [start:schedule]
def schedule(prompt_tokens: int, budget: int, decoders: int, chunking: bool = True) -> list[tuple[int, int]]:
    """Steps of one prompt's prefill beside `decoders` running requests: a list of (decode tokens, chunk tokens).

    The last step's chunk completes the prompt, and that step samples its first token.
    Raises ValueError when the budget leaves no room for the prompt.
    """
    room = budget - decoders
    if room <= 0 or (not chunking and room < prompt_tokens):
        raise ValueError(f"a budget of {budget} tokens leaves no room for the prompt beside {decoders} decoders")
    steps, left = [], prompt_tokens
    while left > 0:
        chunk = min(left, room)
        steps.append((decoders, chunk))
        left -= chunk
    return steps


def main() -> None:
    prompt, decoders = 16_384, 16
    print(f"A {prompt:,}-token prompt arrives beside {decoders} running decoders:\n")
    print("| budget | chunking | steps | ceil(P/(C-D)) | first chunk | last chunk | max tokens/step |")  # Markdown
    print("|---:|---|---:|---:|---:|---:|---:|")
    for budget, chunking in ((512, True), (2048, True), (8192, True), (20_480, False)):
        steps = schedule(prompt, budget, decoders, chunking)
        rule = math.ceil(prompt / (budget - decoders))
        biggest = max(d + c for d, c in steps)
        print(
            f"| {budget:,} | {'on' if chunking else 'off'} | {len(steps)} | {rule} "
            f"| {steps[0][1]:,} | {steps[-1][1]:,} | {biggest:,} |"
        )


# --8<-- [end:schedule]


if __name__ == "__main__":
    main()
