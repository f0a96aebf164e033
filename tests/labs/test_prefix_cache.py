"""Lab prefix_cache (lesson 5A): its spec's claims, prediction and bad input, on receipts worked by hand.

The hand arithmetic of the model, the card and the floors is in tests/lessons/test_5a.py's docstring.
"""

from __future__ import annotations

import pytest

from conftest import claims_passed, make_receipt
from infercourse import labs, snippets

SPEC = labs.spec("prefix_cache")
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
        kind=kind,
        settings={"block_size": 128, "num_gpu_blocks": 40, "requests": requests, "output_tokens": 4},
    )


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
    assert claims_passed(receipt) == {
        "first_request_cold": True,
        "cached_tokens_exact": True,
        "counters_exact": True,
        "eviction_exact": True,
        "pressure_preempts": True,
        "hit_faster": None,
    }  # timing: not judged on a CPU receipt


def test_the_notebook_compares_cached_tokens_with_the_lesson_s_full_blocks():
    """The notebook's first panel: the later requests' cached tokens of the sequential and together rows beside
    the shared prefix's full blocks, exact; parallel_n (no per-request count), evicted and pressure are not."""
    receipt = _receipt()
    rows = receipt["results"]
    found = {
        (rows[c.row]["run"], rows[c.row]["prefix_tokens"], rows[c.row]["suffix_tokens"]): c
        for c in labs.compared(receipt)
    }
    assert [key[0] for key in found] == ["sequential"] * 6 + ["together"]
    assert all((c.quantity, c.kind, c.measured) == ("cached tokens", "exact", c.predicted) for c in found.values())
    # blocks of 128, by hand: floor(min(L, P - 1) / 128) x 128
    assert found["sequential", 4000, 64].predicted == 3968  # floor(min(4000, 4063) / 128) = 31 blocks
    assert found["sequential", 2048, 0].predicted == 1920  # floor(2047 / 128) = 15 blocks: never the whole prompt
    assert found["together", 1088, 0].predicted == 1024  # floor(1087 / 128) = 8 blocks
    rows[4]["cached_later_max"] = 4000  # the 4,000-token prefix cached with its partial block
    assert labs.compared(receipt)[4].ratio == 4000 / 3968
    assert "NOT as predicted" in labs.report(receipt)[1]


def test_a_whole_prompt_cached_fails():
    """The cap: a repeated 2,048-token prompt must find 1,920, not all 2,048 (one block of 128 fewer)."""
    assert claims_passed(_receipt(cached={**CACHED_128, (2048, 0): 2048}))["cached_tokens_exact"] is False


def test_a_partial_block_cached_fails():
    assert claims_passed(_receipt(cached={**CACHED_128, (4000, 64): 4000}))["cached_tokens_exact"] is False


def test_counters_off_by_one_token_fail():
    assert claims_passed(_receipt(hits=1))["counters_exact"] is False
    assert claims_passed(_receipt(queries=0))["counters_exact"] is False


def test_n_sampling_that_does_not_share_the_prompt_fails():
    # without sharing, n = 8 would find 0 cached tokens: hits 0 instead of 7,168
    assert claims_passed(_receipt(parallel_n={"hits": 0}))["counters_exact"] is False
    assert claims_passed(_receipt(together={"cached_later_min": 0}))["cached_tokens_exact"] is False


def test_a_prefix_that_survives_the_fillers_fails():
    assert claims_passed(_receipt(evicted={"cached_later_max": 2048, "hits": 2048}))["eviction_exact"] is False


def test_no_preemption_under_pressure_or_one_elsewhere_fails():
    assert claims_passed(_receipt(pressure={"preemptions": 0}))["pressure_preempts"] is False
    assert claims_passed(_receipt(together={"preemptions": 1}))["pressure_preempts"] is False


def test_a_row_that_does_not_start_cold_fails():
    assert claims_passed(_receipt(first=128))["first_request_cold"] is False


def test_hit_faster_is_judged_on_gpu_receipts():
    assert claims_passed(_receipt("gpu"))["hit_faster"] is True
    assert claims_passed(_receipt("gpu", ttft=(20.0, 30.0)))["hit_faster"] is False


def test_prediction_uses_blocks_of_16_and_the_roofline():
    text = SPEC.prediction()
    assert "| 4,000 | 64 | 4,064 | 4,000 |" in text  # 4,000 = 250 blocks of 16
    assert "| 2,048 | 0 | 2,048 | 2,032 |" in text  # floor(2047 / 16) * 16
    # cold floor at 2,112 tokens on the RTX 4090: 166.860 + 5.422 = 172.3 ms; hit: 14.029 ms of weights -> 14.0
    assert "| 2,048 | 64 | 2,112 | 2,048 | 172.3 | 14.0 |" in text


def test_the_notebook_exercises_by_hand():
    """1,000 shared tokens: floor(1,000 / 16) x 16 = 62 x 16 = 992. The same 1,200-token prompt again: capped at
    1,199, floor(1,199 / 16) x 16 = 74 x 16 = 1,184. TTFT floors on the RTX 4090, cold at 2,048 tokens and, on a
    hit, 512 new tokens after 1,536 cached, whose queries attend to positions 1,537 .. 2,048: every kernel
    compute-bound (tests/labs/test_phases.py: 2 (M - H) = 13,051,243,520 and 2 H = 1,089,994,752 FLOP; attention
    401,408 FLOP per position attended), so the peak cancels in the ratio."""
    cached, again, speedup = (e.answer() for e in labs.spec("prefix_cache").exercises)
    assert (cached, again) == (992, 1_184)

    cold = 13_051_243_520 * 2048 + 1_089_994_752 + 401_408 * 2048 * 2049 // 2
    hit = 13_051_243_520 * 512 + 1_089_994_752 + 401_408 * 512 * (1537 + 2048) // 2
    assert speedup == pytest.approx(cold / hit, rel=1e-9)
