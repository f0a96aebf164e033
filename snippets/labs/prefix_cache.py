"""Lab 5A: vLLM's paged KV cache at work: prefix caching, shared blocks, eviction and preemption,
read from vLLM's own counters.

One engine, prefix caching on, a deliberately small pool of KV blocks (``--num-gpu-blocks-override``),
``llm.reset_prefix_cache()`` before every row of GRID. Per request it reads
``RequestOutput.num_cached_tokens`` (prompt tokens vLLM did not recompute) and the time to first token;
per row, the growth of the counters ``vllm:prefix_cache_queries`` and ``vllm:prefix_cache_hits`` (both
count tokens) and ``vllm:num_preemptions``. What to look for:

- ``sequential`` rows (one shared L-token prefix, a fresh suffix per request, one request at a time): the
  first request finds 0 cached tokens; every later one the prefix's full blocks,
  floor(min(L, P - 1) / block) x block tokens, P being the prompt length (the row with no suffix sends
  one prompt again and again: the cap P - 1 binds); queries grow by the prompt tokens sent, hits by the
  cached ones, to the token;
- ``together`` (8 copies of one prompt in one call) and ``parallel_n`` (the prompt once with n = 8):
  the same counts. vLLM runs n = 8 as 8 requests, and a request's full blocks are in the cache as
  soon as they are allocated, so the 7 others share them within the same step;
- ``evicted``: after unrelated prompts longer than the pool, the prefix is gone (least recently used
  blocks are reused first): 0 cached tokens;
- ``pressure``: 4 requests that fit when admitted and outgrow the pool while decoding: vLLM preempts
  (frees a request's blocks and recomputes it later), and every request still gets all its tokens;
- on a GPU, a hit's TTFT is near the prefill of the uncached tokens, far below a cold one.

Run (GPU, vLLM 0.26.0; the model is fetched on first use):

    python snippets/labs/prefix_cache.py --receipt receipts/rtx-4090/prefix_cache.json

Method: greedy (n = 8 samples at temperature 1, seeded), fixed output lengths with ``ignore_eos``, no
detokenisation, an untimed warm-up request first. The block size is the engine's own
(``vllm:cache_config_info``): 16 on CUDA, 128 on vLLM's CPU build (there pass
``--num-gpu-blocks-override 40`` for the same 5,120-token pool).

Imports the standard library, ``labkit`` (this folder) and vLLM (inside ``main``).
"""

from __future__ import annotations

import argparse
import random
import statistics

from labkit.cli import check_model_arg, fail, lab_parser, progress, whole
from labkit.engine import prepare, start_llm
from labkit.measure import PREEMPTIONS_METRIC, cache_config, metric_totals, random_prompt, request_times
from labkit.receipt import measured_rows, write_receipt

LAB = "prefix_cache"
GRID = (
    ("sequential", 0, 64),
    ("sequential", 512, 64),
    ("sequential", 1024, 64),
    ("sequential", 2048, 64),
    ("sequential", 4000, 64),
    ("sequential", 2048, 0),
    ("together", 1088, 0),
    ("parallel_n", 1088, 0),
    ("evicted", 2048, 64),
    ("pressure", 0, 1024),
)
"""The rows, in this order: (run, shared prefix tokens, unique suffix tokens). Runs:

- ``sequential``: ``--requests`` prompts one after another (the first is cold); (2048, 0) repeats one prompt;
- ``together``: PARALLEL copies of one prompt in one ``generate`` call;
- ``parallel_n``: that prompt once, with ``SamplingParams(n=PARALLEL)``;
- ``evicted``: the prefix sent, then FILLERS unrelated prompts of FILLER_TOKENS (more than the pool
  holds), then the prefix again with a new suffix;
- ``pressure``: PRESSURE_REQUESTS unrelated prompts at once, each asking PRESSURE_OUTPUT tokens: they
  fit the pool when admitted and outgrow it while decoding."""
REQUESTS = 8
"""Prompts per sequential row, sent one after another: the first is cold, the others may hit."""
PARALLEL = 8
"""Copies of the prompt in the ``together`` row, and n of the ``parallel_n`` row."""
FILLERS = 2
FILLER_TOKENS = 4000
"""The ``evicted`` row's unrelated prompts: 8,000 tokens in all, more than the pool holds."""
PRESSURE_REQUESTS = 4
PRESSURE_OUTPUT = 512
"""The ``pressure`` row: 4 x 1,024 prompt tokens fit the pool; 4 x (1,024 + 512) = 6,144 do not."""
OUTPUT_TOKENS = 4
"""Tokens generated per request of the other rows (at least 2: the per-request metrics need a decode step)."""
MAX_MODEL_LEN = 4096
"""Default context length: the longest prompt, 4,000 + 64, plus OUTPUT_TOKENS fits."""
NUM_GPU_BLOCKS = 320
"""Default ``num_gpu_blocks_override``: a KV pool of 320 blocks, 5,120 tokens in CUDA's blocks of 16, small
enough for the ``pressure`` row to outgrow it. vLLM keeps one block as its null block, so 319 are usable.
With the CPU build's blocks of 128, pass 40 (the same 5,120 tokens)."""
SEED = 0
QUERIES_METRIC = "vllm:prefix_cache_queries"
"""vLLM's counter of prompt tokens looked up in the prefix cache (one lookup per new request)."""
HITS_METRIC = "vllm:prefix_cache_hits"
"""vLLM's counter of prompt tokens found there (the sum of the requests' ``num_cached_tokens``)."""


# The receipt's rows: UNITS gives every measured key's unit, ROW every key's JSON type ("number": an int
# or a float; "| None": may be null). The lab's spec (src/infercourse/labs/) reads both.
UNITS = {
    "prompt_tokens": "tokens",
    "requests": "requests",
    "cached_first": "tokens",
    "cached_later_min": "tokens",
    "cached_later_max": "tokens",
    "queries": "tokens",
    "hits": "tokens",
    "preemptions": "requests",
    "ttft_cold_ms": "ms",
    "ttft_hit_ms": "ms",
}
ROW = {
    "run": "str",
    "prefix_tokens": "int",
    "suffix_tokens": "int",
    "prompt_tokens": "int",
    "requests": "int",
    "cached_first": "int | None",
    "cached_later_min": "int | None",
    "cached_later_max": "int | None",
    "queries": "int",
    "hits": "int",
    "preemptions": "int",
    "ttft_cold_ms": "number | None",
    "ttft_hit_ms": "number | None",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = lab_parser(
        LAB,
        "Measure vLLM's automatic prefix caching, block sharing, eviction and preemption.",
        max_model_len=MAX_MODEL_LEN,
    )
    p.add_argument("--requests", type=whole, default=REQUESTS, help="prompts per sequential row (the first is cold)")
    p.add_argument(
        "--num-gpu-blocks-override",
        type=whole,
        default=NUM_GPU_BLOCKS,
        help="KV blocks in the pool (vLLM's option; CUDA blocks hold 16 tokens; on vLLM's CPU build, 128: pass 40)",
    )
    return p.parse_args(argv)


def check_input(args) -> None:
    """Refuse bad arguments with one line, before the engine starts."""
    check_model_arg(args.model)
    need = max(prefix + suffix for _, prefix, suffix in GRID) + OUTPUT_TOKENS
    if need > args.max_model_len:
        fail(
            f"the longest request needs {need} tokens but --max-model-len is {args.max_model_len}; "
            f"pass --max-model-len {need} or more"
        )
    if args.requests < 2:
        fail(f"--requests must be at least 2 (one cold, one that can hit), got {args.requests}")
    if args.num_gpu_blocks_override < 2:
        fail(f"--num-gpu-blocks-override must be at least 2, got {args.num_gpu_blocks_override}")


def check_pool(blocks: int, block_size: int) -> None:
    """Refuse a pool in which the ``pressure`` and ``evicted`` rows cannot show what they are for."""
    usable = (blocks - 1) * block_size  # one block is vLLM's null block
    _, _, prompt = GRID[-1]
    admitted = PRESSURE_REQUESTS * (prompt + block_size)  # every prompt plus its first decode block
    demand = PRESSURE_REQUESTS * (prompt + PRESSURE_OUTPUT)
    if not admitted <= usable < demand or usable >= FILLERS * FILLER_TOKENS:
        fail(
            f"a pool of {blocks} blocks of {block_size} tokens holds {usable} usable tokens; the lab needs "
            f"{admitted} to {demand - 1} (and less than {FILLERS * FILLER_TOKENS}); pass "
            f"--num-gpu-blocks-override {5120 // block_size} (5,120 tokens)"
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    check_input(args)
    prepare(args)

    # --8<-- [start:measure]
    llm, engine_start_s = start_llm(
        args,
        seed=SEED,
        enable_prefix_caching=True,  # vLLM's default, written out: this lab measures it
        num_gpu_blocks_override=args.num_gpu_blocks_override,  # a small pool: the pressure row outgrows it
        disable_log_stats=False,  # fills RequestOutput.metrics and the counters
    )
    from vllm import SamplingParams

    labels = cache_config(llm)
    block_size, blocks = int(labels["block_size"]), int(labels["num_gpu_blocks"])
    progress(f"{blocks} KV blocks of {block_size} tokens")
    check_pool(blocks, block_size)

    tokenizer = llm.get_tokenizer()
    vocab_size, special = len(tokenizer), set(tokenizer.all_special_ids)
    rng = random.Random(SEED)
    shared = random_prompt(rng, max(prefix for _, prefix, _ in GRID), vocab_size, special)["prompt_token_ids"]

    def unique(length: int) -> list[int]:
        return random_prompt(rng, length, vocab_size, special)["prompt_token_ids"]  # empty for length 0

    def params(max_tokens: int = OUTPUT_TOKENS, n: int = 1):
        # n > 1 samples (temperature 1, seeded); one output is greedy
        return SamplingParams(
            n=n, max_tokens=max_tokens, ignore_eos=True, temperature=1.0 if n > 1 else 0.0, seed=SEED, detokenize=False
        )

    def counters() -> tuple[float, float, float]:
        return tuple(metric_totals(llm, name)[0] for name in (QUERIES_METRIC, HITS_METRIC, PREEMPTIONS_METRIC))

    def send(prompts: list[list[int]], sampling=None) -> tuple[list, tuple[int, ...]]:
        """Outputs of one generate call and the growth of (queries, hits, preemptions) over it."""
        before = counters()
        outputs = llm.generate([{"prompt_token_ids": ids} for ids in prompts], sampling or params(), use_tqdm=False)
        return outputs, tuple(round(a - b) for a, b in zip(counters(), before, strict=True))

    send([unique(64)])  # untimed: one-off costs

    rows = measured_rows(args, UNITS)
    for k, (run, prefix, suffix) in enumerate(GRID, 1):
        progress(f"row {k}/{len(GRID)}: {run}, shared prefix {prefix}, suffix {suffix}")
        if not llm.reset_prefix_cache():
            fail("llm.reset_prefix_cache() returned False (a request still held blocks)", 3)
        outputs, grown = [], (0, 0, 0)
        if run == "sequential" or run == "evicted":
            count = args.requests if run == "sequential" else 2
            for i in range(count):
                if run == "evicted" and i == 1:
                    send([unique(FILLER_TOKENS) for _ in range(FILLERS)])  # not counted: unrelated prompts
                (output,), got = send([shared[:prefix] + unique(suffix)])
                outputs.append(output)
                grown = tuple(a + b for a, b in zip(grown, got, strict=True))
        elif run == "together":
            outputs, grown = send([shared[:prefix]] * PARALLEL)
        elif run == "parallel_n":
            (output,), grown = send([shared[:prefix]], params(n=PARALLEL))
            if len(output.outputs) != PARALLEL:
                fail(f"asked for n={PARALLEL} samples, vLLM returned {len(output.outputs)}", 3)
        else:  # pressure
            outputs, grown = send([unique(suffix) for _ in range(PRESSURE_REQUESTS)], params(PRESSURE_OUTPUT))
            made = {len(o.outputs[0].token_ids) for o in outputs}
            if made != {PRESSURE_OUTPUT}:
                fail(f"asked for {PRESSURE_OUTPUT} tokens per request, vLLM made {sorted(made)}", 3)
        cached = [o.num_cached_tokens for o in outputs]
        timed = run in ("sequential", "evicted")  # one request at a time: its TTFT is its own
        ttft = [request_times(o)["ttft_ms"] for o in outputs] if timed else []
        rows.append(
            {
                "run": run,
                "prefix_tokens": prefix,
                "suffix_tokens": suffix,
                "prompt_tokens": prefix + suffix,
                "requests": PARALLEL if run == "parallel_n" else len(outputs),
                "cached_first": cached[0] if cached else None,
                "cached_later_min": min(cached[1:]) if cached else None,
                "cached_later_max": max(cached[1:]) if cached else None,
                "queries": grown[0],
                "hits": grown[1],
                "preemptions": grown[2],
                "ttft_cold_ms": round(ttft[0], 6) if timed else None,
                "ttft_hit_ms": round(statistics.median(ttft[1:]), 6) if timed else None,
            }
        )
    # --8<-- [end:measure]

    print(
        f"{args.model} ({args.load_format} weights), engine start {engine_start_s:.1f} s, {blocks} blocks of "
        f"{block_size} tokens, {args.requests} requests per sequential row; counters: vLLM's {QUERIES_METRIC} / "
        f"{HITS_METRIC} / {PREEMPTIONS_METRIC}"
    )
    print(
        f"{'run':>10} {'prefix':>6} {'suffix':>6} {'reqs':>4} {'cached 1st':>10} {'cached later':>13} {'queries':>8} "
        f"{'hits':>7} {'preempted':>9} {'TTFT cold (ms)':>14} {'TTFT hit (ms)':>13}"
    )

    def show(value, spec: str) -> str:  # spec: ">10" or ">14.2f"; None prints as a right-aligned "-"
        return format("-", spec.split(".")[0]) if value is None else format(value, spec)

    for r in rows:
        later = "-" if r["cached_later_min"] is None else f"{r['cached_later_min']}-{r['cached_later_max']}"
        print(
            f"{r['run']:>10} {r['prefix_tokens']:>6} {r['suffix_tokens']:>6} {r['requests']:>4} "
            f"{show(r['cached_first'], '>10')} {later:>13} {r['queries']:>8} {r['hits']:>7} {r['preemptions']:>9} "
            f"{show(r['ttft_cold_ms'], '>14.2f')} {show(r['ttft_hit_ms'], '>13.2f')}"
        )
    settings = {
        "block_size": block_size,
        "num_gpu_blocks": blocks,
        "requests": args.requests,
        "output_tokens": OUTPUT_TOKENS,
        "parallel": PARALLEL,
        "fillers": [FILLERS, FILLER_TOKENS],
        "pressure": {"requests": PRESSURE_REQUESTS, "output_tokens": PRESSURE_OUTPUT},
        "enable_prefix_caching": True,
        "statistic": "TTFT hit: median of the later requests",
    }
    write_receipt(args, UNITS, rows, engine_start_s, settings)
    return 0


if __name__ == "__main__":  # vLLM may spawn its engine process; a spawned child re-imports this file
    raise SystemExit(main())
