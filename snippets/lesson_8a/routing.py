"""Lesson 8A: replay four routers over a fleet and count what each costs in prefix computations and in load.

G shared prefixes (system prompts, documents) are each asked n times, interleaved, over R replicas. A router
sees one request at a time and picks a replica; a replica computes a prefix the first time it sees it and
finds it cached afterwards (nothing is evicted). Printed per policy: how many times the fleet computes each
prefix, the fleet's hit rate over the prefix tokens, and the busiest replica's share of the requests.
Standard library only.
"""

from __future__ import annotations

import hashlib

# --8<-- [start:routing]
VIRTUAL_NODES = 160  # points per replica on the hash ring (vllm-router's consistent_hash uses 160)


def ring(replicas: int) -> list[tuple[int, int]]:
    """The consistent-hash ring: VIRTUAL_NODES points per replica, sorted by hash."""
    points = [(_hash(f"replica-{r}-{v}"), r) for r in range(replicas) for v in range(VIRTUAL_NODES)]
    return sorted(points)


def _hash(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")


def route(policy: str, key: str, k: int, load: list[int], cached: list[set[str]], points) -> int:
    """The replica for request number ``k`` whose prefix is named ``key``."""
    replicas = len(load)
    if policy == "round_robin":
        return k % replicas
    if policy == "least_loaded":  # fewest requests so far: blind to the cache
        return min(range(replicas), key=lambda r: load[r])
    if policy == "consistent_hash":  # the first ring point at or after the key's hash
        h = _hash(key)
        return next((r for p, r in points if p >= h), points[0][1])
    # prefix_aware: the replica that holds the prefix, unless it is far busier than the idlest one
    idle = min(range(replicas), key=lambda r: load[r])
    holders = [r for r in range(replicas) if key in cached[r]]
    if holders and load[holders[0]] - load[idle] <= 2:
        return holders[0]
    return idle


def replay(policy: str, groups: int, rounds: int, replicas: int, seed: int = 0) -> tuple[int, float]:
    """(prefix computations across the fleet, the busiest replica's share of the requests) for ``policy``,
    the requests interleaved (round 0 of every prefix, then round 1, ...), the prefix names drawn with ``seed``."""
    names = [f"prefix-{seed}-{g}" for g in range(groups)]
    load, cached, points = [0] * replicas, [set() for _ in range(replicas)], ring(replicas)
    computed = 0
    for k in range(groups * rounds):
        key = names[k % groups]
        r = route(policy, key, k, load, cached, points)
        computed += key not in cached[r]
        cached[r].add(key)
        load[r] += 1
    return computed, max(load) / (groups * rounds)


# --8<-- [end:routing]


POLICIES = ("round_robin", "least_loaded", "consistent_hash", "prefix_aware")


def main(groups: int = 7, rounds: int = 16, replicas: int = 4, seeds: int = 200) -> None:
    """Print, as a Markdown table, each policy's replay averaged over ``seeds`` namings of the prefixes."""
    print(f"{groups} prefixes, {rounds} requests each, over {replicas} replicas; mean of {seeds} namings:\n")
    print("| policy | prefix computations | requests that hit | busiest replica's share | worst naming |")
    print("|---|---:|---:|---:|---:|")
    for policy in POLICIES:
        runs = [replay(policy, groups, rounds, replicas, seed) for seed in range(seeds)]
        computed = sum(c for c, _ in runs) / seeds
        hit = 1 - computed / (groups * rounds)
        busiest = sum(b for _, b in runs) / seeds
        worst = max(b for _, b in runs)
        print(f"| `{policy}` | {computed:.1f} | {hit:.1%} | {busiest:.1%} | {worst:.1%} |")
    print(f"\nAn even fleet gives each replica {1 / replicas:.1%} of the requests.")


if __name__ == "__main__":
    main()
