"""Lesson 8A by hand: the fleet-hit formula, LoRA adapter bytes, the cost arithmetic and the routing snippet."""

from __future__ import annotations

import pytest

from infercourse import memory, registry, snippets, transformer


def test_prefix_computations_by_hand():
    # 3 prefixes over 2 replicas, round robin: prefix g goes to (g + 3r) mod 2, both replicas from round 1 on
    assert memory.prefix_computations("round_robin", 3, 4, 2) == 2
    assert memory.prefix_computations("round_robin", 3, 1, 2) == 1  # one request: one replica
    assert memory.prefix_computations("round_robin", 7, 16, 4) == 4
    assert memory.prefix_computations("consistent_hash", 3, 4, 2) == 1


def test_fleet_prefix_hits_by_hand():
    # the lab's CPU run: 3 prefixes x 4 rounds, 256-token prefixes in blocks of 128 -> c = 256
    assert memory.fleet_prefix_hits("round_robin", 3, 4, 2, 256) == 3 * (4 - 2) * 256 == 1536
    assert memory.fleet_prefix_hits("consistent_hash", 3, 4, 2, 256) == 3 * (4 - 1) * 256 == 2304


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("random", 3, 4, 2), "unknown routing policy"),
        (("round_robin", 4, 4, 2), "share a factor"),
        (("round_robin", 3, 4, 1), "replicas"),
        (("round_robin", 0, 4, 2), "groups"),
    ],
)
def test_prefix_computations_refuses_what_it_does_not_model(args, message):
    with pytest.raises(ValueError, match=message):
        memory.prefix_computations(*args)


def test_lora_adapter_bytes_by_hand():
    # Qwen2.5-7B, per layer d_in + d_out: q 3584+3584, k 3584+512, v 3584+512, o 3584+3584,
    # gate 3584+18944, up 3584+18944, down 18944+3584 = 90,112; x 28 layers x rank 16 x 2 bytes
    config = registry.model("Qwen/Qwen2.5-7B-Instruct").config
    assert transformer.lora_adapter_bytes(config, 16) == 90_112 * 28 * 16 * 2 == 80_740_352
    with pytest.raises(ValueError, match="mixture of experts"):
        transformer.lora_adapter_bytes(registry.model("Qwen/Qwen3-30B-A3B").config, 16)


def test_page_values_by_hand():
    from infercourse.pages import lesson_8a as page

    v = {name: value.value for name, value in page.P.values().items()}
    assert v["lora16"] == 80_740_352
    assert v["mask_bytes"] == 4 * 4752  # ceil(152,064 / 32) = 4,752 int32 words
    assert v["logits_bytes"] == 256 * 152_064 * 4
    assert v["hash_all_one"] == pytest.approx(0.25)  # 2 x (1/2)^3: all three prefixes on one of two replicas
    assert v["t_load"] == pytest.approx(57_344 * 8192 / 25e9)  # kappa = 28 layers x 2 x 4 heads x 128 x 2 B
    row = v["cost_rows"][0]
    assert row["card"] == "RTX 4090" and row["price"] == 1.98
    assert row["cny_out_low"] == pytest.approx(1.98 * 1e6 / (3600 * row["out_fast"]))
    assert v["cost_rows"][-1]["price"] == pytest.approx(63.296 / 8 * 7.1)  # AWS's 8-H200 hour, per card, in yuan


def test_new_cards_ridge_points_by_hand():
    assert registry.gpu("H20").bf16_dense_tflops * 1e12 / (registry.gpu("H20").bandwidth_gb_s * 1e9) == 37.0
    assert registry.gpu("RTX 4090D").bf16_dense_tflops == pytest.approx(165.2 * 114 / 128, abs=0.05)


def test_snippet_replay_agrees_with_the_formula():
    routing = snippets.load("lesson_8a/routing.py")
    computed, busiest = routing.replay("round_robin", 7, 16, 4)
    assert computed == 7 * memory.prefix_computations("round_robin", 7, 16, 4)
    assert busiest == 0.25  # 112 requests, 28 each
    computed, _ = routing.replay("consistent_hash", 7, 16, 4)
    assert computed == 7  # each prefix computed once
    computed, busiest = routing.replay("prefix_aware", 7, 16, 4)
    assert 7 <= computed < 28 and busiest < 0.3


def test_cost_per_million_tokens_by_hand():
    from infercourse import roofline

    assert roofline.cost_per_million_tokens(3.6, 1000) == pytest.approx(1.0)  # 3.6 / 3,600 s / 1,000 x 10^6
    with pytest.raises(ValueError, match="tokens_per_s"):
        roofline.cost_per_million_tokens(1.98, 0)
