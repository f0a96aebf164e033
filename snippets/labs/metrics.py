"""Lab 0B: measure TTFT, TPOT and ITL with vLLM's own per-request stats, for a grid of lengths.

For each (prompt tokens, output tokens) pair in GRID the script sends ONE request (nothing else
runs, so nothing queues) and records:

- TTFT and TPOT from ``RequestOutput.metrics`` (``first_token_latency``; last minus first token
  time over n - 1), the engine's own clock;
- every inter-token gap (ITL), from the time each engine step hands the client a new token
  (``LLMEngine.step()``), so the ITL percentiles include the engine's per-step overhead.

What to look for: TTFT grows with the prompt; TPOT and the median ITL barely move with the prompt or
the output length; the p99 ITL stays close to the median when one request runs alone.

Run (GPU, vLLM 0.26.0; the model is fetched on first use):

    python snippets/labs/metrics.py --receipt metrics.json

Without hub access: ``--model FOLDER --load-format dummy`` (config + tokenizer, random weights:
same timings, text is noise).

Method: prefix caching off, random prompts of exact token counts, ``ignore_eos=True`` (fixed output
lengths), greedy, no detokenisation, untimed warm-up requests, each pair repeated ``--repeats``
times and the median kept.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

import labkit  # snippets/labs/labkit.py: failure line, machine, versions, JSON receipt

LAB = "metrics"
MAX_MODEL_LEN = 8192
"""Default context length; vLLM starts only if the KV cache can hold one sequence this long."""
GRID = ((128, 128), (1024, 128), (4096, 128), (1024, 512))
"""(prompt tokens, output tokens), timed in this order."""
SEED = 0
WARMUP_OUTPUT_TOKENS = 8


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Measure TTFT, TPOT and ITL per request with vLLM.")
    p.add_argument("--model", default="Qwen/Qwen2.5-7B-Instruct", help="hub id or local folder")
    p.add_argument("--load-format", default="auto", help="'dummy' = random weights (no download)")
    p.add_argument("--max-model-len", type=int, default=MAX_MODEL_LEN, help="context length the engine reserves")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per grid row; the median is kept")
    p.add_argument("--receipt", type=Path, help="write the measurements as JSON to this file")
    return p.parse_args(argv)


def check_input(args) -> None:
    labkit.check_model_arg(args.model)
    need = max(p + n for p, n in GRID)
    if need > args.max_model_len:
        labkit.fail(f"the grid needs {need} tokens (prompt + output) but --max-model-len is "
                     f"{args.max_model_len}; pass --max-model-len {need} or more")
    if args.repeats < 1:
        labkit.fail(f"--repeats must be at least 1, got {args.repeats}")


def random_prompt(rng, length, vocab_size, special):
    """A prompt of exactly ``length`` token ids, none of them special (no early EOS, no template)."""
    ids = []
    while len(ids) < length:
        token = rng.randrange(vocab_size)
        if token not in special:
            ids.append(token)
    return {"prompt_token_ids": ids}


def percentile(values, p):
    """Linear interpolation between ranks (numpy's default), as ``vllm bench serve`` reports."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def timed_request(engine, request_id, prompt, params) -> dict:
    """Run one request through the engine step by step; return its metrics and its token gaps (ms).

    ``params`` must ask for DELTA outputs: each step's output then holds only the new tokens.
    """
    engine.add_request(request_id, prompt, params)
    token_times, final = [], None
    while engine.has_unfinished_requests():
        for out in engine.step():
            now = time.perf_counter()
            token_times += [now] * len(out.outputs[0].token_ids)  # tokens that arrived in this step
            if out.finished:
                final = out
    m = final.metrics
    if m is None:
        labkit.fail("vLLM returned no per-request metrics; this vLLM ignores disable_log_stats=False", 3)
    n = m.num_generation_tokens
    if len(token_times) != n:
        labkit.fail(f"saw {len(token_times)} tokens arrive but the engine counted {n}; is output_kind DELTA?", 3)
    gaps = [(b - a) * 1e3 for a, b in zip(token_times, token_times[1:])]
    return {
        "ttft_ms": m.first_token_latency * 1e3,
        "tpot_ms": (m.last_token_ts - m.first_token_ts) / (n - 1) * 1e3,
        "itl_p50_ms": percentile(gaps, 50),
        "itl_p99_ms": percentile(gaps, 99),
        "e2e_ms": (m.first_token_latency + m.last_token_ts - m.first_token_ts) * 1e3,
        "generated_tokens": n,
        "cached_prompt_tokens": getattr(final, "num_cached_tokens", 0) or 0,
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    check_input(args)
    try:
        from vllm import LLM, SamplingParams
        from vllm.sampling_params import RequestOutputKind
    except ImportError as exc:
        labkit.fail(f"vLLM is not importable ({exc}); install it: pip install vllm==0.26.0")
    try:
        llm = LLM(model=args.model, load_format=args.load_format, max_model_len=args.max_model_len, seed=SEED,
                  enable_prefix_caching=False,  # a cached prefix would skip prefill and shrink TTFT
                  disable_log_stats=False)  # fills RequestOutput.metrics
    except Exception as exc:  # vLLM raises many kinds; the message says which
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        labkit.fail(f"vLLM could not start an engine for {args.model!r}: {type(exc).__name__}: {first}")

    engine = llm.llm_engine
    tokenizer = llm.get_tokenizer()
    vocab_size, special = len(tokenizer), set(tokenizer.all_special_ids)
    rng = random.Random(SEED)
    counter = iter(range(10**9))

    def run(prompt_tokens, output_tokens):
        params = SamplingParams(max_tokens=output_tokens, ignore_eos=True, temperature=0, detokenize=False,
                                output_kind=RequestOutputKind.DELTA)  # each step returns only its new tokens
        prompt = random_prompt(rng, prompt_tokens, vocab_size, special)
        return timed_request(engine, f"r{next(counter)}", prompt, params)

    for prompt_tokens in sorted({p for p, _ in GRID}):  # untimed: first calls pay one-off costs
        run(prompt_tokens, WARMUP_OUTPUT_TOKENS)

    rows = []
    keys = ("ttft_ms", "tpot_ms", "itl_p50_ms", "itl_p99_ms", "e2e_ms")
    for prompt_tokens, output_tokens in GRID:
        runs = [run(prompt_tokens, output_tokens) for _ in range(args.repeats)]
        if any(r["generated_tokens"] != output_tokens for r in runs):
            labkit.fail(f"asked for {output_tokens} tokens, got {[r['generated_tokens'] for r in runs]}", 3)
        if any(r["cached_prompt_tokens"] for r in runs):
            labkit.fail("a prompt hit the prefix cache although caching is off; TTFT would be wrong", 3)
        rows.append({"prompt_tokens": prompt_tokens, "output_tokens": output_tokens,
                     **{k: round(statistics.median(r[k] for r in runs), 4) for k in keys}})

    print(f"{args.model} ({args.load_format} weights), one request at a time, median of {args.repeats}")
    print(f"{'prompt':>6} {'output':>6} {'TTFT ms':>9} {'TPOT ms':>8} {'ITL p50':>8} {'ITL p99':>8} {'E2E ms':>9}")
    for r in rows:
        print(f"{r['prompt_tokens']:>6} {r['output_tokens']:>6} {r['ttft_ms']:>9.2f} {r['tpot_ms']:>8.3f} "
              f"{r['itl_p50_ms']:>8.3f} {r['itl_p99_ms']:>8.3f} {r['e2e_ms']:>9.1f}")
    if args.receipt:
        labkit.write_receipt(args.receipt, LAB, args,
                      settings={"repeats": args.repeats, "statistic": "median", "enable_prefix_caching": False},
                      units={k: "ms" for k in keys}, results=rows)
    return 0


if __name__ == "__main__":  # vLLM starts its engine in a subprocess (spawn): the guard is required
    raise SystemExit(main())
