"""Plot data that needs the simulator or a file: what ``csd plot`` and the notebooks add to
the figures of :mod:`ewif.plotting` (the one home of drawing; each figure kind there is a
``compute_…`` giving its data and a ``draw_…(data, path)`` writing it).

* :func:`simulated_points` — acceptance by draft position from the Monte Carlo
  (:func:`simulate.bernoulli.simulate`), with Wilson intervals;
* :func:`measured_curve` — measured acceptance by position from a run or a model-set file,
  with Wilson intervals (the one interval used for acceptance curves);
* :func:`simulation_data` — the two-panel figure of ``csd simulate --plot``;
* :func:`model_set`, :func:`cascade_for`, :func:`ewif_vs_k_inputs` — the inputs of a plot
  from a preset or file, by the one recommendation rule when no cascade is given.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ewif.base import validate
from ewif.files import model_set as _io
from ewif.files import results as _results
from ewif.kernel.cascade import Cascade
from ewif.plotting.decay import Points
from ewif.plotting.simulation import SimulationData

# ----------------------------------------------------------------------------- sources


def model_set(
    preset: str | None = None, path: str | os.PathLike[str] | None = None
) -> _io.ModelSet:
    """The model set of a preset name or a model-set file (default: the default preset);
    :func:`ewif.search.recommendation.load_model_set` without the label."""
    from ewif.search.recommendation import load_model_set

    return load_model_set(preset, path)[0]


def cascade_for(
    ms: _io.ModelSet,
    models: list[str] | tuple[str, ...] | None = None,
    K: Any = None,
    lenience: float | None = None,
) -> Cascade:
    """The cascade a plot is about: ``K`` if given, else the set's ``cascade`` section, else
    the configuration :func:`ewif.search.recommendation.recommend` recommends (the one rule every
    command uses)."""
    from ewif.search.recommendation import recommend

    if K is not None or (ms.cascade is not None and models is None):
        return ms.to_cascade(models, None if K is None else np.asarray(K), lenience)
    if models is not None:
        raise ValueError("--models needs --K (the recommendation chooses its own models)")
    return recommend(
        ms,
        leniences=None if lenience is None else [lenience],
        hint="give the cascade with --models and --K",
    ).cascade()


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


def simulated_points(
    cascade: Cascade,
    max_position: int,
    *,
    trials: int = 100_000,
    seed: int | None = 0,
    level: float = 0.999,
    progress: bool = False,
) -> Points:
    """Acceptance by draft position of ``trials`` simulated target steps of ``cascade``
    (:func:`simulate.bernoulli.simulate`), with Wilson intervals at ``level``."""
    from simulate.bernoulli import simulate

    m = validate.count("max_position", max_position, minimum=1)
    trials = validate.count("trials", trials, minimum=2)
    sim = simulate(cascade, trials=trials, seed=seed, progress=progress)
    curve = sim.acceptance_by_position(m, level=level)
    label = f"simulated: {sim.trials:,} steps, seed {seed}, Wilson {level:g}" + (
        " (interrupted)" if sim.interrupted else ""
    )
    return Points(label, curve.p, curve.low, curve.high, sim.trials)


def simulation_data(
    result: Any, cascade: Cascade, *, max_position: int = 12, level: float = 0.999
) -> SimulationData:
    """The data of ``csd simulate --plot``: exact vs simulated acceptance by position (with
    Wilson intervals at ``level``) and tokens per target step (exact pmf vs frequencies)."""
    sim = result.acceptance_by_position(max_position, level)
    return SimulationData(
        trials=result.trials,
        exact_curve=np.asarray(cascade.acceptance_by_position(max_position), dtype=float),
        simulated=Points(f"simulated, Wilson {level:.1%}", sim.p, sim.low, sim.high, result.trials),
        exact_pmf=np.asarray(cascade.tokens_pgf().coefficients, dtype=float),
        frequencies=np.asarray(result.tokens_distribution(), dtype=float),
    )


# ----------------------------------------------------------------------------- measured


def measured_curve(
    source: str | os.PathLike[str] | _results.Results,
    *,
    method: str | None = None,
    pair: tuple[int, int] | None = None,
    level: float = 0.95,
) -> Points:
    """Measured acceptance by position, with Wilson intervals, from a ``csd.results/1`` run
    (a :class:`~ewif.files.results.Results` or its file) or a model-set file.

    Results: the ``acceptance_by_position.measured`` curve of ``method`` (default: the
    first ``csd`` method that has one, else the first method that has one); its target
    steps are ``tokens / mean_accepted_length`` and the interval is Wilson's at ``level``
    (treating steps as independent). Model-set file: ``alpha_by_position`` of the reviewer/
    drafter ``pair`` (default: the first pair with the target as reviewer); the
    ``metadata.alpha_by_position_trials`` entry of that pair, when present, gives the steps.
    Any other schema raises ``ValueError`` naming it.
    """
    level = validate.probability("level", level)
    if isinstance(source, _results.Results):
        label, p, trials = _from_results(source, method, Path(source.family))
        return _with_wilson(label, p, trials, level)
    path = Path(source)
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
    elif schema in _io.SCHEMAS or data is None:  # YAML model sets are read by ewif.files.model_set
        label, p, trials = _from_model_set(_io.load(path), pair, path)
    else:
        raise ValueError(
            f"{path}: schema must be {_results.SCHEMA!r} (a realrun results file) or "
            f"{_io.SCHEMA!r} (a model set with alpha_by_position), got {schema!r}"
        )
    return _with_wilson(label, p, trials, level)


def _with_wilson(label: str, p: np.ndarray, trials: int | None, level: float) -> Points:
    """Points with Wilson intervals at ``level`` from ``trials`` steps each (none: the point)."""
    from simulate.stats import wilson_interval

    if trials:
        ok = np.rint(p * trials).astype(np.int64)
        low, high = wilson_interval(ok, np.full(p.size, trials), level)
    else:
        low, high = p.copy(), p.copy()
    return Points(label, p, np.asarray(low, float), np.asarray(high, float), trials)


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
        pair = next(
            (k for k in sorted(ms.alpha_by_position) if k[0] == 0), min(ms.alpha_by_position)
        )
    if pair not in ms.alpha_by_position:
        raise ValueError(
            f"{path}: no alpha_by_position for pair {pair[0]},{pair[1]}; "
            f"the file has {', '.join(f'{r},{j}' for r, j in ms.alpha_by_position)}"
        )
    key = f"{pair[0]},{pair[1]}"
    trials = (ms.metadata.get("alpha_by_position_trials") or {}).get(key)
    if trials is not None:
        trials = validate.count(f"{path}: metadata.alpha_by_position_trials[{key}]", trials, 1)
    r, j = pair
    label = f"measured: {ms.models[r]} reviewing {ms.models[j]}"
    return label, ms.alpha_by_position[pair], trials
