"""The Python API behind ``csd plot``: one function per plot kind, shared with the notebooks.

Each function takes the project's own objects (a :class:`~ewif.io.ModelSet`, a
:class:`~ewif.cascade.Cascade`, a results file), computes what the figure shows with the
project's own functions — ewif for predictions, :func:`simulate.bernoulli.simulate` for
simulated points — draws it with :mod:`ewif.plotting` and returns a :class:`Plot`: the
written path plus a ``summary`` of the plotted numbers (printed by the command, ``--json``
for machines). In a notebook a :class:`Plot` of a PNG displays itself.

* :func:`plot_decay` — acceptance by draft position ``i``: the i.i.d. prediction ``α^i``,
  the cascade's exact curve ``P(position i exists and is accepted)``
  (:meth:`Cascade.acceptance_by_position`), simulated points with Wilson intervals and,
  optionally, measured points (:func:`measured_curve`).
* :func:`plot_ewif_vs_k` — EWIF against draft length for SD, vertical and horizontal
  cascades (:mod:`ewif.plotting.ewif_vs_k`), from numbers or from a model set.
* :func:`plot_landscape` — EWIF over two K entries around a cascade, others fixed
  (:func:`ewif.landscape.landscape`).
* :func:`plot_calibration` — predicted vs measured speedup of a ``csd.results/1`` run.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ewif import io as _io
from ewif import results as _results
from ewif import validate
from ewif.cascade import Cascade
from ewif.plotting import style

KINDS = ("decay", "ewif-vs-k", "landscape", "calibration")
MAX_POSITIONS = 20


@dataclass(frozen=True)
class Plot:
    """A written figure: its kind, path and the numbers it shows (JSON-ready)."""

    kind: str
    path: Path
    summary: dict[str, Any] = field(default_factory=dict)

    def _repr_png_(self) -> bytes | None:  # IPython display hook
        return self.path.read_bytes() if self.path.suffix.lower() == ".png" else None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": str(self.path), **self.summary}


@dataclass(frozen=True)
class MeasuredCurve:
    """Measured acceptance by position, ``p[i−1]`` for position ``i``, with an interval.

    ``trials`` is the number of target steps behind each point (None when the file does
    not say; the interval then collapses onto the point and ``low = high = p``).
    """

    label: str
    p: np.ndarray
    low: np.ndarray
    high: np.ndarray
    trials: int | None


# ----------------------------------------------------------------------------- sources


def model_set(preset: str | None = None, path: str | os.PathLike[str] | None = None
              ) -> _io.ModelSet:
    """The model set of a preset name or a model-set file (default: the default preset);
    :func:`ewif.recommendation.load_model_set` without the label."""
    from ewif.recommendation import load_model_set

    return load_model_set(preset, path)[0]


def cascade_for(
    ms: _io.ModelSet,
    models: list[str] | tuple[str, ...] | None = None,
    K: Any = None,
    lenience: float | None = None,
) -> Cascade:
    """The cascade a plot is about: ``K`` if given, else the set's ``cascade`` section, else
    the configuration :func:`ewif.recommendation.recommend` recommends (the one rule every
    command uses)."""
    from ewif.recommendation import recommend

    if K is not None or (ms.cascade is not None and models is None):
        return Cascade.from_model_set(ms, models, None if K is None else np.asarray(K), lenience)
    if models is not None:
        raise ValueError("--models needs --K (the recommendation chooses its own models)")
    return recommend(ms, leniences=None if lenience is None else [lenience],
                     hint="give the cascade with --models and --K").cascade()


def measured_curve(
    path: str | os.PathLike[str],
    *,
    method: str | None = None,
    pair: tuple[int, int] | None = None,
    level: float = 0.95,
) -> MeasuredCurve:
    """Measured acceptance by position from a ``csd.results/1`` or ``csd.models/1`` file.

    Results file: the ``acceptance_by_position.measured`` curve of ``method`` (default: the
    first ``csd`` method that has one, else the first method that has one); its target
    steps are ``tokens / mean_accepted_length`` and the interval is Wilson's at ``level``
    (treating steps as independent). Model-set file: ``alpha_by_position`` of the reviewer/
    drafter ``pair`` (default: the first pair with the target as reviewer); the
    ``metadata.alpha_by_position_trials`` entry of that pair, when present, gives the steps.
    Any other schema raises ``ValueError`` naming it.
    """
    from simulate.stats import wilson_interval

    level = validate.probability("level", level)
    path = Path(path)
    try:
        data = json.loads(path.read_text()) if path.suffix.lower() == ".json" else None
    except OSError as exc:
        raise ValueError(f"cannot read measured file {str(path)!r}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema == _results.SCHEMA:
        run = _results.load(path)
        label, p, trials = _from_results(run, method, path)
    elif schema in _io.SCHEMAS or data is None:  # YAML model sets are read by ewif.io
        label, p, trials = _from_model_set(_io.load(path), pair, path)
    else:
        raise ValueError(
            f"{path}: schema must be {_results.SCHEMA!r} (a realrun results file) or "
            f"{_io.SCHEMA!r} (a model set with alpha_by_position), got {schema!r}"
        )
    if trials:
        ok = np.rint(p * trials).astype(np.int64)
        low, high = wilson_interval(ok, np.full(p.size, trials), level)
    else:
        low, high = p.copy(), p.copy()
    return MeasuredCurve(label, p, np.asarray(low, float), np.asarray(high, float), trials)


def _from_results(run: _results.Results, method: str | None, path: Path):
    with_curve = [m for m in run.methods if m.acceptance_by_position]
    if method is not None:
        chosen = run.method(method)
        if not chosen.acceptance_by_position:
            raise ValueError(f"{path}: method {method!r} has no acceptance_by_position")
    elif with_curve:
        chosen = next((m for m in with_curve if m.kind == "csd"), with_curve[0])
    else:
        raise ValueError(f"{path}: no method has acceptance_by_position")
    p = np.asarray(chosen.acceptance_by_position["measured"], dtype=float)
    trials = None
    if chosen.tokens and chosen.mean_accepted_length:
        trials = round(chosen.tokens / chosen.mean_accepted_length)
    return f"measured: {chosen.name} ({run.family})", p, trials


def _from_model_set(ms: _io.ModelSet, pair: tuple[int, int] | None, path: Path):
    if not ms.alpha_by_position:
        raise ValueError(f"{path}: the model set has no alpha_by_position curves")
    if pair is None:
        pair = next((k for k in sorted(ms.alpha_by_position) if k[0] == 0),
                    min(ms.alpha_by_position))
    if pair not in ms.alpha_by_position:
        raise ValueError(f"{path}: no alpha_by_position for pair {pair[0]},{pair[1]}; "
                         f"the file has {', '.join(f'{r},{j}' for r, j in ms.alpha_by_position)}")
    key = f"{pair[0]},{pair[1]}"
    trials = (ms.metadata.get("alpha_by_position_trials") or {}).get(key)
    if trials is not None:
        trials = validate.count(f"{path}: metadata.alpha_by_position_trials[{key}]", trials, 1)
    r, j = pair
    label = f"measured: {ms.models[r]} reviewing {ms.models[j]}"
    return label, ms.alpha_by_position[pair], trials


# ----------------------------------------------------------------------------- the kinds


def plot_decay(
    path: str | os.PathLike[str],
    cascade: Cascade,
    *,
    alpha: float | None = None,
    max_position: int | None = None,
    trials: int = 100_000,
    seed: int | None = 0,
    level: float = 0.999,
    measured: MeasuredCurve | str | os.PathLike[str] | None = None,
    progress: bool = False,
    title: str | None = None,
) -> Plot:
    """Acceptance by draft position: exact cascade curve, i.i.d. ``α^i``, simulated, measured.

    ``alpha`` (default: the target's acceptance of the first drafter it reviews) gives the
    i.i.d. curve. ``trials`` target steps are simulated (``0`` skips simulation) with
    Wilson intervals at ``level``. ``max_position`` defaults to the longest possible draft
    (at most :data:`MAX_POSITIONS`) or the measured curve's length.
    """
    path = style.output_path(path)
    from ewif.plotting.decay import plot_decay as _draw

    if isinstance(measured, (str, os.PathLike)):
        measured = measured_curve(measured)
    first = int(np.flatnonzero(cascade.K[0])[0]) + 1
    alpha = float(cascade.alpha[0, first]) if alpha is None else alpha
    if max_position is None:
        longest = max(1, int(cascade.tokens_pgf().max_value) - 1)
        max_position = measured.p.size if measured is not None else min(longest, MAX_POSITIONS)
    m = validate.count("max_position", max_position, minimum=1)
    trials = validate.count("trials", trials)
    exact = cascade.acceptance_by_position(m)
    summary: dict[str, Any] = {
        "cascade": _describe(cascade), "alpha_iid": alpha,
        "positions": list(range(1, m + 1)), "exact": exact.tolist(),
    }
    simulated = None
    if trials:
        from simulate.bernoulli import simulate

        sim = simulate(cascade, trials=max(trials, 2), seed=seed, progress=progress)
        curve = sim.acceptance_by_position(m, level=level)
        simulated = (curve.p, curve.low, curve.high)
        summary["simulated"] = {"trials": sim.trials, "seed": seed, "level": level,
                                "interrupted": sim.interrupted, **_triple(simulated)}
    points = None
    if measured is not None:
        points = tuple(_fit(a, m) for a in (measured.p, measured.low, measured.high))
        summary["measured"] = {"label": measured.label, "trials": measured.trials,
                               **_triple(points)}
    _draw(path, exact, alpha=alpha, simulated=simulated, measured=points,
          label=f"cascade K={cascade.K.tolist()} (exact)",
          title=title or f"Acceptance by draft position\n{_names(cascade)}")
    return Plot("decay", path, summary)


def plot_ewif_vs_k(
    path: str | os.PathLike[str],
    alpha1: float,
    c1: float,
    *,
    alpha2: float | None = None,
    c2: float = 0.0,
    alpha12: float | None = None,
    k_max: int = 20,
    title: str | None = None,
) -> Plot:
    """EWIF against draft length (see :mod:`ewif.plotting.ewif_vs_k`); ``path`` is written."""
    from ewif.plotting.ewif_vs_k import ewif_vs_k_curves
    from ewif.plotting.ewif_vs_k import plot_ewif_vs_k as _draw

    path = style.output_path(path)
    kwargs = {"alpha2": alpha2, "c2": c2, "alpha12": alpha12, "k_max": k_max}
    curves = ewif_vs_k_curves(alpha1, c1, **kwargs)
    _draw(alpha1, c1, path, title=title, **kwargs)
    summary = {"curves": [{"label": c.label, "best_k": c.best_k, "best_ewif": c.best_ewif,
                           "inner": int(c.inner[c.best_index])} for c in curves]}
    return Plot("ewif-vs-k", path, summary)


def ewif_vs_k_inputs(
    ms: _io.ModelSet, models: list[str] | tuple[str, ...] | None = None, lenience: float = 1.0
) -> dict[str, float | None]:
    """``alpha1, c1, alpha2, c2, alpha12`` of :func:`plot_ewif_vs_k` for ``models`` =
    (target, d1, d2) of a model set (default: the first drafter and the last model), at
    ``lenience`` (used for d1 reviewing d2; the target's reviews are always lenience 1).
    An acceptance the set does not have (null) is None: its curves are left out."""
    names = tuple(models) if models is not None else (ms.models[0], ms.models[1], ms.models[-1])
    if len(names) != 3:
        raise ValueError(f"models must be three names (target, drafter 1, drafter 2), got {names}")
    t, d1, d2 = (ms.index(m) for m in names)
    if t != 0 or not t < d1 < d2:
        raise ValueError(f"models must be the target then two drafters, largest first; got "
                         f"{list(names)} of {list(ms.models)}")
    lenience = float(lenience)
    if lenience not in ms.alpha:
        raise ValueError(f"lenience {lenience:g} is not in the model set; available: "
                         f"{', '.join(f'{x:g}' for x in ms.leniences)}")
    a = ms.alpha[lenience]
    if np.isnan(a[t, d1]):
        raise ValueError(f"alpha of {ms.models[t]} reviewing {ms.models[d1]} is not in the set")
    known = {key: None if np.isnan(v) else float(v)
             for key, v in (("alpha2", a[t, d2]), ("alpha12", a[d1, d2]))}
    return {"alpha1": float(a[t, d1]), "c1": float(ms.cost[d1]), "c2": float(ms.cost[d2]),
            **known}


def plot_landscape(
    path: str | os.PathLike[str],
    ms: _io.ModelSet,
    cascade: Cascade,
    *,
    entries: tuple[tuple[int, int], tuple[int, int]] | None = None,
    k_max: int = 30,
    title: str | None = None,
) -> Plot:
    """EWIF heat map over two K entries ``(r, j)`` (1-based) of ``cascade``, the others held;
    default entries: the two whose variation changes EWIF most."""
    from ewif.landscape import landscape
    from ewif.plotting.landscape import plot_landscape as _draw
    from ewif.search import Configuration, OptimizeResult

    path = style.output_path(path)
    if not cascade.names:
        raise ValueError("cascade must name its models (build it with Cascade.from_model_set)")
    lenience = _lenience_of(ms, cascade)
    config = Configuration(tuple(cascade.names), cascade.K.copy(), lenience, cascade.ewif())
    around = OptimizeResult(best=config, table=[config], n_configurations=1, method="given",
                            seconds=0.0, model_set=ms, fill=cascade.fill)
    land = landscape(around, entries=entries, k_max=k_max)
    _draw(land, path, title=title or f"EWIF landscape over two K entries, others fixed\n"
                                     f"{_names(cascade)}, lenience {lenience:g}")
    i, j = np.unravel_index(np.nanargmax(land.grid), land.grid.shape)
    summary = {"cascade": _describe(cascade), "ewif": config.ewif,
               "entries": [f"k_{r}{c}" for r, c in land.entries],
               "grid_best": {f"k_{land.entries[0][0]}{land.entries[0][1]}": int(land.x[i]),
                             f"k_{land.entries[1][0]}{land.entries[1][1]}": int(land.y[j]),
                             "ewif": float(land.grid[i, j])}}
    return Plot("landscape", path, summary)


def plot_calibration(
    path: str | os.PathLike[str],
    results: _results.Results | str | os.PathLike[str],
    *,
    title: str | None = None,
) -> Plot:
    """Predicted vs measured speedup of a ``csd.results/1`` run (a file path or Results)."""
    from ewif.plotting.calibration import calibration_points
    from ewif.plotting.calibration import plot_calibration as _draw

    path = style.output_path(path)
    _draw(results, path, title=title)
    summary = {"methods": [{"name": p.name, "kind": p.kind, "predicted": p.predicted,
                            "measured": p.measured, "swi": p.swi, "error": p.error}
                           for p in calibration_points(results)]}
    return Plot("calibration", path, summary)


# ----------------------------------------------------------------------------- helpers


def _names(cascade: Cascade) -> str:
    return " > ".join(cascade.names) if cascade.names else f"target + {cascade.n} drafter(s)"


def _describe(cascade: Cascade) -> str:
    return f"{_names(cascade)}, K={cascade.K.tolist()}"


def _lenience_of(ms: _io.ModelSet, cascade: Cascade) -> float:
    """The set's lenience whose alpha matrix the cascade was built from."""
    idx = np.asarray([ms.index(m) for m in cascade.names])
    for lenience in ms.leniences:
        sub = ms.alpha[lenience][np.ix_(idx, idx)]
        if np.array_equal(np.triu(sub, 1), np.triu(cascade.alpha, 1), equal_nan=True):
            return lenience
    raise ValueError("cascade's alpha matches no lenience of the model set")


def _fit(values: np.ndarray, m: int) -> np.ndarray:
    """``values`` cut or NaN-padded to ``m`` positions."""
    out = np.full(m, np.nan)
    out[: min(m, values.size)] = values[:m]
    return out


def _triple(points: tuple[np.ndarray, np.ndarray, np.ndarray]) -> dict[str, list]:
    return {k: [None if np.isnan(v) else float(v) for v in a]
            for k, a in zip(("p", "low", "high"), points, strict=True)}
