"""The one validator for positive numbers (infercourse.checks), as the formula modules use it."""

from __future__ import annotations

import dataclasses
import math

import pytest

from infercourse import memory, registry, roofline
from infercourse.checks import positive


@pytest.mark.parametrize("value", [1, 0.5, 2**40, 1e-300])
def test_positive_returns_a_finite_positive_number_unchanged(value):
    assert positive("x", value) is value


@pytest.mark.parametrize("value", [0, -1, -0.0, math.inf, -math.inf, math.nan, True, "3", None])
def test_positive_refuses_with_one_clear_line(value):
    with pytest.raises(ValueError, match=r"^batch must be a positive finite number, got "):
        positive("batch", value)


@pytest.mark.parametrize("bad", [math.inf, math.nan])
def test_roofline_and_memory_agree_on_infinity_and_nan(bad):
    with pytest.raises(ValueError, match="weight_bytes must be a positive finite number"):
        roofline.linear_intensity(8, weight_bytes=bad)
    with pytest.raises(ValueError, match="context_len must be a positive finite number"):
        memory.max_concurrency(1024, bad)


def test_device_total_upper_bytes_is_a_whole_number_of_bytes(monkeypatch):
    # the A100 has no CUDA-reported total in the registry: its datasheet "GB" read as GiB
    assert "A100" not in registry.GPU_MEMORY_TOTAL_MIB
    a100 = registry.gpu("A100")
    total = memory.device_total_upper_bytes("A100")
    assert type(total) is int and total == round(a100.memory_gb) * 1_073_741_824
    # the H200 has one: 143,771 MiB = 150,754,820,096 B, below its 141 "GB" read as GiB (151,397,597,184)
    assert memory.device_total_upper_bytes("H200") == 143_771 * 1_048_576 == 150_754_820_096
    # memory_gb is declared float: a datasheet stating 80.0 GB must still give whole bytes, an int
    # (it returned the float 85899345920.0): 80 * 1,073,741,824 = 85,899,345,920
    h100 = dataclasses.replace(registry.gpu("H100"), memory_gb=80.0)
    monkeypatch.setattr(registry, "gpu", lambda name: h100)
    total = memory.device_total_upper_bytes("H100")
    assert type(total) is int and total == 85_899_345_920
