"""Lab 4B, ``snippets/labs/chunked_prefill.py``: chunked prefill counted step by step and watched on a live
server, and a prefill/decode pair of instances sharing a KV connector.

Receipt rows, keyed by ``part`` (``"steps"``, ``"serve"`` or ``"pd"``), ``chunk`` (a token count C or
``"off"``; the pd row: its budget), ``decoders`` (D) and ``prompt_tokens`` (P):

- steps rows (one engine per setting, budget ``max_num_batched_tokens``, its steps driven one by one):
  ``first_token_step`` (engine steps from the prompt's arrival to the step that emitted its first token),
  ``decoder_tokens_min`` / ``decoder_tokens_max`` (tokens each running decoder produced in those steps),
  ``max_gap_ms`` (the longest interval between two tokens of a decoder meanwhile), ``ttft_ms`` (the
  prompt's, from vLLM's per-request stats);
- serve rows (one ``vllm serve`` per setting, D streaming clients, then the long prompt):
  ``decoder_token_ms`` (per decoder, every token's arrival at the client, ms since the decoders were
  sent), ``long_sent_ms`` (when the long prompt was sent, same clock), ``ttft_ms`` (its first token, from
  its send, as the client saw it), ``max_gap_ms`` (the longest gap of a decoder from that send to its
  first token at or after the long prompt's first);
- the pd row (vLLM's ExampleConnector: a ``kv_producer`` engine, then a ``kv_consumer`` one, one folder):
  ``kv_bytes_written`` (tensor bytes the producer wrote), ``kv_bytes_consumer`` (bytes the consumer
  added), ``kv_bytes_per_token`` (kappa of the loaded model), ``block_size``, ``cached_tokens`` (the
  consumer's ``num_cached_tokens``), ``external_hits`` (its growth of
  ``vllm:external_prefix_cache_hits``), ``ttft_cold_ms`` / ``ttft_ms`` (producer / consumer);
- every row: ``requests`` and ``requests_exact`` (those that produced exactly their max_tokens),
  ``histogram_tokens`` (growth of the ``vllm:iteration_tokens_total`` sum, both pd engines together).
  Fields of another part's rows are None.

Token, step and byte claims are exact on any machine, the CPU included; the gap claims are checked
on GPU receipts only (:func:`~infercourse.labs.core.gpu_timing`). A server's steps cannot be counted
from outside (vLLM's step histogram adds a prompt's tokens at the step that emits its first token), so
the serve rows' exact claims are token counts.
"""

from __future__ import annotations

from infercourse import fmt
from infercourse.exercises import Exercise
from infercourse.labs import core
from infercourse.registry import COURSE_MODEL, LAB_GPU, VLLM_DEFAULT_BLOCK_SIZE, gpu, model
from infercourse.roofline import Demand, chunked_prefill_floors, chunked_prefill_steps, prefill_demand, prefill_floor
from infercourse.transformer import kv_bytes_per_token

LAB = core.lab_settings("chunked_prefill")


def _rows(receipt: core.Receipt, part: str) -> list:
    return [r for r in receipt["results"] if r["part"] == part]


def decoder_gaps(row) -> list[tuple[float, float]]:
    """The serve row's decoder tokens as ``(time since the long prompt was sent, gap before the token)``, both
    in ms, every decoder pooled, each decoder's first token left out (it has no gap). Tokens vLLM merged
    into one event share its time, so the later ones show a gap of 0."""
    return [
        (b - row["long_sent_ms"], b - a)
        for times in row["decoder_token_ms"]
        for a, b in zip(times, times[1:], strict=False)
    ]


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
    prompt tokens computed and the tokens generated. Steps and serve rows: D (decoder prompt + decode
    tokens) + P + the prompt's output; the pd row: the producer's P + its one token, plus the consumer's
    P minus the tokens it loaded instead of computing them, + its output."""
    out = settings["long_output_tokens"]
    if row["part"] == "pd":
        consumer = row["prompt_tokens"] - loaded_tokens(row["prompt_tokens"], row["block_size"]) + out
        return row["prompt_tokens"] + settings["prefill_output_tokens"] + consumer
    decoders = row["decoders"] * (settings["decoder_prompt_tokens"] + settings["decode_tokens"])
    return decoders + row["prompt_tokens"] + out


@core.claim
def first_token_steps_exact(receipt: core.Receipt) -> core.ClaimResult:
    details, ok = [], True
    for r in _rows(receipt, "steps"):
        want = chunked_prefill_steps(r["prompt_tokens"], r["max_num_batched_tokens"], r["decoders"])
        ok &= r["first_token_step"] == want
        details.append(
            f"C {r['chunk']}, D {r['decoders']}, P {r['prompt_tokens']}: {r['first_token_step']} (expected {want})"
        )
    return core.ClaimResult(
        "first_token_steps_exact",
        "a P-token prompt's first token comes out of engine step ceil(P / (C - D)) after its arrival: "
        "D running decoders take one token each of the budget C, the prompt's chunk the rest",
        ok,
        "; ".join(details),
    )


def compare(receipt: core.Receipt) -> list[core.Compared]:
    """Each steps row's first-token step beside :func:`~infercourse.roofline.chunked_prefill_steps` (as
    :func:`first_token_steps_exact`): ceil(P / (C - D)), exact on any machine."""
    return core.compare_rows(
        receipt,
        "first-token step",
        "steps",
        "first_token_step",
        lambda r: chunked_prefill_steps(r["prompt_tokens"], r["max_num_batched_tokens"], r["decoders"]),
        where=lambda r: r["part"] == "steps",
    )


@core.claim
def decoders_never_stall(receipt: core.Receipt) -> core.ClaimResult:
    rows = [r for r in _rows(receipt, "steps") if r["decoders"] > 0]
    wrong = [
        f"C {r['chunk']}: {r['decoder_tokens_min']}-{r['decoder_tokens_max']} tokens in {r['first_token_step']} steps"
        for r in rows
        if not r["decoder_tokens_min"] == r["decoder_tokens_max"] == r["first_token_step"]
    ]
    statement = "while the long prompt is prefilled every running decoder gets exactly one token per step"
    if not rows:
        return core.ClaimResult("decoders_never_stall", statement, None, "no row with decoders")
    return core.ClaimResult(
        "decoders_never_stall",
        statement,
        not wrong,
        "; ".join(wrong)
        or "; ".join(f"C {r['chunk']}: {r['first_token_step']} of {r['first_token_step']}" for r in rows),
    )


@core.claim
def requests_exact(receipt: core.Receipt) -> core.ClaimResult:
    rows = receipt["results"]
    wrong = [f"{r['part']} {r['chunk']}/{r['prompt_tokens']}: {r['requests_exact']} of {r['requests']}" for r in rows]
    bad = [w for w, r in zip(wrong, rows, strict=True) if r["requests_exact"] != r["requests"]]
    return core.ClaimResult(
        "requests_exact",
        "every request produced exactly its max_tokens tokens (on the server: every stream carried them, the "
        "long prompt's first token included, and ended for length)",
        not bad,
        "; ".join(bad) or f"all {sum(r['requests'] for r in receipt['results'])} requests",
    )


@core.claim
def histogram_tokens_exact(receipt: core.Receipt) -> core.ClaimResult:
    details, ok = [], True
    for r in receipt["results"]:
        want = expected_histogram_tokens(r, receipt["settings"])
        ok &= r["histogram_tokens"] == want
        details.append(f"{r['part']} {r['chunk']}/{r['prompt_tokens']}: {r['histogram_tokens']} (expected {want})")
    return core.ClaimResult(
        "histogram_tokens_exact",
        "vllm:iteration_tokens_total grows by the prompt tokens computed plus the tokens generated, to the "
        "token (tokens a connector loaded are not computed)",
        ok,
        "; ".join(details),
    )


@core.claim
def connector_bytes_exact(receipt: core.Receipt) -> core.ClaimResult:
    rows = _rows(receipt, "pd")
    statement = (
        "the kv_producer instance's ExampleConnector writes floor((P - 1) / z) z tokens x kappa bytes of KV; the "
        "kv_consumer instance writes none and loads floor((P - 2) / z) z tokens (num_cached_tokens and "
        "vllm:external_prefix_cache_hits)"
    )
    if not rows:
        return core.ClaimResult("connector_bytes_exact", statement, None, "no pd row")
    details, ok = [], True
    for r in rows:
        z, p = r["block_size"], r["prompt_tokens"]
        want_bytes, want_loaded = stored_tokens(p, z) * r["kv_bytes_per_token"], loaded_tokens(p, z)
        ok &= r["kv_bytes_written"] == want_bytes and r["kv_bytes_consumer"] == 0
        ok &= r["cached_tokens"] == r["external_hits"] == want_loaded
        details.append(
            f"P {p}, z {z}: producer {r['kv_bytes_written']:,} B (expected {want_bytes:,}), consumer "
            f"{r['kv_bytes_consumer']:,} B (expected 0), loaded {r['cached_tokens']}/{r['external_hits']} "
            f"(expected {want_loaded})"
        )
    return core.ClaimResult("connector_bytes_exact", statement, ok, "; ".join(details))


def _gap_rows(receipt: core.Receipt) -> list:
    """Steps and serve rows with decoders: the rows whose gaps the lesson compares."""
    return [r for r in receipt["results"] if r["part"] in ("steps", "serve") and r["decoders"] > 0]


@core.gpu_timing
def chunking_shortens_the_gap(receipt: core.Receipt) -> core.ClaimResult:
    statement = "with decoders running, every chunked setting's longest decoder gap is shorter than unchunked"
    details, ok = [], True
    for part in ("steps", "serve"):
        rows = [r for r in _gap_rows(receipt) if r["part"] == part]
        off = [r for r in rows if r["chunk"] == "off"]
        if not off or len(off) == len(rows):
            continue
        ok &= all(r["max_gap_ms"] < off[0]["max_gap_ms"] for r in rows if r["chunk"] != "off")
        details.append(f"{part}: " + ", ".join(f"C {r['chunk']} {r['max_gap_ms']:.1f} ms" for r in rows))
    if not details:
        return core.ClaimResult("chunking_shortens_the_gap", statement, None, "needs an 'off' row and a chunked row")
    return core.ClaimResult("chunking_shortens_the_gap", statement, ok, "; ".join(details))


@core.gpu_timing
def unchunked_gap_above_floor(receipt: core.Receipt) -> core.ClaimResult:
    facts, config = gpu(LAB_GPU), model(COURSE_MODEL).config
    rows = [r for r in _gap_rows(receipt) if r["chunk"] == "off"]
    statement = f"unchunked, the longest decoder gap is at least the prompt's prefill floor on the {LAB_GPU}"
    if not rows or receipt["model"] != COURSE_MODEL:
        return core.ClaimResult("unchunked_gap_above_floor", statement, None, f"needs an 'off' row of {COURSE_MODEL}")
    floor_ms = [prefill_floor(facts, config, r["prompt_tokens"]) * 1e3 for r in rows]
    return core.ClaimResult(
        "unchunked_gap_above_floor",
        statement,
        all(r["max_gap_ms"] >= f for r, f in zip(rows, floor_ms, strict=True)),
        "; ".join(
            f"{r['part']} P {r['prompt_tokens']}: {r['max_gap_ms']:.1f} vs floor {f:.1f} ms"
            for r, f in zip(rows, floor_ms, strict=True)
        ),
    )


def prediction(gpu_name: str = LAB_GPU, model_name: str = COURSE_MODEL) -> str:
    """Markdown: per chunk setting, the long prompt's steps, its TTFT floor and the longest gap floor
    beside D decoders on ``gpu_name`` (the steps and serve parts); the pd pair's bytes with blocks of 16."""
    facts, config = gpu(gpu_name), model(model_name).config
    kappa = kv_bytes_per_token(config, 2)
    lines = [
        f"{model_name} in BF16 on the {gpu_name}: a {fmt.count(LAB.LONG_PROMPT)}-token prompt arrives beside "
        f"{LAB.DECODERS} decoders. Steps are exact; the floors are `roofline.chunked_prefill_floors` with chunks of "
        "C - D (they leave out the decoders' own tokens and KV reads, so real steps run above them). The serve "
        "part's gaps add the server's own time per step to the same floors.",
        "",
        "| chunk C | steps to first token | TTFT floor (ms) | longest gap floor (ms) |",
        "|---|---:|---:|---:|",
    ]
    for chunk in LAB.CHUNKS:
        budget = LAB.MAX_MODEL_LEN if chunk == "off" else int(chunk)
        room = budget - LAB.DECODERS
        steps = chunked_prefill_steps(LAB.LONG_PROMPT, budget, LAB.DECODERS)
        floors = chunked_prefill_floors(facts, config, LAB.LONG_PROMPT, min(room, LAB.LONG_PROMPT))
        lines.append(f"| {chunk} | {steps} | {fmt.fixed(sum(floors) * 1e3, 1)} | {fmt.fixed(max(floors) * 1e3, 1)} |")
    z = VLLM_DEFAULT_BLOCK_SIZE
    lines += [
        "",
        f"The pd pair ({fmt.count(LAB.PD_PROMPT)} tokens, blocks of {z}): the producer stores "
        f"{fmt.count(stored_tokens(LAB.PD_PROMPT, z))} tokens, "
        f"{fmt.count(stored_tokens(LAB.PD_PROMPT, z) * kappa)} B; the consumer writes nothing and loads "
        f"{fmt.count(loaded_tokens(LAB.PD_PROMPT, z))}.",
    ]
    return "\n".join(lines)


def demands(gpu_name: str = LAB_GPU, model_name: str = COURSE_MODEL) -> list[Demand]:
    """What each TTFT floor of :func:`prediction` (the long prompt, per chunk setting) asks of ``gpu_name``."""
    facts, config = gpu(gpu_name), model(model_name).config
    out = []
    for chunk in LAB.CHUNKS:
        room = (LAB.MAX_MODEL_LEN if chunk == "off" else int(chunk)) - LAB.DECODERS
        ttft = sum(chunked_prefill_floors(facts, config, LAB.LONG_PROMPT, min(room, LAB.LONG_PROMPT)))
        out.append(prefill_demand(facts, config, LAB.LONG_PROMPT, ttft, f"chunked_prefill: TTFT floor, chunk {chunk}"))
    return out


# --- the notebook's exercises ----------------------------------------------------------------------

STEPS_PROMPT, STEPS_DECODERS, STEPS_BUDGET = 2000, 16, 512
"""Exercise 1: a prompt (tokens), the decoders running beside it, and the token budget per step."""
GAP_PROMPT, GAP_CHUNK = 16384, 2048
"""Exercise 2: a long prompt and the chunk it is prefilled in (tokens)."""
PD_PROMPT = 320
"""Exercise 3: a prompt a disaggregated prefill instance stores for the decode instance (tokens)."""


def _longest_chunk_ms() -> float:
    return max(chunked_prefill_floors(gpu(LAB_GPU), model(COURSE_MODEL).config, GAP_PROMPT, GAP_CHUNK)) * 1e3


EXERCISES = (
    Exercise(
        f"A {STEPS_PROMPT:,}-token prompt arrives beside {STEPS_DECODERS} running decoders; "
        f"`max_num_batched_tokens` = {STEPS_BUDGET}. How many engine steps until its first token?",
        lambda: chunked_prefill_steps(STEPS_PROMPT, STEPS_BUDGET, STEPS_DECODERS),
        "steps",
        "The decoders take one token each first and the prompt the rest of the budget: ceil(P / (C − D)) steps, "
        "the last one sampling its first token (lesson 4B; the lab counts it: `first_token_steps_exact`).",
    ),
    Exercise(
        f"On the {LAB_GPU}, a {GAP_PROMPT:,}-token prompt prefilled in chunks of {GAP_CHUNK:,}: the floor of the "
        "longest step (its chunks alone), the longest a decoder beside it waits for its next token?",
        _longest_chunk_ms,
        "ms",
        "Each chunk multiplies every weight by its C tokens, and its attention computes against all the cached "
        "prefix: the last full chunk is the longest. Unchunked, the decoder would wait the whole prefill (lesson 4B).",
        rel_tol=0.05,
    ),
    Exercise(
        f"Disaggregated: the prefill instance stores a {PD_PROMPT}-token prompt's KV through vLLM's ExampleConnector "
        f"(blocks of {VLLM_DEFAULT_BLOCK_SIZE}). How many tokens' worth does it write?",
        lambda: stored_tokens(PD_PROMPT, VLLM_DEFAULT_BLOCK_SIZE),
        "tokens",
        "Whole blocks only, of the prompt less its last token, which the decode instance computes again for its "
        "logits: floor((P − 1) / z) × z (lesson 4B; the lab checks the bytes: `connector_bytes_exact`).",
    ),
)


SPEC = core.lab_spec(
    __name__,
    key=("part", "chunk", "decoders", "prompt_tokens"),
    header="1st-token step",
    columns=(
        core.Column("part", "part", str),
        core.Column("chunk", "chunk", str),
        core.Column.count("decoders", "D"),
        core.Column.count("prompt_tokens", "prompt"),
        core.Column("first_token_step", "steps", lambda v: "-" if v is None else fmt.count(v)),
        core.Column("max_gap_ms", "max gap (ms)", lambda v: "-" if v is None else fmt.fixed(v, 1)),
        core.Column("ttft_ms", "TTFT (ms)", lambda v: "-" if v is None else fmt.fixed(v, 1)),
    ),
    # CPU: the steps engine at C = 64, a server at 64 (a server start costs about two engine starts there, so the
    # 'off' server runs on GPUs only), and the pd pair; 310 = 4 x 64 + 54 -> 5 steps alone, 6 beside 4 decoders
    # (ceil(310 / 60)); 300 - 1 and 300 - 2 are not multiples of the CPU block of 128
    cpu_max_model_len=512,
    cpu_args=(
        *("--chunks", "64", "--serve-chunks", "64", "--alone", "64,65,310", "--long-prompt", "310"),
        *("--decoders", "4", "--decoder-prompt", "8", "--decode-tokens", "16", "--pd-prompt", "300"),
    ),
    work=core.LabWork(  # per setting an engine (steps) and a server (serve), then the pd producer and consumer
        engines=2 * len(LAB.CHUNKS) + 2,
        decode_steps=2 * len(LAB.CHUNKS) * LAB.DECODE_TOKENS,
        peak_kv_tokens=LAB.MAX_MODEL_LEN,
    ),
)
