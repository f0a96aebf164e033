"""Lesson 1A: the page's headline values and the snippet's constants, against hand arithmetic."""

from __future__ import annotations

import pytest

from infercourse import registry, transformer
from infercourse.pages import values_for
from infercourse.snippets import load


def _v(page: str, name: str):
    return values_for(page)[name].value


def test_lesson_1a_headline_values():
    page = "lessons/1a-kv-cache.md"
    # budget: 24,564 MiB * 0.92 - 15,231,233,024 - 2 GiB = 25,757,220,864 * 0.92 - 15,231,233,024 - 2,147,483,648
    #       = 23,696,643,194.88 - 17,378,716,672 = 6,317,926,522.88 B (6.32 GB)
    assert _v(page, "kv_budget") == pytest.approx(6_317_926_522.88)
    # tokens: floor(6,317,926,522.88 / (57,344 * 16)) * 16 = floor(6885.2) * 16 = 6,885 * 16 = 110,160
    assert _v(page, "tokens") == 110_160
    assert _v(page, "tokens_fp8") == 220_336  # floor(6,317,926,522.88 / (28,672 * 16)) = 13,771 blocks
    # DeepSeek-V3 MLA: 61 * (512 + 64) * 2 = 70,272 B per token
    assert _v(page, "kappa_ds") == 70_272


QWEN = registry.model("Qwen/Qwen2.5-7B-Instruct").config


def test_lesson_1a_snippet_constants_equal_the_registry():
    kb = load("lesson_1a/kv_budget.py")
    for name, cfg in kb.MODELS.items():
        reg = registry.model(name).config
        assert {k: reg[k] for k in cfg} == cfg, name
        assert kb.kv_bytes_per_token(cfg) == transformer.kv_bytes_per_token(reg)
        assert kb.cache_bytes(cfg, 32_768) == transformer.kv_cache_bytes(reg, 32_768)
    assert registry.GPU_MEMORY_TOTAL_MIB["RTX 4090"] == kb.DEVICE_TOTAL_MIB
    assert kb.GPU_MEMORY_UTILIZATION == registry.VLLM_DEFAULT_GPU_MEMORY_UTILIZATION
    assert transformer.weight_bytes(QWEN) == kb.WEIGHT_BYTES
    assert kb.RESERVE_GIB == registry.VLLM_NON_KV_RESERVE_GIB
    assert kb.BLOCK_SIZE == registry.VLLM_DEFAULT_BLOCK_SIZE
    assert kb.kv_capacity_tokens(57_344)[0] == 110_160  # the hand-worked capacity above
