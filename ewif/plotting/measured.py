"""What was measured, read from a file: acceptance by draft position and the model set and
cascade it was measured with.

:func:`read_measured` reads a ``csd.results/1`` run (a method's measured curve, its target
steps, the run's own model set ``metadata.model_set`` and the method's configuration) or a
model-set file (``alpha_by_position`` of a reviewer/drafter pair, the set itself).
:func:`simulate.plotting.measured_curve` adds the Wilson intervals; ``csd plot decay
--measured`` plots the run's own cascade against it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ewif.base import validate
from ewif.files import model_set as _io
from ewif.files import results as _results
from ewif.files.reading import read_data


@dataclass(frozen=True)
class Measured:
    """A measured acceptance-by-position curve ``p[i − 1]`` (position ``i``) over ``trials``
    target steps each (None: unknown), labelled; ``model_set`` is the set it was measured
    with (None: a run that kept none), ``models`` the models measured (a method's, or the
    reviewer and the drafter of a pair) and ``config`` the method's configuration
    (``models``, ``K``, ``lenience``) when a run's method was measured, else None."""

    label: str
    p: np.ndarray
    trials: int | None
    model_set: _io.ModelSet | None
    models: tuple[str, ...]
    config: dict[str, Any] | None = None


def read_measured(
    source: str | os.PathLike[str] | _results.Results,
    *,
    method: str | None = None,
    pair: tuple[int, int] | None = None,
) -> Measured:
    """The measured curve of a run (a :class:`~ewif.files.results.Results` or its file) or a
    model-set file.

    Results: the ``acceptance_by_position.measured`` curve of ``method`` (default: the
    first ``csd`` method that has one, else the first method that has one); its target
    steps are ``tokens / mean_accepted_length``. Model-set file: ``alpha_by_position`` of the
    reviewer/drafter ``pair`` (default: the first pair with the target as reviewer); the
    ``metadata.alpha_by_position_trials`` entry of that pair, when present, gives the steps.
    Any other schema raises ``ValueError`` naming it."""
    if isinstance(source, _results.Results):
        return _from_results(source, method, Path(source.family))
    path = Path(source)
    data = read_data(path, "measured file")
    schema = data.get("schema", _io.SCHEMA) if isinstance(data, dict) else None
    if schema == _results.SCHEMA:
        return _from_results(_results.Results.from_dict(data, str(path)), method, path)
    if schema in _io.SCHEMAS:
        if method is not None:
            raise ValueError(f"--method names a method of a results file; {path} is a model set")
        return _from_model_set(_io.ModelSet.from_dict(data, str(path)), pair, path)
    raise ValueError(
        f"{path}: schema must be {_results.SCHEMA!r} (a realrun results file) or "
        f"{_io.SCHEMA!r} (a model set with alpha_by_position), got {schema!r}"
    )


def _from_results(run: _results.Results, method: str | None, path: Path) -> Measured:
    with_curve = [m for m in run.methods if m.acceptance_by_position]
    if method is not None:
        chosen = run.method(method)
        if not chosen.acceptance_by_position:
            raise ValueError(f"{path}: method {method!r} has no acceptance_by_position")
    elif with_curve:
        chosen = next((m for m in with_curve if m.kind == "csd"), with_curve[0])
    else:
        raise ValueError(f"{path}: no method has acceptance_by_position")
    stored = run.metadata.get("model_set")
    model_set = None if stored is None else _io.ModelSet.from_dict(stored, f"{path} (model set)")
    p = np.asarray(chosen.acceptance_by_position["measured"], dtype=float)
    trials = None
    if chosen.tokens and chosen.mean_accepted_length:
        trials = round(chosen.tokens / chosen.mean_accepted_length)
    config = dict(chosen.config)
    return Measured(
        f"measured: {chosen.name} ({run.family})",
        p,
        trials,
        model_set,
        tuple(config.get("models") or ()),
        config if "K" in config else None,
    )


def _from_model_set(ms: _io.ModelSet, pair: tuple[int, int] | None, path: Path) -> Measured:
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
    return Measured(label, ms.alpha_by_position[pair], trials, ms, (ms.models[r], ms.models[j]))
