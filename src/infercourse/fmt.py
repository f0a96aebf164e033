"""How numbers are written on the pages: one place, so GB and GiB are never mixed up.

Every function returns a string and raises ``ValueError`` on a value it cannot write honestly
(NaN, infinity, or a negative byte count).
"""

from __future__ import annotations

import math

GB = 10**9
"""Bytes in a gigabyte (SI); datasheets and checkpoint sizes use it."""
GIB = 2**30
"""Bytes in a gibibyte; ``nvidia-smi`` and PyTorch memory reports use it."""


def _finite(x: float) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise ValueError(f"expected a finite number, got {x!r}")
    return x


def count(x: float) -> str:
    """An integer with thousands separators: ``7615616512`` -> ``"7,615,616,512"`` (rounds floats)."""
    return f"{round(_finite(x)):,}"


def number(x: float) -> str:
    """A whole number as :func:`count` writes it, any other to 4 significant digits: ``57344.0`` ->
    ``"57,344"``, ``0.0123456`` -> ``"0.01235"``, ``2.5e-07`` -> ``"2.5e-07"``."""
    return count(x) if float(_finite(x)).is_integer() else f"{x:,.4g}"


def fixed(x: float, digits: int = 1) -> str:
    """A number with ``digits`` decimals and thousands separators: ``1020.07`` -> ``"1,020.1"``."""
    return f"{_finite(x):,.{digits}f}"


def _bytes(x: float) -> float:
    if _finite(x) < 0:
        raise ValueError(f"a byte count cannot be negative, got {x!r}")
    return x


def gb(num_bytes: float, digits: int = 2) -> str:
    """Bytes as GB (10^9): ``15231233024`` -> ``"15.23 GB"``."""
    return f"{_bytes(num_bytes) / GB:,.{digits}f} GB"


def gib(num_bytes: float, digits: int = 2) -> str:
    """Bytes as GiB (2^30): ``15231233024`` -> ``"14.19 GiB"``."""
    return f"{_bytes(num_bytes) / GIB:,.{digits}f} GiB"


def tflop(flops: float, digits: int = 2) -> str:
    """FLOPs as TFLOP (10^12): ``10407057031168`` -> ``"10.41 TFLOP"``."""
    return f"{_finite(flops) / 1e12:,.{digits}f} TFLOP"


def pct(fraction: float, digits: int = 1) -> str:
    """A fraction as a percentage: ``0.9939`` -> ``"99.4 %"``."""
    return f"{_finite(fraction) * 100:.{digits}f} %"


def ms(seconds: float, digits: int = 1) -> str:
    """Seconds as milliseconds: ``0.01511`` -> ``"15.1 ms"``."""
    return f"{_finite(seconds) * 1e3:,.{digits}f} ms"
