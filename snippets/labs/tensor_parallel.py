"""Lab 7A: tensor parallelism, what each rank holds and what the split costs per decode step.

One engine per run, each in a fresh Python process (this script with ``--child``):

1. ``tp1``: the model on one device (``tensor_parallel_size=1``).
2. ``shard``: one device holding the per-rank shape of T = 2 (the "shard-shape emulation"): the same
   model with ``hf_overrides`` halving ``num_attention_heads``, ``num_key_value_heads`` and
   ``intermediate_size``, with random weights (``load_format="dummy"``). Its linear layers are exactly a
   TP = 2 rank's; its embedding and lm_head are *not* split (the lesson adds that analytically), and
   it runs no all-reduce: its step time is the T = 2 step without the communication.
3. ``tp2``: ``tensor_parallel_size=2`` (two GPUs, or vLLM's CPU build with two worker processes).
4. ``tp2_nccl``: the same with ``disable_custom_all_reduce=True``: every all-reduce through NCCL
   (on a GPU pair vLLM would otherwise use its own all-reduce kernel where peer-to-peer access works).
5. ``allreduce``: no engine: ``torch.distributed.all_reduce`` timed over :data:`ALLREDUCE_BYTES` on every
   visible GPU (NCCL; one GPU: ``n/a``), or on two CPU processes (gloo), then the least-squares fit
   t = a + n b in relative error (``torch.linalg.lstsq``) that gives the lesson's ring model its alpha
   (a / (2 (T - 1)), per ring step) and link bandwidth (2 (T - 1) / (T b)). Each rank's first result is
   checked against the element-wise sum of the ranks' inputs (small whole numbers: exact in float32).

Each child reads, on every rank (``LLM.apply_model`` returns one result per worker), the elements of the
sharded linear layers from vLLM's own shard sizes (``input_size_per_partition`` x
``output_size_per_partition`` of every ``LinearBase``: on vLLM's CPU build the weights are repacked
into its GEMM kernels' buffers, so ``parameters()`` no longer shows them), the embedding and lm_head
rows each rank holds and its KV heads. Then the greedy tokens of :data:`PROMPTS` (exactly equal
between T = 1 and T = 2 in float32, where only the order of a sum changes; not with ``--load-format
dummy``, whose random weights each rank draws for its own shard) and the decode step time at
each batch of ``--step-batches`` (``labkit.decode_step_s``, the method of lab 2A).

A run this machine cannot do gets an ``n/a`` row with the reason, and the lab goes on: its child finds,
before any engine or rank starts (:func:`cannot_run`), more ranks than visible GPUs (``tp2``,
``tp2_nccl`` or ``allreduce`` on one GPU) or, on vLLM's CPU build, fewer CPU cores than ranks. Any other
failure (a model that cannot be downloaded or loaded, vLLM refusing to start, a crash) ends the lab with
one line naming vLLM's root cause (exit 3), as does a ``shard`` run on a model whose sizes T = 2 does not
divide (a local folder's ``config.json`` is checked for that before the first engine, exit 2).

Run (GPU, vLLM 0.26.0):

    python snippets/labs/tensor_parallel.py --receipt receipts/rtx-4090/tensor_parallel.json

GeForce cards have no peer-to-peer access; the receipt records NCCL_P2P_DISABLE if it is set.
No hub access (random weights):

    python snippets/labs/tensor_parallel.py --model PATH --load-format dummy

Imports the standard library and labkit (vLLM and torch only in the child).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import time
from pathlib import Path

from labkit.cli import DTYPES, check_model_arg, engine_flags, fail, lab_parser, progress
from labkit.engine import child_run, engine_core_in_process, run_lab, start_llm
from labkit.measure import decode_step_sweep
from labkit.receipt import measured_rows, write_receipt

LAB = "tensor_parallel"
SEED = 0
MAX_MODEL_LEN = 1024
RUNS = ("tp1", "shard", "tp2", "tp2_nccl", "allreduce")
"""The runs, in order (``--runs`` picks a subset); all but ``allreduce`` start an engine."""
TENSOR_PARALLEL = {"tp1": 1, "shard": 1, "tp2": 2, "tp2_nccl": 2, "allreduce": 2}
"""``LLM(tensor_parallel_size=...)`` per run (``allreduce``: its ranks on a CPU; on a GPU box, every visible GPU)."""
ALLREDUCE_BYTES = (4_096, 16_384, 65_536, 262_144, 1_048_576, 4_194_304)
"""Message sizes (bytes) of the all-reduce sweep: 4 KiB to 4 MiB by factors of 4 (4^6 = 4,096 .. 4^11 =
4,194,304); a decode step's all-reduce is B d 2 bytes (14 KiB at B = 1 for Qwen2.5-7B)."""
ALLREDUCE_REPEATS = 10
"""Timed all-reduces per message size (after :data:`ALLREDUCE_WARMUP` untimed ones); the receipt keeps the median."""
ALLREDUCE_WARMUP = 3
EMULATED_T = 2
"""The T whose per-rank shape the ``shard`` run loads: heads, KV heads and intermediate size divided by it."""
SHARD_KEYS = ("num_attention_heads", "num_key_value_heads", "intermediate_size")
"""The config sizes the ``shard`` run divides by :data:`EMULATED_T`."""
KINDS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
"""The sharded linear layers of a Qwen2/Llama block, by vLLM module name: column-parallel QKV and
gate/up, row-parallel o_proj and down_proj."""
PROMPTS = ([5, 6, 7, 8], [40, 41, 42, 43, 44, 45, 46, 47])
"""Token-id prompts of the greedy check (ids below every vocabulary's size)."""
GREEDY_TOKENS = 16
"""Greedy tokens generated per prompt for the T = 1 against T = 2 comparison."""
STEP_BATCHES = (1, 8, 64)
"""Batch sizes of the step-time sweep (``--step-batches``; ``none`` skips it)."""
STEP_PROMPT_LEN = 128
STEP_OUTPUT_LEN = 64
"""Prompt and exact output tokens per request of the sweep."""
CUSTOM_ALL_REDUCE_OFF = r"Custom allreduce is disabled because ([^.]+)"
"""vLLM 0.26.0's warning when it turns its custom all-reduce off (``vllm/distributed/device_communicators/
custom_all_reduce.py``:161-166): without GPU P2P (two RTX 4090s) ``tp2`` then runs on NCCL, the same path as
``tp2_nccl``."""
ROW_TAG = "TENSOR_PARALLEL_ROW "  # the child's one line of results on stdout, JSON after the tag
CHILD_TIMEOUT_S = 1800


# The receipt's rows: UNITS gives every measured key's unit, ROW every key's JSON type ("number": an int
# or a float; "| None": may be null). The lab's spec (src/infercourse/labs/) reads both.
UNITS = {
    "qkv_proj_elements": "elements",
    "o_proj_elements": "elements",
    "gate_up_proj_elements": "elements",
    "down_proj_elements": "elements",
    "embed_rows": "rows",
    "lm_head_rows": "rows",
    "kv_heads": "heads",
    "greedy_tokens": "token ids",
    "step_ms": "ms",
    "allreduce_s": "s",
    "fit_latency_s": "s",
    "fit_s_per_byte": "s/B",
    "fit_alpha_s": "s",
    "fit_link_gb_s": "GB/s",
}
ROW = {
    "run": "str",
    "tensor_parallel_size": "int",
    "outcome": "str",
    "reason": "str | None",
    "ranks": "int | None",
    "qkv_proj_elements": "list | None",
    "o_proj_elements": "list | None",
    "gate_up_proj_elements": "list | None",
    "down_proj_elements": "list | None",
    "embed_rows": "list | None",
    "lm_head_rows": "list | None",
    "kv_heads": "list | None",
    "sizes": "dict | None",
    "greedy_tokens": "list | None",
    "step_batches": "list | None",
    "step_ms": "list | None",
    "backend": "str | None",
    "message_bytes": "list | None",
    "allreduce_s": "list | None",
    "sum_exact": "bool | None",
    "fit_latency_s": "number | None",
    "fit_s_per_byte": "number | None",
    "fit_alpha_s": "number | None",
    "fit_link_gb_s": "number | None",
}


def parse_args(argv=None) -> argparse.Namespace:
    p = lab_parser(
        LAB, "What each tensor-parallel rank holds, greedy tokens at T = 1 and 2, step times.", MAX_MODEL_LEN
    )
    p.add_argument("--runs", default=",".join(RUNS), help=f"comma-separated subset of {','.join(RUNS)}")
    p.add_argument(
        "--dtype",
        default="auto",
        choices=DTYPES,
        help="the engines' dtype ('float32' makes the greedy check exact)",
    )
    p.add_argument(
        "--step-batches",
        default=",".join(map(str, STEP_BATCHES)),
        help="comma-separated batch sizes of the step-time sweep, or 'none' (CI on a CPU)",
    )
    # internal: one engine in this process; prints its row after ROW_TAG
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--run", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.runs = tuple(r.strip() for r in args.runs.split(",") if r.strip())
    try:
        text = args.step_batches.strip()
        args.step_batches = () if text == "none" else tuple(int(b) for b in text.split(","))
    except ValueError:
        fail(f"--step-batches must be comma-separated whole numbers or 'none', got {args.step_batches!r}")
    return args


def check_input(args) -> None:
    """Refuse (exit 2, one line) what cannot work before the first engine starts: the model folder,
    ``--runs``, ``--max-model-len``, ``--step-batches``, and a local model whose sizes the ``shard``
    run cannot divide (its ``config.json``; a hub id's config is read by the shard run itself)."""
    check_model_arg(args.model)
    unknown = [r for r in args.runs if r not in RUNS]
    if unknown or not args.runs:
        fail(f"--runs {','.join(args.runs) or '(empty)'}: use a comma-separated subset of {','.join(RUNS)}")
    need = max(STEP_PROMPT_LEN + STEP_OUTPUT_LEN, max(map(len, PROMPTS)) + GREEDY_TOKENS)
    if args.max_model_len < need:
        fail(f"--max-model-len must be at least {need}, got {args.max_model_len}")
    if args.step_batches and (min(args.step_batches) < 1 or list(args.step_batches) != sorted(set(args.step_batches))):
        fail(f"--step-batches must be increasing positive whole numbers, got {args.step_batches}")
    config = Path(args.model).expanduser() / "config.json"
    if "shard" in args.runs and config.is_file():
        try:
            cfg = json.loads(config.read_text())
        except (OSError, ValueError):
            return  # vLLM says what is wrong with it, at the first engine
        cfg = cfg.get("text_config", cfg)
        if isinstance(cfg, dict) and all(k in cfg for k in (*SHARD_KEYS, "hidden_size")):
            check_shard_divides({k: cfg[k] for k in SHARD_KEYS})


def check_shard_divides(sizes: dict) -> None:
    """Exit 2 with one line if T = :data:`EMULATED_T` does not divide every size of ``sizes``."""
    if any(v % EMULATED_T for v in sizes.values()):
        fail(f"T = {EMULATED_T} does not divide {sizes}; the shard run needs a model whose sizes it divides")


# --8<-- [start:shards]
def rank_shapes(model) -> dict:
    """What one rank holds: elements of its sharded linear layers per kind (summed over layers; from
    vLLM's shard sizes, which stay set when the CPU build repacks the weights), embedding and lm_head
    rows (vocabulary padded to vLLM's multiple of 64), and the KV heads of its attention layers."""
    linear = dict.fromkeys(KINDS, 0)
    rows, kv_heads = {}, set()
    for name, module in model.named_modules():
        kind = name.rsplit(".", 1)[-1]
        if kind in linear and hasattr(module, "input_size_per_partition"):
            linear[kind] += module.input_size_per_partition * module.output_size_per_partition
        elif kind in ("embed_tokens", "lm_head"):
            rows[kind] = module.num_embeddings_per_partition
        elif kind == "self_attn" and hasattr(module, "num_kv_heads"):
            kv_heads.add(module.num_kv_heads)
    return {
        "linear": linear,
        "embed_rows": rows.get("embed_tokens"),
        "lm_head_rows": rows.get("lm_head"),
        "kv_heads": sorted(kv_heads),
    }


# --8<-- [end:shards]


def shard_shape(hf_config):
    """vLLM's ``hf_overrides`` callable: ``hf_config`` changed in place to one rank of T = :data:`EMULATED_T`
    (heads, KV heads and intermediate size divided by T, ``head_dim`` kept); a config without those
    sizes is returned as it is. Fails (exit 2) if T does not divide them.

    vLLM's Qwen2 class derives the head size as hidden_size / heads (vllm/model_executor/models/qwen2.py:149
    at v0.26.0), so halving the heads there would double the head size and leave QKV and o_proj whole.
    The same layers are therefore loaded through vLLM's Llama class, which reads ``head_dim`` from the
    config (llama.py:155-156) and, with ``qkv_bias``, gives QKV a bias and o_proj none (llama.py:264-271),
    as Qwen2 has."""
    cfg = getattr(hf_config, "text_config", hf_config)
    if not all(hasattr(cfg, k) for k in (*SHARD_KEYS, "hidden_size")):
        return hf_config
    d_h = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    sizes = {k: getattr(cfg, k) for k in SHARD_KEYS}
    check_shard_divides(sizes)
    for k, v in sizes.items():
        setattr(cfg, k, v // EMULATED_T)
    cfg.head_dim, cfg.qkv_bias = d_h, True
    hf_config.architectures = ["LlamaForCausalLM"]
    return hf_config


def model_sizes(hf_config) -> dict:
    """The sizes the lesson's per-rank formulas take, read from a loaded model's config."""
    cfg = getattr(hf_config, "text_config", hf_config)
    return {
        "layers": cfg.num_hidden_layers,
        "hidden_size": cfg.hidden_size,
        "heads": cfg.num_attention_heads,
        "kv_heads": cfg.num_key_value_heads,
        "head_dim": getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads,
        "intermediate_size": cfg.intermediate_size,
        "vocab_size": cfg.vocab_size,
    }


def allreduce_rank(rank: int, world: int, backend: str, init_method: str, out: str) -> None:
    """One rank of the all-reduce sweep (``torch.multiprocessing.spawn`` target): per message size, the
    median time (s) of :data:`ALLREDUCE_REPEATS` float32 all-reduces, each after a barrier; the first result
    compared with the element-wise sum of every rank's input. Rank 0 writes ``{"seconds", "sum_exact"}``
    as JSON to ``out``."""
    import statistics

    import torch
    import torch.distributed as dist

    cuda = backend == "nccl"
    if cuda:
        torch.cuda.set_device(rank)
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world)
    seconds, exact = [], True
    for nbytes in ALLREDUCE_BYTES:
        base = torch.arange(nbytes // 4, device=device, dtype=torch.float32) % 7  # whole numbers: exact sums
        buffer = base + rank
        dist.all_reduce(buffer)
        exact &= bool(torch.equal(buffer, world * base + world * (world - 1) // 2))  # sum of base + r, r < world
        times = []
        for i in range(ALLREDUCE_WARMUP + ALLREDUCE_REPEATS):
            buffer.copy_(base)
            dist.barrier()
            if cuda:
                torch.cuda.synchronize()
            started = time.perf_counter()
            dist.all_reduce(buffer)
            if cuda:
                torch.cuda.synchronize()
            if i >= ALLREDUCE_WARMUP:
                times.append(time.perf_counter() - started)
        seconds.append(statistics.median(times))
    flags = torch.tensor([int(exact)], dtype=torch.int32, device=device)
    dist.all_reduce(flags, op=dist.ReduceOp.MIN)  # exact on every rank
    if rank == 0:
        Path(out).write_text(json.dumps({"seconds": seconds, "sum_exact": bool(flags.item())}))
    dist.destroy_process_group()


def fit_latency_bandwidth(message_bytes, seconds) -> tuple[float, float]:
    """Least-squares fit of t = a + n b in relative error (``torch.linalg.lstsq``, float64, each row divided by
    its time, so the 4 MiB message does not outweigh the 4 KiB one): ``(a, b)``, a in s, b in s per byte.

    Raises:
        ValueError: fewer than two sizes, sizes and times of different lengths, or a time not positive.
    """
    import torch

    if len(message_bytes) < 2 or len(message_bytes) != len(seconds):
        raise ValueError(f"need two or more sizes with one time each, got {len(message_bytes)} and {len(seconds)}")
    if not all(t > 0 for t in seconds):
        raise ValueError(f"every time must be positive to fit in relative error, got {seconds}")
    n = torch.tensor(message_bytes, dtype=torch.float64)
    t = torch.tensor(seconds, dtype=torch.float64)
    design = torch.stack([torch.ones_like(n), n], dim=1) / t.unsqueeze(1)
    solution = torch.linalg.lstsq(design, torch.ones_like(t).unsqueeze(1)).solution
    return float(solution[0, 0]), float(solution[1, 0])


def cannot_run(run: str) -> str | None:
    """Why this machine cannot do ``run``, found before any engine or rank starts, or None if it can.

    A GPU box (``torch.cuda.device_count()``, which honours ``CUDA_VISIBLE_DEVICES`` as vLLM's count
    does): fewer GPUs than the run's ``tensor_parallel_size`` (:data:`TENSOR_PARALLEL`; the ``allreduce``
    run needs two or more). vLLM's CPU build (no GPU counted): fewer CPU cores than ranks, where the lab
    binds each rank's threads to a core of its own (``VLLM_CPU_OMP_THREADS_BIND`` unset or ``auto``, see
    :func:`child`). ``tp1`` and ``shard`` need one device: always None (torch is not imported for them)."""
    tp = TENSOR_PARALLEL[run]
    if tp == 1:
        return None
    import torch

    gpus = torch.cuda.device_count()  # counted through NVML: CUDA stays uninitialised for vLLM's forked workers
    if gpus >= tp:
        return None
    if gpus:
        name = torch.cuda.get_device_name(0)  # initialises CUDA: only in a child that starts nothing
        if run == "allreduce":
            return f"one GPU visible ({name}): an all-reduce needs two or more ranks"
        return f"{gpus} GPU visible ({name}): tensor_parallel_size={tp} needs {tp} GPUs"
    cores = len(os.sched_getaffinity(0))
    if run != "allreduce" and os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "auto") == "auto" and cores < tp:
        return f"{cores} CPU core available: vLLM's CPU build runs each of the {tp} ranks on a core of its own"
    return None


def allreduce_child() -> int:
    """The ``allreduce`` run (the machine can do it: :func:`cannot_run`): spawn the ranks, fit, print the
    row (``ROW_TAG`` + JSON). A failing rank ends the process with its traceback."""
    import socket

    import torch
    import torch.multiprocessing as mp

    if torch.cuda.is_available():
        backend, world = "nccl", torch.cuda.device_count()
    else:
        backend, world = "gloo", TENSOR_PARALLEL["allreduce"]
    with socket.socket() as sock:  # a free local port for the ranks' rendezvous
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out = Path(tempfile.mkdtemp(prefix="allreduce_")) / "rank0.json"
    mp.spawn(allreduce_rank, args=(world, backend, f"tcp://127.0.0.1:{port}", str(out)), nprocs=world, join=True)
    got = json.loads(out.read_text())
    a, b = fit_latency_bandwidth(ALLREDUCE_BYTES, got["seconds"])
    steps = 2 * (world - 1)  # the ring: reduce-scatter then all-gather (roofline.ring_allreduce_time)
    row = {
        "backend": backend,
        "world_size": world,
        "seconds": got["seconds"],
        "sum_exact": got["sum_exact"],
        "fit": [a, b],
        "alpha_s": a / steps,
        "link_gb_s": steps / world / b / 1e9 if b > 0 else None,
    }
    print(ROW_TAG + json.dumps({"engine_start_s": 0.0, "allreduce": row}), flush=True)
    return 0


# --8<-- [start:engine]
def child(args) -> int:
    """Do one run and print its row (``ROW_TAG`` + JSON): ``{"cannot": reason}`` when this machine cannot do
    it (:func:`cannot_run`; exit 0, no engine started), else the engine's (or the all-reduce sweep's)
    figures. vLLM's errors end the process with one ``error:`` line: the root cause of an engine that would
    not start (exit 2, :func:`labkit.engine_failure`), or what the step-time sweep could not measure (exit 3)."""
    reason = cannot_run(args.run)
    if reason is not None:
        print(ROW_TAG + json.dumps({"cannot": reason}), flush=True)
        return 0
    if args.run == "allreduce":
        return allreduce_child()
    engine_core_in_process()  # apply_model needs the engine in this process
    tp = TENSOR_PARALLEL[args.run]
    if tp > 1 and os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "auto") == "auto":
        # vLLM's CPU build binds each rank's threads to its own NUMA node and refuses with fewer nodes
        # than ranks (vllm/utils/ompmultiprocessing.py); one core per rank instead (ignored on a GPU)
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = "|".join(str(c) for c in sorted(os.sched_getaffinity(0))[:tp])
    shard = args.run == "shard"  # random weights: the checkpoint's tensors have the full shapes
    llm, engine_start_s = start_llm(
        args,
        load_format="dummy" if shard else args.load_format,
        dtype=args.dtype,
        seed=SEED,
        tensor_parallel_size=tp,
        distributed_executor_backend="mp" if tp > 1 else None,
        max_num_seqs=max(args.step_batches, default=len(PROMPTS)),
        enable_prefix_caching=False,
        disable_log_stats=False,  # decode_step_s reads the per-request metrics
        hf_overrides=shard_shape if shard else None,
        disable_custom_all_reduce=args.run == "tp2_nccl",
    )
    from vllm import SamplingParams

    ranks = llm.apply_model(rank_shapes)
    greedy = SamplingParams(max_tokens=GREEDY_TOKENS, ignore_eos=True, temperature=0.0, detokenize=False)
    outs = llm.generate([{"prompt_token_ids": list(p)} for p in PROMPTS], greedy, use_tqdm=False)
    step_params = SamplingParams(max_tokens=STEP_OUTPUT_LEN, ignore_eos=True, temperature=0, detokenize=False)
    step_ms = decode_step_sweep(llm, step_params, args.step_batches, STEP_PROMPT_LEN, STEP_OUTPUT_LEN, SEED)
    print(
        ROW_TAG
        + json.dumps(
            {
                "engine_start_s": engine_start_s,
                "sizes": model_sizes(llm.llm_engine.vllm_config.model_config.hf_config),
                "ranks": ranks,
                "tokens": [list(o.outputs[0].token_ids) for o in outs],
                "step_ms": step_ms,
            }
        ),
        flush=True,
    )
    return 0


# --8<-- [end:engine]


def result_row(args, run: str, row: dict) -> dict:
    """One receipt row from the child's ``row``: what a started engine's ranks hold (or the all-reduce
    sweep's fit), or ``n/a`` with the reason the machine cannot do the run (``{"cannot": reason}``)."""
    tp = TENSOR_PARALLEL[run]
    na = {**dict.fromkeys(ROW), "run": run, "tensor_parallel_size": tp, "outcome": "n/a", "reason": row.get("cannot")}
    if "cannot" in row:
        return na
    if run == "allreduce":
        ar = row["allreduce"]
        return {
            **na,
            "tensor_parallel_size": ar["world_size"],
            "outcome": "started",
            "ranks": ar["world_size"],
            "backend": ar["backend"],
            "message_bytes": list(ALLREDUCE_BYTES),
            "allreduce_s": ar["seconds"],
            "sum_exact": ar["sum_exact"],
            "fit_latency_s": ar["fit"][0],
            "fit_s_per_byte": ar["fit"][1],
            "fit_alpha_s": ar["alpha_s"],
            "fit_link_gb_s": ar["link_gb_s"],
        }
    ranks = row["ranks"]
    return {
        **na,
        "run": run,
        "tensor_parallel_size": tp,
        "outcome": "started",
        "reason": None,
        "ranks": len(ranks),
        **{f"{k}_elements": [r["linear"][k] for r in ranks] for k in KINDS},
        "embed_rows": [r["embed_rows"] for r in ranks],
        "lm_head_rows": [r["lm_head_rows"] for r in ranks],
        "kv_heads": [min(r["kv_heads"]) for r in ranks],
        "sizes": row["sizes"],
        "greedy_tokens": row["tokens"],
        "step_batches": list(args.step_batches),
        "step_ms": [round(ms, 4) for ms in row["step_ms"]],
    }


def parent(args, log_dir: Path) -> int:
    """Start each engine in a child process of this script, one by one, collect their rows and write the
    receipt."""
    rows, starts, custom_off = measured_rows(args, UNITS), [], None
    for i, run in enumerate(args.runs, 1):
        progress(f"engine {i}/{len(args.runs)}: {run} (tensor_parallel_size={TENSOR_PARALLEL[run]})")
        arguments = ["--model", args.model, *engine_flags(args), "--run", run, "--dtype", args.dtype]
        arguments += ["--step-batches", ",".join(map(str, args.step_batches)) or "none"]
        log = log_dir / f"{run}.log"
        got = child_run(__file__, arguments, log, ROW_TAG, CHILD_TIMEOUT_S)
        if got["row"] is None:  # not a run this machine cannot do (that child says so and exits 0)
            fail(f"{run} (tensor_parallel_size={TENSOR_PARALLEL[run]}) failed: {got['cause'][:400]} (log: {log})", 3)
        if "cannot" in got["row"]:
            progress(f"{run}: n/a on this machine ({got['row']['cannot']})")
        else:
            starts.append(got["row"]["engine_start_s"])
        if run == "tp2" and (off := re.search(CUSTOM_ALL_REDUCE_OFF, got["text"])):
            custom_off = off.group(1)
            progress(f"tp2: vLLM turned its custom all-reduce off ({off.group(1)}): tp2 and tp2_nccl both use NCCL")
        rows.append(result_row(args, run, got["row"]))
    if not starts:
        fail(f"this machine can do none of --runs {','.join(args.runs)}: {rows[0]['reason']}")

    print(f"{args.model} ({args.load_format} weights, dtype {args.dtype}); linear elements per rank")
    print(f"{'run':<9} {'T':>2} {'qkv_proj':>14} {'o_proj':>14} {'gate_up_proj':>14} {'down_proj':>14} {'KV heads':>9}")
    for r in rows:
        if r["outcome"] != "started":
            print(f"{r['run']:<9} {r['tensor_parallel_size']:>2} n/a: {r['reason'][:200]}")
            continue
        if r["run"] == "allreduce":
            print(
                f"{r['run']:<9} {r['tensor_parallel_size']:>2} ({r['backend']}) t = a + n b: a = "
                f"{r['fit_latency_s'] * 1e6:.1f} us, b = {r['fit_s_per_byte'] * 1e9:.4f} ns/B; alpha per ring step "
                f"{r['fit_alpha_s'] * 1e6:.1f} us; sums exact: {r['sum_exact']}"
            )
            continue
        cells = [" + ".join(f"{n:,}" for n in r[f"{k}_elements"]) for k in KINDS]
        print(
            f"{r['run']:<9} {r['tensor_parallel_size']:>2} "
            + " ".join(f"{c:>14}" for c in cells)
            + f" {'/'.join(map(str, r['kv_heads'])):>9}"
        )
    started = [r for r in rows if r["outcome"] == "started" and r["run"] != "allreduce"]
    for r in started:
        print(f"{r['run']:<9} greedy tokens of prompt 1: {r['greedy_tokens'][0]}")
    for r in rows:
        if r["run"] == "allreduce" and r["outcome"] == "started":
            print(f"all-reduce ({r['backend']}, {r['ranks']} ranks), median of {ALLREDUCE_REPEATS}, us per size:")
            print(
                "  "
                + ", ".join(f"{n:,} B {s * 1e6:.1f}" for n, s in zip(r["message_bytes"], r["allreduce_s"], strict=True))
            )
    if args.step_batches and started:
        print(f"decode step (ms) at batch {', '.join(map(str, args.step_batches))}:")
        for r in started:
            print(f"{r['run']:<9} " + " ".join(f"{ms:>9.3f}" for ms in r["step_ms"]))
    settings = {
        "runs": list(args.runs),
        "seed": SEED,
        "emulated_t": EMULATED_T,
        "prompts": [list(p) for p in PROMPTS],
        "greedy_tokens": GREEDY_TOKENS,
        "step_prompt_len": STEP_PROMPT_LEN,
        "step_output_len": STEP_OUTPUT_LEN,
        "statistic": "step: all-decoding window / (n - 1 - d), labkit.decode_step_s",
        "nccl_p2p_disable": os.environ.get("NCCL_P2P_DISABLE") or None,
        "allreduce_bytes": list(ALLREDUCE_BYTES),
        "allreduce_repeats": ALLREDUCE_REPEATS,
        "allreduce_dtype": "float32",
        "custom_all_reduce_off": custom_off,  # vLLM's reason, where it turned tp2's custom all-reduce off
    }
    write_receipt(args, UNITS, rows, starts[0], settings)
    return 0


def main(argv=None) -> int:
    return run_lab(argv, parse_args, check_input, child, parent, logs="<run>.log")


if __name__ == "__main__":  # the TP = 2 engine spawns its workers, which re-import this file: the guard is required
    raise SystemExit(main())
