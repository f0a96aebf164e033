"""Lab 0C: how many bytes do the weights take in vLLM, and does it match the count from config.json?

Loads the model with vLLM and sums, inside the engine, the elements and bytes of every parameter
the model holds, per dtype (``model.parameters()``, run with ``LLM.apply_model``). vLLM fuses
q, k, v into one matrix and gate, up into another; that changes no count.

Compare with the lesson's prediction: N x 2 B in BF16; for AWQ 4-bit about 0.52 B per quantised
weight plus 2 B for the rest. What to look for: the parameter bytes equal the prediction to well
under 1 %. (vLLM also logs "Model loading took X GiB" on a GPU: weights plus what the loader left
allocated; compare it by eye.)

Run (GPU, vLLM 0.26.0):

    python snippets/labs/weights.py --receipt receipts/rtx-4090/weights.json
    python snippets/labs/weights.py --model Qwen/Qwen2.5-7B-Instruct-AWQ

``--load-format dummy`` allocates the same tensors filled with random values: the byte counts are
the same, so this lab needs no download to check the arithmetic.

The engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) so that ``apply_model``
reaches the model without sending the function to another process.

Imports the standard library, ``labkit`` (this folder) and vLLM (inside ``main``).
"""

from __future__ import annotations

import argparse

from labkit.cli import check_model_arg, fail, lab_parser, progress
from labkit.engine import engine_core_in_process, prepare, start_llm
from labkit.receipt import write_receipt

LAB = "weights"
MAX_MODEL_LEN = 4096
"""Default context length; vLLM starts only if the KV cache can hold one sequence this long."""
GIB = 2**30
GB = 10**9


# The receipt's rows: UNITS gives every measured key's unit, ROW every key's JSON type ("number": an int
# or a float; "| None": may be null). The lab's spec (src/infercourse/labs/) reads both.
UNITS = {"elements": "count", "bytes": "B"}
ROW = {
    "dtype": "str",
    "elements": "int",
    "bytes": "int",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = lab_parser(LAB, "Measure the weight bytes of a model loaded by vLLM.", max_model_len=MAX_MODEL_LEN)
    args = p.parse_args(argv)
    if args.max_model_len < 16:
        fail(f"--max-model-len must be at least 16, got {args.max_model_len}")
    check_model_arg(args.model)
    return args


# --8<-- [start:measure]
def parameter_bytes(model) -> dict:
    """Elements and bytes of every parameter the model holds, per dtype (a tied matrix counted once)."""
    by_dtype = {}
    for p in model.parameters():  # parameters() yields a shared tensor once
        entry = by_dtype.setdefault(str(p.dtype).removeprefix("torch."), {"elements": 0, "bytes": 0})
        entry["elements"] += p.numel()
        entry["bytes"] += p.numel() * p.element_size()
    return by_dtype


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    prepare(args)
    engine_core_in_process()  # apply_model needs the model here
    # no CUDA graphs: they change nothing about the weights and take time
    llm, engine_start_s = start_llm(args, enforce_eager=True)
    progress("counting the parameters")

    by_dtype = llm.apply_model(parameter_bytes)[0]
    rows = [{"dtype": dtype, **d} for dtype, d in sorted(by_dtype.items())]
    rows.append({"dtype": "all", "elements": sum(r["elements"] for r in rows), "bytes": sum(r["bytes"] for r in rows)})
    # --8<-- [end:measure]

    print(f"{args.model} ({args.load_format} weights), engine start {engine_start_s:.1f} s")
    print(f"{'dtype':<10} {'elements':>15} {'bytes':>15} {'GB':>8} {'GiB':>8}")
    for r in rows:
        print(
            f"{r['dtype']:<10} {r['elements']:>15,} {r['bytes']:>15,} {r['bytes'] / GB:>8.3f} {r['bytes'] / GIB:>8.3f}"
        )
    settings = {"enforce_eager": True}
    write_receipt(args, UNITS, rows, engine_start_s, settings)
    return 0


if __name__ == "__main__":  # vLLM 0.26.0 forks its engine process by default, but may spawn (CPU build, CUDA
    # already initialised); a spawned child re-imports this file, so the guard is required
    raise SystemExit(main())
