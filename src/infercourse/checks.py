"""Argument checks shared by the formula modules: one place decides what a valid size or count is."""

from __future__ import annotations

import math


def positive(name: str, value: float) -> float:
    """Return ``value`` if it is a finite number greater than 0 (an int or float, not a bool).

    Used for every size, count, length and width a formula takes (bytes, tokens, FLOP/byte, ...);
    the unit is the caller's.

    Raises:
        ValueError: ``value`` is not a number, is a bool, is 0 or negative, or is inf or nan; the
            message names ``name`` and says what is expected.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return value


def whole(name: str, value: int, least: int = 1) -> int:
    """Return ``value`` if it is an integer (not a bool) of at least ``least``.

    Used for every count a formula takes whole (tokens, blocks, batch sizes, sequences); the unit is
    the caller's.

    Raises:
        ValueError: ``value`` is not an int, is a bool, or is below ``least``; the message names
            ``name`` and says what is expected.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    return value


def nonnegative(name: str, value: float) -> float:
    """Return ``value`` if it is a finite number of at least 0 (an int or float, not a bool).

    Used for the amounts a formula allows to be nil: a latency, a byte or FLOP count, a reserve; the
    unit is the caller's.

    Raises:
        ValueError: ``value`` is not a number, is a bool, is negative, or is inf or nan; the message
            names ``name`` and says what is expected.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return value
