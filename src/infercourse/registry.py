"""The fact registry: every input number the course uses, once, with its source and unit.

Derived numbers (parameter counts, KV bytes per token, ridge points, floors) are never stored
here; they are computed from these facts by :mod:`infercourse.transformer` and
:mod:`infercourse.roofline`.

Units: memory in GB (10^9 bytes), bandwidth in GB/s (10^9 bytes per second), compute in
TFLOP/s (10^12 FLOP per second), dense (no 2:4 sparsity) with FP32 accumulate unless a field
says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping


@dataclass(frozen=True)
class ModelFacts:
    """A public model's ``config.json`` values that the course's arithmetic reads.

    Attributes:
        name: the Hugging Face repository id, e.g. ``"Qwen/Qwen2.5-7B-Instruct"``.
        config: the subset of ``config.json`` the formulas need, keys spelled as in the file.
        source: where the values were read.
        card_params: the parameter count the model card states, as text (e.g. ``"7.61B"``), for
            a reader to compare with the count derived from ``config``.
    """

    name: str
    config: Mapping[str, Any]
    source: str
    card_params: str


@dataclass(frozen=True)
class GPUFacts:
    """Datasheet figures of one GPU.

    Attributes:
        name: marketing name, e.g. ``"RTX 4090"``.
        memory_gb: device memory in GB (10^9 bytes), as the vendor states it.
        bandwidth_gb_s: peak memory bandwidth in GB/s (10^9 bytes/s).
        bf16_dense_tflops: peak BF16 tensor-core throughput in TFLOP/s, dense (no sparsity),
            FP32 accumulate (what vLLM's GEMMs use).
        source: where the figures come from; "secondary" where no vendor page was found.
        note: anything a reader must know to use the figures (e.g. the FP16-accumulate rate).
    """

    name: str
    memory_gb: float
    bandwidth_gb_s: float
    bf16_dense_tflops: float
    source: str
    note: str = ""


def _frozen(config: dict[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(config))


_QWEN_SOURCE = "config.json of Hugging Face `{repo}` (checked in the project's FACTS.md)"

MODELS: Mapping[str, ModelFacts] = MappingProxyType(
    {
        "Qwen/Qwen2.5-7B-Instruct": ModelFacts(
            name="Qwen/Qwen2.5-7B-Instruct",
            config=_frozen(
                {
                    "model_type": "qwen2",
                    "hidden_size": 3584,
                    "intermediate_size": 18944,
                    "num_hidden_layers": 28,
                    "num_attention_heads": 28,
                    "num_key_value_heads": 4,
                    "vocab_size": 152064,
                    "tie_word_embeddings": False,
                    "max_position_embeddings": 32768,
                    "rope_theta": 1000000.0,
                    "torch_dtype": "bfloat16",
                }
            ),
            source=_QWEN_SOURCE.format(repo="Qwen/Qwen2.5-7B-Instruct"),
            card_params="7.61B (6.53B non-embedding)",
        ),
        "Qwen/Qwen2.5-0.5B-Instruct": ModelFacts(
            name="Qwen/Qwen2.5-0.5B-Instruct",
            config=_frozen(
                {
                    "model_type": "qwen2",
                    "hidden_size": 896,
                    "intermediate_size": 4864,
                    "num_hidden_layers": 24,
                    "num_attention_heads": 14,
                    "num_key_value_heads": 2,
                    "vocab_size": 151936,
                    "tie_word_embeddings": True,
                    "max_position_embeddings": 32768,
                    "torch_dtype": "bfloat16",
                }
            ),
            source=_QWEN_SOURCE.format(repo="Qwen/Qwen2.5-0.5B-Instruct"),
            card_params="0.49B",
        ),
        "meta-llama/Meta-Llama-3-8B": ModelFacts(
            name="meta-llama/Meta-Llama-3-8B",
            config=_frozen(
                {
                    "model_type": "llama",
                    "hidden_size": 4096,
                    "intermediate_size": 14336,
                    "num_hidden_layers": 32,
                    "num_attention_heads": 32,
                    "num_key_value_heads": 8,
                    "vocab_size": 128256,
                    "tie_word_embeddings": False,
                    "attention_bias": False,
                    "max_position_embeddings": 8192,
                    "torch_dtype": "bfloat16",
                }
            ),
            source="config.json of Hugging Face `meta-llama/Meta-Llama-3-8B` (values recalled from the public file; the derived total matches the card)",
            card_params="8.03B",
        ),
        "Qwen/Qwen3-4B": ModelFacts(
            name="Qwen/Qwen3-4B",
            config=_frozen(
                {
                    "model_type": "qwen3",
                    "hidden_size": 2560,
                    "intermediate_size": 9728,
                    "num_hidden_layers": 36,
                    "num_attention_heads": 32,
                    "num_key_value_heads": 8,
                    "head_dim": 128,
                    "vocab_size": 151936,
                    "tie_word_embeddings": True,
                    "attention_bias": False,
                    "max_position_embeddings": 40960,
                    "torch_dtype": "bfloat16",
                }
            ),
            source="config.json of Hugging Face `Qwen/Qwen3-4B` (values recalled from the public file; the derived total matches the card)",
            card_params="4.0B",
        ),
        "meta-llama/Llama-2-13b-hf": ModelFacts(
            name="meta-llama/Llama-2-13b-hf",
            config=_frozen(
                {
                    "model_type": "llama",
                    "hidden_size": 5120,
                    "intermediate_size": 13824,
                    "num_hidden_layers": 40,
                    "num_attention_heads": 40,
                    "num_key_value_heads": 40,  # MHA: one KV head per attention head
                    "vocab_size": 32000,
                    "tie_word_embeddings": False,
                    "attention_bias": False,
                    "max_position_embeddings": 4096,
                    "torch_dtype": "float16",
                }
            ),
            source="config.json of Hugging Face `meta-llama/Llama-2-13b-hf` (recalled from public config, secondary; layers, heads and head size checked in FACTS.md)",
            card_params="13B",
        ),
        "mistralai/Mistral-7B-v0.1": ModelFacts(
            name="mistralai/Mistral-7B-v0.1",
            config=_frozen(
                {
                    "model_type": "mistral",
                    "hidden_size": 4096,
                    "intermediate_size": 14336,
                    "num_hidden_layers": 32,
                    "num_attention_heads": 32,
                    "num_key_value_heads": 8,
                    "vocab_size": 32000,
                    "tie_word_embeddings": False,
                    "max_position_embeddings": 32768,
                    "sliding_window": 4096,  # every layer attends to the last 4096 tokens only
                    "torch_dtype": "bfloat16",
                }
            ),
            source="config.json of Hugging Face `mistralai/Mistral-7B-v0.1` (recalled from public config, secondary)",
            card_params="7.3B",
        ),
        "deepseek-ai/DeepSeek-V3": ModelFacts(
            name="deepseek-ai/DeepSeek-V3",
            config=_frozen(
                {
                    "model_type": "deepseek_v3",
                    "hidden_size": 7168,
                    "num_hidden_layers": 61,
                    "num_attention_heads": 128,
                    "num_key_value_heads": 128,
                    "kv_lora_rank": 512,  # MLA: the cached, compressed latent per token and layer
                    "qk_rope_head_dim": 64,  # MLA: the decoupled RoPE key, cached beside the latent
                    "qk_nope_head_dim": 128,
                    "v_head_dim": 128,
                }
            ),
            source="config.json of Hugging Face `deepseek-ai/DeepSeek-V3` (recalled from public config, secondary; layers, kv_lora_rank and qk_rope_head_dim checked in FACTS.md)",
            card_params="671B total, 37B activated per token (MoE)",
        ),
    }
)
"""Model configs by Hugging Face id. The course's model is :data:`COURSE_MODEL`."""

COURSE_MODEL = "Qwen/Qwen2.5-7B-Instruct"

_ADA_WHITEPAPER = "NVIDIA Ada GPU architecture whitepaper, appendix A"

GPUS: Mapping[str, GPUFacts] = MappingProxyType(
    {
        "RTX 4090": GPUFacts(
            name="RTX 4090",
            memory_gb=24,
            bandwidth_gb_s=1008,
            bf16_dense_tflops=165.2,
            source=_ADA_WHITEPAPER,
            note="330.3 TFLOP/s with FP16 accumulate; GeForce cards run FP32 accumulate at half rate.",
        ),
        "H200": GPUFacts(
            name="H200 SXM",
            memory_gb=141,
            bandwidth_gb_s=4800,
            bf16_dense_tflops=989,
            source="NVIDIA H200 datasheet",
            note="1979 TFLOP/s is the 2:4-sparse figure.",
        ),
        "H100": GPUFacts(
            name="H100 SXM",
            memory_gb=80,
            bandwidth_gb_s=3350,
            bf16_dense_tflops=989,
            source="NVIDIA H100 datasheet",
            note="1979 TFLOP/s is the 2:4-sparse figure.",
        ),
        "A100": GPUFacts(
            name="A100 80GB SXM",
            memory_gb=80,
            bandwidth_gb_s=2039,
            bf16_dense_tflops=312,
            source="NVIDIA A100 datasheet",
        ),
    }
)
"""GPU datasheet figures by short name. The course's lab card is :data:`LAB_GPU`."""

LAB_GPU = "RTX 4090"
"""The card the labs are written for (AutoDL's RTX 4090, 24 GB)."""

VLLM_GPU_VERSION = "0.26.0"
"""The vLLM release the labs and their API check are pinned to on a GPU."""

VLLM_DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
"""``gpu_memory_utilization`` default of ``vllm.LLM`` in 0.26.0 (read from its source; FACTS.md)."""

GPU_MEMORY_TOTAL_MIB: Mapping[str, int] = MappingProxyType({"RTX 4090": 24564})
"""Total device memory as CUDA reports it (``nvidia-smi --query-gpu=memory.total``, the total of
``torch.cuda.mem_get_info``), in MiB (2^20 bytes). vLLM multiplies *this* by
``gpu_memory_utilization``. The datasheet's "24 GB" is really 24 GiB of GDDR6X (12 chips of
16 Gbit), less a little the driver keeps. Secondary: the value widely published in ``nvidia-smi``
output for the RTX 4090; a lab receipt records the real figure of its card."""

VLLM_NON_KV_RESERVE_GIB = 2.0
"""ASSUMPTION (labelled as such on every page that uses it), GiB: memory vLLM keeps besides the
weights and the KV cache on a 24 GB card at its defaults (8,192 batched tokens): the activation
peak of its profiling run, non-torch memory (CUDA context, cuBLAS workspaces) and CUDA graphs.
Public vLLM start-up logs of 7-8B models on 24 GB cards show about 1.8-2 GiB; lab 1A measures it."""

VLLM_DEFAULT_BLOCK_SIZE = 16
"""Tokens per KV-cache block of vLLM on CUDA by default (the paging unit; secondary, recalled from
vLLM's ``CacheConfig``); the cache is allocated in whole blocks."""

AWQ_GROUP_SIZE = 128
"""Group size of ``Qwen/Qwen2.5-7B-Instruct-AWQ`` (its ``quantization_config``)."""


def model(name: str = COURSE_MODEL) -> ModelFacts:
    """Return the registry entry for a model id.

    Raises:
        KeyError: naming the unknown id and listing the known ones.
    """
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; the registry has: {', '.join(MODELS)}") from None


def gpu(name: str = LAB_GPU) -> GPUFacts:
    """Return the registry entry for a GPU short name (``"RTX 4090"``, ``"H200"``, ...).

    Raises:
        KeyError: naming the unknown GPU and listing the known ones.
    """
    try:
        return GPUS[name]
    except KeyError:
        raise KeyError(f"unknown GPU {name!r}; the registry has: {', '.join(GPUS)}") from None


@dataclass(frozen=True)
class RentalFacts:
    """What a lab costs on a rented card: the price and the assumptions behind a time estimate.

    Attributes:
        card: the GPU's short name in :data:`GPUS`.
        cny_per_hour: on-demand price in yuan per hour.
        download_mb_s: assumed model download speed in MB/s (10^6 bytes/s).
        engine_start_min: assumed vLLM start-up (weights load, profiling, CUDA-graph capture), minutes.
        source: where the figures come from, and how sure they are.
    """

    card: str
    cny_per_hour: float
    download_mb_s: float
    engine_start_min: float
    source: str


AUTODL_RTX_4090 = RentalFacts(
    card="RTX 4090",
    cny_per_hour=2.0,
    download_mb_s=50,
    engine_start_min=2,
    source=(
        "secondary, unverified: AutoDL's on-demand RTX 4090 price as commonly quoted (about 2 yuan/h; "
        "check the console, prices vary by region and time); download speed and start-up time are "
        "the course's assumptions, not measurements"
    ),
)
"""The lab card the cost estimates in lab boxes use."""

VLLM_LARGE_DEVICE_MIN_GIB = 70
"""vLLM 0.26.0 gives larger scheduler defaults to a device whose total memory is at least this many
GiB and whose name does not contain "a100" (``EngineArgs.get_batch_defaults``,
vllm/engine/arg_utils.py:2460 at v0.26.0)."""

VLLM_SCHEDULER_DEFAULTS: Mapping[tuple[str, str], tuple[int, int]] = MappingProxyType({
    ("large", "LLM"): (16384, 1024),
    ("large", "vllm serve"): (8192, 1024),
    ("other", "LLM"): (8192, 256),
    ("other", "vllm serve"): (2048, 256),
})
"""(``max_num_batched_tokens``, ``max_num_seqs``) that vLLM 0.26.0 sets when the user sets neither,
by device class (:func:`vllm_device_class`) and entry point (``LLM(...)`` or ``vllm serve``):
vllm/engine/arg_utils.py:2460-2479 at v0.26.0 (``UsageContext.LLM_CLASS`` / ``OPENAI_API_SERVER``).
Not doubled: the default ``performance_mode`` is "balanced" (doubling is for "throughput")."""


def vllm_device_class(gpu_name: str) -> str:
    """``"large"`` or ``"other"``: which of vLLM 0.26.0's scheduler defaults a GPU gets.

    ``"large"`` when the device's total memory is at least :data:`VLLM_LARGE_DEVICE_MIN_GIB` GiB and
    it is not an A100. The datasheet's GB (10^9 B) is used as the total; every registry GPU is far
    from the threshold either way (RTX 4090: 22.4 GiB; H100: 74.5 GiB).

    Raises:
        KeyError: ``gpu_name`` is not in the registry.
    """
    card = gpu(gpu_name)
    large = card.memory_gb * 1e9 >= VLLM_LARGE_DEVICE_MIN_GIB * 2**30 and "a100" not in card.name.lower()
    return "large" if large else "other"


def vllm_scheduler_defaults(gpu_name: str, entry_point: str = "LLM") -> tuple[int, int]:
    """(``max_num_batched_tokens``, ``max_num_seqs``) vLLM 0.26.0 uses on ``gpu_name`` by default.

    Args:
        gpu_name: a registry GPU.
        entry_point: ``"LLM"`` (the Python class) or ``"vllm serve"``.

    Raises:
        KeyError: an unknown GPU or entry point.
    """
    key = (vllm_device_class(gpu_name), entry_point)
    if key not in VLLM_SCHEDULER_DEFAULTS:
        raise KeyError(f"unknown entry point {entry_point!r}; use 'LLM' or 'vllm serve'")
    return VLLM_SCHEDULER_DEFAULTS[key]
