"""Lab 5A: automatic prefix caching, read from vLLM's own counters.

For each (shared prefix tokens L, unique suffix tokens) pair in GRID the script sends REQUESTS
prompts one after another: the same L-token prefix (the first L tokens of one random sequence, the
same for every row) followed by a fresh random suffix. Per request it reads
``RequestOutput.num_cached_tokens`` (prompt tokens vLLM did not recompute) and the time to first
token; per row, the growth of vLLM's ``vllm:prefix_cache_queries`` and ``vllm:prefix_cache_hits``
counters (both count tokens). ``llm.reset_prefix_cache()`` runs before every row, so each row's
first request finds nothing, although its prefix begins like the previous rows'. What to look for:

- the first request of a row: 0 cached tokens (cold);
- every later one: the prefix's full blocks, floor(min(L, P - 1) / block) x block tokens, P being
  the prompt length (the row with no suffix sends one prompt again and again: the cap P - 1 binds);
- queries grow by the prompt tokens sent, hits by the cached tokens, to the token;
- on a GPU, a hit's TTFT is near the prefill of the uncached tokens, far below a cold one.

Run (GPU, vLLM 0.26.0; the model is fetched on first use):

    python snippets/labs/prefix_cache.py --receipt prefix_cache.json

Method: prefix caching on (``enable_prefix_caching=True``, vLLM's default, written out), one
request at a time (a request finds only blocks already computed, so two sent together would both
miss), greedy, fixed OUTPUT_TOKENS with ``ignore_eos``, no detokenisation, an untimed warm-up
request first. The block size is the engine's own (``vllm:cache_config_info``): 16 on CUDA,
vLLM's CPU build picks another.

Imports the standard library, ``labkit`` (this folder) and vLLM (inside ``main``).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from labkit import (
    cache_config,
    check_model_arg,
    engine_failure,
    fail,
    lab_parser,
    metric_totals,
    prepare,
    progress,
    random_prompt,
    request_times,
    write_receipt,
)

LAB = "prefix_cache"
GRID = ((0, 64), (512, 64), (1024, 64), (2048, 64), (4000, 64), (2048, 0))
"""(shared prefix tokens, unique suffix tokens) per row, in this order; (2048, 0) repeats one prompt."""
REQUESTS = 8
"""Prompts per row, sent one after another: the first is cold, the others may hit."""
OUTPUT_TOKENS = 4
"""Tokens generated per request (at least 2: the per-request metrics need a decode step)."""
MAX_MODEL_LEN = 4096
"""Default context length: the longest prompt, 4,000 + 64, plus OUTPUT_TOKENS fits."""
SEED = 0
QUERIES_METRIC = "vllm:prefix_cache_queries"
"""vLLM's counter of prompt tokens looked up in the prefix cache (one lookup per new request)."""
HITS_METRIC = "vllm:prefix_cache_hits"
"""vLLM's counter of prompt tokens found there (the sum of the requests' ``num_cached_tokens``)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = lab_parser(
        "Measure vLLM's automatic prefix caching: cached tokens, counters, TTFT.", max_model_len=MAX_MODEL_LEN
    )
    p.add_argument("--requests", type=int, default=REQUESTS, help="prompts per row (the first is cold)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    check_model_arg(args.model)
    need = max(prefix + suffix for prefix, suffix in GRID) + OUTPUT_TOKENS
    if need > args.max_model_len:
        fail(
            f"the longest request needs {need} tokens but --max-model-len is {args.max_model_len}; "
            f"pass --max-model-len {need} or more"
        )
    if args.requests < 2:
        fail(f"--requests must be at least 2 (one cold, one that can hit), got {args.requests}")
    prepare(args, LAB)
    try:
        from vllm import LLM, SamplingParams
    except ImportError as exc:
        fail(f"vLLM is not importable ({exc}); install it: pip install -r requirements-labs-gpu.txt")

    progress(f"starting the engine for {args.model} (a first run downloads the weights)")
    started = time.perf_counter()
    try:
        llm = LLM(
            model=args.model,
            load_format=args.load_format,
            max_model_len=args.max_model_len,
            seed=SEED,
            enable_prefix_caching=True,  # vLLM's default, written out: this lab measures it
            disable_log_stats=False,  # fills RequestOutput.metrics and the counters
        )
    except Exception as exc:  # vLLM raises many kinds; one line says which
        engine_failure(exc, args.model)
    engine_start_s = time.perf_counter() - started
    block_size = int(cache_config(llm)["block_size"])
    progress(f"engine ready after {engine_start_s:.0f} s; KV blocks of {block_size} tokens")

    tokenizer = llm.get_tokenizer()
    vocab_size, special = len(tokenizer), set(tokenizer.all_special_ids)
    rng = random.Random(SEED)
    shared = random_prompt(rng, max(prefix for prefix, _ in GRID), vocab_size, special)["prompt_token_ids"]
    params = SamplingParams(max_tokens=OUTPUT_TOKENS, ignore_eos=True, temperature=0, detokenize=False)

    def send(token_ids: list[int]):
        (output,) = llm.generate([{"prompt_token_ids": token_ids}], params, use_tqdm=False)
        return output

    send(random_prompt(rng, 64, vocab_size, special)["prompt_token_ids"])  # untimed: one-off costs

    rows = []
    for k, (prefix, suffix) in enumerate(GRID, 1):
        progress(f"row {k}/{len(GRID)}: shared prefix {prefix}, suffix {suffix}, {args.requests} requests")
        if not llm.reset_prefix_cache():
            fail("llm.reset_prefix_cache() returned False (a request still held blocks)", 3)
        queries_before, _ = metric_totals(llm, QUERIES_METRIC)
        hits_before, _ = metric_totals(llm, HITS_METRIC)
        outputs = []
        for _ in range(args.requests):
            unique = random_prompt(rng, suffix, vocab_size, special)["prompt_token_ids"]  # empty: suffix 0
            outputs.append(send(shared[:prefix] + unique))
        queries_after, _ = metric_totals(llm, QUERIES_METRIC)
        hits_after, _ = metric_totals(llm, HITS_METRIC)
        cached = [o.num_cached_tokens for o in outputs]
        ttft = [request_times(o)["ttft_ms"] for o in outputs]
        rows.append(
            {
                "prefix_tokens": prefix,
                "suffix_tokens": suffix,
                "prompt_tokens": prefix + suffix,
                "requests": args.requests,
                "cached_first": cached[0],
                "cached_later_min": min(cached[1:]),
                "cached_later_max": max(cached[1:]),
                "queries": round(queries_after - queries_before),
                "hits": round(hits_after - hits_before),
                "ttft_cold_ms": round(ttft[0], 6),
                "ttft_hit_ms": round(statistics.median(ttft[1:]), 6),
            }
        )

    print(
        f"{args.model} ({args.load_format} weights), engine start {engine_start_s:.1f} s, blocks of {block_size} "
        f"tokens, {args.requests} requests per row; counters: vLLM's {QUERIES_METRIC} / {HITS_METRIC}"
    )
    print(
        f"{'prefix':>6} {'suffix':>6} {'prompt':>6} {'cached 1st':>10} {'cached later':>13} {'queries':>8} "
        f"{'hits':>7} {'TTFT cold (ms)':>14} {'TTFT hit (ms)':>13}"
    )
    for r in rows:
        later = f"{r['cached_later_min']}-{r['cached_later_max']}"
        print(
            f"{r['prefix_tokens']:>6} {r['suffix_tokens']:>6} {r['prompt_tokens']:>6} {r['cached_first']:>10} "
            f"{later:>13} {r['queries']:>8} {r['hits']:>7} {r['ttft_cold_ms']:>14.2f} {r['ttft_hit_ms']:>13.2f}"
        )
    if args.receipt:
        write_receipt(
            args.receipt,
            LAB,
            args,
            engine_start_s=engine_start_s,
            results=rows,
            settings={
                "block_size": block_size,
                "requests": args.requests,
                "output_tokens": OUTPUT_TOKENS,
                "enable_prefix_caching": True,
                "statistic": "TTFT hit: median of the later requests",
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
        )
    return 0


if __name__ == "__main__":  # vLLM may spawn its engine process; a spawned child re-imports this file
    raise SystemExit(main())
