"""Max-Gram (MaG): the paper's statistical drafter (Section 3.3, Appendix A).

Definition (one step; ``s`` = current sequence of length ``L``, the first ``P`` ids are
the prompt). For an end position ``e < L - 1`` let ``lcs(e)`` be the length of the longest
common suffix of ``s`` and ``s[: e + 1]``; an occurrence ending at ``e`` proposes its
continuation ``s[e + 1]``.

* prompt match: ``m_p = max lcs(e)`` over ``e <= P - 2`` (the occurrence and its
  continuation lie in the prompt);
* generated match: ``m_g = max min(lcs(e), e - P + 1)`` over ``P <= e <= L - 2`` (the
  occurrence lies in the generated text, its continuation too);
* ``priority="prompt"`` (the paper's order): the prompt match if ``m_p >= min_match``,
  else the generated match if ``m_g >= min_match``; ``priority="longest"``: the longer
  of the two (the prompt on ties);
* among the end positions attaining the chosen length, the ``earliest`` (default, as
  in the paper's listing) or the ``latest`` one;
* else the bigram fallback ``bigram(s[L - 1])``.

``propose(tokens, P, k)`` applies the step ``k`` times, appending each proposal, so a
match is continued past its end by re-matching and then falls back to the bigram.
``last_sources`` labels each proposal ``"prompt"``, ``"generated"`` or ``"bigram"``.

Ranked candidates (token trees, :class:`simulate.decoder.tree_interface.RankedProposer`).
``candidates(tokens, P, count)`` returns up to ``count`` distinct continuations, best first:
the step's own proposal (so rank 1 is ``propose(tokens, P, 1)``), then the continuations of
every other occurrence of length ``>= min_match`` — prompt (``e <= P − 2``, length
``lcs(e)``) and generated (``P <= e <= L − 2``, length ``min(lcs(e), e − P + 1)``) alike —
longest first, ties by the occurrence rule (``earliest``: smaller ``e`` first), then the
bigram fallback ``bigram(s[L − 1])``. ``last_sources`` labels them as ``propose`` does. It
scans every end position (one vectorised comparison per matched length): O(L·m) for a
longest match ``m``, a lookup per tree node.

Cost. The prompt part is a suffix automaton of ``prompt[: P - 1]`` built once per prompt
in O(P); each state keeps the earliest and latest end position of its strings. The
streaming match state (automaton state, match length) after every prefix of ``s`` is
cached, amortized O(1) per appended token, and the next call keeps the states of the
common prefix with the previous sequence: rollback is a truncation. The generated part
keeps, per prefix, the vector ``lambda(e)`` over the generated end positions, updated on
appending ``c = s[t]`` by the recurrence

    lambda_{t+1}(e) = [s[e] == c] * min(lambda_t(e - 1) + 1, e - P + 1),  lambda_t(P - 1) = 0,

one vectorised O(G) operation (``G`` = generated length; no loop over match lengths),
in numpy or, with ``device=``, in torch on that device (integer ops: identical results).
A call therefore costs O(k + new tokens) for the prompt and O((k + new tokens) * G)
vectorised for the generated text — linear in the sequence length for a fixed budget k,
instead of the O(n * L) backward extension of the paper's listing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np

from ewif.base import validate
from realrun.bigram import BigramTable

if TYPE_CHECKING:
    import torch

Occurrence = Literal["earliest", "latest"]
Priority = Literal["prompt", "longest"]


class SuffixAutomaton:
    """Suffix automaton of a token sequence ``text`` (Blumer et al.), built in O(len).

    ``first[v]``/``last[v]``: smallest/largest end index in ``text`` of the strings of
    state ``v`` (the extremes of its endpos set)."""

    def __init__(self, text: Sequence[int]) -> None:
        self.next: list[dict[int, int]] = [{}]
        self.link = [-1]
        self.length = [0]
        self.first = [-1]
        own = [False]
        last = 0
        for i, c in enumerate(text):
            cur = self._new(self.length[last] + 1, i)
            own.append(True)
            p = last
            while p != -1 and c not in self.next[p]:
                self.next[p][c] = cur
                p = self.link[p]
            if p == -1:
                self.link[cur] = 0
            else:
                q = self.next[p][c]
                if self.length[p] + 1 == self.length[q]:
                    self.link[cur] = q
                else:
                    clone = self._new(self.length[p] + 1, self.first[q])
                    own.append(False)
                    self.next[clone] = dict(self.next[q])
                    self.link[clone] = self.link[q]
                    while p != -1 and self.next[p].get(c) == q:
                        self.next[p][c] = clone
                        p = self.link[p]
                    self.link[q] = self.link[cur] = clone
            last = cur
        # endpos(v) = end indices of the non-clone states in v's suffix-link subtree
        self.last = [f if o else -1 for f, o in zip(self.first, own, strict=True)]
        for v in sorted(range(1, len(self.length)), key=self.length.__getitem__, reverse=True):
            parent = self.link[v]
            self.last[parent] = max(self.last[parent], self.last[v])

    def _new(self, length: int, first: int) -> int:
        self.next.append({})
        self.link.append(-1)
        self.length.append(length)
        self.first.append(first)
        return len(self.length) - 1

    def step(self, state: tuple[int, int], c: int) -> tuple[int, int]:
        """Streaming match: from (state, length) of the longest suffix of ``s`` occurring
        in ``text``, the same after appending ``c`` (amortized O(1))."""
        v, m = state
        while v and c not in self.next[v]:
            v = self.link[v]
            m = self.length[v]
        if c in self.next[v]:
            return self.next[v][c], m + 1
        return 0, 0


class MaxGram:
    """Max-Gram ``Proposer`` (see the module docstring for the exact definition)."""

    def __init__(
        self,
        bigram: BigramTable,
        *,
        occurrence: Occurrence = "earliest",
        priority: Priority = "prompt",
        min_match: int = 1,
        device: str | torch.device | None = None,
        name: str = "mag",
    ) -> None:
        if not isinstance(bigram, BigramTable):
            raise TypeError(f"bigram must be a BigramTable, got {type(bigram).__name__}")
        if occurrence not in ("earliest", "latest"):
            raise ValueError(f"occurrence must be 'earliest' or 'latest', got {occurrence!r}")
        if priority not in ("prompt", "longest"):
            raise ValueError(f"priority must be 'prompt' or 'longest', got {priority!r}")
        self.bigram = bigram
        self.occurrence = occurrence
        self.priority = priority
        self.min_match = validate.count("min_match", min_match, minimum=1)
        if device is None:
            self.device = self._torch = None
        else:  # torch only for the device backend: Max-Gram itself is integer work
            import torch

            self.device, self._torch = torch.device(device), torch
        self.name = name
        self.vocab_size = bigram.vocab_size
        self.last_sources: list[str] = []
        self._prompt: tuple[int, ...] | None = None
        self._sam = SuffixAutomaton(())
        self._seq: list[int] = []
        self._states: list[tuple[int, int]] = []
        self._lams: list = []  # _lams[t - P]: lambda vector of the prefix of length t >= P
        self._gen = None  # generated ids s[P:] (torch backend: on the device)

    def propose(self, tokens: Sequence[int], prompt_length: int, k: int) -> list[int]:
        """``k`` proposals continuing ``tokens``; sets ``last_sources``."""
        ids = [int(t) for t in tokens]
        if not ids:
            raise ValueError("tokens must be non-empty (the prompt has at least one token)")
        p = validate.count("prompt_length", prompt_length, minimum=1)
        if p > len(ids):
            raise ValueError(f"prompt_length must be in [1, len(tokens)={len(ids)}], got {p}")
        k = validate.count("k", k)
        bad = [t for t in ids if not 0 <= t < self.vocab_size]
        if bad:
            raise ValueError(f"tokens must be ids in [0, {self.vocab_size - 1}], got {bad[0]}")
        self._sync(ids, p)
        proposals, sources = [], []
        for _ in range(k):
            token, source = self._next()
            proposals.append(token)
            sources.append(source)
            self._append(token)
        self.last_sources = sources
        return proposals

    def candidates(self, tokens: Sequence[int], prompt_length: int, count: int) -> list[int]:
        """Up to ``count`` distinct continuations of ``tokens``, best first (module
        docstring, "Ranked candidates"); sets ``last_sources``."""
        count = validate.count("count", count)
        if count == 0:
            self.last_sources = []
            return []
        first = self.propose(tokens, prompt_length, 1)[0]
        out, sources = [first], list(self.last_sources)
        seq = np.asarray(self._seq[: len(tokens)], dtype=np.int64)
        for e, source in self._occurrences(seq, prompt_length):
            token = int(seq[e + 1])
            if token not in out:
                out.append(token)
                sources.append(source)
        fallback = self.bigram(int(seq[-1]))
        if fallback not in out:
            out.append(fallback)
            sources.append("bigram")
        self.last_sources = sources[:count]
        return out[:count]

    def _occurrences(self, s: np.ndarray, p: int) -> list[tuple[int, str]]:
        """Every end position ``e`` whose match length is at least ``min_match``, with its
        source, longest first, ties by the occurrence rule (module docstring)."""
        ends = s.size - 1  # candidate ends e = 0..L-2
        if ends <= 0:
            return []
        lcs = np.zeros(ends, dtype=np.int64)
        alive = np.ones(ends, dtype=bool)
        for k in range(ends):
            alive[k:] &= s[: ends - k] == s[s.size - 1 - k]
            alive[:k] = False  # no room before position 0
            if not alive.any():
                break
            lcs += alive
        e = np.arange(ends)
        length = np.where(e <= p - 2, lcs, np.where(e >= p, np.minimum(lcs, e - p + 1), 0))
        sign = 1 if self.occurrence == "earliest" else -1
        keep = np.flatnonzero(length >= self.min_match)
        order = keep[np.lexsort((sign * keep, -length[keep]))]
        return [(int(x), "prompt" if x <= p - 2 else "generated") for x in order]

    # -- state -----------------------------------------------------------------------
    def _sync(self, ids: list[int], p: int) -> None:
        prompt = tuple(ids[:p])
        if prompt != self._prompt:
            self._prompt = prompt
            self._sam = SuffixAutomaton(prompt[:-1])
            self._seq, self._states, self._lams = [], [(0, 0)], []
            self._gen = self._buffer(len(ids) - p)
        keep = 0
        limit = min(len(ids), len(self._seq))
        while keep < limit and ids[keep] == self._seq[keep]:
            keep += 1
        del self._seq[keep:]
        del self._states[keep + 1 :]
        del self._lams[max(keep - p + 1, 0) :]
        for token in ids[keep:]:
            self._append(token)

    def _append(self, c: int) -> None:
        p = len(self._prompt)
        t = len(self._seq)  # the new token sits at index t
        self._seq.append(c)
        self._states.append(self._sam.step(self._states[-1], c))
        if t + 1 == p:
            self._lams.append(self._zeros(0))
        elif t >= p:
            self._store(t - p, c)
            prev = self._lams[-1]
            self._lams.append(self._update(prev, t - p, c))

    # -- one step --------------------------------------------------------------------
    def _next(self) -> tuple[int, str]:
        v, m_p = self._states[-1]
        m_g, e_g = self._generated_match()
        use_prompt = m_p >= self.min_match and (self.priority == "prompt" or m_p >= m_g)
        if use_prompt:
            e = self._sam.first[v] if self.occurrence == "earliest" else self._sam.last[v]
            return self._prompt[e + 1], "prompt"
        if m_g >= self.min_match:
            return self._seq[e_g + 1], "generated"
        return self.bigram(self._seq[-1]), "bigram"

    def _generated_match(self) -> tuple[int, int]:
        """(length, end index) of the chosen generated occurrence; (0, -1) if none."""
        if len(self._seq) <= len(self._prompt) + 1:
            return 0, -1
        lam = self._lams[-1]
        best = int(lam.max())
        if best == 0:
            return 0, -1
        hits = (lam == best).nonzero()
        hits = hits[0] if isinstance(hits, tuple) else hits[:, 0]
        j = int(hits[0] if self.occurrence == "earliest" else hits[-1])
        return best, len(self._prompt) + j

    # -- lambda vectors (numpy, or torch on self.device) -------------------------------
    def _buffer(self, size: int):
        capacity = max(64, 2 * size)
        if self.device is None:
            return np.empty(capacity, dtype=np.int64)
        return self._torch.empty(capacity, dtype=self._torch.int64, device=self.device)

    def _store(self, j: int, c: int) -> None:
        if j >= len(self._gen):
            grown = self._buffer(j + 1)
            grown[: len(self._gen)] = self._gen
            self._gen = grown
        self._gen[j] = c

    def _zeros(self, size: int):
        if self.device is None:
            return np.zeros(size, dtype=np.int64)
        return self._torch.zeros(size, dtype=self._torch.int64, device=self.device)

    def _update(self, prev, g: int, c: int):
        """lambda over the end indices P..P+g-1 once ``c`` is appended at index P+g."""
        gen = self._gen[:g]
        if self.device is None:
            shifted = np.concatenate(([0], prev))[:g]
            cap = np.arange(1, g + 1, dtype=np.int64)
            return np.where(gen == c, np.minimum(shifted + 1, cap), 0)
        torch = self._torch
        shifted = torch.cat((self._zeros(1), prev))[:g]
        cap = torch.arange(1, g + 1, dtype=torch.int64, device=self.device)
        return torch.where(gen == c, torch.minimum(shifted + 1, cap), 0)
