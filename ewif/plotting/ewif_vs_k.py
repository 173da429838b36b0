"""EWIF against draft length for plain SD, the vertical cascade and the horizontal cascade.

Two drafters below the target: ``d1`` (a small neural model, acceptance ``alpha1`` by the
target, cost ``c1``) and ``d2`` (e.g. Max-Gram, acceptance ``alpha2`` by the target, cost
``c2``, acceptance ``alpha12`` by ``d1``). For each draft length k = 0..k_max the curves are

* **SD** (Corollary 4.2): ``sd_ewif(alpha1, k, c1)`` — d1 drafts k tokens autoregressively;
  also SD with d2 alone when ``alpha2`` is given.
* **vertical** (Theorem 4.3, n-th *power* φ^n — see ``ewif.theory.theorems.vertical_ewif``): the
  target reviews n = k rounds of d1, each round d1 reviewing a k'-token draft of d2; k' is
  chosen best for each n over 1..``inner_k_max``. The x value n is the step size of SD it is
  compared with in Corollary 4.4.
* **horizontal** (Theorem 4.5): k draft positions, the first k1 from d1 and the remaining
  k − k1 from d2, with position-dependent acceptance and cost; k1 is chosen best for each k.

k = 0 is autoregressive decoding (EWIF 1) for every curve. Each curve's optimum over the
plotted range is marked with a star and given in the legend; SD's exact optimum
(``ewif.theory.theorems.best_k``) is always inside the range (the range is widened to hold it, up
to :data:`MAX_K`); where no finite optimum exists (c = 0) the star sits at the range edge
and the legend says so.
All numbers come from :mod:`ewif.theory.theorems` and :mod:`ewif.theory.horizontal`; nothing is
re-derived here. :func:`compute_ewif_vs_k` gives the curves, :func:`draw_ewif_vs_k` draws them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ewif.base import validate
from ewif.files.model_set import ModelSet
from ewif.plotting import style
from ewif.theory.horizontal import horizontal_ewif
from ewif.theory.theorems import best_k, sd_ewif, vertical_ewif

MAX_K = 200


@dataclass(frozen=True)
class Curve:
    """One curve of the plot: EWIF at k = 0..k_max and its optimum over that range.

    ``inner[i]`` is the inner choice behind ``ewif[i]`` (vertical: the best k'; horizontal:
    the best k1; SD: k itself).
    """

    label: str
    k: np.ndarray
    ewif: np.ndarray
    inner: np.ndarray

    @property
    def best_index(self) -> int:
        """The smallest k whose EWIF is the maximum (ties within 1e-12 relative, which
        rounding would otherwise break at random: e.g. ``c = α`` ties k = 0 and k = 1)."""
        return int(np.flatnonzero(self.ewif >= self.ewif.max() * (1.0 - 1e-12))[0])

    @property
    def best_k(self) -> int:
        return int(self.k[self.best_index])

    @property
    def best_ewif(self) -> float:
        return float(self.ewif[self.best_index])

    def to_dict(self) -> dict[str, Any]:
        """The curve's label, optimum and plotted points (``k``, ``ewif`` and the inner
        choice behind each), JSON-ready."""
        return {
            "label": self.label,
            "best_k": self.best_k,
            "best_ewif": self.best_ewif,
            "inner": int(self.inner[self.best_index]),
            "k": self.k.tolist(),
            "ewif": self.ewif.tolist(),
            "inner_by_k": self.inner.tolist(),
        }


def compute_ewif_vs_k(
    alpha1: float,
    c1: float,
    *,
    alpha2: float | None = None,
    c2: float = 0.0,
    alpha12: float | None = None,
    k_max: int = 20,
    inner_k_max: int = 30,
) -> list[Curve]:
    """The curves (SD with d1, [SD with d2], [vertical], [horizontal]; module docstring).

    ``alpha12`` enables the vertical curve, ``alpha2`` the horizontal curve and SD with d2.
    """
    alpha1 = validate.probability("alpha1", alpha1)
    c1 = validate.cost("c1", c1)
    c2 = validate.cost("c2", c2)
    k_max = validate.count("k_max", k_max, minimum=1)
    if k_max > MAX_K:
        raise ValueError(f"k_max must be at most {MAX_K} (the plotted range), got {k_max:,}")
    inner_k_max = validate.count("inner_k_max", inner_k_max, minimum=1)
    if alpha2 is not None:
        alpha2 = validate.probability("alpha2", alpha2)
    if alpha12 is not None:
        alpha12 = validate.probability("alpha12", alpha12)
    k_max = max(k_max, _sd_optimum(alpha1, c1) + 2)
    if alpha2 is not None:
        k_max = max(k_max, _sd_optimum(alpha2, c2) + 2)
    k_max = min(k_max, MAX_K)
    ks = np.arange(k_max + 1)

    def sd_curve(drafter: int, alpha: float, c: float) -> Curve:
        label = f"SD, drafter {drafter} (α={alpha:g}, c={c:g})"
        return Curve(label, ks, np.asarray(sd_ewif(alpha, ks, c), dtype=float), ks)

    curves = [sd_curve(1, alpha1, c1)]
    if alpha2 is not None:
        curves.append(sd_curve(2, alpha2, c2))
    if alpha12 is not None:
        inner = np.arange(1, inner_k_max + 1)
        table = np.asarray(vertical_ewif(alpha1, alpha12, inner[None, :], ks[:, None], c1, c2))
        best = np.argmax(table, axis=1)
        best[0] = -1  # n = 0 is autoregressive: no inner draft
        curves.append(
            Curve(
                f"vertical: n rounds of d1 over d2 (α'={alpha12:g}, c2={c2:g})",
                ks,
                table[ks, best],
                np.where(ks == 0, 0, inner[best]),
            )
        )
    if alpha2 is not None:
        values, splits = [], []
        for k in ks:
            first = np.arange(k + 1)[:, None] > np.arange(k)[None, :]  # row k1: d1 at i < k1
            options = np.atleast_1d(
                horizontal_ewif(np.where(first, alpha1, alpha2), np.where(first, c1, c2))
            )
            splits.append(int(np.argmax(options)))
            values.append(float(options[splits[-1]]))
        curves.append(
            Curve(
                "horizontal: first k1 positions d1, rest d2",
                ks,
                np.asarray(values),
                np.asarray(splits),
            )
        )
    return curves


def inputs_of(
    ms: ModelSet, models: Sequence[str] | None = None, lenience: float = 1.0
) -> dict[str, float | None]:
    """``alpha1, c1, alpha2, c2, alpha12`` of :func:`compute_ewif_vs_k` for ``models`` =
    (target, d1, d2) of a model set (default: the first drafter and the last model), at
    ``lenience`` (used for d1 reviewing d2; the target's reviews are always lenience 1).
    An acceptance the set does not have (null) is None: its curves are left out."""
    names = tuple(models) if models is not None else (ms.models[0], ms.models[1], ms.models[-1])
    if len(names) != 3:
        raise ValueError(f"models must be three names (target, drafter 1, drafter 2), got {names}")
    t, d1, d2 = (ms.index(m) for m in names)
    if t != 0 or not t < d1 < d2:
        raise ValueError(
            f"models must be the target then two drafters, largest first; got "
            f"{list(names)} of {list(ms.models)}"
        )
    lenience = ms.checked_lenience(lenience)
    a = ms.alpha[lenience]
    if np.isnan(a[t, d1]):
        raise ValueError(f"alpha of {ms.models[t]} reviewing {ms.models[d1]} is not in the set")
    known = {
        key: None if np.isnan(v) else float(v)
        for key, v in (("alpha2", a[t, d2]), ("alpha12", a[d1, d2]))
    }
    return {"alpha1": float(a[t, d1]), "c1": float(ms.cost[d1]), "c2": float(ms.cost[d2]), **known}


def draw_ewif_vs_k(
    curves: list[Curve], path: str | os.PathLike[str], *, title: str | None = None
) -> Path:
    """Draw EWIF against draft length, each curve's optimum starred, to ``path``."""
    from matplotlib.ticker import MaxNLocator

    path = style.output_path(path)
    fig, ax = style.figure(
        title or "EWIF against draft length (★ = optimum of each curve)",
        "draft length k (SD: tokens; vertical: rounds n of drafter 1; horizontal: positions)",
        "EWIF (× autoregressive speed)",
    )
    for i, curve in enumerate(curves):
        ax.plot(
            curve.k,
            curve.ewif,
            label=f"{curve.label}\n    ★ best {_describe(curve)}",
            markevery=max(1, len(curve.k) // 20),
            **style.line(i),
        )
        ax.plot([curve.best_k], [curve.best_ewif], **style.optimum(i))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.axhline(1.0, color="0.5", linewidth=0.8, linestyle=(0, (1, 2)))
    ax.set_xlim(0, int(curves[0].k[-1]))
    ax.set_ylim(bottom=0)
    style.finish(ax, loc="lower right")
    return style.save(fig, path)


def _describe(curve: Curve) -> str:
    at_edge = " (range edge)" if curve.best_index == len(curve.k) - 1 else ""
    if curve.label.startswith("vertical"):
        where = f"n={curve.best_k}, k'={int(curve.inner[curve.best_index])}"
    elif curve.label.startswith("horizontal"):
        where = f"k={curve.best_k}, k1={int(curve.inner[curve.best_index])}"
    else:
        where = f"k={curve.best_k}"
    return f"{where}: {curve.best_ewif:.3f}{at_edge}"


def _sd_optimum(alpha: float, c: float) -> int:
    """SD's exact optimal k, or 0 where ``best_k`` finds no finite optimum (c = 0)."""
    try:
        return int(best_k(alpha, c)[0])
    except ValueError:
        return 0
