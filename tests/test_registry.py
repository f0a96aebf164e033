"""The fact registry and the formulas derived from it, against hand arithmetic from the sources the registry names."""

from __future__ import annotations

import re

import pytest

from infercourse import fmt, registry, roofline, transformer

QWEN = registry.model("Qwen/Qwen2.5-7B-Instruct").config


def test_qwen_param_count_module_by_module():
    parts = transformer.param_breakdown(QWEN)
    assert parts["embedding"] == 544_997_376 == parts["lm_head"]  # 152,064 * 3,584, untied
    # per layer: q 3584*3584+3584, k and v 3584*512+512 each, o 3584*3584 = 29,364,736
    assert parts["attention"] == 28 * 29_364_736
    assert parts["mlp"] == 28 * 203_685_888  # 3 * 3584 * 18944
    assert parts["norms"] == 28 * 2 * 3584 + 3584
    assert transformer.param_count(QWEN) == 7_615_616_512
    assert transformer.param_count(QWEN) - 2 * 544_997_376 == 6_525_621_760  # non-embedding (card: 6.53B)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("meta-llama/Meta-Llama-3-8B", 8_030_261_248),  # card 8.03B
        ("Qwen/Qwen2.5-0.5B-Instruct", 494_032_768),  # tied embeddings, card 0.49B
        ("Qwen/Qwen3-4B", 4_022_468_096),  # explicit head_dim 128, q/k norms, tied, card 4.0B
    ],
)
def test_other_models_param_counts(name, expected):
    assert transformer.param_count(registry.model(name).config) == expected


@pytest.mark.parametrize(
    "name, kappa",
    [
        ("Qwen/Qwen2.5-7B-Instruct", 57_344),  # 2*28*4*128*2
        ("meta-llama/Meta-Llama-3-8B", 131_072),  # 2*32*8*128*2
        ("Qwen/Qwen3-4B", 147_456),  # 2*36*8*128*2 (head_dim 128, not 2560/32 = 80)
    ],
)
def test_kv_bytes_per_token(name, kappa):
    assert transformer.kv_bytes_per_token(registry.model(name).config) == kappa


def test_weight_bytes_bf16_and_awq():
    assert transformer.weight_bytes(QWEN) == 15_231_233_024  # 2 * N
    assert fmt.gb(transformer.weight_bytes(QWEN)) == "15.23 GB"
    assert fmt.gib(transformer.weight_bytes(QWEN)) == "14.19 GiB"
    # AWQ: 6,525,288,448 quantised weights * (0.5 + 2.5/128) + 2 * 1,090,328,064 fp16 rest
    assert transformer.linear_weight_count(QWEN) == 28 * 233_046_016
    assert transformer.awq_weight_bytes(QWEN, 128) == pytest.approx(6_525_288_448 * 0.51953125 + 2_180_656_128)
    assert fmt.gb(transformer.awq_weight_bytes(QWEN, 128)) == "5.57 GB"


def test_ridge_points():
    assert roofline.ridge_point(registry.gpu("RTX 4090")) == pytest.approx(165.2e12 / 1008e9)
    assert roofline.ridge_point(registry.gpu("H200")) == pytest.approx(989e12 / 4800e9)


def test_time_floor_takes_the_slower_resource():
    g = registry.gpu("RTX 4090")
    assert roofline.time_floor(g, flops=165.2e12, bytes_moved=0) == pytest.approx(1.0)
    assert roofline.time_floor(g, flops=0, bytes_moved=2016e9) == pytest.approx(2.0)


@pytest.mark.parametrize(
    "call",
    [
        lambda: transformer.param_count({"hidden_size": 8}),
        lambda: transformer.kv_bytes_per_token(QWEN, dtype_bytes=0),
        lambda: transformer.param_count({**QWEN, "num_hidden_layers": -1}),
        lambda: transformer.awq_weight_bytes(QWEN, group_size=0),
        lambda: roofline.attainable_flops(registry.gpu(), 0),
        lambda: fmt.gb(-1),
        lambda: fmt.count(float("nan")),
    ],
)
def test_bad_input_raises_value_error(call):
    with pytest.raises(ValueError):
        call()


def test_unknown_names_are_listed():
    with pytest.raises(KeyError, match="RTX 4090"):
        registry.gpu("RTX 9090")
    with pytest.raises(KeyError, match="Qwen/Qwen2.5-7B-Instruct"):
        registry.model("Qwen/Qwen9")


def test_attention_flops_per_token_against_hand_arithmetic():
    # 4 * L * h * d_h * c: 4 * 28 * 28 * 128 = 401,408 per token of context; * 8192 = 3,288,334,336
    assert transformer.attention_flops_per_token(QWEN, 8192) == 3_288_334_336
    assert transformer.attention_flops_per_token(QWEN, 1) == 401_408
    # Qwen3-4B uses its 32 query heads of head_dim 128 (4096 wide, not hidden 2560):
    # 4 * 36 * 32 * 128 = 589,824; * 1024 = 603,979,776
    assert transformer.attention_flops_per_token(registry.model("Qwen/Qwen3-4B").config, 1024) == 603_979_776
    # forward = 2N + attention: 15,231,233,024 + 3,288,334,336 = 18,519,567,360
    assert transformer.forward_flops_per_token(QWEN, 8192) == 18_519_567_360


def test_fp8_weight_bytes():
    # 6,525,288,448 linear weights at 1 B + 1,090,328,064 others at 2 B
    assert transformer.fp8_weight_bytes(QWEN) == 6_525_288_448 + 2 * 1_090_328_064 == 8_705_944_576
    assert fmt.gb(transformer.fp8_weight_bytes(QWEN)) == "8.71 GB"


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "8k"])
def test_attention_flops_bad_context_names_the_argument(bad):
    with pytest.raises(ValueError, match="context_len"):
        transformer.attention_flops_per_token(QWEN, bad)


def test_matmul_params_drop_the_embedding_lookup_and_count_the_head_once():
    assert roofline.matmul_params(QWEN) == 7_615_616_512 - 544_997_376  # untied: head separate, lookup dropped
    tied = registry.model("Qwen/Qwen2.5-0.5B-Instruct").config
    assert roofline.matmul_params(tied) == 494_032_768  # tied: the embedding matrix is the head


def test_decode_step_floor_sums_the_kernels():
    g = registry.gpu("RTX 4090")
    # matmuls: 7,070,619,136 * 2 B = 14,141,238,272 B / 1.008e12 B/s = 14.029006 ms (FLOPs: 0.086 ms)
    # attention at 1,000 tokens: 57,344,000 B / 1.008e12 = 0.056889 ms (FLOPs 401,408 * 1,000: 0.0024 ms)
    assert roofline.decode_step_floor(g, QWEN, 1000) * 1e3 == pytest.approx(14.029006 + 0.056889, abs=1e-5)


def test_prefill_floor_counts_the_head_once():
    g = registry.gpu("RTX 4090")
    # matmuls: 2 * 6,525,621,760 * 4,096 + 2 * 544,997,376 = 53,458,983,452,672 FLOP / 165.2e12 = 323.6016 ms
    # causal attention: 401,408 * 4,096 * 4,097 / 2 = 3,368,076,443,648 FLOP / 165.2e12 = 20.3879 ms
    assert roofline.prefill_floor(g, QWEN, 4096) * 1e3 == pytest.approx(323.6016 + 20.3879, abs=1e-3)


def test_config_only_folder_names():
    # the folder scripts/make_test_models.py writes and run_labs.py looks beside for a lab's own model
    assert registry.config_only_folder("Qwen/Qwen2.5-7B-Instruct") == "qwen2.5-7b-instruct-config"
    assert registry.config_only_folder("allenai/OLMoE-1B-7B-0924-Instruct") == "olmoe-1b-7b-0924-instruct-config"


def test_tflop_format():
    # the page filter `| tflop` (lesson 4A's request FLOPs): 10^12 FLOP, two decimals, thousands separated
    assert fmt.tflop(10_407_057_031_168) == "10.41 TFLOP"
    assert fmt.tflop(1_234_567e12, digits=0) == "1,234,567 TFLOP"


def test_number_format():
    # a notebook's answers and a receipt's comparisons: whole numbers as counts, others to 4 significant digits
    assert (fmt.number(57_344.0), fmt.number(0.0123456), fmt.number(2.5e-07), fmt.number(1234.5678)) == (
        "57,344",
        "0.01235",
        "2.5e-07",
        "1,235",
    )
    with pytest.raises(ValueError, match="finite number"):
        fmt.number(float("nan"))


@pytest.mark.parametrize(
    "entry, names",
    [
        ({"card_params": "1B", "card": ["card", "https://x"]}, "missing ['config']"),
        ({"config": {}, "card_params": "1B", "card": ["card", "https://x"], "revison": "abc"}, "unknown ['revison']"),
        ({"config": {}, "card_params": "1B", "card": "https://x"}, "card 'https://x'"),
    ],
)
def test_a_bad_models_yml_entry_is_named(entry, names):
    """registry.MODELS is read from models.yml: an entry missing a key, with a misspelt key, or with a card that is
    not [where, url] stops the import with a line naming the model and what is wrong."""
    with pytest.raises(ValueError, match=rf"^models\.yml: org/m: .*{re.escape(names)}"):
        registry._model_facts("org/m", entry)
