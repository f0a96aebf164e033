"""What every lab script shares, in five parts a reader can take one at a time:

- :mod:`labkit.cli`: the argument parser every lab starts from, argparse types that refuse bad input
  before anything slow starts, progress lines and the one-line failure;
- :mod:`labkit.machine`: the GPU, driver and versions, the preflight, the environment a run depends on;
- :mod:`labkit.engine`: what a lab does before importing vLLM, starting ``LLM``, one engine per child
  process, and vLLM's root cause when an engine does not start;
- :mod:`labkit.measure`: per-request TTFT and TPOT, the decode step time of a batch, the engine's cache
  config and metrics, from the engine's own clock;
- :mod:`labkit.server`: ``vllm serve`` on loopback, a streamed completion and the server's ``/metrics``;
- :mod:`labkit.receipt`: the JSON receipt of a run.

A lab runs as ``python snippets/labs/<lab>.py``; Python puts the script's folder on ``sys.path``, so the
lab imports each helper from its part (``from labkit.measure import request_times``: the reader sees where it
lives); every public name of the parts is also here, ``from labkit import ...``. To run a lab elsewhere, copy
it with this folder beside it.

Standard library only at import time: vLLM is never imported here, and torch only inside
:func:`labkit.machine.machine` when ``nvidia-smi`` is missing. The vLLM API check
(``scripts/check_vllm_api.py``) analyses these files like a lab: the vLLM objects read here are
``RequestOutput.metrics`` fields (:func:`request_times`) and ``LLM.get_metrics()`` entries
(:func:`metric_totals`, :func:`cache_config`); every string handed to vLLM or read from it is a
module-level constant (metric names, environment variables, log patterns), so that the checker can
compare them with the pinned releases.

The receipt's envelope (every key but ``settings``, ``units`` and ``results``) is the same for every lab;
``infercourse.labs`` validates it, and each lab's spec there validates its rows.
"""

from .cli import (
    DTYPES,
    check_grid,
    check_model_arg,
    check_receipt_arg,
    engine_flags,
    fail,
    lab_parser,
    port,
    positive,
    progress,
    whole,
    whole_list,
)
from .engine import (
    GENERIC_CAUSES,
    ROOT_CAUSE,
    child_run,
    engine_core_in_process,
    engine_failure,
    prepare,
    root_cause,
    run_lab,
    start_llm,
)
from .machine import (
    CPU_KV_DEFAULT_GIB,
    CPU_KV_ENV,
    ENGINE_IN_PROCESS_ENV,
    GPU_MEMORY_UTILIZATION,
    HUB_ENV,
    LOG_CONFIG_ENV,
    MIN_DRIVER_FOR_WHEEL,
    NOT_INSTALLED,
    THREADS_ENV,
    WHEEL_CUDA_MAJOR,
    driver_cuda_version,
    git_commit,
    gpu_count,
    machine,
    nvidia_smi,
    preflight,
    preflight_line,
    torch_cuda_major,
    versions,
)
from .measure import (
    CACHE_CONFIG_METRIC,
    FINISHED_METRIC,
    PREEMPTIONS_METRIC,
    STEP_TOKENS_METRIC,
    cache_config,
    decode_step_s,
    decode_step_sweep,
    kv_bytes_per_token,
    metric_totals,
    param_count,
    random_prompt,
    request_times,
)
from .receipt import (
    REPOSITORY,
    SCHEMA,
    check_receipt_folder,
    measured_rows,
    portable_path,
    registry_bandwidth_gb_s,
    repository_path,
    write_partial,
    write_receipt,
)
from .server import (
    COMPLETIONS_PATH,
    CPU_BUILD_DIST,
    LOOPBACK,
    SERVER_START_TIMEOUT_S,
    SERVER_STOP_TIMEOUT_S,
    check_port_arg,
    free_port,
    port_free,
    serve,
    served_cache_config,
    served_metric_totals,
    served_metrics,
    served_token_pool,
    stream_completion,
    vllm_cli,
)

__all__ = [
    "CACHE_CONFIG_METRIC",
    "COMPLETIONS_PATH",
    "CPU_BUILD_DIST",
    "CPU_KV_DEFAULT_GIB",
    "CPU_KV_ENV",
    "ENGINE_IN_PROCESS_ENV",
    "FINISHED_METRIC",
    "GENERIC_CAUSES",
    "GPU_MEMORY_UTILIZATION",
    "HUB_ENV",
    "LOG_CONFIG_ENV",
    "LOOPBACK",
    "MIN_DRIVER_FOR_WHEEL",
    "NOT_INSTALLED",
    "PREEMPTIONS_METRIC",
    "REPOSITORY",
    "ROOT_CAUSE",
    "SCHEMA",
    "SERVER_START_TIMEOUT_S",
    "SERVER_STOP_TIMEOUT_S",
    "STEP_TOKENS_METRIC",
    "THREADS_ENV",
    "DTYPES",
    "WHEEL_CUDA_MAJOR",
    "cache_config",
    "check_grid",
    "check_model_arg",
    "check_port_arg",
    "check_receipt_arg",
    "check_receipt_folder",
    "child_run",
    "decode_step_s",
    "decode_step_sweep",
    "driver_cuda_version",
    "engine_core_in_process",
    "engine_failure",
    "engine_flags",
    "fail",
    "free_port",
    "git_commit",
    "gpu_count",
    "kv_bytes_per_token",
    "lab_parser",
    "machine",
    "metric_totals",
    "nvidia_smi",
    "param_count",
    "port",
    "port_free",
    "measured_rows",
    "portable_path",
    "positive",
    "preflight",
    "preflight_line",
    "prepare",
    "progress",
    "random_prompt",
    "registry_bandwidth_gb_s",
    "repository_path",
    "request_times",
    "root_cause",
    "run_lab",
    "serve",
    "served_cache_config",
    "served_metric_totals",
    "served_metrics",
    "served_token_pool",
    "start_llm",
    "stream_completion",
    "torch_cuda_major",
    "versions",
    "vllm_cli",
    "whole",
    "whole_list",
    "write_partial",
    "write_receipt",
]
