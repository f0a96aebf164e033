"""Lab 0C: how much GPU memory do the weights take, and does it match the count from config.json?

Loads the model with vLLM and reports, from inside the engine:

- the parameters vLLM built: their number of elements and their bytes, per dtype (a sum over
  ``model.parameters()``, run in the worker with ``LLM.apply_model``);
- the memory vLLM says loading took (``model_memory_usage`` of the model runner, the number behind
  the log line "Model loading took X GiB"): weights plus whatever the loader left allocated.

Compare both with the lesson's prediction (N x 2 B in BF16; about 0.52 B per quantised weight for
AWQ). What to look for: the parameter bytes equal the prediction to well under 1 %; the loading
figure is within a few % above it.

Run (GPU, vLLM 0.26.0):

    python snippets/labs/weights.py --receipt weights.json
    python snippets/labs/weights.py --model Qwen/Qwen2.5-7B-Instruct-AWQ

``--load-format dummy`` allocates the same tensors filled with random values: the byte counts are
the same, so this lab needs no download to check the arithmetic.

The engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) so that the functions below
reach the model without being serialised to another process.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import labkit  # snippets/labs/labkit.py: failure line, machine, versions, JSON receipt

LAB = "weights"
MAX_MODEL_LEN = 4096
"""Default context length; vLLM starts only if the KV cache can hold one sequence this long."""
GIB = 2**30
GB = 10**9


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Measure the weight memory of a model loaded by vLLM.")
    p.add_argument("--model", default="Qwen/Qwen2.5-7B-Instruct", help="hub id or local folder")
    p.add_argument("--load-format", default="auto", help="'dummy' = random weights (no download)")
    p.add_argument("--max-model-len", type=int, default=MAX_MODEL_LEN, help="context length the engine reserves")
    p.add_argument("--receipt", type=Path, help="write the measurements as JSON to this file")
    args = p.parse_args(argv)
    if args.max_model_len < 16:
        labkit.fail(f"--max-model-len must be at least 16, got {args.max_model_len}")
    return args


def parameter_bytes(model) -> dict:
    """Elements and bytes of every parameter the worker holds, per dtype (shared tensors counted once)."""
    by_dtype = {}
    for p in model.parameters():  # parameters() yields a tied embedding / lm_head once
        entry = by_dtype.setdefault(str(p.dtype).removeprefix("torch."), {"elements": 0, "bytes": 0})
        entry["elements"] += p.numel()
        entry["bytes"] += p.numel() * p.element_size()
    return by_dtype


def loading_memory(worker):
    """Bytes the model runner measured while loading (None if this vLLM's runner does not keep it)."""
    value = getattr(getattr(worker, "model_runner", None), "model_memory_usage", None)
    return int(value) if value is not None else None


def main(argv=None) -> int:
    args = parse_args(argv)
    labkit.check_model_arg(args.model)
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # engine in this process
    try:
        from vllm import LLM
    except ImportError as exc:
        labkit.fail(f"vLLM is not importable ({exc}); install it: pip install vllm==0.26.0")
    try:
        llm = LLM(model=args.model, load_format=args.load_format, max_model_len=args.max_model_len,
                  enforce_eager=True)  # no CUDA graphs: they change nothing about weights and take time
    except Exception as exc:  # vLLM raises many kinds; the message says which
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        labkit.fail(f"vLLM could not start an engine for {args.model!r}: {type(exc).__name__}: {first}")

    by_dtype = llm.apply_model(parameter_bytes)[0]
    loaded = llm.collective_rpc(loading_memory)[0]
    total = sum(d["bytes"] for d in by_dtype.values())

    print(f"{args.model} ({args.load_format} weights)")
    print(f"{'dtype':>10} {'elements':>15} {'bytes':>15} {'GB':>7} {'GiB':>7}")
    for dtype, d in sorted(by_dtype.items()):
        print(f"{dtype:>10} {d['elements']:>15,} {d['bytes']:>15,} {d['bytes'] / GB:>7.2f} {d['bytes'] / GIB:>7.2f}")
    print(f"{'all':>10} {sum(d['elements'] for d in by_dtype.values()):>15,} {total:>15,} "
          f"{total / GB:>7.2f} {total / GIB:>7.2f}")
    if loaded is None:
        print("model loading memory: not exposed by this vLLM; read 'Model loading took X GiB' in the log")
    else:
        print(f"model loading memory: {loaded / GIB:.2f} GiB ({loaded / GB:.2f} GB), "
              f"{(loaded / total - 1) * 100:+.1f} % against the parameter bytes")
    if args.receipt:
        labkit.write_receipt(args.receipt, LAB, args, settings={"enforce_eager": True},
                      units={"bytes": "B", "elements": "count", "model_loading_bytes": "B"},
                      results={"parameters_by_dtype": by_dtype, "parameter_bytes": total,
                               "model_loading_bytes": loaded})
    return 0


if __name__ == "__main__":  # vLLM may start engine processes with spawn: the guard is required
    raise SystemExit(main())
