"""realrun.timing.time_family: interleaved rounds over the measuring contexts, the decoder's
verify work, the autoregressive unit, and why interleaving matters (a drifting clock)."""

from __future__ import annotations

import numpy as np
import pytest

from realrun import timing
from realrun.measure import Costs, relative_curves
from realrun.pass_timing import FamilyTiming, PassTiming, grid
from realrun.timing import time_family, time_passes
from simulate.decoder.sampling import Decoding

VOCAB = 100_000  # large enough that random fresh tokens (almost) never match the cache


class Clock:
    """A fake ``time.perf_counter``: seconds advance only when a fake pass runs, at a speed
    that drifts as the measurement goes on (``1 + drift·now``)."""

    def __init__(self, drift: float = 0.0) -> None:
        self.now, self.drift = 0.0, drift

    def __call__(self) -> float:
        return self.now

    def spend(self, seconds: float) -> None:
        self.now += seconds * (1.0 + self.drift * self.now)


class FakeModel:
    """A TokenModel whose pass over ``m`` fed positions returning ``n`` rows costs
    ``base·(1 + 0.5·(m − 1)) + row·(n − 1) + step·[n >= 2]`` seconds of the fake clock; it
    logs ``(name, len(tokens), n)`` of every call."""

    def __init__(
        self, name: str, base: float, clock: Clock, log: list, row: float = 0.0, step: float = 0.0
    ):
        self.name, self.vocab_size = name, VOCAB
        self.base, self.clock, self.log, self.row = base, clock, log, row
        self.step = step
        self.cached: list[int] = []

    def cost(self, m: int) -> float:
        return self.base * (1.0 + 0.5 * (m - 1))

    def logits(self, tokens, n):
        tokens = list(tokens)
        keep = 0
        while keep < min(len(self.cached), len(tokens) - n) and self.cached[keep] == tokens[keep]:
            keep += 1
        self.clock.spend(self.cost(len(tokens) - keep) + self.row * (n - 1) + self.step * (n > 1))
        self.cached = tokens
        self.log.append((self.name, len(tokens), n))
        return np.zeros((n, VOCAB), dtype=np.float32)


def family(drift: float = 0.0, row: float = 0.0, step: float = 0.0):
    clock, log = Clock(drift), []
    models = [
        FakeModel("target", 1.0, clock, log),
        FakeModel("draft", 0.2, clock, log, row, step),
    ]

    def ar(context, n):
        start = clock()
        clock.spend(1.1 * n)  # AR pays 10 % over a bare one-token pass
        log.append(("ar", len(context), n))
        return n, clock() - start

    return clock, log, models, ar


@pytest.fixture
def fake_clock(monkeypatch):
    def install(clock: Clock) -> None:
        monkeypatch.setattr(timing.time, "perf_counter", clock)

    return install


def test_every_round_times_every_pass_and_ar_once_cycling_contexts(fake_clock):
    clock, log, models, ar = family()
    fake_clock(clock)
    contexts = [([1] * 5, [4] * 6), ([2] * 7, [5] * 6), ([3] * 9, [])]
    got = time_family(
        models,
        contexts,
        3,
        ar=ar,
        decoding=Decoding(),
        rounds=4,
        warmup=0,
        ar_tokens=16,
        progress=lambda: log.append("|"),
    )
    assert set(got.passes) == {"target", "draft"}
    for t in got.passes.values():
        assert t.m == grid(3) and all(len(s) == 4 for s in t.samples)
    assert got.ar_tokens == (16,) * 4 and len(got.ar_seconds) == 4
    assert got.ar_seconds_per_token == pytest.approx(1.1)
    assert got.decoder is not None and all(len(s) == 4 for s in got.decoder.samples)
    rounds, cur = [], []
    for call in log:
        if call == "|":
            rounds.append(cur)
            cur = []
        else:
            cur.append(call)
    # round r runs on contexts[r % 3]: its prompt and a part of its continuation (the
    # run's cache lengths), prefilled, then every (model, m) and AR once each; AR decodes
    # the round's prompt, as the run does
    prompts = [5, 7, 9, 5]
    assert all(p <= r[0][1] <= p + 6 for p, r in zip(prompts, rounds, strict=True))
    assert len({r[0][1] for r in rounds}) > 1 and rounds[2][0][1] == 9
    assert got.contexts == tuple(r[0][1] for r in rounds) and got.ar_contexts == tuple(prompts)
    for r, prompt in zip(rounds, prompts, strict=True):
        ctx = r[0][1]
        assert r[:2] == [("target", ctx, 1), ("draft", ctx, 1)]
        timed = sorted(
            (name, length - ctx, n) for name, length, n in r[2:] if name != "ar" and length > ctx
        )
        # the curve's passes return all their logit rows
        curve = [(n, m, m) for n in ("target", "draft") for m in (1, 2, 3)]
        # and the drafter's widest pass up to 4 positions with one row, two and all, three
        # times each (its row cost and row step)
        rows = [("draft", 3, r) for r in (1, 2, 3)] * 3
        assert timed == sorted([*curve, *rows])
        assert [c for c in r if c[0] == "ar"] == [("ar", prompt, 16)]
    assert got.row_seconds("draft") == pytest.approx((0.0, 0.0), abs=1e-12)
    assert got.row_step_seconds("draft") == pytest.approx((0.0, 0.0), abs=1e-12)
    assert got.row_seconds("target") is None and got.rows_m == 3
    # interleaved: in some round a draft pass comes between two target passes
    order = [
        "".join(n[0] for n, length, _ in r[2:] if n != "ar" and length > r[0][1]) for r in rounds
    ]
    assert any("tdt" in o for o in order)


def test_interleaving_cancels_a_drifting_machine(fake_clock):
    """The machine slows down steadily, to about half its speed by the end of the
    measurement. Timed one model after the other (the old harness), the drafter's cost
    relative to the target's is off by about 13 %; timed in interleaved rounds it is within
    1 % of the truth (0.2)."""
    clock, _, models, ar = family(drift=0.001)
    fake_clock(clock)
    got = time_family(
        models, [([1] * 8, [2] * 4)], 4, ar=ar, decoding=Decoding(), rounds=30, seed=3, ar_tokens=8
    )
    assert 1.5 < 1 + 0.001 * clock.now < 2.5  # how much slower the end is than the start
    ratio = np.array(got.passes["draft"].seconds) / np.array(got.passes["target"].seconds)
    np.testing.assert_allclose(ratio, 0.2, rtol=0.01)
    clock2, _, models2, _ = family(drift=0.001)
    fake_clock(clock2)
    one = time_passes(models2[0], [1] * 8, 4, repeats=30)
    two = time_passes(models2[1], [1] * 8, 4, repeats=30)
    blocked = np.array(two.seconds) / np.array(one.seconds)
    assert (blocked / 0.2 - 1 > 0.1).all()


def test_relative_curves_price_the_decoder_and_the_ar_unit():
    target = PassTiming.of((1, 2, 3), [[0.10, 0.10], [0.15, 0.15], [0.20, 0.20]])
    draft = PassTiming.of((1, 2, 3), [[0.02, 0.02], [0.03, 0.03], [0.04, 0.04]])
    verify = PassTiming.of((1, 2, 3), [[0.001, 0.001], [0.002, 0.002], [0.003, 0.003]])
    fam = FamilyTiming({"t": target, "d": draft}, verify, (8, 8), (0.96, 0.96))
    costs = Costs(("t", "d", "mag"), fam, {"mag": 0.0006}, 100, 2, 1)
    t_ar = 0.12
    assert costs.unit_seconds == pytest.approx(t_ar)
    c = relative_curves(costs)
    np.testing.assert_allclose(c[0], [1.0, 0.152 / t_ar, 0.203 / t_ar])  # c_0(1) = 1: an AR token
    np.testing.assert_allclose(c[1], (np.array([0.02, 0.03, 0.04]) + 0.001) / t_ar)
    np.testing.assert_allclose(c[2], [0.0006 / t_ar])
    se = costs.curve_stderr()
    assert se[0][0] == 0.0 and (se[2] == 0).all() and [s.size for s in se] == [3, 3, 1]


def test_sampling_verify_work_is_timed_and_bad_input_is_refused(fake_clock):
    clock, _, models, ar = family()
    fake_clock(clock)
    got = time_family(
        models, [([1] * 4, [2])], 2, ar=ar, decoding=Decoding(temperature=0.7), rounds=1
    )
    assert got.decoder is not None and got.decoder.m == (1, 2)
    with pytest.raises(ValueError, match="contexts"):
        time_family(models, [], 2, ar=ar, decoding=Decoding())
    with pytest.raises(ValueError, match="rounds"):
        time_family(models, [([1], [])], 2, ar=ar, decoding=Decoding(), rounds=0)
    with pytest.raises(ValueError, match="contexts"):
        time_family(models, [([], [1])], 2, ar=ar, decoding=Decoding())
    nothing = FamilyTiming({}, None, (0,), (1.0,))
    with pytest.raises(ValueError, match="no tokens"):
        _ = nothing.ar_seconds_per_token


@pytest.mark.parametrize(("row", "step"), [(0.03, 0.0), (0.002, 0.03), (0.0, 0.01)])
def test_a_drafters_row_cost_and_step_are_timed_against_its_one_and_two_row_passes(
    fake_clock, row, step
):
    """What the logit rows add to a drafter's pass over 4 positions: the second row ``s + h``
    (two rows against one), every further row ``h`` (the curve's four rows against two),
    paired by round; merged timings keep their rounds. At a largest m of 2 only the second
    row's whole cost is timed, as ``h``, with no step."""
    clock, _, models, ar = family(row=row, step=step)
    fake_clock(clock)
    got = time_family(
        models, [([1] * 6, [2] * 3)], 4, ar=ar, decoding=Decoding(), rounds=3, warmup=0
    )
    assert all(len(got.rows["draft"][r]) == 3 for r in (1, 2, 4))
    assert "target" not in got.rows and got.rows_m == 4
    h, se = got.row_seconds("draft")
    assert h == pytest.approx(row) and se == pytest.approx(0.0, abs=1e-12)
    assert got.row_step_seconds("draft") == pytest.approx((step, 0.0), abs=1e-12)
    twice = got.merged(got)
    assert twice.rows["draft"][1] == got.rows["draft"][1] * 2
    assert twice.row_step_seconds("draft") == pytest.approx((step, 0.0), abs=1e-12)
    narrow = time_family(
        models, [([1] * 6, [2] * 3)], 2, ar=ar, decoding=Decoding(), rounds=2, warmup=0
    )
    assert narrow.rows_m == 2 and set(narrow.rows["draft"]) == {1, 2}
    assert narrow.row_seconds("draft")[0] == pytest.approx(row + step)
    assert narrow.row_step_seconds("draft") is None


def test_a_pass_after_ar_feeds_exactly_m_positions(fake_clock):
    """Our decoder's AR rolls the target's cache back to the prompt; the passes timed after
    it in the round still feed only their ``m`` positions (the cache is brought back to the
    round's context outside the clock), so every sample is the pass's own cost."""
    clock, _, models, _ = family()
    fake_clock(clock)

    def ar(context, n):
        models[0].logits(list(context), 1)  # prefill outside the clock, as realrun.ar does
        start = clock()
        clock.spend(1.1 * n)
        return n, clock() - start

    got = time_family(
        models, [([1] * 5, [4] * 12)], 3, ar=ar, decoding=Decoding(), rounds=6, warmup=0
    )
    for model in models:
        timed = got.passes[model.name]
        for m, samples in zip(timed.m, timed.samples, strict=True):
            assert samples == pytest.approx([model.cost(m)] * 6)


def test_cheap_rounds_are_added_until_the_time_floor(fake_clock):
    """Rounds keep coming while the timed ones took less than ``min_seconds``, up to
    ``max_rounds``; a floor already met adds none; bad floors are refused."""
    clock, _, models, ar = family()
    fake_clock(clock)
    contexts = [([1] * 5, [4] * 6)]
    kw = {"ar": ar, "decoding": Decoding(), "warmup": 0, "ar_tokens": 4}
    # one round costs about 4.4 (AR) + the passes' 1 + 1.5 + 2 + 0.2·(...) ≈ 10 fake seconds,
    # and the drafter's 9 row passes 3.6 more
    few = time_family(models, contexts, 3, rounds=2, **kw)
    assert len(few.contexts) == 2
    more = time_family(models, contexts, 3, rounds=2, min_seconds=70.0, **kw)
    assert 4 <= len(more.contexts) <= 6 and len(more.ar_tokens) == len(more.contexts)
    capped = time_family(models, contexts, 3, rounds=2, min_seconds=1e6, max_rounds=3, **kw)
    assert len(capped.contexts) == 3
    assert len(time_family(models, contexts, 3, rounds=2, min_seconds=1e6, **kw).contexts) == 8
    with pytest.raises(ValueError, match="min_seconds"):
        time_family(models, contexts, 3, rounds=2, min_seconds=-1.0, **kw)
    with pytest.raises(ValueError, match=r"max_rounds must be at least rounds \(2\)"):
        time_family(models, contexts, 3, rounds=2, max_rounds=1, **kw)
