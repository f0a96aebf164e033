"""Values of lesson 0B (serving metrics): the worked example's figures, the floors behind the lab's prediction."""

from __future__ import annotations

from infercourse import fmt, notation, registry, roofline, snippets, transformer
from infercourse.pages import lesson_values

P = lesson_values(__name__)

qwen = registry.model(registry.COURSE_MODEL)
cfg = qwen.config
N = transformer.param_count(cfg)
kappa = transformer.kv_bytes_per_token(cfg, 2)
g = P.add("g", registry.gpu(registry.LAB_GPU), "record")
M = P.add("M", roofline.matmul_params(cfg), "params")
H = P.add("H", cfg["vocab_size"] * cfg["hidden_size"], "params")
P.add("prefill_overcount_of_2n", 2 * H / N, "1")
P.add("prefill_overcount_of_exact", 2 * H / (N - 2 * H), "1")
floor_context = P.add("floor_context", 128, "tokens")  # the context of the TPOT floor the page quotes
tpot_floor_128 = P.add("tpot_floor_128", roofline.decode_step_floor(g, cfg, floor_context), "s")
P.add_band("tpot_band", roofline.step_band(tpot_floor_128, cfg["num_hidden_layers"]), "s")  # where a step lands

# The worked example of section 4 (snippets/lesson_0b/latency_metrics.py, times in ms).
lm = snippets.load("lesson_0b/latency_metrics.py")
A, B, C = lm.MIXED
P.add("mix", lm.summary(lm.MIXED), "record")
P.add("same", lm.summary(lm.SAME_LENGTH), "record")
P.add("a_tokens", len(A.token_ms), "tokens")
P.add("a_gap", lm.itls(A)[0], "ms")
P.add("b_tokens", len(B.token_ms), "tokens")
P.add("b_gap", lm.itls(B)[0], "ms")
P.add("a_gaps", len(lm.itls(A)), "count")
P.add("b_gaps", len(lm.itls(B)), "count")
P.add("all_gaps", sum(len(lm.itls(r)) for r in lm.MIXED), "count")
P.add("b_tpot", lm.tpot(B), "ms")
P.add("same_tokens", len(lm.SAME_LENGTH[0].token_ms), "tokens")
P.add("slo_ttft", lm.SLO_TTFT_MS, "ms")
P.add("slo_tpot", lm.SLO_TPOT_MS, "ms")
P.add("c_arrival", C.arrival_ms, "ms")
P.add("c_tokens_ms", list(C.token_ms), "record")
P.add("c_first", C.token_ms[0], "ms")
P.add("c_last", C.token_ms[-1], "ms")
P.add("c_gaps", len(C.token_ms) - 1, "count")
P.add("c_ttft", lm.ttft(C), "ms")
P.add("c_tpot", lm.tpot(C), "ms")
P.add("c_e2e", lm.e2e(C), "ms")

# Self-check 4: a change that raises throughput and the p99 TPOT (made-up figures, requests/s and ms).
MADE_UP = "a made-up server's rate in a self-check about metrics: no model or card behind it"
old_rate = P.add("q4_old_rate", 4, "requests/s", MADE_UP)
new_rate = P.add("q4_new_rate", 6, "requests/s", MADE_UP)
P.add("q4_old_p99", 40, "ms")
P.add("q4_new_p99", 70, "ms")
P.add("q4_slo", 50, "ms")
P.add("q4_old_low", old_rate * 0.99, "requests/s", MADE_UP)
P.add("q4_new_high", new_rate * 0.99, "requests/s", MADE_UP)
P.add("q4_break_even_miss", 1 - old_rate / new_rate, "1")


SYMBOLS: list[notation.Symbol] = [
    "n_req",
    "r",
    "a",
    "t",
    "n",
    "g",
    "T",
    "p",
    "c",
    ("V", f"Here {fmt.count(cfg['vocab_size'])}."),
    ("d", f"Here {fmt.count(cfg['hidden_size'])}."),
    ("H", f"Here {fmt.count(H)}."),
    ("M", f"Here {fmt.count(M)}."),
]
P.symbols(SYMBOLS)

P.facts(
    "vllm-bench-latency-prefix-caching",
    "vllm-bench-serve-itl-per-chunk",
    "vllm-bench-serve-result-keys",
    "vllm-itl-histogram",
    "vllm-startup-compile-and-graphs",
    "vllm-int-suffixes",
    extra=(
        {
            "what": "`RequestOutput.metrics` fields, `vllm bench` flags",
            "value": "as quoted",
            "source": f"vLLM {registry.VLLM_GPU_VERSION}'s API surface, extracted by `scripts/vllm_signatures.py` "
            "(ADR-0004)",
        },
    ),
)
