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

    python snippets/labs/continuous_batching.py --receipt receipts/rtx-4090/continuous_batching.json

Method: the engine core runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) with async
scheduling off, so the scheduler holds every request of a ``generate`` call before its first step
(a separate engine process starts stepping as soon as the first request reaches it, which moves the
first steps' contents from run to run) and learns of a finished request before it plans the next
step; prefix caching off (random prompts, but no accidental hits either); greedy; no
detokenisation; an untimed warm-up request first.

**The online part** (``--parts online``, or both by default) serves the model with ``vllm serve`` on
127.0.0.1 (one server, ``max_num_seqs`` = the largest B, prefix caching off) and runs vLLM's own
benchmark client, ``vllm bench serve``, once per request rate in RATES: NUM_PROMPTS requests of
PROMPT_TOKENS random prompt tokens (vLLM's ``random`` dataset) and exactly ONLINE_OUTPUT_TOKENS output
tokens (``--ignore-eos``), arriving as a Poisson process (open loop: they come whether or not the server
keeps up). Per rate it keeps the benchmark's JSON result and how far the server's own counters moved
(``/metrics``). What to look for:

- every request completed, none failed, each produced exactly ONLINE_OUTPUT_TOKENS tokens, and the
  server counted the same prompt tokens, generated tokens and finished requests as the client;
- on a GPU, output tokens/s rises with the rate and p99 TPOT with it (the latency-throughput curve of
  the lesson's figure), until the rate passes what max_num_seqs can carry and TTFT explodes (the knee).

The server stops when the lab ends, also on an error or Ctrl-C (``labkit.serve``).

    python snippets/labs/continuous_batching.py --parts online --receipt receipts/rtx-4090/continuous_batching.json

Imports the standard library and ``labkit`` (this folder); vLLM only in the child and the server.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import time
from pathlib import Path

from labkit.cli import check_model_arg, engine_flags, fail, lab_parser, port, positive, progress, whole
from labkit.engine import child_run, engine_core_in_process, root_cause, run_lab, start_llm
from labkit.machine import LOG_CONFIG_ENV
from labkit.measure import (
    PREEMPTIONS_METRIC,
    STEP_TOKENS_METRIC,
    cache_config,
    metric_totals,
    random_prompt,
    request_times,
)
from labkit.receipt import measured_rows, write_receipt
from labkit.server import LOOPBACK, check_port_arg, free_port, serve, served_metrics, vllm_cli

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
RATES = (2, 4, 8, 16, 32)
"""Request rates of the online part (requests/s), one ``vllm bench serve`` run each."""
NUM_PROMPTS = 200
"""Requests per rate in the online part."""
ONLINE_OUTPUT_TOKENS = 256
"""Output tokens of every online request (``--random-output-len`` with ``--ignore-eos``)."""
BENCH_TIMEOUT_S = 3600
PARTS = {
    "offline": "one engine per max_num_seqs, the same requests static then continuous: engine steps, tokens",
    "online": "one `vllm serve` and `vllm bench serve` at each request rate: TTFT, TPOT and throughput",
}
"""The lab's parts (``--parts``), each with what it shows; the lesson's lab box lists them from here."""
PROMPT_TOKENS_METRIC = "vllm:prompt_tokens_total"
GENERATION_TOKENS_METRIC = "vllm:generation_tokens_total"
REQUEST_SUCCESS_METRIC = "vllm:request_success_total"
"""The server's counters of prompt tokens, generated tokens and finished requests (every finish reason),
as samples of its /metrics (a counter's sample ends in _total)."""


# The receipt's rows: UNITS gives every measured key's unit, ROW every key's JSON type ("number": an int
# or a float; "| None": may be null). The lab's spec (src/infercourse/labs/) reads both.
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
    "request_rate": "requests/s",
    "failed": "requests",
    "ttft_p50_ms": "ms",
    "ttft_p99_ms": "ms",
    "server_prompt_tokens": "tokens",
    "server_generated_tokens": "tokens",
    "server_requests": "requests",
}
ROW = {
    "max_num_seqs": "int",
    "mode": "str",
    "requests": "int",
    "steps": "int",
    "step_tokens": "int",
    "prompt_tokens": "int",
    "generated_tokens": "int",
    "wrong_lengths": "int",
    "preemptions": "int",
    "wall_s": "number",
    "output_tok_s": "number",
    "tpot_p50_ms": "number",
    "tpot_p99_ms": "number",
    "wait_p50_ms": "number | None",
    "wait_p99_ms": "number | None",
    "request_rate": "number | None",
    "failed": "int | None",
    "ttft_p50_ms": "number | None",
    "ttft_p99_ms": "number | None",
    "server_prompt_tokens": "int | None",
    "server_generated_tokens": "int | None",
    "server_requests": "int | None",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = lab_parser(LAB, "Count vLLM's engine steps under static and continuous batching.", max_model_len=MAX_MODEL_LEN)
    p.add_argument("--batch-sizes", type=whole, nargs="+", default=list(BATCH_SIZES), help="max_num_seqs per engine")
    p.add_argument("--requests", type=whole, default=REQUESTS, help="requests per run")
    p.add_argument("--prompt-tokens", type=whole, default=PROMPT_TOKENS, help="tokens per prompt")
    p.add_argument("--output-min", type=whole, default=OUTPUT_MIN, help="shortest output (tokens)")
    p.add_argument("--output-max", type=whole, default=OUTPUT_MAX, help="longest output (tokens)")
    p.add_argument(
        "--max-num-batched-tokens", type=whole, default=MAX_NUM_BATCHED_TOKENS, help="token budget per engine step"
    )
    p.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS), help="offline, online or both")
    p.add_argument("--rates", type=positive, nargs="+", default=list(RATES), help="online request rates (requests/s)")
    p.add_argument("--num-prompts", type=whole, default=NUM_PROMPTS, help="online requests per rate")
    p.add_argument(
        "--online-output-tokens", type=whole, default=ONLINE_OUTPUT_TOKENS, help="output tokens per online request"
    )
    p.add_argument("--port", type=port, default=0, help="the online server's port on 127.0.0.1 (0: a free one)")
    # internal: one engine in this process; prints its rows after ROW_TAG
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def check_input(args) -> None:
    check_model_arg(args.model)
    if not 2 <= args.output_min <= args.output_max:
        fail(f"need 2 <= --output-min <= --output-max, got {args.output_min} and {args.output_max}")
    if args.prompt_tokens + args.output_max > args.max_model_len:
        need = args.prompt_tokens + args.output_max
        fail(f"a request needs {need} tokens but --max-model-len is {args.max_model_len}; pass {need} or more")
    if args.max_num_batched_tokens < max(args.batch_sizes):  # vLLM's own rule (vllm/config/scheduler.py:286)
        fail(f"--max-num-batched-tokens must be at least the largest batch size, {max(args.batch_sizes)}")
    if "online" not in args.parts or args.child:
        return
    if args.online_output_tokens < 2:  # counts >= 1 and positive rates: argparse (labkit.whole, positive)
        fail("need --online-output-tokens >= 2 (TPOT needs a decode step)")
    if args.prompt_tokens + args.online_output_tokens > args.max_model_len:
        need = args.prompt_tokens + args.online_output_tokens
        fail(f"an online request needs {need} tokens but --max-model-len is {args.max_model_len}; pass {need} or more")
    check_port_arg(args.port)


def output_lengths(args) -> list[int]:
    """n_i of every request: seeded, uniform on --output-min .. --output-max (the same in every run)."""
    rng = random.Random(SEED)
    return [rng.randint(args.output_min, args.output_max) for _ in range(args.requests)]


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0-100) of ``values``."""
    ranked = sorted(values)
    return ranked[max(0, math.ceil(q / 100 * len(ranked)) - 1)]


ONLINE_ONLY = (
    "request_rate",
    "failed",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "server_prompt_tokens",
    "server_generated_tokens",
    "server_requests",
)
"""Row keys only an online row fills (None in an offline row); an online row leaves the waits None."""


# --8<-- [start:engine]
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
        **dict.fromkeys(ONLINE_ONLY),
    }


def child(args) -> int:
    """One engine with ``max_num_seqs`` = the one batch size given; print both rows after ROW_TAG."""
    (batch,) = args.batch_sizes
    engine_core_in_process()  # before vLLM is imported
    llm, engine_start_s = start_llm(
        args,
        seed=SEED,
        max_num_seqs=batch,
        max_num_batched_tokens=args.max_num_batched_tokens,
        enable_prefix_caching=False,
        async_scheduling=False,  # the scheduler knows a request has finished before it plans the next step
        disable_log_stats=False,  # fills RequestOutput.metrics and the metrics read here
    )
    from vllm import SamplingParams

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


# --8<-- [end:engine]


def bench(args, url: str, rate: float, folder: Path) -> dict:
    """One ``vllm bench serve`` run against the server at ``url`` at ``rate`` requests/s; its JSON result
    (with per-request lengths: ``--save-detailed``). Its output goes to ``folder/rate-<rate>.log``."""
    name = f"rate-{rate:g}"
    host, port = url.removeprefix("http://").split(":")
    command = vllm_cli(
        "bench",
        "serve",
        "--backend",
        "openai",
        "--host",
        host,
        "--port",
        port,
        "--model",
        args.model,
        "--dataset-name",
        "random",
        "--random-input-len",
        str(args.prompt_tokens),
        "--random-output-len",
        str(args.online_output_tokens),
        "--num-prompts",
        str(args.num_prompts),
        "--request-rate",
        f"{rate:g}",
        "--ignore-eos",
        "--temperature",
        "0",
        "--seed",
        str(SEED),
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,99",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        str(folder),
        "--result-filename",
        f"{name}.json",
        "--disable-tqdm",
    )
    env = {k: v for k, v in os.environ.items() if k != LOG_CONFIG_ENV}  # its whole log in its own file
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=BENCH_TIMEOUT_S)
        text, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        text, code = f"{exc.stdout or ''}{exc.stderr or ''}\ntimed out after {BENCH_TIMEOUT_S} s", None
    (folder / f"{name}.log").write_text(text)
    result = folder / f"{name}.json"
    if code != 0 or not result.is_file():
        cause = root_cause(text) or f"exit {code}"
        fail(f"vllm bench serve at {rate:g} requests/s failed: {cause[:400]} (log: {folder / name}.log)", 3)
    return json.loads(result.read_text())


def online_row(args, rate: float, result: dict, before: dict, after: dict) -> dict:
    """One receipt row of the online part: the benchmark's ``result`` at ``rate`` and how far the server's
    counters moved from ``before`` to ``after`` (:func:`labkit.served_metrics`)."""

    def moved(name: str) -> int:
        return round(after.get(name, 0.0) - before.get(name, 0.0))

    return {
        "max_num_seqs": max(args.batch_sizes),
        "mode": "online",
        "requests": result["completed"],
        "steps": moved(STEP_TOKENS_METRIC + "_count"),
        "step_tokens": moved(STEP_TOKENS_METRIC + "_sum"),
        "prompt_tokens": result["total_input_tokens"],
        "generated_tokens": result["total_output_tokens"],
        "wrong_lengths": sum(n != args.online_output_tokens for n in result["output_lens"]),
        "preemptions": moved(PREEMPTIONS_METRIC + "_total"),
        "wall_s": round(result["duration"], 6),
        "output_tok_s": round(result["output_throughput"], 3),
        "tpot_p50_ms": round(result["p50_tpot_ms"], 6),
        "tpot_p99_ms": round(result["p99_tpot_ms"], 6),
        "wait_p50_ms": None,
        "wait_p99_ms": None,
        "request_rate": rate,
        "failed": result["failed"],
        "ttft_p50_ms": round(result["p50_ttft_ms"], 6),
        "ttft_p99_ms": round(result["p99_ttft_ms"], 6),
        "server_prompt_tokens": moved(PROMPT_TOKENS_METRIC),
        "server_generated_tokens": moved(GENERATION_TOKENS_METRIC),
        "server_requests": moved(REQUEST_SUCCESS_METRIC),
    }


def online(args, log_dir: Path) -> tuple[list[dict], float]:
    """The online part: one ``vllm serve`` on 127.0.0.1, one ``vllm bench serve`` per rate; the rows and
    the server's start time (s)."""
    port = args.port or free_port()
    command = vllm_cli(
        "serve",
        args.model,
        "--host",
        LOOPBACK,
        "--port",
        str(port),
        *engine_flags(args),
        "--max-num-seqs",
        str(max(args.batch_sizes)),
        "--max-num-batched-tokens",
        str(args.max_num_batched_tokens),
        "--no-enable-prefix-caching",
        "--seed",
        str(SEED),
    )
    progress(f"online: vllm serve on {LOOPBACK}:{port} (log: {log_dir}/server.log); waiting for /health")
    rows = []
    with serve(command, port, log_dir / "server.log", unset=(LOG_CONFIG_ENV,)) as (url, start_s):
        progress(f"online: server ready after {start_s:.0f} s")
        for k, rate in enumerate(args.rates, 1):
            progress(f"online {k}/{len(args.rates)}: {args.num_prompts} requests at {rate:g} requests/s")
            before = served_metrics(url)
            result = bench(args, url, rate, log_dir)
            rows.append(online_row(args, rate, result, before, served_metrics(url)))
    progress("online: server stopped")
    return rows, start_s


def parent(args, log_dir: Path) -> int:
    """Start each engine in a child process of this script, one by one, collect their rows and write the
    receipt."""
    lengths = output_lengths(args)
    common = ["--model", args.model, *engine_flags(args)]
    common += ["--requests", str(args.requests), "--prompt-tokens", str(args.prompt_tokens)]
    common += ["--output-min", str(args.output_min), "--output-max", str(args.output_max)]
    common += ["--max-num-batched-tokens", str(args.max_num_batched_tokens)]
    rows, starts, kv_tokens = measured_rows(args, UNITS), [], []
    for k, batch in enumerate(args.batch_sizes if "offline" in args.parts else (), 1):
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

    if "online" in args.parts:
        online_rows, server_start_s = online(args, log_dir)
        rows += online_rows
        starts.append(server_start_s)

    print(
        f"{args.model} ({args.load_format} weights), {args.prompt_tokens} prompt tokens; offline: {args.requests} "
        f"requests, outputs {args.output_min}-{args.output_max} (seed {SEED}, mean {statistics.mean(lengths):.1f}); "
        f"online: {args.num_prompts} requests per rate, {args.online_output_tokens} output tokens; "
        f"{args.max_num_batched_tokens} tokens per step; steps: vLLM's {STEP_TOKENS_METRIC}"
    )
    print(
        f"{'B':>4} {'mode':<10} {'rate':>5} {'steps':>6} {'step tokens':>11} {'generated':>9} {'wrong':>5} "
        f"{'preempt':>7} {'wall (s)':>8} {'tok/s':>9} {'TPOT p99 (ms)':>13} {'wait p99 (ms)':>13} "
        f"{'TTFT p99 (ms)':>13}"
    )
    for r in rows:
        rate = "-" if r["request_rate"] is None else str(r["request_rate"])
        wait, ttft = ("-" if r[k] is None else f"{r[k]:.1f}" for k in ("wait_p99_ms", "ttft_p99_ms"))
        print(
            f"{r['max_num_seqs']:>4} {r['mode']:<10} {rate:>5} {r['steps']:>6} {r['step_tokens']:>11} "
            f"{r['generated_tokens']:>9} {r['wrong_lengths']:>5} {r['preemptions']:>7} {r['wall_s']:>8.2f} "
            f"{r['output_tok_s']:>9.1f} {r['tpot_p99_ms']:>13.2f} {wait:>13} {ttft:>13}"
        )
    for r in rows:
        if r["mode"] == "online":
            print(
                f"online at {r['request_rate']:g} requests/s: {r['requests']} completed, {r['failed']} failed; "
                f"input {r['prompt_tokens']} tokens (server {r['server_prompt_tokens']}), output "
                f"{r['generated_tokens']} (server {r['server_generated_tokens']}), "
                f"server requests {r['server_requests']}"
            )
    settings = {
        "seed": SEED,
        "requests": args.requests,
        "prompt_tokens": args.prompt_tokens,
        "output_min": args.output_min,
        "output_max": args.output_max,
        "output_lengths": lengths,
        "batch_sizes": args.batch_sizes,
        "max_num_batched_tokens": args.max_num_batched_tokens,
        "kv_tokens": min(kv_tokens) if kv_tokens else None,
        "enable_prefix_caching": False,
        "async_scheduling": False,
        "statistic": (
            "offline TPOT, wait: nearest-rank percentiles over the requests, wait from the workload start; "
            "online TPOT, TTFT: vllm bench serve's (numpy's linear percentiles)"
        ),
        "parts": args.parts,
        "rates": args.rates if "online" in args.parts else [],
        "num_prompts": args.num_prompts,
        "online_output_tokens": args.online_output_tokens,
        "server_max_num_seqs": max(args.batch_sizes),
    }
    write_receipt(args, UNITS, rows, max(starts), settings)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_lab(
        argv, parse_args, check_input, child, parent, logs="b<B>.log (the server's and the benchmark's there too)"
    )


if __name__ == "__main__":  # vLLM may spawn its engine process; a spawned child re-imports this file
    raise SystemExit(main())
