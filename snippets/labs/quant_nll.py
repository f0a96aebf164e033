"""Lab 3A: what BF16, FP8 and AWQ 4-bit weights cost in memory, give back as KV cache, and cost in quality.

One engine per format, each in a fresh Python process (this script with ``--child``), so nothing of
one engine's memory lingers into the next and its start-up log is kept whole:

1. ``bf16``: ``--model`` as it is (Qwen2.5-7B-Instruct: BF16 weights).
2. ``fp8``: the same checkpoint with ``quantization="fp8"``: vLLM quantises the linear layers'
   weights to FP8 while loading (one scale per tensor), the embedding and lm_head stay 16-bit.
3. ``awq``: ``--awq-model`` (Qwen2.5-7B-Instruct-AWQ), a 4-bit checkpoint; vLLM reads the
   quantisation from its config and repacks the weights for the kernel it picks.

Each child measures, inside its engine:

- the parameter bytes the model holds, per dtype (``LLM.apply_model``, as lab 0C does);
- the KV tokens vLLM allocated (``vllm:cache_config_info``: blocks x block size);
- the kernel vLLM says it selected for the linear layers (its start-up log, :data:`KERNEL_PATTERN`);
- the decode step time at each batch of :data:`STEP_BATCHES` (``labkit.decode_step_s``, the method of
  lab 2A): where weight-only AWQ reads about a quarter of the bytes per quantised weight (4 bits plus
  its group's scale and zero; lesson 3A has the exact ratios) but, multiplying in 16 bits, turns
  compute-bound at a third of BF16's batch;
- the quality cost: the mean negative log-likelihood (NLL, nats per token) of :data:`TEXT` under the
  model, from ``SamplingParams(max_tokens=1, prompt_logprobs=TOP_K)``. vLLM returns, for every prompt
  position after the first, the log-probability of the prompt's own token given the tokens before
  it (position 0 has none: ``None``). NLL = -(sum of those) / (prompt tokens - 1). The text is
  scored twice in the same engine; prompt logprobs use no sampling, so both must be identical;
- a second quality measure, against the BF16 engine: at every position the top :data:`TOP_K` next-token
  log-probabilities, from which the parent computes the KL divergence of each format's next-token
  distribution from BF16's (:func:`kl_restricted`) and how often both put the same token first.

A format the engine cannot load (e.g. FP8 or AWQ on a build without the kernels) gets an ``n/a``
row with vLLM's reason; the lab goes on.

Run (GPU, vLLM 0.26.0):

    python snippets/labs/quant_nll.py --receipt receipts/rtx-4090/quant_nll.json

No hub access (random weights: the bytes and KV tokens are real, the NLL and KL are not quality figures):

    python snippets/labs/quant_nll.py --model PATH --load-format dummy --formats bf16,fp8

Imports the standard library and labkit (vLLM and torch only in the child).
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path

from labkit.cli import check_model_arg, engine_flags, fail, lab_parser, progress, whole_list
from labkit.engine import child_run, engine_core_in_process, run_lab, start_llm
from labkit.measure import cache_config, decode_step_sweep, kv_bytes_per_token
from labkit.receipt import measured_rows, write_receipt

LAB = "quant_nll"
SEED = 0
MAX_MODEL_LEN = 2048
AWQ_MODEL = "Qwen/Qwen2.5-7B-Instruct-AWQ"
FORMATS = ("bf16", "fp8", "awq")
"""The engines, in order: the checkpoint as it is, online FP8 (``quantization="fp8"``), the AWQ checkpoint."""
QUANTIZATION = {"bf16": None, "fp8": "fp8", "awq": None}
"""``LLM(quantization=...)`` per format; AWQ's comes from the checkpoint's own ``quantization_config``."""
STEP_BATCHES = (1, 16, 64, 256)
"""Batch sizes of the step-time sweep (``--step-batches``): on the RTX 4090, AWQ's compute-bound batch
(about 52) lies inside, BF16's (about 164) near the top."""
STEP_PROMPT_LEN = 128
STEP_OUTPUT_LEN = 64
"""Prompt and exact output tokens per request of the sweep: 256 x 192 tokens fit every format's KV cache."""
KERNEL_PATTERN = r"(?:Selected|Using) (\w+) for (\w+LinearMethod)"
"""vLLM's log line naming the linear-layer kernel it chose (vllm/model_executor/kernels/linear/__init__.py)."""
TOP_K = 20
"""Next-token log-probabilities kept per position (``prompt_logprobs``; vLLM's default ``max_logprobs`` is 20)."""
ROW_TAG = "QUANT_NLL_ROW "  # the child's one line of results on stdout, JSON after the tag
CHILD_TIMEOUT_S = 1800
TEXT = (
    "Four score and seven years ago our fathers brought forth on this continent, a new nation, conceived in "
    "Liberty, and dedicated to the proposition that all men are created equal. Now we are engaged in a great "
    "civil war, testing whether that nation, or any nation so conceived and so dedicated, can long endure. We "
    "are met on a great battle-field of that war. We have come to dedicate a portion of that field, as a final "
    "resting place for those who here gave their lives that that nation might live. It is altogether fitting "
    "and proper that we should do this. But, in a larger sense, we can not dedicate -- we can not consecrate -- "
    "we can not hallow -- this ground. The brave men, living and dead, who struggled here, have consecrated it, "
    "far above our poor power to add or detract. The world will little note, nor long remember what we say "
    "here, but it can never forget what they did here. It is for us the living, rather, to be dedicated here to "
    "the unfinished work which they who fought here have thus far so nobly advanced. It is rather for us to be "
    "here dedicated to the great task remaining before us -- that from these honored dead we take increased "
    "devotion to that cause for which they gave the last full measure of devotion -- that we here highly "
    "resolve that these dead shall not have died in vain -- that this nation, under God, shall have a new birth "
    "of freedom -- and that government of the people, by the people, for the people, shall not perish from the "
    "earth."
)
"""The scored text: Lincoln's Gettysburg Address (Bliss copy, 1864), in the public domain."""


# The receipt's rows: UNITS gives every measured key's unit, ROW every key's JSON type ("number": an int
# or a float; "| None": may be null). The lab's spec (src/infercourse/labs/) reads both.
UNITS = {
    "weight_bytes": "B",
    "kv_tokens": "tokens",
    "kv_bytes_per_token": "B/token",
    "prompt_tokens": "tokens",
    "scored_tokens": "tokens",
    "nll_per_token": "nats/token",
    "token_nll": "nats",
    "step_ms": "ms",
    "kl_to_bf16": "nats/token",
    "token_kl": "nats",
    "top1_agreement": "1",
}
ROW = {
    "format": "str",
    "model": "str",
    "quantization": "str | None",
    "outcome": "str",
    "reason": "str | None",
    "kernel": "str | None",
    "weight_bytes": "int | None",
    "kv_tokens": "int | None",
    "kv_bytes_per_token": "int | None",
    "prompt_tokens": "int | None",
    "scored_tokens": "int | None",
    "nll_per_token": "number | None",
    "repeat_identical": "bool | None",
    "token_nll": "list | None",
    "step_batches": "list | None",
    "step_ms": "list | None",
    "kl_to_bf16": "number | None",
    "token_kl": "list | None",
    "top1_agreement": "number | None",
}


def parse_args(argv=None) -> argparse.Namespace:
    p = lab_parser(
        LAB, "Weight bytes, KV tokens and NLL per token of BF16, FP8 and AWQ engines.", max_model_len=MAX_MODEL_LEN
    )
    p.add_argument("--awq-model", default=AWQ_MODEL, help="the AWQ checkpoint (hub id or local folder)")
    p.add_argument("--formats", default=",".join(FORMATS), help=f"comma-separated subset of {','.join(FORMATS)}")
    p.add_argument(
        "--step-batches",
        type=whole_list,
        default=",".join(map(str, STEP_BATCHES)),
        help="comma-separated batch sizes of the step-time sweep (default: the lesson's; CI uses fewer on a CPU)",
    )
    # internal: one engine in this process; prints its row after ROW_TAG
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--quantization", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.formats = tuple(f.strip() for f in args.formats.split(",") if f.strip())
    return args


def check_input(args) -> None:
    check_model_arg(args.model)
    unknown = [f for f in args.formats if f not in FORMATS]
    if unknown or not args.formats:
        fail(f"--formats {','.join(args.formats) or '(empty)'}: use a comma-separated subset of {','.join(FORMATS)}")
    if "awq" in args.formats:
        check_model_arg(args.awq_model)
    if args.max_model_len < max(32, STEP_PROMPT_LEN + STEP_OUTPUT_LEN):
        fail(f"--max-model-len must be at least {max(32, STEP_PROMPT_LEN + STEP_OUTPUT_LEN)}, got {args.max_model_len}")


def parameter_bytes(model) -> dict:
    """Bytes of every parameter the model holds, per dtype (a tied matrix counted once)."""
    by_dtype = {}
    for p in model.parameters():
        key = str(p.dtype).removeprefix("torch.")
        by_dtype[key] = by_dtype.get(key, 0) + p.numel() * p.element_size()
    return by_dtype


# --8<-- [start:token_nll]
def token_nll(output) -> tuple[list[int], list[float]]:
    """The prompt's token ids and, for every position after the first, -log p(token | tokens before it).

    ``output.prompt_logprobs[i]`` maps token ids to ``Logprob``s at position i and always holds the
    prompt's own token ``output.prompt_token_ids[i]``; position 0 is ``None`` (nothing precedes it).
    """
    ids = list(output.prompt_token_ids)
    logprobs = output.prompt_logprobs
    if logprobs is None or len(logprobs) != len(ids) or logprobs[0] is not None:
        fail("vLLM returned no prompt logprobs of the expected shape; is prompt_logprobs set?", 3)
    return ids, [-logprobs[i][ids[i]].logprob for i in range(1, len(ids))]


# --8<-- [end:token_nll]


def top_logprobs(output) -> list[list[list]]:
    """For every position after the first, the ``[token id, logprob]`` pairs vLLM ranked in its top TOP_K."""
    return [
        [[token, lp.logprob] for token, lp in position.items() if lp.rank is not None and lp.rank <= TOP_K]
        for position in output.prompt_logprobs[1:]
    ]


# --8<-- [start:kl]
def kl_restricted(p: list[list], q: list[list]) -> float:
    """KL(P || Q) in nats at one position, over the tokens of ``p`` (the reference's top K), both
    distributions renormalised over those tokens. A token ``q`` does not list gets ``q``'s smallest listed
    logprob (at least its true value), so the result errs low. ``p``, ``q``: ``[token id, logprob]`` pairs."""
    q_of = dict((token, lp) for token, lp in q)
    floor = min(q_of.values())
    lp = [lp for _, lp in p]
    lq = [q_of.get(token, floor) for token, _ in p]
    zp = math.log(sum(math.exp(v) for v in lp))
    zq = math.log(sum(math.exp(v) for v in lq))
    return sum(math.exp(a - zp) * ((a - zp) - (b - zq)) for a, b in zip(lp, lq, strict=True))


# --8<-- [end:kl]


def first_token(position: list[list]) -> int:
    """The token ranked first at one position."""
    return max(position, key=lambda pair: pair[1])[0]


# --8<-- [start:engine]
def child(args) -> int:
    """Start one engine, print its row (``ROW_TAG`` + JSON) and exit; vLLM's errors end the process."""
    engine_core_in_process()  # apply_model needs the model in this process
    llm, engine_start_s = start_llm(
        args,
        seed=SEED,
        quantization=args.quantization,
        max_num_seqs=max(args.step_batches),  # the largest batch decodes together
        enable_prefix_caching=False,
        disable_log_stats=False,
    )
    from vllm import SamplingParams

    labels = cache_config(llm)
    by_dtype = llm.apply_model(parameter_bytes)[0]
    model_config = llm.llm_engine.vllm_config.model_config  # read through vLLM: its hub switch applies
    import torch

    kv_dtype_bytes = torch.empty((), dtype=model_config.dtype).element_size()  # the cache's dtype: the model's
    params = SamplingParams(max_tokens=1, prompt_logprobs=TOP_K, temperature=0.0)
    outputs = [llm.generate([TEXT], params, use_tqdm=False)[0] for _ in range(2)]
    scored = [token_nll(output) for output in outputs]
    ids, nll = scored[0]
    step_params = SamplingParams(max_tokens=STEP_OUTPUT_LEN, ignore_eos=True, temperature=0, detokenize=False)
    step_ms = decode_step_sweep(llm, step_params, args.step_batches, STEP_PROMPT_LEN, STEP_OUTPUT_LEN, SEED)
    print(
        ROW_TAG
        + json.dumps(
            {
                "engine_start_s": engine_start_s,
                "weight_bytes": sum(by_dtype.values()),
                "bytes_by_dtype": by_dtype,
                "kv_tokens": int(labels["num_gpu_blocks"]) * int(labels["block_size"]),
                "kv_bytes_per_token": kv_bytes_per_token(model_config.hf_config, kv_dtype_bytes),
                "prompt_tokens": len(ids),
                "token_nll": nll,
                "top": top_logprobs(outputs[0]),
                "repeat_identical": scored[1] == scored[0],
                "step_ms": step_ms,
            }
        ),
        flush=True,
    )
    return 0


# --8<-- [end:engine]


def run_child(args, fmt: str, log_dir: Path) -> dict:
    """Run this script with ``--child`` for one format in a fresh process (its log kept in
    ``log_dir/<fmt>.log``); return its row (None if it did not start), the kernel it logged and the
    root cause of a failure."""
    model = args.awq_model if fmt == "awq" else args.model
    arguments = ["--model", model, *engine_flags(args)]
    arguments += ["--step-batches", ",".join(map(str, args.step_batches))]
    if QUANTIZATION[fmt]:
        arguments += ["--quantization", QUANTIZATION[fmt]]
    log = log_dir / f"{fmt}.log"
    run = child_run(__file__, arguments, log, ROW_TAG, CHILD_TIMEOUT_S)
    kernels = re.findall(KERNEL_PATTERN, run["text"])
    return {
        "row": run["row"],
        "model": model,
        "log": log,
        "cause": run["cause"],
        "kernel": kernels[-1][0] if kernels else None,
    }


def result_row(args, fmt: str, got: dict) -> dict:
    """One receipt row: the measured figures of a started engine, or ``n/a`` with vLLM's reason."""
    row = got["row"]
    if row is None:
        return {
            **dict.fromkeys(ROW),
            "format": fmt,
            "model": got["model"],
            "quantization": QUANTIZATION[fmt],
            "outcome": "n/a",
            "reason": got["cause"][:400],
        }
    nll = row["token_nll"]
    return {
        "format": fmt,
        "model": got["model"],
        "quantization": QUANTIZATION[fmt],
        "outcome": "started",
        "reason": None,
        "kernel": got["kernel"],
        "weight_bytes": row["weight_bytes"],
        "kv_tokens": row["kv_tokens"],
        "kv_bytes_per_token": row["kv_bytes_per_token"],
        "prompt_tokens": row["prompt_tokens"],
        "scored_tokens": len(nll),
        "nll_per_token": sum(nll) / len(nll),
        "repeat_identical": row["repeat_identical"],
        "token_nll": nll,
        "step_batches": list(args.step_batches),
        "step_ms": [round(ms, 4) for ms in row["step_ms"]],
        "kl_to_bf16": None,
        "token_kl": None,
        "top1_agreement": None,
    }


def compare_to_bf16(rows: list[dict], tops: dict) -> None:
    """Fill each started non-BF16 row's KL from BF16 and top-1 agreement (``tops``: format -> positions)."""
    reference = tops.get("bf16")
    for r in rows:
        if reference is None or r["format"] == "bf16" or r["format"] not in tops:
            continue
        pairs = list(zip(reference, tops[r["format"]], strict=True))
        token_kl = [kl_restricted(p, q) for p, q in pairs]
        r["token_kl"] = token_kl
        r["kl_to_bf16"] = sum(token_kl) / len(token_kl)
        r["top1_agreement"] = sum(first_token(p) == first_token(q) for p, q in pairs) / len(pairs)


def parent(args, log_dir: Path) -> int:
    """Start each engine in a child process of this script, one by one, collect their rows and write the
    receipt."""
    rows, starts, tops = measured_rows(args, UNITS), [], {}
    for i, fmt in enumerate(args.formats, 1):
        progress(f"engine {i}/{len(args.formats)}: {fmt} (a first run downloads the weights)")
        got = run_child(args, fmt, log_dir)
        if got["row"] is None:
            progress(f"{fmt}: n/a ({got['cause'][:300]}; log: {got['log']})")
        else:
            starts.append(got["row"]["engine_start_s"])
            tops[fmt] = got["row"]["top"]
        rows.append(result_row(args, fmt, got))
    compare_to_bf16(rows, tops)
    if not starts:
        fail(f"no engine started; the first reason: {rows[0]['reason']} (logs: {log_dir})")

    print(
        f"{args.model} ({args.load_format} weights), max_model_len {args.max_model_len:,}; "
        f"NLL in nats per token of the {LAB} text"
    )
    print(f"{'format':<7} {'weight bytes':>15} {'KV tokens':>11} {'tokens':>7} {'NLL/token':>10} {'repeat':>7}  kernel")
    for r in rows:
        if r["outcome"] != "started":
            print(f"{r['format']:<7} n/a: {r['reason'][:200]}")
            continue
        print(
            f"{r['format']:<7} {r['weight_bytes']:>15,} {r['kv_tokens']:>11,} {r['scored_tokens']:>7,} "
            f"{r['nll_per_token']:>10.4f} {'same' if r['repeat_identical'] else 'DIFFERS':>7}  {r['kernel'] or '-'}"
        )
    print(f"decode step (ms) at batch {', '.join(map(str, args.step_batches))}:")
    for r in rows:
        if r["outcome"] == "started":
            print(f"{r['format']:<7} " + " ".join(f"{ms:>9.2f}" for ms in r["step_ms"]))
    for r in rows:
        if r["kl_to_bf16"] is not None:
            print(
                f"{r['format']:<7} against bf16: KL {r['kl_to_bf16']:.4f} nats/token over the top {TOP_K}, "
                f"same first token at {r['top1_agreement']:.1%} of positions"
            )
    settings = {
        "formats": list(args.formats),
        "awq_model": args.awq_model,
        "seed": SEED,
        "enable_prefix_caching": False,
        "prompt_logprobs": TOP_K,
        "text_chars": len(TEXT),
        "step_prompt_len": STEP_PROMPT_LEN,
        "step_output_len": STEP_OUTPUT_LEN,
        "statistic": "step: all-decoding window / (n - 1 - d), labkit.decode_step_s",
    }
    write_receipt(args, UNITS, rows, starts[0], settings)
    return 0


def main(argv=None) -> int:
    return run_lab(argv, parse_args, check_input, child, parent, logs="<format>.log")


if __name__ == "__main__":  # vLLM 0.26.0 forks its engine process by default, but may spawn (CPU build, CUDA
    # already initialised); a spawned child re-imports this file, so the guard is required
    raise SystemExit(main())
