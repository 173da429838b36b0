"""Losslessness of the token-level cascade: the law of the first m = 3 generated tokens
equals the target's exact autoregressive law (Pearson chi-square at level 1e-3, fixed
seeds), for plain SD and 2- and 3-level cascades with lenience 1, 3, 5 below the target;
lenience at the target is detected as lossy by the same test.

Sizes: every chi-square test of a lossless configuration uses 10^5 samples. The default
suite runs a representative subset (plain SD; 2 levels with a Proposer leaf at lenience 5;
3 levels at lenience 3) and the lenient-target detection (at 2·10^4 samples: detection is
certain long before); ``-m slow`` runs the full grid (11 configurations, plus temperature /
top-p / EOS and the lenient-target detection at 10^5), because one sample costs 0.3–0.8 ms
of Python on a slow core. Synthetic models: vocabulary 8, context 2, target seed 1;
drafters accepted with probability exactly 0.8 (d1) and 0.6 (d2) in every context;
Proposer distilled from d2.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulate.decoder.cascade import CascadeDecoder
from simulate.decoder.lossless import (
    check_lossless,
    chi_square,
    greedy_reference,
    sample_prefixes,
    target_distribution,
)
from simulate.decoder.sampling import Decoding
from simulate.decoder.synthetic import SyntheticLM, SyntheticProposer

PROMPT = [1, 2]
M = 3
FULL = 100_000
QUICK = 20_000
LEVEL = 1e-3

TARGET = SyntheticLM.random(8, 2, seed=1, name="t")
D1 = TARGET.drafter(0.8, seed=2, name="d1")
D2 = TARGET.drafter(0.6, seed=3, name="d2")
PROP = SyntheticProposer.distilled(D2)

# name -> (models, K)
CASCADES = {
    "sd": ([TARGET, D1], [[2]]),
    "two_level": ([TARGET, D1, D2], [[2, 1], [0, 2]]),
    "two_level_proposer": ([TARGET, D1, PROP], [[1, 1], [0, 2]]),
    "three_level": ([TARGET, D1, D2, PROP], [[1, 0, 1], [0, 1, 1], [0, 0, 1]]),
}
SUBSET = [("sd", 1.0), ("two_level_proposer", 5.0), ("three_level", 3.0)]
GRID = [("sd", 1.0)] + [
    (name, lenience)
    for name in ("two_level", "two_level_proposer", "three_level")
    for lenience in (1.0, 3.0, 5.0)
]


def _check(name: str, lenience: float, samples: int, seed: int, **kw) -> None:
    models, K = CASCADES[name]
    decoding = kw.pop("decoding", Decoding(1.0))
    dec = CascadeDecoder(models, K, lenience=lenience, decoding=decoding, seed=seed)
    report = check_lossless(dec, PROMPT, M, samples, LEVEL, **kw)
    assert not report.interrupted
    assert report.test.samples == samples
    assert report.passed, f"{name} l={lenience}: p = {report.test.p_value:.2e} < {LEVEL}"


@pytest.mark.parametrize(("name", "lenience"), SUBSET)
def test_lossless_subset(name: str, lenience: float) -> None:
    _check(name, lenience, FULL, seed=11)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "lenience"), GRID)
def test_lossless_grid(name: str, lenience: float) -> None:
    _check(name, lenience, FULL, seed=12)


@pytest.mark.slow
def test_lossless_temperature_top_p_and_eos() -> None:
    """Temperature 0.8 with nucleus 0.9 (zero-probability tokens for every model) and an
    EOS that ends some outcomes early."""
    _check("three_level", 5.0, FULL, seed=13, decoding=Decoding(0.8, 0.9), eos_token_id=3)


def _lenient_target_p_value(samples: int) -> float:
    dec = CascadeDecoder(
        [TARGET, D2], [[2]], lenience=5.0, decoding=Decoding(1.0), seed=14, lenient_target=True
    )
    report = check_lossless(dec, PROMPT, M, samples, LEVEL)
    assert not report.passed
    return report.test.p_value


def test_lenient_target_detected_as_lossy() -> None:
    """Lenience 5 at the target (the deliberately lossy mode) fails the same check at the
    same sample size: p-value far below the level."""
    assert _lenient_target_p_value(QUICK) < 1e-12


@pytest.mark.slow
def test_lenient_target_detected_as_lossy_full() -> None:
    assert _lenient_target_p_value(FULL) < 1e-12


def test_target_distribution_is_the_product_of_conditionals() -> None:
    dec = Decoding(1.0)
    law = target_distribution(TARGET, PROMPT, M, dec)
    assert len(law) == 8**M
    assert math.isclose(sum(law.values()), 1.0, abs_tol=1e-12)
    x = (4, 0, 7)
    direct = (
        TARGET.distribution(PROMPT)[4]
        * TARGET.distribution([*PROMPT, 4])[0]
        * TARGET.distribution([*PROMPT, 4, 0])[7]
    )
    assert math.isclose(law[x], direct, rel_tol=1e-12)


def test_target_distribution_with_eos_and_greedy() -> None:
    law = target_distribution(TARGET, PROMPT, M, Decoding(1.0), eos_token_id=3)
    assert math.isclose(sum(law.values()), 1.0, abs_tol=1e-12)
    assert all(len(k) == M or k[-1] == 3 for k in law)
    assert math.isclose(law[(3,)], TARGET.distribution(PROMPT)[3], rel_tol=1e-12)
    greedy = target_distribution(TARGET, PROMPT, M, Decoding(0.0))
    assert greedy == {tuple(greedy_reference(TARGET, PROMPT, M)): 1.0}


def test_chi_square_pools_small_cells_and_rejects_impossible_outcomes() -> None:
    probs = {(0,): 0.5, (1,): 0.3, (2,): 0.15, (3,): 0.04, (4,): 0.01}
    res = chi_square({(0,): 50, (1,): 30, (2,): 15, (3,): 4, (4,): 1}, probs)
    # expected 50, 30, 15, 4, 1: the cells 1 and 4 are pooled into one cell of 5
    assert res.cells == 4 and res.dof == 3
    assert res.statistic == pytest.approx(0.0) and res.p_value == pytest.approx(1.0)
    bad = chi_square({(0,): 50, (9,): 1}, probs)
    assert bad.statistic == math.inf and bad.p_value == 0.0
    with pytest.raises(ValueError, match="counts"):
        chi_square({}, probs)
    with pytest.raises(ValueError, match="too few samples"):
        chi_square({(0,): 2}, probs)


@given(st.integers(0, 2**32 - 1))
def test_chi_square_p_value_matches_scipy_on_unpooled_cells(seed: int) -> None:
    from scipy import stats

    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(5)) * 0.5 + 0.1  # all expected counts >= 10 at n = 100
    p /= p.sum()
    obs = rng.multinomial(100, p)
    res = chi_square({(i,): int(c) for i, c in enumerate(obs)}, {(i,): p[i] for i in range(5)})
    ref = stats.chisquare(obs, 100 * p)
    assert res.statistic == pytest.approx(ref.statistic, rel=1e-9, abs=1e-12)
    assert res.p_value == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-12)


def test_sample_prefixes_stops_on_interrupt() -> None:
    class Interrupting:
        name, vocab_size = "ctrl-c", 8

        def __init__(self) -> None:
            self.calls = 0

        def logits(self, tokens, n):
            self.calls += 1
            if self.calls > 5:
                raise KeyboardInterrupt
            return TARGET.logits(tokens, n)

    dec = CascadeDecoder([Interrupting()], [], decoding=Decoding(1.0))
    counts, interrupted = sample_prefixes(dec, PROMPT, 1, 100)
    assert interrupted and sum(counts.values()) == 5


def test_naive_laws_under_lenience_are_detected_as_lossy(monkeypatch) -> None:
    """Handing a leniently reviewed token upward with the reviewer's own distribution as
    its law (instead of (★)) breaks losslessness at lenience 5 — the check detects it with
    10^4 samples (seed 15) — which is why the cascade carries (★)."""
    import simulate.decoder.verify as verify

    monkeypatch.setattr(verify, "output_law", lambda q, x, p, lenience: p)
    models, K = CASCADES["two_level_proposer"]
    dec = CascadeDecoder(models, K, lenience=5.0, decoding=Decoding(1.0), seed=15)
    report = check_lossless(dec, PROMPT, M, 10_000, LEVEL)
    assert report.test.p_value < 1e-9
