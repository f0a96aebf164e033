"""Megatron tensor parallelism on one MLP, in plain Python: split the up projection by columns and
the down projection by rows over T ranks, add the ranks' partial outputs (the all-reduce), and get
exactly the unsplit result. Integer weights keep every sum exact, so "equal" means equal."""

import random

D, F, TOKENS = 8, 12, 3  # hidden size d, MLP width f, tokens in the batch


# --8<-- [start:mlp]
def matmul(x, w):
    """x: TOKENS x n, w: n x m -> TOKENS x m."""
    return [[sum(row[k] * w[k][j] for k in range(len(w))) for j in range(len(w[0]))] for row in x]


def relu(x):
    return [[max(v, 0) for v in row] for row in x]


def mlp(x, w_up, w_down):
    return matmul(relu(matmul(x, w_up)), w_down)


def tensor_parallel_mlp(x, w_up, w_down, ranks):
    """Rank r holds columns r*F/T..(r+1)*F/T of w_up and the same rows of w_down; needs no
    communication until the end, where the ranks' partial outputs are summed (one all-reduce)."""
    part = F // ranks
    partials, elements = [], []
    for r in range(ranks):
        cols = range(r * part, (r + 1) * part)
        up_r = [[row[j] for j in cols] for row in w_up]  # column-parallel: d x F/T
        down_r = [w_down[j] for j in cols]  # row-parallel: F/T x d
        partials.append(matmul(relu(matmul(x, up_r)), down_r))  # the nonlinearity stays rank-local
        elements.append(D * part + part * D)
    summed = [[sum(p[i][j] for p in partials) for j in range(D)] for i in range(TOKENS)]  # the all-reduce
    return summed, elements


# --8<-- [end:mlp]


def main():
    rng = random.Random(0)
    x = [[rng.randint(-3, 3) for _ in range(D)] for _ in range(TOKENS)]
    w_up = [[rng.randint(-3, 3) for _ in range(F)] for _ in range(D)]
    w_down = [[rng.randint(-3, 3) for _ in range(D)] for _ in range(F)]
    whole = mlp(x, w_up, w_down)
    print(f"d = {D}, f = {F}: the unsplit MLP holds {2 * D * F} weights.\n")
    print("| T | weights per rank | sum | all-reduce bytes (fp16) | equal |")  # a Markdown table
    print("|---:|---:|---:|---:|---|")
    for ranks in (1, 2, 3, 4, 6):
        out, elements = tensor_parallel_mlp(x, w_up, w_down, ranks)
        message = TOKENS * D * 2 if ranks > 1 else 0  # B x d values of 2 bytes
        shown = " + ".join(map(str, elements)) if ranks <= 3 else f"{ranks} x {elements[0]}"
        print(f"| {ranks} | {shown} | {sum(elements)} | {message} | {out == whole} |")


if __name__ == "__main__":
    main()
