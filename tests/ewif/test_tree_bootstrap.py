"""Bootstrap intervals of token trees (ewif.predict.bootstrap.drawn_ranks,
tree_prediction_intervals): replicates redraw the rank-acceptance vectors with α from the same
prompts (p_1 = the replicate α, Σ p <= 1), the interval of a tree carries its runner-up ranks'
uncertainty, and it covers a simulated truth."""

from __future__ import annotations

import numpy as np
import pytest

from ewif.files import model_set as model_io
from ewif.files.bootstrap_data import BootstrapData
from ewif.files.rank_acceptance import RankAcceptance
from ewif.files.tree_config import TreeConfig, TreeSpec
from ewif.files.tree_models import tree_cascade
from ewif.predict.bootstrap import replicate_sets, tree_prediction_intervals

CURVES = [[1.0, 1.05, 1.1, 1.15, 1.2, 1.25], [0.0]]
PROMPTS, POSITIONS = 8, 40
TRUE_P = (0.45, 0.15, 0.08)  # population means of the proposer's rank acceptance
STAR = TreeConfig(("t", "mag"), [[3]], 1.0, TreeSpec("t", "mag", (-1, 0, 0, 0), None))


def simulated_ranks(rng: np.random.Generator) -> np.ndarray:
    """Per prompt ``[sum_1, sum_2, sum_3, positions]``: each prompt's ranks drawn around
    TRUE_P independently (uniform, ±0.15, ±0.1, ±0.04), its positions categorical."""
    out = []
    for _ in range(PROMPTS):
        p = np.array(TRUE_P) + rng.uniform(-1, 1, 3) * [0.15, 0.1, 0.04]
        counts = rng.multinomial(POSITIONS, [*p, 1 - p.sum()])
        out.append([*counts[:3], POSITIONS])
    return np.array(out, dtype=float)


def model_set(rows: np.ndarray, per_prompt_ranks: bool = True) -> model_io.ModelSet:
    """Target ``t`` with a free Max-Gram ``mag`` whose rank vector comes from ``rows``."""
    p = rows[:, :3].sum(axis=0) / rows[:, 3].sum()
    alpha = np.full((2, 2), np.nan)
    alpha[0, 1] = p[0]
    key = (1.0, 0, 1)
    return model_io.ModelSet(
        models=("t", "mag"),
        cost=np.array([1.0, 0.0]),
        cost_per_token=np.zeros(2),
        alpha={1.0: alpha},
        cost_curve=tuple(np.array(c) for c in CURVES),
        bootstrap=BootstrapData({key: rows[:, [0, 3]]}),
        rank_acceptance=RankAcceptance({key: p}, {key: rows} if per_prompt_ranks else {}),
    )


def test_replicates_redraw_rank_vectors_with_alpha():
    for per_prompt in (True, False):
        reps = replicate_sets(
            model_set(ms_rows := simulated_ranks(np.random.default_rng(1)), per_prompt),
            replicates=40,
            seed=3,
        )
        seconds = []
        for rep in reps:
            vec = rep.rank_acceptance.vectors[(1.0, 0, 1)]
            assert vec[0] == rep.alpha[1.0][0, 1] and vec.sum() <= 1 + 1e-12
            assert (vec >= 0).all()
            seconds.append(vec[1])
        # with per-prompt sums p_2 is redrawn; without, it keeps the measured value
        point = ms_rows[:, 1].sum() / ms_rows[:, 3].sum()
        assert (np.std(seconds) > 0.005) == per_prompt
        assert per_prompt or np.allclose(seconds, point)


def test_tree_interval_carries_the_runner_up_ranks():
    rows = simulated_ranks(np.random.default_rng(2))
    with_ranks = tree_prediction_intervals(model_set(rows), [STAR], replicates=100, seed=1)[0]
    alpha_only = tree_prediction_intervals(
        model_set(rows, per_prompt_ranks=False), [STAR], replicates=100, seed=1
    )[0]
    assert with_ranks.point == pytest.approx(tree_cascade(model_set(rows), STAR).ewif())
    assert with_ranks.point == alpha_only.point
    assert with_ranks.low <= with_ranks.point <= with_ranks.high
    assert with_ranks.high - with_ranks.low > 1.2 * (alpha_only.high - alpha_only.low)
    again = tree_prediction_intervals(model_set(rows), [STAR], replicates=100, seed=1)[0]
    assert again == with_ranks
    with pytest.raises(ValueError, match="one entry per configuration"):
        tree_prediction_intervals(model_set(rows), [STAR], max_new_tokens=[None, None])


def test_tree_interval_covers_a_simulated_truth():
    """90 % nominal on 8 prompts (the few-prompt expansion): 0.93 here; 100 seeded datasets,
    binomial standard error about 0.03."""
    truth_set = model_set(np.array([[*(POSITIONS * np.array(TRUE_P)), POSITIONS]] * PROMPTS))
    truth = tree_cascade(truth_set, STAR).ewif()
    rng = np.random.default_rng(11)
    hits = 0
    for _ in range(100):
        iv = tree_prediction_intervals(
            model_set(simulated_ranks(rng)), [STAR], replicates=100, seed=1
        )[0]
        hits += iv.contains(truth)
    assert 0.8 <= hits / 100 <= 0.99
