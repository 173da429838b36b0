"""Replay Algorithm 1 over measured acceptance traces: a prediction that keeps how acceptance
depends on the text.

The exact EWIF (:mod:`ewif.kernel.cascade`) treats every test as an independent Bernoulli(α) trial.
Real text is not like that: some prompts are easier than others, and acceptances cluster
(Max-Gram copies a span or fails for many positions in a row; after a rejection the next
position is harder too). A draft starts right after a rejection more often than at a random
position, so clustering costs tokens per step that no α can show.

A *trace* of pair ``(l, r, o)`` on one measuring prompt is what :mod:`realrun.measure`
records: ``a_t``, at each position ``t`` of the target's continuation, whether model ``o``'s
proposal there passes reviewer ``r``'s test at lenience ``l`` (greedy: 0 or 1) or the
probability that it does (sampling). :class:`TraceReplay` plays Algorithm 1 (any K, fill,
lenience and catch-up, the explicit-sequence player of :mod:`simulate.fed_positions`) along
that text: the draft token at text position ``t`` that model ``o`` generated (a leaf's
proposal, or a reviewer's correction or bonus token) passes reviewer ``r`` iff ``a_t`` of
``(l_r, r, o)`` holds — drawn with probability ``a_t`` when it is one — with ``l_r`` the
configuration's lenience for ``r >= 1`` and 1 at the target. The last step drafts past the
end of the text like a decoder does; a test there is drawn with the trace's mean. Every pass
is priced at the positions it feeds (:func:`replay`).

One approximation: a draft token that follows a draft token differing from the text is
tested with the text's trace, where a decoder would test it in a context that already
deviates. Only draft-to-draft reviews see such tokens (the target rejects at the first
deviation), and the replayed pass counts match a real run's closely (docs/findings.md).

Each measuring prompt is replayed as one generation of its trace's length; the predicted
speed-up is ``Σ_p N_p·c_0(1) / Σ_p C_p``. A replay's passes do not depend on the costs, so
:class:`Replay` keeps them per prompt and prices them: :meth:`Replay.interval` resamples whole
prompts (the same widening and two-stage held-out draw as the exact EWIF's interval,
:mod:`ewif.base.resampling`) and, where the model set carries the cost curves' standard
errors, prices each resample with one draw of the costs, as the exact EWIF's interval does.

The replay shares no evaluation with ``ewif``: it reads the configuration and the model
set's data, states the contract's definitions itself (:mod:`simulate.contract`) and prices
passes from the cost table (:mod:`simulate.prices`). Only the bootstrap's draws are shared
(:mod:`ewif.base.resampling`), so that its interval means what the exact one means.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ewif.base import resampling, validate
from simulate.contract import is_leaf, reached
from simulate.fed_positions import FedPositions
from simulate.prices import Prices

if TYPE_CHECKING:
    from ewif.files.model_set import ModelSet

Trace = Mapping[tuple[float, int, int], np.ndarray]

__all__ = ["Replay", "TraceReplay", "replay"]


class TraceReplay(FedPositions):
    """The explicit-sequence player whose tests read one prompt's traces (module docstring).

    ``traces[(l, r, o)]``: the trace of reviewer ``r`` and origin ``o`` at lenience ``l``,
    in the configuration's model indices; ``lenience``: the configuration's (draft-to-draft
    reviews; the target reads ``l = 1``)."""

    def __init__(
        self,
        traces: Trace,
        lenience: float,
        K: object,
        fill: str,
        catch_up: Sequence[bool],
        price,
        seed: int = 0,
    ) -> None:
        n = np.shape(K)[0]
        super().__init__(np.zeros((n + 1, n + 1)), K, fill, catch_up, price, seed=seed)
        self.traces = traces
        self._means = {k: float(np.mean(a)) if len(a) else 0.0 for k, a in traces.items()}
        self.lenience = float(lenience)

    def accepts(self, r: int, j: int, origin: int, position: int) -> bool:
        key = (self.lenience if r > 0 else 1.0, r, origin)
        trace = self.traces[key]
        p = float(trace[position]) if position < trace.size else self._means[key]
        return p >= 1.0 or (p > 0.0 and self.draw(p))


@dataclass(frozen=True)
class Replay:
    """Per measuring prompt: the tokens ``N_p`` and the mean passes ``passes[p, i, m − 1]``
    of the configuration's model ``i`` over ``m`` positions in its replays, priced by
    ``prices[i, m − 1]`` (target-pass units; ``unit`` = one autoregressive token), and the
    mean catch-up positions ``caught[p, i]``, which return no logit row (``row_cost[i]``
    less each, :mod:`simulate.prices`). A chain's model returns one row per pass exactly
    when it is a leaf (``leaf[i]``), so its passes over ``m >= 2`` are those a row step
    prices ``row_step[i]`` lower: exact from the replayed passes. Where the model set
    (``model_set``, the configuration's ``models``) carries the cost curves' standard
    errors, :meth:`interval` draws the costs too."""

    tokens: np.ndarray
    passes: np.ndarray
    prices: np.ndarray
    unit: float
    model_set: ModelSet | None = None
    models: tuple[str, ...] = ()
    caught: np.ndarray | None = None
    row_cost: np.ndarray | None = None
    row_step: np.ndarray | None = None
    leaf: np.ndarray | None = None

    @property
    def cost(self) -> np.ndarray:
        """``C_p``: the mean cost of prompt ``p``'s replays."""
        return np.einsum("pim,im->p", self.passes, self.prices) - self._rows_saved(
            slice(None), self.row_cost, self.row_step
        )

    def _rows_saved(
        self, idx, row_cost: np.ndarray | None, row_step: np.ndarray | None = None
    ) -> np.ndarray:
        """``Σ_i caught[p, i]·row_cost[i] + Σ_i leaf[i]·(passes of m >= 2)[p, i]·row_step[i]``
        of the prompts ``idx`` (row prices of the configuration's models)."""
        out = np.zeros(self.tokens[idx].size)
        if self.caught is not None and row_cost is not None:
            out = out + self.caught[idx] @ row_cost
        if self.leaf is not None and row_step is not None and np.any(row_step):
            stepped = self.passes[idx][:, :, 1:].sum(axis=2) * self.leaf
            out = out + stepped @ row_step
        return out

    @property
    def speedup(self) -> float:
        """``Σ N_p·unit / Σ C_p``: the predicted speed-up on generations like these."""
        return float(self.tokens.sum() * self.unit / self.cost.sum())

    def interval(
        self,
        level: float = resampling.LEVEL,
        replicates: int = resampling.REPLICATES,
        seed: int = 0,
        held_out_prompts: int | resampling.HeldOut | None = None,
    ) -> tuple[float, float]:
        """The percentile interval of the speed-up over whole-prompt resamples, widened like
        :mod:`ewif.predict.bootstrap` (with ``held_out_prompts``: for a run on that many others).
        With the curves' standard errors, each replicate also prices the resampled passes
        with one draw of the costs (:func:`ewif.base.resampling.drawn_curves`, not widened: the
        widening is the prompts' small-sample correction), as the exact EWIF's interval does:
        ``s* = (s + w·(s(I) − s))·s(I, drawn)/s(I)``."""
        P = self.tokens.size
        widen = resampling.expansion(P, level)
        rng = np.random.default_rng(validate.count("seed", seed))
        held = resampling.held_out_spec(held_out_prompts, P)
        stderr = None if self.model_set is None else self.model_set.bootstrap.cost_curve_stderr
        point = self.speedup
        cost = self.cost
        values = np.empty(validate.count("replicates", replicates, minimum=2))
        for b in range(values.size):
            idx = resampling.prompt_draw(rng, P, held)
            resampled = self.tokens[idx].sum() * self.unit / cost[idx].sum()
            values[b] = point + widen * (resampled - point)
            if stderr is not None:
                curves = resampling.drawn_curves(self.model_set.cost_curve, stderr, rng)
                values[b] *= self.priced_speedup(idx, curves) / resampled
        low, high = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
        return float(low), float(high)

    def priced_speedup(self, idx: np.ndarray, curves: tuple[np.ndarray, ...]) -> float:
        """The speed-up of prompts ``idx`` with the model set's curves replaced by ``curves``
        (its row costs and steps drawn with them, :func:`ewif.base.resampling.drawn_row_cost`,
        :func:`ewif.base.resampling.drawn_row_step`)."""
        ms = self.model_set
        rows = steps = None
        if ms.row_cost is not None:
            rows = resampling.drawn_row_cost(ms.row_cost, ms.cost_curve, curves)
        if ms.row_step is not None:
            steps = resampling.drawn_row_step(ms.row_step, rows, ms.cost_curve, curves)
        costs = Prices.from_curves(curves, rows, steps)
        where = [ms.index(name) for name in self.models]
        m = np.arange(1, self.prices.shape[1] + 1)
        prices = np.array([costs.at(i, m) for i in where])
        passes = self.passes[idx].sum(axis=0)
        saved = self._rows_saved(idx, costs.row_cost[where], costs.row_step[where])
        cost = np.sum(passes * prices) - saved.sum()
        return float(self.tokens[idx].sum() * costs.unit / cost)


def replay(
    model_set: ModelSet,
    models: Sequence[str],
    K: object,
    lenience: float = 1.0,
    *,
    catch_up: Sequence[bool] | None = None,
    repeats: int = 1,
    seed: int = 0,
) -> Replay:
    """Replay one configuration over the model set's measuring traces (module docstring).

    ``repeats`` replays per prompt (greedy traces are 0/1, so one replay is exact; sampling
    traces draw their tests, and the mean of the replays' costs is kept). ValueError when the
    model set carries no traces, or lacks one the configuration tests."""
    idx = model_set.indices(models)
    lenience = model_set.checked_lenience(lenience)
    K = validate.budget_matrix("K", K, len(idx) - 1)
    if catch_up is None:
        catch_up = (
            [False] * len(idx)
            if model_set.catch_up is None
            else [model_set.catch_up[i] for i in idx]
        )
    catch_up = validate.flags("catch_up", catch_up, len(idx))
    prices = Prices.of(model_set, idx)
    data = model_set.bootstrap
    if data is None or data.acceptance_traces is None:
        raise ValueError(
            "this model set carries no acceptance traces (measure it with this version of "
            "csd measure), so it cannot be replayed"
        )
    local = _traces_tested(data.acceptance_traces, idx, K, lenience, models)
    repeats = validate.count("repeats", repeats, minimum=1)
    tokens, counts, caught = [], [], []
    for p in range(data.prompts):
        traces = {k: data.acceptance_traces[v][p] for k, v in local.items()}
        n = len(next(iter(traces.values())))
        player = TraceReplay(
            traces,
            lenience,
            K,
            "tokens",
            catch_up,
            lambda i, m, rows: float(prices.at_rows(i, m, rows)),
            seed=seed + p,
        )
        tokens.append(n)
        runs = [player.generation(n)[1:] for _ in range(repeats)]
        counts.append([sizes for sizes, _ in runs])
        caught.append(np.mean([fed for _, fed in runs], axis=0))
    passes = _mean_passes(counts, len(models), repeats)
    m = np.arange(1, passes.shape[2] + 1)
    return Replay(
        np.array(tokens, dtype=float),
        passes,
        np.array([prices.at(i, m) for i in range(len(models))], dtype=float),
        prices.unit,
        model_set,
        tuple(models),
        np.array(caught, dtype=float),
        prices.row_cost.copy(),
        prices.row_step.copy(),
        np.array([i > 0 and is_leaf(K, i) for i in range(len(models))], dtype=float),
    )


def _traces_tested(
    traces: Mapping, idx: list[int], K: np.ndarray, lenience: float, models: Sequence[str]
) -> dict[tuple[float, int, int], tuple[float, int, int]]:
    """The model set's traces by the configuration's own model indices, ``(l, r, o)`` →
    the set's key; ValueError naming every trace the configuration tests and the set lacks
    (the target reviews at lenience 1, every other reviewer at ``lenience``)."""
    local = {
        (lenience_, idx.index(r), idx.index(o)): key
        for key in traces
        for lenience_, r, o in [key]
        if r in idx and o in idx
    }
    reviewers = [0, *sorted(j for j in reached(K, 0) if not is_leaf(K, j))]
    missing = [
        f"{1.0 if r == 0 else float(lenience):g},{idx[r]},{idx[o]}"
        for r in reviewers
        for o in sorted(reached(K, r))
        if (1.0 if r == 0 else float(lenience), r, o) not in local
    ]
    if missing:
        raise ValueError(
            f"the model set has no acceptance traces of {', '.join(missing)} (lenience, "
            f"reviewer, drafter), which replaying {list(models)} at lenience {lenience:g} tests"
        )
    return local


def _mean_passes(counts: list, n_models: int, repeats: int) -> np.ndarray:
    """``passes[p, i, m − 1]``: the mean passes of model ``i`` over ``m`` positions in prompt
    ``p``'s replays, from ``counts[p][replay][i][m]``."""
    widest = max(
        (m for runs in counts for sizes in runs for by_m in sizes for m in by_m), default=1
    )
    passes = np.zeros((len(counts), n_models, widest))
    for p, runs in enumerate(counts):
        for sizes in runs:
            for i, by_m in enumerate(sizes):
                for m, c in by_m.items():
                    passes[p, i, m - 1] += c / repeats
    return passes
