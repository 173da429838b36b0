"""vLLM's drafting priced (ewif.predict.batch, drafting "vllm") with a vLLM profile
(ewif.files.vllm_profile): hand-computed cases, the invariants (hypothesis), the Monte Carlo
witness (simulate.batch.simulate_vllm_sd), the file format and bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif import cli
from ewif.files import model_set as model_io
from ewif.files.vllm_profile import NgramBehaviour, VllmProfile, load, save
from ewif.predict.batch import batch_ratio, best_draft_lengths, vllm_ratio
from simulate.batch import simulate_vllm_sd
from tests.ewif.test_batch import ALPHA
from tests.ewif.test_batch import model_set as batch_set

SIZES = (1, 2, 4)


def profile(
    q: float = 0.5, alphas=(0.3, 0.6, 0.8), first: float = 30.0, later: float = 20.0
) -> VllmProfile:
    """A non-monotone target (1-row steps dearer than 2-4-row ones, as on this CPU), every
    T = B..B·7 measured."""
    target = {
        b: {t: 100.0 + (10.0 if t == b else 0.0) + 4.0 * t + (3.0 if t % 3 == 0 else 0.0)
            for t in range(b, 7 * b + 1)}
        for b in SIZES
    }  # fmt: skip
    return VllmProfile(
        target="t",
        drafter="d",
        target_pass=target,
        overhead={
            "ar": {b: {0: 2.0} for b in SIZES},
            "ngram": {b: {k: 2.5 + 0.1 * k for k in range(1, 7)} for b in SIZES},
            "draft_model": {b: {k: 3.0 + 0.2 * k for k in range(0, 6)} for b in SIZES},
        },
        drafter_pass={b: later * (1 + 0.1 * b) for b in SIZES},
        drafter_first_pass={b: {m: first + m + b for m in range(2, 8)} for b in SIZES},
        ngram=NgramBehaviour(q, tuple(alphas)),
        metadata={"engine": "test"},
    )


def test_draft_model_by_hand():
    ms, p, a = batch_set(), profile(), ALPHA["d"]
    for b in SIZES:
        ar = p.target_pass[b][b] + 2.0
        for k in range(0, 6):
            tokens = sum(a**i for i in range(k + 1))
            step = p.target_pass[b][b * (k + 1)] + p.drafter_first_pass[b][k + 2]
            step += max(k - 1, 0) * p.drafter_pass[b] + 3.0 + 0.2 * k
            got = batch_ratio(ms, "d", k, b, drafting="vllm", profile=p)
            assert got == pytest.approx(tokens * ar / step, rel=1e-12)


def test_a_draft_models_k_zero_is_not_autoregressive():
    """vLLM runs the drafter's first pass even at K = 0: below 1, with or without a profile."""
    ms = batch_set()
    for b in SIZES:
        assert batch_ratio(ms, "d", 0, b, drafting="vllm", profile=profile()) < 1.0
        assert batch_ratio(ms, "d", 0, b, drafting="vllm") < 1.0
        assert batch_ratio(ms, "d", 0, b) == 1.0  # other engines' k = 0 is AR
        assert batch_ratio(ms, "mag", 0, b, drafting="vllm", profile=profile()) == 1.0


def test_ngram_by_hand():
    ms, p = batch_set(), profile(q=0.25, alphas=(0.5, 0.4))
    b, k = 2, 3
    accepted = 0.5 + 0.5 * 0.4 + 0.5 * 0.4 * 0.4  # beyond the last position: the last α
    tokens = 1 + 0.25 * accepted
    table = p.target_pass[2]
    target = 0.75**2 * table[2] + 2 * 0.25 * 0.75 * table[5] + 0.25**2 * table[8]
    expected = tokens * (table[2] + 2.0) / (target + 2.5 + 0.3)
    assert batch_ratio(ms, "mag", k, b, drafting="vllm", profile=p) == pytest.approx(expected)


def test_without_a_profile_the_sets_curves_price_vllms_passes():
    ms, a = batch_set(), ALPHA["d"]
    from ewif.predict.batch import pass_price

    for b, k in [(1, 1), (2, 3), (4, 0)]:
        tokens = sum(a**i for i in range(k + 1))
        cost = pass_price(ms, 0, b, k + 1) + pass_price(ms, 1, b, k + 2)
        cost += max(k - 1, 0) * pass_price(ms, 1, b, 1)
        assert vllm_ratio(ms, "d", k, b) == pytest.approx(tokens * pass_price(ms, 0, b, 1) / cost)


@settings(max_examples=60, deadline=None)
@given(
    q=st.floats(0.0, 1.0),
    alphas=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=6),
    k=st.integers(1, 6),
    b=st.sampled_from(SIZES),
)
def test_ngram_invariants(q, alphas, k, b):
    ms = batch_set()
    p = profile(q, alphas)
    got = batch_ratio(ms, "mag", k, b, drafting="vllm", profile=p)
    # equal α by position is the geometric sum; q = 1 is every row at B(k+1)
    flat = profile(1.0, (alphas[0],))
    a = alphas[0]
    geometric = sum(a**i for i in range(k + 1))
    step = flat.target_pass[b][b * (k + 1)] + 2.5 + 0.1 * k
    assert batch_ratio(ms, "mag", k, b, drafting="vllm", profile=flat) == pytest.approx(
        geometric * (flat.target_pass[b][b] + 2.0) / step
    )
    # more acceptance never lowers the ratio; q = 0 never speculates but pays the step
    better = profile(q, [min(1.0, x + 0.1) for x in alphas])
    assert batch_ratio(ms, "mag", k, b, drafting="vllm", profile=better) >= got - 1e-12
    none = batch_ratio(ms, "mag", k, b, drafting="vllm", profile=profile(0.0, alphas))
    assert none == pytest.approx(
        (p.target_pass[b][b] + 2.0) / (p.target_pass[b][b] + 2.5 + 0.1 * k)
    )


@settings(max_examples=40, deadline=None)
@given(first=st.floats(0.0, 200.0), later=st.floats(0.0, 100.0), k=st.integers(0, 5))
def test_a_dearer_drafter_never_pays_more(first, later, k):
    ms = batch_set()
    cheap = batch_ratio(ms, "d", k, 2, drafting="vllm", profile=profile(first=first, later=later))
    dear = batch_ratio(
        ms, "d", k, 2, drafting="vllm", profile=profile(first=first + 10, later=later + 5)
    )
    assert dear <= cheap


@pytest.mark.parametrize(("drafter", "k", "b"), [("d", 2, 1), ("d", 4, 4), ("mag", 3, 2)])
@pytest.mark.parametrize("with_profile", [True, False])
def test_monte_carlo_witness(drafter, k, b, with_profile):
    """simulate.batch draws every row's match and acceptances; 99.9 % interval, fixed seed."""
    ms = batch_set()
    p = profile(q=0.6, alphas=(0.4, 0.7, 0.9)) if with_profile else None
    exact = batch_ratio(ms, drafter, k, b, drafting="vllm", profile=p)
    est = simulate_vllm_sd(ms, drafter, k, b, p, steps=20_000, seed=11 * k + b)
    assert est.low <= exact <= est.high, (exact, est)


def test_the_best_lengths_cover_k_zero_for_a_draft_model():
    ms = batch_set()
    choices = best_draft_lengths(ms, "d", SIZES, 5, drafting="vllm", profile=profile())
    for c in choices:
        best = max(
            range(6),
            key=lambda k: batch_ratio(ms, "d", k, c.batch, drafting="vllm", profile=profile()),
        )
        assert c.k == best


def test_the_file_round_trips_and_reads_only_what_was_measured(tmp_path):
    p = profile()
    path = save(p, tmp_path / "profile.json")
    q = load(path)
    assert q == p
    assert q.k_max("draft_model") == 5 and q.k_max("ngram") == 6
    assert q.target_at(2, 2.5) == pytest.approx((p.target_pass[2][2] + p.target_pass[2][3]) / 2)
    with pytest.raises(ValueError, match="measured at batch sizes"):
        q.ar_step(8)
    with pytest.raises(ValueError, match=r"measured for 2\.\.14 positions"):
        q.target_at(2, 15)
    with pytest.raises(ValueError, match=r"drafter_first_pass\[2\] is measured at"):
        q.draft_model_step(2, 6)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"schema": "csd.models/4"}, "not a csd.vllm-profile/1 file"),
        ({"target_pass": {"1": {"1": -1}}}, "finite number >= 0"),
        ({"target_pass": {"0": {"1": 1}}}, "batch size"),
        ({"overhead": {"eagle": {}}}, "overhead methods"),
        ({"ngram": {"match_rate": 1.5, "alpha_by_position": [0.5]}}, r"\[0, 1\]"),
        ({"ngram": {"match_rate": 0.5, "alpha_by_position": []}}, "at least one"),
        ({"drafter_pass": None}, "go together"),
        ({"colour": 1}, "unknown keys"),
    ],
)
def test_bad_profiles_are_one_line_errors(tmp_path, change, message):
    data = profile().to_dict() | change
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=message) as err:
        load(path)
    assert "\n" not in str(err.value)


def test_recommend_prices_vllm_with_the_profile(tmp_path, capsys):
    ms = batch_set()
    set_path = model_io.save(ms, tmp_path / "set.json")
    prof = save(profile(), tmp_path / "profile.json")
    args = ["recommend", "--from", str(set_path), "--emit", "vllm", "--batch-sizes", "1,2,4"]
    assert cli.main([*args, "--vllm-profile", str(prof), "--json"]) == 0
    em = json.loads(capsys.readouterr().out)["emit"]
    for c in em["by_batch"]:
        d = em["drafter"]
        assert c["ratio"] == batch_ratio(
            ms, d, c["k"], c["batch"], drafting="vllm", profile=profile()
        )
    assert any("vLLM's own step costs" in n for n in em["notes"])
    assert cli.main([*args[:-2], "--batch-sizes", "1,8", "--vllm-profile", str(prof)]) == 2
    assert "measured at batch sizes [1, 2, 4], not [8]" in capsys.readouterr().err
    assert cli.main([*args[:4], "trtllm", "--vllm-profile", str(prof)]) == 2
    assert "give --emit vllm" in capsys.readouterr().err


def test_no_speculation_means_no_speculative_config():
    """A drafter that never pays: vLLM is served without --speculative-config, and the table
    reads 1 (not a K = 0 schedule, which would still run the drafter)."""
    from ewif.serving.emit import NONE, emission

    ms = batch_set()
    dear = profile(first=5000.0, later=5000.0, q=0.0)
    em = emission(ms, "vllm", [1, 2, 4], k_max=5, profile=dear)
    assert em.plan.method == NONE and em.config == {}
    assert "--speculative-config" not in em.text
    assert [c.ratio for c in em.plan.by_batch] == [1.0, 1.0, 1.0]
    assert math.isclose(em.plan.ewif, 1.0)
    assert np.all([c.k == 0 for c in em.plan.by_batch])
