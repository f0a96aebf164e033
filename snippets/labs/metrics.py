"""Lab 0B: measure TTFT, TPOT, E2E latency and the mean ITL with vLLM's own stats, for a grid of lengths.

For each (prompt tokens, output tokens) pair in GRID the script sends ONE request at a time
(nothing else runs, so nothing queues), ``--repeats`` times, and records:

- TTFT, TPOT and E2E from ``RequestOutput.metrics`` (the engine's own clock): TTFT is
  ``first_token_latency``; TPOT is (last token time - first token time) / (n - 1); E2E = TTFT +
  (n - 1) x TPOT;
- the mean inter-token latency (ITL) of the row's requests, pooled over all their gaps, from the
  engine's ITL histogram (``LLM.get_metrics()``, ``vllm:inter_token_latency_seconds``: its sum
  over its count, read before and after the row).

The offline ``LLM.generate`` returns finished requests only, so the public API gives no time for
each single token: per-gap ITL percentiles need a streaming client (``vllm bench serve``). The
histogram's sum and count do give the pooled mean exactly.

What to look for: TTFT grows with the prompt; TPOT barely moves; the pooled mean ITL equals the
mean TPOT of the row's requests, because they all have the same length (lesson 0B, section 3).

Run (GPU, vLLM 0.26.0; the model is fetched on first use):

    python snippets/labs/metrics.py --receipt receipts/rtx-4090/metrics.json

Without hub access: ``--model FOLDER --load-format dummy`` (config + tokenizer, random weights:
same timings, the text is noise).

Method: prefix caching off, random prompts of exact token counts, ``ignore_eos=True`` (fixed output
lengths), greedy, no detokenisation, untimed warm-up requests; each row's median over its repeats
(the ITL mean pools all of them).

Imports the standard library, ``labkit`` (this folder) and vLLM (inside ``main``).
"""

from __future__ import annotations

import argparse
import random
import statistics

from labkit.cli import check_grid, fail, lab_parser, progress, whole
from labkit.engine import prepare, start_llm
from labkit.measure import random_prompt, request_times
from labkit.receipt import measured_rows, write_receipt

LAB = "metrics"
MAX_MODEL_LEN = 8192
"""Default context length; vLLM starts only if the KV cache can hold one sequence this long."""
GRID = ((128, 128), (1024, 128), (4096, 128), (1024, 512))
"""(prompt tokens, output tokens), timed in this order."""
REPEATS = 3
"""Timed runs per grid row (``--repeats``); the median is kept."""
SEED = 0
WARMUP_OUTPUT_TOKENS = 8
ITL_HISTOGRAM = "vllm:inter_token_latency_seconds"


# The receipt's rows: UNITS gives every measured key's unit, ROW every key's JSON type ("number": an int
# or a float; "| None": may be null). The lab's spec (src/infercourse/labs/) reads both.
UNITS = {"ttft_ms": "ms", "tpot_ms": "ms", "e2e_ms": "ms", "tpot_mean_ms": "ms", "itl_mean_ms": "ms"}
ROW = {
    "prompt_tokens": "int",
    "output_tokens": "int",
    "ttft_ms": "number",
    "tpot_ms": "number",
    "e2e_ms": "number",
    "tpot_mean_ms": "number",
    "itl_mean_ms": "number",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = lab_parser(LAB, "Measure TTFT, TPOT, E2E and the mean ITL per request with vLLM.", max_model_len=MAX_MODEL_LEN)
    p.add_argument("--repeats", type=whole, default=REPEATS, help="timed runs per grid row; the median is kept")
    return p.parse_args(argv)


def itl_totals(snapshot) -> tuple[float, int]:
    """(sum in s, count) of the engine's inter-token-latency histogram in a ``get_metrics()`` snapshot."""
    found = [m for m in snapshot if m.name == ITL_HISTOGRAM]
    if not found:
        fail(f"this vLLM's metrics have no {ITL_HISTOGRAM!r} histogram", 3)
    return sum(m.sum for m in found), sum(m.count for m in found)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    check_grid(args, GRID)
    prepare(args)

    # --8<-- [start:measure]
    llm, engine_start_s = start_llm(
        args,
        seed=SEED,
        enable_prefix_caching=False,  # a cached prefix would skip prefill and shrink TTFT
        disable_log_stats=False,  # fills RequestOutput.metrics and the histograms
    )
    from vllm import SamplingParams

    tokenizer = llm.get_tokenizer()
    vocab_size, special = len(tokenizer), set(tokenizer.all_special_ids)
    rng = random.Random(SEED)

    def run(prompt_tokens: int, output_tokens: int) -> dict:
        params = SamplingParams(max_tokens=output_tokens, ignore_eos=True, temperature=0, detokenize=False)
        prompt = random_prompt(rng, prompt_tokens, vocab_size, special)
        (output,) = llm.generate([prompt], params, use_tqdm=False)
        if output.num_cached_tokens:
            fail("a prompt hit the prefix cache although caching is off; TTFT would be wrong", 3)
        return request_times(output)

    for prompt_tokens in sorted({p for p, _ in GRID}):  # untimed: first calls pay one-off costs
        run(prompt_tokens, WARMUP_OUTPUT_TOKENS)

    rows = measured_rows(args, UNITS)
    for k, (prompt_tokens, output_tokens) in enumerate(GRID, 1):
        progress(f"measuring {k}/{len(GRID)}: prompt {prompt_tokens}, output {output_tokens}, {args.repeats} runs")
        itl_sum_before, itl_count_before = itl_totals(llm.get_metrics())
        runs = [run(prompt_tokens, output_tokens) for _ in range(args.repeats)]
        itl_sum, itl_count = itl_totals(llm.get_metrics())
        if any(r["generated_tokens"] != output_tokens for r in runs):
            fail(f"asked for {output_tokens} tokens, the engine made {[r['generated_tokens'] for r in runs]}", 3)
        gaps = itl_count - itl_count_before
        if gaps != args.repeats * (output_tokens - 1):
            fail(f"the ITL histogram counted {gaps} gaps, expected {args.repeats} x {output_tokens - 1}", 3)
        median = {key: statistics.median(r[key] for r in runs) for key in ("ttft_ms", "tpot_ms", "decode_s")}
        rows.append(
            {
                "prompt_tokens": prompt_tokens,
                "output_tokens": output_tokens,
                "ttft_ms": round(median["ttft_ms"], 4),
                "tpot_ms": round(median["tpot_ms"], 4),
                "e2e_ms": round(statistics.median(r["ttft_ms"] + r["decode_s"] * 1e3 for r in runs), 3),
                "tpot_mean_ms": round(statistics.fmean(r["tpot_ms"] for r in runs), 4),
                "itl_mean_ms": round((itl_sum - itl_sum_before) / gaps * 1e3, 4),
            }
        )
    # --8<-- [end:measure]

    print(
        f"{args.model} ({args.load_format} weights), engine start {engine_start_s:.1f} s, "
        f"one request at a time, median of {args.repeats} (ITL: mean over all gaps)"
    )
    print(
        f"{'prompt':>6} {'output':>6} {'TTFT (ms)':>10} {'TPOT (ms)':>10} {'E2E (ms)':>10} "
        f"{'mean TPOT':>10} {'mean ITL':>10}"
    )
    for r in rows:
        print(
            f"{r['prompt_tokens']:>6} {r['output_tokens']:>6} {r['ttft_ms']:>10.2f} {r['tpot_ms']:>10.3f} "
            f"{r['e2e_ms']:>10.1f} {r['tpot_mean_ms']:>10.3f} {r['itl_mean_ms']:>10.3f}"
        )
    settings = {
        "repeats": args.repeats,
        "statistic": "median (ITL: pooled mean)",
        "enable_prefix_caching": False,
    }
    write_receipt(args, UNITS, rows, engine_start_s, settings)
    return 0


if __name__ == "__main__":  # vLLM 0.26.0 forks its engine process by default, but may spawn (CPU build, CUDA
    # already initialised); a spawned child re-imports this file, so the guard is required
    raise SystemExit(main())
