"""Argument checks shared by the whole project.

Every check raises ``ValueError`` (or ``TypeError`` for a wrong kind of object) whose
message names the argument, the offending value and the allowed range, e.g.
``alpha must be a finite number in [0, 1], got 1.5``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np


def probability(name: str, value: object) -> float:
    """A scalar in [0, 1]."""
    x = _real(name, value)
    if not (0.0 <= x <= 1.0):
        raise ValueError(f"{name} must be a finite number in [0, 1], got {value!r}")
    return x


def probabilities(name: str, value: object) -> np.ndarray:
    """An array (any shape) of values in [0, 1]."""
    arr = _real_array(name, value)
    bad = ~((arr >= 0.0) & (arr <= 1.0))
    if bad.any():
        raise ValueError(f"{name} must hold finite numbers in [0, 1], got {arr[bad].flat[0]!r}")
    return arr


def cost(name: str, value: object) -> float:
    """A finite scalar >= 0."""
    x = _real(name, value)
    if x < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return x


def costs(name: str, value: object) -> np.ndarray:
    """An array (any shape) of finite values >= 0."""
    arr = _real_array(name, value)
    bad = ~(arr >= 0.0)
    if bad.any():
        raise ValueError(f"{name} must hold finite numbers >= 0, got {arr[bad].flat[0]!r}")
    return arr


def count(name: str, value: object, minimum: int = 0) -> int:
    """An integer >= minimum (bool and non-integral floats are refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def counts(name: str, value: object, minimum: int = 0) -> np.ndarray:
    """An integer array (any shape) with entries >= minimum."""
    arr = np.asarray(value)
    if arr.dtype == bool or arr.dtype.kind not in "iuf":
        raise ValueError(f"{name} must hold integers >= {minimum}, got {value!r}")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise ValueError(f"{name} must hold integers >= {minimum}, got {value!r}")
    arr = arr.astype(np.int64)
    if (arr < minimum).any():
        raise ValueError(
            f"{name} must hold integers >= {minimum}, got {int(arr[arr < minimum].flat[0])}"
        )
    return arr


def same_length(**named: Sequence) -> int:
    """All sequences have one length; returns it."""
    lengths = {name: len(v) for name, v in named.items()}
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"len({n})={k}" for n, k in lengths.items())
        raise ValueError(f"{' and '.join(lengths)} must have the same length, got {shown}")
    return next(iter(lengths.values()), 0)


def _real(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return x


def _real_array(name: str, value: object) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an array of real numbers, got {value!r}") from None
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must hold finite numbers, got {value!r}")
    return arr
