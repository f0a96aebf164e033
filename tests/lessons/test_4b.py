"""Lesson 4B: its formulas, the lesson's snippet and the page's headline values, on values worked by hand.

Qwen2.5-7B by hand (lesson 5A's test has the same figures): M - H = 6,525,621,760 weights a prompt token
multiplies, 2H = 1,089,994,752 (the output head, one position), 2M = 14,141,238,272 B of weights read;
attention 4 L h d_h = 4 * 28 * 28 * 128 = 401,408 FLOP per (query, key) pair; kappa = 2 * 28 * 4 * 128 * 2
= 57,344 B/token. RTX 4090: 165.2e12 FLOP/s, 1.008e12 B/s.
"""

from __future__ import annotations

import pytest

from infercourse import registry, roofline, snippets
from infercourse.pages import values_for

PAGE = "lessons/4b-chunked-prefill.md"
CFG = registry.model(registry.COURSE_MODEL).config
G4090 = registry.gpu("RTX 4090")
PAIR = 401_408  # attention FLOP per (query, key) pair


def _v(name: str):
    return values_for(PAGE)[name].value


def _linear(chunk: int) -> float:
    """The weight matmuls of a chunk on the RTX 4090 (compute-bound above 164 tokens)."""
    return (2 * 6_525_621_760 * chunk + 1_089_994_752) / 165.2e12


@pytest.mark.parametrize(
    "prompt, budget, decoders, steps",
    [
        (64, 64, 0, 1),  # fits one step exactly
        (65, 64, 0, 2),  # one token over: a second step
        (310, 64, 0, 5),  # 4 x 64 = 256 < 310 <= 320
        (310, 64, 4, 6),  # 60 per step beside 4 decoders: 5 x 60 = 300 < 310
        (16_384, 2048, 0, 8),  # 8 x 2,048 exactly
        (16_384, 2048, 16, 9),  # 2,032 per step: 8 x 2,032 = 16,256 < 16,384
        (16_384, 20_480, 16, 1),  # chunking off: the budget holds it all
    ],
)
def test_chunked_prefill_steps_by_hand(prompt, budget, decoders, steps):
    assert roofline.chunked_prefill_steps(prompt, budget, decoders) == steps


@pytest.mark.parametrize(
    "args, words",
    [((100, 16, 16), "no room"), ((100, 16, -1), "decoders"), ((0, 16), "prompt_len"), ((10, 0), "budget")],
)
def test_chunked_prefill_steps_refuses_bad_input(args, words):
    with pytest.raises(ValueError, match=words):
        roofline.chunked_prefill_steps(*args)


def test_chunk_step_floor_by_hand():
    # first chunk of 2,048: linear 26,730,036,723,712 / 165.2e12 = 161.804 ms; attention 401,408 * 2048 * 2049 / 2
    # = 842,216,... -> 5.098 ms (compute-bound: 2,048 * 57,344 B / 1.008e12 = 0.117 ms is less): 166.902 ms
    first = _linear(2048) + PAIR * 2048 * 2049 / 2 / 165.2e12
    assert roofline.chunk_step_floor(G4090, CFG, 2048) == pytest.approx(first, rel=1e-12)
    assert roofline.chunk_step_floor(G4090, CFG, 2048) == roofline.prefill_floor(G4090, CFG, 2048)
    # last chunk of a 16,384-token prompt: positions 14,337 .. 16,384, sum = 2,048 * 30,721 / 2 = 31,458,304;
    # 401,408 * 31,458,304 / 165.2e12 = 76.437 ms (> 16,384 * 57,344 / 1.008e12 = 0.932 ms): 238.242 ms
    last = _linear(2048) + PAIR * 31_458_304 / 165.2e12
    assert roofline.chunk_step_floor(G4090, CFG, 2048, 14_336) == pytest.approx(last, rel=1e-12)
    assert last == pytest.approx(0.238242, abs=1e-6)
    # a chunk of 64 is below the ridge (164): one read of the weights, 14,141,238,272 / 1.008e12 = 14.029 ms
    assert roofline.chunk_step_floor(G4090, CFG, 64) == pytest.approx(
        14_141_238_272 / 1.008e12 + PAIR * 64 * 65 / 2 / 165.2e12, rel=1e-12
    )
    with pytest.raises(ValueError, match="context"):
        roofline.chunk_step_floor(G4090, CFG, 64, -1)


def test_chunked_prefill_floors_cut_the_prompt():
    floors = roofline.chunked_prefill_floors(G4090, CFG, 5000, 2048)  # chunks 2,048 + 2,048 + 904
    assert floors == [
        roofline.chunk_step_floor(G4090, CFG, 2048, 0),
        roofline.chunk_step_floor(G4090, CFG, 2048, 2048),
        roofline.chunk_step_floor(G4090, CFG, 904, 4096),
    ]


def test_snippet_schedules_decoders_first_within_the_budget():
    toy = snippets.load("lesson_4b/token_budget.py")
    steps = toy.schedule(16_384, 2048, 16)
    assert len(steps) == 9 and steps[0] == (16, 2032) and steps[-1] == (16, 16_384 - 8 * 2032)  # 128 left
    assert max(d + c for d, c in steps) == 2048
    assert toy.schedule(310, 64, 4) == [(4, 60)] * 5 + [(4, 10)]
    assert toy.schedule(16_384, 20_480, 16, chunking=False) == [(16, 16_384)]
    with pytest.raises(ValueError, match="no room"):
        toy.schedule(16_384, 8192, 16, chunking=False)


def test_lesson_4b_headline_values():
    # unchunked 16,384-token prefill on the RTX 4090: linear (2 * 6,525,621,760 * 16,384 + 1,089,994,752) / 165.2e12
    # = 1,294.567 ms, attention 401,408 * 16,384 * 16,385 / 2 / 165.2e12 = 325.966 ms: 1,620.533 ms
    assert _v("gap_off_4090") == pytest.approx(_linear(16_384) + PAIR * 16_384 * 16_385 / 2 / 165.2e12, rel=1e-12)
    assert _v("gap_off_4090") == pytest.approx(1.620533, abs=1e-6)
    # the serve default on the 4090 is 2,048 (vllm/engine/arg_utils.py:2472-2475); beside 16 decoders 2,032 a step
    assert (_v("serve_budget"), _v("p1_room"), _v("p1_steps")) == (2048, 2032, 9)
    assert _v("r2k_steps") == 8 and _v("r2k_last") == pytest.approx(0.238242, abs=1e-6)
    # below the ridge: 16,384 / 64 = 256 steps
    assert _v("small_steps") == 256
    # re-reads for 8,192 tokens: m = 4 at 2,048 -> 57,344 * 2,048 * 4 * 3 / 2 = 704,643,072 B;
    # m = 16 at 512 -> 57,344 * 512 * 120 = 3,523,215,360 B
    assert (_v("reread_2k"), _v("reread_512")) == (704_643_072, 3_523_215_360)
    # PD: 8,192 * 57,344 = 469,762,048 B; over the line rates 31.5, 450 and 50 GB/s: 14.913, 1.044, 9.395 ms
    assert _v("kv_8k") == 469_762_048
    assert [round(lk["seconds"] * 1e3, 3) for lk in _v("links")] == [14.913, 1.044, 9.395]
    # problem 2, H200 (989e12 FLOP/s): at a budget of 2,048 the last chunk (after 14,336) costs
    # 26,730,036,723,712 / 989e12 = 27.027 ms + 401,408 * 31,458,304 / 989e12 = 12.768 ms = 39.795 ms <= 40 ms;
    # at 2,304: 8 steps, the last full chunk after 6 * 2,304 = 13,824: positions 2,304 * 29,953 / 2 = 34,505,856,
    # (2 * 6,525,621,760 * 2,304 + 1,089,994,752) / 989e12 = 30.405 ms + 401,408 * 34,505,856 / 989e12 = 14.005 ms
    assert _v("p2_chunk") == 2048 and _v("p2_gap") == pytest.approx(0.039795, abs=1e-6)
    assert _v("p2_over") == pytest.approx(
        (2 * 6_525_621_760 * 2304 + 1_089_994_752) / 989e12 + PAIR * 34_505_856 / 989e12, rel=1e-12
    )
    # H200 pool: CUDA reports 143,771 MiB = 150,754,820,096 B; * 0.92 - 15,231,233,024 - 2 * 2^30 =
    # 121,315,717,816.32 B; / (57,344 * 16) = 132,223 blocks = 2,115,568 tokens; / (8,192 + 512) = 243 requests
    assert _v("kv_budget_h200") == pytest.approx(121_315_717_816.32)
    assert _v("B_pd") == 243
