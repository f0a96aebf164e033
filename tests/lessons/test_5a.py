"""Lesson 5A: its formulas, the lesson's snippet and the page's headline values, on values worked by hand.

Cached tokens by hand: C = floor(min(l, P - 1) / z) * z. With the CPU build's blocks of z = 128:
l = 4,000, P = 4,064 -> floor(4000 / 128) = 31 -> 3,968; l = P = 2,048 -> floor(2047 / 128) = 15 -> 1,920.
With vLLM's CUDA blocks of 16: 4,000 = 250 * 16 -> 4,000; 2,047 // 16 = 127 -> 2,032.
"""

from __future__ import annotations

import pytest

from infercourse import memory, snippets
from infercourse.pages import values_for

PAGE = "lessons/5a-paged-attention.md"


def _v(name: str):
    return values_for(PAGE)[name].value


@pytest.mark.parametrize(
    "shared, prompt, block, cached",
    [
        (0, 64, 16, 0),
        (512, 576, 16, 512),
        (4000, 4064, 16, 4000),
        (4000, 4064, 128, 3968),
        (2048, 2048, 16, 2032),
        (2048, 2048, 128, 1920),
        (15, 100, 16, 0),
        (2000, 2064, 16, 2000),
        (1, 1, 16, 0),
    ],
)
def test_cached_prefix_tokens_by_hand(shared, prompt, block, cached):
    assert memory.cached_prefix_tokens(shared, prompt, block) == cached


@pytest.mark.parametrize(
    "args, words",
    [
        ((10, 5, 16), "cannot exceed"),
        ((0, 0, 16), "prompt_tokens"),
        ((1, 4, 0), "block_size"),
        ((True, 4, 16), "shared_tokens"),
        ((1.0, 4, 16), "shared_tokens"),
    ],
)
def test_cached_prefix_tokens_refuses_bad_input(args, words):
    with pytest.raises(ValueError, match=words):
        memory.cached_prefix_tokens(*args)


def test_paging_waste_by_hand():
    # 1,000 tokens: ceil(1000 / 16) = 63 blocks = 1,008 slots, 8 empty; 1,024 fills 64 blocks; 1 token wastes 15
    assert [memory.paging_waste_tokens(s, 16) for s in (1000, 1024, 1, 17)] == [8, 0, 15, 15]
    with pytest.raises(ValueError, match="tokens"):
        memory.paging_waste_tokens(0, 16)


def test_snippet_caches_full_blocks_below_the_prompt_length():
    toy = snippets.load("lesson_5a/prefix_blocks.py")
    assert len(toy.block_hashes(list(range(33)))) == 2  # 33 tokens: two full blocks of 16, the 33rd unhashed
    cache = toy.PrefixCache()
    system, a, b = list(range(1000, 3000)), list(range(64)), list(range(100, 164))
    assert cache.admit(system + a) == 0  # cold
    assert cache.admit(system + b) == 2000  # 2,000 = 125 full blocks shared
    assert cache.admit(system + a) == 2048  # same prompt: floor(2063 / 16) * 16 = 128 * 16
    assert cache.admit([5] + system[1:] + a) == 0  # first token differs: the chain breaks at block 0
    assert (cache.queries, cache.hits) == (4 * 2064, 4048)
    assert toy.blocks_and_waste(300) == (19, 4)  # ceil(300 / 16) = 19 blocks = 304 slots
    cache.reset()
    assert cache.admit(system + a) == 0


# --- the page's headline values ------------------------------------------------------------------
def test_lesson_5a_headline_values():
    # paging waste: at most z - 1 = 15 slots, 7.5 on average: 7.5 * 57,344 = 430,080 B per sequence
    assert (_v("w_max"), _v("w_mean"), _v("w_mean_bytes")) == (15, 7.5, 430_080)
    # contiguous reservation of 8,192 for a 1,000-token request: 1 - 1000/8192 = 0.8779296875 idle,
    # (8192 - 1000) * 57,344 = 412,418,048 B; paged: ceil(1000/16) = 63 blocks = 1,008 slots, 8 empty
    assert _v("contig_waste_share") == 0.8779296875 and _v("contig_waste_bytes") == 412_418_048
    assert (_v("S_odd_blocks"), _v("S_odd_waste")) == (63, 8)
    # lesson 1A's 110,160 tokens: 110,160 // 8,192 = 13 contiguous requests, 110,160 // 1,008 = 109 paged
    assert (_v("fit_contig"), _v("fit_paged")) == (13, 109)
    # a 2,000-token system prompt + 64: 2,000 = 125 blocks of 16, below the cap 2,063: all 2,000 cached,
    # 2,000 * 57,344 = 114,688,000 B paid once; 100 private copies = 11,468,800,000 B
    assert (_v("sys_cached"), _v("sys_cached_blocks"), _v("sys_bytes")) == (2000, 125, 114_688_000)
    assert _v("sys_bytes_unshared") == 11_468_800_000
    # a 1,000-token shared prefix: floor(1000/16) * 16 = 62 * 16 = 992 cached
    assert _v("odd_cached") == 992
    # one 2,048-token prompt sent 10 times: floor(2047/16) * 16 = 127 * 16 = 2,032 cached from the 2nd on;
    # queries 10 * 2,048 = 20,480, hits 9 * 2,032 = 18,288, rate 0.89296875
    assert (_v("rep_cached"), _v("rep_queries"), _v("rep_hits")) == (2032, 20_480, 18_288)
    assert _v("rep_hit_rate") == 0.89296875
    # TTFT floors at l = 2,048 + 64 = 2,112 tokens (cold) and 64 uncached tokens (hit); M - H = 6,525,621,760,
    # 2H = 1,089,994,752; attention 4 * 28 * 28 * 128 = 401,408 FLOP per token pair, S(S+1)/2 pairs.
    # RTX 4090 (165.2 TFLOP/s, 1,008 GB/s), cold: (2 * 6,525,621,760 * 2112 + 1,089,994,752) / 165.2e12
    #   = 27,565,316,308,992 / 165.2e12 = 166.860 ms (> 14.029 ms of weights), + attention
    #   401,408 * 2112 * 2113 / 2 = 895,671,... / 165.2e12 = 5.422 ms: 172.282 ms
    cold_linear = (2 * 6_525_621_760 * 2112 + 1_089_994_752) / 165.2e12
    cold_att = 401_408 * 2112 * 2113 / 2 / 165.2e12
    assert _v("cold_2k_4090") == pytest.approx(cold_linear + cold_att, rel=1e-12)
    assert _v("cold_2k_4090") == pytest.approx(0.172282, abs=1e-6)
    # hit: 64 tokens are weight-bound: 14,141,238,272 B / 1.008e12 = 14.029 ms, + attention
    #   401,408 * 64 * 65 / 2 / 165.2e12 = 5.05 us (> 64 * 57,344 / 1.008e12 = 3.64 us): 14.034 ms
    assert _v("hit_2k_4090") == pytest.approx(14_141_238_272 / 1.008e12 + 401_408 * 64 * 65 / 2 / 165.2e12, rel=1e-12)
    # H200 (989 TFLOP/s, 4,800 GB/s): cold 27,565,316,308,992 / 989e12 = 27.872 ms + 0.906 ms = 28.778 ms;
    # hit 14,141,238,272 / 4.8e12 = 2.946 ms + 834,928,640 / 989e12 = 0.84 us: 2.947 ms
    assert _v("cold_2k_h200") == pytest.approx(0.028778, abs=1e-6)
    assert _v("hit_2k_h200") == pytest.approx(14_141_238_272 / 4.8e12 + 401_408 * 64 * 65 / 2 / 989e12, rel=1e-12)
