"""Values of lesson 2B (launch overhead and CUDA graphs): the step beyond its floor, the kernels an eager
step launches, where a model turns overhead-bound on each card, vLLM's CUDA-graph capture sizes and their
padding, and the CPU receipt's prediction beside its measurement.

Every number the page shows is bound here once, with its unit, from the registry, the formula modules and
the committed receipts; the page only looks the names up and formats them.
"""

from __future__ import annotations

from infercourse import labbox, registry, roofline, transformer
from infercourse.labs import step_overhead as lab
from infercourse.pages import lesson_values

P = lesson_values(__name__)

cfg = registry.model(registry.COURSE_MODEL).config
DRAFT = "Qwen/Qwen2.5-0.5B-Instruct"
dcfg = registry.model(DRAFT).config
g4090, h200 = P.add_cards()
P.add("draft_model", DRAFT, "text")
ctx = P.add("ctx", 1024, "tokens")  # the context the floors below are taken at

# --- 1. the floor and the step: tau for the 7B and the 0.5B at B = 1 on the RTX 4090 ---
tau_7b = P.add("tau_7b", roofline.decode_step_floor(g4090, cfg, ctx), "s")
tau_05b = P.add("tau_05b", roofline.decode_step_floor(g4090, dcfg, ctx), "s")
P.add("floor_ratio", tau_7b / tau_05b, "1")
P.add("N_7b", transformer.param_count(cfg), "params")
P.add("N_05b", transformer.param_count(dcfg), "params")

# --- 2. what eager mode launches: (K_layer L + K_out) kernels, t_launch each ---
K_layer = P.add("K_layer", registry.KERNELS_PER_LAYER, "count")
K_out = P.add("K_out", registry.KERNELS_OUTSIDE_LAYERS, "count")
t_lo, t_hi = (us * 1e-6 for us in P.add("launch_us", registry.KERNEL_LAUNCH_US, "record"))  # µs, low and high
L_7b = P.add("L_7b", cfg["num_hidden_layers"], "count")
L_05b = P.add("L_05b", dcfg["num_hidden_layers"], "count")
kernels_7b = P.add("kernels_7b", K_layer * L_7b + K_out, "count")
kernels_05b = P.add("kernels_05b", K_layer * L_05b + K_out, "count")
launch_7b = [P.add(f"launch_7b_{e}", roofline.launch_overhead_s(L_7b, t), "s") for e, t in (("lo", t_lo), ("hi", t_hi))]
launch_05b = [
    P.add(f"launch_05b_{e}", roofline.launch_overhead_s(L_05b, t), "s") for e, t in (("lo", t_lo), ("hi", t_hi))
]
# the test for launch-bound: the GPU's mean time per kernel against the CPU's time per launch
P.add("per_kernel_7b", tau_7b / kernels_7b, "s")
P.add("per_kernel_05b", tau_05b / kernels_05b, "s")
P.add("hide_lo", tau_7b / kernels_7b / t_hi, "1")  # the 7B's GPU time per kernel over one launch, low and high
P.add("hide_hi", tau_7b / kernels_7b / t_lo, "1")
# launches run ahead of the GPU, so the GPU's part of an eager step is max(tau, launches); the 7B's over the 0.5B's
ratio_gpu = [tau_7b / max(tau_05b, launch) for launch in (launch_05b[1], launch_05b[0])]
P.add("eager_ratio_lo", ratio_gpu[0], "1")
P.add("eager_ratio_hi", ratio_gpu[1], "1")
tau0 = P.add("tau0", registry.STEP_OVERHEAD_S, "s")  # lesson 4A's assumed per-step CPU work, added to both
P.add("cpu_ratio_lo", (tau_7b + tau0) / (max(tau_05b, launch_05b[1]) + tau0), "1")
P.add("cpu_ratio_hi", (tau_7b + tau0) / (max(tau_05b, launch_05b[0]) + tau0), "1")

# the course's band for a decode step: floor + the graphs' launches, to floor / bandwidth share + every launch
P.add_band("tau0_7b", roofline.overhead_band_s(L_7b), "s")
P.add("bw_share", registry.DECODE_BANDWIDTH_SHARE, "1")


def _band_row(name: str, config, g) -> dict:
    floor = roofline.decode_step_floor(g, config, ctx)
    lo, hi = roofline.step_band(floor, config["num_hidden_layers"])
    return {"model": name, "card": g.name, "floor": floor, "lo": lo, "hi": hi}


P.add(  # short model names: the table must fit a phone's width
    "band_rows",
    [_band_row(name, c, g) for name, c in (("7B", cfg), ("0.5B", dcfg)) for g in (g4090, h200)],
    "record",
)

# --- 3. where overhead wins: W* = tau_0 beta per card, with the course's assumed tau_0 ---
wstar = {key: roofline.overhead_bound_bytes(registry.gpu(key), tau0) for key in registry.GPUS}
P.add("wstar_4090", wstar["RTX 4090"], "B")
P.add("wstar_h200", wstar["H200"], "B")
P.add("wstar_params_4090", wstar["RTX 4090"] / 2, "params")  # BF16: 2 B per weight
P.add(
    "wstar_rows",
    [{"name": registry.gpu(key).name, "wstar": w, "params": w / 2} for key, w in wstar.items()],
    "record",
)
P.add("M_05b_bytes", roofline.matmul_params(dcfg) * 2, "B")

# --- 4. CUDA graphs: the sizes vLLM captures with LLM(...)'s defaults on the RTX 4090, and padding ---
tokens_llm, seqs_llm = registry.vllm_scheduler_defaults("RTX 4090", "LLM")
P.add("llm_max_seqs", seqs_llm, "sequences")
P.add("capture_stride_switch", roofline.CAPTURE_STRIDE_SWITCH, "tokens")
P.add("llm_batched_tokens", tokens_llm, "tokens")
sizes = roofline.cudagraph_capture_sizes(seqs_llm, tokens_llm)
P.add("n_sizes", len(sizes), "count")
P.add("largest_size", sizes[-1], "tokens")
P.add("sizes_head", sizes[:6], "record")
P.add("cap", registry.CUDAGRAPH_MAX_CAPTURE_SIZE, "tokens")
pad_rows = []
for batch in (1, 3, 9, 100, 201, 250):  # decode batches: at most max_num_seqs sequences
    padded = roofline.cudagraph_padded_size(batch, sizes)
    if padded is None:  # a decode batch is at most max_num_seqs, and every size up to 2 x max_num_seqs is captured
        raise ValueError(f"decode batch {batch} has no captured CUDA-graph size in {sizes}")
    linear, attention = roofline.decode_kernel_floors(g4090, cfg, ctx, batch)
    floor = linear + attention
    # a padded row adds matmul work but no cache to read (it has no context): the matmuls at B_pad, attention at B
    pad_floor = roofline.decode_kernel_floors(g4090, cfg, ctx, padded)[0] + attention
    pad_rows.append({"batch": batch, "padded": padded, "floor": floor, "pad_floor": pad_floor})
P.add("pad_rows", pad_rows, "record")
B_pad_ex = P.add("B_pad_ex", 9, "sequences")
padded_ex = P.add("padded_ex", next(row["padded"] for row in pad_rows if row["batch"] == B_pad_ex), "sequences")
P.add("padding_ex", padded_ex - B_pad_ex, "sequences")
P.add("bstar_4090", roofline.compute_bound_batch(g4090), "sequences")
P.add("V", cfg["vocab_size"], "tokens")

# --- problems: a measured draft step, and the capture sizes of a smaller max_num_seqs ---
prob_step = P.add("prob_step", 2.2e-3, "s")  # the problem's given measurement
P.add("prob_tau0", prob_step - tau_05b, "s")
P.add("prob_half_floor", tau_05b / 2, "s")  # the floor with half the bytes: under the launches
prob_seqs = P.add("prob_seqs", 64, "sequences")
prob_sizes = roofline.cudagraph_capture_sizes(prob_seqs, tokens_llm)
P.add("prob_largest", prob_sizes[-1], "tokens")
prob_batch = P.add("prob_batch", 50, "sequences")
P.add("prob_padded", roofline.cudagraph_padded_size(prob_batch, prob_sizes), "sequences")

# the lab box counts the first download of the course model's weights; this lab needs none (random weights)
P.add("download_min", labbox.lab_minutes("step_overhead")["download"], "min")

# --- 5. the CPU receipt: the prediction beside the measurement, on the machine that ran ---
receipt = P.cpu_receipt("step_overhead")
probe = receipt["settings"]["probe"]
P.add("cpu_probe", probe, "record")  # bandwidth_gb_s, matmul_tflops, copy_bytes, matmul_n
fit = lab.fitted_line(receipt)
if fit is None:
    raise ValueError("the committed CPU receipt of step_overhead has fewer than three variants")
tau0_cpu, bw_eff_cpu, r2_cpu = fit
P.add("tau0_cpu", tau0_cpu / 1e3, "s")
P.add("cpu_fit", {"bandwidth_eff_gb_s": bw_eff_cpu, "r2": r2_cpu}, "record")
P.add("eff_share_cpu", bw_eff_cpu / probe["bandwidth_gb_s"], "1")
first = lab.first_rows(receipt)
P.add("ratio_small", first[0]["ratio"], "1")
P.add("ratio_large", first[-1]["ratio"], "1")
P.add("variant_small", first[0]["variant"], "text")
P.add("variant_large", first[-1]["variant"], "text")


# the figure: measured step against bytes per step, with the fitted line and the floors (CPU receipt)
def _fit_plot(ax) -> None:
    xs = [r["step_bytes"] / 1e6 for r in first]
    ax.plot(xs, [r["step_ms"] for r in first], "o", label="measured step")
    ax.plot(xs, [r["floor_ms"] for r in first], "s", label="floor from the probe")
    span = [0, max(xs) * 1.05]
    ax.plot(span, [tau0_cpu + x * 1e6 / (bw_eff_cpu * 1e9) * 1e3 for x in span], "-", label="fitted line")
    for r, x in zip(first, xs, strict=True):
        last = x == max(xs)  # the rightmost label goes to the left of its point, inside the frame
        ax.annotate(
            r["variant"],
            (x, r["step_ms"]),
            textcoords="offset points",
            xytext=(-6 if last else 6, 4),
            ha="right" if last else "left",
            fontsize="small",
        )
    ax.set_xlabel("bytes read per decode step (MB)")
    ax.set_ylabel("ms per decode step")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="upper left")


P.figure("fig_fit", _fit_plot, figsize=(6.4, 3.6))

SYMBOLS: list[str | tuple[str, str]] = [
    "tau",
    ("tau_0", "Lesson 4A uses it too."),
    "beta",
    "P",
    "M",
    "b",
    "B",
    "kappa",
    "c",
    "L",
    "K_layer",
    "K_out",
    "t_launch",
    "W_star",
    "B_pad",
]
P.symbols(SYMBOLS)

P.facts(
    "model-qwen-qwen2-5-0-5b-instruct",
    "gpu-h200",
    "kernel-launch-cost",
    "kernels-per-decode-step",
    "decode-bandwidth-share",
    "step-overhead-assumed",
    "vllm-cudagraph-mode-default",
    "vllm-cudagraph-capture-sizes",
    "vllm-cudagraph-padding",
    "vllm-cudagraph-wraps-forward",
    "vllm-enforce-eager",
    "vllm-scheduler-defaults",
)
