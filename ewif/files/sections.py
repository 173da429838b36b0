"""The sections of a model-set file read and checked: the cost curves, α (by lenience), the
decay curves ``alpha_by_position`` and the ``cascade`` section (:mod:`ewif.files.model_set`).

Each reader takes the parsed value and the ``source`` that starts its one-line ``ValueError``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ewif.base import validate
from ewif.base.configuration import Configuration
from ewif.kernel.pass_cost import PassCost


def curves_in(curves: Any, n_models: int, source: str) -> tuple[np.ndarray, ...] | None:
    """The file's ``cost_curve`` as checked arrays (None when it has none)."""
    if curves is None:
        return None
    try:
        table = PassCost.from_curves(curves, n_models=n_models)
    except ValueError as exc:
        raise ValueError(f"{source}: {exc}") from None
    return tuple(table.table(i) for i in range(n_models))


def alpha_in(raw: Any, source: str) -> dict[float, np.ndarray]:
    """The file's ``alpha``: one matrix (lenience 1) or a mapping lenience -> matrix."""
    if isinstance(raw, list):
        raw = {"1": raw}
    if not isinstance(raw, dict):
        raise ValueError(f"{source}: alpha must be a matrix or a mapping lenience -> matrix")
    alpha = {}
    for key, matrix in raw.items():
        try:
            lenience = float(key)
        except (TypeError, ValueError):
            raise ValueError(f"{source}: alpha key {key!r} is not a lenience number") from None
        alpha[lenience] = matrix_in(f"{source}: alpha[{key}]", matrix)
    return alpha


def by_position_in(raw: Any, source: str) -> dict[tuple[int, int], np.ndarray]:
    """The file's ``alpha_by_position``: ``'r,j'`` -> acceptance by draft position."""
    pairs = validate.keyed(
        f"{source}: alpha_by_position",
        raw,
        pair,
        "'r,j' (two model indices)",
        "list of probabilities",
    )
    return {
        key: validate.probabilities(f"{source}: alpha_by_position[{key[0]},{key[1]}]", curve)
        for key, curve in pairs.items()
    }


def pair(key: str) -> tuple[int, int]:
    """``'r,j'`` as two integers (ValueError otherwise)."""
    r, j = (int(s) for s in key.split(","))
    return r, j


def choice_in(raw: Any, source: str) -> Configuration | None:
    """The file's ``cascade`` section (None when it has none)."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or "models" not in raw or "K" not in raw:
        raise ValueError(f"{source}: cascade must be a mapping with 'models' and 'K'")
    names = raw["models"]
    if not isinstance(names, list) or not names or not all(isinstance(m, str) for m in names):
        raise ValueError(
            f"{source}: cascade.models must be a non-empty list of names, got {names!r}"
        )
    return Configuration(
        models=tuple(names),
        K=validate.counts(f"{source}: cascade.K", raw["K"]),
        lenience=validate.cost(f"{source}: cascade.lenience", raw.get("lenience", 1.0)),
    )


def matrix_in(name: str, matrix: Any) -> np.ndarray:
    """A matrix of probabilities or null (NaN) as an array, rows of one length."""
    if not isinstance(matrix, list) or not all(isinstance(row, list) for row in matrix):
        raise ValueError(f"{name} must be a list of rows, got {matrix!r}")
    if not all(
        v is None or (isinstance(v, int | float) and not isinstance(v, bool))
        for row in matrix
        for v in row
    ):
        raise ValueError(f"{name} must hold numbers or null, got {matrix!r}")
    rows = [[math.nan if v is None else v for v in row] for row in matrix]
    if len({len(r) for r in rows}) > 1:
        raise ValueError(f"{name} rows must all have the same length")
    try:
        return np.asarray(rows, dtype=float)
    except OverflowError:  # an integer beyond the float range
        raise ValueError(f"{name} must hold numbers in [0, 1] or null, got {matrix!r}") from None


def matrix_out(matrix: np.ndarray) -> list[list[float | None]]:
    """The file form of :func:`matrix_in`'s array: NaN as null."""
    return [[None if math.isnan(v) else float(v) for v in row] for row in matrix]
