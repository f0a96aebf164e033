"""How many experts a batch of tokens reaches in one mixture-of-experts layer: the formula against a simulation.

NumPy only (matplotlib for the figure), no GPU. Run it: `python moe_routing.py` routes batches of random
tokens to experts the way a router does (each token picks its top k of E scores, k different experts) and
counts the distinct experts each batch reaches, against E (1 - (1 - k/E)^B), which assumes every token picks
uniformly and independently of the others. A second router prefers some experts over others (a skewed
popularity, as trained routers show without load balancing): the same batch then reaches fewer experts.

Why it matters: a decode step reads the weights of every expert its batch reaches. At batch 1 that is k
experts per layer; as the batch grows it tends to all E.
"""

import numpy as np

MODELS = {  # (E routed experts per layer, k per token), from each model's config.json
    "OLMoE-1B-7B": (64, 8),
    "Qwen3-30B-A3B": (128, 8),
    "DeepSeek-V3": (256, 8),
}
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # the figure's skewed points
SHOWN = (1, 8, 64, 256)  # the table's batches
SKEW = 1.0  # popularity of expert i proportional to 1 / (i + 1)^SKEW: a router without load balancing


# --8<-- [start:route]
def expected_touched(experts, top_k, batch):
    """E (1 - (1 - k/E)^B): one token leaves a given expert out with probability 1 - k/E; B tokens all do
    with (1 - k/E)^B (independent, uniform routing)."""
    return experts * (1 - (1 - top_k / experts) ** batch)


def route(rng, experts, top_k, batch, popularity=None):
    """Each of ``batch`` tokens picks its top ``top_k`` experts: random scores (Gumbel noise, plus the log of
    each expert's popularity when given), the k largest win. Returns a (batch, k) array of expert ids."""
    scores = rng.gumbel(size=(batch, experts))
    if popularity is not None:
        scores += np.log(popularity)
    return np.argpartition(-scores, top_k - 1, axis=1)[:, :top_k]


def touched(rng, experts, top_k, batch, trials=2000, popularity=None):
    """Mean number of distinct experts a batch reaches, over ``trials`` random batches."""
    return np.mean([len(np.unique(route(rng, experts, top_k, batch, popularity))) for _ in range(trials)])


def skewed(experts):
    """Popularity 1 / (i + 1)^SKEW of expert i, normalised to sum to 1."""
    weights = 1 / np.arange(1, experts + 1) ** SKEW
    return weights / weights.sum()


# --8<-- [end:route]


def table(seed=0):
    """Rows (model, E, k, B, formula, simulated uniform, simulated skewed) for every model and batch."""
    rng = np.random.default_rng(seed)
    rows = []
    for name, (experts, top_k) in MODELS.items():
        for batch in SHOWN:
            rows.append(
                (
                    name,
                    experts,
                    top_k,
                    batch,
                    expected_touched(experts, top_k, batch),
                    touched(rng, experts, top_k, batch, trials=300),
                    touched(rng, experts, top_k, batch, trials=300, popularity=skewed(experts)),
                )
            )
    return rows


def plot(ax, seed=0):
    """Draw the share of experts a batch reaches against B, per model, formula and skewed, on the axes `ax`."""
    rng = np.random.default_rng(seed)
    xs = [2 ** (i / 4) for i in range(0, 4 * 10 + 1)]  # 1 .. 1,024 tokens
    for (name, (experts, top_k)), color in zip(MODELS.items(), ("tab:blue", "tab:orange", "tab:green"), strict=True):
        ax.semilogx(
            xs,
            [expected_touched(experts, top_k, x) / experts for x in xs],
            color=color,
            label=f"{name}: E = {experts}, k = {top_k}, uniform",
        )
        skew = [touched(rng, experts, top_k, b, trials=200, popularity=skewed(experts)) / experts for b in BATCHES]
        ax.semilogx(BATCHES, skew, "o--", color=color, markersize=3, label=f"{name}: skewed router (simulated)")
    ax.set(xlabel="tokens in the batch, B", ylabel="share of the E experts read")
    ax.set_ylim(0, 1.02)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")


def main():
    """Print the formula beside the simulation for each model and batch."""
    print("| model | B | formula | simulated, uniform | simulated, skewed |")
    print("|---|---:|---:|---:|---:|")
    for name, experts, _, batch, formula, uniform, skew in table():
        print(f"| {name} (E = {experts}) | {batch} | {formula:.1f} | {uniform:.1f} | {skew:.1f} |")


if __name__ == "__main__":
    main()
