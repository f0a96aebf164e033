"""Lab 2B: predict a decode step from this machine's own bandwidth and matmul rate, then measure it.

The roofline gives a step's floor, max(bytes / bandwidth, FLOPs / peak). What a step really takes is
that floor plus a cost that does not shrink with the model: the engine's CPU side (scheduling, input
preparation, sampling) and, on a GPU, one kernel launch per operation. This lab measures both ends:

1. **Probe** (a child process of its own): this machine's memory bandwidth (a copy of
   :data:`PROBE_BYTES` bytes: read once, written once) and its matmul rate (square BF16 matrices of
   :data:`MATMUL_N`), best of :data:`PROBE_REPEATS`.
2. **Models of growing size**: the ``--model``'s architecture with its layer count and width changed
   (``LLM(hf_overrides=...)``: hidden size, heads, KV heads and MLP width times ``width``, the head size
   kept) and random weights (``load_format="dummy"``: the shapes set the time, not the values). Each
   variant runs in a fresh child process; it reads the bytes vLLM holds per parameter kind and times the
   all-decoding steps at each batch of ``--batches`` (``labkit.decode_step_sweep``).
3. **Prediction beside measurement**: per row the floor from the probe, the measured step and their
   ratio; then the line step = tau_0 + bytes / bandwidth_eff fitted over the variants at the first batch
   size, whose intercept tau_0 is the per-step cost that no byte explains.

On a GPU, unless ``--enforce-eager``, the smallest variant also runs eager (no CUDA graphs, no
torch.compile): the gap between the two rows is what graphs and compilation save per step together. The
sizes vLLM captured graphs at are kept in the receipt.

What to look for: the smallest model's step is far above its floor (ratio well over 1: overhead-bound);
the largest model's ratio is nearest 1 (bandwidth-bound); the fitted intercept is positive.

Run (GPU, vLLM 0.26.0; only the config and tokenizer are fetched, the weights are random):

    python snippets/labs/step_overhead.py --receipt receipts/rtx-4090/step_overhead.json

Imports the standard library, ``labkit`` (this folder) and, in its children, vLLM and torch.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time

from labkit.cli import check_model_arg, engine_flags, fail, lab_parser, positive, progress, whole, whole_list
from labkit.engine import child_run, prepare, start_llm
from labkit.machine import machine
from labkit.measure import decode_step_sweep, kv_bytes_per_token, param_count
from labkit.receipt import measured_rows, write_receipt

LAB = "step_overhead"
VARIANTS = ((2, 0.25), (8, 0.5), (28, 1.0))
"""(layers, width) of each model variant, smallest first: the course's 7B at 2 layers and a quarter of its
width (hidden 896, 7 heads of 128, 1 KV head), at 8 layers and half its width, and whole (28 layers)."""
BATCHES = (1, 8, 32)
"""Batch sizes of each variant's decode-step sweep; the line is fitted at the first."""
PROMPT_LEN = 16
OUTPUT_LEN = 32
"""Tokens per request: a short prompt (its prefill is not timed) and 32 decode steps, so that the
all-decoding window holds at least 31 - (steps the prefills take) steps."""
MAX_MODEL_LEN = 256
"""The context each engine reserves: prompt + output fit with room to spare, and the KV cache stays small."""
PROBE_BYTES = {"cpu": 256 * 2**20, "gpu": 2 * 2**30}
"""Bytes copied by the bandwidth probe: far larger than any cache of the device, so the copy runs at
memory speed (a CPU's last-level cache holds tens of MiB; an RTX 4090's L2 holds 72 MB)."""
MATMUL_N = {"cpu": 1024, "gpu": 8192}
"""Side of the square BF16 matrices of the matmul probe (2 n^3 FLOPs a product)."""
PROBE_REPEATS = 5
"""Timed runs of each probe after one untimed warm-up; the fastest is kept (the machine's attainable rate)."""
SEED = 0
CHILD_TIMEOUT_S = 1800
"""Seconds one child may run (engine start, compile and graph capture included)."""
ROW_TAG = "STEP_OVERHEAD_ROW "
SCALED = ("hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size")
"""The config sizes ``width`` multiplies; the head size (hidden / heads) stays the model's."""

# The receipt's rows: UNITS gives every measured key's unit, ROW every key's JSON type ("number": an int
# or a float; "| None": may be null). The lab's spec (src/infercourse/labs/) reads both.
UNITS = {
    "params": "params",
    "weight_bytes": "B",
    "step_bytes": "B",
    "step_flops": "FLOP",
    "floor_ms": "ms",
    "step_ms": "ms",
    "ratio": "1",
}
ROW = {
    "variant": "str",
    "mode": "str",
    "layers": "int",
    "width": "number",
    "params": "int",
    "weight_bytes": "int",
    "step_bytes": "int",
    "step_flops": "int",
    "batch": "int",
    "floor_ms": "number",
    "step_ms": "number",
    "ratio": "number",
}


def variant_name(layers: int, width: float) -> str:
    return f"L{layers}xW{width:g}"


def parse_variants(text: str) -> tuple[tuple[int, float], ...]:
    """``"2x0.25,8x0.5"`` -> ((2, 0.25), (8, 0.5)); one ``error:`` line on anything else."""
    try:
        pairs = tuple((int(a), float(b)) for a, b in (item.split("x") for item in text.split(",")))
    except ValueError:
        fail(f"--variants must be comma-separated LAYERSxWIDTH pairs, e.g. 2x0.25,28x1; got {text!r}")
    if not pairs or any(layers < 1 or width <= 0 for layers, width in pairs):
        fail(f"--variants needs layers >= 1 and a width > 0 in every pair, got {text!r}")
    return pairs


def parse_args(argv=None) -> argparse.Namespace:
    p = lab_parser(LAB, "Predict a decode step from a probe of this machine, then measure it.", MAX_MODEL_LEN)
    p.add_argument("--variants", default=",".join(f"{n}x{w:g}" for n, w in VARIANTS), help="LAYERSxWIDTH,...")
    p.add_argument(
        "--batches", type=whole_list, default=",".join(map(str, BATCHES)), help="comma-separated decode batch sizes"
    )
    # internal: one engine (or the probe) in this process; prints its row after ROW_TAG
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--layers", type=whole, help=argparse.SUPPRESS)
    p.add_argument("--width", type=positive, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.variants = parse_variants(args.variants)
    check_model_arg(args.model)
    return args


# --8<-- [start:probe]
def probe(device: str) -> dict:
    """This machine's memory bandwidth (GB/s: 2 x bytes copied / time) and BF16 matmul rate (TFLOP/s:
    2 n^3 / time), each the fastest of :data:`PROBE_REPEATS` timed runs after a warm-up."""
    import torch

    def best_s(work) -> float:
        times = []
        for _ in range(PROBE_REPEATS + 1):  # the first run is a warm-up (first touch of the pages)
            if device == "gpu":
                torch.cuda.synchronize()
            started = time.perf_counter()
            work()
            if device == "gpu":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - started)
        return min(times[1:])

    where = "cuda" if device == "gpu" else "cpu"
    n_bytes, n = PROBE_BYTES[device], MATMUL_N[device]
    src = torch.ones(n_bytes, dtype=torch.uint8, device=where)
    dst = torch.empty_like(src)
    copy_s = best_s(lambda: dst.copy_(src))  # reads n_bytes and writes n_bytes
    a = torch.randn(n, n, dtype=torch.bfloat16, device=where)
    b = torch.randn(n, n, dtype=torch.bfloat16, device=where)
    matmul_s = best_s(lambda: a @ b)
    return {
        "bandwidth_gb_s": 2 * n_bytes / copy_s / 1e9,
        "matmul_tflops": 2 * n**3 / matmul_s / 1e12,
        "copy_bytes": n_bytes,
        "matmul_n": n,
    }


# --8<-- [end:probe]


def resize(hf_config, layers: int, width: float):
    """vLLM's ``hf_overrides`` callable: ``hf_config`` with ``layers`` layers and the :data:`SCALED` sizes
    times ``width`` (the head size kept: vLLM's Qwen2 derives it as hidden / heads). A config without those
    sizes is returned as it is (vLLM first calls this on an empty one to read its ``model_type``). Exits
    (code 2) when a size would not be a whole number."""
    cfg = getattr(hf_config, "text_config", hf_config)
    if not all(hasattr(cfg, key) for key in SCALED):
        return hf_config
    for key in SCALED:
        scaled = getattr(cfg, key) * width
        if scaled != int(scaled) or scaled < 1:
            fail(f"width {width:g} makes {key} {getattr(cfg, key)} x {width:g} = {scaled:g}, not a whole number")
        setattr(cfg, key, int(scaled))
    cfg.num_hidden_layers = layers
    if getattr(cfg, "layer_types", None):  # transformers' per-layer attention kinds: one per layer
        cfg.layer_types = [cfg.layer_types[0]] * layers
    return hf_config


# --8<-- [start:variant]
def variant(args) -> dict:
    """One engine of ``args.layers`` layers at ``args.width``: its parameters and bytes (from the config vLLM
    built the model from: vLLM's CPU build repacks linear weights into buffers, so counting the loaded
    parameters would miss them) and the measured decode step at each batch."""
    llm, engine_start_s = start_llm(
        args,
        load_format="dummy",  # random weights: the checkpoint's tensors have another shape
        hf_overrides=functools.partial(resize, layers=args.layers, width=args.width),
        seed=SEED,
        max_num_seqs=max(args.batches),
        enable_prefix_caching=False,
        disable_log_stats=False,  # decode_step_s reads the per-request metrics
    )
    from vllm import SamplingParams

    model_config = llm.llm_engine.vllm_config.model_config  # the resized config, as vLLM built the model
    import torch

    hf = model_config.hf_config
    dtype_bytes = torch.empty((), dtype=model_config.dtype).element_size()
    params = param_count(hf)  # every parameter of the model this config describes (tied ones once)
    # the input embedding: a decode step reads B rows of it; tied to the output head, it is read whole
    embed_params = 0 if getattr(hf, "tie_word_embeddings", False) else hf.vocab_size * hf.hidden_size
    sampling = SamplingParams(max_tokens=OUTPUT_LEN, ignore_eos=True, temperature=0, detokenize=False)
    step_ms = decode_step_sweep(llm, sampling, args.batches, PROMPT_LEN, OUTPUT_LEN, SEED)
    capture = llm.llm_engine.vllm_config.compilation_config.cudagraph_capture_sizes
    return {
        "params": params,
        "weight_bytes": params * dtype_bytes,
        "embed_bytes": embed_params * dtype_bytes,
        "dtype_bytes": dtype_bytes,
        "kv_bytes_per_token": kv_bytes_per_token(hf, dtype_bytes),
        "step_ms": step_ms,
        "engine_start_s": engine_start_s,
        "capture_sizes": list(capture) if capture else None,
    }


# --8<-- [end:variant]


# --8<-- [start:predict]
def rows_of(args, got: dict, layers: int, width: float, mode: str, rates: dict) -> list[dict]:
    """The receipt rows of one variant: per batch B the bytes a step reads (every weight but an untied
    input embedding, whose B rows are negligible, plus B caches at the mean context prompt + output / 2),
    its FLOPs (2 per matmul weight and token), the floor from the probe, the measured step and their ratio."""
    matmul_bytes = got["weight_bytes"] - got["embed_bytes"]
    rows = []
    for batch, step_ms in zip(args.batches, got["step_ms"], strict=True):
        step_bytes = matmul_bytes + batch * got["kv_bytes_per_token"] * (PROMPT_LEN + OUTPUT_LEN // 2)
        step_flops = 2 * (matmul_bytes // got["dtype_bytes"]) * batch
        floor_ms = 1e3 * max(step_bytes / (rates["bandwidth_gb_s"] * 1e9), step_flops / (rates["matmul_tflops"] * 1e12))
        rows.append(
            {
                "variant": variant_name(layers, width),
                "mode": mode,
                "layers": layers,
                "width": width,
                "params": got["params"],
                "weight_bytes": got["weight_bytes"],
                "step_bytes": step_bytes,
                "step_flops": step_flops,
                "batch": batch,
                "floor_ms": round(floor_ms, 6),
                "step_ms": round(step_ms, 6),
                "ratio": round(step_ms / floor_ms, 4),
            }
        )
    return rows


def fit_line(rows: list[dict]) -> dict | None:
    """step_ms = tau0_ms + step_bytes / bandwidth_eff over the given rows (least squares), with R^2;
    None for fewer than three rows."""
    if len(rows) < 3:
        return None
    x = [r["step_bytes"] for r in rows]
    y = [r["step_ms"] for r in rows]
    slope, intercept = statistics.linear_regression(x, y)
    return {
        "tau0_ms": intercept,
        "bandwidth_eff_gb_s": 1 / (slope * 1e6) if slope > 0 else None,
        "r2": statistics.correlation(x, y) ** 2,
    }


# --8<-- [end:predict]


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child:  # one probe or one engine in this process; its row after ROW_TAG
        print(ROW_TAG + json.dumps(probe(machine()["kind"]) if args.probe else variant(args)), flush=True)
        return 0
    log_dir = prepare(args, logs="<name>.log (the probe's too)")
    on_gpu = machine()["kind"] == "gpu"

    def child(name: str, arguments: list[str]) -> dict:
        got = child_run(__file__, arguments, log_dir / f"{name}.log", ROW_TAG, CHILD_TIMEOUT_S)
        if got["row"] is None:
            fail(f"{name} failed: {got['cause'][:400]} (log: {log_dir / name}.log)", 3)
        return got["row"]

    progress("probe: memory bandwidth and matmul rate")
    rates = child("probe", ["--model", args.model, "--probe"])
    progress(f"probe: {rates['bandwidth_gb_s']:.1f} GB/s, {rates['matmul_tflops']:.3f} TFLOP/s")
    runs = [(layers, width, "eager" if args.enforce_eager else "graphs") for layers, width in args.variants]
    if on_gpu and not args.enforce_eager:
        runs.append((*args.variants[0], "eager"))  # the smallest model without graphs: what they save
    rows, starts, capture = measured_rows(args, UNITS), [], None
    for i, (layers, width, mode) in enumerate(runs, 1):
        name = f"{variant_name(layers, width)}-{mode}"
        progress(f"engine {i}/{len(runs)}: {name}")
        flags = [f for f in engine_flags(args) if f != "--enforce-eager"] + (
            ["--enforce-eager"] if mode == "eager" else []
        )
        batches = ",".join(map(str, args.batches))
        arguments = ["--model", args.model, *flags, "--layers", str(layers), "--width", f"{width:g}"]
        got = child(name, [*arguments, "--batches", batches])
        starts.append(got["engine_start_s"])
        capture = capture or got["capture_sizes"]
        rows += rows_of(args, got, layers, width, mode, rates)

    print(
        f"{args.model} as {', '.join(variant_name(*v) for v in args.variants)} (random weights); probe "
        f"{rates['bandwidth_gb_s']:.1f} GB/s, "
        f"{rates['matmul_tflops']:.3f} TFLOP/s; prompt {PROMPT_LEN} + output {OUTPUT_LEN}"
    )
    print(f"{'variant':<12} {'mode':<7} {'batch':>5} {'step MB':>9} {'floor (ms)':>10} {'step (ms)':>10} {'ratio':>7}")
    for r in rows:
        print(
            f"{r['variant']:<12} {r['mode']:<7} {r['batch']:>5} {r['step_bytes'] / 1e6:>9.2f} {r['floor_ms']:>10.3f} "
            f"{r['step_ms']:>10.3f} {r['ratio']:>7.2f}"
        )
    first = [r for r in rows if r["batch"] == args.batches[0] and r["mode"] == runs[0][2]]
    fit = fit_line(first)
    if fit:
        print(
            f"fit at batch {args.batches[0]}: step = {fit['tau0_ms']:.3f} ms + bytes / "
            f"{fit['bandwidth_eff_gb_s'] or float('nan'):.1f} GB/s (R^2 {fit['r2']:.3f})"
        )
    settings = {
        "variants": [list(v) for v in args.variants],
        "batches": list(args.batches),
        "prompt_len": PROMPT_LEN,
        "output_len": OUTPUT_LEN,
        "seed": SEED,
        "load_format_run": "dummy",
        "probe": rates,
        "probe_repeats": PROBE_REPEATS,
        "fit": fit,
        "cudagraph_capture_sizes": capture,
        "statistic": "step: all-decoding window / (n - 1 - d), labkit.decode_step_s; probe: fastest run",
    }
    write_receipt(args, UNITS, rows, starts[0], settings)
    return 0


if __name__ == "__main__":  # vLLM may spawn processes; a spawned child re-imports this file
    sys.exit(main())
