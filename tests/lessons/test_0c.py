"""Lesson 0C: the page's headline values and the snippet's configs and counts, against hand arithmetic."""

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
M_QWEN = N_QWEN - 152064 * 3584  # 7,070,619,136: all but the input embedding


def _v(page: str, name: str):
    return values_for(page)[name].value


def test_lesson_0c_headline_values():
    page = "lessons/0c-transformer.md"
    assert _v(page, "N") == N_QWEN and _v(page, "M") == M_QWEN
    # attention at 8,192: 4 * 28 * 28 * 128 * 8192 = 3,288,334,336 FLOPs; / 2M = 23.25 %
    assert _v(page, "att8k") == 3_288_334_336
    assert _v(page, "att8k_share") == pytest.approx(3_288_334_336 / (2 * M_QWEN))
    # AWQ per quantised weight: 0.5 + 2/128 + 0.5/128 = 0.51953125 B
    assert _v(page, "awq_per_weight") == 0.51953125
    # 24,564 MiB * 0.92 = 23,696,432,087 B budget; minus 15,231,233,024 B of weights = 7.88 GiB
    assert _v(page, "left_bf16") == pytest.approx(24564 * 2**20 * 0.92 - 2 * N_QWEN)


@pytest.mark.parametrize("name", list(load("lesson_0c/param_count.py").CONFIGS))
def test_lesson_0c_snippet_configs_and_counts_equal_the_registry(name):
    pc = load("lesson_0c/param_count.py")
    config = registry.model(name).config
    assert pc.CONFIGS[name] == dict(config)
    assert pc.param_count(pc.CONFIGS[name]) == transformer.param_count(config)
    rows = {module: total for module, _, _, total in pc.modules(pc.CONFIGS[name])}
    parts = transformer.param_breakdown(config)
    assert rows["embedding"] == parts["embedding"] and rows["lm_head"] == parts["lm_head"]
    assert rows["MLP gate, up, down"] == parts["mlp"]


def test_lesson_0c_snippet_covers_the_models_with_hand_worked_counts():
    # the four whose totals are worked by hand (lesson 0C's formula): untied, tied, GQA 4:1, explicit head_dim
    assert {
        "Qwen/Qwen2.5-7B-Instruct",
        "Qwen/Qwen2.5-0.5B-Instruct",
        "meta-llama/Meta-Llama-3-8B",
        "Qwen/Qwen3-4B",
    } <= set(load("lesson_0c/param_count.py").CONFIGS)
