"""Lab 1B: the same long-context decode on each attention backend vLLM will run here, beside its floor.

Each run of ``--runs`` names an attention backend (``default``: vLLM's own choice) and a KV-cache dtype
(``auto``: the model's, BF16; ``fp8``: one byte per element). Each run is one engine in a fresh child
process, with the engine core in that process, so that the lab reads from the model's attention layers
the backend they really run (``compilation_config.static_forward_context``), not only what was asked:

1. **Which backend.** The backend the layers use, the GPU's compute capability, and the line vLLM's CPU
   build logs when it ignores a forced backend (:data:`CPU_REFUSAL`). A backend vLLM refuses for this
   configuration (FlashAttention with an FP8 cache below Hopper) gives one row with vLLM's reason
   (:data:`REFUSED`): the engine never starts.
2. **How fast.** At each context S of ``--contexts``, ``--batch`` requests of S random tokens decode
   ``--output-len`` tokens: an untimed warm-up batch, then a timed one; the decode step time comes from the
   engine's own clock (``labkit.decode_step_sweep``), and the tokens the engine's step histogram
   (``vllm:iteration_tokens_total``) records over both batches: exactly 2 B (S + n), every prompt token and
   every generated token once, whatever the backend.

What to look for: on a GPU every backend's step grows with S (each step reads B S kappa bytes of cache on
top of the weights) and stays above the floor the lesson computes; the FP8 cache reads half the cache
bytes; on an RTX 4090 vLLM picks FlashAttention for a BF16 cache and FlashInfer for an FP8 one, and
refuses FlashAttention with FP8. On vLLM's CPU build every run uses CPU_ATTN.

Run (GPU, vLLM 0.26.0; a first run downloads the weights):

    python snippets/labs/attention_backends.py --receipt receipts/rtx-4090/attention_backends.json

Imports the standard library, ``labkit`` (this folder) and, in its children, vLLM and torch.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from labkit.cli import check_model_arg, engine_flags, fail, lab_parser, progress, whole, whole_list
from labkit.engine import child_run, engine_core_in_process, run_lab, start_llm
from labkit.measure import STEP_TOKENS_METRIC, decode_step_sweep, kv_bytes_per_token, metric_totals
from labkit.receipt import measured_rows, write_receipt

LAB = "attention_backends"
DEFAULT = "default"
"""The backend name that leaves the choice to vLLM (no ``attention_backend``)."""
BACKENDS = (DEFAULT, "FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION", "CPU_ATTN")
"""Backends a run may name: vLLM 0.26.0's ``AttentionBackendEnum`` members for a model with standard
(not MLA) attention on a CUDA GPU (vllm/platforms/cuda.py: ``_get_backend_priorities``) and on a CPU."""
KV_DTYPES = ("auto", "fp8")
RUNS = ("default:auto", "FLASHINFER:auto", "TRITON_ATTN:auto", "default:fp8", "FLASH_ATTN:fp8")
"""``backend:kv_cache_dtype`` of each engine, in order."""
CONTEXTS = (1024, 4096, 16384)
"""Prompt tokens of each timed batch: the decode steps read this much cache per sequence, and more."""
BATCH = 4
"""Requests decoding together (max_num_seqs): 4 x 16,448 tokens of cache fit beside the 7B's weights."""
OUTPUT_LEN = 32
"""Tokens each request generates: 31 decode steps, the all-decoding ones timed."""
MAX_MODEL_LEN = 16448
"""The longest context + 64 tokens: the longest request fits with room to spare."""
SEED = 0
CHILD_TIMEOUT_S = 1800
"""Seconds one child may run: engine start, compile, graph capture and both batches at every context."""
ROW_TAG = "ATTENTION_BACKENDS_ROW "
REFUSED = "is not valid for this configuration"
"""vLLM 0.26.0's refusal of a forced backend that cannot run this configuration, raised before any
weight is loaded: "Selected backend ... is not valid for this configuration. Reason: [...]"
(vllm/platforms/cuda.py, ``get_attn_backend_cls``)."""
CPU_REFUSAL = r"Cannot use (?:AttentionBackendEnum\.)?(\w+) backend on CPU"
"""vLLM's CPU build on a forced backend it does not have: it logs this and runs CPU_ATTN
(vllm/platforms/cpu.py, ``get_attn_backend_cls``; the ``%s`` of an enum member)."""

# The receipt's rows: UNITS gives every measured key's unit, ROW every key's JSON type ("number": an int
# or a float; "| None": may be null). The lab's spec (src/infercourse/labs/) reads both.
UNITS = {
    "kv_bytes_per_token": "B/token",
    "step_ms": "ms",
    "histogram_tokens": "tokens",
}
ROW = {
    "run": "str",
    "requested_backend": "str",
    "kv_cache_dtype": "str",
    "outcome": "str",
    "reason": "str | None",
    "backend": "str | None",
    "capability": "str | None",
    "cpu_refusal": "str | None",
    "context": "int | None",
    "batch": "int | None",
    "output_len": "int | None",
    "kv_bytes_per_token": "int | None",
    "step_ms": "number | None",
    "histogram_tokens": "int | None",
}


def parse_runs(text: str) -> tuple[tuple[str, str], ...]:
    """``"default:auto,FLASH_ATTN:fp8"`` -> (("default", "auto"), ("FLASH_ATTN", "fp8")); one ``error:``
    line on a name outside :data:`BACKENDS` or :data:`KV_DTYPES`, or a run named twice."""
    runs = tuple(tuple(item.split(":", 1)) if ":" in item else (item, "") for item in text.split(","))
    for backend, dtype in runs:
        if backend not in BACKENDS or dtype not in KV_DTYPES:
            fail(
                f"--runs {text!r}: {backend}:{dtype} is not BACKEND:DTYPE with a backend of {', '.join(BACKENDS)} "
                f"and a dtype of {', '.join(KV_DTYPES)}"
            )
    if len(set(runs)) != len(runs):
        fail(f"--runs {text!r} names a run twice")
    return runs


def parse_args(argv=None) -> argparse.Namespace:
    p = lab_parser(LAB, "The same long-context decode on each attention backend, beside its floor.", MAX_MODEL_LEN)
    p.add_argument("--runs", default=",".join(RUNS), help="comma-separated BACKEND:DTYPE (default = vLLM's choice)")
    p.add_argument(
        "--contexts", type=whole_list, default=",".join(map(str, CONTEXTS)), help="prompt tokens, increasing"
    )
    p.add_argument("--batch", type=whole, default=BATCH, help="requests decoding together")
    p.add_argument("--output-len", type=whole, default=OUTPUT_LEN, help="tokens each request generates (>= 4)")
    # internal: one engine in this process; prints its row after ROW_TAG
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--backend", help=argparse.SUPPRESS)
    p.add_argument("--kv-cache-dtype", default="auto", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.runs = parse_runs(args.runs)
    return args


def check_input(args) -> None:
    """Refuse, before any engine starts, what cannot run: a missing model folder, fewer than 4 output tokens
    (a timed window needs all-decoding steps), or a context that does not fit ``--max-model-len``."""
    check_model_arg(args.model)
    if args.output_len < 4:
        fail(f"--output-len must be at least 4 (the timed window needs decode steps), got {args.output_len}")
    need = max(args.contexts) + args.output_len
    if need > args.max_model_len:
        fail(f"the longest context needs {need} tokens but --max-model-len is {args.max_model_len}; raise it")


# --8<-- [start:engine]
def child(args) -> int:
    """One engine with the run's backend and KV dtype: which backend its attention layers run, and the
    timed decode at every context. Prints its row after ROW_TAG; vLLM's refusal ends the process."""
    engine_core_in_process()  # the model's layers live in this process: the lab reads their backend
    llm, engine_start_s = start_llm(
        args,
        seed=SEED,
        attention_backend=None if args.backend == DEFAULT else args.backend,
        kv_cache_dtype=args.kv_cache_dtype,
        max_num_seqs=args.batch,
        enable_prefix_caching=False,  # each prompt is prefilled in full, so the token count is exact
        disable_log_stats=False,  # decode_step_sweep and the step histogram need the engine's stats
    )
    import torch
    from vllm import SamplingParams

    config = llm.llm_engine.vllm_config
    layers = config.compilation_config.static_forward_context.values()  # every attention layer, by name
    backends = sorted({layer.attn_backend.get_name() for layer in layers if hasattr(layer, "attn_backend")})
    weight_b = torch.empty((), dtype=config.model_config.dtype).element_size()
    kv_b = 1 if args.kv_cache_dtype == "fp8" else weight_b
    params = SamplingParams(max_tokens=args.output_len, ignore_eos=True, temperature=0, detokenize=False)
    steps = []
    for context in args.contexts:
        before = metric_totals(llm, STEP_TOKENS_METRIC)[0]
        step_ms = decode_step_sweep(llm, params, [args.batch], context, args.output_len, SEED)[0]
        after = metric_totals(llm, STEP_TOKENS_METRIC)[0]
        steps.append({"context": context, "step_ms": step_ms, "histogram_tokens": round(after - before)})
    found = {
        "backend": ",".join(backends) or None,
        "capability": ".".join(map(str, torch.cuda.get_device_capability())) if torch.cuda.is_available() else None,
        "kv_bytes_per_token": kv_bytes_per_token(config.model_config.hf_config, kv_b),
        "engine_start_s": engine_start_s,
        "steps": steps,
    }
    print(ROW_TAG + json.dumps(found), flush=True)
    return 0


# --8<-- [end:engine]


def run_engine(args, backend: str, dtype: str, log_dir: Path) -> list[dict]:
    """One run in a fresh child process: its rows, one per context, or one ``refused`` row with vLLM's reason.
    Exits (code 3) when an engine fails for any other reason."""
    name = f"{backend}-{dtype}"
    arguments = ["--model", args.model, *engine_flags(args), "--backend", backend, "--kv-cache-dtype", dtype]
    arguments += ["--contexts", ",".join(map(str, args.contexts)), "--batch", str(args.batch)]
    arguments += ["--output-len", str(args.output_len)]
    got = child_run(__file__, arguments, log_dir / f"{name}.log", ROW_TAG, CHILD_TIMEOUT_S)
    base = {"run": f"{backend}:{dtype}", "requested_backend": backend, "kv_cache_dtype": dtype}
    empty = dict.fromkeys(("context", "batch", "output_len", "kv_bytes_per_token", "step_ms", "histogram_tokens"))
    if got["row"] is None:
        if REFUSED not in (got["cause"] or ""):
            fail(f"{name}: the engine failed: {got['cause'][:400]} (log: {log_dir / name}.log)", 3)
        row = {**base, "outcome": "refused", "reason": got["cause"][:400], "backend": None, "capability": None}
        return [{**row, "cpu_refusal": None, **empty, "engine_start_s": None}]
    found, refusal = got["row"], re.findall(CPU_REFUSAL, got["text"])
    return [
        {
            **base,
            "outcome": "started",
            "reason": None,
            "backend": found["backend"],
            "capability": found["capability"],
            "cpu_refusal": refusal[-1] if refusal else None,
            "context": step["context"],
            "batch": args.batch,
            "output_len": args.output_len,
            "kv_bytes_per_token": found["kv_bytes_per_token"],
            "step_ms": round(step["step_ms"], 6),
            "histogram_tokens": step["histogram_tokens"],
            "engine_start_s": found["engine_start_s"],
        }
        for step in found["steps"]
    ]


def parent(args, log_dir: Path) -> int:
    """Start each engine in a child process of this script, one by one, collect their rows and write the
    receipt."""
    rows = measured_rows(args, UNITS)
    for i, (backend, dtype) in enumerate(args.runs, 1):
        progress(f"engine {i}/{len(args.runs)}: backend {backend}, KV cache {dtype}")
        rows += run_engine(args, backend, dtype, log_dir)
    starts = [r.pop("engine_start_s") for r in rows]
    if all(s is None for s in starts):
        fail(f"no engine started; the first reason: {rows[0]['reason']} (logs: {log_dir})", 3)

    print(f"{args.model}, {args.batch} requests x {args.output_len} output tokens; decode step per context")
    print(f"{'run':<18} {'context':>8} {'backend':<12} {'step (ms)':>10} {'tokens':>10}")
    for r in rows:
        if r["outcome"] != "started":
            print(f"{r['run']:<18} {'-':>8} refused: {r['reason'][:160]}")
            continue
        print(f"{r['run']:<18} {r['context']:>8} {r['backend']:<12} {r['step_ms']:>10.3f} {r['histogram_tokens']:>10,}")
    settings = {
        "runs": [f"{b}:{d}" for b, d in args.runs],
        "contexts": list(args.contexts),
        "batch": args.batch,
        "output_len": args.output_len,
        "seed": SEED,
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # each child runs its engine core in its own process
        "statistic": "step: all-decoding window / (n - 1 - d) of the timed batch, labkit.decode_step_s",
    }
    write_receipt(args, UNITS, rows, next(s for s in starts if s is not None), settings)
    return 0


def main(argv=None) -> int:
    return run_lab(argv, parse_args, check_input, child, parent, logs="<backend>-<dtype>.log")


if __name__ == "__main__":  # vLLM may spawn processes; a spawned child re-imports this file
    sys.exit(main())
