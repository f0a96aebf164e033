"""Lab 4B, ``snippets/labs/chunked_prefill.py``: chunked prefill counted step by step, and a KV connector.

Receipt rows, keyed by ``chunk`` (a token count C, ``"off"`` or ``"pd"``), ``decoders`` (D) and
``prompt_tokens`` (P):

- chunk rows (one engine per setting, budget ``max_num_batched_tokens``): ``first_token_step`` (engine
  steps from the prompt's arrival to the step that emitted its first token), ``decoder_tokens_min`` /
  ``decoder_tokens_max`` (tokens each running decoder produced in those steps), ``max_gap_ms`` (the
  longest interval between two tokens of a decoder meanwhile), ``ttft_ms`` (the prompt's, from vLLM's
  per-request stats);
- the ``pd`` row (vLLM's ExampleConnector, one prompt sent twice): ``kv_bytes_written`` (tensor bytes
  in the KV files), ``kv_bytes_per_token`` (kappa of the loaded model), ``block_size``,
  ``cached_tokens`` (the second request's ``num_cached_tokens``), ``external_hits`` (growth of
  ``vllm:external_prefix_cache_hits``), ``ttft_ms`` / ``ttft_cold_ms`` (second / first request);
- every row: ``requests`` and ``requests_exact`` (those that produced exactly their max_tokens),
  ``histogram_tokens`` (growth of the ``vllm:iteration_tokens_total`` sum). Fields of the other kind
  of row are None.

Token, step and byte claims are exact on any machine, the CPU included; the gap claims are checked
on GPU receipts only (:func:`~infercourse.labs.core.gpu_timing`).
"""

from __future__ import annotations

from infercourse import fmt
from infercourse.labs.core import ClaimResult, Column, LabSpec, LabWork, Receipt, gpu_timing, lab_constant
from infercourse.registry import COURSE_MODEL, LAB_GPU, VLLM_DEFAULT_BLOCK_SIZE, gpu, model
from infercourse.roofline import chunked_prefill_floors, chunked_prefill_steps, prefill_floor
from infercourse.transformer import kv_bytes_per_token

CHUNKS = lab_constant("chunked_prefill", "CHUNKS")
LONG_PROMPT = lab_constant("chunked_prefill", "LONG_PROMPT")
DECODERS = lab_constant("chunked_prefill", "DECODERS")
PD_PROMPT = lab_constant("chunked_prefill", "PD_PROMPT")
MAX_MODEL_LEN = lab_constant("chunked_prefill", "MAX_MODEL_LEN")


def _chunk_rows(receipt: Receipt) -> list:
    return [r for r in receipt["results"] if r["chunk"] != "pd"]


def _pd_rows(receipt: Receipt) -> list:
    return [r for r in receipt["results"] if r["chunk"] == "pd"]


def stored_tokens(prompt_tokens: int, block_size: int) -> int:
    """Tokens whose KV vLLM's ExampleConnector writes for a new prompt: floor((P - 1) / z) z
    (``align_to_block_size(len(token_ids))`` in vLLM 0.26.0's example_connector.py)."""
    return (prompt_tokens - 1) // block_size * block_size


def loaded_tokens(prompt_tokens: int, block_size: int) -> int:
    """Tokens it loads for a prompt it has stored: floor((P - 2) / z) z (``align_to_block_size(P - 1)``:
    the last prompt token is always computed, for its logits)."""
    return (prompt_tokens - 2) // block_size * block_size


def expected_histogram_tokens(row, settings) -> int:
    """Prompt plus generated tokens the row's requests ran: vLLM's step histogram adds, per step, the
    prompt tokens computed and the tokens generated. Chunk rows: D (decoder prompt + decode tokens) +
    P + the prompt's output; the pd row: 2 (P + output) minus the tokens loaded instead of computed."""
    out = settings["long_output_tokens"]
    if row["chunk"] == "pd":
        return 2 * (row["prompt_tokens"] + out) - loaded_tokens(row["prompt_tokens"], row["block_size"])
    decoders = row["decoders"] * (settings["decoder_prompt_tokens"] + settings["decode_tokens"])
    return decoders + row["prompt_tokens"] + out


def first_token_steps_exact(receipt: Receipt) -> ClaimResult:
    details, ok = [], True
    for r in _chunk_rows(receipt):
        want = chunked_prefill_steps(r["prompt_tokens"], r["max_num_batched_tokens"], r["decoders"])
        ok &= r["first_token_step"] == want
        details.append(
            f"C {r['chunk']}, D {r['decoders']}, P {r['prompt_tokens']}: {r['first_token_step']} (expected {want})"
        )
    return ClaimResult(
        "first_token_steps_exact",
        "a P-token prompt's first token comes out of engine step ceil(P / (C - D)) after its arrival: "
        "D running decoders take one token each of the budget C, the prompt's chunk the rest",
        ok,
        "; ".join(details),
    )


def decoders_never_stall(receipt: Receipt) -> ClaimResult:
    rows = [r for r in _chunk_rows(receipt) if r["decoders"] > 0]
    wrong = [
        f"C {r['chunk']}: {r['decoder_tokens_min']}-{r['decoder_tokens_max']} tokens in {r['first_token_step']} steps"
        for r in rows
        if not r["decoder_tokens_min"] == r["decoder_tokens_max"] == r["first_token_step"]
    ]
    statement = "while the long prompt is prefilled every running decoder gets exactly one token per step"
    if not rows:
        return ClaimResult("decoders_never_stall", statement, None, "no row with decoders")
    return ClaimResult(
        "decoders_never_stall",
        statement,
        not wrong,
        "; ".join(wrong)
        or "; ".join(f"C {r['chunk']}: {r['first_token_step']} of {r['first_token_step']}" for r in rows),
    )


def requests_exact(receipt: Receipt) -> ClaimResult:
    wrong = [f"{r['chunk']}/{r['prompt_tokens']}: {r['requests_exact']} of {r['requests']}" for r in receipt["results"]]
    bad = [w for w, r in zip(wrong, receipt["results"], strict=True) if r["requests_exact"] != r["requests"]]
    return ClaimResult(
        "requests_exact",
        "every request produced exactly its max_tokens tokens",
        not bad,
        "; ".join(bad) or f"all {sum(r['requests'] for r in receipt['results'])} requests",
    )


def histogram_tokens_exact(receipt: Receipt) -> ClaimResult:
    details, ok = [], True
    for r in receipt["results"]:
        want = expected_histogram_tokens(r, receipt["settings"])
        ok &= r["histogram_tokens"] == want
        details.append(f"{r['chunk']}/{r['prompt_tokens']}: {r['histogram_tokens']} (expected {want})")
    return ClaimResult(
        "histogram_tokens_exact",
        "vllm:iteration_tokens_total grows by the prompt tokens computed plus the tokens generated, to the "
        "token (tokens a connector loaded are not computed)",
        ok,
        "; ".join(details),
    )


def connector_bytes_exact(receipt: Receipt) -> ClaimResult:
    rows = _pd_rows(receipt)
    statement = (
        "ExampleConnector writes floor((P - 1) / z) z tokens x kappa bytes of KV, and the second request "
        "loads floor((P - 2) / z) z tokens (num_cached_tokens and vllm:external_prefix_cache_hits)"
    )
    if not rows:
        return ClaimResult("connector_bytes_exact", statement, None, "no pd row")
    details, ok = [], True
    for r in rows:
        z, p = r["block_size"], r["prompt_tokens"]
        want_bytes, want_loaded = stored_tokens(p, z) * r["kv_bytes_per_token"], loaded_tokens(p, z)
        ok &= r["kv_bytes_written"] == want_bytes and r["cached_tokens"] == r["external_hits"] == want_loaded
        details.append(
            f"P {p}, z {z}: {r['kv_bytes_written']:,} B (expected {want_bytes:,}), loaded "
            f"{r['cached_tokens']}/{r['external_hits']} (expected {want_loaded})"
        )
    return ClaimResult("connector_bytes_exact", statement, ok, "; ".join(details))


@gpu_timing
def chunking_shortens_the_gap(receipt: Receipt) -> ClaimResult:
    rows = [r for r in _chunk_rows(receipt) if r["decoders"] > 0]
    off = [r for r in rows if r["chunk"] == "off"]
    chunked = [r for r in rows if r["chunk"] != "off"]
    statement = "with decoders running, every chunked setting's longest decoder gap is shorter than unchunked"
    if not off or not chunked:
        return ClaimResult("chunking_shortens_the_gap", statement, None, "needs an 'off' row and a chunked row")
    return ClaimResult(
        "chunking_shortens_the_gap",
        statement,
        all(r["max_gap_ms"] < off[0]["max_gap_ms"] for r in chunked),
        "; ".join(f"C {r['chunk']}: {r['max_gap_ms']:.1f} ms" for r in chunked)
        + f"; off: {off[0]['max_gap_ms']:.1f} ms",
    )


@gpu_timing
def unchunked_gap_above_floor(receipt: Receipt) -> ClaimResult:
    facts, config = gpu(LAB_GPU), model(COURSE_MODEL).config
    rows = [r for r in _chunk_rows(receipt) if r["decoders"] > 0 and r["chunk"] == "off"]
    statement = f"unchunked, the longest decoder gap is at least the prompt's prefill floor on the {LAB_GPU}"
    if not rows or receipt["model"] != COURSE_MODEL:
        return ClaimResult("unchunked_gap_above_floor", statement, None, f"needs an 'off' row of {COURSE_MODEL}")
    floor_ms = [prefill_floor(facts, config, r["prompt_tokens"]) * 1e3 for r in rows]
    return ClaimResult(
        "unchunked_gap_above_floor",
        statement,
        all(r["max_gap_ms"] >= f for r, f in zip(rows, floor_ms, strict=True)),
        "; ".join(
            f"P {r['prompt_tokens']}: {r['max_gap_ms']:.1f} vs floor {f:.1f} ms"
            for r, f in zip(rows, floor_ms, strict=True)
        ),
    )


def prediction(gpu_name: str = LAB_GPU, model_name: str = COURSE_MODEL) -> str:
    """Markdown: per chunk setting, the long prompt's steps, its TTFT floor and the longest gap floor
    beside D decoders on ``gpu_name``; the pd row's bytes with blocks of 16."""
    facts, config = gpu(gpu_name), model(model_name).config
    kappa = kv_bytes_per_token(config, 2)
    lines = [
        f"{model_name} in BF16 on the {gpu_name}: a {fmt.count(LONG_PROMPT)}-token prompt arrives beside "
        f"{DECODERS} decoders. Steps are exact; the floors are `roofline.chunked_prefill_floors` with chunks of "
        "C - D (they leave out the decoders' own tokens and KV reads, so real steps run above them).",
        "",
        "| chunk C | steps to first token | TTFT floor (ms) | longest gap floor (ms) |",
        "|---|---:|---:|---:|",
    ]
    for chunk in (c for c in CHUNKS if c != "pd"):
        budget = MAX_MODEL_LEN if chunk == "off" else int(chunk)
        room = budget - DECODERS
        steps = chunked_prefill_steps(LONG_PROMPT, budget, DECODERS)
        floors = chunked_prefill_floors(facts, config, LONG_PROMPT, min(room, LONG_PROMPT))
        lines.append(f"| {chunk} | {steps} | {fmt.fixed(sum(floors) * 1e3, 1)} | {fmt.fixed(max(floors) * 1e3, 1)} |")
    z = VLLM_DEFAULT_BLOCK_SIZE
    lines += [
        "",
        f"The pd row ({fmt.count(PD_PROMPT)} tokens, blocks of {z}): {fmt.count(stored_tokens(PD_PROMPT, z))} tokens "
        f"stored, {fmt.count(stored_tokens(PD_PROMPT, z) * kappa)} B; {fmt.count(loaded_tokens(PD_PROMPT, z))} "
        "loaded by the second request.",
    ]
    return "\n".join(lines)


SPEC = LabSpec(
    lab="chunked_prefill",
    lesson="4B",
    row={
        "chunk": str,
        "max_num_batched_tokens": int,
        "decoders": int,
        "prompt_tokens": int,
        "first_token_step": (int, type(None)),
        "decoder_tokens_min": (int, type(None)),
        "decoder_tokens_max": (int, type(None)),
        "requests": int,
        "requests_exact": int,
        "histogram_tokens": int,
        "max_gap_ms": (int, float, type(None)),
        "ttft_ms": (int, float),
        "ttft_cold_ms": (int, float, type(None)),
        "block_size": (int, type(None)),
        "kv_bytes_per_token": (int, type(None)),
        "kv_bytes_written": (int, type(None)),
        "cached_tokens": (int, type(None)),
        "external_hits": (int, type(None)),
    },
    units=lab_constant("chunked_prefill", "UNITS"),
    key=("chunk", "decoders", "prompt_tokens"),
    header="1st-token step",
    claims=(
        first_token_steps_exact,
        decoders_never_stall,
        requests_exact,
        histogram_tokens_exact,
        connector_bytes_exact,
        chunking_shortens_the_gap,
        unchunked_gap_above_floor,
    ),
    prediction=prediction,
    columns=(
        Column("chunk", "chunk", str),
        Column("decoders", "D", fmt.count),
        Column("prompt_tokens", "prompt", fmt.count),
        Column("first_token_step", "steps", lambda v: "-" if v is None else fmt.count(v)),
        Column("max_gap_ms", "max gap (ms)", lambda v: "-" if v is None else fmt.fixed(v, 1)),
        Column("ttft_ms", "TTFT (ms)", lambda v: fmt.fixed(v, 1)),
    ),
    # CPU: one chunk engine of C = 64 and the pd engine; 310 = 4 x 64 + 54 -> 5 steps alone, 6 beside 4
    # decoders (ceil(310 / 60)); 300 - 1 and 300 - 2 are not multiples of the CPU block of 128
    cpu_max_model_len=512,
    cpu_args=(
        *("--chunks", "64,pd", "--alone", "64,65,310", "--long-prompt", "310", "--decoders", "4"),
        *("--decoder-prompt", "8", "--decode-tokens", "16", "--pd-prompt", "300"),
    ),
    work=LabWork(
        engines=len(CHUNKS),
        decode_steps=(len(CHUNKS) - 1) * lab_constant("chunked_prefill", "DECODE_TOKENS"),
        peak_kv_tokens=MAX_MODEL_LEN,
    ),
)
