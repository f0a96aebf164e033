"""Lab 7B: how many experts one decode step reads as the batch grows, and what that does to the step time.

A mixture-of-experts layer sends each token to k of its E experts (OLMoE-1B-7B: 8 of 64). One token reads
k experts' weights; a batch of B tokens reads every expert that at least one of them picked, so a decode
step's weight bytes grow with the batch until every expert is read. The lab measures both halves:

1. **Experts touched** (``--modes eager``): an engine without CUDA graphs, with a forward hook on each MoE
   layer's router (``mlp.gate``, the d x E linear whose logits pick the experts). For every call the hook
   keeps the top-k expert ids of each token, exactly the experts the layer then runs (this model family
   routes by the top k of the router's logits: :data:`ROUTED_BY_TOP_K`). Of the measured batch the lab keeps
   the calls that routed exactly B tokens, its decode steps, and counts the distinct experts of each
   (layer, step): the mean, the least and the most, and how many such steps each layer saw (B requests of
   n output tokens decode together for n - 1 steps after one prefill step).
2. **Step time** (each mode of ``--modes``): per batch an untimed warm-up batch, then a timed one; the step
   time from the engine's own clock (``labkit.decode_step_sweep``). ``graphs`` is vLLM's default engine
   (torch.compile and CUDA graphs, where a hook would not run on each step); ``eager`` is the counting
   engine, whose steps also pay every kernel launch and the hooks' top-k.

What to look for: one token touches exactly k experts; the count grows with B as E (1 - (1 - k/E)^B)
predicts for uniform routing, and never above it (a trained router prefers some experts, which lowers it);
the step time grows with B several times more than a dense model's (lesson 2A's ``batch_decode``), because
each step reads more expert weights, until every expert is read and the step flattens again.

Run (GPU, vLLM 0.26.0; a first run downloads OLMoE-1B-7B, 13.8 GB):

    python snippets/labs/expert_coverage.py --receipt receipts/rtx-4090/expert_coverage.json

Imports the standard library, ``labkit`` (this folder) and, in its children, vLLM and torch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from labkit.cli import check_model_arg, engine_flags, fail, lab_parser, progress, whole, whole_list
from labkit.engine import child_run, engine_core_in_process, run_lab, start_llm
from labkit.measure import decode_step_sweep
from labkit.receipt import write_receipt

LAB = "expert_coverage"
MODEL = "allenai/OLMoE-1B-7B-0924-Instruct"
"""The lab's model: 64 experts, 8 per token, 16 layers; 6.9B parameters in BF16 beside a useful KV cache on a
24 GB card, with no quantised kernel between the bytes and the clock (the lesson explains the choice)."""
ROUTED_BY_TOP_K = ("olmoe", "qwen3_moe")
"""``model_type`` of the models whose router picks each token's experts as the top k of the gate's logits
(softmax, then top-k: vLLM 0.26.0 ``vllm/model_executor/models/olmoe.py``:113-117 and ``qwen3_moe.py``); the
hook re-derives the experts that way, so the lab refuses other routing (DeepSeek-V3's grouped, biased top-k)."""
MODES = ("eager", "graphs")
BATCHES = (1, 2, 4, 8, 16, 32, 64)
PROMPT_LEN = 128
"""Prompt tokens per request: 64 x 128 = 8,192 tokens prefill in one step, before every decode step."""
OUTPUT_LEN = 32
"""Tokens each request generates: one from the prefill step, then 31 decode steps of the whole batch."""
MAX_MODEL_LEN = 1024
SEED = 0
CHILD_TIMEOUT_S = 1800
"""Seconds one engine may run: start, compile and graph capture, and every batch twice."""
ROW_TAG = "EXPERT_COVERAGE_ROW "

# The receipt's rows: UNITS gives every measured key's unit, ROW every key's JSON type ("number": an int
# or a float; "| None": may be null). The lab's spec (src/infercourse/labs/) reads both.
UNITS = {
    "router_steps": "steps",
    "experts_mean": "experts",
    "experts_min": "experts",
    "experts_max": "experts",
    "step_ms": "ms",
}
ROW = {
    "mode": "str",
    "batch": "int",
    "router_steps": "int | None",
    "experts_mean": "number | None",
    "experts_min": "int | None",
    "experts_max": "int | None",
    "step_ms": "number",
}


def parse_args(argv=None) -> argparse.Namespace:
    p = lab_parser(LAB, "Experts touched per decode step and the step time, against the batch size.", MAX_MODEL_LEN)
    p.set_defaults(model=MODEL)
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated engines: eager (counts), graphs")
    p.add_argument("--batches", type=whole_list, default=",".join(map(str, BATCHES)), help="batch sizes, increasing")
    p.add_argument("--prompt-len", type=whole, default=PROMPT_LEN, help="prompt tokens per request (>= 2)")
    p.add_argument("--output-len", type=whole, default=OUTPUT_LEN, help="tokens each request generates (>= 4)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # internal: one engine, one row
    p.add_argument("--mode", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.modes = tuple(args.modes.split(","))
    return args


def check_input(args) -> None:
    """Refuse, before any engine starts, what cannot run: a missing model folder or one whose model is not a MoE
    this lab reads (:data:`ROUTED_BY_TOP_K`), an unknown or repeated mode,
    a 1-token prompt (its prefill would route as many tokens as a batch-1 decode step), fewer than 4 output
    tokens, or requests that do not fit ``--max-model-len``."""
    check_model_arg(args.model)
    config = Path(args.model).expanduser() / "config.json"  # a local folder: its router is known before the start
    if config.is_file() and json.loads(config.read_text()).get("model_type") not in ROUTED_BY_TOP_K:
        fail(
            f"{args.model} is not a mixture of experts this lab can read; its model_type must be one of "
            f"{', '.join(ROUTED_BY_TOP_K)} (the lab's own: {MODEL})"
        )
    unknown = [m for m in args.modes if m not in MODES]
    if unknown or len(set(args.modes)) != len(args.modes):
        fail(f"--modes {','.join(args.modes)}: name each of {', '.join(MODES)} at most once")
    if args.prompt_len < 2:
        fail(f"--prompt-len must be at least 2 (a prefill must not look like a decode step), got {args.prompt_len}")
    if args.output_len < 4:
        fail(f"--output-len must be at least 4 (the timed window needs decode steps), got {args.output_len}")
    if args.prompt_len + args.output_len > args.max_model_len:
        fail(
            f"prompt + output = {args.prompt_len + args.output_len} tokens exceed --max-model-len {args.max_model_len}"
        )


# --8<-- [start:hook]
def install_router_hooks(model, top_k: int) -> int:
    """Hook every MoE layer's router (``...mlp.gate``): each call appends (layer, tokens, top-k expert ids) to
    ``model.router_calls``, the ids kept on the device (no synchronisation inside a step). Returns the count."""
    model.router_calls = []
    hooked = 0
    for name, module in model.named_modules():
        if name.endswith(".mlp.gate"):

            def record(module, inputs, output, layer=name):
                logits = output[0] if isinstance(output, tuple) else output  # vLLM's linears return (y, bias)
                model.router_calls.append((layer, logits.shape[0], logits.topk(top_k, dim=-1).indices))

            module.register_forward_hook(record)
            hooked += 1
    return hooked


def clear_router_calls(model) -> None:
    model.router_calls.clear()


def experts_per_step(model, batch: int) -> dict[str, list[int]]:
    """Per hooked layer, the distinct experts of each call that routed exactly ``batch`` tokens (a decode step)."""
    steps: dict[str, list[int]] = {}
    for layer, tokens, chosen in model.router_calls:
        if tokens == batch:
            steps.setdefault(layer, []).append(int(chosen.unique().numel()))
    return steps


# --8<-- [end:hook]


# --8<-- [start:engine]
def child(args) -> int:
    """One engine in this process (eager: hooked and counted; graphs: timed only); prints its rows after ROW_TAG."""
    engine_core_in_process()  # apply_model reaches the model's modules in this process
    llm, engine_start_s = start_llm(
        args,
        seed=SEED,
        enforce_eager=args.mode == "eager" or args.enforce_eager,
        max_num_seqs=max(args.batches),
        max_num_batched_tokens=max(args.batches) * args.prompt_len,  # every prompt prefills in one step
        enable_prefix_caching=False,
        disable_log_stats=False,  # decode_step_sweep reads the engine's step clock
    )
    from vllm import SamplingParams

    hf = llm.llm_engine.vllm_config.model_config.hf_config
    if hf.model_type not in ROUTED_BY_TOP_K:
        fail(f"{args.model} is a {hf.model_type!r} model; this lab reads the router of {', '.join(ROUTED_BY_TOP_K)}")
    experts = getattr(hf, "num_experts", None) or hf.num_local_experts  # transformers 5 renames num_experts
    top_k = hf.num_experts_per_tok
    counting = args.mode == "eager"
    hooked = llm.apply_model(lambda model: install_router_hooks(model, top_k))[0] if counting else 0
    params = SamplingParams(max_tokens=args.output_len, ignore_eos=True, temperature=0, detokenize=False)
    clear = (lambda: llm.apply_model(clear_router_calls)) if counting else None  # before each timed batch
    rows = []
    for batch in args.batches:
        progress(f"{args.mode}: batch {batch}")
        step_ms = decode_step_sweep(llm, params, [batch], args.prompt_len, args.output_len, SEED + batch, clear)[0]
        row = {"mode": args.mode, "batch": batch, "step_ms": round(step_ms, 6)}
        if counting:
            per_layer = llm.apply_model(lambda model, b=batch: experts_per_step(model, b))[0]
            counts = [c for layer in per_layer.values() for c in layer]
            row |= {  # a layer that routed no B-token call counts 0 steps
                "router_steps": min(map(len, per_layer.values())) if len(per_layer) == hooked else 0,
                "experts_mean": round(statistics.fmean(counts), 4) if counts else None,
                "experts_min": min(counts, default=None),
                "experts_max": max(counts, default=None),
            }
        rows.append(row)
    found = {"experts": experts, "top_k": top_k, "moe_layers": hooked, "engine_start_s": engine_start_s}
    print(ROW_TAG + json.dumps({**found, "rows": rows}), flush=True)
    return 0


# --8<-- [end:engine]


def run_engine(args, mode: str, log_dir: Path) -> dict:
    """One mode's engine in a fresh child process: its rows and what it read of the model. Exits (code 3) when
    the engine fails."""
    arguments = ["--model", args.model, *engine_flags(args), "--mode", mode]
    arguments += ["--batches", ",".join(map(str, args.batches)), "--prompt-len", str(args.prompt_len)]
    arguments += ["--output-len", str(args.output_len)]
    got = child_run(__file__, arguments, log_dir / f"{mode}.log", ROW_TAG, CHILD_TIMEOUT_S)
    if got["row"] is None:
        fail(f"the {mode} engine failed: {got['cause'][:400]} (log: {log_dir / mode}.log)", 3)
    return got["row"]


def parent(args, log_dir: Path) -> int:
    """Start each engine in a child process of this script, one by one, collect their rows and write the
    receipt."""
    found = [run_engine(args, mode, log_dir) for mode in args.modes]
    empty = dict.fromkeys(("router_steps", "experts_mean", "experts_min", "experts_max"))
    rows = [{**empty, **row} for f in found for row in f["rows"]]
    model = next((f for f in found if f["moe_layers"]), found[0])

    print(
        f"{args.model}: E = {model['experts']} experts, k = {model['top_k']} per token, {model['moe_layers'] or '?'} "
        f"MoE layers; prompt {args.prompt_len} + output {args.output_len} tokens"
    )
    print(f"{'mode':<7} {'batch':>5} {'steps':>6} {'experts/step':>12} {'min':>4} {'max':>4} {'step (ms)':>10}")
    for r in rows:
        cells = [r["router_steps"], r["experts_mean"], r["experts_min"], r["experts_max"]]
        steps, mean, low, high = ("-" if c is None else c for c in cells)
        print(f"{r['mode']:<7} {r['batch']:>5} {steps:>6} {mean:>12} {low:>4} {high:>4} {r['step_ms']:>10.3f}")
    settings = {
        "modes": list(args.modes),
        "batches": list(args.batches),
        "prompt_len": args.prompt_len,
        "output_len": args.output_len,
        "experts": model["experts"],
        "top_k": model["top_k"],
        "moe_layers": model["moe_layers"],
        "seed": SEED,
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # each child runs its engine core in its own process
        "statistic": "experts: distinct top-k ids per (layer, decode step); step: labkit.decode_step_s",
    }
    write_receipt(args, UNITS, rows, found[0]["engine_start_s"], settings)
    return 0


def main(argv=None) -> int:
    return run_lab(argv, parse_args, check_input, child, parent, logs="<mode>.log")


if __name__ == "__main__":  # vLLM may spawn processes; a spawned child re-imports this file
    sys.exit(main())
