"""Lesson 0A: the page's headline values and the snippets' constants, against hand arithmetic."""

from __future__ import annotations

import pytest

from infercourse import registry, transformer
from infercourse.pages import values_for
from infercourse.snippets import load

# --- Headline values against hand arithmetic -------------------------------------------------------
# Qwen2.5-7B-Instruct config: L = 28, d = 3584, h = 28, h_kv = 4, d_h = 128, f = 18944, V = 152064, untied.
# N = 2*V*d + 28*(3584*3584*2 + 2*3584*512 + 3584 + 2*512 + 3*3584*18944 + 2*3584) + 3584
#   = 1,089,994,752 + 28*(25,690,112 + 3,670,016 + 4,608 + 203,685,888 + 7,168) + 3,584 = 7,615,616,512.
N_QWEN = 7_615_616_512
KAPPA = 2 * 28 * 4 * 128 * 2  # 57,344 B per token
M_QWEN = N_QWEN - 152064 * 3584  # 7,070,619,136: all but the input embedding


def _v(page: str, name: str):
    return values_for(page)[name].value


def test_lesson_0a_headline_values():
    page = "lessons/0a-prefill-decode.md"
    assert _v(page, "kappa") == KAPPA
    assert _v(page, "crossover") == pytest.approx(N_QWEN * 2 / KAPPA)  # 265,611.6 tokens
    # decode at 1,024 tokens: 2N / (2N + 1024 kappa) = 15,231,233,024 / 15,289,953,280 = 0.99616
    assert _v(page, "dec1k") == pytest.approx(0.99616, abs=1e-5)
    # with attention: (2N + 4*28*28*128*8192) / (2N + 8192 kappa) = 18,519,384,064 / 15,700,995,072 = 1.1795
    assert _v(page, "dec_att_8k") == pytest.approx(1.1795, abs=1e-4)
    # decode floor at S = 1: M*2 B / 1008e9 B/s = 14,141,238,272 / 1.008e12 = 14.029 ms (+ 57 KB of cache, 0.06 us)
    assert _v(page, "matmul_bytes") == 2 * M_QWEN
    assert _v(page, "tpot_floor_1") == pytest.approx(14.029e-3, abs=1e-6)
    # lesson 2B's band: 14.029 + 0.024 = 14.053 ms to 14.029 / 0.81 + 286 x 6 µs = 17.320 + 1.716 = 19.036 ms
    assert (_v(page, "tpot_band_lo"), _v(page, "tpot_band_hi")) == pytest.approx((14.053e-3, 19.036e-3), abs=1e-6)
    # all weights: 15,231,233,024 / 1.008e12 = 15.110 ms
    assert _v(page, "all_weights_time") == pytest.approx(15.110e-3, abs=1e-6)
    # the lab box's cache is max_model_len = 8,192 tokens, not the grid's longest request (4,096 + 128)
    assert _v(page, "lab_max_model_len") == 8192 and _v(page, "lab_longest_request") == 4224
    # (15,231,233,024 + 8192 * 57,344 + 2 * 2^30) / 0.92 / 2^30 = 18.08 GiB
    assert "**Minimum VRAM:** 18.1 GiB" in _v(page, "lab_box")


QWEN = registry.model("Qwen/Qwen2.5-7B-Instruct").config


def test_lesson_0a_snippet_constants_equal_the_registry():
    pi = load("lesson_0a/phase_intensity.py")
    kv = load("lesson_0a/kv_growth.py")
    assert transformer.param_count(QWEN) == pi.PARAMS
    assert pi.KV_BYTES_PER_TOKEN == transformer.kv_bytes_per_token(QWEN) == kv.KV_BYTES_PER_TOKEN
    assert pi.WEIGHT_BYTES == 2 == transformer.BYTES_PER_DTYPE[QWEN["torch_dtype"]]
    for short, (tflops, bandwidth) in zip(("RTX 4090", "H200"), pi.GPUS.values(), strict=True):
        g = registry.gpu(short)
        assert (tflops, bandwidth) == (g.bf16_dense_tflops, g.bandwidth_gb_s)
    assert list(pi.GPUS) == [registry.gpu("RTX 4090").name, registry.gpu("H200").name]
