"""The losslessness check: does a decoder sample from the target's own distribution?

* :func:`target_distribution` — the exact law of the first ``m`` tokens of autoregressive
  sampling from the target (with the decoder's :class:`Decoding`), by enumerating every
  prefix: ``P(x_1..x_m) = Π_i p(x_i | prompt, x_<i)``. A sequence that reaches
  ``eos_token_id`` ends there (its outcome is the shorter tuple).
* :func:`sample_prefixes` — the first ``m`` tokens of ``N`` independent generations.
* :func:`chi_square` — Pearson's goodness-of-fit test of observed counts against the exact
  law, the same test as the Bernoulli Monte Carlo's (:func:`simulate.stats.chi_square_gof`):
  the rarest outcomes are pooled until each cell has expected count ``>= min_expected``;
  ``dof = cells − 1``. An outcome of probability 0 makes the statistic infinite (p-value 0).
* :func:`check_lossless` — all three; passes iff the p-value is ``>= level``. Under the
  null (a lossless decoder) it fails with probability ``≈ level``; a lossy decoder whose
  law differs by total variation ``δ`` over the cells is detected once ``N·δ²`` is large.
* :func:`greedy_reference` — the target's own greedy decoding, the reference for
  token-identical greedy output.

Works for any :class:`~simulate.decoder.interface.TokenModel` (``realrun`` reuses it on
tiny real models).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from ewif.base import validate
from simulate.decoder.cascade import CascadeDecoder
from simulate.decoder.interface import TokenModel
from simulate.decoder.sampling import Decoding
from simulate.stats import ChiSquare, chi_square_gof

Outcome = tuple[int, ...]


def target_distribution(
    model: TokenModel,
    prompt: Sequence[int],
    m: int,
    decoding: Decoding,
    eos_token_id: int | None = None,
) -> dict[Outcome, float]:
    """Exact law of the first ``m`` tokens sampled autoregressively from ``model``.

    Only outcomes of positive probability are listed; the values sum to 1.
    """
    depth = validate.count("m", m, minimum=1)
    prompt = list(prompt)
    frontier: dict[Outcome, float] = {(): 1.0}
    done: dict[Outcome, float] = {}
    for _ in range(depth):
        grown: dict[Outcome, float] = {}
        for prefix, mass in frontier.items():
            p = decoding.probs(model.logits(prompt + list(prefix), 1))[0]
            for token in np.flatnonzero(p).tolist():
                outcome = (*prefix, token)
                target = done if token == eos_token_id else grown
                target[outcome] = mass * float(p[token])
        frontier = grown
    done.update(frontier)
    return done


def sample_prefixes(
    decoder: CascadeDecoder,
    prompt: Sequence[int],
    m: int,
    samples: int,
    eos_token_id: int | None = None,
    progress: bool = False,
) -> tuple[Counter, bool]:
    """Counts of the first ``m`` tokens over ``samples`` generations of ``decoder``, and
    whether Ctrl-C stopped the run early (the counts are then partial)."""
    m = validate.count("m", m, minimum=1)
    total = validate.count("samples", samples, minimum=1)
    counts: Counter = Counter()
    interrupted = False
    with tqdm(total=total, disable=not progress, desc="samples", miniters=1000) as bar:
        try:
            for _ in range(total):
                result = decoder.generate(prompt, m, eos_token_id)
                if result.stop_reason == "interrupted":
                    interrupted = True
                    break
                counts[tuple(result.tokens)] += 1
                bar.update()
        except KeyboardInterrupt:
            interrupted = True
    return counts, interrupted


def chi_square(
    counts: Mapping[Outcome, int], probs: Mapping[Outcome, float], min_expected: float = 5.0
) -> ChiSquare:
    """Goodness of fit of ``counts`` to the law ``probs``: :func:`simulate.stats.chi_square_gof`
    over the outcomes ordered from the rarest, so that its left-to-right pooling joins the
    rarest outcomes first; observed outcomes outside ``probs`` form one impossible cell."""
    if sum(counts.values()) <= 0:
        raise ValueError(f"counts must hold at least one observation, got {dict(counts)!r}")
    outcomes = sorted(probs, key=probs.__getitem__)
    impossible = sum(c for k, c in counts.items() if k not in probs)
    observed = [counts.get(k, 0) for k in outcomes] + [impossible]
    law = [probs[k] for k in outcomes] + [0.0]
    return chi_square_gof(np.asarray(observed), np.asarray(law), min_expected)


@dataclass(frozen=True)
class LosslessReport:
    """Result of :func:`check_lossless`: ``passed`` iff ``test.p_value >= level``."""

    test: ChiSquare
    level: float
    passed: bool
    interrupted: bool
    counts: Counter
    expected: dict[Outcome, float]


def check_lossless(
    decoder: CascadeDecoder,
    prompt: Sequence[int],
    m: int = 3,
    samples: int = 100_000,
    level: float = 1e-3,
    eos_token_id: int | None = None,
    progress: bool = False,
) -> LosslessReport:
    """Chi-square test (at ``level``) of ``decoder``'s first ``m`` tokens against the
    exact law of its target (``decoder.models[0]``) under ``decoder.decoding``."""
    lvl = validate.probability("level", level)
    exact = target_distribution(decoder.models[0], prompt, m, decoder.decoding, eos_token_id)
    counts, interrupted = sample_prefixes(decoder, prompt, m, samples, eos_token_id, progress)
    test = chi_square(counts, exact)
    return LosslessReport(test, lvl, test.p_value >= lvl, interrupted, counts, exact)


def greedy_reference(
    model: TokenModel,
    prompt: Sequence[int],
    max_new_tokens: int,
    eos_token_id: int | None = None,
) -> list[int]:
    """The target's own greedy decoding: argmax (lowest id on ties), one pass per token."""
    seq = list(prompt)
    out: list[int] = []
    for _ in range(validate.count("max_new_tokens", max_new_tokens)):
        token = int(np.argmax(model.logits(seq, 1)[0]))
        out.append(token)
        seq = [*seq, token]  # a fresh list: the model may keep the one it was given
        if token == eos_token_id:
            break
    return out
