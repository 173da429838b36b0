"""A chosen cascade configuration — its models, budgets K and lenience — one type for all.

A *configuration* says what to run: ``models`` (names, target first), the budget matrix
``K`` (``n×n`` upper-triangular with ``n = len(models) − 1``, the contract of
:mod:`ewif.kernel.cascade`) and the ``lenience`` of the drafters' reviews (the target never
relaxes). A model set's ``cascade`` section, the optimizer's rows, the recommendation and
realrun's sd/csd methods all carry this type; :class:`EvaluatedConfiguration` adds the
exact EWIF a search gave it.

It is plain data and evaluates nothing, so every layer may use it (it lives in
:mod:`ewif.base`, which ``simulate`` may import). It checks nothing either: a configuration
is checked where it meets a model set (:meth:`ewif.files.model_set.ModelSet.to_cascade`)
or a file (its ``cascade`` section). A token tree (issue 33) is to be one more optional
field, absent for a chain.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class Configuration:
    """``models`` (target first), ``K`` and ``lenience`` (module docstring). Two
    configurations are equal when every field is (``K`` element by element)."""

    models: tuple[str, ...]
    K: np.ndarray
    lenience: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "models", tuple(self.models))
        object.__setattr__(self, "K", np.asarray(self.K))

    def describe(self) -> str:
        """``target > d1 > ...  K=[[...]]  l=...``: one line for tables and logs."""
        return f"{' > '.join(self.models)}  K={self.K.tolist()}  l={self.lenience:g}"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(
            np.array_equal(getattr(self, f.name), getattr(other, f.name))
            for f in dataclasses.fields(self)
        )


@dataclass(frozen=True, eq=False, kw_only=True)
class EvaluatedConfiguration(Configuration):
    """A configuration and its exact EWIF ``ewif`` (a row of the optimizer's table)."""

    ewif: float
