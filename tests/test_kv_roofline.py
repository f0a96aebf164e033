"""Lessons 1A and 2A: KV bytes per token, capacity and the batch crossover, against hand arithmetic."""

from __future__ import annotations

import re

import pytest

from infercourse import memory, registry, roofline, transformer
from infercourse.registry import GPUFacts
from infercourse.snippets import load

QWEN = registry.model("Qwen/Qwen2.5-7B-Instruct").config


@pytest.mark.parametrize(
    "name, kind, kappa",
    [
        ("meta-llama/Llama-2-13b-hf", "MHA", 819_200),  # 2 * 40 layers * 40 KV heads * 128 * 2 B (its config.json)
        ("Qwen/Qwen2.5-7B-Instruct", "GQA", 57_344),  # 2 * 28 * 4 * 128 * 2
        ("Qwen/Qwen3-4B", "GQA", 147_456),  # 2 * 36 * 8 * 128 (explicit head_dim, not 2560/32 = 80) * 2
        ("deepseek-ai/DeepSeek-V3", "MLA", 70_272),  # 61 layers * (512 latent + 64 RoPE key) * 2 B
        ("mistralai/Mistral-7B-v0.1", "GQA", 131_072),  # 2 * 32 * 8 * 128 * 2
    ],
)
def test_kv_bytes_per_token_by_hand(name, kind, kappa):
    cfg = registry.model(name).config
    assert transformer.attention_kind(cfg) == kind
    assert transformer.kv_bytes_per_token(cfg) == kappa
    assert transformer.kv_bytes_per_token(cfg, dtype_bytes=1) == kappa // 2  # fp8 cache


def test_mqa_and_attention_heads_mistake():
    mqa = {**QWEN, "num_key_value_heads": 1}
    assert transformer.attention_kind(mqa) == "MQA"
    assert transformer.kv_bytes_per_token(mqa) == 14_336  # 2 * 28 * 1 * 128 * 2
    wrong = {**QWEN, "num_key_value_heads": QWEN["num_attention_heads"]}
    assert transformer.kv_bytes_per_token(wrong) == 401_408 == 7 * 57_344  # 2 * 28 * 28 * 128 * 2: 28/4 = 7x


def test_sliding_window_caps_the_cache():
    mistral = registry.model("mistralai/Mistral-7B-v0.1").config
    assert transformer.sliding_window_layers(mistral) == 32
    assert transformer.kv_cache_bytes(mistral, 1000) == 131_072_000  # below the window: 1000 * 131,072
    assert transformer.kv_cache_bytes(mistral, 32_768) == 536_870_912  # capped: 4096 * 131,072
    # half the layers windowed at 1024; per layer-token 2*4*128*2 = 2048 B; 4096 tokens:
    # 14 * 4096 * 2048 + 14 * 1024 * 2048 = 14 * 2048 * 5120 = 146,800,640
    mixed = {**QWEN, "sliding_window": 1024, "layer_types": ["sliding_attention", "full_attention"] * 14}
    assert transformer.kv_cache_bytes(mixed, 4096) == 146_800_640
    assert transformer.sliding_window_layers({**QWEN, "sliding_window": 131072, "use_sliding_window": False}) == 0
    assert transformer.kv_cache_bytes(QWEN, 1024) == 58_720_256  # no window: 1024 * 57,344


def test_dense_counts_refuse_mla_and_moe():
    with pytest.raises(ValueError, match="kv_lora_rank"):
        transformer.param_breakdown(registry.model("deepseek-ai/DeepSeek-V3").config)
    with pytest.raises(ValueError, match="num_experts"):
        transformer.param_breakdown(registry.model("Qwen/Qwen3-30B-A3B").config)
    assert transformer.param_count(registry.model("meta-llama/Llama-2-13b-hf").config) == 13_015_864_320


def test_rtx_4090_capacity_by_hand():
    total = memory.device_total_bytes("RTX 4090")
    assert total == 25_757_220_864  # 24,564 MiB * 1,048,576
    budget = memory.kv_budget_bytes(total, 15_231_233_024, 2 * 2**30, 0.92)
    # 25,757,220,864 * 0.92 = 23,696,643,194.88; - 15,231,233,024 - 2,147,483,648 = 6,317,926,522.88
    assert budget == pytest.approx(6_317_926_522.88)
    # one block = 57,344 * 16 = 917,504 B; 917,504 * 6,885 = 6,317,015,040 <= budget < + 917,504
    assert memory.kv_capacity_tokens(budget, 57_344, 16) == 6_885 * 16 == 110_160
    assert memory.max_concurrency(110_160, 8192) == pytest.approx(13.447, abs=1e-3)  # 110,160 / 8,192
    assert memory.max_concurrency(110_160, 32768) == pytest.approx(3.3618, abs=1e-4)
    # the datasheet "24 GB" taken as 10^9 B: 22,080,000,000 - 15,231,233,024 - 2,147,483,648 = 4,701,283,328
    naive = memory.kv_budget_bytes(24e9, 15_231_233_024, 2 * 2**30, 0.92)
    assert naive == pytest.approx(4_701_283_328)
    assert memory.kv_capacity_tokens(naive, 57_344, 16) == 5_123 * 16  # 917,504 * 5,123 = 4,700,372,992


def test_capacity_bad_input():
    with pytest.raises(ValueError, match="nothing"):
        memory.kv_budget_bytes(10e9, 15e9, 0)
    with pytest.raises(ValueError, match="utilization"):
        memory.kv_budget_bytes(25e9, 15e9, 0, utilization=1.5)
    with pytest.raises(ValueError, match="block_size"):
        memory.kv_capacity_tokens(1e9, 57_344, 0)
    with pytest.raises(KeyError, match="RTX 4090"):
        memory.device_total_bytes("RTX 9090")


TOY = GPUFacts(name="toy", memory_gb=1, bandwidth_gb_s=1000, bf16_dense_tflops=10, source="test")  # R = 10


def test_batched_decode_intensity_by_hand():
    # N = 1e9, b = 2, kappa = 1e5, S = 1000: kappa S = 1e8
    assert roofline.decode_bytes_per_step(1e9, 1e5, 1000, 20) == 4e9  # 2e9 + 20 * 1e8
    assert roofline.decode_intensity(1e9, 1e5, 1000, 20) == pytest.approx(10)  # 4e10 / 4e9
    assert roofline.decode_intensity_limit(1e9, 1e5, 1000) == pytest.approx(20)  # 2e9 / 1e8
    assert roofline.decode_bytes_per_step(7_615_616_512, 57_344, 1024) == 15_289_953_280  # 15,231,233,024 + 58,720,256


def test_compute_bound_batch_by_hand():
    assert roofline.ridge_point(TOY) == pytest.approx(10)
    # the matmuls' intensity is 2B/b: it reaches R = 10 at B* = R b / 2 = 10 * 2 / 2 = 10, whatever the context
    assert roofline.compute_bound_batch(TOY) == pytest.approx(10)
    assert roofline.compute_bound_batch(TOY, weight_bytes=0.5) == pytest.approx(2.5)  # 10 * 0.5 / 2
    g = registry.gpu("RTX 4090")  # R = 165.2e12 / 1008e9 = 163.888...
    assert roofline.compute_bound_batch(g) == pytest.approx(163.889, abs=1e-3)  # R * 2 / 2
    assert roofline.linear_intensity(16) == 16  # 2 * 16 / 2
    assert roofline.linear_intensity(16, weight_bytes=0.5) == 64  # 2 * 16 / 0.5


def test_attention_intensity_by_hand():
    # Qwen2.5-7B: 4 * 28 * 28 * 128 = 401,408 FLOPs per cached token / 57,344 B = 7 = 2 * (28 / 4) / 2
    assert roofline.attention_intensity(QWEN) == pytest.approx(7)
    assert roofline.attention_intensity(QWEN, kv_dtype_bytes=1) == pytest.approx(14)  # fp8 cache: half the bytes
    # MHA (Llama-2-13B): 4 * 40 * 40 * 128 / (2 * 40 * 40 * 128 * 2) = 1
    assert roofline.attention_intensity(registry.model("meta-llama/Llama-2-13b-hf").config) == pytest.approx(1)


def test_decode_kernel_floors_by_hand():
    # TOY: 10e12 FLOP/s, 1e12 B/s. M = 7,615,616,512 - 544,997,376 (embedding) = 7,070,619,136; M b = 14,141,238,272 B
    assert roofline.matmul_params(QWEN) == 7_070_619_136
    # B = 1, S = 512: matmuls max(1.414e-3, 14.141238272e-3); attention: 57,344 * 512 = 29,360,128 B -> 29.360128e-6 s
    # (its FLOPs 401,408 * 512 = 205,520,896 -> 20.55e-6 s are less)
    linear, attention = roofline.decode_kernel_floors(TOY, QWEN, 512, 1)
    assert linear == pytest.approx(14.141238272e-3) and attention == pytest.approx(29.360128e-6)
    # B = 100: matmuls compute-bound, 2 * 7,070,619,136 * 100 / 1e13 = 0.1414123827 s;
    # attention still memory-bound: 100 * 29,360,128 / 1e12 = 2.9360128e-3 s (FLOPs: 2.055e-3 s)
    linear, attention = roofline.decode_kernel_floors(TOY, QWEN, 512, 100)
    assert linear == pytest.approx(0.1414123827) and attention == pytest.approx(2.9360128e-3)
    assert linear + attention == pytest.approx(roofline.decode_step_floor(TOY, QWEN, 512, 100))


def test_max_sequences_and_upper_total_by_hand():
    budget = 6_317_926_522.88  # the RTX 4090 budget of test_rtx_4090_capacity_by_hand: 6,885 blocks of 16
    assert memory.max_sequences(budget, 57_344, 8192) == 13  # 8,192 / 16 = 512 blocks each; 6,885 // 512
    assert memory.max_sequences(budget, 57_344, 1000) == 109  # ceil(1000 / 16) = 63 blocks; 6,885 // 63
    assert memory.device_total_upper_bytes("RTX 4090") == 25_757_220_864  # the CUDA total where known
    assert memory.device_total_upper_bytes("H100") == 85_899_345_920  # 80 * 2^30
    with pytest.raises(ValueError, match="context_len"):
        memory.max_sequences(budget, 57_344, 0)


def test_roofline_bad_input():
    with pytest.raises(ValueError, match="batch"):
        roofline.decode_intensity(1e9, 1e5, 1000, batch=0)
    with pytest.raises(ValueError, match="weight_bytes"):
        roofline.compute_bound_batch(TOY, weight_bytes=0)
    with pytest.raises(ValueError, match="batch"):
        roofline.linear_intensity(0)


def test_lab_defaults_match_the_registry():
    kc = load("labs/kv_capacity.py")
    bd = load("labs/batch_decode.py")
    assert kc.GPU_MEMORY_UTILIZATION == registry.VLLM_DEFAULT_GPU_MEMORY_UTILIZATION
    assert kc.parse_args([]).reserve_gib == registry.VLLM_NON_KV_RESERVE_GIB
    assert kc.parse_args([]).model == bd.parse_args([]).model == registry.COURSE_MODEL
    assert bd.parse_args([]).bandwidth_gb_s is None  # the floor takes the detected GPU's from the registry
    assert bd.BATCHES == (1, 2, 4, 8, 16, 32, 64)
    log = (
        "INFO Model loading took 14.2478 GiB and 3.1 s\nINFO Available KV cache memory: 5.91 GiB\n"
        "INFO GPU KV cache size: 110,640 tokens\nINFO Maximum concurrency for 8,192 tokens per request: 13.51x\n"
        "ValueError: ... the estimated maximum model length is 4,096 ...\n"
    )
    assert re.findall(kc.LOG_PATTERNS["reported_max_concurrency"], log) == ["13.51"]
    assert re.findall(kc.LOG_PATTERNS["estimated_max_model_len"], log) == ["4,096"]
