"""The token-level decoder's pass-size counters against the exact catch-up law (Theorem CU).

Synthetic drafters accepted with exactly known α in every context (sampling, temperature 1,
lenience 1: the i.i.d. Bernoulli model) run vertical cascades of depth 1–3. Each generation
``g`` gives a count vector ``X_g[m]`` (passes of a drafter that fed ``m`` positions, the
prefill left out) and ``S_g`` target steps. Under Theorem CU, ``E[X_g] = E[S_g]·law − f``:
every step's passes follow ``law = Cascade.pass_sizes()`` except the first pass of the first
step, which is the prefill instead of ``f = Cascade.first_pass_sizes()``. The residuals
``r_g = X_g − S_g·law + f`` of the independent generations have mean zero; Hotelling's T²
(the χ² of a mean with estimated covariance) tests that at 99.9 %. The stopping rule at
``max_new_tokens`` moves the residual mean by far less than one pass per generation; the
fixed seeds make the outcome reproducible. The same data must reject the paper's accounting
(catch-up dropped), so the test can fail.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ewif.kernel.cascade import Cascade
from simulate.decoder.cascade import CascadeDecoder
from simulate.decoder.sampling import Decoding
from simulate.decoder.synthetic import SyntheticLM

TARGET = SyntheticLM.random(8, 2, seed=1, name="t")
D1 = TARGET.drafter(0.8, seed=2, name="d1")  # α[0][1] = 0.8
D2 = D1.drafter(0.7, seed=4, name="d2")  # α[1][2] = 0.7
D3 = D2.drafter(0.6, seed=5, name="d3")  # α[2][3] = 0.6
CHAIN = [D1, D2, D3]
ALPHAS = [0.8, 0.7, 0.6]  # reviewer i - 1 of drafter i
PROMPT_LENGTH = 16  # prefill passes feed >= 16 positions; no catch-up pass comes close
GENERATIONS = 24
NEW_TOKENS = 400
LEVEL = 0.999

CASES = {
    "SD k=1": [[1]],
    "SD k=3": [[3]],
    "vertical [[2,0],[0,2]]": [[2, 0], [0, 2]],
    "vertical [[1,0],[0,3]]": [[1, 0], [0, 3]],
    "depth 3": [[2, 0, 0], [0, 1, 0], [0, 0, 2]],
}


def exact(K: list[list[int]], catch_up: bool) -> Cascade:
    """The vertical chain ``TARGET ← D1 ← ... `` with its exactly known acceptances."""
    n = len(K)
    alpha = np.full((n + 1, n + 1), np.nan)
    for i in range(1, n + 1):
        alpha[i - 1, i] = ALPHAS[i - 1]
    return Cascade(alpha, [1.0] + [0.1] * n, K, catch_up=[False] + [catch_up] * n)


def counts_per_generation(K: list[list[int]], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``X[g, i, m]`` (passes of drafter ``i`` over ``m < PROMPT_LENGTH`` positions) and ``S[g]``.

    Prompts alternate their first token, so no prefill shares a prefix with the previous
    generation's sequence (the decoder keeps each model's fed tokens across calls)."""
    n = len(K)
    dec = CascadeDecoder([TARGET, *CHAIN[:n]], K, decoding=Decoding(1.0), seed=seed)
    rng = np.random.default_rng(seed)
    X = np.zeros((GENERATIONS, n + 1, PROMPT_LENGTH))
    S = np.zeros(GENERATIONS)
    for g in range(GENERATIONS):
        prompt = [g % 2, *rng.integers(0, 8, PROMPT_LENGTH - 1).tolist()]
        result = dec.generate(prompt, NEW_TOKENS).stats
        S[g] = result.target_steps
        for i in range(1, n + 1):
            for m, count in result.pass_sizes[i].items():
                if m < PROMPT_LENGTH:
                    X[g, i, m] = count
    return X, S


def hotelling_p_value(residuals: np.ndarray) -> float:
    """P-value of ``E[r] = 0`` from the rows of ``residuals`` (Hotelling's T², F law), in the
    span of their covariance: the counts obey exact linear constraints (e.g. SD with budget
    k makes k passes a step), so the residuals lie in a subspace of lower dimension."""
    g = residuals.shape[0]
    mean = residuals.mean(axis=0)
    values, vectors = np.linalg.eigh(np.cov(residuals, rowvar=False))
    span = values > 1e-9 * max(values.max(), 1e-300)
    p = int(span.sum())
    if np.abs(vectors[:, ~span].T @ mean).max(initial=0.0) > 1e-9:
        return 0.0  # a deterministic mismatch where the counts cannot vary
    z = vectors[:, span].T @ mean
    t2 = g * float(z @ (z / values[span]))
    return float(stats.f.sf(t2 * (g - p) / (p * (g - 1)), p, g - p))


def residuals(cascade: Cascade, X: np.ndarray, S: np.ndarray, i: int) -> np.ndarray:
    law = np.zeros(PROMPT_LENGTH)
    first = np.zeros(PROMPT_LENGTH)
    counts = cascade.pass_sizes()[i].counts
    law[: counts.size] = counts
    if cascade.catch_up[i]:
        f = cascade.first_pass_sizes(i)
        first[: f.size] = f
    # else the paper's accounting, which has no catch-up pass to correct for
    return X[:, i, :] - S[:, None] * law + first


@pytest.mark.parametrize("name", list(CASES))
def test_decoder_pass_sizes_follow_the_catch_up_law(name: str) -> None:
    K = CASES[name]
    X, S = counts_per_generation(K, seed=7)
    on, off = exact(K, catch_up=True), exact(K, catch_up=False)
    for i in range(1, len(K) + 1):
        p_on = hotelling_p_value(residuals(on, X, S, i))
        assert p_on > 1 - LEVEL, f"{name}, drafter {i}: T² rejects the exact law (p = {p_on:.2g})"
        p_off = hotelling_p_value(residuals(off, X, S, i))
        assert p_off < 1e-6, f"{name}, drafter {i}: dropping the catch-up pass went unnoticed"


def test_first_pass_sizes_is_a_law_and_needs_the_flag() -> None:
    c = exact([[2, 0], [0, 2]], catch_up=True)
    for i in (1, 2):
        f = c.first_pass_sizes(i)
        assert f.sum() == pytest.approx(1.0, abs=1e-12) and (f >= 0).all()
        assert (f <= c.pass_sizes()[i].counts[: f.size] + 1e-12).all()
    for k in (1, 3):  # SD: the drafter catches up on its last draft and the bonus iff all pass
        assert exact([[k]], True).first_pass_sizes(1).tolist() == pytest.approx(
            [0.0, 1 - 0.8**k, 0.8**k, 0.0], abs=1e-15
        )
    with pytest.raises(ValueError, match="catch_up set"):
        exact([[1]], catch_up=False).first_pass_sizes(1)
    with pytest.raises(ValueError, match="catch_up set, got 2"):
        exact([[1]], catch_up=True).first_pass_sizes(2)
