"""Acceptance of ranked candidates on real models: the rows behind a rank-acceptance vector.

For a pair (reviewer ``r``, drafter ``j``) at lenience ``l`` and each teacher-forced position
``t`` (the prefixes α is measured on, :mod:`realrun.measure`), row ``t`` holds, for every
rank ``b = 1..R``, the probability that the drafter's ``b``-th candidate is the one the tree
verification rule (:mod:`simulate.decoder.tree_verify`, Theorem TL) accepts at that node:

* **candidates**: a neural drafter's ``R`` most likely tokens (its logits, ties by lowest id,
  as :func:`simulate.decoder.tree_draft.ranked_candidates` orders them), or — sampling —
  ``R`` tokens drawn from its decoded distribution without replacement; a proposer's
  ``candidates(prefix, P, R)`` (Max-Gram's distinct continuations, longest match first);
* **greedy**: the first candidate, by rank, that passes the reviewer's greedy test
  ``z_r(x) + log l >= max z_r`` (``l = 1``: the reviewer's argmax) — so row ``t`` is the
  one-hot of the rank of the reviewer's argmax among the candidates, and the histogram of
  those ranks over positions is the vector;
* **sampling**: recursive rejection sampling — stage ``i`` accepts its candidate with
  ``a_i = min(1, l·p_i(x_i)/q_i(x_i))`` once the stages before it rejected, ``p_i`` the
  residual (:func:`simulate.decoder.tree_verify.stage_law`) — so rank ``b`` is accepted with
  ``Π_{i<b}(1 − a_i)·a_b``. For a proposer (point masses) that is exact; for a neural drafter
  it is averaged over ``draws`` draws of the candidates (Monte Carlo, seeded), except rank 1,
  whose expectation ``Σ_x min(q(x), l·p(x))`` is the chain's α exactly.

A proposer may find fewer than ``R`` candidates: the share of positions where it found at
least ``b`` is its candidate presence ``q_b`` (:func:`presence_rows`, Theorem TP), what a tree
or siblings of its candidates really feed the reviewer.

Rank 1 is the chain's draft token in every case, so the first column equals the per-position
acceptance α is the mean of (:func:`realrun.acceptance.measure_acceptance` puts that array
there): ``p_1 = α`` exactly. A rank a proposer does not fill has probability 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ewif.files.rank_acceptance import RankAcceptance
from simulate.decoder.interface import TokenModel
from simulate.decoder.sampling import sample

#: Ranks measured per pair unless a caller says otherwise (the optimizer's default
#: ``siblings = 7`` uses ranks 1..8).
RANKS = 8
#: Monte Carlo draws of a neural drafter's candidates per position (sampling only).
DRAWS = 16

__all__ = [
    "DRAWS",
    "RANKS",
    "candidate_table",
    "greedy_rank_rows",
    "presence_rows",
    "rank_rows",
    "rank_section",
    "sampling_rank_rows",
]


def candidate_table(
    model, logits: np.ndarray | None, seq: Sequence[int], prompt_length: int, ranks: int
) -> np.ndarray:
    """``(T, ranks)`` token ids: drafter ``model``'s ranked candidates at each teacher-forced
    position (``-1`` where a proposer has fewer); ``logits`` its rows (neural only)."""
    if isinstance(model, TokenModel):
        return np.argsort(-logits, axis=-1, kind="stable")[:, :ranks]
    T = len(seq) - prompt_length
    out = np.full((T, ranks), -1, dtype=np.int64)
    for t in range(T):
        found = model.candidates(list(seq[: prompt_length + t]), prompt_length, ranks)
        out[t, : len(found)] = found
    return out


def greedy_rank_rows(reviewer: np.ndarray, candidates: np.ndarray, lenience: float) -> np.ndarray:
    """``(T, R)``: one-hot of the first candidate (by rank) passing the reviewer's greedy test
    with ``lenience`` (module docstring); a zero row when none does."""
    rows = np.arange(reviewer.shape[0])[:, None]
    valid = candidates >= 0
    score = np.where(valid, reviewer[rows, np.maximum(candidates, 0)], -np.inf)
    ok = score + math.log(lenience) >= reviewer.max(axis=-1, keepdims=True)
    out = np.zeros(candidates.shape)
    hit = ok.any(axis=1)
    out[np.flatnonzero(hit), ok.argmax(axis=1)[hit]] = 1.0
    return out


def sampling_rank_rows(
    p: np.ndarray,
    q: np.ndarray | None,
    candidates: np.ndarray | None,
    lenience: float,
    ranks: int,
    rng: np.random.Generator,
    draws: int = DRAWS,
) -> np.ndarray:
    """``(T, ranks)``: the probability that rank ``b`` is the one recursive rejection sampling
    accepts (module docstring) — ``p`` the reviewer's decoded distributions; ``q`` a neural
    drafter's (candidates drawn without replacement, ``draws`` times), or ``candidates`` a
    proposer's point masses."""
    out = np.zeros((p.shape[0], ranks))
    for t in range(p.shape[0]):
        if q is None:
            points = [(int(x), None) for x in candidates[t] if x >= 0]
            out[t] = _stages(p[t], points, lenience, ranks)
            continue
        for _ in range(draws):
            out[t] += _stages(p[t], _drawn(q[t], ranks, rng), lenience, ranks)
        out[t] /= draws
    return out


def _drawn(q: np.ndarray, count: int, rng: np.random.Generator) -> list[tuple[int, np.ndarray]]:
    """``count`` tokens drawn from ``q`` without replacement, each with its law given the
    draws before it (``q`` masked to the tokens not drawn yet, renormalised)."""
    left = q.astype(float, copy=True)
    out = []
    for _ in range(count):
        total = left.sum()
        if total <= 0.0:
            break
        law = left / total
        x = sample(law, rng)
        out.append((x, law))
        left[x] = 0.0
    return out


def _stages(
    p: np.ndarray, stages: list[tuple[int, np.ndarray | None]], lenience: float, ranks: int
) -> np.ndarray:
    """Per rank ``1..ranks``, the probability that its stage accepts: ``Π_{i<b}(1 − a_i)·a_b``
    (module docstring); ranks past ``stages`` get 0. ``None`` laws are point masses."""
    out = np.zeros(ranks)
    left, residual = 1.0, p
    for b, (x, law) in enumerate(stages[:ranks]):
        qx = 1.0 if law is None else float(law[x])
        a = min(1.0, lenience * float(residual[x]) / qx) if qx > 0.0 else 1.0
        out[b] = left * a
        left *= 1.0 - a
        if left <= 0.0:
            break
        if law is None:
            rest = residual.copy()
            rest[x] = 0.0
        else:
            rest = np.maximum(residual - law, 0.0)
        total = rest.sum()
        residual = rest / total if total > 0.0 else residual
    return out


def presence_rows(
    models: Sequence, seq: Sequence[int], prompt_length: int, ranks: int
) -> dict[int, np.ndarray]:
    """``(T, ranks)`` per proposer ``j`` (a model that is not a :class:`TokenModel`): 1 where
    it found at least ``b`` candidates at a teacher-forced position, else 0 (module
    docstring)."""
    return {
        j: (candidate_table(model, None, seq, prompt_length, ranks) >= 0).astype(float)
        for j, model in enumerate(models)
        if j > 0 and not isinstance(model, TokenModel)
    }


def rank_rows(
    models: Sequence,
    logits: dict[int, np.ndarray],
    seq: Sequence[int],
    prompt_length: int,
    acceptances: dict[tuple[float, int, int], np.ndarray],
    decoding,
    ranks: int,
    rng: np.random.Generator,
) -> dict[tuple[float, int, int], np.ndarray]:
    """``(T, ranks)`` rows of every pair and lenience of ``acceptances`` (the per-position α
    of :func:`realrun.acceptance.measure_acceptance`, which becomes column 1; module docstring)
    on one teacher-forced sequence; ``logits``: every neural model's rows there."""
    tables: dict[int, np.ndarray] = {}
    probs = {} if decoding.greedy else {i: decoding.probs(z) for i, z in logits.items()}
    out = {}
    for (lenience, r, j), a in acceptances.items():
        if j not in tables:
            tables[j] = candidate_table(models[j], logits.get(j), seq, prompt_length, ranks)
        if decoding.greedy:
            rows = greedy_rank_rows(logits[r], tables[j], lenience)
        else:
            points = None if j in probs else tables[j]
            rows = sampling_rank_rows(probs[r], probs.get(j), points, lenience, ranks, rng)
        rows[:, 0] = a
        room, rest = 1.0 - a, rows[:, 1:].sum(axis=1)
        over = rest > room
        rows[over, 1:] *= (room[over] / rest[over])[:, None]  # Monte Carlo past rank 1
        out[(lenience, r, j)] = rows
    return out


def rank_section(
    ranks: dict[tuple[float, int, int], list[np.ndarray]],
    runs: dict[tuple[float, int, int], list[np.ndarray]],
    present: dict[int, list[np.ndarray]] | None = None,
) -> RankAcceptance:
    """The model set's ``rank_acceptance`` from each pair's rows per prompt (``ranks``) and
    its per-position α (``runs``): the vectors (the mean row over all positions, ``p_1``
    computed as α is; every measured rank kept, a rank never accepted at 0, so any tree of
    those ranks is priced), with two prompts or more, per prompt the sum of each rank's
    column (rank 1: α's own sums) and the positions, and each proposer's presence, the mean
    of its :func:`presence_rows` over all positions."""
    vectors, by_prompt = {}, {}
    for key, tables in ranks.items():
        p = np.concatenate(tables).mean(axis=0)
        p[0] = float(np.concatenate(runs[key]).mean())
        vectors[key] = p
        sums = [[*t.sum(axis=0), t.shape[0]] for t in tables]
        for row, a in zip(sums, runs[key], strict=True):
            row[0] = float(a.sum())
        by_prompt[key] = np.array(sums)
    prompts = len(next(iter(runs.values())))
    presence = {j: np.concatenate(rows).mean(axis=0) for j, rows in (present or {}).items()}
    return RankAcceptance(vectors, by_prompt if prompts >= 2 else {}, presence)
