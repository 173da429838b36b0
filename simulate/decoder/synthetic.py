"""Seeded synthetic language models and a synthetic deterministic proposer.

:class:`SyntheticLM` is a deterministic function from the last ``context`` tokens to a
categorical distribution over a small vocabulary (positions before the start of the
sequence read as a padding symbol), stored as a table with one row per context. It
implements :class:`~simulate.decoder.interface.TokenModel` (stateless, so the cache
contract holds trivially) and returns log-probabilities as logits.

Closeness is set exactly. ``model.drafter(alpha)`` returns, for every context ``c``,

    p_d(·|c) = (1 − ε_c)·p(·|c) + ε_c·n_c,     ε_c = (1 − α) / TV(p(·|c), n_c),

where ``n_c`` is a seeded random distribution on the less likely half of the vocabulary
under ``p(·|c)``. Since ``TV(p, p_d) = ε_c·TV(p, n_c) = 1 − α``, speculative sampling of
a ``p_d`` draft by ``p`` (temperature 1, lenience 1) accepts with probability exactly
``Σ min(p, p_d) = 1 − TV = α`` in *every* context — the i.i.d. Bernoulli acceptance the
EWIF theory assumes. ``alpha`` may range over ``[1 − min_c TV(p(·|c), n_c), 1]``, which
always contains ``[0.5, 1]`` (the less likely half holds mass ``<= 1/2``, so
``TV(p, n_c) >= 1/2``).

:class:`SyntheticProposer` is a deterministic Max-Gram-like drafter: continue the latest
earlier occurrence of the last token (labelled ``"prompt"`` or ``"generated"`` by where the
continuation lies), else a bigram table (``"bigram"``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ewif.base import validate


class SyntheticLM:
    """``p(x | last context tokens) = table[index(context), x]``.

    ``table`` has shape ``((V + 1) ** context, V)``; row ``Σ_i c_i (V+1)^(context-1-i)``
    holds the distribution after context ``(c_0, ..., c_{context-1})`` (oldest first,
    ``c_i = V`` for "before the start").
    """

    def __init__(self, table: object, context: int, name: str = "synthetic") -> None:
        self.context = validate.count("context", context, minimum=1)
        probs = validate.probabilities("table", table)
        if probs.ndim != 2 or probs.shape[1] < 2:
            raise ValueError(f"table must be a 2-D array with >= 2 columns, got {probs.shape}")
        vocab = probs.shape[1]
        if probs.shape[0] != (vocab + 1) ** self.context:
            raise ValueError(
                f"table must have (vocab_size + 1) ** context = {(vocab + 1) ** self.context} "
                f"rows, got {probs.shape[0]}"
            )
        if not np.allclose(probs.sum(axis=1), 1.0, rtol=0, atol=1e-9):
            raise ValueError("table rows must each sum to 1")
        self.name = str(name)
        self.vocab_size = vocab
        self.table = probs.copy()
        self.table.setflags(write=False)
        with np.errstate(divide="ignore"):
            self._logits = np.log(self.table)
        self._logits.setflags(write=False)
        self._weights = [(vocab + 1) ** (self.context - 1 - i) for i in range(self.context)]

    @classmethod
    def random(
        cls,
        vocab_size: int = 8,
        context: int = 2,
        sharpness: float = 1.5,
        seed: int = 0,
        name: str = "target",
    ) -> SyntheticLM:
        """A table of ``softmax(sharpness · N(0, 1))`` rows from ``seed``, formed as
        ``exp(sharpness · (g − max g))`` so no sharpness overflows to NaN (an exponent
        overflowing to ``-inf`` is below ``-max float``: its ``exp`` is 0 exactly)."""
        vocab = validate.count("vocab_size", vocab_size, minimum=2)
        ctx = validate.count("context", context, minimum=1)
        scale = validate.cost("sharpness", sharpness)
        rng = np.random.default_rng(validate.count("seed", seed))
        g = rng.standard_normal(((vocab + 1) ** ctx, vocab))
        with np.errstate(over="ignore"):
            z = np.exp(scale * (g - g.max(axis=1, keepdims=True)))
        return cls(z / z.sum(axis=1, keepdims=True), ctx, name)

    def drafter(self, alpha: float, seed: int = 0, name: str | None = None) -> SyntheticLM:
        """A drafter accepted with probability exactly ``alpha`` in every context (see
        the module docstring); raises ValueError if ``alpha`` is below the reachable
        minimum ``1 − min_c TV(p, n_c)``."""
        a = validate.probability("alpha", alpha)
        rng = np.random.default_rng(validate.count("seed", seed))
        vocab = self.vocab_size
        low = np.argsort(self.table, axis=1, kind="stable")[:, : max(1, vocab // 2)]
        noise = np.zeros_like(self.table)
        np.put_along_axis(noise, low, rng.dirichlet(np.ones(low.shape[1]), len(low)), axis=1)
        tv = 1.0 - np.minimum(self.table, noise).sum(axis=1)
        if 1.0 - a > tv.min():
            raise ValueError(
                f"alpha must be in [{1.0 - tv.min():.6g}, 1] for this model and seed, got {alpha!r}"
            )
        eps = ((1.0 - a) / tv)[:, None]
        mixed = self.table if a == 1.0 else (1.0 - eps) * self.table + eps * noise
        return SyntheticLM(mixed, self.context, name or f"{self.name}~{a:g}")

    def distribution(self, tokens: Sequence[int]) -> np.ndarray:
        """``p(· | tokens)`` (read-only row)."""
        return self.table[self._index(tokens, len(tokens))]

    def logits(self, tokens: Sequence[int], n: int) -> np.ndarray:
        """Log-probabilities after each of the last ``n`` prefixes of ``tokens``."""
        end = len(tokens)
        if not 1 <= n <= end:
            raise ValueError(f"n must be in [1, len(tokens)] = [1, {end}], got {n}")
        if n == 1:
            i = self._index(tokens, end)
            return self._logits[i : i + 1]  # a read-only view: callers never write to logits
        return self._logits.take([self._index(tokens, e) for e in range(end - n + 1, end + 1)], 0)

    def _index(self, tokens: Sequence[int], end: int) -> int:
        pad = self.vocab_size
        idx = 0
        for w, pos in zip(self._weights, range(end - self.context, end), strict=True):
            idx += w * (tokens[pos] if pos >= 0 else pad)
        return idx


def acceptance_rates(reviewer: SyntheticLM, drafter: SyntheticLM) -> np.ndarray:
    """Per-context acceptance probability ``Σ_x min(p_reviewer, p_drafter) = 1 − TV`` of
    exact speculative sampling at temperature 1 (one entry per table row)."""
    if reviewer.table.shape != drafter.table.shape:
        raise ValueError(
            f"models must share vocabulary and context, got tables {reviewer.table.shape} "
            f"and {drafter.table.shape}"
        )
    return np.minimum(reviewer.table, drafter.table).sum(axis=1)


class SyntheticProposer:
    """Deterministic leaf drafter: after last token ``t``, the token that followed the
    latest earlier occurrence of ``t`` (``"prompt"``/``"generated"``), else ``bigram[t]``
    (``"bigram"``). Sets ``last_sources`` on every call."""

    def __init__(self, bigram: Sequence[int], name: str = "proposer") -> None:
        table = validate.counts("bigram", bigram)
        vocab = len(table)
        if table.ndim != 1 or vocab < 2 or (table >= vocab).any():
            raise ValueError(f"bigram must list one next token in [0, V) per token, got {bigram!r}")
        self.name = str(name)
        self.vocab_size = vocab
        self._bigram = table.tolist()
        self.last_sources: list[str] = []

    @classmethod
    def distilled(cls, model: SyntheticLM, name: str = "proposer") -> SyntheticProposer:
        """Bigram table of ``model``'s argmax next token given only the last token."""
        return cls([int(np.argmax(model.distribution([t]))) for t in range(model.vocab_size)], name)

    def candidates(self, tokens: Sequence[int], prompt_length: int, count: int) -> list[int]:
        """Up to ``count`` distinct next tokens, best first (a
        :class:`~simulate.decoder.tree_interface.RankedProposer`): the continuations of the
        earlier occurrences of the last token, latest first, then ``bigram[last]``."""
        seq = list(tokens)
        last = seq[-1]
        out: list[int] = []
        for i in range(len(seq) - 2, -1, -1):
            if seq[i] == last and seq[i + 1] not in out:
                out.append(seq[i + 1])
        if self._bigram[last] not in out:
            out.append(self._bigram[last])
        return out[:count]

    def propose(self, tokens: Sequence[int], prompt_length: int, k: int) -> list[int]:
        seq = list(tokens)
        out: list[int] = []
        self.last_sources = []
        for _ in range(k):
            last = seq[-1]
            hit = next((i for i in range(len(seq) - 2, -1, -1) if seq[i] == last), None)
            if hit is None:
                nxt, label = self._bigram[last], "bigram"
            else:
                nxt = seq[hit + 1]
                label = "prompt" if hit + 1 < prompt_length else "generated"
            seq.append(nxt)
            out.append(nxt)
            self.last_sources.append(label)
        return out
