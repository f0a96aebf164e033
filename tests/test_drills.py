"""The interview drills (docs/drills.md): at least 40, every one with its working, its trap and a live lesson, and a
sample of the answers recomputed by hand.

Hand arithmetic:
- kappa of Llama-3-8B: 2 x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B; with its 32 query heads 524,288 B, 4 x.
- Qwen2.5-7B on an RTX 4090 with vLLM's defaults: 25,757,220,864 B x 0.92 - 15,231,233,024 - 2 GiB =
  6,317,926,522.88 B; / (57,344 x 16) = 6,885 whole blocks = 110,160 tokens (tests/test_kv_roofline.py too).
- B* on the RTX 4090: 165.2e12 / 1,008e9 = 163.89 FLOP/B, x 2 / 2 = 163.9 sequences.
- Speculative decoding, alpha 0.8, k 4: (1 - 0.8^5) / 0.2 = (1 - 0.32768) / 0.2 = 3.3616 -> 3.36.
- OLMoE at B = 8: 64 (1 - 0.875^8) = 42.009 -> 42.0 experts.
- Llama-3-8B on an RTX 4090: BF16 cache 41,872 tokens (2 x 32 x 8 x 128 x 2 = 131,072 B per token); an FP8 cache
  halves kappa, 65,536 B, and holds 83,744.
- Tensor parallelism of Qwen2.5-7B: 28 heads, 4 KV heads, width 18,944: 1, 2, 4 (7, 14, 28 are not divisors of
  4 or multiples of it; 8 does not divide 28).
"""

from __future__ import annotations

from pathlib import Path

from infercourse import course
from infercourse.pages import values_for

ROOT = Path(__file__).resolve().parents[1]
PAGE = "drills.md"


def _drills() -> list[dict]:
    return [p for section in values_for(PAGE)["sections"].value for p in section["drills"]]


def _answers() -> dict[str, str]:
    return {p["question"]: p["answer"] for p in _drills()}


def test_forty_drills_each_with_its_working_trap_and_lesson():
    drills = _drills()
    assert len(drills) >= 40 and values_for(PAGE)["n_drills"].value == len(drills)
    live = {lesson["page"] for lesson in course.live_lessons()}
    for p in drills:
        assert p["working"] and p["trap"] and p["answer"], p["id"]
        assert p["lesson"] in live, f"drill {p['id']} names {p['lesson']}, not a live lesson"
    assert [p["id"] for p in drills] == list(range(1, len(drills) + 1))  # numbered in the page's order


def test_a_sample_of_answers_by_hand():
    got = _answers()
    assert got["How many bytes of KV cache does Meta-Llama-3-8B store per token in BF16?"] == "131,072 B per token"
    q = "Qwen2.5-7B-Instruct in BF16 on one RTX 4090 with vLLM's defaults: do the weights fit, and how many tokens of "
    assert got[q + "KV cache are left?"] == "weights 15.23 GB; 110,160 tokens of KV cache"
    q = "At what batch do a BF16 model's decode matmuls reach the RTX 4090's ridge point, and which model is it for?"
    assert got[q] == "B* = 163.9 sequences, for every model"
    q = "A draft proposes k = 4 tokens, each accepted with probability alpha = 0.8: how many tokens does one target "
    assert got[q + "step emit on average?"] == "3.36 tokens"
    q = "Into how many GPUs can vLLM split Qwen2.5-7B-Instruct with tensor parallelism?"
    assert got[q] == "1, 2, 4"
    # an FP8 cache: kappa 65,536 B, the same budget in whole blocks of 16 holds twice the BF16 cache's 41,872 tokens
    q = "Meta-Llama-3-8B with BF16 weights and an FP8 KV cache on one RTX 4090: how many tokens of KV cache does "
    assert got[q + "vLLM allocate?"] == "83,744 tokens"
    # 5 prompts x 8 asks, 2 replicas, c = floor(1,000 / 16) x 16 = 992: round robin 5 x 6 x 992, affinity 5 x 7 x 992
    fleet = next(a for q, a in got.items() if q.startswith("5 system prompts of 1,000 tokens"))
    assert fleet == "round robin 29,760, affinity 34,720 tokens"
    # Llama-3-8B: per layer (4096+4096) + 2 (4096+1024) + (4096+4096) + 2 (4096+14336) + (14336+4096) = 81,920;
    # x 32 layers x rank 16 x 2 B = 83,886,080 B (80 MiB): 12 fit in 1 GiB
    lora = next(a for q, a in got.items() if q.startswith("How many bytes is a rank-16 LoRA adapter"))
    assert lora.startswith("83,886,080 B") and lora.endswith("12 per GiB")
    olmoe = next(a for q, a in got.items() if q.startswith("OLMoE-1B-7B-0924-Instruct decodes 8 sequences"))
    assert olmoe.startswith("42.0 experts per layer")


def test_every_lesson_s_interview_section_links_the_drills():
    missing = []
    for lesson in course.live_lessons():
        text = (ROOT / "docs" / lesson["page"]).read_text(encoding="utf-8")
        section = text.split("{ #interview }", 1)[1].split("\n## ", 1)[0]
        if "(../drills.md)" not in section:
            missing.append(lesson["code"])
    assert not missing, f"lessons whose interview section does not link the drills: {missing}"
