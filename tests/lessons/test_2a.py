"""Lesson 2A: the page's headline values, its figure and the snippet's constants, against hand arithmetic."""

from __future__ import annotations

import math
import re

import pytest

from infercourse import registry, roofline, transformer
from infercourse.pages import values_for
from infercourse.snippets import load


def _v(page: str, name: str):
    return values_for(page)[name].value


def test_lesson_2a_headline_values():
    page = "lessons/2a-roofline.md"
    # the KV budget on the RTX 4090 is lesson 1A's: 6,317,926,522.88 B = 6.32 GB (the page once printed 0.00 GB)
    assert _v(page, "kv_budget") == pytest.approx(6_317_926_522.88)
    # ridge: 165.2e12 / 1008e9 = 163.89 FLOP/B; B* = 163.89 * 2 / 2 = 163.89 -> 164 sequences
    assert _v(page, "r4090") == pytest.approx(163.889, abs=1e-3) and _v(page, "bstar_n") == 164
    # 4,096-token sequences that fit: 6,885 blocks // ceil(4096 / 16) = 6,885 // 256 = 26 (the page once printed 0)
    assert _v(page, "fit_4k") == 26
    # H200: ridge 989e12 / 4800e9 = 206.04, so B* rounds UP to 207
    h200 = next(row for row in _v(page, "capacity_rows") if row["name"] == "H200 SXM")
    assert h200["bstar_n"] == 207 and math.isclose(h200["ridge"], 206.0417, abs_tol=1e-4)
    # floor at B = 1, S = 512: 14.02901 ms of weights + 512 x 57,344 B / 1.008e12 = 0.02913 ms = 14.05813 ms;
    # lesson 2B's band: 14.08213 ms to 14.05813 / 0.81 + 1.716 = 19.07172 ms
    assert (_v(page, "f1"), _v(page, "f1_lo"), _v(page, "f1_hi")) == pytest.approx(
        (14.05813e-3, 14.08213e-3, 19.07172e-3), rel=1e-6
    )
    # vLLM 0.26.0 defaults with LLM(...) on a card under 70 GiB: 8,192 tokens, 256 sequences; from
    # B = 32 the prompts (32 * 512 = 16,384 tokens) exceed 8,192 (B = 16 gives exactly 8,192)
    assert (_v(page, "llm_batched_tokens"), _v(page, "llm_max_seqs")) == (8192, 256)
    assert _v(page, "first_over") == 32
    # the lab (snippets/labs/batch_decode.py): 64 prompts of 512 tokens = 32,768 tokens; it caps
    # max_num_batched_tokens at 8,192, so the largest batch's prefills take 32,768 / 8,192 = 4 steps;
    # its cache need is 64 * (512 + 128) = 40,960 tokens
    assert (_v(page, "lab_all_prompt_tokens"), _v(page, "lab_batched_tokens")) == (32_768, 8_192)
    assert _v(page, "lab_prefill_steps") == 4 and _v(page, "lab_peak_kv_tokens") == 40_960


def test_lesson_2a_figure_rounds_b_star_up():
    """The H200's B* = 989e12 / 4.8e12 * 2 / 2 = 206.04: a whole batch of 207, not 206 (the legend once said 206)."""
    from infercourse import figures, snippets

    svg = figures.plot_svg(snippets.load("lesson_2a/decode_roofline.py").plot, salt="test")
    assert "compute-bound from B = 207" in svg and "compute-bound from B = 206" not in svg
    assert "compute-bound from B = 164" in svg  # RTX 4090: 165.2e12 / 1.008e12 = 163.89 -> 164


@pytest.mark.build
def test_lesson_2a_built_page_shows_the_budget_and_the_count(site):
    """On the built page, not only in the module: 6.32 GB for the cache and 26 sequences of 4,096 tokens
    (6,317,926,522.88 B; 6,885 blocks // 256 blocks per sequence = 26)."""
    import html

    text = html.unescape(re.sub(r"<[^>]+>", "", (site / "lessons" / "2a-roofline" / "index.html").read_text("utf-8")))
    text = " ".join(text.split())
    assert "KV budget on the RTX 4090 6.32 GB" in text
    assert "the card has 6.32 GB for the cache: at most 26 fit" in text
    assert "0.00 GB" not in text


QWEN = registry.model("Qwen/Qwen2.5-7B-Instruct").config


def test_lesson_2a_snippet_constants_equal_the_registry():
    dr = load("lesson_2a/decode_roofline.py")
    assert roofline.matmul_params(QWEN) == dr.MATMUL_PARAMS
    assert transformer.attention_flops_per_token(QWEN, 1) == dr.ATTN_FLOPS_PER_KEY
    assert transformer.kv_bytes_per_token(QWEN) == dr.KV_BYTES_PER_TOKEN
    assert dr.WEIGHT_BYTES == 2
    assert dr.attention_intensity() == roofline.attention_intensity(QWEN)
    for short, (tflops, bandwidth) in zip(("RTX 4090", "H200"), dr.GPUS.values(), strict=True):
        g = registry.gpu(short)
        assert (tflops, bandwidth) == (g.bf16_dense_tflops, g.bandwidth_gb_s)
        assert dr.ridge_point(tflops, bandwidth) == roofline.ridge_point(g)
        assert dr.compute_bound_batch(dr.ridge_point(tflops, bandwidth)) == pytest.approx(
            roofline.compute_bound_batch(g)
        )
        for batch, context in ((1, 512), (64, 576), (256, 4096)):
            assert sum(dr.step_floors(batch, context, tflops, bandwidth)) == pytest.approx(
                roofline.decode_step_floor(g, QWEN, context, batch)
            )
    assert dr.matmul_intensity(20) == 20  # 2 * 20 / 2
