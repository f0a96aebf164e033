"""Lab 8A, ``snippets/labs/fleet_routing.py``: vLLM replicas behind vLLM's router, round robin against session
affinity, counted in prefix-cache hits.

Receipt rows, one per request in the order sent: ``policy`` (the router's ``--policy``), ``round`` and ``group``
(which request of which shared prefix), ``replica`` (the one whose counters moved), ``prompt_tokens`` and
``cached_tokens`` (how far that replica's ``vllm:prompt_tokens`` and ``vllm:prefix_cache_hits`` moved, tokens)
and ``ttft_ms`` (through the router, the client's clock). ``settings`` has the workload (``replicas``, ``groups``,
``rounds``, ``prefix_tokens``, ``suffix_tokens``) and the replicas' ``block_size``.

The placements and token counts are exact on any machine, the CPU included; the TTFT claim is checked on GPU
receipts only (:func:`~infercourse.labs.core.gpu_timing`).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from infercourse import fmt
from infercourse.exercises import Exercise
from infercourse.labs import core
from infercourse.memory import cached_prefix_tokens, fleet_prefix_hits, prefix_computations
from infercourse.registry import LAB_GPU, VLLM_DEFAULT_BLOCK_SIZE, gpu, model
from infercourse.roofline import Demand, prefill_demand, prefill_floor

LAB = core.lab_settings("fleet_routing")
"""The lab's model, policies and workload, read from the lab itself: their one home."""


def _policy(receipt: core.Receipt, policy: str) -> list[Mapping[str, Any]]:
    return [r for r in receipt["results"] if r["policy"] == policy]


def _cached(receipt: core.Receipt) -> int:
    """One hit's cached tokens in this receipt's workload and blocks (:func:`cached_prefix_tokens`)."""
    s = receipt["settings"]
    return cached_prefix_tokens(s["prefix_tokens"], s["prefix_tokens"] + s["suffix_tokens"], s["block_size"])


@core.claim
def every_request_once(receipt: core.Receipt) -> core.ClaimResult:
    s = receipt["settings"]
    want = s["prefix_tokens"] + s["suffix_tokens"]
    policies = sorted({r["policy"] for r in receipt["results"]})
    counts = {p: len(_policy(receipt, p)) for p in policies}
    wrong = [r for r in receipt["results"] if r["prompt_tokens"] != want]
    ok = bool(policies) and all(n == s["groups"] * s["rounds"] for n in counts.values()) and not wrong
    return core.ClaimResult(
        "every_request_once",
        "each policy served G x n requests, each counted by exactly one replica with exactly its prompt tokens",
        ok,
        "; ".join(f"{p}: {n} requests" for p, n in counts.items())
        + f"; prompt tokens {', '.join(str(t) for t in sorted({r['prompt_tokens'] for r in receipt['results']}))} "
        f"(expected {want})",
    )


def expected_cached(receipt: core.Receipt) -> list[int]:
    """Each request's cached tokens by lesson 5A's rule, replica by replica: 0 where its prefix reaches the replica
    it landed on for the first time (under its policy), else the prefix's full blocks (:func:`_cached`)."""
    cached, seen, found = _cached(receipt), set(), []
    for r in receipt["results"]:
        where = (r["policy"], r["group"], r["replica"])
        found.append(cached if where in seen else 0)
        seen.add(where)
    return found


@core.claim
def cached_tokens_exact(receipt: core.Receipt) -> core.ClaimResult:
    cached, wrong = _cached(receipt), []
    for k, (r, want) in enumerate(zip(receipt["results"], expected_cached(receipt), strict=True)):
        if r["cached_tokens"] != want:
            wrong.append(f"request {k + 1} ({r['policy']}, prefix {r['group']}): {r['cached_tokens']}, not {want}")
    return core.ClaimResult(
        "cached_tokens_exact",
        f"a request finds 0 cached tokens where its prefix visits a replica first, else the prefix's full blocks "
        f"({cached} tokens): lesson 5A's rule, replica by replica",
        not wrong,
        "; ".join(wrong) or f"all {len(receipt['results'])} requests",
    )


def compare(receipt: core.Receipt) -> list[core.Compared]:
    """Each request's cached tokens beside :func:`expected_cached`'s for the replica it reached (exact, on any
    machine)."""
    return [
        core.Compared(i, "cached tokens", "tokens", r["cached_tokens"], want)
        for i, (r, want) in enumerate(zip(receipt["results"], expected_cached(receipt), strict=True))
    ]


@core.claim
def round_robin_cycles(receipt: core.Receipt) -> core.ClaimResult:
    rows, replicas = _policy(receipt, "round_robin"), receipt["settings"]["replicas"]
    statement = "round robin sends request k to replica (k + c) mod R, whatever the request carries"
    if not rows:
        return core.ClaimResult("round_robin_cycles", statement, None, "no round_robin rows")
    start = rows[0]["replica"]
    placed = [r["replica"] for r in rows]
    return core.ClaimResult(
        "round_robin_cycles",
        statement,
        placed == [(start + k) % replicas for k in range(len(rows))],
        f"replicas in order: {placed}",
    )


@core.claim
def affinity_keeps_prefix(receipt: core.Receipt) -> core.ClaimResult:
    rows = _policy(receipt, "consistent_hash")
    statement = "session affinity (consistent_hash on the prefix's name) keeps every prefix on one replica"
    if not rows:
        return core.ClaimResult("affinity_keeps_prefix", statement, None, "no consistent_hash rows")
    homes = {g: sorted({r["replica"] for r in rows if r["group"] == g}) for g in sorted({r["group"] for r in rows})}
    return core.ClaimResult(
        "affinity_keeps_prefix",
        statement,
        all(len(h) == 1 for h in homes.values()),
        "; ".join(f"prefix {g}: replica {h}" for g, h in homes.items()),
    )


@core.claim
def fleet_hits_exact(receipt: core.Receipt) -> core.ClaimResult:
    s, cached = receipt["settings"], _cached(receipt)
    details, ok = [], True
    for policy in sorted({r["policy"] for r in receipt["results"]}):
        want = fleet_prefix_hits(policy, s["groups"], s["rounds"], s["replicas"], cached)
        got = sum(r["cached_tokens"] for r in _policy(receipt, policy))
        ok &= got == want
        details.append(f"{policy}: {got} (expected {want})")
    return core.ClaimResult(
        "fleet_hits_exact",
        "the fleet's prefix-cache hits are G (n - m) c: each prefix is computed once on each of the m replicas it "
        "reaches (round robin: min(n, R); affinity: 1)",
        ok and bool(details),
        "; ".join(details),
    )


@core.gpu_timing
def hit_ttft_lower(receipt: core.Receipt) -> core.ClaimResult:
    rows = receipt["results"]
    cold = [r["ttft_ms"] for r in rows if r["cached_tokens"] == 0]
    hit = [r["ttft_ms"] for r in rows if r["cached_tokens"] > 0]
    statement = "through the router, the median TTFT of requests that hit is below that of requests that miss"
    if not cold or not hit:
        return core.ClaimResult("hit_ttft_lower", statement, None, "needs both hits and misses")
    cold_ms, hit_ms = statistics.median(cold), statistics.median(hit)
    return core.ClaimResult(
        "hit_ttft_lower", statement, hit_ms < cold_ms, f"hit {hit_ms:.1f} ms, miss {cold_ms:.1f} ms"
    )


def predicted(gpu_name: str = LAB_GPU) -> dict[str, Any]:
    """The default workload on ``gpu_name`` with CUDA's blocks: one hit's cached tokens, the fleet's hits per
    policy (tokens) and the TTFT floors (s) of a miss (the whole prompt) and of a hit (the uncached tokens)."""
    facts, config = gpu(gpu_name), model(LAB.MODEL).config
    prompt = LAB.PREFIX_TOKENS + LAB.SUFFIX_TOKENS
    cached = cached_prefix_tokens(LAB.PREFIX_TOKENS, prompt, VLLM_DEFAULT_BLOCK_SIZE)
    return {
        "prompt": prompt,
        "cached": cached,
        "hits": {p: fleet_prefix_hits(p, LAB.GROUPS, LAB.ROUNDS, LAB.REPLICAS, cached) for p in LAB.POLICIES},
        "miss_s": prefill_floor(facts, config, prompt),
        "hit_s": prefill_floor(facts, config, prompt - cached),
    }


def prediction(gpu_name: str = LAB_GPU) -> str:
    """Markdown: per policy, the fleet's hits and hit rate, and the TTFT floors of a miss and a hit."""
    p = predicted(gpu_name)
    total = LAB.GROUPS * LAB.ROUNDS * p["prompt"]
    lines = [
        f"{LAB.MODEL} in BF16 on the {gpu_name}, {LAB.REPLICAS} replicas, {LAB.GROUPS} prefixes of "
        f"{fmt.count(LAB.PREFIX_TOKENS)} tokens asked {LAB.ROUNDS} times each ({fmt.count(total)} prompt "
        "tokens per policy), blocks of "
        f"{VLLM_DEFAULT_BLOCK_SIZE}. Hits are exact; the TTFT floors are `roofline.prefill_floor` over the whole "
        f"prompt (a miss: {fmt.fixed(p['miss_s'] * 1e3, 2)} ms) and over the uncached tokens (a hit: "
        f"{fmt.fixed(p['hit_s'] * 1e3, 2)} ms), without the router's hop.",
        "",
        "| policy | replicas computing each prefix | fleet hits (tokens) | share of prompt tokens cached |",
        "|---|---:|---:|---:|",
    ]
    for policy, hits in p["hits"].items():
        computed = prefix_computations(policy, LAB.GROUPS, LAB.ROUNDS, LAB.REPLICAS)
        lines.append(f"| {policy} | {computed} | {fmt.count(hits)} | {fmt.pct(hits / total)} |")
    return "\n".join(lines)


def demands() -> list[Demand]:
    """What the miss and hit TTFT floors of :func:`prediction` ask of the lab's card."""
    facts, config, p = gpu(LAB_GPU), model(LAB.MODEL).config, predicted()
    return [
        prefill_demand(facts, config, p["prompt"], p["miss_s"], "fleet_routing: TTFT floor of a miss"),
        prefill_demand(facts, config, p["prompt"] - p["cached"], p["hit_s"], "fleet_routing: TTFT floor of a hit"),
    ]


# --- the notebook's exercises ----------------------------------------------------------------------

EXERCISE_REPLICAS = 4
"""The exercises' fleet: the lab's prefixes and rounds over this many replicas instead of the lab's."""


def _fleet() -> str:
    return (
        f"The lab's workload ({LAB.GROUPS} shared prefixes of {LAB.PREFIX_TOKENS:,} tokens, each sent {LAB.ROUNDS} "
        f"times, interleaved, one request at a time) over {EXERCISE_REPLICAS} replicas instead of {LAB.REPLICAS}."
    )


EXERCISES = (
    Exercise(
        f"{_fleet()} With round robin, how many replicas compute (prefill in full) each prefix?",
        lambda: prefix_computations("round_robin", LAB.GROUPS, LAB.ROUNDS, EXERCISE_REPLICAS),
        "replicas",
        "Round robin sends a prefix's requests to one replica after another: with no factor shared by the number of "
        "prefixes and of replicas, n rounds visit min(n, R) replicas, each of which computes the prefix once "
        "(lesson 8A).",
    ),
    Exercise(
        "The same fleet, round robin: how many prompt tokens does the whole fleet find in its prefix caches?",
        lambda: fleet_prefix_hits("round_robin", LAB.GROUPS, LAB.ROUNDS, EXERCISE_REPLICAS, predicted()["cached"]),
        "tokens",
        "G (n − m) c, with m the replicas that compute each prefix (question 1): a request that lands on a replica "
        "which computed its prefix before hits c tokens; with no more rounds than replicas every request meets a "
        "cold one (lesson 8A; the lab counts vLLM's `prefix_cache_hits`).",
    ),
    Exercise(
        "The same fleet with consistent hashing on the prefix: how many hit tokens?",
        lambda: fleet_prefix_hits("consistent_hash", LAB.GROUPS, LAB.ROUNDS, EXERCISE_REPLICAS, predicted()["cached"]),
        "tokens",
        "Every request of a prefix lands on one replica, which computes it once and hits it n − 1 times: "
        "G (n − 1) c, whatever R (lesson 8A).",
    ),
)


SPEC = core.lab_spec(
    __name__,
    key=("policy", "round", "group"),
    header="cached (tokens)",
    prediction_basis="the replay of each policy and the roofline",
    columns=(
        core.Column.text("policy"),
        core.Column.count("round"),
        core.Column.count("group", "prefix"),
        core.Column.count("replica"),
        core.Column.count("cached_tokens", "cached (tokens)"),
        core.Column("ttft_ms", "TTFT (ms)", lambda v: fmt.fixed(v, 1)),
    ),
    cpu_max_model_len=512,
    cpu_args=(
        "--model",
        ".cache/models/tiny-qwen2",
        "--prefix-tokens",
        "256",
        "--suffix-tokens",
        "16",
        "--output-tokens",
        "2",
    ),  # fmt: skip
    work=core.LabWork(
        engines=LAB.REPLICAS,
        decode_steps=len(LAB.POLICIES) * LAB.GROUPS * LAB.ROUNDS * LAB.OUTPUT_TOKENS,
        peak_kv_tokens=LAB.GROUPS * (LAB.PREFIX_TOKENS + LAB.ROUNDS * (LAB.SUFFIX_TOKENS + LAB.OUTPUT_TOKENS)),
        model=LAB.MODEL,
        replicas=LAB.REPLICAS,
        memory_share=LAB.REPLICA_MEMORY,
    ),
)
