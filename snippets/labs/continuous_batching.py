"""Lab 4A: static batching against continuous batching, counted in vLLM's own engine steps.

REQUESTS requests of PROMPT_TOKENS random tokens each; request i generates exactly n_i tokens, n_i
drawn with a seeded generator, uniformly from OUTPUT_MIN .. OUTPUT_MAX (``max_tokens=n_i`` with
``ignore_eos``, one ``SamplingParams`` per request). For each B in BATCH_SIZES one engine with
``max_num_seqs=B`` (each in a fresh process: this script with ``--child``) runs the same requests twice:

- *static*: in chunks of B, one ``generate`` per chunk, so a chunk ends with its longest request and
  the next chunk waits for it (what serving did before iteration-level scheduling);
- *continuous*: one ``generate`` over all requests: the scheduler admits a waiting request into the
  first step after another leaves.

Per run it reads, from vLLM itself: engine steps and the tokens they carried (how far the count and
the sum of the ``vllm:iteration_tokens_total`` histogram moved), preemptions
(``vllm:num_preemptions``), each request's tokens, TPOT and the time it waited before it was first
scheduled (``RequestOutput.metrics``), and the wall time. What to look for:

- continuous steps < static steps, with the same tokens: static batching pays its longest request's
  steps for every chunk; the step counts equal the lesson's replay of vLLM's scheduler exactly;
- every request produced exactly n_i tokens; the histogram's sum = prompt tokens + generated tokens;
- on a GPU, continuous output tokens/s above static's by about E[max n] / E[n], and no preemption
  while B requests fit in the KV cache.

Run (GPU, vLLM 0.26.0; the model is fetched on first use):

    python snippets/labs/continuous_batching.py --receipt continuous_batching.json

Method: the engine core runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) with async
scheduling off, so the scheduler holds every request of a ``generate`` call before its first step
(a separate engine process starts stepping as soon as the first request reaches it, which moves the
first steps' contents from run to run) and learns of a finished request before it plans the next
step; prefix caching off (random prompts, but no accidental hits either); greedy; no
detokenisation; an untimed warm-up request first.

Imports the standard library and ``labkit`` (this folder); vLLM only in the child.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import tempfile
import time
from pathlib import Path

from labkit import (
    ENGINE_IN_PROCESS_ENV,
    PREEMPTIONS_METRIC,
    STEP_TOKENS_METRIC,
    cache_config,
    check_model_arg,
    child_run,
    engine_core_in_process,
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

LAB = "continuous_batching"
BATCH_SIZES = (8, 32, 128)
"""``max_num_seqs`` of each engine; the static runs use chunks of the same size."""
REQUESTS = 256
PROMPT_TOKENS = 512
OUTPUT_MIN = 16
OUTPUT_MAX = 512
"""Output lengths are uniform on OUTPUT_MIN .. OUTPUT_MAX (at least 2: TPOT needs a decode step)."""
MAX_NUM_BATCHED_TOKENS = 8192
"""Tokens per engine step: vLLM 0.26.0's default for ``LLM`` on a card under 70 GiB, written out."""
MAX_MODEL_LEN = 1024
"""Default context length: PROMPT_TOKENS + OUTPUT_MAX fits."""
SEED = 0
"""vLLM's switch for a separate engine-core process; the child sets it to 0 (see Method)."""
ROW_TAG = "CONTINUOUS_BATCHING_ROWS "
"""The child's one line of results on stdout, JSON after the tag."""
CHILD_TIMEOUT_S = 3600


UNITS = {
    "requests": "requests",
    "steps": "steps",
    "step_tokens": "tokens",
    "prompt_tokens": "tokens",
    "generated_tokens": "tokens",
    "wrong_lengths": "requests",
    "preemptions": "requests",
    "wall_s": "s",
    "output_tok_s": "tokens/s",
    "tpot_p50_ms": "ms",
    "tpot_p99_ms": "ms",
    "wait_p50_ms": "ms",
    "wait_p99_ms": "ms",
}
"""The unit of every measured key of a receipt row (``infercourse.labs`` reads it for the spec)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = lab_parser("Count vLLM's engine steps under static and continuous batching.", max_model_len=MAX_MODEL_LEN)
    p.add_argument("--batch-sizes", type=int, nargs="+", default=list(BATCH_SIZES), help="max_num_seqs per engine")
    p.add_argument("--requests", type=int, default=REQUESTS, help="requests per run")
    p.add_argument("--prompt-tokens", type=int, default=PROMPT_TOKENS, help="tokens per prompt")
    p.add_argument("--output-min", type=int, default=OUTPUT_MIN, help="shortest output (tokens)")
    p.add_argument("--output-max", type=int, default=OUTPUT_MAX, help="longest output (tokens)")
    p.add_argument(
        "--max-num-batched-tokens", type=int, default=MAX_NUM_BATCHED_TOKENS, help="token budget per engine step"
    )
    # internal: one engine in this process; prints its rows after ROW_TAG
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def check_input(args) -> None:
    check_model_arg(args.model)
    if min(args.batch_sizes) < 1 or args.requests < 1 or args.prompt_tokens < 1:
        fail("--batch-sizes, --requests and --prompt-tokens must be at least 1")
    if not 2 <= args.output_min <= args.output_max:
        fail(f"need 2 <= --output-min <= --output-max, got {args.output_min} and {args.output_max}")
    if args.prompt_tokens + args.output_max > args.max_model_len:
        need = args.prompt_tokens + args.output_max
        fail(f"a request needs {need} tokens but --max-model-len is {args.max_model_len}; pass {need} or more")
    if args.max_num_batched_tokens < max(args.batch_sizes):  # vLLM's own rule (vllm/config/scheduler.py:286)
        fail(f"--max-num-batched-tokens must be at least the largest batch size, {max(args.batch_sizes)}")


def output_lengths(args) -> list[int]:
    """n_i of every request: seeded, uniform on --output-min .. --output-max (the same in every run)."""
    rng = random.Random(SEED)
    return [rng.randint(args.output_min, args.output_max) for _ in range(args.requests)]


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0-100) of ``values``."""
    ranked = sorted(values)
    return ranked[max(0, math.ceil(q / 100 * len(ranked)) - 1)]


def run(llm, prompts: list[dict], params: list, chunk: int, lengths: list[int], mode: str, batch: int) -> dict:
    """Generate every request, ``chunk`` at a time (one ``generate`` per chunk); one receipt row."""
    steps_before = metric_totals(llm, STEP_TOKENS_METRIC)
    preempted_before, _ = metric_totals(llm, PREEMPTIONS_METRIC)
    started = time.perf_counter()
    outputs = []
    for k in range(0, len(prompts), chunk):
        outputs += llm.generate(prompts[k : k + chunk], params[k : k + chunk], use_tqdm=False)
    wall_s = time.perf_counter() - started
    tokens_after, steps_after = metric_totals(llm, STEP_TOKENS_METRIC)
    preempted_after, _ = metric_totals(llm, PREEMPTIONS_METRIC)
    made = [len(o.outputs[0].token_ids) for o in outputs]
    times = [request_times(o) for o in outputs]
    start = min(o.metrics.queued_ts for o in outputs)  # the workload's start: every request arrived then
    waits = [(o.metrics.scheduled_ts - start) * 1e3 for o in outputs]
    tpots = [t["tpot_ms"] for t in times]
    return {
        "max_num_seqs": batch,
        "mode": mode,
        "requests": len(outputs),
        "steps": round(steps_after - steps_before[1]),
        "step_tokens": round(tokens_after - steps_before[0]),
        "prompt_tokens": sum(len(p["prompt_token_ids"]) for p in prompts),
        "generated_tokens": sum(made),
        "wrong_lengths": sum(m != n for m, n in zip(made, lengths, strict=True)),
        "preemptions": round(preempted_after - preempted_before),
        "wall_s": round(wall_s, 6),
        "output_tok_s": round(sum(made) / wall_s, 3),
        "tpot_p50_ms": round(percentile(tpots, 50), 6),
        "tpot_p99_ms": round(percentile(tpots, 99), 6),
        "wait_p50_ms": round(percentile(waits, 50), 6),
        "wait_p99_ms": round(percentile(waits, 99), 6),
    }


def child(args) -> int:
    """One engine with ``max_num_seqs`` = the one batch size given; print both rows after ROW_TAG."""
    (batch,) = args.batch_sizes
    engine_core_in_process()  # before vLLM is imported
    try:
        from vllm import LLM, SamplingParams
    except ImportError as exc:
        fail(f"vLLM is not importable ({exc}); install it: pip install -r requirements-labs-gpu.txt")
    started = time.perf_counter()
    try:
        llm = LLM(
            model=args.model,
            load_format=args.load_format,
            max_model_len=args.max_model_len,
            seed=SEED,
            max_num_seqs=batch,
            max_num_batched_tokens=args.max_num_batched_tokens,
            enable_prefix_caching=False,
            async_scheduling=False,  # the scheduler knows a request has finished before it plans the next step
            disable_log_stats=False,  # fills RequestOutput.metrics and the metrics read here
        )
    except Exception as exc:  # vLLM raises many kinds; one line says which
        engine_failure(exc, args.model)
    engine_start_s = time.perf_counter() - started
    labels = cache_config(llm)
    tokenizer = llm.get_tokenizer()
    vocab_size, special = len(tokenizer), set(tokenizer.all_special_ids)
    rng = random.Random(SEED)
    prompts = [random_prompt(rng, args.prompt_tokens, vocab_size, special) for _ in range(args.requests)]
    lengths = output_lengths(args)
    params = [SamplingParams(max_tokens=n, ignore_eos=True, temperature=0, detokenize=False) for n in lengths]
    warm = SamplingParams(max_tokens=2, ignore_eos=True, temperature=0, detokenize=False)
    llm.generate([random_prompt(rng, args.prompt_tokens, vocab_size, special)], warm, use_tqdm=False)  # untimed
    rows = [
        run(llm, prompts, params, batch, lengths, "static", batch),
        run(llm, prompts, params, len(prompts), lengths, "continuous", batch),
    ]
    kv_tokens = int(labels["num_gpu_blocks"]) * int(labels["block_size"])
    print(ROW_TAG + json.dumps({"rows": rows, "engine_start_s": engine_start_s, "kv_tokens": kv_tokens}), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    check_input(args)
    if args.child:
        return child(args)
    prepare(args, LAB)
    log_dir = Path(tempfile.mkdtemp(prefix=f"{LAB}_"))
    progress(f"each engine's log: {log_dir}/b<B>.log")
    lengths = output_lengths(args)
    common = ["--model", args.model, "--load-format", args.load_format, "--max-model-len", str(args.max_model_len)]
    common += ["--requests", str(args.requests), "--prompt-tokens", str(args.prompt_tokens)]
    common += ["--output-min", str(args.output_min), "--output-max", str(args.output_max)]
    common += ["--max-num-batched-tokens", str(args.max_num_batched_tokens)]
    rows, starts, kv_tokens = [], [], []
    for k, batch in enumerate(args.batch_sizes, 1):
        progress(
            f"engine {k}/{len(args.batch_sizes)}: max_num_seqs {batch}, {args.requests} requests static, then "
            "continuous (a first run downloads the weights)"
        )
        got = child_run(
            __file__, [*common, "--batch-sizes", str(batch)], log_dir / f"b{batch}.log", ROW_TAG, CHILD_TIMEOUT_S
        )
        if got["row"] is None:
            fail(f"the engine with max_num_seqs {batch} failed: {got['cause'][:400]} (log: {log_dir}/b{batch}.log)", 3)
        rows += got["row"]["rows"]
        starts.append(got["row"]["engine_start_s"])
        kv_tokens.append(got["row"]["kv_tokens"])

    print(
        f"{args.model} ({args.load_format} weights), {args.requests} requests of {args.prompt_tokens} prompt tokens, "
        f"outputs {args.output_min}-{args.output_max} (seed {SEED}, mean {statistics.mean(lengths):.1f}), "
        f"{args.max_num_batched_tokens} tokens per step; steps: vLLM's {STEP_TOKENS_METRIC}"
    )
    print(
        f"{'B':>4} {'mode':<10} {'steps':>6} {'step tokens':>11} {'generated':>9} {'wrong':>5} {'preempt':>7} "
        f"{'wall (s)':>8} {'tok/s':>9} {'TPOT p99 (ms)':>13} {'wait p99 (ms)':>13}"
    )
    for r in rows:
        print(
            f"{r['max_num_seqs']:>4} {r['mode']:<10} {r['steps']:>6} {r['step_tokens']:>11} {r['generated_tokens']:>9} "
            f"{r['wrong_lengths']:>5} {r['preemptions']:>7} {r['wall_s']:>8.2f} {r['output_tok_s']:>9.1f} "
            f"{r['tpot_p99_ms']:>13.2f} {r['wait_p99_ms']:>13.1f}"
        )
    if args.receipt:
        write_receipt(
            args.receipt,
            LAB,
            args,
            engine_start_s=max(starts),
            results=rows,
            settings={
                "seed": SEED,
                "requests": args.requests,
                "prompt_tokens": args.prompt_tokens,
                "output_min": args.output_min,
                "output_max": args.output_max,
                "output_lengths": lengths,
                "batch_sizes": args.batch_sizes,
                "max_num_batched_tokens": args.max_num_batched_tokens,
                "kv_tokens": min(kv_tokens),
                "enable_prefix_caching": False,
                "async_scheduling": False,
                ENGINE_IN_PROCESS_ENV: "0",
                "statistic": "TPOT, wait: nearest-rank percentiles over the requests; wait from the workload start",
            },
            units=UNITS,
        )
    return 0


if __name__ == "__main__":  # vLLM may spawn its engine process; a spawned child re-imports this file
    raise SystemExit(main())
