"""Lab 4B: chunked prefill, step by step: how many engine steps a long prompt's prefill takes, and
what it does to the decoders running beside it.

One engine per chunk setting, each in a fresh Python process (this script with ``--child``): chunk
C is ``max_num_batched_tokens`` with ``enable_chunked_prefill=True`` (vLLM's default), and ``off`` is
the baseline with chunking disabled and a budget of ``max_model_len`` (vLLM refuses a smaller one).
Inside each engine the script drives vLLM's own step loop (``llm.llm_engine.add_request`` /
``step``) with the engine core in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) and
``async_scheduling=False``, so one ``step()`` call is one scheduler step and steps can be counted:

- **alone**: one prompt of P tokens with nothing else running; the step at which its first token
  comes out (expected: ceil(P / C));
- **with decoders**: D short requests are started; once each has its first token they decode for
  WARM_STEPS more steps, then one long prompt of P tokens arrives. Recorded: the step (counted from
  its arrival) of its first token (expected: ceil(P / (C - D)), each step carrying D decode tokens
  and a chunk of C - D), how many
  tokens each decoder produced in those steps (expected: one per step, none skipped), and the
  largest gap between two tokens of a decoder while the long prompt was prefilled (GPU: about the
  time of a C-token step; unchunked, one gap as long as the whole prefill).

Every request must produce exactly its max_tokens, and vLLM's ``vllm:iteration_tokens_total``
histogram must sum to the prompt plus generated tokens of the row (its count is not a step count:
vLLM records a step only when it emits a token, so chunk-only steps are missing from it).

**PD mechanics** (chunk setting ``pd``, one more engine): vLLM's ``ExampleConnector`` writes each new
prompt's KV cache to files under ``--kv-path`` and loads it back for a prompt it has seen, the two
halves of prefill/decode disaggregation through shared storage, here in one instance
(``kv_role`` ``kv_both``; disaggregation runs a ``kv_producer`` and a ``kv_consumer`` instance). One
prompt of PD_PROMPT tokens is sent twice, prefix caching off. Recorded: the KV bytes written (the
tensors in the files, headers left out; expected: floor((P - 1) / z) z tokens times kappa), the
tokens the second request found (``num_cached_tokens``, and vLLM's ``vllm:external_prefix_cache_hits``;
expected floor((P - 2) / z) z) and both TTFTs.

Run (GPU, vLLM 0.26.0; the model is fetched on first use; four engine starts):

    python snippets/labs/chunked_prefill.py --receipt receipts/rtx-4090/chunked_prefill.json

Imports the standard library, ``labkit`` (this folder) and vLLM (inside ``child``).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import tempfile
import time
from pathlib import Path

from labkit import (
    STEP_TOKENS_METRIC,
    cache_config,
    check_model_arg,
    child_run,
    engine_core_in_process,
    engine_failure,
    fail,
    kv_bytes_per_token,
    lab_parser,
    metric_totals,
    prepare,
    progress,
    random_prompt,
    request_times,
    write_receipt,
)

LAB = "chunked_prefill"
CHUNKS = ("512", "2048", "off", "pd")
"""Engine settings, one engine each: C = max_num_batched_tokens with chunked prefill on, ``off`` (chunked
prefill off), ``pd`` (the KV connector row)."""
ALONE_PROMPTS = (2048, 16384)
"""Prompt tokens P of the rows with nothing else running."""
LONG_PROMPT = 16384
"""Prompt tokens P of the long prompt that arrives while the decoders run."""
DECODERS = 16
"""Decoders D already running when the long prompt arrives."""
DECODER_PROMPT = 128
"""Prompt tokens of each decoder."""
DECODE_TOKENS = 256
"""Tokens each decoder generates: enough to outlast their own prefill, WARM_STEPS and the longest chunked prefill."""
PD_PROMPT = 8000
"""Prompt tokens of the PD row (8,000 - 1 and 8,000 - 2 are not multiples of a block of 16 or 128)."""
LONG_OUTPUT = 2
"""Tokens the long prompt (and each alone prompt) generates."""
WARM_STEPS = 4
"""Steps the decoders run alone, once every one of them has its first token, before the long prompt arrives."""
MAX_MODEL_LEN = 20480
"""Context length: the 16,384-token prompt fits, and ``off`` gets this budget (vLLM needs >= it)."""
SEED = 0
ROW_TAG = "CHUNKED_PREFILL_ROW "
"""The child prints its rows after this tag, as JSON on one line."""
CHILD_TIMEOUT_S = 1800
EXTERNAL_HITS_METRIC = "vllm:external_prefix_cache_hits"
"""vLLM's counter of prompt tokens found by a KV connector (loaded, not computed)."""
CONNECTOR = "ExampleConnector"
"""vLLM's KV connector that stores each prompt's KV cache in files under ``shared_storage_path``."""
"""vLLM's switch for an engine core in its own process ("1", the default); "0" runs it in this one."""


UNITS = {
    "max_num_batched_tokens": "tokens",
    "decoders": "requests",
    "prompt_tokens": "tokens",
    "first_token_step": "steps",
    "decoder_tokens_min": "tokens",
    "decoder_tokens_max": "tokens",
    "requests": "requests",
    "requests_exact": "requests",
    "histogram_tokens": "tokens",
    "max_gap_ms": "ms",
    "ttft_ms": "ms",
    "ttft_cold_ms": "ms",
    "block_size": "tokens",
    "kv_bytes_per_token": "B/token",
    "kv_bytes_written": "B",
    "cached_tokens": "tokens",
    "external_hits": "tokens",
}
"""The unit of every measured key of a receipt row (``infercourse.labs`` reads it for the spec)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = lab_parser("Chunked prefill: steps to the first token, and the decoders' gaps.", max_model_len=MAX_MODEL_LEN)
    p.add_argument("--chunks", default=",".join(CHUNKS), help="comma-separated chunk sizes C (tokens) or 'off'")
    p.add_argument("--alone", default=",".join(map(str, ALONE_PROMPTS)), help="prompt tokens of the alone rows")
    p.add_argument("--long-prompt", type=int, default=LONG_PROMPT, help="prompt tokens that arrive among decoders")
    p.add_argument("--decoders", type=int, default=DECODERS, help="decoders D running when the long prompt arrives")
    p.add_argument("--decoder-prompt", type=int, default=DECODER_PROMPT, help="prompt tokens of each decoder")
    p.add_argument("--decode-tokens", type=int, default=DECODE_TOKENS, help="tokens each decoder generates")
    p.add_argument("--pd-prompt", type=int, default=PD_PROMPT, help="prompt tokens of the pd row")
    p.add_argument("--kv-path", type=Path, help="folder for the pd row's KV files (default: a new temporary one)")
    # internal: one engine in this process; prints its rows after ROW_TAG
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    try:
        args.chunks = tuple(c.strip() for c in args.chunks.split(",") if c.strip())
        args.alone = tuple(int(a) for a in args.alone.split(",") if a.strip())
    except ValueError:
        fail(f"--alone {args.alone}: give comma-separated whole numbers of tokens, e.g. 2048,16384")
    return args


def budget(chunk: str, max_model_len: int) -> int:
    """max_num_batched_tokens of a setting: C itself, or max_model_len when chunking is off and for
    ``pd`` (its prompt is prefilled in one step, so the connector stores all of it at once)."""
    return max_model_len if chunk in ("off", "pd") else int(chunk)


def check_input(args) -> None:
    """One line for every setting that cannot work, before any engine starts."""
    check_model_arg(args.model)
    for c in args.chunks:
        if c not in ("off", "pd") and not (c.isdigit() and int(c) > 0):
            fail(f"--chunks: {c!r} is neither a positive number of tokens nor 'off' or 'pd'")
    if "pd" in args.chunks and not 2 < args.pd_prompt + LONG_OUTPUT <= args.max_model_len:
        fail(f"--pd-prompt {args.pd_prompt}: give 3 or more tokens, and at most --max-model-len minus {LONG_OUTPUT}")
    if not args.chunks or not args.alone or min(args.alone) < 1:
        fail("--chunks and --alone need at least one value each, every prompt at least 1 token")
    need = max(*args.alone, args.long_prompt) + LONG_OUTPUT
    if need > args.max_model_len:
        fail(f"the longest prompt needs {need} tokens but --max-model-len is {args.max_model_len}; raise it")
    if args.decoders < 1 or args.decoder_prompt < 1:
        fail("--decoders and --decoder-prompt must be at least 1")
    for c in (c for c in args.chunks if c != "pd"):
        b = budget(c, args.max_model_len)
        if b <= args.decoders:
            fail(f"chunk {c}: a budget of {b} tokens leaves no room beside {args.decoders} decoders; raise it")
        # the first decoders decode while the others are still prefilled, then WARM_STEPS, then the long prefill
        need = math.ceil(args.decoders * args.decoder_prompt / (b - args.decoders)) + WARM_STEPS
        need += math.ceil(args.long_prompt / (b - args.decoders)) + 2
        if args.decode_tokens < need:
            fail(
                f"--decode-tokens {args.decode_tokens}: the decoders must outlast their own prefill, {WARM_STEPS} "
                f"warm steps and the long prefill at chunk {c}; pass {need} or more"
            )


def child(args) -> int:
    """One engine (args.chunks holds one setting): run every row, print them after ROW_TAG."""
    engine_core_in_process()  # steps are counted in this process
    try:
        from vllm import LLM, SamplingParams
    except ImportError as exc:
        fail(f"vLLM is not importable ({exc}); install it: pip install -r requirements-labs-gpu.txt")
    (chunk,) = args.chunks
    if chunk == "pd":
        return pd_child(args, LLM, SamplingParams)
    tokens = budget(chunk, args.max_model_len)
    started = time.perf_counter()
    try:
        llm = LLM(
            model=args.model,
            load_format=args.load_format,
            max_model_len=args.max_model_len,
            seed=SEED,
            enable_chunked_prefill=chunk != "off",
            max_num_batched_tokens=tokens,
            max_num_seqs=max(args.decoders + 1, 2),
            async_scheduling=False,  # one step() = one scheduler step, so steps can be counted
            enable_prefix_caching=False,  # every prompt is prefilled in full
            disable_log_stats=False,  # fills RequestOutput.metrics and the step histogram
        )
    except Exception as exc:  # vLLM raises many kinds; the parent reads the reason from this output
        engine_failure(exc, args.model)
    engine_start_s = time.perf_counter() - started
    engine = llm.llm_engine
    tokenizer = llm.get_tokenizer()
    vocab_size, special = len(tokenizer), set(tokenizer.all_special_ids)
    rng = random.Random(SEED)
    ids = iter(range(10**9))

    def add(prompt_tokens: int, max_tokens: int) -> str:
        request_id = f"r{next(ids)}"
        params = SamplingParams(max_tokens=max_tokens, ignore_eos=True, temperature=0, detokenize=False)
        engine.add_request(request_id, random_prompt(rng, prompt_tokens, vocab_size, special), params)
        return request_id

    def run(decoders: int, prompt_tokens: int) -> dict:
        """Decoders first (until each has its first token, then WARM_STEPS steps), then the prompt; step
        until everything has finished."""
        sum_before, _ = metric_totals(llm, STEP_TOKENS_METRIC)
        want = {add(args.decoder_prompt, args.decode_tokens): args.decode_tokens for _ in range(decoders)}
        produced = dict.fromkeys(want, 0)
        finished = {}
        arrivals = {rid: [] for rid in want}
        step = 0

        def one_step() -> None:
            nonlocal step
            outputs = engine.step()
            now = time.perf_counter()
            step += 1
            for out in outputs:
                n = len(out.outputs[0].token_ids)
                if n > produced.get(out.request_id, 0):
                    arrivals.setdefault(out.request_id, []).append((step, now))
                produced[out.request_id] = n
                if out.finished:
                    finished[out.request_id] = out

        while any(produced[rid] == 0 for rid in want):  # every decoder past its prefill
            one_step()
        for _ in range(WARM_STEPS if decoders else 0):
            one_step()
        long_id = add(prompt_tokens, LONG_OUTPUT)
        want[long_id], produced[long_id], arrived = LONG_OUTPUT, 0, step
        while engine.has_unfinished_requests():
            one_step()
        sum_after, _ = metric_totals(llm, STEP_TOKENS_METRIC)
        first = arrivals[long_id][0][0]  # the step whose output held the long prompt's first token
        during = [
            [t for s, t in arrivals[rid] if arrived <= s <= first] for rid in want if rid != long_id
        ]  # each decoder's token times from the step before the arrival to the first token
        gaps = [b - a for times in during for a, b in zip(times, times[1:], strict=False)]
        return {
            "chunk": chunk,
            "max_num_batched_tokens": tokens,
            "decoders": decoders,
            "prompt_tokens": prompt_tokens,
            "first_token_step": first - arrived,
            "decoder_tokens_min": min((len(t) - 1 for t in during), default=0),
            "decoder_tokens_max": max((len(t) - 1 for t in during), default=0),
            "requests": len(want),
            "requests_exact": sum(
                1 for rid, n in want.items() if rid in finished and len(finished[rid].outputs[0].token_ids) == n
            ),
            "histogram_tokens": round(sum_after - sum_before),
            "max_gap_ms": round(max(gaps, default=0.0) * 1e3, 6),
            "ttft_ms": round(request_times(finished[long_id])["ttft_ms"], 6),
            "ttft_cold_ms": None,
            "block_size": None,
            "kv_bytes_per_token": None,
            "kv_bytes_written": None,
            "cached_tokens": None,
            "external_hits": None,
        }

    add(16, 2)  # untimed warm-up request: one-off costs
    while engine.has_unfinished_requests():
        engine.step()
    rows = [run(0, p) for p in args.alone] + [run(args.decoders, args.long_prompt)]
    print(ROW_TAG + json.dumps({"engine_start_s": engine_start_s, "rows": rows}), flush=True)
    return 0


def tensor_bytes(folder: Path) -> int:
    """Bytes of the tensors in every ``.safetensors`` file under ``folder``: each file's size minus its
    8-byte header length and the JSON header it announces (the safetensors format)."""
    total = 0
    for path in folder.rglob("*.safetensors"):
        with path.open("rb") as f:
            header = int.from_bytes(f.read(8), "little")
        total += path.stat().st_size - 8 - header
    return total


def pd_child(args, LLM, SamplingParams) -> int:
    """The pd row: one engine with vLLM's ExampleConnector (kv_both); one prompt sent twice."""
    folder = args.kv_path or Path(tempfile.mkdtemp(prefix="chunked_prefill_kv_"))
    folder.mkdir(parents=True, exist_ok=True)
    if any(folder.iterdir()):
        fail(f"--kv-path {folder} is not empty; pass an empty folder (old KV files would be found as hits)")
    started = time.perf_counter()
    try:
        llm = LLM(
            model=args.model,
            load_format=args.load_format,
            max_model_len=args.max_model_len,
            seed=SEED,
            max_num_batched_tokens=args.max_model_len,  # the prompt in one step: the connector stores it whole
            enable_prefix_caching=False,  # the second request's hits can only come from the connector
            disable_log_stats=False,
            kv_transfer_config={
                "kv_connector": CONNECTOR,
                "kv_role": "kv_both",
                "kv_connector_extra_config": {"shared_storage_path": str(folder)},
            },
        )
    except Exception as exc:  # vLLM raises many kinds; the parent reads the reason from this output
        engine_failure(exc, args.model)
    engine_start_s = time.perf_counter() - started
    block_size = int(cache_config(llm)["block_size"])
    model_config = llm.llm_engine.vllm_config.model_config
    import torch

    kappa = kv_bytes_per_token(model_config.hf_config, torch.empty((), dtype=model_config.dtype).element_size())
    tokenizer = llm.get_tokenizer()
    rng = random.Random(SEED)
    prompt = random_prompt(rng, args.pd_prompt, len(tokenizer), set(tokenizer.all_special_ids))
    params = SamplingParams(max_tokens=LONG_OUTPUT, ignore_eos=True, temperature=0, detokenize=False)
    sum_before, _ = metric_totals(llm, STEP_TOKENS_METRIC)
    hits_before, _ = metric_totals(llm, EXTERNAL_HITS_METRIC)
    (cold,) = llm.generate([prompt], params, use_tqdm=False)  # prefilled, its KV written to files
    written = tensor_bytes(folder)
    (warm,) = llm.generate([prompt], params, use_tqdm=False)  # its KV loaded from them
    sum_after, _ = metric_totals(llm, STEP_TOKENS_METRIC)
    hits_after, _ = metric_totals(llm, EXTERNAL_HITS_METRIC)
    if args.kv_path is None:
        shutil.rmtree(folder, ignore_errors=True)  # the lab's own temporary folder; a --kv-path is kept
    row = {
        "chunk": "pd",
        "max_num_batched_tokens": args.max_model_len,
        "decoders": 0,
        "prompt_tokens": args.pd_prompt,
        "first_token_step": None,
        "decoder_tokens_min": None,
        "decoder_tokens_max": None,
        "requests": 2,
        "requests_exact": sum(1 for o in (cold, warm) if len(o.outputs[0].token_ids) == LONG_OUTPUT),
        "histogram_tokens": round(sum_after - sum_before),
        "max_gap_ms": None,
        "ttft_ms": round(request_times(warm)["ttft_ms"], 6),
        "ttft_cold_ms": round(request_times(cold)["ttft_ms"], 6),
        "block_size": block_size,
        "kv_bytes_per_token": kappa,
        "kv_bytes_written": written,
        "cached_tokens": warm.num_cached_tokens,
        "external_hits": round(hits_after - hits_before),
    }
    print(ROW_TAG + json.dumps({"engine_start_s": engine_start_s, "rows": [row]}), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    check_input(args)
    if args.child:
        return child(args)
    prepare(args, LAB)
    log_dir = Path(tempfile.mkdtemp(prefix="chunked_prefill_"))
    progress(f"each engine's log: {log_dir}/chunk-<C>.log")
    rows, starts = [], []
    for i, chunk in enumerate(args.chunks, 1):
        progress(f"engine {i}/{len(args.chunks)}: chunk {chunk} (a first run downloads the weights)")
        arguments = [
            "--model", args.model, "--load-format", args.load_format, "--max-model-len", str(args.max_model_len),
            "--chunks", chunk, "--alone", ",".join(map(str, args.alone)), "--long-prompt", str(args.long_prompt),
            "--decoders", str(args.decoders), "--decoder-prompt", str(args.decoder_prompt),
            "--decode-tokens", str(args.decode_tokens), "--pd-prompt", str(args.pd_prompt),
        ]  # fmt: skip
        if args.kv_path:
            arguments += ["--kv-path", str(args.kv_path)]
        log = log_dir / f"chunk-{chunk}.log"
        run = child_run(__file__, arguments, log, ROW_TAG, CHILD_TIMEOUT_S)
        if run["row"] is None:
            fail(f"chunk {chunk}: the engine failed ({run['cause'][:300]}); log: {log}", 3)
        starts.append(run["row"]["engine_start_s"])
        rows += run["row"]["rows"]

    print(
        f"{args.model} ({args.load_format} weights); {args.decoders} decoders of {args.decoder_prompt} prompt "
        f"tokens when the long prompt arrives; steps counted from its arrival"
    )
    print(
        f"{'chunk':>5} {'D':>3} {'prompt':>6} {'1st-token step':>14} {'decoder tokens':>14} {'exact':>7} "
        f"{'hist tokens':>11} {'max gap (ms)':>12} {'TTFT (ms)':>10}"
    )
    for r in rows:
        if r["chunk"] == "pd":
            print(
                f"{r['chunk']:>5} {r['decoders']:>3} {r['prompt_tokens']:>6} KV written {r['kv_bytes_written']:,} B "
                f"(kappa {r['kv_bytes_per_token']:,} B/token, blocks of {r['block_size']}); second request: "
                f"{r['cached_tokens']:,} tokens loaded ({EXTERNAL_HITS_METRIC} +{r['external_hits']:,}), TTFT "
                f"{r['ttft_ms']:.2f} ms vs {r['ttft_cold_ms']:.2f} ms cold; "
                f"exact {r['requests_exact']}/{r['requests']}, hist tokens {r['histogram_tokens']:,}"
            )
            continue
        print(
            f"{r['chunk']:>5} {r['decoders']:>3} {r['prompt_tokens']:>6} {r['first_token_step']:>14} "
            f"{r['decoder_tokens_min']:>6}-{r['decoder_tokens_max']:<7} {r['requests_exact']:>3}/{r['requests']:<3} "
            f"{r['histogram_tokens']:>11} {r['max_gap_ms']:>12.2f} {r['ttft_ms']:>10.2f}"
        )
    if args.receipt:
        write_receipt(
            args.receipt,
            LAB,
            args,
            engine_start_s=starts[0],
            results=rows,
            settings={
                "chunks": list(args.chunks),
                "decoder_prompt_tokens": args.decoder_prompt,
                "decode_tokens": args.decode_tokens,
                "long_output_tokens": LONG_OUTPUT,
                "warm_steps": WARM_STEPS,
                "async_scheduling": False,
                "enable_prefix_caching": False,
                "engine_starts_s": starts,
                "pd_connector": CONNECTOR if "pd" in args.chunks else None,
            },
            units=UNITS,
        )
    return 0


if __name__ == "__main__":  # vLLM may spawn processes; a spawned child re-imports this file
    raise SystemExit(main())
