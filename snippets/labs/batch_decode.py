"""Lab 2A: decode at batch sizes 1..64 and see throughput rise while the step time barely moves.

For each batch size B in BATCHES the script sends B requests together (prompt ``--prompt-len``
tokens, exactly ``--output-len`` output tokens each) and times the engine's steady state: the
window in which all B requests are decoding. From ``RequestOutput.metrics`` (engine-step
timestamps, one per step), the window runs from the last request's first token to the first
request's last token. With the prompts' prefills ending in d + 1 consecutive steps (requests reach
the engine one by one), that window holds n - 1 - d steps, so the step time is

    t(B) = (min last_token_ts - max first_token_ts) / (n - 1 - d).

The engine is built so that this holds on a 24 GB card: ``max_num_seqs`` >= B (else some requests
wait) and ``max_num_batched_tokens`` = min(B * prompt tokens, :data:`MAX_BATCHED_TOKENS`): vLLM
profiles its activations at that many tokens, so 64 x 512 = 32,768 would leave too little for the
KV cache; with 8,192 the largest batch's prefills spread over about 4 steps, all before the window
(d counts them). The script checks that at least half of the n - 1 steps are all-decoding steps,
prints the KV cache vLLM allocated against the largest batch's need (B x (prompt + output) tokens),
and records ``vllm:num_preemptions`` per batch: a preempted request is recomputed, which skews the
step times, so its claim fails. It prints

- output tokens/s = B / t(B);
- achieved bandwidth = bytes per step / t(B), with bytes per step = M b + B kappa S (matmul weights
  once, every sequence's cache at its mean context S = prompt + output / 2).

What to look for: t(B) stays near the weights' memory floor M b / bandwidth while B is small, so
tokens/s grows almost in proportion to B; the achieved bandwidth stays below the datasheet's.

Run (GPU, vLLM 0.26.0):

    python snippets/labs/batch_decode.py --receipt receipts/rtx-4090/batch_decode.json

No hub access (random weights):

    python snippets/labs/batch_decode.py --model PATH --load-format dummy

Method: prefix caching off, random prompts, ``ignore_eos=True``, greedy, no detokenisation, one
untimed warm-up batch per size.
Imports the standard library, ``labkit`` (this folder) and vLLM (vLLM, torch, transformers inside ``main``).
"""

from __future__ import annotations

import argparse
import random
import statistics

from labkit.cli import check_model_arg, fail, lab_parser, positive, progress, whole, whole_list
from labkit.engine import engine_core_in_process, prepare, start_llm
from labkit.machine import machine
from labkit.measure import (
    PREEMPTIONS_METRIC,
    cache_config,
    decode_step_s,
    kv_bytes_per_token,
    metric_totals,
    param_count,
    random_prompt,
    request_times,
)
from labkit.receipt import measured_rows, registry_bandwidth_gb_s, write_receipt

LAB = "batch_decode"
GRID = ((1,), (2,), (4,), (8,), (16,), (32,), (64,))  # batch sizes of the lesson (one-element rows)
BATCHES = tuple(b for (b,) in GRID)
PROMPT_LEN = 512
"""Prompt tokens per request (the lesson's; ``--prompt-len``)."""
OUTPUT_LEN = 128
"""Output tokens per request, exact (the lesson's; ``--output-len``)."""
MAX_BATCHED_TOKENS = 8192
"""Cap on ``max_num_batched_tokens`` (tokens per engine step): vLLM profiles activations at this size."""
MAX_MODEL_LEN = 2048
"""Default context length (tokens); the longest request is PROMPT_LEN + OUTPUT_LEN."""
SEED = 0


# The receipt's rows: UNITS gives every measured key's unit, ROW every key's JSON type ("number": an int
# or a float; "| None": may be null). The lab's spec (src/infercourse/labs/) reads both.
UNITS = {
    "step_ms": "ms",
    "median_tpot_ms": "ms",
    "tokens_per_s": "tokens/s",
    "bytes_per_step": "B",
    "achieved_gb_s": "GB/s",
    "memory_floor_ms": "ms",
    "preemptions": "requests",
}
ROW = {
    "batch": "int",
    "step_ms": "number",
    "median_tpot_ms": "number",
    "tokens_per_s": "number",
    "bytes_per_step": "int",
    "achieved_gb_s": "number",
    "memory_floor_ms": "number | None",
    "preemptions": "int",
}


def parse_args(argv=None) -> argparse.Namespace:
    p = lab_parser(LAB, "Decode at batch sizes 1..64; tokens/s and achieved bandwidth.", max_model_len=MAX_MODEL_LEN)
    p.add_argument("--prompt-len", type=whole, default=PROMPT_LEN, help="prompt tokens per request")
    p.add_argument("--output-len", type=whole, default=OUTPUT_LEN, help="output tokens per request (exact)")
    p.add_argument(
        "--batches",
        type=whole_list,
        default=",".join(map(str, BATCHES)),
        help="comma-separated batch sizes (default: the lesson's grid; CI uses fewer on a CPU)",
    )
    p.add_argument(
        "--bandwidth-gb-s",
        type=positive,
        help="datasheet bandwidth (GB/s) for the printed floor (default: the course registry's, by GPU name)",
    )
    return p.parse_args(argv)


def check_input(args) -> tuple[int, ...]:
    """The batch sizes, after refusing bad input with one line (before vLLM is imported)."""
    check_model_arg(args.model)
    batches = args.batches  # increasing whole numbers: argparse (labkit.whole_list)
    if args.output_len < 2:  # --prompt-len >= 1 and --bandwidth-gb-s > 0: argparse (labkit.whole, positive)
        fail(f"need --output-len >= 2, got {args.output_len}")
    if args.prompt_len + args.output_len > args.max_model_len:
        fail(
            f"prompt + output = {args.prompt_len + args.output_len} tokens exceed --max-model-len {args.max_model_len}"
        )
    return batches


def main(argv=None) -> int:
    args = parse_args(argv)
    batches = check_input(args)
    prepare(args)
    if machine()["kind"] == "cpu":  # a busy shared CPU can hold a request back past the batch's first steps
        engine_core_in_process()
    bandwidth = args.bandwidth_gb_s
    if bandwidth is None and machine()["kind"] == "gpu":
        bandwidth = registry_bandwidth_gb_s(machine()["name"])
    if bandwidth is None:
        progress("no datasheet bandwidth for this device (pass --bandwidth-gb-s): the floor column shows '-'")

    # --8<-- [start:measure]
    # every request of the largest batch scheduled at once; prefills in a few steps of at most MAX_BATCHED_TOKENS
    batched_tokens = min(max(batches) * args.prompt_len, MAX_BATCHED_TOKENS)
    llm, engine_start_s = start_llm(
        args,
        seed=SEED,
        max_num_seqs=max(batches),
        max_num_batched_tokens=batched_tokens,
        enable_prefix_caching=False,
        disable_log_stats=False,
    )
    import torch
    from vllm import SamplingParams

    model_config = llm.llm_engine.vllm_config.model_config
    b = torch.empty((), dtype=model_config.dtype).element_size()
    hf = model_config.hf_config
    n_params, kappa = param_count(hf), kv_bytes_per_token(hf, b)
    # M: weights a token is multiplied by; the input embedding is a lookup (unless tied, it is not the head)
    m_params = n_params if getattr(hf, "tie_word_embeddings", False) else n_params - hf.vocab_size * hf.hidden_size
    tokenizer = llm.get_tokenizer()
    vocab, special = len(tokenizer), set(tokenizer.all_special_ids)
    rng = random.Random(SEED)
    params = SamplingParams(max_tokens=args.output_len, ignore_eos=True, temperature=0, detokenize=False)

    def prompts(count):
        return [random_prompt(rng, args.prompt_len, vocab, special) for _ in range(count)]

    labels = cache_config(llm)
    cache_tokens = int(labels["num_gpu_blocks"]) * int(labels["block_size"])
    need = max(batches) * (args.prompt_len + args.output_len)
    verdict = "fits" if need <= cache_tokens else "does NOT fit: expect preemptions"
    progress(
        f"KV cache: {cache_tokens:,} tokens allocated; the largest batch needs {max(batches)} x "
        f"{args.prompt_len + args.output_len} = {need:,} ({verdict})"
    )
    rows = measured_rows(args, UNITS)
    mean_context = args.prompt_len + args.output_len / 2
    for k, batch in enumerate(batches, 1):
        progress(f"measuring {k}/{len(batches)}: batch {batch}")
        llm.generate(prompts(batch), params, use_tqdm=False)  # untimed warm-up at this batch size
        preempted_before, _ = metric_totals(llm, PREEMPTIONS_METRIC)
        outputs = llm.generate(prompts(batch), params, use_tqdm=False)
        preempted = round(metric_totals(llm, PREEMPTIONS_METRIC)[0] - preempted_before)
        step_s = decode_step_s(outputs, args.output_len)
        tpots = [request_times(out)["tpot_ms"] for out in outputs]
        bytes_per_step = m_params * b + batch * kappa * mean_context
        rows.append(
            {
                "batch": batch,
                "step_ms": round(step_s * 1e3, 4),
                "median_tpot_ms": round(statistics.median(tpots), 4),
                "tokens_per_s": round(batch / step_s, 2),
                "bytes_per_step": round(bytes_per_step),
                "achieved_gb_s": round(bytes_per_step / step_s / 1e9, 4),
                "preemptions": preempted,
                "memory_floor_ms": None if bandwidth is None else round(bytes_per_step / (bandwidth * 1e9) * 1e3, 4),
            }
        )
    # --8<-- [end:measure]

    print(
        f"{args.model} ({args.load_format} weights), N = {n_params:,}, M = {m_params:,}, kappa = {kappa:,} B/token, "
        f"prompt {args.prompt_len} + output {args.output_len}, engine start {engine_start_s:.1f} s"
    )
    print(f"{'batch':>5} {'step (ms)':>10} {'mem floor':>10} {'tokens/s':>10} {'achieved GB/s':>14} {'preempted':>9}")
    for r in rows:
        floor = "-" if r["memory_floor_ms"] is None else f"{r['memory_floor_ms']:.2f}"
        print(
            f"{r['batch']:>5} {r['step_ms']:>10.2f} {floor:>10} {r['tokens_per_s']:>10.1f} "
            f"{r['achieved_gb_s']:>14.1f} {r['preemptions']:>9}"
        )
    settings = {
        "prompt_len": args.prompt_len,
        "output_len": args.output_len,
        "batches": list(batches),
        "statistic": "all-decoding window / (n - 1 - d)",
        "max_num_batched_tokens": batched_tokens,
        "max_num_seqs": max(batches),
        "enable_prefix_caching": False,
        "bandwidth_gb_s": bandwidth,
        "params": n_params,
        "matmul_params": m_params,
        "kv_bytes_per_token": kappa,
        "kv_cache_tokens": cache_tokens,
    }
    write_receipt(args, UNITS, rows, engine_start_s, settings)
    return 0


if __name__ == "__main__":  # vLLM 0.26.0 forks its engine process by default, but may spawn (CPU build, CUDA
    # already initialised); a spawned child re-imports this file, so the guard is required
    raise SystemExit(main())
