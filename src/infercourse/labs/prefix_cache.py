"""Lab 5A, ``snippets/labs/prefix_cache.py``: prefix caching, shared blocks, eviction and preemption.

Receipt rows, one per :data:`GRID` entry (key ``run``, ``prefix_tokens``, ``suffix_tokens``; the runs are
described in the lab's ``GRID``): ``prompt_tokens`` (P, tokens), ``requests``, ``cached_first`` (the
first request's ``num_cached_tokens``), ``cached_later_min`` / ``cached_later_max`` (the others'; all
three None for ``parallel_n``, whose n samples come back as one output), ``queries`` / ``hits``
(tokens: growth of vLLM's ``vllm:prefix_cache_queries`` / ``vllm:prefix_cache_hits`` over the row's
counted requests), ``preemptions`` (growth of ``vllm:num_preemptions``), ``ttft_cold_ms`` (the first
request) and ``ttft_hit_ms`` (median of the others), in ms, for the runs that send one request at a
time (else None). ``settings`` has the engine's ``block_size`` and ``num_gpu_blocks``
(``vllm:cache_config_info``).

The token and preemption claims are exact on any machine, the CPU included; the TTFT claim is checked
on GPU receipts only (:func:`~infercourse.labs.core.gpu_timing`).
"""

from __future__ import annotations

from infercourse import fmt
from infercourse.exercises import Exercise
from infercourse.labs import core
from infercourse.memory import cached_prefix_tokens
from infercourse.registry import COURSE_MODEL, LAB_GPU, VLLM_DEFAULT_BLOCK_SIZE, gpu, model
from infercourse.roofline import Demand, chunk_step_floor, prefill_demand, prefill_floor

GRID = core.lab_grid("prefix_cache")
"""(run, shared prefix tokens, unique suffix tokens) rows of the lab, read from the lab itself."""
SEQUENTIAL = tuple((prefix, suffix) for run, prefix, suffix in GRID if run == "sequential")
"""The (prefix, suffix) rows sent one request at a time: the prediction's rows."""
LAB = core.lab_settings("prefix_cache")

HIT_SAVES_FROM = 1024
"""The TTFT claim covers rows whose later requests find at least this many cached tokens: there the
cold prefill floor on an RTX 4090 is over 4x the hit's (prediction table), far beyond run-to-run noise."""


def expected_cached(row, block_size: int) -> int:
    """Cached tokens of a row's later requests: :func:`infercourse.memory.cached_prefix_tokens`."""
    return cached_prefix_tokens(row["prefix_tokens"], row["prompt_tokens"], block_size)


def _rows(receipt: core.Receipt, *runs: str) -> list:
    return [r for r in receipt["results"] if r["run"] in runs]


def _name(row) -> str:
    return f"{row['run']} {row['prefix_tokens']}+{row['suffix_tokens']}"


@core.claim
def first_request_cold(receipt: core.Receipt) -> core.ClaimResult:
    rows = _rows(receipt, "sequential", "together", "evicted")
    wrong = [f"{_name(r)}: {r['cached_first']}" for r in rows if r["cached_first"] != 0]
    return core.ClaimResult(
        "first_request_cold",
        "after reset_prefix_cache() the first request of every row has 0 cached tokens, although "
        "its prefix begins like the previous rows'",
        not wrong,
        "; ".join(wrong) or f"all {len(rows)} rows: 0",
    )


@core.claim
def cached_tokens_exact(receipt: core.Receipt) -> core.ClaimResult:
    block = receipt["settings"]["block_size"]
    details, ok = [], True
    for r in _rows(receipt, "sequential", "together"):
        want = expected_cached(r, block)
        ok &= r["cached_later_min"] == r["cached_later_max"] == want
        details.append(f"{_name(r)}: {r['cached_later_min']}-{r['cached_later_max']} (expected {want})")
    return core.ClaimResult(
        "cached_tokens_exact",
        f"every later request has floor(min(L, P - 1) / {block}) x {block} cached tokens: the "
        "shared prefix's full blocks, never the whole prompt (also for copies sent in one call)",
        ok,
        "; ".join(details),
    )


def compare(receipt: core.Receipt) -> list[core.Compared]:
    """The later requests' cached tokens beside :func:`expected_cached` (the full blocks of the shared prefix, as
    :func:`cached_tokens_exact`), for the rows that claim checks: sequential and together."""
    block = receipt["settings"]["block_size"]
    return core.compare_rows(
        receipt,
        "cached tokens",
        "tokens",
        "cached_later_max",
        lambda r: expected_cached(r, block),
        where=lambda r: r["run"] in ("sequential", "together"),
    )


@core.claim
def counters_exact(receipt: core.Receipt) -> core.ClaimResult:
    block = receipt["settings"]["block_size"]
    details, ok = [], True
    for r in _rows(receipt, "sequential", "together", "parallel_n"):
        queries = r["requests"] * r["prompt_tokens"]
        hits = (r["requests"] - 1) * expected_cached(r, block)
        ok &= (r["queries"], r["hits"]) == (queries, hits)
        details.append(f"{_name(r)}: {r['queries']} / {r['hits']} (expected {queries} / {hits})")
    return core.ClaimResult(
        "counters_exact",
        "vllm:prefix_cache_queries grows by the prompt tokens sent and vllm:prefix_cache_hits by "
        "the cached ones, to the token; n = 8 counts as 8 requests that share the prompt's full blocks",
        ok,
        "; ".join(details),
    )


@core.claim
def eviction_exact(receipt: core.Receipt) -> core.ClaimResult:
    rows = _rows(receipt, "evicted")
    ok = bool(rows) and all((r["cached_later_max"], r["hits"]) == (0, 0) for r in rows)
    return core.ClaimResult(
        "eviction_exact",
        "after unrelated prompts longer than the pool, the prefix's blocks have been reused: sent again "
        "it finds 0 cached tokens (0 hits)",
        ok,
        "; ".join(f"{_name(r)}: cached {r['cached_later_max']}, hits {r['hits']}" for r in rows) or "no evicted row",
    )


@core.claim
def pressure_preempts(receipt: core.Receipt) -> core.ClaimResult:
    pressed = _rows(receipt, "pressure")
    calm = [r for r in receipt["results"] if r["run"] != "pressure"]
    ok = bool(pressed) and all(r["preemptions"] > 0 for r in pressed) and all(r["preemptions"] == 0 for r in calm)
    return core.ClaimResult(
        "pressure_preempts",
        "requests that outgrow the pool while decoding are preempted (vllm:num_preemptions > 0); no other row preempts",
        ok,
        "; ".join(f"{_name(r)}: {r['preemptions']}" for r in receipt["results"] if r["preemptions"] or r in pressed),
    )


@core.gpu_timing
def hit_faster(receipt: core.Receipt) -> core.ClaimResult:
    block = receipt["settings"]["block_size"]
    rows = [r for r in _rows(receipt, "sequential") if expected_cached(r, block) >= HIT_SAVES_FROM]
    statement = f"with {HIT_SAVES_FROM:,} or more cached tokens a hit's TTFT is below the cold request's"
    if not rows:
        return core.ClaimResult("hit_faster", statement, None, "no row caches that many tokens")
    return core.ClaimResult(
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
    for prefix, suffix in SEQUENTIAL:
        p = prefix + suffix
        c = cached_prefix_tokens(prefix, p, VLLM_DEFAULT_BLOCK_SIZE)
        cold, hit = prefill_floor(facts, config, p), prefill_floor(facts, config, p - c)
        lines.append(
            f"| {fmt.count(prefix)} | {fmt.count(suffix)} | {fmt.count(p)} | {fmt.count(c)} | "
            f"{fmt.fixed(cold * 1e3, 1)} | {fmt.fixed(hit * 1e3, 1)} |"
        )
    return "\n".join(lines)


def demands(gpu_name: str = LAB_GPU, model_name: str = COURSE_MODEL) -> list[Demand]:
    """What the cold and hit TTFT floors of :func:`prediction` ask of ``gpu_name`` (a hit prefills the
    uncached tokens only)."""
    facts, config = gpu(gpu_name), model(model_name).config
    out = []
    for prefix, suffix in SEQUENTIAL:
        p = prefix + suffix
        new = p - cached_prefix_tokens(prefix, p, VLLM_DEFAULT_BLOCK_SIZE)
        for tokens, what in ((p, "cold"), (new, "hit")):
            ttft = prefill_floor(facts, config, tokens)
            out.append(prefill_demand(facts, config, tokens, ttft, f"prefix_cache: TTFT floor {what}, {p} tokens"))
    return out


# --- the notebook's exercises ----------------------------------------------------------------------

SHARED, PROMPT = 1000, 1200
"""Exercise 1: tokens a request shares with a cached prompt, and its own length."""
HIT_PROMPT, HIT_CACHED = 2048, 1536
"""Exercise 3: a prompt and the tokens of it the cache holds (whole blocks)."""


def _hit_speedup() -> float:
    facts, config = gpu(LAB_GPU), model(COURSE_MODEL).config
    hit = chunk_step_floor(facts, config, HIT_PROMPT - HIT_CACHED, HIT_CACHED)  # the new tokens see the cached ones
    return prefill_floor(facts, config, HIT_PROMPT) / hit


EXERCISES = (
    Exercise(
        f"A request's first {SHARED:,} tokens equal a prompt already in vLLM's prefix cache; its own prompt has "
        f"{PROMPT:,}. How many of its tokens does it find cached (blocks of {VLLM_DEFAULT_BLOCK_SIZE})?",
        lambda: cached_prefix_tokens(SHARED, PROMPT),
        "tokens",
        "Only full blocks are hashed and cached: the whole blocks of the shared part, floor(shared / block) × block "
        "(lesson 5A; the lab counts it: `cached_tokens_exact`).",
    ),
    Exercise(
        f"The same {PROMPT:,}-token prompt sent again, word for word: how many cached tokens?",
        lambda: cached_prefix_tokens(PROMPT, PROMPT),
        "tokens",
        "vLLM caps a hit at prompt − 1 tokens, so that the last token is computed again for its logits: "
        "floor((prompt − 1) / block) × block; a prompt of whole blocks loses its whole last block "
        "(lesson 5A).",
    ),
    Exercise(
        f"On the {LAB_GPU}, a {HIT_PROMPT:,}-token prompt whose first {HIT_CACHED:,} tokens hit the cache: by what "
        "factor is its TTFT floor below a cold one's?",
        _hit_speedup,
        "times",
        "A hit's prefill computes only the uncached tokens; long prefills are compute-bound, so the floor falls "
        "with them, a little less than in proportion: the new tokens still attend to all the cached ones "
        "(lesson 5A).",
        rel_tol=0.05,
    ),
)


SPEC = core.lab_spec(
    __name__,
    key=("run", "prefix_tokens", "suffix_tokens"),
    header="TTFT cold (ms)",
    columns=(
        core.Column.text("run"),
        core.Column.count("prefix_tokens", "prefix"),
        core.Column.count("suffix_tokens", "suffix"),
        core.Column.count("cached_later_max", "cached"),
        core.Column.count("hits"),
        core.Column.count("preemptions", "preempted"),
        core.Column("ttft_cold_ms", "TTFT cold (ms)", lambda v: fmt.fixed(v, 1)),
        core.Column("ttft_hit_ms", "TTFT hit (ms)", lambda v: fmt.fixed(v, 1)),
    ),
    grid=GRID,
    cpu_args=("--num-gpu-blocks-override", "40"),  # the same 5,120-token pool in the CPU build's blocks of 128
    work=core.LabWork(
        engines=1,
        # sequential and evicted requests one at a time (+ the warm-up and the fillers), the others in one batch
        decode_steps=(len(SEQUENTIAL) * LAB.REQUESTS + 1 + 2 + LAB.FILLERS + 2) * LAB.OUTPUT_TOKENS
        + LAB.PRESSURE_OUTPUT,
        # the pool the lab asks for (num_gpu_blocks_override blocks of CUDA's 16 tokens), more than MAX_MODEL_LEN
        peak_kv_tokens=LAB.NUM_GPU_BLOCKS * VLLM_DEFAULT_BLOCK_SIZE,
    ),
)
