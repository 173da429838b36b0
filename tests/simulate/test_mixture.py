"""Theorem MX against a Monte Carlo of a request stream: requests of mixed categories, each a
generation of N tokens played step by step by the vectorised Bernoulli engine.

Confidence: the two-sided 99.9 % delta-method interval of the ratio of summed AR cost over
summed cost across requests (requests are i.i.d.); fixed seeds. The EWIF at the mixed α
must fall outside it (the witness tells the two apart).
"""

from __future__ import annotations

import numpy as np
import pytest

from ewif.kernel.cascade import Cascade
from ewif.kernel.mixture import mixture_speedup
from simulate.bernoulli import CascadeSpec, StepPlayer, generator
from simulate.stats import ratio_estimate

LEVEL = 0.999


def request_costs(cascade: Cascade, n_tokens: int, requests: int, seed: int) -> np.ndarray:
    """The cost of each of ``requests`` generations of ``n_tokens``: target steps played in
    order, the last step's surplus tokens dropped (its cost paid in full)."""
    engine = StepPlayer(CascadeSpec.of(cascade))
    rng = generator(seed)
    out = np.empty(requests)
    tokens = cost = np.empty(0)
    at = 0
    for r in range(requests):
        made, paid = 0, 0.0
        while made < n_tokens:
            if at == tokens.size:
                batch = engine.run(1 << 14, rng)
                tokens, cost, at = batch.tokens, batch.cost, 0
            made += int(tokens[at])
            paid += float(cost[at])
            at += 1
        out[r] = paid
    return out


@pytest.mark.parametrize(("n_tokens", "k"), [(32, 3), (12, 5)])
def test_the_speedup_of_a_request_stream_is_theorem_mx(n_tokens, k):
    alphas = {"writing": 0.35, "code": 0.8, "rag": 0.95}
    shares = {"writing": 0.5, "code": 0.3, "rag": 0.2}  # request shares; equal lengths
    cascades = {
        c: Cascade([[np.nan, a], [np.nan, np.nan]], [1.0, 0.08], [[k]]) for c, a in alphas.items()
    }
    rng = np.random.default_rng(7)
    counts = rng.multinomial(6000, list(shares.values()))
    costs = np.concatenate(
        [
            request_costs(cascades[c], n_tokens, int(m), seed=11 + i)
            for i, (c, m) in enumerate(zip(shares, counts, strict=True))
        ]
    )
    x = np.full(costs.size, float(n_tokens))  # AR cost of each request, c_0(1) = 1
    est = ratio_estimate(
        x.sum(),
        costs.sum(),
        (x * x).sum(),
        (costs * costs).sum(),
        (x * costs).sum(),
        costs.size,
        LEVEL,
    )
    realised = {c: m / counts.sum() for c, m in zip(shares, counts, strict=True)}
    exact = mixture_speedup({c: cs.ewif(n_tokens) for c, cs in cascades.items()}, realised)
    assert est.low <= exact <= est.high
    pooled_alpha = sum(realised[c] * a for c, a in alphas.items())
    pooled = Cascade([[np.nan, pooled_alpha], [np.nan, np.nan]], [1.0, 0.08], [[k]]).ewif(n_tokens)
    assert not est.low <= pooled <= est.high
