"""The model-set file: measured (or published) acceptance rates and costs of a cascade's models.

This is the one exchange format of the project: ``realrun.measure`` writes it,
``csd recommend --from FILE``, ``csd evaluate FILE`` and ``csd simulate FILE`` read it,
and the presets in ``ewif/files/presets/`` use it. JSON or YAML (by extension)::

    schema: csd.models/6
    models: [target, base, small, mag]     # index 0 is the target, largest first
    cost: [1.0, 0.0227, 0.0070, 0.0]       # one forward pass relative to the target's
    cost_per_token: [0, 0, 0, 0]           # optional: pass cost = cost + cost_per_token·m
    cost_curve:                            # optional (/2): measured pass cost by m = 1, 2, ...
      - [1.0, 1.02, 1.05, 1.09]            # target; cost_curve[0][0] must be 1
      - [0.0227, 0.0231]                   # beyond the last m: the line through the last
      - [0.0070]                           # two points (flat if it would decrease; a
      - [0.0]                              # one-point curve is flat)
    catch_up: [false, true, true, false]   # optional (/3): KV-cached drafters feed what they
                                           # have not fed (ewif.kernel.catch_up); false: the
                                           # paper's m
    row_cost: [0.0, 0.0011, 0.0004, 0.0]   # optional (/5): one logit row, which a catch-up
                                           # position does not return (ewif.kernel.pass_cost)
    row_step: [0.0, 0.0012, 0.0, 0.0]      # optional (/6): the second row's extra cost (a
                                           # step; ewif.kernel.pass_cost, "Row step")
    context_cost: {tokens: 420, ar_tokens: 412, ar_slope: 0.0006,   # optional (/6): c_i(m, L)
                   slope: [[...], [...], [0.0]], span: [96, 1140]}  # (ewif.files.context_cost)
    bootstrap:                             # optional (/3): per-prompt evidence for intervals
      acceptance_by_prompt: {"1,0,1": [[23.0, 32], [19.0, 32]]}   # (ewif.predict.bootstrap)
      cost_curve_stderr: [[0.01, 0.012, 0.02, 0.02], [0.0004, 0.0005], [0.0001], [0.0]]
    batch_cost_curve:                      # optional (/4): c_i(B, m), B rows of m positions
      "4": [[1.3, 1.45], [0.03, 0.04], [0.008], [0.0]]   # (ewif.files.batch_costs.BatchCosts)
    batch_reevaluate_curve:                # optional (/4): the same, one logit row in all
      "4": [[1.3, 1.4], [0.03, 0.034], [0.008], [0.0]]   # (llama.cpp's re-evaluation pass)
    alpha:                                 # lenience -> (n+1)×(n+1) matrix
      "1": [[null, 0.73, 0.65, 0.40],      # alpha[r][j]: reviewer r accepts a token of j
            [null, null, 0.80, 0.50],      # (only r < j is read; null = not measured)
            [null, null, null, 0.55],
            [null, null, null, null]]
      "3": [...]                            # the target row (r = 0) must not depend on lenience
    alpha_by_position: {"0,1": [0.8, 0.74, ...]}   # optional, measured decay curves
    rank_acceptance:                       # optional (/6): p_1..p_R of ranked candidates
      vectors: {"1,0,1": [0.73, 0.08]}     # (ewif.files.rank_acceptance; p_1 = alpha)
    alpha_by_category: {rag: {alpha: ..., acceptance_by_prompt: ...}}   # optional (/6)
    cascade: {models: [target, base, mag], K: [[2, 10], [0, 10]], lenience: 3}  # optional
    metadata: {source: "...", notes: "..."}

``alpha`` may also be a single matrix, meaning lenience 1. With ``cost_curve`` every pass is
priced by the curves (:mod:`ewif.kernel.pass_cost`); ``cost`` may then be omitted (the curves'
``m = 1`` values) and ``cost_per_token`` must be absent or zero. Each optional key's parser and
meaning live in the module named beside it; docs/files.md describes every field. Files of
``csd.models/1`` to ``/5`` still read, the same (a key newer than the file's schema is refused:
``_SINCE``); a ``/5`` file's pairs are chains, ``rank_acceptance`` ``(alpha,)``. Files are written
as ``csd.models/6``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ewif.base import validate
from ewif.base.configuration import Configuration
from ewif.files.batch_costs import BatchCosts
from ewif.files.bootstrap_data import BootstrapData
from ewif.files.categories import CategoryAcceptance
from ewif.files.context_cost import ContextCost
from ewif.files.rank_acceptance import RankAcceptance
from ewif.files.reading import read_data
from ewif.files.sections import alpha_in, by_position_in, choice_in, curves_in, matrix_out
from ewif.kernel.cascade import Cascade
from ewif.kernel.pass_cost import PassCost, relative_costs

SCHEMA = "csd.models/6"
#: Readable schemas; /1: no cost_curve, /2: no catch_up or bootstrap, /3: no batch_cost_curve,
#: /4: no row_cost, /5: no rank_acceptance, alpha_by_category or context_cost.
SCHEMAS = (
    "csd.models/1",
    "csd.models/2",
    "csd.models/3",
    "csd.models/4",
    "csd.models/5",
    SCHEMA,
)
#: The first schema that has each optional key.
_SINCE = {
    "cost_curve": "csd.models/2",
    "catch_up": "csd.models/3",
    "bootstrap": "csd.models/3",
    "batch_cost_curve": "csd.models/4",
    "batch_reevaluate_curve": "csd.models/4",
    "row_cost": "csd.models/5",
    "rank_acceptance": "csd.models/6",
    "tree": "csd.models/6",  # a token-tree configuration (ewif.files.tree_config)
    "alpha_by_category": "csd.models/6",
    "context_cost": "csd.models/6",
    "row_step": "csd.models/6",
}


@dataclass(frozen=True)
class ModelSet:
    """Acceptance rates and costs of a family of models sharing one vocabulary.

    ``alpha[l][r, j]`` is the probability that model ``r`` accepts a token proposed by
    model ``j`` (``r < j``) when reviewing with lenience ``l``; NaN where unknown.
    ``cost_curve`` (optional) holds each model's measured pass cost for ``m = 1, 2, ...``
    positions; when present ``cost`` equals its ``m = 1`` values and ``cost_per_token`` is 0.
    ``row_cost`` (optional, one number >= 0 per model) is the cost of one logit row, which a
    catch-up position does not return (:mod:`ewif.kernel.pass_cost`); ``row_step`` (optional,
    likewise) the extra cost of a pass's second row ("Row step" there). ``rank_acceptance``
    (optional) the acceptance of each pair's ranked candidates, for token trees
    (:mod:`ewif.files.rank_acceptance`).
    """

    models: tuple[str, ...]
    cost: np.ndarray
    cost_per_token: np.ndarray
    alpha: dict[float, np.ndarray]
    alpha_by_position: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)
    cascade: Configuration | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    cost_curve: tuple[np.ndarray, ...] | None = None
    catch_up: tuple[bool, ...] | None = None
    bootstrap: BootstrapData | None = None
    batch_costs: BatchCosts | None = None
    row_cost: np.ndarray | None = None
    rank_acceptance: RankAcceptance | None = None
    categories: CategoryAcceptance | None = None
    context_cost: ContextCost | None = None
    row_step: np.ndarray | None = None

    def __post_init__(self) -> None:
        n1 = len(self.models)
        if n1 < 2:
            raise ValueError(
                f"models must name the target and at least one drafter, got {self.models!r}"
            )
        if self.catch_up is not None:
            flags = validate.flags("catch_up", self.catch_up, n1)
            object.__setattr__(self, "catch_up", tuple(bool(v) for v in flags))
        if len(set(self.models)) != n1:
            raise ValueError(f"models must have distinct names, got {self.models!r}")
        validate.same_length(models=self.models, cost=self.cost, cost_per_token=self.cost_per_token)
        relative_costs(self.cost, self.cost_per_token)
        if self.cost_curve is not None:
            curves = PassCost.from_curves(self.cost_curve, n_models=n1)
            curves.m1_costs(self.cost)
            if np.any(self.cost_per_token):
                raise ValueError(
                    f"cost_per_token must be zero when cost_curve is given (the curves price "
                    f"every m), got {self.cost_per_token.tolist()}"
                )
            object.__setattr__(self, "cost_curve", tuple(curves.table(i) for i in range(n1)))
        if self.row_cost is not None or self.row_step is not None:
            prices = self.pass_cost
            if self.row_cost is not None:
                object.__setattr__(self, "row_cost", prices.row_cost)
            if self.row_step is not None:
                object.__setattr__(self, "row_step", prices.row_step)
        if not self.alpha:
            raise ValueError("alpha must hold at least one matrix")
        target_rows = []
        for lenience, matrix in self.alpha.items():
            if not (math.isfinite(lenience) and lenience >= 1.0):
                raise ValueError(f"lenience must be a finite number >= 1, got {lenience!r}")
            if matrix.shape != (n1, n1):
                raise ValueError(
                    f"alpha[{lenience:g}] must be a {n1}x{n1} matrix (one row and column per "
                    f"model), got shape {matrix.shape}"
                )
            upper = matrix[np.triu_indices(n1, 1)]
            known = upper[~np.isnan(upper)]
            validate.probabilities(f"alpha[{lenience:g}]", known)
            target_rows.append(matrix[0])
        for row in target_rows[1:]:
            if not np.array_equal(row, target_rows[0], equal_nan=True):
                raise ValueError(
                    "alpha row 0 (the target's reviews) must be the same for every lenience: "
                    "lenience is never applied at the target"
                )
        for r, j in self.alpha_by_position:
            if not 0 <= r < j < n1:
                raise ValueError(
                    f"alpha_by_position key '{r},{j}' must name a reviewer r and a drafter "
                    f"j with 0 <= r < j < {n1} (model indices)"
                )
        if self.bootstrap is not None:
            curves = self.cost_curve
            self.bootstrap.check(
                n1, self.alpha.keys(), None if curves is None else [len(c) for c in curves]
            )
        if self.rank_acceptance is not None:
            self.rank_acceptance.check(self.alpha)
        if self.categories is not None:
            self.categories.check(n1, self.alpha.keys())
        if self.context_cost is not None and self.context_cost.n_models != n1:
            raise ValueError(f"context_cost must hold one slope per model ({n1})")
        if self.batch_costs is not None and self.batch_costs.n_models != n1:
            raise ValueError(
                f"batch_cost_curve must hold one curve per model ({n1}) at every batch size, "
                f"got {self.batch_costs.n_models}"
            )
        if self.cascade is not None:  # a configuration that cannot be evaluated is malformed
            try:
                self.to_cascade()
            except ValueError as exc:
                raise ValueError(f"cascade: {exc}") from None

    @property
    def pass_cost(self) -> PassCost:
        """The pass costs ``c_i(m)`` of the models: the curves, or affine."""
        if self.cost_curve is not None:
            return PassCost.from_curves(
                self.cost_curve, row_cost=self.row_cost, row_step=self.row_step
            )
        return PassCost.affine(self.cost, self.cost_per_token, self.row_cost, self.row_step)

    def to_cascade(
        self,
        models: Configuration | Sequence[str] | None = None,
        K: object | None = None,
        lenience: float | None = None,
        fill: str = "tokens",
        catch_up: object | None = None,
    ) -> Cascade:
        """The cascade of ``models`` (target first; default: the set's ``cascade`` section or
        all its models) with budgets ``K`` at ``lenience`` (default 1, or the section's), or
        of a whole :class:`~ewif.base.configuration.Configuration` given as ``models``;
        ``catch_up`` one flag per chosen model (default: the set's flags, if it has any);
        the set's ``row_cost`` and ``row_step`` (if any) price the catch-up positions'
        missing rows."""
        choice = self.cascade
        if isinstance(models, Configuration):
            if K is not None or lenience is not None:
                raise TypeError("give a Configuration, or models with K and lenience, not both")
            choice, models = models, None
        if models is None and choice is not None:
            models = choice.models
        if K is None:
            if choice is None:
                raise ValueError("K is required: the model set has no 'cascade' section")
            K = choice.K
        if lenience is None:
            lenience = choice.lenience if choice is not None else 1.0
        models = tuple(self.models if models is None else models)
        idx = self.indices(models)
        lenience = self.checked_lenience(lenience)
        ix = np.asarray(idx)
        curves = self.cost_curve
        if catch_up is None and self.catch_up is not None:
            catch_up = [self.catch_up[i] for i in idx]
        return Cascade(
            self.alpha[lenience][np.ix_(ix, ix)],
            self.cost[ix],
            K,
            cost_per_token=None if curves is not None else self.cost_per_token[ix],
            fill=fill,
            names=models,
            cost_curve=None if curves is None else [curves[i] for i in idx],
            catch_up=catch_up,
            row_cost=None if self.row_cost is None else self.row_cost[ix],
            row_step=None if self.row_step is None else self.row_step[ix],
        )

    @property
    def leniences(self) -> tuple[float, ...]:
        return tuple(sorted(self.alpha))

    def checked_lenience(self, value: float) -> float:
        """``value`` as one of the set's leniences; ``ValueError`` listing them otherwise."""
        lenience = float(value)
        if lenience not in self.alpha:
            raise ValueError(
                f"lenience {lenience:g} is not in the model set; available: "
                f"{', '.join(f'{x:g}' for x in self.leniences)}"
            )
        return lenience

    def indices(self, models: Sequence[str]) -> list[int]:
        """The set's indices of a cascade's ``models``: the target first, then distinct
        drafters in the set's order (``ValueError`` otherwise)."""
        idx = [self.index(m) for m in models]
        if idx[0] != 0:
            raise ValueError(
                f"models must start with the target {self.models[0]!r}, got {models[0]!r}"
            )
        if sorted(set(idx)) != idx:
            raise ValueError(f"models must be distinct, in the order {list(self.models)}: {models}")
        return idx

    def index(self, name: str) -> int:
        try:
            return self.models.index(name)
        except ValueError:
            raise ValueError(f"unknown model {name!r}; this set has {list(self.models)}") from None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema": SCHEMA,
            "models": list(self.models),
            "cost": self.cost.tolist(),
            "cost_per_token": self.cost_per_token.tolist(),
            **(
                {}
                if self.cost_curve is None
                else {"cost_curve": [c.tolist() for c in self.cost_curve]}
            ),
            **({} if self.catch_up is None else {"catch_up": list(self.catch_up)}),
            **({} if self.row_cost is None else {"row_cost": self.row_cost.tolist()}),
            **({} if self.row_step is None else {"row_step": self.row_step.tolist()}),
            **({} if self.context_cost is None else {"context_cost": self.context_cost.to_dict()}),
            "alpha": {f"{len_:g}": matrix_out(m) for len_, m in sorted(self.alpha.items())},
        }
        if self.alpha_by_position:
            out["alpha_by_position"] = {
                f"{r},{j}": v.tolist() for (r, j), v in sorted(self.alpha_by_position.items())
            }
        if self.cascade is not None:
            out["cascade"] = {
                "models": list(self.cascade.models),
                "K": self.cascade.K.tolist(),
                "lenience": self.cascade.lenience,
            }
        if self.categories is not None:
            out["alpha_by_category"] = self.categories.to_dict()
        if self.bootstrap is not None:
            out["bootstrap"] = self.bootstrap.to_dict()
        if self.rank_acceptance is not None:
            out["rank_acceptance"] = self.rank_acceptance.to_dict()
        if self.batch_costs is not None:
            out["batch_cost_curve"] = self.batch_costs.to_dict()
            if self.batch_costs.reevaluate is not None:
                out["batch_reevaluate_curve"] = self.batch_costs.reevaluate_dict()
        out["metadata"] = self.metadata
        return out

    @classmethod
    def from_dict(cls, data: Any, source: str = "model set") -> ModelSet:
        """The model set of a parsed file (module docstring); a one-line ``ValueError``
        starting with ``source`` for anything malformed."""
        _check_schema(data, source)
        models = data["models"]
        if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
            raise ValueError(f"{source}: models must be a list of names, got {models!r}")
        curves = curves_in(data.get("cost_curve"), len(models), source)
        cost = data["cost"] if "cost" in data else [float(c[0]) for c in curves]
        cpt = data.get("cost_per_token", [0.0] * len(models))
        metadata = data.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise ValueError(f"{source}: metadata must be a mapping, got {metadata!r}")
        parsed = {
            "models": tuple(models),
            "cost": validate.costs(f"{source}: cost", cost),
            "cost_per_token": validate.costs(f"{source}: cost_per_token", cpt),
            "alpha": alpha_in(data["alpha"], source),
            "alpha_by_position": by_position_in(data.get("alpha_by_position") or {}, source),
            "cascade": choice_in(data.get("cascade"), source),
            "metadata": dict(metadata),
            "cost_curve": curves,
            "catch_up": None if data.get("catch_up") is None else tuple(data["catch_up"]),
            "row_cost": None
            if data.get("row_cost") is None
            else validate.costs(f"{source}: row_cost", data["row_cost"]),
            "row_step": None
            if data.get("row_step") is None
            else validate.costs(f"{source}: row_step", data["row_step"]),
        }
        try:
            boot, batched = data.get("bootstrap"), data.get("batch_cost_curve")
            again = data.get("batch_reevaluate_curve")
            if again is not None and batched is None:
                raise ValueError("batch_reevaluate_curve needs batch_cost_curve")
            ranks = data.get("rank_acceptance")
            kinds, context = data.get("alpha_by_category"), data.get("context_cost")
            return cls(
                **parsed,
                bootstrap=None if boot is None else BootstrapData.from_dict(boot),
                batch_costs=None if batched is None else BatchCosts.from_dict(batched, again),
                rank_acceptance=None if ranks is None else RankAcceptance.from_dict(ranks),
                categories=None if kinds is None else CategoryAcceptance.from_dict(kinds),
                context_cost=None
                if context is None
                else ContextCost.from_dict(context, len(models)),
            )
        except ValueError as exc:
            raise ValueError(f"{source}: {exc}") from None


def _check_schema(data: Any, source: str) -> None:
    """A mapping of a readable schema, with the keys that schema needs."""
    if not isinstance(data, dict):
        raise ValueError(
            f"{source}: expected a mapping at the top level, got {type(data).__name__}"
        )
    schema = data.get("schema", SCHEMA)
    if schema not in SCHEMAS:
        raise ValueError(
            f"{source}: schema must be one of {', '.join(map(repr, SCHEMAS))}, got {schema!r}"
        )
    for key, since in _SINCE.items():
        if data.get(key) is not None and SCHEMAS.index(schema) < SCHEMAS.index(since):
            raise ValueError(f"{source}: {key} needs schema {since!r} or later, got {schema!r}")
    curves = data.get("cost_curve")
    for key in ("models", "alpha") if curves is not None else ("models", "cost", "alpha"):
        if key not in data:
            raise ValueError(f"{source}: missing required key {key!r}")


#: The schema of a results file (``ewif.files.results.SCHEMA``), whose run keeps its model set.
RESULTS_SCHEMA = "csd.results/1"


def load(path: str | Path) -> ModelSet:
    """Read a model-set file (``.json``, ``.yaml`` or ``.yml``); a results file
    (``csd.results/1``, ``csd realrun -o``) gives the model set its run used, kept in its
    ``metadata.model_set``."""
    data = read_data(path, "model-set file")
    if isinstance(data, dict) and data.get("schema") == RESULTS_SCHEMA:
        data = (data.get("metadata") or {}).get("model_set")
        if not isinstance(data, dict):
            raise ValueError(
                f"{path}: a {RESULTS_SCHEMA} file without metadata.model_set (the run's model "
                "set); give a model-set file (csd.models/1-6)"
            )
        return ModelSet.from_dict(data, source=f"{path} (metadata.model_set)")
    return ModelSet.from_dict(data, source=str(path))


def save(model_set: ModelSet, path: str | Path) -> Path:
    """Write a model-set file as JSON (or YAML for a ``.yaml``/``.yml`` path)."""
    path = Path(path)
    data = model_set.to_dict()
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        text = yaml.safe_dump(data, sort_keys=False)
    else:
        text = json.dumps(data, indent=2) + "\n"
    try:
        path.write_text(text)
    except OSError as exc:
        raise ValueError(f"cannot write model-set file {str(path)!r}: {exc.strerror}") from None
    return path
