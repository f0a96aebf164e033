"""Serving metrics from token timestamps: TTFT, TPOT, ITL, E2E latency, throughput, goodput.

Pure Python, no GPU. Run it: `python latency_metrics.py` prints Markdown tables for a handful of
made-up requests, chosen so that the request-weighted mean TPOT and the token-weighted mean ITL
come out different, and a second set where every request has the same length and they agree.

Definitions (the same as `vllm bench serve` uses):
- TTFT  = first token time - arrival time
- TPOT  = (last token time - first token time) / (output tokens - 1), one value per request
- ITL   = every gap between two consecutive tokens of a request, pooled over all requests
- E2E   = last token time - arrival time
Times are in milliseconds.
"""

from dataclasses import dataclass

# --8<-- [start:metrics]
# Service-level objectives for the goodput example (per request, both must hold).
SLO_TTFT_MS = 200.0
SLO_TPOT_MS = 50.0


@dataclass(frozen=True)
class Request:
    """One request: when it arrived and when each of its output tokens reached the client (ms)."""

    name: str
    arrival_ms: float
    token_ms: tuple  # times of output tokens 1..n, non-decreasing, none before arrival

    def __post_init__(self):
        if len(self.token_ms) < 1:
            raise ValueError(f"token_ms of request {self.name!r} must hold at least one token time")
        times = (self.arrival_ms, *self.token_ms)
        if any(later < earlier for earlier, later in zip(times, times[1:], strict=False)):
            raise ValueError(f"token_ms of request {self.name!r} must be non-decreasing and not before arrival_ms")


def ttft(r):
    return r.token_ms[0] - r.arrival_ms


def e2e(r):
    return r.token_ms[-1] - r.arrival_ms


def itls(r):
    """Gaps between consecutive tokens of one request (n - 1 values)."""
    return [b - a for a, b in zip(r.token_ms, r.token_ms[1:], strict=False)]


def tpot(r):
    """Mean gap of ONE request; None for a one-token request (no gap to average)."""
    n = len(r.token_ms)
    return (r.token_ms[-1] - r.token_ms[0]) / (n - 1) if n > 1 else None


def percentile(values, p):
    """The p-th percentile (0..100) with linear interpolation between ranks (numpy's default)."""
    if not values or not 0 <= p <= 100:
        raise ValueError(f"need values and 0 <= p <= 100, got {len(values)} values and p={p!r}")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def mean(values):
    return sum(values) / len(values)


def meets_slo(r, slo_ttft_ms=SLO_TTFT_MS, slo_tpot_ms=SLO_TPOT_MS):
    t = tpot(r)
    return ttft(r) <= slo_ttft_ms and (t is None or t <= slo_tpot_ms)


def summary(requests, slo_ttft_ms=SLO_TTFT_MS, slo_tpot_ms=SLO_TPOT_MS):
    """Aggregate metrics over a run: means, ITL percentiles, throughput and goodput.

    The run lasts from the first arrival to the last token of any request.
    """
    gaps = [g for r in requests for g in itls(r)]
    tpots = [t for r in requests if (t := tpot(r)) is not None]
    duration_s = (max(r.token_ms[-1] for r in requests) - min(r.arrival_ms for r in requests)) / 1e3
    good = sum(meets_slo(r, slo_ttft_ms, slo_tpot_ms) for r in requests)
    return {
        "mean_ttft_ms": mean([ttft(r) for r in requests]),
        "mean_tpot_ms": mean(tpots),  # request-weighted: every request counts once
        "mean_itl_ms": mean(gaps),  # token-weighted: every gap counts once
        "median_itl_ms": percentile(gaps, 50),
        "p90_itl_ms": percentile(gaps, 90),
        "p99_itl_ms": percentile(gaps, 99),
        "mean_e2el_ms": mean([e2e(r) for r in requests]),
        "duration_s": duration_s,
        "request_throughput": len(requests) / duration_s,  # requests/s
        "output_throughput": sum(len(r.token_ms) for r in requests) / duration_s,  # output tokens/s
        "goodput": good / duration_s,  # requests/s that met both SLOs
    }


def evenly(first_ms, gap_ms, n):
    """n token times starting at first_ms, gap_ms apart."""
    return tuple(first_ms + i * gap_ms for i in range(n))


# Three requests of different lengths: a short one with slow steps, a long one with fast steps,
# and one that arrives later, waits in the queue, and has one stalled step.
MIXED = (
    Request("A", 0, evenly(100, 60, 3)),
    Request("B", 0, evenly(150, 20, 11)),
    Request("C", 100, (400, 430, 460, 610, 640)),
)

# The same steps, but every request produces 5 tokens.
SAME_LENGTH = (
    Request("A", 0, evenly(100, 60, 5)),
    Request("B", 0, evenly(150, 20, 5)),
    Request("C", 100, (400, 430, 460, 610, 640)),
)
# --8<-- [end:metrics]


def print_requests(requests):
    """One row per request: its own TTFT, TPOT, E2E and whether it met the SLOs."""
    print("| request | arrival (ms) | output tokens | TTFT (ms) | TPOT (ms) | ITLs (ms) | E2E (ms) | meets SLOs |")
    print("|---|---:|---:|---:|---:|---|---:|---|")
    for r in requests:
        gaps = ", ".join(f"{g:g}" for g in itls(r))
        print(
            f"| {r.name} | {r.arrival_ms:g} | {len(r.token_ms)} | {ttft(r):g} | {tpot(r):.1f} | {gaps} | "
            f"{e2e(r):g} | {'yes' if meets_slo(r) else 'no'} |"
        )


def print_summary(runs):
    """One column per named run of requests: the aggregate numbers a benchmark reports."""
    sums = {name: summary(requests) for name, requests in runs.items()}
    rows = [
        ("mean TTFT (ms)", "mean_ttft_ms", "{:.1f}"),
        ("mean TPOT (ms), request-weighted", "mean_tpot_ms", "{:.2f}"),
        ("mean ITL (ms), token-weighted", "mean_itl_ms", "{:.2f}"),
        ("median ITL (ms)", "median_itl_ms", "{:.1f}"),
        ("p90 ITL (ms)", "p90_itl_ms", "{:.1f}"),
        ("p99 ITL (ms)", "p99_itl_ms", "{:.1f}"),
        ("mean E2E latency (ms)", "mean_e2el_ms", "{:.1f}"),
        ("duration (s)", "duration_s", "{:.3f}"),
        ("throughput (requests/s)", "request_throughput", "{:.2f}"),
        ("throughput (output tokens/s)", "output_throughput", "{:.2f}"),
        (f"goodput (requests/s, TTFT <= {SLO_TTFT_MS:g} ms and TPOT <= {SLO_TPOT_MS:g} ms)", "goodput", "{:.2f}"),
    ]
    print("| metric | " + " | ".join(runs) + " |")
    print("|---|" + "---:|" * len(runs))
    for label, key, form in rows:
        print(f"| {label} | " + " | ".join(form.format(s[key]) for s in sums.values()) + " |")


if __name__ == "__main__":
    print_requests(MIXED)
    print()
    print_requests(SAME_LENGTH)
    print()
    print_summary({"mixed lengths": MIXED, "same length": SAME_LENGTH})
