"""Held-out prompts of categories the measuring prompts never saw (:class:`HeldOut`): their
pseudo held-out prompts are drawn together from one stand-in category, so the prediction
interval carries the spread between categories (:mod:`ewif.predict.bootstrap`)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif.base.resampling import HeldOut, expansion, held_out_spec, prompt_draw
from ewif.files import model_set as model_io
from ewif.files.bootstrap_data import BootstrapData
from ewif.predict.bootstrap import prediction_interval

NAMES = ("math", "code", "qa", "rag", "edit")
POSITIONS = 32


@st.composite
def splits(draw, unseen: bool) -> HeldOut:
    """Measuring categories (each of at least one prompt) and held-out ones, with or
    without categories the measuring prompts lack."""
    measured = draw(st.lists(st.sampled_from(NAMES), min_size=2, max_size=12))
    seen = draw(st.lists(st.sampled_from(measured), max_size=8))
    new = draw(st.lists(st.sampled_from(("writing", "summary")), min_size=1, max_size=8))
    held = seen + new if unseen else seen or measured[:1]
    return HeldOut(tuple(measured), tuple(draw(st.permutations(held))))


@settings(max_examples=60, deadline=None)
@given(splits(unseen=False), st.integers(0, 2**32 - 1))
def test_without_unseen_categories_the_draw_is_the_counts(held, seed):
    p = len(held.measuring)
    by_kind = prompt_draw(np.random.default_rng(seed), p, held)
    by_count = prompt_draw(np.random.default_rng(seed), p, held.prompts)
    assert held.unseen == {}
    np.testing.assert_array_equal(by_kind, by_count)


@settings(max_examples=60, deadline=None)
@given(splits(unseen=True), st.integers(0, 2**32 - 1))
def test_an_unseen_categorys_prompts_come_from_one_measured_category(held, seed):
    p, unseen = len(held.measuring), held.unseen
    rng = np.random.default_rng(seed)
    idx = prompt_draw(rng, p, held)
    assert idx.size == held.prompts and ((0 <= idx) & (idx < p)).all()
    kinds = np.asarray(held.measuring)
    start = held.prompts - sum(unseen.values())
    for h in unseen.values():
        part, start = idx[start : start + h], start + h
        assert len(set(kinds[part])) == 1  # one stand-in category for the whole category


def alpha_coverage(trials: int, categories: int, unseen: int, seen: int) -> tuple[float, float]:
    """Coverage of the held-out α (90 % nominal) by the count's and the categories' draw.

    Categories' acceptances are drawn from Beta(2, 5), prompts scatter around their
    category's (sd 0.08), 32 positions each; 3 measuring prompts of each of ``categories``
    categories; the run: ``seen`` prompts of measured categories and ``unseen`` prompts of
    one new category. The interval is the α-level bootstrap of :mod:`ewif.predict.bootstrap`
    (``α* = α̂ + w·(α(J) − α̂)``; the EWIF is monotone in α, so the coverage is the same)."""
    rng = np.random.default_rng(3)
    hits = np.zeros(2)
    for _ in range(trials):
        level = rng.beta(2.0, 5.0, categories + 1)

        def prompts(c: int, n: int, level: np.ndarray = level) -> np.ndarray:
            a = np.clip(rng.normal(level[c], 0.08, n), 0.01, 0.99)
            return np.stack([rng.binomial(POSITIONS, a), np.full(n, POSITIONS)], 1)

        rows = np.concatenate([prompts(c, 3) for c in range(categories)]).astype(float)
        kinds = tuple(f"c{c}" for c in range(categories) for _ in range(3))
        held_kinds = [int(rng.integers(categories)) for _ in range(seen)]
        run = np.concatenate([prompts(c, 1) for c in held_kinds] + [prompts(categories, unseen)])
        truth = run[:, 0].sum() / run[:, 1].sum()
        held = HeldOut(kinds, tuple(f"c{c}" for c in held_kinds) + ("new",) * unseen)
        point, widen = rows[:, 0].sum() / rows[:, 1].sum(), expansion(len(kinds))
        for i, spec in enumerate((held.prompts, held)):
            draws = [rows[prompt_draw(rng, len(kinds), spec)].sum(axis=0) for _ in range(200)]
            values = [point + widen * (s / n - point) for s, n in draws]
            low, high = np.quantile(values, [0.05, 0.95])
            hits[i] += low <= truth <= high
    return hits[0] / trials, hits[1] / trials


def test_the_categories_draw_covers_a_run_on_a_category_never_measured():
    # 7 measured categories, a run of 4 prompts of them and 12 of a new one, 300 seeded
    # trials (binomial standard error about 0.02). Measured: the count's draw covers 0.54
    # (it averages the new category's own level away over 12 independent prompts), the
    # categories' draw 0.89 (0.87 with 5 categories: the stand-in is drawn from that few
    # levels, without a small-sample widening of its own; the docs say so). With 15 seen
    # prompts and 1 unseen both cover 0.91-0.92.
    by_count, by_category = alpha_coverage(300, categories=7, unseen=12, seen=4)
    assert 0.84 <= by_category <= 0.95
    assert by_count <= 0.65


def test_the_interval_of_a_model_set_uses_the_categories():
    rng = np.random.default_rng(5)
    levels = np.repeat([0.2, 0.5, 0.8], 4)
    rows = np.array([[rng.binomial(POSITIONS, a), POSITIONS] for a in levels], dtype=float)
    alpha = np.full((2, 2), np.nan)
    alpha[0, 1] = rows[:, 0].sum() / rows[:, 1].sum()
    ms = model_io.ModelSet(
        models=("t", "d"),
        cost=np.array([1.0, 0.1]),
        cost_per_token=np.zeros(2),
        alpha={1.0: alpha},
        cost_curve=(np.array([1.0, 1.1, 1.2]), np.array([0.1])),
        bootstrap=BootstrapData({(1.0, 0, 1): rows}),
    )
    kinds = tuple(np.repeat(["low", "mid", "high"], 4))
    seen = HeldOut(kinds, ("low", "mid", "high") * 4)
    new = HeldOut(kinds, ("low", "mid", "high") + ("new",) * 9)

    def width(held) -> float:
        iv = prediction_interval(ms, ["t", "d"], [[2]], seed=1, held_out_prompts=held)
        return iv.high - iv.low

    assert width(seen) == width(12)  # nothing unseen: the count's interval, exactly
    assert width(new) > 1.5 * width(12)  # nine prompts of one unknown category


@pytest.mark.parametrize(
    ("held", "match"),
    [
        (HeldOut(("a", "b"), ("a",)), "2 measuring categories for a set measured on 3"),
        (0, "held_out_prompts"),
    ],
)
def test_a_held_out_spec_must_fit_the_measurement(held, match):
    with pytest.raises(ValueError, match=match):
        held_out_spec(held, 3)


@pytest.mark.parametrize("bad", [(), ("a", 3)])
def test_a_held_out_split_names_one_category_per_prompt(bad):
    with pytest.raises(ValueError, match="one category per prompt"):
        HeldOut(bad, ("a",))
    with pytest.raises(ValueError, match="one category per prompt"):
        HeldOut(("a",), bad)
