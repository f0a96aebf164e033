"""Lesson 5A: the page's headline values, the paging and prefix-cache formulas, the lesson's snippet, and lab
prefix_cache's claims and prediction, on values and receipts worked by hand.

Cached tokens by hand: C = floor(min(l, P - 1) / z) * z. With the CPU build's blocks of z = 128:
l = 4,000, P = 4,064 -> floor(4000 / 128) = 31 -> 3,968; l = P = 2,048 -> floor(2047 / 128) = 15 -> 1,920.
With vLLM's CUDA blocks of 16: 4,000 = 250 * 16 -> 4,000; 2,047 // 16 = 127 -> 2,032.
"""

from __future__ import annotations

import pytest

from conftest import CPU_MACHINE, GPU_MACHINE, make_receipt
from infercourse import labs, memory, snippets
from infercourse.pages import values_for

SPEC = labs.spec("prefix_cache")
PAGE = values_for("lessons/5a-paged-attention.md")


def _v(name: str):
    return PAGE[name].value


# (prefix, suffix) -> cached tokens of the later requests of the sequential rows, blocks of 128 (by hand, above)
CACHED_128 = {(0, 64): 0, (512, 64): 512, (1024, 64): 1024, (2048, 64): 2048, (4000, 64): 3968, (2048, 0): 1920}
# one 1,088-token prompt, 8 copies or n = 8: floor(1087 / 128) = 8 blocks -> 1,024 cached for 7 of them;
# queries 8 * 1,088 = 8,704, hits 7 * 1,024 = 7,168
SHARED = {"cached": 1024, "queries": 8704, "hits": 7168}


def _receipt(kind="cpu", requests=8, cached=None, queries=None, hits=None, first=0, ttft=(200.0, 20.0), **change):
    """A receipt shaped like the lab's, blocks of 128; sequential rows: queries = requests * P,
    hits = (requests - 1) * C. ``change`` replaces fields of the row of one run (``evicted={"hits": 1}``)."""
    rows = []
    for run, prefix, suffix in SPEC.grid:
        p = prefix + suffix
        row = {"run": run, "prefix_tokens": prefix, "suffix_tokens": suffix, "prompt_tokens": p, "preemptions": 0}
        if run == "sequential":
            c = (cached or CACHED_128)[prefix, suffix]
            row |= {
                "requests": requests,
                "cached_first": first,
                "cached_later_min": c,
                "cached_later_max": c,
                "queries": requests * p if queries is None else queries,
                "hits": (requests - 1) * c if hits is None else hits,
                "ttft_cold_ms": ttft[0],
                "ttft_hit_ms": ttft[1],
            }
        elif run in ("together", "parallel_n"):
            c = SHARED["cached"] if run == "together" else None  # n = 8 comes back as one output
            row |= {"requests": 8, "cached_first": c and 0, "cached_later_min": c, "cached_later_max": c}
            row |= {"queries": SHARED["queries"], "hits": SHARED["hits"], "ttft_cold_ms": None, "ttft_hit_ms": None}
        elif run == "evicted":  # two requests of 2,112 tokens, fillers between: 4,224 queried, nothing found
            row |= {"requests": 2, "cached_first": 0, "cached_later_min": 0, "cached_later_max": 0}
            row |= {"queries": 4224, "hits": 0, "ttft_cold_ms": ttft[0], "ttft_hit_ms": ttft[0]}
        else:  # pressure: 4 x 1,024 prompt tokens, one request preempted and recomputed (queried again)
            row |= {"requests": 4, "cached_first": 0, "cached_later_min": 0, "cached_later_max": 0}
            row |= {"queries": 5120, "hits": 0, "preemptions": 1, "ttft_cold_ms": None, "ttft_hit_ms": None}
        row |= change.get(run, {})
        rows.append(row)
    return make_receipt(
        "prefix_cache",
        rows,
        SPEC.units,
        machine=GPU_MACHINE if kind == "gpu" else CPU_MACHINE,
        settings={"block_size": 128, "num_gpu_blocks": 40, "requests": requests, "output_tokens": 4},
    )


def _claims(receipt) -> dict:
    return {r.claim: r.passed for r in labs.check(receipt)}


# --- formulas -------------------------------------------------------------------------------------


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


# --- the lesson's snippet -------------------------------------------------------------------------


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


# --- the lab's claims -----------------------------------------------------------------------------


def test_the_lab_grid_is_the_scripts():
    lab = snippets.load("labs/prefix_cache.py")  # imports without vLLM
    sequential = ((0, 64), (512, 64), (1024, 64), (2048, 64), (4000, 64), (2048, 0))
    others = (("together", 1088, 0), ("parallel_n", 1088, 0), ("evicted", 2048, 64), ("pressure", 0, 1024))
    assert SPEC.grid == lab.GRID == tuple(("sequential", *row) for row in sequential) + others
    assert lab.MAX_MODEL_LEN >= 4000 + 64 + lab.OUTPUT_TOKENS


@pytest.mark.parametrize(
    "blocks, block_size, fits",
    [
        # usable = (blocks - 1) * z; the pressure row needs 4 * (1,024 + z) <= usable < 4 * (1,024 + 512) = 6,144
        (320, 16, True),  # 319 * 16 = 5,104: 4,160 <= 5,104 < 6,144
        (40, 128, True),  # 39 * 128 = 4,992: 4,608 <= 4,992 < 6,144
        (36, 128, False),  # 35 * 128 = 4,480 < 4,608: the four prompts are not all admitted
        (49, 128, False),  # 48 * 128 = 6,144: nothing outgrows the pool
        (384, 16, True),  # 383 * 16 = 6,128 < 6,144, still below 8,000 filler tokens
    ],
)
def test_the_pool_check_by_hand(blocks, block_size, fits):
    lab = snippets.load("labs/prefix_cache.py")
    if fits:
        lab.check_pool(blocks, block_size)
    else:
        with pytest.raises(SystemExit):
            lab.check_pool(blocks, block_size)


def test_a_receipt_worked_by_hand_passes_every_exact_claim():
    receipt = _receipt()
    labs.validate_receipt(receipt)
    assert _claims(receipt) == {
        "first_request_cold": True,
        "cached_tokens_exact": True,
        "counters_exact": True,
        "eviction_exact": True,
        "pressure_preempts": True,
        "hit_faster": None,
    }  # timing: not judged on a CPU receipt


def test_a_whole_prompt_cached_fails():
    """The cap: a repeated 2,048-token prompt must find 1,920, not all 2,048 (one block of 128 fewer)."""
    assert _claims(_receipt(cached={**CACHED_128, (2048, 0): 2048}))["cached_tokens_exact"] is False


def test_a_partial_block_cached_fails():
    assert _claims(_receipt(cached={**CACHED_128, (4000, 64): 4000}))["cached_tokens_exact"] is False


def test_counters_off_by_one_token_fail():
    assert _claims(_receipt(hits=1))["counters_exact"] is False
    assert _claims(_receipt(queries=0))["counters_exact"] is False


def test_n_sampling_that_does_not_share_the_prompt_fails():
    # without sharing, n = 8 would find 0 cached tokens: hits 0 instead of 7,168
    assert _claims(_receipt(parallel_n={"hits": 0}))["counters_exact"] is False
    assert _claims(_receipt(together={"cached_later_min": 0}))["cached_tokens_exact"] is False


def test_a_prefix_that_survives_the_fillers_fails():
    assert _claims(_receipt(evicted={"cached_later_max": 2048, "hits": 2048}))["eviction_exact"] is False


def test_no_preemption_under_pressure_or_one_elsewhere_fails():
    assert _claims(_receipt(pressure={"preemptions": 0}))["pressure_preempts"] is False
    assert _claims(_receipt(together={"preemptions": 1}))["pressure_preempts"] is False


def test_a_row_that_does_not_start_cold_fails():
    assert _claims(_receipt(first=128))["first_request_cold"] is False


def test_hit_faster_is_judged_on_gpu_receipts():
    assert _claims(_receipt("gpu"))["hit_faster"] is True
    assert _claims(_receipt("gpu", ttft=(20.0, 30.0)))["hit_faster"] is False


def test_prediction_uses_blocks_of_16_and_the_roofline():
    text = SPEC.prediction()
    assert "| 4,000 | 64 | 4,064 | 4,000 |" in text  # 4,000 = 250 blocks of 16
    assert "| 2,048 | 0 | 2,048 | 2,032 |" in text  # floor(2047 / 16) * 16
    # cold floor at 2,112 tokens on the RTX 4090: 166.860 + 5.422 = 172.3 ms; hit: 14.029 ms of weights -> 14.0
    assert "| 2,048 | 64 | 2,112 | 2,048 | 172.3 | 14.0 |" in text
