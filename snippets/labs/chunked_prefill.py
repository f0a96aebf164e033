"""Lab 4B: chunked prefill, step by step and on a live server, and prefill/decode disaggregation through a
KV connector.

Three parts (``--parts``, default all), each engine or server in a fresh process:

**steps** (one engine per setting of ``--chunks``): chunk C is ``max_num_batched_tokens`` with
``enable_chunked_prefill=True`` (vLLM's default), and ``off`` is the baseline with chunking disabled and a
budget of ``max_model_len`` (vLLM refuses a smaller one). The script drives vLLM's own step loop
(``llm.llm_engine.add_request`` / ``step``) with the engine core in its process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``) and ``async_scheduling=False``, so one ``step()`` call is one
scheduler step and steps can be counted:

- **alone**: one prompt of P tokens with nothing else running; the step at which its first token
  comes out (expected: ceil(P / C));
- **with decoders**: D short requests are started; once each has its first token they decode for
  WARM_STEPS more steps, then one long prompt of P tokens arrives. Recorded: the step (counted from
  its arrival) of its first token (expected: ceil(P / (C - D)), each step carrying D decode tokens
  and a chunk of C - D), how many tokens each decoder produced in those steps (expected: one per step,
  none skipped), and the largest gap between two tokens of a decoder while the long prompt was
  prefilled (GPU: about the time of a C-token step; unchunked, one gap as long as the whole prefill).

**serve** (one ``vllm serve`` on 127.0.0.1 per setting of ``--serve-chunks``: the budget and the chunking
switch are engine arguments, fixed when the server starts):

    vllm serve MODEL --max-num-batched-tokens C --enable-chunked-prefill --no-enable-prefix-caching
    vllm serve MODEL --max-num-batched-tokens MAX_MODEL_LEN --no-enable-chunked-prefill --no-enable-prefix-caching

D clients stream completions (``/v1/completions``, ``stream``, one connection each); once each has
WARM_STEPS + 1 tokens, one P-token prompt is sent. Recorded per decoder: the arrival time of every token
(ms since the decoders were sent; the gaps are their differences), and the long prompt's send time and
TTFT as this client saw them. The server's steps cannot be counted from outside: vLLM's step histogram
adds a prompt's tokens at the step that emits its first token, chunked or not (the steps part counts them).

**pd** (two engines, one after the other): vLLM's ``ExampleConnector`` as a prefill instance
(``kv_role`` ``kv_producer``) and a decode instance (``kv_consumer``) sharing one folder (``--kv-path``).
The producer prefills one prompt of PD_PROMPT tokens and makes one token, as a PD proxy asks of a prefill
instance, and its KV cache is written to files; the consumer gets the same prompt, loads the KV from
the files and decodes. Recorded: the KV bytes the producer wrote (the tensors in the files, headers left
out; expected: floor((P - 1) / z) z tokens times kappa), the bytes the consumer added (expected: none),
the tokens the consumer loaded (``num_cached_tokens`` and vLLM's ``vllm:external_prefix_cache_hits``;
expected floor((P - 2) / z) z) and both TTFTs.

Every request must produce exactly its max_tokens, and vLLM's ``vllm:iteration_tokens_total`` histogram
must grow by the prompt plus generated tokens of the row, minus tokens a connector loaded (its count is
not a step count: vLLM records a step only when it emits a token, so chunk-only steps are missing).

Run (GPU, vLLM 0.26.0; the model is fetched on first use; three engines, three servers and the two pd
engines, one at a time):

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
import threading
import time
from pathlib import Path

from labkit.cli import check_model_arg, engine_flags, fail, lab_parser, progress, whole
from labkit.engine import child_run, engine_core_in_process, run_lab, start_llm
from labkit.machine import LOG_CONFIG_ENV
from labkit.measure import (
    FINISHED_METRIC,
    STEP_TOKENS_METRIC,
    cache_config,
    kv_bytes_per_token,
    metric_totals,
    random_prompt,
    request_times,
)
from labkit.receipt import measured_rows, write_receipt
from labkit.server import (
    LOOPBACK,
    free_port,
    serve,
    served_metric_totals,
    served_token_pool,
    stream_completion,
    vllm_cli,
)

LAB = "chunked_prefill"
PARTS = {
    "steps": "one engine per budget, driven step by step: the exact step of a long prompt's first token",
    "serve": "one `vllm serve` per budget and one with chunking off: every streaming decoder's gaps",
    "pd": "a `kv_producer` and a `kv_consumer` instance sharing ExampleConnector's files: bytes and hits",
}
"""The lab's parts (``--parts``), each with what it shows; the lesson's lab box lists them from here."""
CHUNKS = ("512", "2048", "off")
"""Settings of the steps and serve parts, one engine or server each: C = max_num_batched_tokens with chunked
prefill on, or ``off`` (chunked prefill off, budget max_model_len)."""
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
"""Prompt tokens of the pd part (8,000 - 1 and 8,000 - 2 are not multiples of a block of 16 or 128)."""
LONG_OUTPUT = 2
"""Tokens the long prompt (each alone prompt, the pd consumer's request) generates."""
PREFILL_OUTPUT = 1
"""Tokens the pd producer generates: a prefill instance is asked for one token (vLLM's disaggregation proxies
send max_tokens=1 to it), so it only prefills."""
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
PD_ROLES = ("kv_producer", "kv_consumer")
"""The pd part's two instances, in the order they run: the prefill instance writes, the decode instance loads."""


# The receipt's rows: UNITS gives every measured key's unit, ROW every key's JSON type ("number": an int
# or a float; "| None": may be null). The lab's spec (src/infercourse/labs/) reads both.
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
    "long_sent_ms": "ms",
    "decoder_token_ms": "ms",
    "block_size": "tokens",
    "kv_bytes_per_token": "B/token",
    "kv_bytes_written": "B",
    "kv_bytes_consumer": "B",
    "cached_tokens": "tokens",
    "external_hits": "tokens",
}
ROW = {
    "part": "str",
    "chunk": "str",
    "max_num_batched_tokens": "int",
    "decoders": "int",
    "prompt_tokens": "int",
    "first_token_step": "int | None",
    "decoder_tokens_min": "int | None",
    "decoder_tokens_max": "int | None",
    "requests": "int",
    "requests_exact": "int",
    "histogram_tokens": "int",
    "max_gap_ms": "number | None",
    "ttft_ms": "number | None",
    "ttft_cold_ms": "number | None",
    "long_sent_ms": "number | None",
    "decoder_token_ms": "list | None",
    "block_size": "int | None",
    "kv_bytes_per_token": "int | None",
    "kv_bytes_written": "int | None",
    "kv_bytes_consumer": "int | None",
    "cached_tokens": "int | None",
    "external_hits": "int | None",
}


def new_row(part: str, chunk: str, **fields) -> dict:
    """A receipt row of ``part``: every key of :data:`UNITS`, None unless given in ``fields``."""
    return {"part": part, "chunk": chunk, **dict.fromkeys(UNITS), **fields}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = lab_parser(LAB, "Chunked prefill: steps to the first token, the decoders' gaps, and a PD pair.", MAX_MODEL_LEN)
    p.add_argument("--parts", default=",".join(PARTS), help="comma-separated parts to run: steps, serve, pd")
    p.add_argument("--chunks", default=",".join(CHUNKS), help="steps part: comma-separated chunk sizes C or 'off'")
    p.add_argument("--serve-chunks", default=",".join(CHUNKS), help="serve part: chunk sizes C or 'off'")
    p.add_argument("--alone", default=",".join(map(str, ALONE_PROMPTS)), help="prompt tokens of the alone rows")
    p.add_argument("--long-prompt", type=whole, default=LONG_PROMPT, help="prompt tokens that arrive among decoders")
    p.add_argument("--decoders", type=whole, default=DECODERS, help="decoders D running when the long prompt arrives")
    p.add_argument("--decoder-prompt", type=whole, default=DECODER_PROMPT, help="prompt tokens of each decoder")
    p.add_argument("--decode-tokens", type=whole, default=DECODE_TOKENS, help="tokens each decoder generates")
    p.add_argument("--pd-prompt", type=whole, default=PD_PROMPT, help="prompt tokens of the pd part")
    p.add_argument("--kv-path", type=Path, help="empty folder for the pd part's KV files (default: a temporary one)")
    # internal: one engine in this process (a steps setting, or a pd role); prints its rows after ROW_TAG
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--pd-role", choices=PD_ROLES, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    try:
        for name in ("parts", "chunks", "serve_chunks"):
            setattr(args, name, tuple(c.strip() for c in getattr(args, name).split(",") if c.strip()))
        args.alone = tuple(int(a) for a in args.alone.split(",") if a.strip())
    except ValueError:
        fail(f"--alone {args.alone}: give comma-separated whole numbers of tokens, e.g. 2048,16384")
    return args


def budget(chunk: str, max_model_len: int) -> int:
    """max_num_batched_tokens of a setting: C itself, or max_model_len when chunking is off."""
    return max_model_len if chunk == "off" else int(chunk)


def check_input(args) -> None:
    """One line for every setting that cannot work, before any engine starts."""
    check_model_arg(args.model)
    unknown = [p for p in args.parts if p not in PARTS]
    if unknown or not args.parts:
        fail(f"--parts {','.join(args.parts)}: give one or more of {', '.join(PARTS)}")
    for flag, chunks, part in (("--chunks", args.chunks, "steps"), ("--serve-chunks", args.serve_chunks, "serve")):
        if part not in args.parts:
            continue
        if not chunks:
            fail(f"{flag} needs at least one chunk size or 'off' for the {part} part")
        for c in chunks:
            if c != "off" and not (c.isdigit() and int(c) > 0):
                fail(f"{flag}: {c!r} is neither a positive number of tokens nor 'off'")
    if "steps" in args.parts and (not args.alone or min(args.alone) < 1):
        fail("--alone needs at least one prompt length, every prompt at least 1 token")
    if "pd" in args.parts:
        if not 3 <= args.pd_prompt <= args.max_model_len - LONG_OUTPUT:
            fail(f"--pd-prompt {args.pd_prompt}: give 3 tokens or more, at most --max-model-len minus {LONG_OUTPUT}")
        if args.kv_path and args.kv_path.exists() and not args.child and any(args.kv_path.iterdir()):
            fail(f"--kv-path {args.kv_path} is not empty; pass an empty folder (old KV files would be found as hits)")
    alone = args.alone if "steps" in args.parts else ()
    need = max((*alone, args.long_prompt if {"steps", "serve"} & set(args.parts) else 0)) + LONG_OUTPUT
    if need > args.max_model_len:
        fail(f"the longest prompt needs {need} tokens but --max-model-len is {args.max_model_len}; raise it")
    settings = set(args.chunks if "steps" in args.parts else ())
    settings |= set(args.serve_chunks if "serve" in args.parts else ())
    for c in sorted(settings):
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


# --8<-- [start:engine]
def child(args) -> int:
    """One engine (args.chunks holds one setting, or args.pd_role names a pd instance): run its rows and
    print them after ROW_TAG."""
    engine_core_in_process()  # steps are counted in this process
    if args.pd_role:
        return pd_child(args)
    (chunk,) = args.chunks
    tokens = budget(chunk, args.max_model_len)
    llm, engine_start_s = start_llm(
        args,
        seed=SEED,
        enable_chunked_prefill=chunk != "off",
        max_num_batched_tokens=tokens,
        max_num_seqs=max(args.decoders + 1, 2),
        async_scheduling=False,  # one step() = one scheduler step, so steps can be counted
        enable_prefix_caching=False,  # every prompt is prefilled in full
        disable_log_stats=False,  # fills RequestOutput.metrics and the step histogram
    )
    from vllm import SamplingParams

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
        return new_row(
            "steps",
            chunk,
            max_num_batched_tokens=tokens,
            decoders=decoders,
            prompt_tokens=prompt_tokens,
            first_token_step=first - arrived,
            decoder_tokens_min=min((len(t) - 1 for t in during), default=0),
            decoder_tokens_max=max((len(t) - 1 for t in during), default=0),
            requests=len(want),
            requests_exact=sum(
                1 for rid, n in want.items() if rid in finished and len(finished[rid].outputs[0].token_ids) == n
            ),
            histogram_tokens=round(sum_after - sum_before),
            max_gap_ms=round(max(gaps, default=0.0) * 1e3, 6),
            ttft_ms=round(request_times(finished[long_id])["ttft_ms"], 6),
        )

    add(16, 2)  # untimed warm-up request: one-off costs
    while engine.has_unfinished_requests():
        engine.step()
    rows = [run(0, p) for p in args.alone] + [run(args.decoders, args.long_prompt)]
    print(ROW_TAG + json.dumps({"engine_start_s": engine_start_s, "rows": rows}), flush=True)
    return 0


# --8<-- [end:engine]


def tensor_bytes(folder: Path) -> int:
    """Bytes of the tensors in every ``.safetensors`` file under ``folder``: each file's size minus its
    8-byte header length and the JSON header it announces (the safetensors format)."""
    total = 0
    for path in folder.rglob("*.safetensors"):
        with path.open("rb") as f:
            header = int.from_bytes(f.read(8), "little")
        total += path.stat().st_size - 8 - header
    return total


def pd_child(args) -> int:
    """One pd instance (``args.pd_role``): vLLM's ExampleConnector on the folder ``args.kv_path``; the same
    PD_PROMPT-token prompt in both (same seed and tokenizer), PREFILL_OUTPUT tokens from the producer and
    LONG_OUTPUT from the consumer. Prints what it measured after ROW_TAG."""
    llm, engine_start_s = start_llm(
        args,
        seed=SEED,
        # the prompt in one step: ExampleConnector stores a new prompt's slots in the step that schedules it
        max_num_batched_tokens=args.max_model_len,
        enable_prefix_caching=False,  # the consumer's hits can only come from the connector
        disable_log_stats=False,
        kv_transfer_config={
            "kv_connector": CONNECTOR,
            "kv_role": args.pd_role,
            "kv_connector_extra_config": {"shared_storage_path": str(args.kv_path)},
        },
    )
    from vllm import SamplingParams

    model_config = llm.llm_engine.vllm_config.model_config
    import torch

    kappa = kv_bytes_per_token(model_config.hf_config, torch.empty((), dtype=model_config.dtype).element_size())
    tokenizer = llm.get_tokenizer()
    prompt = random_prompt(random.Random(SEED), args.pd_prompt, len(tokenizer), set(tokenizer.all_special_ids))
    max_tokens = PREFILL_OUTPUT if args.pd_role == "kv_producer" else LONG_OUTPUT
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True, temperature=0, detokenize=False)
    sum_before, _ = metric_totals(llm, STEP_TOKENS_METRIC)
    hits_before, _ = metric_totals(llm, EXTERNAL_HITS_METRIC)
    bytes_before = tensor_bytes(args.kv_path)
    (out,) = llm.generate([prompt], params, use_tqdm=False)
    if out.metrics is None:
        fail("vLLM returned no per-request metrics; start the engine with disable_log_stats=False", 3)
    sum_after, _ = metric_totals(llm, STEP_TOKENS_METRIC)
    hits_after, _ = metric_totals(llm, EXTERNAL_HITS_METRIC)
    found = {
        "engine_start_s": engine_start_s,
        "block_size": int(cache_config(llm)["block_size"]),
        "kv_bytes_per_token": kappa,
        "bytes_added": tensor_bytes(args.kv_path) - bytes_before,
        "exact": len(out.outputs[0].token_ids) == max_tokens,
        "histogram_tokens": round(sum_after - sum_before),
        "ttft_ms": out.metrics.first_token_latency * 1e3,
        "cached_tokens": out.num_cached_tokens,
        "external_hits": round(hits_after - hits_before),
    }
    print(ROW_TAG + json.dumps(found), flush=True)
    return 0


def served_prompts(url: str, model: str, lengths: list[int]) -> list[list[int]]:
    """One prompt of exactly n token ids per n in ``lengths``, drawn (seeded) from the server's token pool
    (:func:`labkit.served_token_pool`)."""
    rng = random.Random(SEED)
    pool = served_token_pool(url, model, rng)
    return [rng.choices(pool, k=n) for n in lengths]


def serve_row(url: str, args, chunk: str) -> dict:
    """The serve part at one setting: D streaming decoders, then the long prompt once each has WARM_STEPS + 1
    tokens. Token times are this client's ``perf_counter`` at each event, in ms since the decoders were sent."""
    prompts = served_prompts(url, args.model, [args.decoder_prompt] * args.decoders + [args.long_prompt])
    sum_before, _ = served_metric_totals(url, STEP_TOKENS_METRIC)
    done_before, _ = served_metric_totals(url, FINISHED_METRIC)
    want = [args.decode_tokens] * args.decoders + [LONG_OUTPUT]
    events: list[list] = [[] for _ in want]  # per request: (arrival time, token ids in the event, finish reason)

    def request(i: int) -> None:
        payload = {"model": args.model, "prompt": prompts[i], "max_tokens": want[i], "ignore_eos": True}
        stream_completion(url, {**payload, "temperature": 0}, on_event=events[i].append)

    decoders = [threading.Thread(target=request, args=(i,)) for i in range(args.decoders)]
    start = time.perf_counter()
    for t in decoders:
        t.start()
    while any(sum(n for _, n, _ in events[i]) < WARM_STEPS + 1 for i in range(args.decoders)):
        if not any(t.is_alive() for t in decoders):
            fail(f"serve chunk {chunk}: the decoders stopped before the long prompt was sent", 3)
        time.sleep(0.001)
    long_sent = time.perf_counter()
    request(args.decoders)
    for t in decoders:
        t.join()
    deadline = time.monotonic() + 60  # the server records a step's metrics just after sending its tokens
    while served_metric_totals(url, FINISHED_METRIC)[0] < done_before + len(want) and time.monotonic() < deadline:
        time.sleep(0.1)
    sum_after, _ = served_metric_totals(url, STEP_TOKENS_METRIC)
    times = [[round((t - start) * 1e3, 3) for t, n, _ in ev for _ in range(n)] for ev in events]
    sent = round((long_sent - start) * 1e3, 3)
    first = times[-1][0] if times[-1] else None  # the long prompt's first token
    gaps = [
        b - a
        for ts in times[:-1]
        for a, b in zip(ts, ts[1:], strict=False)
        if first is not None and b > sent and a < first
    ]  # from the send of the long prompt to each decoder's first token at or after the long prompt's first
    return new_row(
        "serve",
        chunk,
        max_num_batched_tokens=budget(chunk, args.max_model_len),
        decoders=args.decoders,
        prompt_tokens=args.long_prompt,
        requests=len(want),
        requests_exact=sum(
            1 for ev, n in zip(events, want, strict=True) if sum(k for _, k, _ in ev) == n and ev[-1][2] == "length"
        ),
        histogram_tokens=round(sum_after - sum_before),
        max_gap_ms=round(max(gaps, default=0.0), 3),
        ttft_ms=None if first is None else round(first - sent, 3),
        long_sent_ms=sent,
        decoder_token_ms=times[:-1],
    )


def serve_part(args, log_dir: Path) -> tuple[list[dict], list[float]]:
    """One ``vllm serve`` per setting of --serve-chunks, one after the other: its row and its start time (s)."""
    rows, starts = [], []
    for i, chunk in enumerate(args.serve_chunks, 1):
        flags = [
            *engine_flags(args), "--seed", str(SEED),
            "--max-num-batched-tokens", str(budget(chunk, args.max_model_len)),
            "--no-enable-chunked-prefill" if chunk == "off" else "--enable-chunked-prefill",
            "--no-enable-prefix-caching",  # every prompt is prefilled in full
        ]  # fmt: skip
        log = log_dir / f"serve-{chunk}.log"
        progress(f"server {i}/{len(args.serve_chunks)}: chunk {chunk} on 127.0.0.1 (log: {log})")
        port = free_port()
        command = vllm_cli("serve", args.model, "--host", LOOPBACK, "--port", str(port), *flags)
        with serve(command, port, log, unset=(LOG_CONFIG_ENV,)) as (url, start_s):  # vLLM's whole log in `log`
            starts.append(start_s)
            rows.append(serve_row(url, args, chunk))
    return rows, starts


def pd_part(args, log_dir: Path) -> tuple[dict, list[float]]:
    """The producer, then the consumer, on one KV folder (--kv-path, or a temporary one deleted after)."""
    folder = args.kv_path or Path(tempfile.mkdtemp(prefix="chunked_prefill_kv_"))
    folder.mkdir(parents=True, exist_ok=True)
    found = {}
    for role in PD_ROLES:
        progress(f"pd: {role} engine (ExampleConnector, KV files in {folder})")
        arguments = [
            "--model", args.model, *engine_flags(args),
            "--parts", "pd", "--pd-prompt", str(args.pd_prompt), "--pd-role", role, "--kv-path", str(folder),
        ]  # fmt: skip
        log = log_dir / f"pd-{role}.log"
        run = child_run(__file__, arguments, log, ROW_TAG, CHILD_TIMEOUT_S)
        if run["row"] is None:
            fail(f"pd {role}: the engine failed ({run['cause'][:300]}); log: {log}", 3)
        found[role] = run["row"]
    if args.kv_path is None:
        shutil.rmtree(folder, ignore_errors=True)  # the lab's own temporary folder; a --kv-path is kept
    producer, consumer = (found[role] for role in PD_ROLES)
    row = new_row(
        "pd",
        str(args.max_model_len),
        max_num_batched_tokens=args.max_model_len,
        decoders=0,
        prompt_tokens=args.pd_prompt,
        requests=2,
        requests_exact=producer["exact"] + consumer["exact"],
        histogram_tokens=producer["histogram_tokens"] + consumer["histogram_tokens"],
        ttft_ms=round(consumer["ttft_ms"], 6),
        ttft_cold_ms=round(producer["ttft_ms"], 6),
        block_size=producer["block_size"],
        kv_bytes_per_token=producer["kv_bytes_per_token"],
        kv_bytes_written=producer["bytes_added"],
        kv_bytes_consumer=consumer["bytes_added"],
        cached_tokens=consumer["cached_tokens"],
        external_hits=consumer["external_hits"],
    )
    return row, [producer["engine_start_s"], consumer["engine_start_s"]]


def steps_part(args, log_dir: Path) -> tuple[list[dict], list[float]]:
    """One engine per setting of --chunks, each in a fresh process: its rows and its start time (s)."""
    rows, starts = [], []
    for i, chunk in enumerate(args.chunks, 1):
        progress(f"steps: engine {i}/{len(args.chunks)}: chunk {chunk} (a first run downloads the weights)")
        arguments = [
            "--model", args.model, *engine_flags(args),
            "--parts", "steps", "--chunks", chunk, "--alone", ",".join(map(str, args.alone)),
            "--long-prompt", str(args.long_prompt), "--decoders", str(args.decoders),
            "--decoder-prompt", str(args.decoder_prompt), "--decode-tokens", str(args.decode_tokens),
        ]  # fmt: skip
        log = log_dir / f"steps-{chunk}.log"
        run = child_run(__file__, arguments, log, ROW_TAG, CHILD_TIMEOUT_S)
        if run["row"] is None:
            fail(f"chunk {chunk}: the engine failed ({run['cause'][:300]}); log: {log}", 3)
        starts.append(run["row"]["engine_start_s"])
        rows += run["row"]["rows"]
    return rows, starts


def print_table(args, rows: list[dict]) -> None:
    print(
        f"{args.model} ({args.load_format} weights); {args.decoders} decoders of {args.decoder_prompt} prompt "
        f"tokens when the long prompt arrives; steps counted from its arrival"
    )
    print(
        f"{'part':>5} {'chunk':>5} {'D':>3} {'prompt':>6} {'1st-token step':>14} {'decoder tokens':>14} "
        f"{'exact':>7} {'hist tokens':>11} {'max gap (ms)':>12} {'TTFT (ms)':>10}"
    )
    for r in rows:
        key = f"{r['part']:>5} {r['chunk']:>5} {r['decoders']:>3} {r['prompt_tokens']:>6}"
        exact = f"{r['requests_exact']:>3}/{r['requests']:<3} {r['histogram_tokens']:>11}"
        if r["part"] == "pd":
            print(
                f"{key} producer wrote {r['kv_bytes_written']:,} B of KV (kappa {r['kv_bytes_per_token']:,} B/token, "
                f"blocks of {r['block_size']}), TTFT {r['ttft_cold_ms']:.2f} ms; consumer loaded "
                f"{r['cached_tokens']:,} tokens ({EXTERNAL_HITS_METRIC} +{r['external_hits']:,}), wrote "
                f"{r['kv_bytes_consumer']:,} B, TTFT {r['ttft_ms']:.2f} ms; exact {exact}"
            )
        elif r["part"] == "serve":
            ttft = "-" if r["ttft_ms"] is None else f"{r['ttft_ms']:.2f}"
            print(f"{key} {'-':>14} {'streamed':>14} {exact} {r['max_gap_ms']:>12.2f} {ttft:>10}")
        else:
            print(
                f"{key} {r['first_token_step']:>14} {r['decoder_tokens_min']:>6}-{r['decoder_tokens_max']:<7} "
                f"{exact} {r['max_gap_ms']:>12.2f} {r['ttft_ms']:>10.2f}"
            )


def parent(args, log_dir: Path) -> int:
    """Start each engine in a child process of this script, one by one, collect their rows and write the
    receipt."""
    rows, starts = measured_rows(args, UNITS), {}
    if "steps" in args.parts:
        found, starts["steps"] = steps_part(args, log_dir)
        rows += found
    if "serve" in args.parts:
        found, starts["serve"] = serve_part(args, log_dir)
        rows += found
    if "pd" in args.parts:
        found, starts["pd"] = pd_part(args, log_dir)
        rows.append(found)
    print_table(args, rows)
    settings = {
        "parts": list(args.parts),
        "chunks": list(args.chunks),
        "serve_chunks": list(args.serve_chunks),
        "decoder_prompt_tokens": args.decoder_prompt,
        "decode_tokens": args.decode_tokens,
        "long_output_tokens": LONG_OUTPUT,
        "prefill_output_tokens": PREFILL_OUTPUT,
        "warm_steps": WARM_STEPS,
        "steps_async_scheduling": False,
        "enable_prefix_caching": False,
        "engine_starts_s": starts,
        "pd_connector": CONNECTOR if "pd" in args.parts else None,
    }
    write_receipt(args, UNITS, rows, next(iter(starts.values()))[0], settings)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_lab(
        argv, parse_args, check_input, child, parent, logs="steps-<chunk>.log, serve-<chunk>.log, pd-<role>.log"
    )


if __name__ == "__main__":  # vLLM may spawn processes; a spawned child re-imports this file
    raise SystemExit(main())
