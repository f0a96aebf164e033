"""Lesson 7B: total and active parameters, the experts a batch reaches, the MoE step floors, the ridge batch and the
expert-parallel bytes, by hand.

Parameters (weights; norms 2 d per layer plus the final d; attention with its q/k norms):
- OLMoE-1B-7B (d 2,048, 16 layers, 16 heads of 128, 64 experts of width 1,024, 8 per token, V 50,304, untied):
  attention 16 x (4 x 2,048^2 + 2 x 2,048) = 268,500,992; one expert 3 x 2,048 x 1,024 = 6,291,456, routed
  16 x 64 x that = 6,442,450,944; routers 16 x 2,048 x 64 = 2,097,152; norms 16 x 4,096 + 2,048 = 67,584;
  embedding and head 2 x 50,304 x 2,048 = 206,045,184. N = 6,919,161,856; active = N - 16 x 56 x 6,291,456 =
  1,282,017,280.
- Qwen3-30B-A3B (d 2,048, 48 layers, 32 heads and 4 KV heads of 128, 128 experts of width 768, 8 per token,
  V 151,936): attention 48 x (2 x 2,048 x 4,096 + 2 x 2,048 x 512 + 2 x 128) = 905,981,952; routed
  48 x 128 x 4,718,592 = 28,991,029,248; routers 12,582,912; norms 198,656; embedding and head 622,329,856.
  N = 30,532,122,624 (the card: 30.5B); active = N - 48 x 120 x 4,718,592 = 3,353,032,704 (the card: 3.3B).
- DeepSeek-V3 (MLA: q through a 1,536 latent, 512 + 64 cached, 128 heads of 128 + 64 / 128; 3 dense layers of
  18,432; 58 MoE layers of 256 experts of width 2,048 and 1 shared, 8 routed per token; routing bias; V 129,280):
  attention 61 x (7,168 x 1,536 + 1,536 + 1,536 x 24,576 + 7,168 x 576 + 512 + 512 x 128 x 256 + 128 x 128 x
  7,168) = 61 x 187,107,328 = 11,413,547,008; dense MLPs 3 x 3 x 7,168 x 18,432 = 1,189,085,184; one expert
  44,040,192, routed 58 x 256 x that = 653,908,770,816, shared 58 x that = 2,554,331,136; routers
  58 x (7,168 x 256 + 256) = 106,445,312; norms 881,664; embedding and head 1,853,358,080. N = 671,026,419,200
  (the card: 671B); active = N - 58 x 248 x 44,040,192 = 37,552,297,472 (the card: 37B).
- The tiny Qwen3-MoE of the CI lab: 3,810,816, as torch counts the saved model (sum of p.numel()).

Experts a batch reaches, 64 experts and 8 per token: at B = 8, 64 (1 - 0.875^8) = 64 x 0.656391 = 42.0090; at 64,
0.875^64 = 1.9425e-4 missed. Floors on the RTX 4090 (1,008 GB/s) at S = 128 + 32 / 2 = 144, kappa = 2 x 16 x 16 x
128 x 2 = 131,072 B/token: weights every step reads 6,919,161,856 - 6,442,450,944 - 206,045,184 + 103,022,592 =
373,688,320; B = 1 reads 373,688,320 + 8 x 16 x 6,291,456 = 1,178,994,688 weights, 2,357,989,376 B -> 2.33928 ms,
plus 144 x 131,072 B of cache -> 0.01872 ms: 2.35800 ms. Ridge 165.2e12 / 1.008e12 = 163.889 FLOP/B = B* (BF16).
Expert parallelism, DeepSeek-V3 on 8 GPUs at 2,048 tokens: 2 x 256 x 8 x 7/8 x 7,168 x 2 = 51,380,224 B per GPU
and MoE layer; tensor parallelism: 2 x 2 x 7/8 x 2,048 x 7,168 x 2 = 102,760,448 B; ratio 8 / 16 = 0.5.
"""

from __future__ import annotations

import pytest

from infercourse import registry, roofline, snippets, transformer
from infercourse.pages import values_for

PAGE = "lessons/7b-mixture-of-experts.md"


def _v(name: str):
    return values_for(PAGE)[name].value


def test_total_and_active_parameters_against_the_cards():
    rows = {r["short"]: (r["total"], r["active"]) for r in _v("param_rows")}
    assert rows == {
        "OLMoE-1B-7B": (6_919_161_856, 1_282_017_280),
        "Qwen3-30B-A3B": (30_532_122_624, 3_353_032_704),
        "DeepSeek-V3": (671_026_419_200, 37_552_297_472),
    }
    ds = transformer.moe_param_breakdown(registry.model("deepseek-ai/DeepSeek-V3").config)
    assert (ds["attention"], ds["dense_mlp"], ds["shared_experts"], ds["router"]) == (
        11_413_547_008,
        1_189_085_184,
        2_554_331_136,
        106_445_312,
    )
    assert (_v("ds_dense_layers"), _v("ds_shared")) == (3, 2_554_331_136)


def test_the_tiny_lab_model_counts_as_torch_counts_it():
    tiny = {
        "model_type": "qwen3_moe",
        "hidden_size": 256,
        "intermediate_size": 512,
        "moe_intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "num_experts": 16,
        "num_experts_per_tok": 2,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "vocab_size": 512,
        "tie_word_embeddings": False,
    }
    assert transformer.param_count(tiny) == 3_810_816  # torch: sum(p.numel()) of scripts/make_test_models.py's


def test_experts_touched_and_the_floors():
    assert roofline.expected_experts_touched(64, 8, 8) == pytest.approx(42.0090, abs=1e-4)
    assert _v("ol_8") == pytest.approx(42.0090, abs=1e-4) and _v("ol_miss_64") == pytest.approx(1.9425e-4, rel=1e-3)
    assert [round(x, 4) for x in _v("cov_rows")[0]["counts"]] == [8, 42.0090, 63.9876, 64.0]
    assert (_v("read_1"), _v("context")) == (2_357_989_376, 144)
    assert _v("ol_floor_1") == pytest.approx(2.35800e-3, abs=1e-8)
    assert _v("dense_growth") < 1.1 < 6 < _v("ol_growth")  # 2A's dense step barely moves; OLMoE's grows


def test_the_ridge_batch_and_the_expert_parallel_bytes():
    assert _v("b_star") == pytest.approx(163.889, abs=1e-3)
    assert [round(r["b"], 1) for r in _v("b_star_rows")] == [1311.1, 2622.2, 5244.4]  # x 8, x 16, x 32
    assert (_v("a2a"), _v("allreduce"), _v("ep_over_tp")) == (51_380_224, 102_760_448, 0.5)
    assert _v("kappa_ds") == 61 * (512 + 64) * 2  # 70,272


@pytest.mark.parametrize(
    "change, message",
    [
        ({"num_experts_per_tok": 20}, "exceeds the 16 routed experts"),
        ({"num_experts": 0}, "must be a positive integer"),
        ({"mlp_only_layers": "0"}, "must be a list of layer numbers"),
        ({"num_experts": None}, "not a mixture-of-experts config"),
    ],
)
def test_a_bad_moe_config_gets_a_message(change, message):
    tiny = {"model_type": "olmoe", "hidden_size": 64, "intermediate_size": 32, "num_hidden_layers": 2}
    tiny |= {"num_attention_heads": 2, "num_key_value_heads": 2, "num_experts": 16, "num_experts_per_tok": 2}
    with pytest.raises(ValueError, match=message):
        transformer.moe_param_breakdown({**tiny, "vocab_size": 100, **change})


def test_the_uniform_count_is_the_snippet_s_and_its_spread_matches_a_simulation():
    route = snippets.load("lesson_7b/moe_routing.py")
    assert route.expected_touched(128, 8, 64) == roofline.expected_experts_touched(128, 8, 64)
    import numpy as np

    rng = np.random.default_rng(1)
    counts = [len(np.unique(route.route(rng, 16, 2, 4))) for _ in range(20000)]
    # E = 16, k = 2, B = 4: mean 16 (1 - 0.875^4) = 6.6226; the simulation's spread matches experts_touched_sd
    assert np.mean(counts) == pytest.approx(6.6226, abs=0.05)
    assert np.std(counts) == pytest.approx(roofline.experts_touched_sd(16, 2, 4), rel=0.05)
    skewed = np.mean([len(np.unique(route.route(rng, 16, 2, 4, route.skewed(16)))) for _ in range(5000)])
    assert skewed < 6.6226 - 0.5  # a skewed router reaches fewer
