"""Witness of the catch-up pass: Algorithm 1 played on an explicit token list.

Independent of :mod:`ewif.kernel.catch_up` (it shares no code with it): every token is a fresh id,
so a correction never equals the token it replaces, and every model with ``catch_up`` keeps
the list of tokens it last fed. A pass over the sequence ``tokens`` that must process its
last ``n`` positions (``n = 1`` for a generating pass, ``D + 1`` for a review) feeds
``len(tokens) − lcp(tokens, seen)`` positions, the common prefix capped at ``len − n`` —
exactly what a KV-cached model does after cropping its cache to the common prefix. Models
without ``catch_up`` are priced as the paper counts them (``m = n``). The pass returns the
logits of its last ``n`` positions only: ``price(i, m, n)`` prices it (a catch-up position
returns no row).

The first step of each stream starts from an empty cache; it is a warm-up and not counted
(the unfed tail after one step already has its stationary law). Streams are independent,
so per-stream totals give the confidence intervals.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from simulate.contract import is_leaf

Price = Callable[[int, int, int], float]


@dataclass(frozen=True)
class FedRun:
    """Per stream: counted tokens and cost; per model: total passes by ``m`` (all streams)."""

    tokens: np.ndarray
    cost: np.ndarray
    sizes: tuple[dict[int, int], ...]
    steps: int

    def passes_per_step(self, model: int) -> dict[int, float]:
        """Mean passes of ``model`` per counted step, by ``m``."""
        total = self.tokens.size * self.steps
        return {m: c / total for m, c in sorted(self.sizes[model].items())}


class FedPositions:
    """Plays cascades of ``alpha`` (reviewer × drafter acceptance), ``K`` (``n×n``, 1-based
    as in :mod:`ewif.kernel.cascade`), ``fill`` and per-model ``catch_up`` flags;
    ``price(i, m, rows)`` is the cost of a pass of model ``i`` over ``m`` positions returning
    ``rows`` logit rows. ``draw(p)`` returns True with probability ``p`` (default: a seeded
    ``random.Random``)."""

    def __init__(
        self,
        alpha: object,
        K: object,
        fill: str,
        catch_up: Sequence[bool],
        price: Price,
        seed: int = 0,
        draw: Callable[[float], bool] | None = None,
    ) -> None:
        self.alpha = np.asarray(alpha, dtype=float).tolist()
        self.K = np.asarray(K, dtype=int).tolist()
        self.n = len(self.K)
        self.fill = fill
        self.catch_up = list(catch_up)
        self.price = price
        rng = random.Random(seed)
        self.draw = draw or (lambda p: rng.random() < p)
        self._next_id = 0

    def _token(self) -> int:
        self._next_id += 1
        return self._next_id

    def _pass(self, i: int, tokens: list[int], n: int) -> None:
        m = n
        if self.catch_up[i]:
            seen, cap = self.seen[i], len(tokens) - n
            keep = 0
            while keep < min(cap, len(seen)) and seen[keep] == tokens[keep]:
                keep += 1
            m = len(tokens) - keep
            self.seen[i] = list(tokens)
        self.step_sizes[i][m] = self.step_sizes[i].get(m, 0) + 1
        self.step_caught[i] += m - n
        self.step_cost += self.price(i, m, n)

    def accepts(self, r: int, j: int, origin: int, position: int) -> bool:
        """Whether reviewer ``r`` accepts the draft token at text position ``position``
        (0 = the first generated token) that sits in drafter ``j``'s block and was generated
        by model ``origin`` (a leaf's proposal, or a reviewer's correction or bonus token):
        an independent Bernoulli(``alpha[r][j]``) trial, the model of :mod:`ewif.kernel.cascade`."""
        return self.draw(self.alpha[r][j])

    def _draft(self, r: int, context: list[int]) -> tuple[list[int], list[int], list[int]]:
        """The draft ``r`` reviews after ``context`` (its blocks of row ``K[r]``): the tokens,
        the drafter of each (whose block it is) and each one's origin."""
        draft: list[int] = []
        producers: list[int] = []
        origins: list[int] = []
        for j, b in enumerate(self.K[r][r:], start=r + 1):
            if b == 0:
                continue
            if is_leaf(self.K, j):
                for _ in range(b):
                    self._pass(j, context + draft, 1)
                    draft.append(self._token())
                    producers.append(j)
                    origins.append(j)
                continue
            got = calls = 0
            while (got < b) if self.fill == "tokens" else (calls < b):
                out, made_by = self._review(j, context + draft)
                draft += out
                producers += [j] * len(out)
                origins += made_by
                got, calls = got + len(out), calls + 1
        return draft, producers, origins

    def _review(self, r: int, context: list[int]) -> tuple[list[int], list[int]]:
        """One review call of ``r`` after ``context``: its tokens and each one's origin."""
        draft, producers, origins = self._draft(r, context)
        self._pass(r, context + draft, len(draft) + 1)
        accepted = 0
        start = len(context) - self.prompt_length
        for i, (j, origin) in enumerate(zip(producers, origins, strict=True)):
            if not self.accepts(r, j, origin, start + i):
                break
            accepted += 1
        return [*draft[:accepted], self._token()], [*origins[:accepted], r]

    def step(self, sequence: list[int]) -> list[int]:
        """One target step on ``sequence`` (extended in place); returns the new tokens and
        leaves that step's passes in ``step_sizes`` / ``step_cost`` and every model's catch-up
        positions (fed beyond the rows it asked for) in ``step_caught``."""
        self.step_sizes: list[dict[int, int]] = [{} for _ in range(self.n + 1)]
        self.step_caught = [0] * (self.n + 1)
        self.step_cost = 0.0
        out = self._review(0, sequence)[0]
        sequence += out
        return out

    def start(self) -> list[int]:
        """A fresh stream: empty caches and a one-token prompt."""
        self.seen: list[list[int]] = [[] for _ in range(self.n + 1)]
        self.prompt_length = 1
        return [self._token()]

    def generation(self, max_new_tokens: int) -> tuple[float, list[dict[int, int]], list[int]]:
        """One generation of ``max_new_tokens`` tokens, as a decoder makes it: the prompt
        prefilled (every model has fed it), then target steps until the tokens are made, the
        last step's surplus tokens dropped. Returns its cost, every model's passes by m and
        every model's catch-up positions."""
        prompt = [self._token() for _ in range(3)]
        self.seen = [list(prompt) for _ in range(self.n + 1)]
        self.prompt_length = len(prompt)
        sequence, made, cost = list(prompt), 0, 0.0
        sizes: list[dict[int, int]] = [{} for _ in range(self.n + 1)]
        caught = [0] * (self.n + 1)
        while made < max_new_tokens:
            new = self.step(list(sequence))[: max_new_tokens - made]
            cost += self.step_cost
            caught = [a + b for a, b in zip(caught, self.step_caught, strict=True)]
            for i, counts in enumerate(self.step_sizes):
                for m, c in counts.items():
                    sizes[i][m] = sizes[i].get(m, 0) + c
            sequence += new
            made += len(new)
        return cost, sizes, caught

    def generation_costs(self, generations: int, max_new_tokens: int) -> np.ndarray:
        """The cost of each of ``generations`` independent :meth:`generation` runs."""
        return np.array([self.generation(max_new_tokens)[0] for _ in range(generations)])

    def run(self, streams: int, steps: int) -> FedRun:
        """``streams`` independent streams of one warm-up step and ``steps`` counted steps."""
        tokens, cost = np.zeros(streams), np.zeros(streams)
        sizes: list[dict[int, int]] = [{} for _ in range(self.n + 1)]
        for s in range(streams):
            sequence = self.start()
            self.step(sequence)
            for _ in range(steps):
                tokens[s] += len(self.step(sequence))
                cost[s] += self.step_cost
                for i, counts in enumerate(self.step_sizes):
                    for m, c in counts.items():
                        sizes[i][m] = sizes[i].get(m, 0) + c
        return FedRun(tokens, cost, tuple(sizes), steps)
