"""The per-prompt evidence behind prediction intervals: a model set's ``bootstrap`` section
(``csd.models/3`` and later), read and checked; :mod:`ewif.predict.bootstrap` resamples it.

* ``acceptance_by_prompt["l,r,j"] = [[s_1, n_1], ..., [s_P, n_P]]`` — per measuring prompt,
  the sum of the per-position acceptances of pair ``(r, j)`` at lenience ``l`` and the number
  of positions;
* ``cost_curve_stderr[i][m-1]`` (optional) — the standard error of each cost-curve point;
* ``acceptance_traces["l,r,j"] = [[a_1, ..., a_T], ...]`` (optional) — per measuring prompt,
  the per-position acceptances themselves (their sums are ``acceptance_by_prompt``).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ewif.base import validate


@dataclass(frozen=True)
class BootstrapData:
    """Per-prompt acceptance sums and counts, and cost-curve standard errors (module doc)."""

    acceptance_by_prompt: Mapping[tuple[float, int, int], np.ndarray]
    cost_curve_stderr: tuple[np.ndarray, ...] | None = None
    acceptance_traces: Mapping[tuple[float, int, int], tuple[np.ndarray, ...]] | None = None

    def __post_init__(self) -> None:
        if not self.acceptance_by_prompt:
            raise ValueError(
                "bootstrap.acceptance_by_prompt is empty: a bootstrap needs the "
                "acceptances of at least one pair on at least 2 prompts"
            )
        prompts = set()
        for key, table in self.acceptance_by_prompt.items():
            name = f"bootstrap.acceptance_by_prompt['{key_out(key)}']"
            arr = np.asarray(table, dtype=float)
            if arr.ndim != 2 or arr.shape[1] != 2 or not np.isfinite(arr).all():
                raise ValueError(f"{name} must be a list of [sum, count] pairs, one per prompt")
            if (arr[:, 1] < 0).any() or (arr[:, 0] < 0).any() or (arr[:, 0] > arr[:, 1]).any():
                raise ValueError(
                    f"{name} needs 0 <= sum <= count for every prompt, got {arr.tolist()}"
                )
            prompts.add(arr.shape[0])
        if len(prompts) != 1 or min(prompts) < 2:
            raise ValueError(
                "bootstrap.acceptance_by_prompt needs the same number (>= 2) of "
                f"prompts for every pair, got {sorted(prompts)}"
            )
        if self.cost_curve_stderr is not None:
            for i, se in enumerate(self.cost_curve_stderr):
                validate.costs(f"bootstrap.cost_curve_stderr[{i}]", se)
        if self.acceptance_traces is not None:
            self._check_traces(self.acceptance_traces)

    def _check_traces(self, traces: Mapping[tuple[float, int, int], Sequence[np.ndarray]]) -> None:
        """Every trace a pair of ``acceptance_by_prompt`` with one array of probabilities per
        prompt whose sum and length are that prompt's ``[sum, count]``."""
        for key, arrays in traces.items():
            name = f"bootstrap.acceptance_traces['{key_out(key)}']"
            table = self.acceptance_by_prompt.get(key)
            if table is None or len(arrays) != table.shape[0]:
                raise ValueError(
                    f"{name} needs the pair in acceptance_by_prompt and one trace per prompt"
                )
            for p, (a, (total, count)) in enumerate(zip(arrays, table, strict=True)):
                a = validate.probabilities(f"{name}[{p}]", a)
                if a.size != count or not math.isclose(a.sum(), total, abs_tol=1e-6):
                    raise ValueError(
                        f"{name}[{p}] must have {count:g} positions summing to {total:g} "
                        f"(acceptance_by_prompt), got {a.size} summing to {a.sum():g}"
                    )

    @property
    def prompts(self) -> int:
        return next(iter(self.acceptance_by_prompt.values())).shape[0]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "acceptance_by_prompt": {
                key_out(k): np.asarray(v, dtype=float).tolist()
                for k, v in sorted(self.acceptance_by_prompt.items())
            }
        }
        if self.cost_curve_stderr is not None:
            out["cost_curve_stderr"] = [np.asarray(s).tolist() for s in self.cost_curve_stderr]
        if self.acceptance_traces is not None:
            out["acceptance_traces"] = {
                key_out(k): [np.asarray(a, dtype=float).tolist() for a in v]
                for k, v in sorted(self.acceptance_traces.items())
            }
        return out

    @classmethod
    def from_dict(cls, data: Any) -> BootstrapData:
        if not isinstance(data, dict) or not isinstance(data.get("acceptance_by_prompt"), dict):
            raise ValueError(
                "bootstrap must be a mapping with 'acceptance_by_prompt' "
                "('l,r,j' -> [[sum, count], ...])"
            )
        table = {}
        for key, pairs in data["acceptance_by_prompt"].items():
            parsed = _key_in(key)
            table[parsed] = validate.costs(
                f"bootstrap.acceptance_by_prompt['{key}']", np.asarray(pairs, dtype=float).ravel()
            ).reshape(-1, 2)
        stderr = data.get("cost_curve_stderr")
        traces = data.get("acceptance_traces")
        if traces is not None and not isinstance(traces, dict):
            raise ValueError(
                "bootstrap.acceptance_traces must map 'l,r,j' to one list of per-position "
                "acceptances per prompt"
            )
        return cls(
            table,
            None
            if stderr is None
            else tuple(
                validate.costs(f"bootstrap.cost_curve_stderr[{i}]", s) for i, s in enumerate(stderr)
            ),
            None
            if traces is None
            else {
                _key_in(key): tuple(np.asarray(a, dtype=float) for a in arrays)
                for key, arrays in traces.items()
            },
        )

    def check(
        self, n_models: int, leniences: Collection[float], curve_sizes: Sequence[int] | None
    ) -> None:
        """Raise ValueError unless every key names a pair of ``n_models`` models and one of
        ``leniences`` and the standard errors have one curve per model, each as long as its
        cost curve (``curve_sizes``: the points of each; None: the set has no curves)."""
        n1 = n_models
        for key in self.acceptance_by_prompt:
            lenience, r, j = key
            if not 0 <= r < j < n1 or lenience not in leniences:
                raise ValueError(
                    f"bootstrap.acceptance_by_prompt key '{key_out(key)}' must name a "
                    f"lenience of alpha and 0 <= r < j < {n1}"
                )
        if self.cost_curve_stderr is not None:
            if curve_sizes is None or list(curve_sizes) != [len(s) for s in self.cost_curve_stderr]:
                raise ValueError(
                    "bootstrap.cost_curve_stderr needs cost_curve and one standard "
                    "error per curve point"
                )


def key_out(key: tuple[float, int, int]) -> str:
    """``(l, r, j)`` -> ``'l,r,j'``: the key of a pair at a lenience in every per-pair section
    of a model set (``bootstrap``, ``rank_acceptance``, ``alpha_by_category``)."""
    return f"{key[0]:g},{key[1]},{key[2]}"


def key_in(text: str) -> tuple[float, int, int]:
    """``'l,r,j'`` -> ``(l, r, j)`` (a bare ``ValueError`` otherwise: each section names it)."""
    lenience, r, j = text.split(",")
    return float(lenience), int(r), int(j)


def _key_in(key: object) -> tuple[float, int, int]:
    """:func:`key_in`; ValueError naming the key otherwise."""
    try:
        return key_in(str(key))
    except ValueError:
        raise ValueError(
            f"bootstrap key {key!r} must be 'l,r,j' (a lenience and two model indices)"
        ) from None
