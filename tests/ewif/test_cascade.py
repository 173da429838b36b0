"""Exact cascade evaluator: the paper's special cases, an independent enumeration, edges."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif import Pgf, horizontal_ewif, phi, sd_ewif, vertical_ewif
from ewif.kernel.cascade import Cascade

NAN = np.nan
prob = st.floats(0.0, 1.0)
inner = st.floats(0.01, 0.99)
costs = st.floats(0.0, 0.5)


def alpha_matrix(n: int, values: dict[tuple[int, int], float]) -> np.ndarray:
    a = np.full((n + 1, n + 1), NAN)
    for (r, j), v in values.items():
        a[r, j] = v
    return a


@given(prob, st.integers(1, 25), costs)
def test_single_drafter_is_corollary_4_2(a, k, c):
    casc = Cascade(alpha_matrix(1, {(0, 1): a}), [1, c], [[k]])
    assert casc.ewif() == pytest.approx(sd_ewif(a, k, c), rel=1e-12, abs=0)
    assert casc.tokens_pgf().isclose(phi(a, k), atol=1e-14)
    np.testing.assert_allclose(casc.passes_per_step(), [1, k], rtol=0)
    assert casc.expected_cost() == pytest.approx(1 + k * c, rel=1e-15)


@settings(max_examples=50)
@given(prob, prob, st.integers(1, 8), st.integers(1, 5), costs, costs)
def test_rounds_fill_is_theorem_4_3(a, a2, k, n, c1, c2):
    casc = Cascade(
        alpha_matrix(2, {(0, 1): a, (1, 2): a2}), [1, c1, c2], [[n, 0], [0, k]], fill="rounds"
    )
    assert casc.ewif() == pytest.approx(vertical_ewif(a, a2, k, n, c1, c2), rel=1e-12)
    rounds = np.ones(1)
    for _ in range(n):  # n independent rounds: the n-th power of φ (not composition)
        rounds = np.convolve(rounds, phi(a2, k).coefficients)
    expect = np.zeros(rounds.size + 1)  # target review of a draft of D tokens, D ~ rounds
    for d, pd in enumerate(rounds):
        expect[1 : d + 1] += pd * a ** np.arange(d) * (1 - a)
        expect[d + 1] += pd * a**d
    np.testing.assert_allclose(
        casc.tokens_pgf().coefficients, expect[: casc.tokens_pgf().coefficients.size], atol=1e-13
    )
    np.testing.assert_allclose(casc.passes_per_step(), [1, n, n * k], rtol=1e-14)


@given(st.lists(st.tuples(prob, costs), min_size=1, max_size=6))
def test_leaf_per_position_is_theorem_4_5(pairs):
    n = len(pairs)
    a = alpha_matrix(n, {(0, j + 1): p[0] for j, p in enumerate(pairs)})
    K = np.zeros((n, n), dtype=int)
    K[0] = 1
    casc = Cascade(a, [1] + [p[1] for p in pairs], K)
    expect = horizontal_ewif([p[0] for p in pairs], [p[1] for p in pairs])
    assert casc.ewif() == pytest.approx(expect, rel=1e-12)


@given(st.integers(1, 6), st.integers(1, 8), prob, prob, costs, costs)
def test_horizontal_blocks_of_two_leaves(k1, k2, a1, a2, c1, c2):
    casc = Cascade(alpha_matrix(2, {(0, 1): a1, (0, 2): a2}), [1, c1, c2], [[k1, k2], [0, 0]])
    expect = horizontal_ewif([a1] * k1 + [a2] * k2, [c1] * k1 + [c2] * k2)
    assert casc.ewif() == pytest.approx(expect, rel=1e-12)


# --- independent oracle: enumerate every Bernoulli outcome with exact fractions -------------
def enumerate_call(r, alpha, K, cost, fill):
    """All outcomes of one review call of r: list of (probability, tokens, cost) in Fractions.

    ``cost`` is a list (a pass of model i costs ``cost[i]`` at every m) or a function
    ``cost(i, m)`` (a pass of model i over m positions; a review of a D-token draft has
    m = D + 1, a leaf pass m = 1).
    """
    price = cost if callable(cost) else (lambda i, m: cost[i])
    n = len(K)
    blocks = []  # for each block: list of (p, [proposer per token], cost)
    for j in range(r + 1, n + 1):
        b = K[r][j - 1]
        if b == 0:
            continue
        if j == n or not any(K[j]):
            blocks.append([(Fraction(1), [j] * b, b * price(j, 1))])
            continue
        sub = enumerate_call(j, alpha, K, cost, fill)
        outcomes = [(Fraction(1), 0, Fraction(0), 0)]  # p, tokens, cost, calls
        done = []
        while outcomes:
            nxt = []
            for p, t, c, m in outcomes:
                finished = t >= b if fill == "tokens" else m == b
                if finished:
                    done.append((p, [j] * t, c))
                    continue
                for q, tt, cc in sub:
                    nxt.append((p * q, t + tt, c + cc, m + 1))
            outcomes = nxt
        blocks.append(done)
    out = []
    for combo in itertools.product(*blocks):
        p = Fraction(1)
        tokens, c = [], Fraction(0)
        for q, toks, cc in combo:
            p *= q
            tokens += toks
            c += cc
        c += price(r, len(tokens) + 1)
        # review: accept position by position
        acc_p = Fraction(1)
        for i, j in enumerate(tokens):
            a = alpha[r][j]
            out.append((p * acc_p * (1 - a), i + 1, c))
            acc_p *= a
        out.append((p * acc_p, len(tokens) + 1, c))
    return out


small_alpha = st.sampled_from([Fraction(0), Fraction(1, 2), Fraction(3, 4), Fraction(1)])


@settings(max_examples=40)
@given(
    st.lists(small_alpha, min_size=6, max_size=6),
    st.lists(st.integers(0, 2), min_size=6, max_size=6),
    st.sampled_from(["tokens", "rounds"]),
)
def test_matches_exhaustive_enumeration(alphas, ks, fill):
    K = [[ks[0], ks[1], ks[2]], [0, ks[3], ks[4]], [0, 0, ks[5]]]
    cost = [Fraction(1), Fraction(1, 10), Fraction(1, 50), Fraction(1, 200)]
    alpha = [[None] * 4 for _ in range(4)]
    for (r, j), a in zip([(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)], alphas, strict=True):
        alpha[r][j] = a
    af = np.array([[NAN if v is None else float(v) for v in row] for row in alpha])
    try:
        casc = Cascade(af, [float(c) for c in cost], K, fill=fill)
    except ValueError:
        return  # unused drafter / empty target row: refused, tested below
    outcomes = enumerate_call(0, alpha, K, cost, fill)
    assert sum(p for p, _, _ in outcomes) == 1
    tokens = sum(p * t for p, t, _ in outcomes)
    expected_cost = sum(p * c for p, _, c in outcomes)
    pmf = np.zeros(max(t for _, t, _ in outcomes) + 1)
    for p, t, _ in outcomes:
        pmf[t] += float(p)
    assert casc.tokens_pgf().isclose(Pgf(pmf), atol=1e-13)
    assert casc.expected_tokens() == pytest.approx(float(tokens), rel=1e-12)
    assert casc.expected_cost() == pytest.approx(float(expected_cost), rel=1e-12)
    assert casc.ewif() == pytest.approx(float(tokens / expected_cost), rel=1e-12)


def test_appendix_b_example_and_breakdown():
    a = alpha_matrix(2, {(0, 1): 0.7, (0, 2): 0.4, (1, 2): 0.6})
    casc = Cascade(a, [1, 68 / 7000, 0], [[2, 10], [0, 10]])
    assert casc.swi_breakdown().sum() == pytest.approx(1.0)
    share = casc.swi_breakdown() * casc.expected_cost()
    calls = casc.passes_per_step()
    assert share[1] == pytest.approx(calls[1] * 68 / 7000)
    assert calls[0] == 1 and calls[2] >= 10 + 10  # MaG block at the target + inside 68M


@given(inner, st.integers(1, 12), st.integers(1, 30))
def test_acceptance_by_position_single_drafter(a, k, m):
    casc = Cascade(alpha_matrix(1, {(0, 1): a}), [1, 0.01], [[k]])
    i = np.arange(1, m + 1)
    np.testing.assert_allclose(
        casc.acceptance_by_position(m), np.where(i <= k, a**i, 0), rtol=1e-12, atol=1e-15
    )
    cond = casc.acceptance_by_position(m, conditional=True)
    np.testing.assert_allclose(cond[: min(k, m)], a, rtol=1e-12)
    assert np.isnan(cond[k:]).all()


def test_acceptance_by_position_is_tail_of_tokens():
    a = alpha_matrix(
        3, {(0, 1): 0.8, (0, 2): 0.7, (0, 3): 0.5, (1, 2): 0.8, (1, 3): 0.6, (2, 3): 0.7}
    )
    casc = Cascade(a, [1, 0.02, 0.007, 0], [[5, 3, 10], [0, 4, 10], [0, 0, 10]])
    pmf = casc.tokens_pgf().coefficients
    curve = casc.acceptance_by_position(50)
    tail = np.array([pmf[i + 1 :].sum() for i in range(1, 51)])
    np.testing.assert_allclose(curve, tail, atol=1e-14)
    assert curve.sum() + 1 == pytest.approx(casc.expected_tokens(), rel=1e-12)


@given(st.integers(1, 10), costs, st.floats(0, 0.05), st.floats(0, 0.05))
def test_cost_per_token_definition(k, c, cpt0, cpt1):
    casc = Cascade(alpha_matrix(1, {(0, 1): 0.6}), [1, c], [[k]], cost_per_token=[cpt0, cpt1])
    # target pass over k draft tokens processes m = k + 1 positions; each leaf pass m = 1
    cost = 1 + cpt0 * (k + 1) + k * (c + cpt1)
    assert casc.expected_cost() == pytest.approx(cost, rel=1e-14)
    assert casc.ewif() == pytest.approx(sd_ewif(0.6, k, 0) * (1 + cpt0) / cost, rel=1e-12)


def test_edges_exact():
    for a, expect in [(0.0, 1 / 1.5), (1.0, 6 / 1.5)]:
        casc = Cascade(alpha_matrix(1, {(0, 1): a}), [1, 0.1], [[5]])
        assert casc.ewif() == expect
    # alpha = 1 everywhere in a 2-level tokens cascade: deterministic overshoot
    casc = Cascade(alpha_matrix(2, {(0, 1): 1.0, (1, 2): 1.0}), [1, 0.0, 0.0], [[5, 0], [0, 3]])
    assert casc.tokens_pgf() == Pgf.point(9)  # two calls of 4 tokens >= 5, then bonus


@pytest.mark.parametrize(
    ("alpha", "cost", "K", "match"),
    [
        (alpha_matrix(1, {(0, 1): 0.5}), [1, 0.1], [[0]], "all zero"),
        (alpha_matrix(1, {(0, 1): 0.5}), [1, 0.1], [[-1]], "K"),
        (alpha_matrix(1, {(0, 1): 0.5}), [1, 0.1], [[1.5]], "K"),
        (alpha_matrix(1, {(0, 1): 1.5}), [1, 0.1], [[3]], r"alpha\[0, 1\]"),
        (alpha_matrix(1, {}), [1, 0.1], [[3]], r"alpha\[0, 1\] is missing"),
        (alpha_matrix(2, {(0, 1): 0.5, (1, 2): 0.5}), [1, 0.1, 0], [[1, 0], [2, 1]], "upper-tri"),
        (
            alpha_matrix(2, {(0, 1): 0.5, (1, 2): 0.5}),
            [1, 0.1, 0],
            [[1, 0], [0, 0]],
            "drafter 2 has no way to produce tokens",
        ),
        (alpha_matrix(2, {(0, 1): 0.5}), [1, 0.1, 0], [[1, 0], [0, 3]], r"alpha\[1, 2\]"),
        (alpha_matrix(1, {(0, 1): 0.5}), [1, -0.1], [[3]], "cost"),
        (alpha_matrix(1, {(0, 1): 0.5}), [2, 0.1], [[3]], r"cost\[0\]"),
        (alpha_matrix(1, {(0, 1): 0.5}), [1, 0.1], [[3, 1]], "shape"),
        (np.zeros((3, 3)), [1, 0.1], [[3]], "alpha must have shape"),
    ],
)
def test_bad_configurations(alpha, cost, K, match):
    with pytest.raises(ValueError, match=match):
        Cascade(alpha, cost, K)


def test_bad_fill_and_model_set_errors():
    with pytest.raises(ValueError, match="fill"):
        Cascade(alpha_matrix(1, {(0, 1): 0.5}), [1, 0.1], [[3]], fill="blocks")
    from ewif.files.presets import load_preset

    ms = load_preset("flan-t5-ms")
    with pytest.raises(ValueError, match="lenience 2"):
        ms.to_cascade(lenience=2)
    with pytest.raises(ValueError, match="unknown model"):
        ms.to_cascade(models=["flan-t5-xxl", "nope"], K=[[3]])
    with pytest.raises(ValueError, match="start with the target"):
        ms.to_cascade(models=["flan-t5-base", "mag"], K=[[3]])
    c = ms.to_cascade()  # the preset's cascade section (paper's Table 5 setting)
    assert c.names == ms.models and c.K.tolist() == [[8, 13, 10], [0, 1, 10], [0, 0, 10]]
