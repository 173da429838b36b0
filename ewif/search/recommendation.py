"""The recommendation: one rule for "the best cascade of a model set", and one loader.

Every command and the real-model pipeline ask this module, so one model set gets one
answer whichever command asks (``csd recommend``, ``csd simulate``, ``csd plot``,
``csd realrun``):

* **the space** is :func:`ewif.search.space.search_space` (``"auto"``: the paper's space for the
  paper's family — target, BASE, SMALL and a free Max-Gram — else every upper-triangular K
  with entries ``0..k_max``, which covers every drafter subset), at every lenience of the
  set unless told otherwise;
* **the optimum** is :func:`ewif.search.optimizer.optimize`'s exact one, priced with the set's pass
  costs (curves when measured);
* **the decision**: the configuration is worth running only if its EWIF exceeds 1
  (autoregressive decoding); otherwise the honest answer is to decode autoregressively
  (:func:`ewif.search.explain.decision`).

:func:`load_model_set` turns "a preset name or a model-set file" into a model set, and
:func:`choose_cascade` is the one rule for the cascade a command is about when the user may
give it: **the given K, else the set's** ``cascade`` **section, else the recommendation**
(``csd simulate``, ``csd plot``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ewif.base.configuration import EvaluatedConfiguration
from ewif.files.model_set import ModelSet
from ewif.files.model_set import load as load_file
from ewif.kernel.cascade import Cascade
from ewif.search import explain
from ewif.search.optimizer import OptimizeResult, optimize
from ewif.search.space import SearchSpace, search_space, space_size

#: How :func:`choose_cascade` chose (its ``how``).
GIVEN = "given on the command line"
SECTION = "the set's cascade section"
RECOMMENDED = "recommended by ewif.search.recommendation"


def load_model_set(
    preset: str | None = None, path: str | os.PathLike[str] | None = None
) -> tuple[ModelSet, str]:
    """``(model set, where it came from)`` for a preset name or a model-set file (default:
    the default preset); both given is a ``ValueError``."""
    from ewif.files import presets

    if preset is not None and path is not None:
        raise ValueError("give a preset or a model-set file, not both")
    if path is not None:
        return load_file(path), f"file {Path(path)}"
    name = presets.DEFAULT if preset is None else preset
    return presets.load_preset(name), f"preset {name}"


@dataclass(frozen=True)
class Recommendation:
    """The optimum of a model set in a search space, and what it means."""

    result: OptimizeResult
    space: SearchSpace

    @property
    def best(self) -> EvaluatedConfiguration:
        """The best speculative configuration (it may not beat autoregressive decoding)."""
        return self.result.best

    @property
    def ewif(self) -> float:
        """The best configuration's exact EWIF (``<= 1``: autoregressive decoding wins)."""
        return float(self.result.best.ewif)

    @property
    def decision(self) -> str:
        """``"speculative"`` when the best configuration beats EWIF 1, else ``"autoregressive"``."""
        return explain.decision(self.ewif)

    def cascade(self) -> Cascade:
        """The :class:`~ewif.kernel.cascade.Cascade` of the best configuration."""
        return self.result.cascade()

    def describe(self) -> str:
        """One line: what to run, or plainly that autoregressive decoding wins."""
        what = self.best.describe()
        if self.decision == "speculative":
            return f"recommended: {what} at {self.ewif:.4f}x"
        return explain.autoregressive_line(what, self.ewif)


def recommend(
    model_set: ModelSet,
    *,
    space: str = "auto",
    k_max: int | None = None,
    mag_block: int = 10,
    leniences: Sequence[float] | None = None,
    fill: str = "tokens",
    top: int = 10,
    hint: str = "lower k_max",
) -> Recommendation:
    """The recommendation for ``model_set`` (module docstring); the search is sized first
    and refused with ``hint`` when too big (:func:`ewif.search.space.space_size`)."""
    _check_reviewable(model_set, model_set.leniences if leniences is None else leniences)
    chosen = search_space(model_set, space, k_max, mag_block)
    space_size(
        model_set.alpha,
        len(model_set.models),
        chosen.bounds,
        model_set.leniences if leniences is None else leniences,
        hint,
    )
    result = optimize(
        model_set, bounds=chosen.bounds, leniences=leniences, subsets=False, fill=fill, top=top
    )
    return Recommendation(result, chosen)


def _check_reviewable(model_set: ModelSet, leniences: Sequence[float]) -> None:
    """A one-line ``ValueError`` naming the missing acceptance rates when the target can
    review no drafter at all (``alpha[0][j]`` null or NaN for every ``j``)."""
    import numpy as np

    row = model_set.alpha[model_set.checked_lenience(leniences[0])][0, 1:]
    if np.isnan(row).all():
        target = model_set.models[0]
        pairs = ", ".join(f"alpha[0][{j}] ({target} reviewing {d})"
                          for j, d in enumerate(model_set.models[1:], 1))  # fmt: skip
        raise ValueError(
            f"no drafter has an acceptance rate by the target: {pairs} "
            f"{'is' if len(row) == 1 else 'are'} missing (null or NaN) in the model set"
        )


@dataclass(frozen=True)
class ChosenCascade:
    """The cascade a command is about, its lenience, and how it was chosen (:data:`GIVEN`,
    :data:`SECTION` or :data:`RECOMMENDED`)."""

    cascade: Cascade
    lenience: float
    how: str


def choose_cascade(
    model_set: ModelSet,
    models: Sequence[str] | None = None,
    K: object | None = None,
    lenience: float | None = None,
    *,
    fill: str = "tokens",
    hint: str = "give the cascade with --models and --K",
) -> ChosenCascade:
    """The one rule for the cascade of a model set a command is about:

    1. ``K`` given: the cascade of ``models`` (default: the section's models, else all the
       set's) with ``K`` at ``lenience`` (default: the section's, else 1). A lenience other
       than 1 where no drafter reviews is refused: it would apply at the target, whose
       reviews are exact.
    2. else the set's ``cascade`` section, at ``lenience`` if given;
    3. else :func:`recommend` (restricted to ``lenience`` if given; ``hint`` when too big).

    ``models`` without ``K`` is refused whatever the set holds: a section's K belongs to
    the section's models."""
    if models is not None and K is None:
        raise ValueError("--models needs --K (the budgets of the cascade of those models)")
    section = model_set.cascade
    if K is None and section is None:
        rec = recommend(
            model_set, leniences=None if lenience is None else [lenience], fill=fill, hint=hint
        )
        return ChosenCascade(rec.cascade(), rec.best.lenience, RECOMMENDED)
    if lenience is None:
        lenience = section.lenience if section is not None else 1.0
    cascade = model_set.to_cascade(models, K, lenience, fill=fill)
    if K is not None and float(lenience) != 1.0 and not cascade.K[1:].any():
        raise ValueError(
            f"--lenience {lenience:g} would apply at the target, the only reviewer of K = "
            f"{cascade.K.tolist()}; lenience applies only where a drafter reviews"
        )
    return ChosenCascade(cascade, float(lenience), GIVEN if K is not None else SECTION)
