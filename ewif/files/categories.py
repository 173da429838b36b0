"""Acceptance per task category: a model set's ``alpha_by_category`` section (``csd.models/6``).

A measurement on prompts of several kinds of task (writing, code, answers from a long
context, ...) has one α per kind: Max-Gram copies a span of a given document far more often
than it guesses the next word of a poem. The section keeps, per category, what
``csd recommend --mix`` (:mod:`ewif.predict.mix`) needs to price a workload of a stated mix
of categories, and to put an interval on it::

    alpha_by_category:
      rag:
        prompts: [rag-01, rag-02]                     # optional: the prompt ids, one per row
        alpha: {"1": [[null, 0.61], [null, null]]}    # lenience -> matrix, as the set's alpha
        acceptance_by_prompt: {"1,0,1": [[21.0, 32], [18.0, 32]]}   # per prompt [Σ a_t, T]
      code: {...}

* ``acceptance_by_prompt["l,r,j"]`` — per measuring prompt of the category, the sum of the
  per-position acceptances of pair ``(r, j)`` at lenience ``l`` and the number of positions
  (what the set's ``bootstrap.acceptance_by_prompt`` holds for all prompts);
* ``alpha[l][r, j] = Σ_p s_p / Σ_p n_p`` over the category's prompts (checked to 1e-9); the
  target's row (``r = 0``) is measured at lenience 1 and is the same for every lenience.

Every category has the set's models and leniences (:meth:`CategoryAcceptance.check`). A
category may hold one prompt (its α is then a point; an interval needs two).

A workload's mix of categories (:class:`Mix`, :func:`parse_mix`: ``writing=0.5,code=0.3,
rag=0.2``) gives each category's share of the generated tokens, normalised to sum 1;
:mod:`ewif.kernel.mixture` (Theorem MX) prices a configuration on it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np

from ewif.base import validate
from ewif.files.bootstrap_data import key_in, key_out

Key = tuple[float, int, int]
Set = TypeVar("Set")  # a model set (ewif.files.model_set imports this module)
_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_TOLERANCE = 1e-9


def category_name(value: object) -> str:
    """``value`` as a category name (letters, digits, ``_``, ``-``, ``.``: it must survive a
    ``--mix name=weight,...`` list); ValueError otherwise."""
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise ValueError(
            f"a category name is letters, digits, '_', '-' or '.', got {validate.shown(value)}"
        )
    return value


def alpha_from_rows(
    rows: Mapping[Key, np.ndarray], n_models: int, leniences: Collection[float]
) -> dict[float, np.ndarray]:
    """``α[l][r, j] = Σ s / Σ n`` of per-prompt ``[s, n]`` rows (NaN where no row or no
    position); the target's row, measured at lenience 1, copied to every lenience."""
    alpha = {float(x): np.full((n_models, n_models), np.nan) for x in leniences}
    for (lenience, r, j), table in rows.items():
        s, n = np.asarray(table, dtype=float).sum(axis=0)
        if n <= 0:
            continue
        for target in alpha if r == 0 else (lenience,):
            alpha[target][r, j] = s / n
    return alpha


@dataclass(frozen=True)
class Category:
    """One category's α (lenience → matrix), its per-prompt evidence and prompt ids."""

    alpha: Mapping[float, np.ndarray]
    acceptance_by_prompt: Mapping[Key, np.ndarray]
    prompts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.alpha or not self.acceptance_by_prompt:
            raise ValueError("needs alpha and acceptance_by_prompt (at least one pair)")
        sizes = set()
        for key, table in self.acceptance_by_prompt.items():
            arr = np.asarray(table, dtype=float)
            where = f"acceptance_by_prompt['{key_out(key)}']"
            if arr.ndim != 2 or arr.shape[1] != 2 or not np.isfinite(arr).all():
                raise ValueError(f"{where} must be a list of [sum, count] pairs, one per prompt")
            if (arr[:, 0] < 0).any() or (arr[:, 0] > arr[:, 1]).any():
                raise ValueError(f"{where} needs 0 <= sum <= count, got {arr.tolist()}")
            sizes.add(arr.shape[0])
        if len(sizes) != 1 or min(sizes) < 1:
            raise ValueError(
                f"acceptance_by_prompt needs the same number (>= 1) of prompts for every "
                f"pair, got {sorted(sizes)}"
            )
        if self.prompts and len(self.prompts) != self.n_prompts:
            raise ValueError(
                f"prompts names {len(self.prompts)} prompts, acceptance_by_prompt has "
                f"{self.n_prompts}"
            )
        self._check_alpha()

    def _check_alpha(self) -> None:
        """One square matrix per lenience with probabilities above the diagonal, the same
        target row at every lenience, each value the ratio of its rows."""
        shapes = {m.shape for m in self.alpha.values()}
        shape = next(iter(shapes))
        if len(shapes) != 1 or len(shape) != 2 or shape[0] != shape[1]:
            raise ValueError(f"alpha must hold square matrices of one size, got {sorted(shapes)}")
        n = shape[0]
        rows = [m[0] for m in self.alpha.values()]
        if any(not np.array_equal(r, rows[0], equal_nan=True) for r in rows):
            raise ValueError(
                "alpha row 0 (the target's reviews) must be the same at every lenience"
            )
        for lenience, m in self.alpha.items():
            upper = m[np.triu_indices(n, 1)]
            validate.probabilities(f"alpha[{lenience:g}]", upper[~np.isnan(upper)])
        for lenience, r, j in self.acceptance_by_prompt:
            if lenience not in self.alpha or not 0 <= r < j < n:
                raise ValueError(
                    f"acceptance_by_prompt key '{key_out((lenience, r, j))}' must name a "
                    f"lenience of alpha and 0 <= r < j < {n}"
                )
        expected = alpha_from_rows(self.acceptance_by_prompt, n, self.alpha.keys())
        for lenience, r, j in self.acceptance_by_prompt:
            want, got = expected[lenience][r, j], self.alpha[lenience][r, j]
            if not (math.isnan(want) or math.isclose(got, want, abs_tol=_TOLERANCE)):
                raise ValueError(
                    f"alpha[{lenience:g}][{r}][{j}] = {got:.12g} is not the acceptance of its "
                    f"prompts, {want:.12g} (Σ sum / Σ count of acceptance_by_prompt)"
                )

    @property
    def n_prompts(self) -> int:
        return next(iter(self.acceptance_by_prompt.values())).shape[0]

    @property
    def positions(self) -> int:
        """Positions measured (the counts of the target's first pair)."""
        key = min(self.acceptance_by_prompt)
        return int(np.asarray(self.acceptance_by_prompt[key])[:, 1].sum())

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"prompts": list(self.prompts)} if self.prompts else {}
        out["alpha"] = {f"{x:g}": _matrix_out(m) for x, m in sorted(self.alpha.items())}
        out["acceptance_by_prompt"] = {
            key_out(k): np.asarray(v, dtype=float).tolist()
            for k, v in sorted(self.acceptance_by_prompt.items())
        }
        return out

    @classmethod
    def from_dict(cls, data: Any) -> Category:
        if not isinstance(data, dict) or not {"alpha", "acceptance_by_prompt"} <= set(data):
            raise ValueError("must be a mapping with 'alpha' and 'acceptance_by_prompt'")
        unknown = set(data) - {"alpha", "acceptance_by_prompt", "prompts"}
        if unknown:
            raise ValueError(f"unknown keys {sorted(unknown)}")
        prompts = data.get("prompts") or []
        if not isinstance(prompts, list) or not all(isinstance(p, str) for p in prompts):
            raise ValueError(f"prompts must be a list of prompt ids, got {validate.shown(prompts)}")
        alpha = validate.keyed("alpha", data["alpha"], float, "a lenience", "matrix")
        rows = validate.keyed(
            "acceptance_by_prompt",
            data["acceptance_by_prompt"],
            key_in,
            "'l,r,j' (a lenience and two model indices)",
            "[[sum, count], ...]",
        )
        return cls(
            {float(x): _matrix_in(f"alpha[{x:g}]", m) for x, m in alpha.items()},
            {k: _rows_in(f"acceptance_by_prompt['{key_out(k)}']", v) for k, v in rows.items()},
            tuple(prompts),
        )


@dataclass(frozen=True)
class CategoryAcceptance:
    """Every category's :class:`Category`, by name (module docstring)."""

    categories: Mapping[str, Category]

    def __post_init__(self) -> None:
        if not self.categories:
            raise ValueError("alpha_by_category must hold at least one category")
        for name in self.categories:
            category_name(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.categories)

    def __getitem__(self, name: str) -> Category:
        try:
            return self.categories[name]
        except KeyError:
            raise ValueError(
                f"unknown category {name!r}; measured: {', '.join(self.names)}"
            ) from None

    def check(self, n_models: int, leniences: Collection[float]) -> None:
        """ValueError unless every category has ``n_models`` × ``n_models`` matrices at
        exactly the set's ``leniences``."""
        want = sorted(float(x) for x in leniences)
        for name, cat in self.categories.items():
            shape = next(iter(cat.alpha.values())).shape
            if sorted(cat.alpha) != want or shape != (n_models, n_models):
                raise ValueError(
                    f"alpha_by_category[{name!r}] must give {n_models}x{n_models} matrices at "
                    f"the set's leniences {[f'{x:g}' for x in want]}, got shape {shape} at "
                    f"{[f'{x:g}' for x in sorted(cat.alpha)]}"
                )

    @classmethod
    def from_prompts(
        cls,
        kinds: Sequence[str],
        rows: Mapping[Key, np.ndarray],
        n_models: int,
        leniences: Collection[float],
        prompt_ids: Sequence[str] | None = None,
    ) -> CategoryAcceptance:
        """The section of measuring prompts of categories ``kinds`` (one per prompt, in the
        order of ``rows``: per pair, one ``[s, n]`` row per prompt) and their ids."""
        tables = {k: np.asarray(v, dtype=float) for k, v in rows.items()}
        sizes = {t.shape[0] for t in tables.values()}
        if sizes != {len(kinds)} or (prompt_ids is not None and len(prompt_ids) != len(kinds)):
            raise ValueError(
                f"give one category (and id) per measured prompt: {len(kinds)} categories for "
                f"{sorted(sizes)} prompts"
            )
        out = {}
        for name in dict.fromkeys(kinds):
            idx = [i for i, kind in enumerate(kinds) if kind == name]
            own = {k: t[idx] for k, t in tables.items()}
            ids = () if prompt_ids is None else tuple(prompt_ids[i] for i in idx)
            out[name] = Category(alpha_from_rows(own, n_models, leniences), own, ids)
        return cls(out)

    def to_dict(self) -> dict[str, Any]:
        return {name: cat.to_dict() for name, cat in self.categories.items()}

    @classmethod
    def from_dict(cls, data: Any) -> CategoryAcceptance:
        if not isinstance(data, dict):
            raise ValueError(
                f"alpha_by_category must be a mapping category -> its acceptance, got "
                f"{validate.shown(data)}"
            )
        out = {}
        for name, raw in data.items():
            try:
                out[category_name(name)] = Category.from_dict(raw)
            except ValueError as exc:
                raise ValueError(f"alpha_by_category[{name!r}]: {exc}") from None
        return cls(out)


def _rows_in(name: str, value: Any) -> np.ndarray:
    """A table of numbers (:class:`Category` checks its shape and values)."""
    try:
        return np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a list of [sum, count] pairs, one per prompt") from None


def _matrix_in(name: str, matrix: Any) -> np.ndarray:
    if not isinstance(matrix, list) or not all(isinstance(row, list) for row in matrix):
        raise ValueError(f"{name} must be a list of rows, got {validate.shown(matrix)}")
    values = [v for row in matrix for v in row]
    if not all(
        v is None or (isinstance(v, int | float) and not isinstance(v, bool)) for v in values
    ):
        raise ValueError(f"{name} must hold numbers or null")
    if len({len(row) for row in matrix}) > 1:
        raise ValueError(f"{name} rows must all have the same length")
    return np.array([[math.nan if v is None else float(v) for v in row] for row in matrix])


def _matrix_out(matrix: np.ndarray) -> list[list[float | None]]:
    return [[None if math.isnan(v) else float(v) for v in row] for row in matrix]


@dataclass(frozen=True)
class Mix:
    """A workload's share of the generated tokens per category (module docstring): weights
    ``>= 0``, not all zero, normalised to sum 1 on construction."""

    weights: Mapping[str, float]

    def __post_init__(self) -> None:
        clean = {}
        for name, w in self.weights.items():
            category_name(name)
            if isinstance(w, bool) or not isinstance(w, int | float) or not w >= 0 or w == math.inf:
                raise ValueError(
                    f"the weight of {name!r} in the mix must be a finite number >= 0, got "
                    f"{validate.shown(w)}"
                )
            clean[name] = float(w)
        total = sum(clean.values())
        if not total > 0:
            raise ValueError(
                "the mix's weights are all zero (or it names no category): give at least one "
                "category a positive weight"
            )
        object.__setattr__(self, "weights", {n: w / total for n, w in clean.items()})

    @property
    def used(self) -> tuple[str, ...]:
        """The categories of positive weight, in the mix's order."""
        return tuple(n for n, w in self.weights.items() if w > 0)

    def checked(self, measured: CategoryAcceptance | None) -> Mix:
        """This mix, after checking every category it names was measured (``measured``, a
        model set's section); ValueError naming the unknown one and the measured ones."""
        if measured is None:
            raise ValueError(
                "this model set has no α per category (alpha_by_category, csd.models/6): "
                "measure it on prompts with categories to price a mix"
            )
        for name in self.weights:
            if name not in measured.categories:
                raise ValueError(
                    f"unknown category {name!r} in the mix; the model set measured: "
                    f"{', '.join(measured.names)}"
                )
        return self

    def describe(self) -> str:
        return ", ".join(f"{n} {100 * w:.0f}%" for n, w in self.weights.items())


def parse_mix(text: str) -> Mix:
    """``NAME=WEIGHT,NAME=WEIGHT,...`` as a :class:`Mix` (weights relative: normalised);
    a one-line ValueError for anything else, a name given twice, a negative, non-finite or
    all-zero weight."""
    form = "NAME=WEIGHT,... (e.g. writing=0.5,code=0.3,rag=0.2)"
    weights: dict[str, float] = {}
    for part in str(text).split(","):
        name, sep, value = (s.strip() for s in part.partition("="))
        if not sep or not name or not value:
            raise ValueError(f"the mix must be {form}, got {validate.shown(text)}")
        try:
            category_name(name)
        except ValueError as exc:
            raise ValueError(f"the mix names {name!r}: {exc}") from None
        if name in weights:
            raise ValueError(f"the mix gives {name!r} twice")
        try:
            weights[name] = float(value)
        except ValueError:
            raise ValueError(
                f"the weight of {name!r} in the mix must be a number, got {value!r}"
            ) from None
    return Mix(weights)


def category_set(model_set: Set, name: str) -> Set:
    """A :class:`~ewif.files.model_set.ModelSet` with the α of its category ``name``
    (``alpha_by_category``; the costs are the set's): what one category alone is priced with.
    Its per-prompt evidence, decay curves and rank acceptance (measured over all prompts) are
    left out. ValueError for a set without categories or an unknown name."""
    if model_set.categories is None:
        raise ValueError("this model set has no α per category (alpha_by_category)")
    return replace(
        model_set,
        alpha=dict(model_set.categories[name].alpha),
        bootstrap=None,
        categories=None,
        alpha_by_position={},
        rank_acceptance=None,
    )
