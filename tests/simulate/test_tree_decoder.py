"""The token-level tree decoder (:mod:`simulate.decoder.tree`): greedy output equals the
target's greedy decoding for every way a cascade meets a tree; sampling at T = 0.7, top-p 0.9
passes the χ² losslessness check (level 1e-3, fixed seeds) with trees drafted by sampling
without replacement or as deterministic top-k candidates, siblings, a tree reviewed with
lenience below the target; and the known wrong rule — a deterministic top-k candidate checked
with p/q of the drafter's softmax — is rejected by the same χ².

Sizes: 10^4 samples of the first 2 tokens per lossless configuration in the default suite
(0.3–0.5 ms per sample), 10^5 and 3 tokens under ``-m slow``; the wrong rule at 3·10^3
(its p-value is 0 to machine precision already at 10^4). Synthetic models as in
tests/simulate/test_lossless.py (vocabulary 8, context 2)."""

from __future__ import annotations

import numpy as np
import pytest

from simulate.decoder.lossless import check_lossless, greedy_reference
from simulate.decoder.sampling import Decoding
from simulate.decoder.synthetic import SyntheticLM, SyntheticProposer
from simulate.decoder.tree import TreeDecoder

TARGET = SyntheticLM.random(8, 2, seed=1, name="t")
D1 = TARGET.drafter(0.8, seed=2, name="d1")
D2 = TARGET.drafter(0.6, seed=3, name="d2")
PROP = SyntheticProposer.distilled(D2)
PROMPT = [1, 2]
SAMPLING = Decoding(0.7, 0.9)
LEVEL = 1e-3

STAR = [-1, 0, 0, 0, 1]
TREES = {
    "target reviews d2's tree": ([TARGET, D2], [[4]], {"tree": (0, 1, STAR, None)}),
    "target reviews Max-Gram's tree": (
        [TARGET, PROP],
        [[5]],
        {"tree": (0, 1, [-1, 0, 0, 1, 1, 2], None)},
    ),
    "cascade + siblings": ([TARGET, D1, PROP], [[2, 1], [0, 2]], {"siblings": [0, 2, 1]}),
    "d1 reviews Max-Gram's tree": (
        [TARGET, D1, PROP],
        [[2, 0], [0, 4]],
        {"tree": (1, 2, [-1, 0, 0, 1, 2], None)},
    ),
    "d1 reviews d2's tree, siblings": (
        [TARGET, D1, D2],
        [[1, 0], [0, 4]],
        {"tree": (1, 2, STAR, None), "siblings": [0, 1, 0]},
    ),
}


@pytest.mark.parametrize("name", TREES)
@pytest.mark.parametrize("lenience", [1.0, 3.0])
def test_greedy_output_is_the_targets(name: str, lenience: float) -> None:
    models, K, kw = TREES[name]
    decoder = TreeDecoder(models, K, lenience=lenience, **kw)
    assert decoder.generate(PROMPT, 40).tokens == greedy_reference(TARGET, PROMPT, 40)


def _check(name: str, samples: int, m: int, seed: int, lenience: float = 1.0, **extra) -> float:
    models, K, kw = TREES[name]
    decoder = TreeDecoder(models, K, lenience=lenience, decoding=SAMPLING, seed=seed, **kw, **extra)
    report = check_lossless(decoder, PROMPT, m, samples, LEVEL)
    assert not report.interrupted and report.test.samples == samples
    return report.test.p_value


@pytest.mark.parametrize(
    ("name", "lenience", "extra"),
    [
        ("target reviews d2's tree", 1.0, {"sibling_rule": "sample"}),
        ("d1 reviews d2's tree, siblings", 3.0, {"sibling_rule": "sample"}),
        ("cascade + siblings", 3.0, {"sibling_rule": "top-k"}),
    ],
)
def test_sampling_is_lossless(name: str, lenience: float, extra: dict) -> None:
    assert _check(name, 10_000, 2, seed=21, lenience=lenience, **extra) >= LEVEL


@pytest.mark.slow
@pytest.mark.parametrize("name", TREES)
@pytest.mark.parametrize("lenience", [1.0, 3.0])
@pytest.mark.parametrize("rule", ["top-k", "sample"])
def test_sampling_is_lossless_grid(name: str, lenience: float, rule: str) -> None:
    assert _check(name, 100_000, 3, seed=22, lenience=lenience, sibling_rule=rule) >= LEVEL


def test_the_wrong_top_k_rule_is_rejected() -> None:
    assert _check("target reviews d2's tree", 3_000, 2, seed=23, top_k_law="softmax") < LEVEL


def test_averaging_drawn_candidates_stage_by_stage_is_detected(monkeypatch) -> None:
    """The law a lenient tree review hands up must be taken given the candidates drawn: (★)
    averaged stage by stage (the tempting formula) is rejected by the same χ²."""
    import simulate.decoder.tree_verify as tv

    def averaged(p, stages, lenience):
        if lenience == 1.0 or not stages:
            return p
        (x, q), rest = stages[0], stages[1:]
        m = np.minimum(q, lenience * p) if q is not None else _point(p, x, lenience)
        beta = float(m.sum())
        residual = tv._after_rejection(p, x, q)
        return m + (1.0 - beta) * averaged(residual, rest, lenience) if beta < 1 else m

    monkeypatch.setattr(tv, "stage_law", averaged)
    p = _check(
        "d1 reviews d2's tree, siblings", 10_000, 2, seed=25, lenience=3.0, sibling_rule="sample"
    )
    assert p < LEVEL


def _point(p: np.ndarray, x: int, lenience: float) -> np.ndarray:
    out = np.zeros_like(p)
    out[x] = min(1.0, lenience * float(p[x]))
    return out


def test_lenience_at_the_target_is_detected() -> None:
    p = _check("cascade + siblings", 10_000, 2, seed=24, lenience=5.0, lenient_target=True)
    assert p < LEVEL


@pytest.mark.parametrize(
    ("models", "K", "kw", "error", "match"),
    [
        (
            [TARGET, D1],
            [[3]],
            {"tree": (0, 1, STAR, None)},
            ValueError,
            r"its only block, 4 tokens",
        ),
        ([TARGET, D1], [[4]], {"tree": (0, 1, [-1, 1], None)}, ValueError, r"tree parents\[1\]"),
        (
            [TARGET, D1, PROP],
            [[4, 0], [0, 1]],
            {"tree": (0, 1, STAR, None)},
            ValueError,
            r"must be a leaf",
        ),
        ([TARGET, D1], [[2]], {"siblings": [1, 0]}, ValueError, r"0 for the target"),
        (
            [TARGET, D1, PROP],
            [[2, 0], [0, 1]],
            {"siblings": [0, 0, 1]},
            ValueError,
            r"no block in K row 1",
        ),
        ([TARGET, D1], [[2]], {"sibling_rule": "sample"}, ValueError, r"needs sampling"),
        ([TARGET, D1], [[2]], {"sibling_rule": "x"}, ValueError, r"sibling_rule must be one of"),
        (
            [TARGET, D1],
            [[4]],
            {"tree": (0, 1, STAR, None), "siblings": [0, 1]},
            ValueError,
            r"already reviews a tree",
        ),
    ],
)
def test_bad_configurations(models, K, kw, error, match) -> None:
    with pytest.raises(error, match=match):
        TreeDecoder(models, K, **kw)
