"""Lab 8A: two vLLM replicas behind vLLM's router; the same shared-prefix workload routed round robin,
then with session affinity, counted in each replica's prefix-cache hits.

REPLICAS ``vllm serve`` processes of one model (prefix caching on) stand behind one ``vllm-router``
(vLLM's own router, the ``vllm-router`` package) per policy in POLICIES:

- ``round_robin``: request k goes to replica (k + c) mod R, whatever it carries;
- ``consistent_hash``: the router hashes the request's session key (the ``X-Session-ID`` header, here the
  name of the request's shared prefix) onto a ring of replicas, so every request of one prefix lands on
  one replica (session affinity: the client names the prefix; the router's ``cache_aware`` policy instead
  matches the prompt itself, lesson 8A section 3).

The workload: GROUPS shared prefixes of PREFIX_TOKENS tokens (a system prompt, a document), each asked
ROUNDS times with its own SUFFIX_TOKENS-token question, the groups interleaved (round 0 of every group,
then round 1, ...), one request at a time through the router, OUTPUT_TOKENS tokens each. Every policy gets
prefixes of its own, so its caches start cold. Per request the lab records which replica served it, the
prompt tokens and the cached tokens it found (how far that replica's ``vllm:prefix_cache_hits`` counter
moved) and its TTFT through the router. What to look for:

- round robin spreads each prefix over the replicas, so each replica computes it once: with R = 2 and an
  odd number of groups a prefix is computed twice and hit ROUNDS - 2 times;
- affinity keeps each prefix on one replica: computed once, hit ROUNDS - 1 times (fleet-wide hit rate up),
  but where the hash puts the groups is luck: with few groups, one replica may get most of them;
- a request's cached tokens are 0 on the first visit of its prefix to a replica, else the prefix's full
  KV blocks (lesson 5A's rule), exactly;
- on a GPU, a hit's TTFT is far below a cold request's: the cached prefix is not prefilled again.

Run (GPU, vLLM 0.26.0; two replicas of Qwen2.5-0.5B share one card, REPLICA_MEMORY of its memory each;
``pip install vllm-router``):

    python snippets/labs/fleet_routing.py --receipt receipts/rtx-4090/fleet_routing.json

Method: random prompts of exact token counts drawn from the server's own tokens, prefix caching on,
greedy, ``ignore_eos``, the router's retries off (a failed request is not silently sent elsewhere);
every server and the router stop when the lab ends, also on an error or Ctrl-C (``labkit.serve``).

Imports the standard library and ``labkit`` (this folder); vLLM only in the servers.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import random
import statistics
import sys
import time

from labkit.cli import check_model_arg, engine_flags, fail, lab_parser, port, positive, progress, whole
from labkit.engine import prepare
from labkit.machine import LOG_CONFIG_ENV
from labkit.measure import FINISHED_METRIC
from labkit.receipt import measured_rows, write_receipt
from labkit.server import (
    LOOPBACK,
    check_port_arg,
    free_port,
    serve,
    served_cache_config,
    served_metrics,
    served_token_pool,
    stream_completion,
    vllm_cli,
)

LAB = "fleet_routing"
MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
"""The lab's model: small enough for two replicas on one 24 GB card."""
POLICIES = ("round_robin", "consistent_hash")
"""The router's policies the lab compares, in this order (``vllm-router --policy``)."""
REPLICAS = 2
GROUPS = 3
"""Shared prefixes; odd, so that round robin sends each prefix to both of two replicas."""
ROUNDS = 4
"""Requests per prefix, each with its own suffix."""
PREFIX_TOKENS = 2048
SUFFIX_TOKENS = 64
OUTPUT_TOKENS = 8
MAX_MODEL_LEN = 4096
REPLICA_MEMORY = 0.4
"""``--gpu-memory-utilization`` of each replica: two fit on one card beside each other."""
SEED = 0
SESSION_HEADER = "X-Session-ID"
"""The header the router's ``consistent_hash`` policy hashes (one of the session keys it looks for)."""
ROUTER_PACKAGE = "vllm_router"
"""vLLM's router (PyPI ``vllm-router``); its command line is ``vllm_router.launch_router:main``."""
ROUTER_CLI = "from vllm_router.launch_router import main; main()"
PREFIX_HITS_METRIC = "vllm:prefix_cache_hits_total"
FINISHED_TOTAL = FINISHED_METRIC + "_total"
PROMPT_TOKENS_METRIC = "vllm:prompt_tokens_total"
"""A server's counters of finished requests, of prompt tokens found in its prefix cache and of prompt tokens (samples
of /metrics: a counter's sample ends in _total)."""
COUNTERS_TIMEOUT_S = 60
"""How long the lab waits for a replica's counters to show a finished request (s)."""


# The receipt's rows: UNITS gives every measured key's unit, ROW every key's JSON type ("number": an int
# or a float; "| None": may be null). The lab's spec (src/infercourse/labs/) reads both.
UNITS = {"prompt_tokens": "tokens", "cached_tokens": "tokens", "ttft_ms": "ms"}
ROW = {
    "policy": "str",
    "round": "int",
    "group": "int",
    "replica": "int",
    "prompt_tokens": "int",
    "cached_tokens": "int",
    "ttft_ms": "number",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = lab_parser(LAB, "Route a shared-prefix workload over vLLM replicas with vLLM's router.", MAX_MODEL_LEN)
    p.set_defaults(model=MODEL)
    p.add_argument("--policies", nargs="+", choices=POLICIES, default=list(POLICIES), help="router policies, in order")
    p.add_argument("--replicas", type=whole, default=REPLICAS, help="vllm serve processes behind the router")
    p.add_argument("--groups", type=whole, default=GROUPS, help="shared prefixes")
    p.add_argument("--rounds", type=whole, default=ROUNDS, help="requests per prefix")
    p.add_argument("--prefix-tokens", type=whole, default=PREFIX_TOKENS, help="tokens of each shared prefix")
    p.add_argument("--suffix-tokens", type=whole, default=SUFFIX_TOKENS, help="tokens of each request's own suffix")
    p.add_argument("--output-tokens", type=whole, default=OUTPUT_TOKENS, help="tokens each request generates")
    p.add_argument(
        "--gpu-memory-utilization", type=positive, default=REPLICA_MEMORY, help="share of the card each replica takes"
    )
    p.add_argument("--port", type=port, default=0, help="the router's port on 127.0.0.1 (0: a free one)")
    return p.parse_args(argv)


def check_input(args) -> None:
    check_model_arg(args.model)
    need = args.prefix_tokens + args.suffix_tokens + args.output_tokens
    if need > args.max_model_len:
        fail(f"a request needs {need} tokens but --max-model-len is {args.max_model_len}; pass {need} or more")
    if args.replicas < 2:
        fail(f"--replicas {args.replicas}: a router needs at least 2 replicas to choose between")
    if args.replicas * args.gpu_memory_utilization > 0.95:
        fail(
            f"{args.replicas} replicas x --gpu-memory-utilization {args.gpu_memory_utilization:g} exceed the card; "
            f"pass --gpu-memory-utilization {0.9 / args.replicas:.2f} or less"
        )
    check_port_arg(args.port)
    if importlib.util.find_spec(ROUTER_PACKAGE) is None:
        fail("vLLM's router is not installed here; pip install vllm-router (requirements-labs-gpu.txt pins it)")


def counters(urls: list[str]) -> list[dict[str, float]]:
    """Each replica's finished requests, prompt tokens and prefix-cache hits (tokens), from its /metrics."""
    names = (FINISHED_TOTAL, PROMPT_TOKENS_METRIC, PREFIX_HITS_METRIC)
    return [{name: samples.get(name, 0.0) for name in names} for samples in map(served_metrics, urls)]


# --8<-- [start:route]
def route(args, router: str, urls: list[str], policy: str, pool: list[int], rng: random.Random) -> list[dict]:
    """Send the workload through the router at ``router``, one request at a time; one row per request."""
    prefixes = [rng.choices(pool, k=args.prefix_tokens) for _ in range(args.groups)]
    rows = []
    for rnd in range(args.rounds):
        for group in range(args.groups):
            prompt = prefixes[group] + rng.choices(pool, k=args.suffix_tokens)
            before = counters(urls)
            sent = time.perf_counter()
            events = stream_completion(
                router,
                {"model": args.model, "prompt": prompt, "max_tokens": args.output_tokens},
                headers={SESSION_HEADER: f"{policy}-prefix-{group}"},  # the prefix's name: affinity's key
            )
            deadline = time.monotonic() + COUNTERS_TIMEOUT_S  # a server counts a request just after its last token
            finished = sum(b[FINISHED_TOTAL] for b in before) + 1
            after = counters(urls)
            while sum(a[FINISHED_TOTAL] for a in after) < finished:
                if time.monotonic() > deadline:
                    fail(f"{policy}: no replica counted request {len(rows) + 1} as finished", 3)
                time.sleep(0.05)
                after = counters(urls)
            moved = [{k: round(a[k] - b[k]) for k in a} for a, b in zip(after, before, strict=True)]
            (replica,) = [i for i, m in enumerate(moved) if m[FINISHED_TOTAL]]
            rows.append(
                {
                    "policy": policy,
                    "round": rnd,
                    "group": group,
                    "replica": replica,
                    "prompt_tokens": moved[replica][PROMPT_TOKENS_METRIC],
                    "cached_tokens": moved[replica][PREFIX_HITS_METRIC],
                    "ttft_ms": round((events[0][0] - sent) * 1e3, 3),
                }
            )
    return rows


def router_command(urls: list[str], port: int, policy: str) -> list[str]:
    """``vllm-router`` in front of ``urls`` with ``policy``, run by this Python."""
    return [
        sys.executable, "-c", ROUTER_CLI, "--host", LOOPBACK, "--port", str(port), "--worker-urls", *urls,
        "--policy", policy, "--disable-retries", "--worker-startup-check-interval", "1",
    ]  # fmt: skip


# --8<-- [end:route]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    check_input(args)
    logs = prepare(args, logs="<replica-i | router-policy>.log")
    flags = [
        *engine_flags(args), "--seed", str(SEED), "--enable-prefix-caching",
        "--gpu-memory-utilization", f"{args.gpu_memory_utilization:g}",
    ]  # fmt: skip
    rows, starts = measured_rows(args, UNITS), []
    with contextlib.ExitStack() as servers:
        urls = []
        for i in range(args.replicas):
            progress(f"replica {i + 1}/{args.replicas}: vllm serve on 127.0.0.1 (log: {logs}/replica-{i}.log)")
            server_port = free_port()
            command = vllm_cli("serve", args.model, "--host", LOOPBACK, "--port", str(server_port), *flags)
            url, start_s = servers.enter_context(
                serve(command, server_port, logs / f"replica-{i}.log", unset=(LOG_CONFIG_ENV,))
            )
            urls.append(url)
            starts.append(start_s)
        block = int(served_cache_config(urls[0])["block_size"])
        rng = random.Random(SEED)
        pool = served_token_pool(urls[0], args.model, rng)
        for policy in args.policies:
            router_port = args.port or free_port()
            progress(f"router: {policy} in front of {args.replicas} replicas (log: {logs}/router-{policy}.log)")
            with serve(router_command(urls, router_port, policy), router_port, logs / f"router-{policy}.log") as (
                router,
                _,
            ):
                rows += route(args, router, urls, policy, pool, rng)

    print(
        f"{args.model} ({args.load_format} weights), {args.replicas} replicas (block {block}), {args.groups} "
        f"prefixes of {args.prefix_tokens} tokens x {args.rounds} rounds, one request at a time"
    )
    print(
        f"{'policy':<16} {'round':>5} {'prefix':>6} {'replica':>7} {'prompt':>7} "
        f"{'cached (tokens)':>15} {'TTFT (ms)':>10}"
    )
    for r in rows:
        print(
            f"{r['policy']:<16} {r['round']:>5} {r['group']:>6} {r['replica']:>7} {r['prompt_tokens']:>7} "
            f"{r['cached_tokens']:>15} {r['ttft_ms']:>10.1f}"
        )
    print(
        f"\n{'policy':<16} {'requests/replica':>18} {'prompt':>8} {'cached':>8} {'cached share':>13} "
        f"{'median TTFT':>12}"
    )
    for policy in args.policies:
        mine = [r for r in rows if r["policy"] == policy]
        spread = "/".join(str(sum(r["replica"] == i for r in mine)) for i in range(args.replicas))
        prompt, cached = sum(r["prompt_tokens"] for r in mine), sum(r["cached_tokens"] for r in mine)
        ttft = statistics.median(r["ttft_ms"] for r in mine)
        print(f"{policy:<16} {spread:>18} {prompt:>8} {cached:>8} {cached / prompt:>13.1%} {ttft:>9.1f} ms")
    settings = {
        "replicas": args.replicas,
        "groups": args.groups,
        "rounds": args.rounds,
        "prefix_tokens": args.prefix_tokens,
        "suffix_tokens": args.suffix_tokens,
        "output_tokens": args.output_tokens,
        "gpu_memory_utilization": args.gpu_memory_utilization,
        "block_size": block,
        "session_header": SESSION_HEADER,
        "enable_prefix_caching": True,
    }
    write_receipt(args, UNITS, rows, statistics.median(starts), settings)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
