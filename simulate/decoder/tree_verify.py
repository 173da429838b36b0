r"""Verifying a token tree in one reviewer pass: greedy, and recursive rejection sampling
(Theorem TL, docs/theory.md "Token trees").

A draft tree is given as ``children[v]`` (each node's children, in rank order) and
``tokens[v]``; node 0 is the root (the last token of the sequence). ``probs[v]`` (sampling)
or ``logits[v]`` (greedy) is the reviewer's next-token distribution after the path to ``v``
(one pass over the tree). ``laws[c]`` is the law of child ``c``'s token as its parent's
candidate, *given the candidates tried before it at that parent*: an array (e.g. the
drafter's distribution masked to the tokens not drawn yet, for siblings drawn without
replacement) or ``None`` for a deterministic candidate (the point mass at it: a top-k
sibling, a Max-Gram match).

**Greedy.** From the root, move to the first child (in rank order) whose token the reviewer
accepts — for lenience 1 the child equal to its argmax (ties: lowest id), for ``l > 1`` any
child with ``l·p(x) >= max p`` — until no child is accepted; then output the path and the
argmax at its end. With lenience 1 this is the reviewer's own greedy decoding.

**Recursive rejection sampling (Theorem TL).** At node ``v`` the residual starts at ``p_v``.
For each child ``c`` in rank order, with ``q_c = laws[c]`` and ``x = tokens[c]``: accept with
probability ``min(1, l·p'(x)/q_c(x))`` and move to ``c``; otherwise replace ``p'`` by
``norm(max(0, p' − q_c))`` (for a point mass: ``p'`` without ``x``) and try the next child.
If every child is rejected, output a token drawn from ``p'`` and stop. Each stage is one
speculative-sampling step of a proposal whose law, given everything before it, is ``q_c``, so
the token output at ``v`` has the law (★) of :mod:`simulate.decoder.verify` applied stage by
stage (given the candidates drawn) — :func:`stage_law`, which is ``p_v`` for ``l = 1``:
lossless at the target. A candidate
checked with a law it was not drawn from breaks this: accepting a deterministic top-k sibling
with ``p/q`` of the drafter's softmax ``q`` (instead of ``q = 1``) is the known wrong rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from simulate.decoder.sampling import sample
from simulate.decoder.verify import TokenLaw

__all__ = ["TreeReview", "greedy_tree_verify", "sampling_tree_verify", "stage_law"]


class TreeReview(NamedTuple):
    """The accepted ``path`` (node indices below the root), the output ``tokens`` (the
    path's tokens, then the correction or bonus), and the law of each output token (when
    asked for)."""

    path: list[int]
    tokens: list[int]
    laws: list[np.ndarray] | None


def greedy_tree_verify(
    tokens: Sequence[int], children: Sequence[Sequence[int]], logits: np.ndarray, lenience: float
) -> TreeReview:
    """Greedy review of the tree (module docstring); ``logits[v]`` raw scores after ``v``."""
    path, v = [], 0
    slack = math.log(lenience) if lenience != 1.0 else 0.0
    while True:
        row = logits[v]
        if lenience == 1.0:
            best = int(np.argmax(row))
            nxt = next((c for c in children[v] if tokens[c] == best), None)
        else:
            top = float(row.max())
            nxt = next((c for c in children[v] if row[tokens[c]] + slack >= top), None)
        if nxt is None:
            return TreeReview(path, [tokens[c] for c in path] + [int(np.argmax(row))], None)
        path.append(nxt)
        v = nxt


def sampling_tree_verify(
    tokens: Sequence[int],
    children: Sequence[Sequence[int]],
    laws: Sequence[TokenLaw],
    probs: np.ndarray,
    lenience: float,
    rng: np.random.Generator,
    want_laws: bool,
) -> TreeReview:
    """Recursive rejection sampling over the tree (module docstring, Theorem TL)."""
    path, v = [], 0
    while True:
        residual = probs[v]
        moved = None
        for c in children[v]:
            x, q = tokens[c], laws[c]
            qx = 1.0 if q is None else float(q[x])
            if rng.random() * qx < lenience * residual[x]:
                moved = c
                break
            residual = _after_rejection(residual, x, q)
        if moved is None:
            last = sample(residual, rng)
            break
        path.append(moved)
        v = moved
    out_laws = None
    if want_laws:
        nodes = [0, *path]
        out_laws = [
            stage_law(probs[u], [(tokens[c], laws[c]) for c in children[u]], lenience)
            for u in nodes
        ]
    return TreeReview(path, [tokens[c] for c in path] + [last], out_laws)


def _after_rejection(p: np.ndarray, x: int, q: TokenLaw) -> np.ndarray:
    """``norm(max(0, p − q))`` (a point mass: ``p`` without ``x``); ``p`` itself when that
    is empty (a rejection of probability 0 that only rounding produced)."""
    if q is None:
        out = p.copy()
        out[x] = 0.0
    else:
        out = np.maximum(p - q, 0.0)
    total = float(out.sum())
    return out / total if total > 0.0 else p


def stage_law(p: np.ndarray, stages: Sequence[tuple[int, TokenLaw]], lenience: float) -> np.ndarray:
    """The law of the token a node outputs when its candidates ``stages = [(x, q), …]`` are
    tried in order against ``p`` with ``lenience``. For ``lenience = 1``: ``p`` (Theorem TL).
    Otherwise the law *given the candidates drawn* (valid for the review above, whose
    distribution does not depend on them): stage ``i`` outputs ``x_i`` with probability
    ``a_i = min(1, l·p_i(x_i)/q_i(x_i))`` (``q_i(x_i) = 1`` for a point mass) once the stages
    before it rejected, ``p_i`` the residual then; after every stage, the last residual.
    For deterministic candidates this is (★) stage by stage; for drawn ones, conditioning on
    the draws keeps it exact where averaging stage by stage would not (the law of a later
    draw depends on the earlier one)."""
    if lenience == 1.0 or not stages:
        return p
    out = np.zeros_like(p)
    left, residual = 1.0, p
    for x, q in stages:
        qx = 1.0 if q is None else float(q[x])
        a = min(1.0, lenience * float(residual[x]) / qx) if qx > 0.0 else 1.0
        out[x] += left * a
        left *= 1.0 - a
        if left <= 0.0:
            return out
        residual = _after_rejection(residual, x, q)
    return out + left * residual
