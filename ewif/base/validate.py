"""Argument checks shared by the whole project (ewif, simulate and realrun), used at public
boundaries: internal helpers trust their callers.

Every check raises ``ValueError`` (or ``TypeError`` for a wrong kind of object) whose
message names the argument, the offending value and the allowed range, e.g.
``alpha must be a finite number in [0, 1], got 1.5``.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Callable, Iterable, Sequence

import numpy as np


def probability(name: str, value: object) -> float:
    """A scalar in [0, 1]."""
    x = real(name, value)
    if not (0.0 <= x <= 1.0):
        raise ValueError(f"{name} must be a finite number in [0, 1], got {shown(value)}")
    return x


def probabilities(name: str, value: object) -> np.ndarray:
    """An array (any shape, scalars included) of values in [0, 1]."""
    return _array_of(name, value, probability, lambda a: (a >= 0.0) & (a <= 1.0), "in [0, 1]")


def cost(name: str, value: object) -> float:
    """A finite scalar >= 0."""
    x = real(name, value)
    if x < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {shown(value)}")
    return x


def costs(name: str, value: object) -> np.ndarray:
    """An array (any shape, scalars included) of finite values >= 0."""
    return _array_of(name, value, cost, lambda a: a >= 0.0, ">= 0")


def _array_of(
    name: str,
    value: object,
    scalar: Callable[[str, object], float],
    ok: Callable[[np.ndarray], np.ndarray],
    allowed: str,
) -> np.ndarray:
    """A scalar checked by ``scalar`` (as a 0-d array), or an array of finite numbers all
    ``ok``; the message names the first value that is not (``allowed`` says what is)."""
    if np.ndim(value) == 0:
        return np.asarray(scalar(name, _item(value)))
    arr = real_array(name, value)
    bad = ~ok(arr)
    if bad.any():
        raise ValueError(
            f"{name} must hold finite numbers {allowed}, got {shown(arr[bad].flat[0])}"
        )
    return arr


def count(name: str, value: object, minimum: int = 0) -> int:
    """An integer >= minimum (bool and non-integral floats are refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {shown(value)}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {shown(value)}")
    return int(value)


def counts(name: str, value: object, minimum: int = 0) -> np.ndarray:
    """An integer array (any shape, scalars included) with entries >= minimum."""
    try:
        scalar = np.ndim(value) == 0
    except ValueError:  # ragged nesting
        raise ValueError(
            f"{name} must be a rectangular array of integers >= {minimum}, got {shown(value)}"
        ) from None
    if scalar:
        return np.asarray(count(name, _item(value), minimum))
    try:
        if _has_bool(value):
            raise ValueError
        arr = np.asarray(value)
    except ValueError:  # ragged nesting, or a bool that numpy would read as 0/1
        raise ValueError(f"{name} must hold integers >= {minimum}, got {shown(value)}") from None
    if arr.dtype.kind in "iu" and (arr.size == 0 or arr.min() >= minimum):
        return arr.astype(np.int64, copy=False)
    if arr.dtype.kind not in "iuf" or (
        arr.dtype.kind == "f" and not (np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)))
    ):
        raise ValueError(f"{name} must hold integers >= {minimum}, got {shown(value)}")
    arr = arr.astype(np.int64)
    if (arr < minimum).any():
        raise ValueError(
            f"{name} must hold integers >= {minimum}, got {int(arr[arr < minimum].flat[0])}"
        )
    return arr


def budget_matrix(name: str, value: object, n: int) -> np.ndarray:
    """The ``n×n`` budget matrix K of Algorithm 1: non-negative integers, upper-triangular
    (``k_rj`` is the budget of drafter ``j`` when model ``r − 1`` reviews, and a model only
    reviews smaller ones)."""
    K = counts(name, value)
    if K.shape != (n, n):
        raise ValueError(
            f"{name} must have shape ({n}, {n}) (one row per reviewer), got shape {K.shape}"
        )
    low = np.argwhere(np.tril(K, -1))
    if len(low):
        r, j = (int(v) + 1 for v in low[0])
        raise ValueError(
            f"{name} must be upper-triangular: k_{r}{j} = {K[r - 1, j - 1]} is below the "
            f"diagonal (model {r - 1} can only review smaller models {r}..{n})"
        )
    return K


def prompt(name: str, value: Iterable[object]) -> list[int]:
    """A prompt: a non-empty list of token ids, as Python ints (their range is the model's
    to check)."""
    ids = [int(t) for t in value]
    if not ids:
        raise ValueError(f"{name} must hold at least one token id, got an empty prompt")
    return ids


def prompts(name: str, value: Iterable[Iterable[object]]) -> list[list[int]]:
    """At least one prompt, each checked by :func:`prompt`."""
    out = [prompt(f"{name}[{i}]", p) for i, p in enumerate(value)]
    if not out:
        raise ValueError(f"{name} must hold at least one prompt")
    return out


def same_length(**named: Sequence) -> int:
    """All sequences have one length; returns it."""
    lengths = {name: len(v) for name, v in named.items()}
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"len({n})={k}" for n, k in lengths.items())
        raise ValueError(f"{' and '.join(lengths)} must have the same length, got {shown}")
    return next(iter(lengths.values()), 0)


def _item(value: object) -> object:
    """A 0-d numpy array or numpy scalar as the Python scalar it holds."""
    return value.item() if isinstance(value, np.ndarray | np.generic) else value


def real(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {shown(value)}")
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(f"{name} must be finite, got {shown(value)}")
    return x


def _has_bool(value: object) -> bool:
    """True if a (nested) list or tuple holds a bool, which numpy would read as 0/1."""
    if isinstance(value, list | tuple):
        return any(isinstance(v, bool) or _has_bool(v) for v in value)
    return False


def real_array(name: str, value: object) -> np.ndarray:
    try:
        if _has_bool(value):
            raise TypeError
        raw = np.asarray(value)
        if raw.dtype.kind not in "iuf":  # refuse bools, strings, objects such as None
            raise TypeError
        arr = raw.astype(float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must hold real numbers, got {shown(value)}") from None
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must hold finite numbers, got {shown(value)}")
    return arr


def flags(name: str, value: object, n: int) -> np.ndarray:
    """``value`` as a read-only boolean array of exactly ``n`` flags (Python or numpy bools
    only: ``0``/``1`` or a string are rejected, naming ``name``)."""
    values = list(value) if isinstance(value, (list, tuple, np.ndarray)) else None
    if values is None or not all(isinstance(v, (bool, np.bool_)) for v in values):
        raise ValueError(f"{name} must be a sequence of {n} booleans, got {shown(value)}")
    if len(values) != n:
        raise ValueError(f"{name} must have one flag per model ({n}), got {len(values)}: {values}")
    out = np.array(values, dtype=bool)
    out.setflags(write=False)
    return out


def json_matrix(name: str, text: str) -> list[list]:
    """The rows of a JSON matrix given on the command line (``--K '[[2,10],[0,10]]'``); a
    one-line ``ValueError`` naming ``name`` otherwise. The entries are checked by the caller
    (e.g. :func:`budget_matrix`)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise ValueError(
            f"{name} must be a JSON matrix such as '[[2,10],[0,10]]', got {text!r}"
        ) from None
    if not isinstance(value, list) or not all(isinstance(row, list) for row in value):
        raise ValueError(f"{name} must be a JSON list of rows, got {text!r}")
    return value


def comma_separated(name: str, text: str, convert: type, what: str) -> list:
    """``text`` split at commas, each part converted by ``convert`` (``int``, ``float``); a
    one-line ``ValueError`` saying ``name`` must be ``what`` separated by commas otherwise."""
    try:
        return [convert(v) for v in text.split(",")]
    except ValueError:
        raise ValueError(f"{name} must be {what} separated by commas, got {text!r}") from None


def names(option: str, values: str | Sequence[str]) -> tuple[str, ...]:
    """Names given as one argument ``a,b,c``, as several ``a b c``, or both: split at commas,
    stripped; a one-line ``ValueError`` for an empty name."""
    parts = [values] if isinstance(values, str) else list(values)
    found = tuple(n.strip() for part in parts for n in part.split(","))
    if not found or not all(found):
        raise ValueError(f"{option} takes names separated by commas or spaces, got {parts!r}")
    return found


def keyed(
    name: str, data: object, parse: Callable[[str], object], form: str, values: str
) -> dict[object, object]:
    """A file's mapping ``name`` with each key read by ``parse`` (a one-line ``ValueError``
    when ``data`` is not a mapping of ``values``, or a key is not of the ``form`` asked)."""
    if not isinstance(data, dict):
        raise ValueError(f"{name} must be a mapping {form} -> {values}, got {shown(data)}")
    out = {}
    for key, value in data.items():
        try:
            out[parse(str(key))] = value
        except ValueError:
            raise ValueError(f"{name} key {key!r} must be {form}") from None
    return out


def name_values(option: str, specs: Sequence[str], form: str) -> dict[str, str]:
    """Repeatable ``option NAME=VALUE`` arguments (``--model-path``, ``--cost-curve``) as a
    mapping; ``form`` names the expected shape in the message. Each NAME once, both sides
    non-empty."""
    out: dict[str, str] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name or not value:
            raise ValueError(f"{option} must be {form}, got {spec!r}")
        if name in out:
            raise ValueError(f"{option} gives {name!r} twice")
        out[name] = value
    return out


def shown(value: object) -> str:
    """``repr`` of ``value`` as a user wrote it: numpy scalars and arrays as Python numbers and
    lists, so a message never reads ``np.float64(1.5)``."""
    if isinstance(value, np.generic):
        value = value.item()
    elif isinstance(value, np.ndarray):
        value = value.tolist()
    return repr(value)
