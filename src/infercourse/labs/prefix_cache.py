"""Lab 5A, ``snippets/labs/prefix_cache.py``: automatic prefix caching, cached tokens and counters.

Receipt rows, one per :data:`GRID` entry (key ``prefix_tokens``, ``suffix_tokens``): ``prompt_tokens``
(P, tokens), ``requests`` (sent one after another, the cache reset before the first),
``cached_first`` (the first request's ``num_cached_tokens``), ``cached_later_min`` /
``cached_later_max`` (the others'), ``queries`` / ``hits`` (tokens: growth of vLLM's
``vllm:prefix_cache_queries`` / ``vllm:prefix_cache_hits`` over the row), ``ttft_cold_ms`` (the first
request) and ``ttft_hit_ms`` (median of the others), in ms. ``settings.block_size`` is the engine's
own block size (``vllm:cache_config_info``).

The token claims are exact on any machine, the CPU included; the TTFT claim is checked on GPU
receipts only (:func:`~infercourse.labs.core.gpu_timing`).
"""

from __future__ import annotations

from infercourse import fmt
from infercourse.labs.core import ClaimResult, Column, LabSpec, LabWork, Receipt, gpu_timing, lab_constant, lab_grid
from infercourse.memory import cached_prefix_tokens
from infercourse.registry import COURSE_MODEL, LAB_GPU, VLLM_DEFAULT_BLOCK_SIZE, gpu, model
from infercourse.roofline import prefill_floor

GRID = lab_grid("prefix_cache")
"""(shared prefix tokens, unique suffix tokens) rows of the lab, read from the lab itself."""
REQUESTS = lab_constant("prefix_cache", "REQUESTS")
OUTPUT_TOKENS = lab_constant("prefix_cache", "OUTPUT_TOKENS")

HIT_SAVES_FROM = 1024
"""The TTFT claim covers rows whose later requests find at least this many cached tokens: there the
cold prefill floor on an RTX 4090 is over 4x the hit's (prediction table), far beyond run-to-run noise."""


def expected_cached(row, block_size: int) -> int:
    """Cached tokens of a row's later requests: :func:`infercourse.memory.cached_prefix_tokens`."""
    return cached_prefix_tokens(row["prefix_tokens"], row["prompt_tokens"], block_size)


def first_request_cold(receipt: Receipt) -> ClaimResult:
    wrong = [f"prefix {r['prefix_tokens']}: {r['cached_first']}" for r in receipt["results"] if r["cached_first"] != 0]
    return ClaimResult(
        "first_request_cold",
        "after reset_prefix_cache() the first request of every row has 0 cached tokens, although "
        "its prefix begins like the previous rows'",
        not wrong,
        "; ".join(wrong) or f"all {len(receipt['results'])} rows: 0",
    )


def cached_tokens_exact(receipt: Receipt) -> ClaimResult:
    block = receipt["settings"]["block_size"]
    details, ok = [], True
    for r in receipt["results"]:
        want = expected_cached(r, block)
        ok &= r["cached_later_min"] == r["cached_later_max"] == want
        details.append(
            f"{r['prefix_tokens']}+{r['suffix_tokens']}: {r['cached_later_min']}-{r['cached_later_max']} "
            f"(expected {want})"
        )
    return ClaimResult(
        "cached_tokens_exact",
        f"every later request has floor(min(L, P - 1) / {block}) x {block} cached tokens: the "
        "shared prefix's full blocks, never the whole prompt",
        ok,
        "; ".join(details),
    )


def counters_exact(receipt: Receipt) -> ClaimResult:
    block = receipt["settings"]["block_size"]
    details, ok = [], True
    for r in receipt["results"]:
        queries = r["requests"] * r["prompt_tokens"]
        hits = (r["requests"] - 1) * expected_cached(r, block)
        ok &= (r["queries"], r["hits"]) == (queries, hits)
        details.append(
            f"{r['prefix_tokens']}+{r['suffix_tokens']}: {r['queries']} / {r['hits']} (expected {queries} / {hits})"
        )
    return ClaimResult(
        "counters_exact",
        "vllm:prefix_cache_queries grows by the prompt tokens sent and vllm:prefix_cache_hits by "
        "the cached ones, to the token",
        ok,
        "; ".join(details),
    )


@gpu_timing
def hit_faster(receipt: Receipt) -> ClaimResult:
    block = receipt["settings"]["block_size"]
    rows = [r for r in receipt["results"] if expected_cached(r, block) >= HIT_SAVES_FROM]
    statement = f"with {HIT_SAVES_FROM:,} or more cached tokens a hit's TTFT is below the cold request's"
    if not rows:
        return ClaimResult("hit_faster", statement, None, "no row caches that many tokens")
    return ClaimResult(
        "hit_faster",
        statement,
        all(r["ttft_hit_ms"] < r["ttft_cold_ms"] for r in rows),
        "; ".join(f"prefix {r['prefix_tokens']}: {r['ttft_hit_ms']:.1f} vs {r['ttft_cold_ms']:.1f} ms" for r in rows),
    )


def prediction(gpu_name: str = LAB_GPU, model_name: str = COURSE_MODEL) -> str:
    """Markdown: cached tokens per row (blocks of 16) and the cold and hit TTFT floors on ``gpu_name``."""
    facts, config = gpu(gpu_name), model(model_name).config
    lines = [
        f"{model_name} in BF16 on the {gpu_name}, blocks of {VLLM_DEFAULT_BLOCK_SIZE} tokens. Cached tokens "
        "are exact; the TTFT floors are `roofline.prefill_floor` over the whole prompt (cold) and over the "
        "uncached tokens only (hit: a lower bound that leaves out their attention to the cached ones).",
        "",
        "| prefix L | suffix | prompt P | cached (later requests) | TTFT floor cold (ms) | TTFT floor hit (ms) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for prefix, suffix in GRID:
        p = prefix + suffix
        c = cached_prefix_tokens(prefix, p, VLLM_DEFAULT_BLOCK_SIZE)
        cold, hit = prefill_floor(facts, config, p), prefill_floor(facts, config, p - c)
        lines.append(
            f"| {fmt.count(prefix)} | {fmt.count(suffix)} | {fmt.count(p)} | {fmt.count(c)} | "
            f"{fmt.fixed(cold * 1e3, 1)} | {fmt.fixed(hit * 1e3, 1)} |"
        )
    return "\n".join(lines)


SPEC = LabSpec(
    lab="prefix_cache",
    lesson="5A",
    row={
        "prefix_tokens": int,
        "suffix_tokens": int,
        "prompt_tokens": int,
        "requests": int,
        "cached_first": int,
        "cached_later_min": int,
        "cached_later_max": int,
        "queries": int,
        "hits": int,
        "ttft_cold_ms": (int, float),
        "ttft_hit_ms": (int, float),
    },
    units={
        "prompt_tokens": "tokens",
        "requests": "requests",
        "cached_first": "tokens",
        "cached_later_min": "tokens",
        "cached_later_max": "tokens",
        "queries": "tokens",
        "hits": "tokens",
        "ttft_cold_ms": "ms",
        "ttft_hit_ms": "ms",
    },
    key=("prefix_tokens", "suffix_tokens"),
    header="TTFT cold (ms)",
    claims=(first_request_cold, cached_tokens_exact, counters_exact, hit_faster),
    prediction=prediction,
    columns=(
        Column("prefix_tokens", "prefix", fmt.count),
        Column("suffix_tokens", "suffix", fmt.count),
        Column("cached_later_max", "cached", fmt.count),
        Column("hits", "hits", fmt.count),
        Column("ttft_cold_ms", "TTFT cold (ms)", lambda v: fmt.fixed(v, 1)),
        Column("ttft_hit_ms", "TTFT hit (ms)", lambda v: fmt.fixed(v, 1)),
    ),
    grid=GRID,
    work=LabWork(
        engines=1,
        decode_steps=(len(GRID) * REQUESTS + 1) * OUTPUT_TOKENS,  # + the warm-up request
        peak_kv_tokens=lab_constant("prefix_cache", "MAX_MODEL_LEN"),
    ),
)
