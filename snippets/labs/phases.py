"""Lab 0A: see prefill and decode as two phases, timed by vLLM's own per-request stats.

For each (prompt tokens, output tokens) pair in GRID the script sends ONE request and reads, from
``RequestOutput.metrics``, the time to first token (TTFT: the prefill) and the time per output
token after it (TPOT: one decode step). What to look for:

- TTFT grows with the prompt (prefill does work for every prompt token);
- TPOT barely moves with the prompt (each decode step reads all the weights once; the prompt only
  adds its KV cache, a small part of the bytes);
- decode time grows linearly with the number of output tokens.

Run (GPU, vLLM 0.26.0; the model is fetched on first use):

    python snippets/labs/phases.py --receipt receipts/rtx-4090/phases.json

Without hub access, use a folder holding the model's config.json and a tokenizer, with random
weights (same shapes, same timings; the text is noise):

    python snippets/labs/phases.py --model PATH --load-format dummy

Method: prefix caching off (every prompt is new random token ids anyway), fixed decode lengths
(``ignore_eos=True``), greedy sampling, no detokenisation (nothing is printed but timings),
untimed warm-up requests before the timed ones, one request at a time (so no request waits
behind another), each pair run ``--repeats`` times and the median kept.

Imports the standard library, ``labkit`` (this folder: failure line, receipt, vLLM's per-request
times) and vLLM (inside ``main``).
"""

from __future__ import annotations

import argparse
import random
import statistics

from labkit.cli import DTYPES, check_grid, fail, lab_parser, progress, whole
from labkit.engine import prepare, start_llm
from labkit.measure import STEP_TOKENS_METRIC, metric_totals, random_prompt, request_times
from labkit.receipt import measured_rows, write_receipt

LAB = "phases"
GRID = ((128, 32), (128, 128), (128, 512), (1024, 128), (4096, 128))
"""(prompt tokens, output tokens) pairs, timed in this order."""
MAX_MODEL_LEN = 8192
"""Default context length; vLLM starts only if the KV cache can hold one sequence this long."""
REPEATS = 5
"""Timed runs per grid row (``--repeats``); the median is kept."""
SEED = 0
WARMUP_OUTPUT_TOKENS = 8


# The receipt's rows: UNITS gives every measured key's unit, ROW every key's JSON type ("number": an int
# or a float; "| None": may be null). The lab's spec (src/infercourse/labs/) reads both.
UNITS = {"ttft_ms": "ms", "tpot_ms": "ms", "decode_s": "s", "engine_steps": "steps", "step_tokens": "tokens"}
ROW = {
    "prompt_tokens": "int",
    "output_tokens": "int",
    "ttft_ms": "number",
    "tpot_ms": "number",
    "decode_s": "number",
    "engine_steps": "int",
    "step_tokens": "int",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = lab_parser(LAB, "Time prefill (TTFT) and decode (TPOT) with vLLM.", max_model_len=MAX_MODEL_LEN)
    p.add_argument("--dtype", default="auto", choices=DTYPES, help="weights/activations dtype (auto = the config's)")
    p.add_argument("--repeats", type=whole, default=REPEATS, help="timed runs per grid row; the median is kept")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    check_grid(args, GRID)
    prepare(args)
    # --8<-- [start:measure]
    llm, engine_start_s = start_llm(
        args,
        dtype=args.dtype,
        seed=SEED,
        enable_prefix_caching=False,  # each prompt is timed cold
        disable_log_stats=False,  # fills RequestOutput.metrics
    )
    from vllm import SamplingParams

    batched_tokens = llm.llm_engine.vllm_config.scheduler_config.max_num_batched_tokens

    tokenizer = llm.get_tokenizer()
    vocab_size, special = len(tokenizer), set(tokenizer.all_special_ids)
    rng = random.Random(SEED)

    def run(prompt_tokens: int, output_tokens: int) -> dict:
        params = SamplingParams(max_tokens=output_tokens, ignore_eos=True, temperature=0, detokenize=False)
        prompt = random_prompt(rng, prompt_tokens, vocab_size, special)
        (output,) = llm.generate([prompt], params, use_tqdm=False)
        return request_times(output)

    for prompt_tokens in sorted({p for p, _ in GRID}):  # untimed: first calls pay one-off costs
        run(prompt_tokens, WARMUP_OUTPUT_TOKENS)

    rows = measured_rows(args, UNITS)
    for k, (prompt_tokens, output_tokens) in enumerate(GRID, 1):
        progress(f"measuring {k}/{len(GRID)}: prompt {prompt_tokens}, output {output_tokens}, {args.repeats} runs")
        tokens_before, steps_before = metric_totals(llm, STEP_TOKENS_METRIC)
        runs = [run(prompt_tokens, output_tokens) for _ in range(args.repeats)]
        tokens_after, steps_after = metric_totals(llm, STEP_TOKENS_METRIC)
        if any(r["generated_tokens"] != output_tokens for r in runs):
            fail(f"asked for {output_tokens} tokens, the engine made {[r['generated_tokens'] for r in runs]}", 3)
        rows.append(
            {
                "prompt_tokens": prompt_tokens,
                "output_tokens": output_tokens,
                "engine_steps": round(steps_after - steps_before),
                "step_tokens": round(tokens_after - tokens_before),
                **{
                    key: round(statistics.median(r[key] for r in runs), 6) for key in ("ttft_ms", "tpot_ms", "decode_s")
                },
            }
        )
    # --8<-- [end:measure]

    print(
        f"{args.model} ({args.load_format} weights), engine start {engine_start_s:.1f} s, median of {args.repeats}; "
        f"engine steps and tokens: all {args.repeats} runs (vLLM's {STEP_TOKENS_METRIC})"
    )
    print(
        f"{'prompt tokens':>13} {'output tokens':>13} {'TTFT (ms)':>10} {'TPOT (ms)':>10} {'decode (s)':>10} "
        f"{'steps':>6} {'tokens':>7}"
    )
    for r in rows:
        print(
            f"{r['prompt_tokens']:>13} {r['output_tokens']:>13} {r['ttft_ms']:>10.2f} {r['tpot_ms']:>10.3f} "
            f"{r['decode_s']:>10.3f} {r['engine_steps']:>6} {r['step_tokens']:>7}"
        )
    settings = {
        "repeats": args.repeats,
        "statistic": "median",
        "enable_prefix_caching": False,
        "max_num_batched_tokens": batched_tokens,
    }
    write_receipt(args, UNITS, rows, engine_start_s, settings)
    return 0


if __name__ == "__main__":  # vLLM 0.26.0 forks its engine process by default, but may spawn (CPU build, CUDA
    # already initialised); a spawned child re-imports this file, so the guard is required
    raise SystemExit(main())
