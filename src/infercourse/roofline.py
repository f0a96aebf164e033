"""Roofline arithmetic: ridge points and the time floors a GPU's datasheet allows.

Units: FLOP/s and bytes/s in SI (10^12, 10^9) as the registry states them; times in seconds.
"""

from __future__ import annotations

from infercourse.registry import GPUFacts


def ridge_point(gpu: GPUFacts) -> float:
    """Arithmetic intensity (FLOP/byte) above which a kernel is compute-bound on ``gpu``.

    peak BF16 dense FLOP/s (FP32 accumulate) / peak memory bandwidth in bytes/s.
    """
    return gpu.bf16_dense_tflops * 1e12 / (gpu.bandwidth_gb_s * 1e9)


def attainable_flops(gpu: GPUFacts, intensity: float) -> float:
    """Roofline: min(peak FLOP/s, intensity * bandwidth), in FLOP/s.

    Raises:
        ValueError: ``intensity`` is not positive.
    """
    if intensity <= 0:
        raise ValueError(f"intensity must be positive (FLOP/byte), got {intensity!r}")
    return min(gpu.bf16_dense_tflops * 1e12, intensity * gpu.bandwidth_gb_s * 1e9)


def time_floor(gpu: GPUFacts, flops: float, bytes_moved: float) -> float:
    """The least time (s) a step can take on ``gpu``: max(flops / peak, bytes / bandwidth).

    Raises:
        ValueError: a negative count.
    """
    if flops < 0 or bytes_moved < 0:
        raise ValueError(f"flops and bytes_moved must be non-negative, got {flops!r}, {bytes_moved!r}")
    return max(flops / (gpu.bf16_dense_tflops * 1e12), bytes_moved / (gpu.bandwidth_gb_s * 1e9))
