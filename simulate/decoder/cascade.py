"""Algorithm 1 (Cascade Speculative Drafting) at token level, with K, and its statistics.

The algorithm is the one stated once, in the docstring of :mod:`ewif.kernel.cascade` (models
``0..n`` largest first, the ``n × n`` budget matrix K with ``k_rj = K[r-1][j-1]``, review
calls that build their draft block by block, leaves, ``fill="tokens"``: a nested block is
filled until it holds **at least** ``k`` tokens). This module plays it on real tokens:

* a leaf generates its ``k`` tokens one pass per token for a TokenModel, one ``propose``
  call for a :class:`~simulate.decoder.interface.Proposer` (which may only be a leaf);
* a reviewer runs one pass over the whole draft and reviews it (:mod:`.verify`): the first
  rejection ends the review, which yields ``accepted + 1`` tokens. Lenience ``l`` applies
  to every review whose reviewer is a drafter (``r >= 1``), never at the target — unless
  ``lenient_target=True``, a deliberately *lossy* mode that exists only so tests can show
  the losslessness check detects it. Each token handed upward carries its exact law
  (:mod:`.verify`, (★)), so the target's review reproduces the target's distribution
  exactly. Greedy decoding (``Decoding(temperature=0)``) reproduces the target's greedy
  output token for token.

Special cases: ``models=[target]``, ``K`` of shape ``(0, 0)`` is autoregressive decoding
(each target review has an empty draft and yields its bonus token);
``models=[target, d]``, ``K=[[k]]`` is plain speculative decoding with ``k`` drafts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from time import perf_counter

import numpy as np

from ewif.base import validate
from simulate.contract import is_leaf
from simulate.decoder.interface import Proposer, TokenModel, common_prefix
from simulate.decoder.sampling import Decoding, sample
from simulate.decoder.verify import TokenLaw, greedy_verify, speculative_verify


@dataclass
class CascadeStats:
    """What one (or, summed with ``+``, several) generations did, per model ``0..n``.

    * ``passes[i]`` — forward passes of model ``i`` (``propose`` calls for a Proposer);
    * ``tokens_fed[i]`` — positions model ``i`` processed, following the cache contract of
      :class:`~simulate.decoder.interface.TokenModel` (tokens proposed, for a Proposer);
    * ``target_steps`` — target reviews; ``accepted_lengths`` — tokens each target review
      yielded, bonus included (vLLM's "mean accepted length" is their mean), counted
      before the output is cut at EOS / ``max_new_tokens``;
    * ``reviews[(r, j)] = (reviewed, accepted)`` — draft tokens produced by model ``j``
      (the model whose block they fill) that reviewer ``r`` examined / accepted; positions
      after a rejection are not examined;
    * ``target_position_counts = (reached, accepted)`` — by draft position ``i`` at the
      target: reviews whose draft reached position ``i`` / accepted it (Figure 2's curve is
      ``accepted / reached``);
    * ``sources`` — labels (a Proposer's ``last_sources``, else its name) of the proposer
      tokens the target accepted;
    * ``pass_sizes[i][m]`` — passes of TokenModel ``i`` that fed ``m`` positions (the law
      :meth:`ewif.kernel.cascade.Cascade.pass_sizes` gives per target step; empty for a Proposer);
    * ``call_seconds[i]`` — wall time inside model ``i``'s ``logits`` (``propose``) calls;
      ``decode_seconds`` — wall time of the decoder's own verification and sampling; with
      the models' own pass timers they split a run's wall time (:mod:`realrun.books`).
    """

    passes: np.ndarray
    tokens_fed: np.ndarray
    target_steps: int = 0
    accepted_lengths: list[int] = field(default_factory=list)
    reviews: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)
    target_position_counts: tuple[np.ndarray, np.ndarray] = (
        np.zeros(0, np.int64),
        np.zeros(0, np.int64),
    )
    sources: Counter = field(default_factory=Counter)
    pass_sizes: tuple[Counter, ...] = ()
    call_seconds: tuple[float, ...] = ()
    decode_seconds: float = 0.0

    @property
    def mean_accepted_length(self) -> float:
        """Mean tokens per target review, bonus included (nan before any review)."""
        n = len(self.accepted_lengths)
        return sum(self.accepted_lengths) / n if n else float("nan")

    def acceptance(self, reviewer: int, producer: int) -> float:
        """Empirical acceptance rate ``accepted / reviewed`` of ``producer``'s tokens by
        ``reviewer`` (nan if none was reviewed)."""
        reviewed, accepted = self.reviews.get((reviewer, producer), (0, 0))
        return accepted / reviewed if reviewed else float("nan")

    def __add__(self, other: CascadeStats) -> CascadeStats:
        if not isinstance(other, CascadeStats) or other.passes.shape != self.passes.shape:
            return NotImplemented
        reviews = dict(self.reviews)
        for key, (seen, ok) in other.reviews.items():
            s0, a0 = reviews.get(key, (0, 0))
            reviews[key] = (s0 + seen, a0 + ok)
        width = max(len(self.target_position_counts[0]), len(other.target_position_counts[0]))
        positions = tuple(
            np.pad(a, (0, width - len(a))) + np.pad(b, (0, width - len(b)))
            for a, b in zip(self.target_position_counts, other.target_position_counts, strict=True)
        )
        return CascadeStats(
            passes=self.passes + other.passes,
            tokens_fed=self.tokens_fed + other.tokens_fed,
            target_steps=self.target_steps + other.target_steps,
            accepted_lengths=self.accepted_lengths + other.accepted_lengths,
            reviews=reviews,
            target_position_counts=positions,
            sources=self.sources + other.sources,
            pass_sizes=tuple(a + b for a, b in zip(self.pass_sizes, other.pass_sizes, strict=True)),
            call_seconds=tuple(
                a + b for a, b in zip(self.call_seconds, other.call_seconds, strict=True)
            ),
            decode_seconds=self.decode_seconds + other.decode_seconds,
        )

    def __radd__(self, other: object) -> CascadeStats:
        """``0 + stats`` is ``stats``, so ``sum(list_of_stats)`` works."""
        if isinstance(other, int) and other == 0:
            return self
        return NotImplemented


class GenerationResult:
    """``tokens``: the new tokens only (ending at the first EOS, which is included, or at
    ``max_new_tokens``); ``stats``: :class:`CascadeStats` of this call (built on first
    access); ``stop_reason``: ``"eos"``, ``"max_new_tokens"`` or ``"interrupted"`` (Ctrl-C:
    the tokens so far)."""

    __slots__ = ("_recorder", "_stats", "stop_reason", "tokens")

    def __init__(self, tokens: list[int], recorder: _Recorder, stop_reason: str) -> None:
        self.tokens = tokens
        self.stop_reason = stop_reason
        self._recorder = recorder
        self._stats: CascadeStats | None = None

    @property
    def stats(self) -> CascadeStats:
        if self._stats is None:
            self._stats = self._recorder.stats()
        return self._stats

    def __repr__(self) -> str:
        return f"GenerationResult(tokens={self.tokens!r}, stop_reason={self.stop_reason!r})"


class _Recorder:
    """Mutable counters of one ``generate`` call (plain lists: the hot path is Python)."""

    def __init__(self, size: int) -> None:
        self.passes = [0] * size
        self.fed = [0] * size
        self.sizes = [Counter() for _ in range(size)]
        self.call_seconds = [0.0] * size
        self.decode_seconds = 0.0
        self.lengths: list[int] = []
        self.reviews = [[[0, 0] for _ in range(size)] for _ in range(size)]
        self.reached: list[int] = []
        self.accepted: list[int] = []
        self.sources: Counter = Counter()

    def review(self, r: int, producers: list[int], accepted: int) -> None:
        row = self.reviews[r]
        for i in range(min(accepted + 1, len(producers))):
            cell = row[producers[i]]
            cell[0] += 1
            cell[1] += i < accepted

    def target(self, accepted: int, length: int, sources: list[str | None]) -> None:
        self.lengths.append(accepted + 1)
        while len(self.reached) < length:
            self.reached.append(0)
            self.accepted.append(0)
        for i in range(min(accepted + 1, length)):
            self.reached[i] += 1
        for i in range(accepted):
            self.accepted[i] += 1
            if sources[i] is not None:
                self.sources[sources[i]] += 1

    def stats(self) -> CascadeStats:
        size = len(self.passes)
        reviews = {
            (r, j): (self.reviews[r][j][0], self.reviews[r][j][1])
            for r in range(size)
            for j in range(size)
            if self.reviews[r][j][0]
        }
        return CascadeStats(
            passes=np.array(self.passes, np.int64),
            tokens_fed=np.array(self.fed, np.int64),
            target_steps=len(self.lengths),
            accepted_lengths=self.lengths,
            reviews=reviews,
            target_position_counts=(
                np.array(self.reached, np.int64),
                np.array(self.accepted, np.int64),
            ),
            sources=self.sources,
            pass_sizes=tuple(self.sizes),
            call_seconds=tuple(self.call_seconds),
            decode_seconds=self.decode_seconds,
        )


class CascadeDecoder:
    """Algorithm 1 over ``models = [target, d1, ..., dn]`` with budget matrix ``K``.

    ``lenience >= 1`` applies to drafter reviews only; ``decoding`` to every model's logits;
    ``seed`` seeds the one random stream of the decoder (None: fresh entropy).
    ``lenient_target=True`` also applies lenience at the target: **lossy**, for tests that
    demonstrate the losslessness check can fail. Raises ValueError/TypeError on bad input
    (wrong K shape, K not upper triangular, a Proposer as reviewer, lenience < 1, ...).
    """

    def __init__(
        self,
        models: Sequence[TokenModel | Proposer],
        K: object,
        lenience: float = 1.0,
        decoding: Decoding | None = None,
        seed: int | None = 0,
        lenient_target: bool = False,
    ) -> None:
        self._models = _check_models(models)
        n = len(self._models) - 1
        self._K = _check_budgets(K, n)
        self._leaf = [is_leaf(self._K, j) for j in range(n + 1)]
        self._neural = [isinstance(m, TokenModel) for m in self._models]
        for j in range(1, n):
            if not self._leaf[j] and isinstance(self._models[j], Proposer):
                raise ValueError(
                    f"models[{j}] ({self._models[j].name!r}) is a Proposer, but row {j + 1} of "
                    "K gives it drafts to review; a Proposer can only be a leaf (zero K row)"
                )
        x = validate.real("lenience", lenience)
        if x < 1.0:
            raise ValueError(f"lenience must be a finite number >= 1, got {lenience!r}")
        self.lenience = x
        decoding = Decoding() if decoding is None else decoding
        if not isinstance(decoding, Decoding):
            raise TypeError(f"decoding must be a Decoding, got {type(decoding).__name__}")
        self.decoding = decoding
        if not isinstance(lenient_target, bool):
            raise TypeError(f"lenient_target must be a bool, got {lenient_target!r}")
        self.lenient_target = lenient_target
        self.seed = None if seed is None else validate.count("seed", seed)
        self._rng = np.random.default_rng(self.seed)
        self._vocab = self._models[0].vocab_size
        self._seen: list[list[int]] = [[] for _ in self._models]

    @property
    def models(self) -> list[TokenModel | Proposer]:
        """``[target, d1, ..., dn]``."""
        return list(self._models)

    @property
    def K(self) -> np.ndarray:
        """The ``(n, n)`` budget matrix (a copy)."""
        return np.array(self._K, dtype=np.int64).reshape(len(self._K), len(self._K))

    def generate(
        self,
        prompt: Sequence[int],
        max_new_tokens: int,
        eos_token_id: int | None = None,
        progress: Callable[[int], object] | None = None,
    ) -> GenerationResult:
        """Generate up to ``max_new_tokens`` tokens after ``prompt`` (non-empty list of ids).

        Stops after the first ``eos_token_id`` (included) and at ``max_new_tokens``, also
        when these fall inside an accepted chunk. ``progress(k)`` is called after each
        target step with the number ``k`` of tokens it added (e.g. ``tqdm.update``).
        Ctrl-C returns the tokens so far with ``stop_reason == "interrupted"``.
        """
        seq = _check_tokens("prompt", prompt, self._vocab)
        if not seq:
            raise ValueError("prompt must hold at least one token id, got an empty prompt")
        limit = validate.count("max_new_tokens", max_new_tokens)
        if eos_token_id is not None and (
            isinstance(eos_token_id, bool)
            or not isinstance(eos_token_id, (int, np.integer))
            or not 0 <= eos_token_id < self._vocab
        ):
            raise ValueError(
                f"eos_token_id must be None or a token id in [0, {self._vocab}), "
                f"got {eos_token_id!r}"
            )
        prompt_length = len(seq)
        rec = _Recorder(len(self._models))
        out: list[int] = []
        reason = "max_new_tokens"
        try:
            while len(out) < limit:
                tokens = self._review_call(0, seq, prompt_length, rec)[0]
                tokens = tokens[: limit - len(out)]
                if eos_token_id is not None and eos_token_id in tokens:
                    tokens = tokens[: tokens.index(eos_token_id) + 1]
                    reason = "eos"
                out += tokens
                seq = seq + tokens
                if progress is not None:
                    progress(len(tokens))
                if reason == "eos":
                    break
        except KeyboardInterrupt:
            reason = "interrupted"
        return GenerationResult(out, rec, reason)

    # -- Algorithm 1 -------------------------------------------------------------------

    def _review_call(
        self, r: int, seq: list[int], prompt_length: int, rec: _Recorder
    ) -> tuple[list[int], list[TokenLaw] | None, list[str | None]]:
        """One review call by model ``r`` after ``seq``: its output tokens, their laws
        (sampling, ``r >= 1``) and their proposer source labels."""
        draft: list[int] = []
        laws: list[TokenLaw] = []
        sources: list[str | None] = []
        producers: list[int] = []
        budgets = self._K[r][r:] if r < len(self._K) else []  # autoregressive: no drafters
        for j, k in enumerate(budgets, start=r + 1):
            if k == 0:
                continue
            start = len(draft)
            if self._leaf[j]:
                self._leaf_block(j, seq + draft, prompt_length, k, draft, laws, sources, rec)
            else:
                while len(draft) - start < k:
                    t, lw, src = self._review_call(j, seq + draft, prompt_length, rec)
                    draft += t
                    laws += lw if lw is not None else [None] * len(t)
                    sources += src
            producers += [j] * (len(draft) - start)
        logits = self._forward(r, seq + draft, len(draft) + 1, rec)
        lenience = self.lenience if r > 0 or self.lenient_target else 1.0
        start = perf_counter()
        if self.decoding.greedy:
            review = greedy_verify(draft, logits, lenience)
        else:
            probs = self.decoding.probs(logits)
            review = speculative_verify(draft, laws, probs, lenience, self._rng, r > 0)
        rec.decode_seconds += perf_counter() - start
        a = review.accepted
        rec.review(r, producers, a)
        if r == 0:
            rec.target(a, len(draft), sources)
        return review.tokens, review.laws, [*sources[:a], None]

    def _leaf_block(
        self,
        j: int,
        work: list[int],
        prompt_length: int,
        k: int,
        draft: list[int],
        laws: list[TokenLaw],
        sources: list[str | None],
        rec: _Recorder,
    ) -> None:
        """Append ``k`` tokens generated directly by leaf ``j`` (and their laws)."""
        model = self._models[j]
        if self._neural[j]:
            for _ in range(k):
                logits = self._forward(j, work, 1, rec)[0]
                start = perf_counter()
                if self.decoding.greedy:
                    x, law = int(np.argmax(logits)), None
                else:
                    law = self.decoding.probs(logits)
                    x = sample(law, self._rng)
                rec.decode_seconds += perf_counter() - start
                draft.append(x)
                laws.append(law)
                work = [*work, x]
            sources += [None] * k
            return
        start = perf_counter()
        proposed = [int(t) for t in model.propose(work, prompt_length, k)]
        rec.call_seconds[j] += perf_counter() - start
        if len(proposed) != k or not all(0 <= t < self._vocab for t in proposed):
            raise ValueError(
                f"proposer {model.name!r} must return {k} token ids in [0, {self._vocab}), "
                f"got {proposed!r}"
            )
        rec.passes[j] += 1
        rec.fed[j] += k
        labels = getattr(model, "last_sources", None)
        if labels is None or len(labels) != k:
            labels = [model.name] * k
        draft += proposed
        laws += [None] * k
        sources += list(labels)

    def _forward(self, i: int, tokens: list[int], n: int, rec: _Recorder) -> np.ndarray:
        """One pass of model ``i``: logits of the last ``n`` prefixes of ``tokens``."""
        keep = common_prefix(tokens, self._seen[i], len(tokens) - n)
        rec.passes[i] += 1
        rec.fed[i] += len(tokens) - keep
        rec.sizes[i][len(tokens) - keep] += 1
        self._seen[i] = tokens
        start = perf_counter()
        logits = self._models[i].logits(tokens, n)
        rec.call_seconds[i] += perf_counter() - start
        if logits.shape != (n, self._vocab):
            raise ValueError(
                f"model {self._models[i].name!r} returned logits of shape {logits.shape}, "
                f"expected ({n}, {self._vocab})"
            )
        return logits


def _check_models(models: object) -> list[TokenModel | Proposer]:
    if isinstance(models, (str, bytes)) or not isinstance(models, Sequence) or not models:
        raise ValueError(f"models must be a non-empty list [target, d1, ..., dn], got {models!r}")
    models = list(models)
    for i, m in enumerate(models):
        if not isinstance(m, (TokenModel, Proposer)):
            raise TypeError(
                f"models[{i}] must be a TokenModel or a Proposer, got {type(m).__name__}"
            )
    if not isinstance(models[0], TokenModel):
        raise ValueError(
            f"models[0] (the target, {models[0].name!r}) must be a TokenModel: "
            "a Proposer cannot review"
        )
    sizes = [m.vocab_size for m in models]
    if len(set(sizes)) != 1:
        raise ValueError(f"all models must share one vocabulary, got vocab sizes {sizes}")
    return models


def _check_budgets(K: object, n: int) -> list[list[int]]:
    """K as an (n, n) upper-triangular list of lists of non-negative ints."""
    if n == 0 and validate.counts("K", K).size == 0:
        return []
    arr = validate.budget_matrix("K", K, n)
    if not arr[0].any():
        raise ValueError(
            "K row 1 (the target's review) is all zero, so no drafter would be used; for "
            "autoregressive decoding pass models=[target] and K of shape (0, 0)"
        )
    return arr.tolist()


def _check_tokens(name: str, tokens: object, vocab: int) -> list[int]:
    """A list of token ids in [0, vocab)."""
    if isinstance(tokens, np.ndarray) and tokens.ndim == 1:
        tokens = tokens.tolist()
    if isinstance(tokens, (str, bytes)) or not isinstance(tokens, Sequence):
        raise TypeError(f"{name} must be a list of token ids, got {type(tokens).__name__}")
    out = []
    for t in tokens:
        if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
            raise ValueError(f"{name} must hold integer token ids, got {t!r}")
        if not 0 <= t < vocab:
            raise ValueError(f"{name} must hold token ids in [0, {vocab}), got {t}")
        out.append(int(t))
    return out
