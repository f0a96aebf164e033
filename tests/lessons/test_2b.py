"""Lesson 2B: the step beyond its floor, launches, W*, vLLM's CUDA-graph sizes and the snippet, by hand.

Floors by hand (RTX 4090: 1,008 GB/s, 165.2 TFLOP/s; BF16; context 1,024 tokens; tests/lessons/test_6a.py
works them out): Qwen2.5-7B tau = 14.08726 ms, Qwen2.5-0.5B tau = 0.99271 ms; ratio 14.191.
Launches (10 kernels per layer, 6 outside, 4-6 µs each): 7B 10 * 28 + 6 = 286 -> 1.144-1.716 ms;
0.5B 10 * 24 + 6 = 246 -> 0.984-1.476 ms.
"""

from __future__ import annotations

import pytest

from infercourse import registry, roofline, snippets
from infercourse.pages import values_for

PAGE = "lessons/2b-launch-overhead.md"


def _v(name: str):
    return values_for(PAGE)[name].value


def test_the_floors_and_the_launches():
    assert _v("tau_7b") == pytest.approx(14.08726e-3, rel=1e-5)
    assert _v("tau_05b") == pytest.approx(0.99271e-3, rel=1e-4)
    assert (_v("kernels_7b"), _v("kernels_05b")) == (286, 246)
    assert (_v("launch_7b_lo"), _v("launch_7b_hi")) == pytest.approx((1.144e-3, 1.716e-3))
    assert (_v("launch_05b_lo"), _v("launch_05b_hi")) == pytest.approx((0.984e-3, 1.476e-3))
    # GPU time per kernel: 14.08726 ms / 286 = 49.26 µs (launches hide); 0.99271 ms / 246 = 4.035 µs (they do not)
    assert _v("per_kernel_7b") == pytest.approx(49.256e-6, rel=1e-4)
    assert _v("per_kernel_05b") == pytest.approx(4.0354e-6, rel=1e-4)
    assert (_v("hide_lo"), _v("hide_hi")) == pytest.approx((49.256 / 6, 49.256 / 4), rel=1e-4)  # 8.2 to 12.3
    # the GPU's part of an eager step is max(tau, launches): 7B 14.08726 ms; 0.5B max(0.99271, 1.476) = 1.476 ms
    # or max(0.99271, 0.984) = 0.99271 ms: ratio 14.08726 / 1.476 = 9.5442 to 14.08726 / 0.99271 = 14.191
    assert (_v("eager_ratio_lo"), _v("eager_ratio_hi")) == pytest.approx((9.5442, 14.191), rel=1e-4)
    # with 1 ms of CPU work a step on both: 15.08726 / 2.476 = 6.0934; 15.08726 / 1.99271 = 7.5713
    assert (_v("cpu_ratio_lo"), _v("cpu_ratio_hi")) == pytest.approx((6.0934, 7.5713), rel=1e-4)


def test_the_band_for_a_decode_step():
    # tau_0: fast end 6 launches x 4 µs = 0.024 ms (graphs); slow end 286 x 6 µs = 1.716 ms (every launch)
    assert roofline.overhead_band_s(28) == pytest.approx((0.024e-3, 1.716e-3))
    assert (_v("tau0_7b_lo"), _v("tau0_7b_hi")) == pytest.approx((0.024e-3, 1.716e-3))
    # step: floor + 0.024 ms to floor / 0.81 + slow tau_0; a 10 ms floor of a 28-layer model:
    # 10.024 ms to 10 / 0.81 + 1.716 = 12.3457 + 1.716 = 14.0617 ms
    assert roofline.step_band(10e-3, 28) == pytest.approx((10.024e-3, 14.0617e-3), rel=1e-5)
    rows = {(row["model"], row["card"]): row for row in _v("band_rows")}
    # the 0.5B on the H200: floor 2 * 494,032,768 B / 4.8e12 B/s = 0.20585 ms plus its cache (1,024 tokens x
    # 12,288 B / 4.8e12 = 0.00262 ms) = 0.20847 ms; slow end 0.20847 / 0.81 + 246 x 6 µs = 0.25737 + 1.476
    assert rows[("0.5B", "H200 SXM")]["hi"] == pytest.approx(1.73337e-3, rel=1e-4)
    # the 7B on the RTX 4090: 14.08726 ms -> 14.11126 to 14.08726 / 0.81 + 1.716 = 19.10768 ms
    assert (rows[("7B", "RTX 4090")]["lo"], rows[("7B", "RTX 4090")]["hi"]) == (
        pytest.approx((14.11126e-3, 19.10768e-3), rel=1e-5)
    )
    with pytest.raises(ValueError, match="floor_s"):
        roofline.step_band(0, 28)


def test_w_star_is_tau0_times_the_bandwidth():
    # 1 ms x 1,008 GB/s = 1.008 GB (504 million BF16 weights); 1 ms x 4,800 GB/s = 4.8 GB
    assert _v("wstar_4090") == pytest.approx(1.008e9) and _v("wstar_params_4090") == pytest.approx(504e6)
    assert _v("wstar_h200") == pytest.approx(4.8e9)
    assert _v("M_05b_bytes") == 2 * 494_032_768  # the 0.5B's tied head counted once: under W* everywhere
    with pytest.raises(ValueError, match="overhead_s"):
        roofline.overhead_bound_bytes(registry.gpu("H200"), 0)


def test_vllm_capture_sizes_and_padding():
    # LLM(...) on an RTX 4090: max_num_seqs 256, max_num_batched_tokens 8,192 -> largest min(512, 512, 8192) = 512;
    # 1, 2, 4 (3 sizes) + 8..248 by 8 (31) + 256..512 by 16 (17) = 51
    sizes = roofline.cudagraph_capture_sizes(256, 8192)
    assert (_v("n_sizes"), _v("largest_size"), len(sizes)) == (51, 512, 51)
    assert sizes[:6] == [1, 2, 4, 8, 16, 24] and sizes[-2:] == [496, 512]
    assert (_v("B_pad_ex"), _v("padded_ex"), _v("padding_ex")) == (9, 16, 7)
    rows = {row["batch"]: row for row in _v("pad_rows")}
    # padded rows add matmul work, no cache: at B = 9 -> 16 the matmuls are still weight-bound (2 M 16 / P =
    # 1.37 ms < M b / beta = 14.03 ms), so the floor does not move
    assert rows[9]["pad_floor"] == pytest.approx(rows[9]["floor"], rel=1e-12)
    # at B = 201 -> 208 they are compute-bound (B* = 164): the matmul floor grows by 2 M 7 / P
    # = 2 * 7,070,619,136 * 7 / 165.2e12 = 0.5992 ms; 250 -> 256 by 2 M 6 / P = 0.5136 ms
    assert rows[201]["padded"] == 208 and rows[250]["padded"] == 256 and _v("bstar_4090") == pytest.approx(163.89, 1e-4)
    assert rows[201]["pad_floor"] - rows[201]["floor"] == pytest.approx(0.5992e-3, rel=1e-3)
    assert rows[250]["pad_floor"] - rows[250]["floor"] == pytest.approx(0.5136e-3, rel=1e-3)
    assert roofline.cudagraph_padded_size(300, sizes) == 304 and roofline.cudagraph_padded_size(513, sizes) is None
    # max_num_seqs 64: largest min(128, 512, 8192) = 128; a batch of 50 runs at 56
    assert (_v("prob_largest"), _v("prob_padded")) == (128, 56)
    # max_num_batched_tokens 100 under 2 x 64: the largest is 100, added off the stride of 8
    assert roofline.cudagraph_capture_sizes(64, 100)[-3:] == [88, 96, 100]
    # one speculative token doubles the decode query: min(2 x 8 x 2, 512, 8192) = 32
    assert roofline.cudagraph_capture_sizes(8, 8192, speculative_tokens=1)[-1] == 32
    with pytest.raises(ValueError, match="enforce_eager"):
        roofline.cudagraph_padded_size(3, [])
    with pytest.raises(ValueError, match="layers"):
        roofline.launch_overhead_s(0, 5e-6)


def test_the_problems():
    assert _v("prob_tau0") == pytest.approx(2.2e-3 - 0.99271e-3, rel=1e-4)  # 1.207 ms
    assert _v("prob_half_floor") == pytest.approx(0.99271e-3 / 2, rel=1e-4)  # under the 0.984 ms of launches


def test_the_cpu_receipt_is_on_the_page():
    table = _v("cpu_table")
    assert "Measured (committed CPU receipt)" in table and "L1xW1" in table and "L8xW4" in table
    assert _v("tau0_cpu") > 0 and _v("ratio_small") > _v("ratio_large")  # what the CPU receipt showed


def test_the_snippet_s_constants_are_the_registry_s():
    mod = snippets.load("lesson_2b/step_regimes.py")
    for name, short in (("Qwen/Qwen2.5-0.5B-Instruct", "Qwen2.5-0.5B"), ("Qwen/Qwen2.5-7B-Instruct", "Qwen2.5-7B")):
        cfg = registry.model(name).config
        assert mod.MODELS[short] == (roofline.matmul_params(cfg), cfg["num_hidden_layers"])
    assert registry.gpu("RTX 4090").bandwidth_gb_s == mod.BANDWIDTH_GB_S
    assert registry.KERNEL_LAUNCH_US[0] <= mod.LAUNCH_US <= registry.KERNEL_LAUNCH_US[1]
    assert (mod.KERNELS_PER_LAYER, mod.KERNELS_OUTSIDE) == (registry.KERNELS_PER_LAYER, registry.KERNELS_OUTSIDE_LAYERS)
    assert mod.MAX_CAPTURE == registry.CUDAGRAPH_MAX_CAPTURE_SIZE
    assert registry.vllm_scheduler_defaults("RTX 4090") == (mod.MAX_NUM_BATCHED_TOKENS, mod.MAX_NUM_SEQS)
    for seqs, tokens in ((256, 8192), (64, 100), (3, 8192)):
        assert mod.capture_sizes(seqs, tokens) == roofline.cudagraph_capture_sizes(seqs, tokens)
    # the 0.5B: 988,065,536 B / 1.008e12 = 0.980 ms < its 246 launches x 5 µs = 1.23 ms: overhead-bound
    assert [row[3] for row in mod.regimes()] == ["overhead", "memory"]


@pytest.mark.build
def test_lesson_2b_built_page_shows_the_snippet_s_tables_and_the_cpu_receipt(site):
    """On the built page: the exec block's output (the 0.5B overhead-bound at 5 µs a launch: 246 x 5 µs =
    1.23 ms against 988,065,536 B / 1.008e12 = 0.98 ms), and the committed CPU receipt's table."""
    import html
    import re

    page = (site / "lessons" / "2b-launch-overhead" / "index.html").read_text("utf-8")
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())
    assert "Qwen2.5-0.5B 0.98 1.23 overhead" in text and "Qwen2.5-7B 14.03 1.43 memory" in text
    assert "51 captured sizes, 1 to 512 tokens per step" in text
    assert "Measured (committed CPU receipt)" in text and "L8xW4" in text
