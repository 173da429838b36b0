"""The EWIF landscape around a configuration: two K entries varied, the others held."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ewif.base import validate
from ewif.base.configuration import EvaluatedConfiguration
from ewif.files.model_set import ModelSet
from ewif.kernel.cascade import Cascade
from ewif.search.optimizer import OptimizeResult
from ewif.search.space import Entry


@dataclass(frozen=True)
class Landscape:
    """EWIF over two K entries of a configuration, the others held at their values.

    ``grid[i, j]`` is the exact EWIF with ``k_{entries[0]} = x[i]`` and
    ``k_{entries[1]} = y[j]`` (NaN where the configuration would be invalid).
    """

    config: EvaluatedConfiguration
    entries: tuple[Entry, Entry]
    x: np.ndarray
    y: np.ndarray
    grid: np.ndarray

    def to_dict(self) -> dict:
        """The configuration, the two entries, the grid's best point and the grid itself
        (``grid[i][j]`` at ``x[i]``, ``y[j]``; null where invalid), JSON-ready."""
        (r1, j1), (r2, j2) = self.entries
        i, j = np.unravel_index(np.nanargmax(self.grid), self.grid.shape)
        return {
            "cascade": f"{' > '.join(self.config.models)}, K={self.config.K.tolist()}",
            "models": list(self.config.models),
            "K": self.config.K.tolist(),
            "lenience": self.config.lenience,
            "ewif": self.config.ewif,
            "entries": [f"k_{r1}{j1}", f"k_{r2}{j2}"],
            "grid_best": {
                f"k_{r1}{j1}": int(self.x[i]),
                f"k_{r2}{j2}": int(self.y[j]),
                "ewif": float(self.grid[i, j]),
            },
            "x": self.x.tolist(),
            "y": self.y.tolist(),
            "grid": [[None if np.isnan(v) else float(v) for v in row] for row in self.grid],
        }


def landscape_around(
    result: OptimizeResult,
    entries: tuple[Entry, Entry] | None = None,
    k_max: int = 30,
    config: EvaluatedConfiguration | None = None,
) -> Landscape:
    """EWIF grid around ``config`` (default: the best) over two K entries ``(r, j)`` (1-based).

    By default the two *most important* entries are used: those whose one-at-a-time
    variation over ``1..k_max`` (others fixed) changes the EWIF most.
    """
    cfg = result.best if config is None else config
    k_max = validate.count("k_max", k_max, minimum=1)
    n = cfg.K.shape[0]
    free = [(r, j) for r in range(1, n + 1) for j in range(r, n + 1) if cfg.K[r - 1, j - 1] > 0]
    if entries is None:
        if len(free) < 2:
            free = [(r, j) for r in range(1, n + 1) for j in range(r, n + 1)]
        spread = {}
        for e in free:
            vals = [_ewif_at(result, cfg, {e: v}) for v in range(1, k_max + 1)]
            vals = np.asarray(vals, dtype=float)
            spread[e] = float(np.nanmax(vals) - np.nanmin(vals)) if np.isfinite(vals).any() else 0
        if len(spread) < 2:
            raise ValueError(f"a {n}x{n} K has fewer than two entries to vary")
        ranked = sorted(spread, key=lambda e: -spread[e])
        entries = (ranked[0], ranked[1])
    for r, j in entries:
        if not (1 <= r <= j <= n):
            raise ValueError(f"landscape entry k_{r}{j} is outside the upper triangle of K")
    x = np.arange(1, k_max + 1)
    grid = np.array([[_ewif_at(result, cfg, {entries[0]: a, entries[1]: b}) for b in x] for a in x])
    return Landscape(cfg, (tuple(entries[0]), tuple(entries[1])), x, x.copy(), grid)


def landscape_of(
    model_set: ModelSet,
    cascade: Cascade,
    entries: tuple[Entry, Entry] | None = None,
    k_max: int = 30,
) -> Landscape:
    """:func:`landscape_around` around a :class:`~ewif.kernel.cascade.Cascade` built from
    ``model_set`` (its models must be named; its lenience is the set's lenience whose α it
    carries)."""
    if not cascade.names:
        raise ValueError("cascade must name its models (build it with ModelSet.to_cascade)")
    idx = np.asarray([model_set.index(m) for m in cascade.names])
    lenience = next(
        (
            x
            for x in model_set.leniences
            if np.array_equal(
                np.triu(model_set.alpha[x][np.ix_(idx, idx)], 1),
                np.triu(cascade.alpha, 1),
                equal_nan=True,
            )
        ),
        None,
    )
    if lenience is None:
        raise ValueError("cascade's alpha matches no lenience of the model set")
    config = EvaluatedConfiguration(
        tuple(cascade.names), cascade.K.copy(), lenience, ewif=cascade.ewif()
    )
    around = OptimizeResult(
        best=config,
        table=[config],
        n_configurations=1,
        method="given",
        seconds=0.0,
        model_set=model_set,
        fill=cascade.fill,
    )
    return landscape_around(around, entries=entries, k_max=k_max)


def _ewif_at(
    result: OptimizeResult, cfg: EvaluatedConfiguration, changes: dict[Entry, int]
) -> float:
    K = cfg.K.copy()
    for (r, j), v in changes.items():
        K[r - 1, j - 1] = v
    try:
        return result.model_set.to_cascade(cfg.models, K, cfg.lenience, fill=result.fill).ewif()
    except ValueError:
        return float("nan")
