"""Lesson 1B: the score matrix, the bytes of naive and tiled attention, decode blocks, vLLM's backend per card,
the floors of the lab and the snippet, by hand.

Qwen2.5-7B: d_h = 3,584 / 28 = 128, 28 query heads, 4 key/value heads, 28 layers; BF16 (2 B). At S = 32,768:
- one head's scores: 32,768^2 x 2 = 2,147,483,648 B; a layer's 28 heads: 60,129,542,144 B, 2.3345 x the RTX
  4090's 24,564 MiB as CUDA reports it (25,757,220,864 B);
- naive / tiled (upper bound), with B_r = d_h = 128: (4 S 128 + 4 S^2) / (2 S 128 + 2 S 128 S / 128) =
  (512 S + 4 S^2) / (256 S + 2 S^2) = 2 at every S; naive / (4 S d_h b) = 1 + S / d_h = 257;
- one head's K and V: 2 x 32,768 x 128 x 2 = 16,777,216 B; query tiles: 32,768 / 128 = 256.
Decode: 4 FLOPs per (query head, key, element) against 2 h_kv d_h b bytes per key: 2 x 28 / (4 x 2) = 7 FLOP/B.
Blocks at B = 1: 1 x 4 = 4 for 128 SMs (3.125 %); ceil(128 / 4) = 32 splits, 1,024 keys each; the H200's 132
SMs: ceil(132 / 4) = 33. Block tables: 32,768 / 16 = 2,048 entries.
The lab's floors (4 sequences, mean context S + 16) are tests/labs/test_attention_backends.py's: 14.2657 ms at
1,024, 17.7609 ms at 16,384, 15.8950 ms with an FP8 cache; the cache is 3,761,766,400 / 17,903,004,672 =
21.01 % of the longest step's bytes; the FP8 cache saves 1 - 15.8950 / 17.7609 = 10.51 %.
"""

from __future__ import annotations

import numpy as np
import pytest

from infercourse import figures, registry, snippets, transformer
from infercourse.pages import values_for

PAGE = "lessons/1b-attention-kernels.md"


def _v(name: str):
    return values_for(PAGE)[name].value


def test_the_score_matrix_and_the_bytes():
    assert (_v("score_head"), _v("score_layer")) == (2_147_483_648, 60_129_542_144)
    assert _v("score_layer_over_card") == pytest.approx(60_129_542_144 / 25_757_220_864)
    assert _v("naive_over_tiled") == 2 and _v("naive_over_once") == 257
    assert (_v("kv_head_long"), _v("tiles_long")) == (16_777_216, 256)
    assert [r["ratio"] for r in _v("bytes_rows")] == [2, 2, 2, 2]


def test_decode_blocks_and_splits():
    assert _v("att_intensity") == 7
    assert (_v("blocks_1"), _v("busy_1"), _v("splits_4090"), _v("split_keys")) == (4, 0.03125, 32, 1024)
    assert (_v("splits_h200"), _v("table_entries_long"), _v("max_splits")) == (33, 2048, 32)


def test_the_backend_vllm_runs_per_card():
    # vLLM 0.26.0: FLASH_ATTN first; FlashAttention 2 on 8.9 stores no FP8 cache (FLASHINFER does); FlashAttention
    # 3 on 9.0 does; a forced backend that does not accept is refused
    assert [(c["run"], c["r4090"], c["rh200"]) for c in _v("choices")] == [
        ("`default:auto`", "FLASH_ATTN", "FLASH_ATTN"),
        ("`default:fp8`", "FLASHINFER", "FLASH_ATTN"),
        ("`FLASH_ATTN:fp8`", "refused", "FLASH_ATTN"),
    ]


def test_the_lab_floors():
    assert (_v("floor_short"), _v("floor_long"), _v("floor_long_fp8")) == pytest.approx(
        (14.2657e-3, 17.7609e-3, 15.8950e-3), abs=1e-7
    )
    assert _v("kv_share_long") == pytest.approx(0.21012, abs=1e-5)
    assert _v("fp8_saving_long") == pytest.approx(0.10505, abs=1e-4)


def test_the_snippet_is_exact_and_its_constants_are_the_registry_s(monkeypatch):
    ak = snippets.load("lesson_1b/attention_kernels.py")
    tiled, split = ak.check()
    assert tiled < 1e-12 and split < 1e-12  # float64 round-off, not an approximation
    cfg = registry.model(registry.COURSE_MODEL).config
    assert transformer.head_dim(cfg) == ak.HEAD_DIM
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"]) == (ak.QUERY_HEADS, ak.KV_HEADS)
    assert registry.SM_COUNT["RTX 4090"] == ak.SMS

    # a planted slip: an online step that forgets to rescale what it summed under the old maximum
    def no_rescale(m, denom, acc, q, k_tile, v_tile):
        s = q @ k_tile.T / q.shape[1] ** 0.5
        m_new = np.maximum(m, s.max(axis=1))
        p = np.exp(s - m_new[:, None])
        return m_new, denom + p.sum(axis=1), acc + p @ v_tile

    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((300, 128)) * 3 for _ in range(3))
    monkeypatch.setattr(ak, "online_step", no_rescale)
    assert abs(ak.tiled_attention(q, k, v) - ak.naive_attention(q, k, v)).max() > 1e-3
    monkeypatch.undo()
    svg = figures.plot_svg(ak.plot, salt="test")
    assert svg.startswith("<svg") and "naive" in svg


def test_the_snippet_s_byte_counts_are_the_formula_module_s():
    """The standalone snippet and roofline.attention_kernel_bytes (the calculator's) count the same bytes."""
    from infercourse import roofline

    ak = snippets.load("lesson_1b/attention_kernels.py")
    for s in (1, 127, 128, 129, 1000, 32768):
        want = roofline.attention_kernel_bytes(s, ak.HEAD_DIM, ak.BYTES, ak.TILE)
        assert (ak.naive_bytes(s), ak.tiled_bytes(s)) == (want["naive"], want["tiled"]), s
