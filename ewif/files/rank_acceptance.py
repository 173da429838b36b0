"""A model set's acceptance of ranked candidates: the ``rank_acceptance`` section
(``csd.models/6``), read, checked and written.

For a pair (reviewer ``r``, drafter ``j``) at lenience ``l``, the vector ``p = (p_1, …, p_R)``
gives ``p_b`` = P(the reviewer's token is the drafter's ``b``-th ranked candidate): greedy, the
histogram of the rank of the reviewer's argmax in the drafter's distribution; sampling, the
probability that the ``b``-th sibling is the one the verification accepts. Unconditional,
``Σ p_b <= 1``, and ``p_1`` is the chain's ``alpha[l][r][j]`` (the top candidate is the chain's
draft token). A pair without a vector has ``p = (alpha,)``: a chain, so older files give
chains. In the file (keys ``"l,r,j"`` as in ``bootstrap``)::

    rank_acceptance:
      vectors: {"1,0,1": [0.73, 0.08, 0.03], "3,1,2": [0.52, 0.11]}
      by_prompt: {"1,0,1": [[[23.0, 2.5, 1.0], 32], [[19.0, 3.0, 0.5], 32]]}   # optional
      presence: {"2": [1.0, 0.43, 0.12]}                                         # optional

``by_prompt`` (optional) is the per-prompt evidence the bootstrap resamples: for each
measuring prompt, the sums over its positions of each rank's probability (``R`` numbers) and
its number of positions. ``presence`` (optional) gives, for a proposer ``j`` (a set index),
``q_b`` = P(it finds at least ``b`` ranked candidates at a position), measured on the same
positions: what a tree or siblings of its candidates really feed the reviewer (Theorem TP,
:mod:`ewif.kernel.tree`); a proposer without it is priced as finding them all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ewif.base import validate
from ewif.base.tree_checks import candidate_presence, rank_acceptance
from ewif.files.bootstrap_data import key_in, key_out

Key = tuple[float, int, int]

__all__ = ["Key", "RankAcceptance"]


@dataclass(frozen=True)
class RankAcceptance:
    """The section: ``vectors[(l, r, j)]``, the optional ``by_prompt[(l, r, j)]``, an array
    of shape ``(prompts, R + 1)`` (rank sums, then the positions), and the optional
    ``presence[j]`` of proposers (module docstring)."""

    vectors: Mapping[Key, np.ndarray]
    by_prompt: Mapping[Key, np.ndarray] = field(default_factory=dict)
    presence: Mapping[int, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        vectors = {
            key: rank_acceptance(f"rank_acceptance.vectors['{key_out(key)}']", v)
            for key, v in self.vectors.items()
        }
        object.__setattr__(self, "vectors", vectors)
        presence = {
            int(j): candidate_presence(f"rank_acceptance.presence['{j}']", q)
            for j, q in self.presence.items()
        }
        object.__setattr__(self, "presence", presence)
        prompts = set()
        for key, table in self.by_prompt.items():
            name = f"rank_acceptance.by_prompt['{key_out(key)}']"
            if key not in vectors:
                raise ValueError(f"{name} needs the pair's vector in rank_acceptance.vectors")
            arr = np.asarray(table, dtype=float)
            size = vectors[key].size
            if arr.ndim != 2 or arr.shape[1] != size + 1 or not np.isfinite(arr).all():
                raise ValueError(
                    f"{name} must list, per prompt, [[sum_1, ..., sum_{size}], positions]"
                )
            if (arr < 0).any() or (arr[:, :-1].sum(axis=1) > arr[:, -1] * (1 + 1e-9)).any():
                raise ValueError(
                    f"{name} needs sums >= 0 adding up to at most the positions, per prompt"
                )
            prompts.add(arr.shape[0])
        if prompts and (len(prompts) != 1 or min(prompts) < 2):
            raise ValueError(
                "rank_acceptance.by_prompt needs the same number (>= 2) of prompts for every "
                f"pair, got {sorted(prompts)}"
            )

    def check(self, alpha: Mapping[float, np.ndarray]) -> None:
        """Against the set's ``alpha``: a measured lenience and pair ``r < j``, ``p_1`` the
        pair's alpha, and the target's vectors (``r = 0``) the same at every lenience."""
        target: dict[int, np.ndarray] = {}
        for (lenience, r, j), p in self.vectors.items():
            name = f"rank_acceptance.vectors['{key_out((lenience, r, j))}']"
            matrix = alpha.get(lenience)
            if matrix is None:
                raise ValueError(f"{name}: lenience {lenience:g} has no alpha matrix")
            if not 0 <= r < j < matrix.shape[0]:
                raise ValueError(f"{name} must name a pair 0 <= r < j < {matrix.shape[0]}")
            a = float(matrix[r, j])
            if math.isnan(a) or not math.isclose(p[0], a, rel_tol=1e-9, abs_tol=1e-12):
                raise ValueError(
                    f"{name} must start with p_1 = alpha[{lenience:g}][{r}][{j}] = {a!r} (the "
                    f"top candidate is the chain's draft token), got {p[0]!r}"
                )
            if r == 0:
                if j in target and not np.array_equal(target[j], p):
                    raise ValueError(
                        f"{name}: the target's vectors must be the same at every lenience "
                        "(lenience is never applied at the target)"
                    )
                target[j] = p
        models = next(iter(alpha.values())).shape[0]
        for j in self.presence:
            if not 1 <= j < models:
                raise ValueError(
                    f"rank_acceptance.presence['{j}'] must name a drafter 1..{models - 1}"
                )

    def vector(self, lenience: float, r: int, j: int, alpha: float) -> np.ndarray:
        """``p`` of pair ``(r, j)`` at ``lenience`` (``r = 0``: any lenience's), or the chain's
        ``(alpha,)`` when the section has none."""
        p = self.vectors.get((float(lenience), r, j))
        if p is None and r == 0:
            p = next((v for (_, r0, j0), v in self.vectors.items() if (r0, j0) == (0, j)), None)
        return np.array([alpha]) if p is None else p

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "vectors": {key_out(k): v.tolist() for k, v in sorted(self.vectors.items())}
        }
        if self.by_prompt:
            out["by_prompt"] = {
                key_out(k): [[row[:-1].tolist(), float(row[-1])] for row in np.asarray(t)]
                for k, t in sorted(self.by_prompt.items())
            }
        if self.presence:
            out["presence"] = {str(j): q.tolist() for j, q in sorted(self.presence.items())}
        return out

    @classmethod
    def from_dict(cls, raw: Any) -> RankAcceptance:
        """The section of a parsed file (module docstring); ``ValueError`` otherwise."""
        if not isinstance(raw, dict) or "vectors" not in raw:
            raise ValueError(
                "rank_acceptance must be a mapping with 'vectors' ('l,r,j' -> [p_1, ...])"
            )
        unknown = set(raw) - {"vectors", "by_prompt", "presence"}
        if unknown:
            raise ValueError(f"rank_acceptance has unknown keys {sorted(unknown)}")
        vectors = validate.keyed(
            "rank_acceptance.vectors", raw["vectors"], _key_in, "'l,r,j'", "[p_1, ..., p_R]"
        )
        prompts = validate.keyed(
            "rank_acceptance.by_prompt",
            raw.get("by_prompt") or {},
            _key_in,
            "'l,r,j'",
            "per-prompt [[sums], positions]",
        )
        presence = validate.keyed(
            "rank_acceptance.presence", raw.get("presence") or {}, int, "'j'", "[q_1, ...]"
        )
        return cls(vectors, {k: _prompt_rows(k, v) for k, v in prompts.items()}, presence)


def _prompt_rows(key: Key, rows: Any) -> np.ndarray:
    """``[[sums...], positions]`` per prompt as one row ``[sums..., positions]`` each."""
    name = f"rank_acceptance.by_prompt['{key_out(key)}']"
    try:
        table = [[*sums, n] for sums, n in rows]
        return np.asarray(table, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must list, per prompt, [[sum_1, ..., sum_R], positions]"
        ) from None


def _key_in(text: str) -> Key:
    """``'l,r,j'`` as (lenience, reviewer, drafter) (:func:`key_in`), the lenience finite
    and at least 1."""
    x, r, j = key_in(text)
    if not (math.isfinite(x) and x >= 1):
        raise ValueError
    return x, r, j
