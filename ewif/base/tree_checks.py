"""Checks of token trees and rank-acceptance vectors, shared by ewif, simulate and realrun.

A token tree is a parent list with ranked children: node 0 is the root (its parent is
``-1`` or ``None``), every other node ``v`` has a parent ``parents[v]`` in ``[0, v)`` (a node
comes after its parent, so the list is a tree), and a rank among its siblings, an integer
``>= 1`` distinct from theirs (by default the order in which the siblings appear: 1, 2, …).
A candidate-presence vector ``q = (q_1, …, q_R)`` gives ``q_b`` = P(the drafter has at least
``b`` ranked candidates at a node): ``R >= 1`` probabilities, non-increasing (a proposer such as
Max-Gram may find fewer than asked; a neural drafter always has them all, ``q = 1``).
A rank-acceptance vector ``p = (p_1, …, p_R)`` gives ``p_b`` = P(the reviewer's token is the
drafter's ``b``-th ranked candidate): ``R >= 1`` finite numbers ``>= 0`` summing to at most 1.

Every check raises ``ValueError`` naming the value and what is allowed.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np

from ewif.base.validate import count, shown

#: Rounding slack on ``Σ p_b <= 1`` (a measured vector's sum may round a few ulps above 1).
SUM_SLACK = 1e-9

__all__ = [
    "SUM_SLACK",
    "candidate_presence",
    "node_count",
    "rank_acceptance",
    "tree_parents",
    "tree_ranks",
]


def tree_parents(name: str, parents: object) -> tuple[int, ...]:
    """``parents`` as a tuple with ``-1`` for the root: ``parents[0]`` is ``-1`` or ``None``,
    every ``parents[v]`` (``v >= 1``) an integer in ``[0, v)``."""
    if isinstance(parents, np.ndarray):
        parents = parents.tolist()
    if isinstance(parents, str | bytes) or not isinstance(parents, Sequence):
        raise ValueError(
            f"{name} must be a list of parent indices (parents[0] = -1 or None for the root), "
            f"got {shown(parents)}"
        )
    if len(parents) == 0:
        raise ValueError(f"{name} must hold at least the root (parents[0] = -1), got []")
    if parents[0] is not None and (_integer(parents[0]) is None or int(parents[0]) != -1):
        raise ValueError(
            f"{name}[0] is the root: its parent must be -1 or None, got {shown(parents[0])}"
        )
    out = [-1]
    for v in range(1, len(parents)):
        p = _integer(parents[v])
        if p is None or not 0 <= p < v:
            raise ValueError(
                f"{name}[{v}] must be a node index in [0, {v}) (a node comes after its "
                f"parent, so the list is a tree), got {shown(parents[v])}"
            )
        out.append(p)
    return tuple(out)


def tree_ranks(name: str, parents: tuple[int, ...], ranks: object | None) -> tuple[int, ...]:
    """The rank of every node among its siblings (0 for the root): by default the order in
    which siblings appear; given ``ranks`` (one per node, ``ranks[0]`` ignored), integers
    ``>= 1`` distinct among siblings."""
    if ranks is None:
        seen: dict[int, int] = {}
        out = [0]
        for p in parents[1:]:
            seen[p] = seen.get(p, 0) + 1
            out.append(seen[p])
        return tuple(out)
    if isinstance(ranks, np.ndarray):
        ranks = ranks.tolist()
    if isinstance(ranks, str | bytes) or not isinstance(ranks, Sequence):
        raise ValueError(f"{name} must be a list of ranks (one per node), got {shown(ranks)}")
    if len(ranks) != len(parents):
        raise ValueError(
            f"{name} must hold one rank per node ({len(parents)}), got {len(ranks)}: {ranks!r}"
        )
    out = [0]
    taken: dict[tuple[int, int], int] = {}
    for v in range(1, len(parents)):
        b = _integer(ranks[v])
        if b is None or b < 1:
            raise ValueError(f"{name}[{v}] must be an integer >= 1, got {shown(ranks[v])}")
        other = taken.get((parents[v], b))
        if other is not None:
            raise ValueError(
                f"{name}: nodes {other} and {v} are siblings (parent {parents[v]}) with the "
                f"same rank {b}; siblings must have distinct ranks"
            )
        taken[parents[v], b] = v
        out.append(b)
    return tuple(out)


def rank_acceptance(name: str, vector: object) -> np.ndarray:
    """A rank-acceptance vector ``(p_1, …, p_R)``: ``R >= 1`` finite numbers ``>= 0`` with
    ``Σ p_b <= 1`` (read-only float array)."""
    out = _probabilities(name, vector, "p")
    total = math.fsum(out)
    if total > 1.0 + SUM_SLACK:
        raise ValueError(
            f"{name} must sum to at most 1 (the ranks are exclusive events), got sum "
            f"{total!r} for {out.tolist()}"
        )
    return out


def candidate_presence(name: str, vector: object) -> np.ndarray:
    """A candidate-presence vector ``(q_1, …, q_R)``: ``R >= 1`` probabilities in ``[0, 1]``,
    non-increasing (at least ``b + 1`` candidates implies at least ``b``; read-only array)."""
    out = _probabilities(name, vector, "q")
    if out[0] > 1.0 + SUM_SLACK:
        raise ValueError(f"{name} must hold probabilities <= 1, got q_1 = {out[0]!r}")
    rises = np.flatnonzero(np.diff(out) > SUM_SLACK)
    if rises.size:
        b = int(rises[0]) + 1
        raise ValueError(
            f"{name} must be non-increasing (q_b = P(at least b candidates)), got "
            f"q_{b} = {float(out[b - 1])!r} < q_{b + 1} = {float(out[b])!r}"
        )
    return out


def _probabilities(name: str, vector: object, letter: str) -> np.ndarray:
    """``R >= 1`` finite numbers ``>= 0`` (read-only float array); the message names the
    vector ``(letter_1, …, letter_R)``."""
    if isinstance(vector, str | bytes) or not isinstance(vector, Sequence | np.ndarray):
        raise ValueError(
            f"{name} must be a list of probabilities ({letter}_1, ..., {letter}_R), got "
            f"{shown(vector)}"
        )
    try:
        flat = np.ndim(vector) == 1
    except ValueError:  # ragged nesting
        flat = False
    if not flat or len(vector) == 0:
        raise ValueError(
            f"{name} must be a non-empty 1-D list ({letter}_1, ..., {letter}_R), got "
            f"{shown(vector)}"
        )
    out = []
    for b, x in enumerate(vector, start=1):
        if isinstance(x, np.generic):
            x = x.item()
        if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(x) or x < 0:
            raise ValueError(
                f"{name} must hold finite probabilities >= 0, got {letter}_{b} = {shown(x)}"
            )
        out.append(float(x))
    arr = np.asarray(out)
    arr.setflags(write=False)
    return arr


def node_count(name: str, value: object) -> int:
    """A number of tree nodes: an integer ``>= 1`` (the root counts)."""
    return count(name, value, minimum=1)


def _integer(value: object) -> int | None:
    """``value`` as an int when it is an integer (numpy integers included, bools not)."""
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return None
    return int(value)
