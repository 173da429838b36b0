"""The cost unit under a synthetic drift: the AR reference timed as the run decodes it, with
c(m, L), prices a later run's passes right; the old reference (16 tokens after each
continuation) and seconds do not.

A fake machine (a clock advanced by fake passes, no real time): a pass over ``m`` positions
after ``L`` cached tokens costs ``base·(1 + 0.5·(m − 1)) + γ·L``; autoregressive decoding
pays 1.1 passes a token and a setup per call. Half the prompts are short with long answers
(80 tokens, no EOS within 32), half long with short answers (800 tokens, EOS after 6) — a
mix the shipped prompts never had. The run is 15 % slower than the measurement (the machine
drifted), decodes other prompts of the same kinds, and its passes sit where its prompts
are."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ewif.files.model_set import ModelSet
from realrun import timing
from realrun.books import timing_agreement
from realrun.context_fit import fit_context_cost
from realrun.measure import Costs, relative_curves
from realrun.run_context import run_context, timing_at
from realrun.timing import time_family
from simulate.decoder.sampling import Decoding

EOS, VOCAB, SETUP = 0, 1000, 2.0
SHORT, LONG = (80, 40), (800, 6)  # (prompt tokens, answer tokens before EOS)


class Machine:
    """The fake clock: seconds advance by a cost over the machine's speed."""

    def __init__(self) -> None:
        self.now, self.speed = 0.0, 1.0

    def __call__(self) -> float:
        return self.now

    def spend(self, cost: float) -> None:
        self.now += cost / self.speed


class Model:
    """A KV-cached fake model: a pass feeds what its cache lacks (module docstring)."""

    def __init__(self, name: str, base: float, gamma: float, machine: Machine) -> None:
        self.name, self.vocab_size = name, VOCAB
        self.base, self.gamma, self.machine = base, gamma, machine
        self.cached: list[int] = []

    def cost(self, m: int, length: int) -> float:
        return self.base * (1 + 0.5 * (m - 1)) + self.gamma * length

    def logits(self, tokens, n):
        tokens = list(tokens)
        keep = 0
        limit = min(len(self.cached), len(tokens) - n)
        while keep < limit and self.cached[keep] == tokens[keep]:
            keep += 1
        self.fed = len(tokens) - keep
        self.machine.spend(self.cost(self.fed, len(tokens)))
        self.cached = tokens
        return np.zeros((n, VOCAB), dtype=np.float32)


def text(kind: tuple[int, int], seed: int) -> tuple[list[int], list[int], int]:
    """A prompt of ``kind``, its continuation as the target generates it (up to 32 tokens,
    EOS included when the answer ends sooner) and its answer's length."""
    rng = random.Random(seed)
    prompt = [1 + rng.randrange(VOCAB - 1) for _ in range(kind[0])]
    answer = [1 + rng.randrange(VOCAB - 1) for _ in range(kind[1])]
    return prompt, [*answer, EOS][:32], kind[1]


def autoregressive(target: Model, texts):
    """The fake AR timer: decodes up to ``n`` tokens of the context's answer and its EOS (one
    token, EOS again, after a context that ends at EOS), 1.1 passes a token and a setup per
    call."""
    machine = target.machine

    def ar(context, n):
        context = list(context)
        prompt, _, answer = next(t for t in texts if context[: len(t[0])] == t[0])
        left = answer + 1 - (len(context) - len(prompt))
        tokens = 1 if context[-1] == EOS else max(1, min(n, left))
        start = machine()
        machine.spend(SETUP)
        for j in range(tokens):
            machine.spend(1.1 * target.cost(1, len(context) + j + 1))
        return tokens, machine() - start

    return ar


def run(models: list[Model], prompts, ar) -> tuple[dict, float]:
    """The held-out run on the slower machine: AR on every prompt, and SD (a drafter pass,
    then a target pass over 2 positions) for the answer's length; its in-run pass seconds as
    ``metadata.in_run_pass_seconds`` holds them, and AR's seconds per token."""
    target, drafter = models
    machine = target.machine
    seen: dict[tuple[str, int], list[float]] = {}
    ar_n = ar_s = 0.0
    for prompt, continuation, _ in prompts:
        n, s = ar(prompt, 32)
        ar_n, ar_s = ar_n + n, ar_s + s
        seq = list(prompt)
        for model in models:
            model.logits(seq, 1)
        while len(seq) < len(prompt) + len(continuation):
            for model, rows in ((drafter, 1), (target, 2)):
                start = machine()
                model.logits(seq + [7] * rows, rows)  # the drafter catches up: m = 2
                seen.setdefault((model.name, model.fed, rows), []).append(machine() - start)
            seq += [7, 7]
    in_run: dict = {"SD": {}}
    for (name, m, rows), v in seen.items():
        entry = {"passes": len(v), "mean_s": float(np.mean(v)), "rows": float(rows)}
        in_run["SD"].setdefault(name, {})[str(m)] = entry
    return in_run, ar_s / ar_n


@pytest.fixture
def machine(monkeypatch):
    clock = Machine()
    monkeypatch.setattr(timing.time, "perf_counter", clock)
    return clock


def test_a_drift_the_new_unit_cancels_and_the_old_one_does_not(machine):
    models = [Model("target", 1.0, 0.0007, machine), Model("draft", 0.3, 0.0004, machine)]
    measuring = [text(SHORT if i % 2 else LONG, i) for i in range(8)]
    held = [text(SHORT if i % 2 else LONG, 100 + i) for i in range(8)]
    ar = autoregressive(models[0], measuring + held)
    stretch = "16 tokens after the continuation"
    family = time_family(
        models,
        [(p, c) for p, c, _ in measuring],
        4,
        ar=ar,
        decoding=Decoding(),
        rounds=16,
        warmup=0,
        ar_tokens=32,
        probes={stretch: lambda p, c: ar(list(p) + list(c), 16)},
    )
    costs = Costs(("target", "draft"), family, {}, 0, 16, 0)
    machine.speed = 1 / 1.15  # the machine drifts: the run is 15 % slower
    in_run, run_ar = run(models, held, ar)
    old_n, old_s = family.probes[stretch]
    old_unit = sum(old_s) / sum(old_n)
    new_unit = costs.unit_seconds
    timed = {n: t.to_dict() for n, t in family.passes.items()}

    def gaps(rows, key="relative_error"):
        return [v[key] for by_m in rows.values() for v in by_m.values()]

    # the old reference (16 tokens after each continuation: after an EOS on every long
    # prompt) prices the run's passes, in units of each phase's AR token, more than 5 % off
    assert max(abs(g) for g in gaps(timing_agreement(in_run, timed, run_ar, old_unit))) > 0.05
    # so does the unit now with one curve: its passes sit at the mean of the measuring
    # contexts, the run's where its tokens were generated
    assert max(abs(g) for g in gaps(timing_agreement(in_run, timed, run_ar, new_unit))) > 0.05
    # with c(m, L) at the run's contexts: within 1.5 % in AR units ...
    curves = relative_curves(costs)
    fitted, _ = fit_context_cost(family, ("target", "draft"), curves, new_unit)
    alpha = np.array([[np.nan, 0.5], [np.nan, np.nan]])
    model_set = ModelSet(
        ("target", "draft"),
        np.array([c[0] for c in curves]),
        np.zeros(2),
        {1.0: alpha},
        cost_curve=curves,
        context_cost=fitted,
        metadata={"timing": timed, "ar_seconds_per_token": new_unit},
    )
    lengths = [len(c) for _, c, _ in held]
    moved, ar_at_run = timing_at(model_set, run_context([len(p) for p, _, _ in held], lengths))
    priced = timing_agreement(in_run, moved, run_ar, ar_at_run)
    assert len(gaps(priced)) == 2 and max(abs(g) for g in gaps(priced)) < 0.015
    # ... while in seconds every pass is the drift off: 15 %, uncorrected
    assert all(0.13 < g < 0.17 for g in gaps(priced, "error"))
    assert run_ar / ar_at_run == pytest.approx(1.15, rel=0.015)  # the unit moved with the drift
    assert abs(run_ar / old_unit / 1.15 - 1) > 0.05  # the old one moved more


def test_a_length_the_fit_does_not_admit_is_refused_not_fatal():
    """A fitted AR slope steep enough to price an AR token at or below 0 within its span (a
    longer length is priced at the span's edge): the run's c(m, L) figures are left out with
    the reason, the run is kept."""
    from dataclasses import replace
    from pathlib import Path

    from ewif.files import results as results_io
    from ewif.files.context_cost import ContextCost
    from realrun.run_context import context_predictions

    run = results_io.load(Path(__file__).parents[2] / "realrun/data/cpu_results_smollm2.json")
    shipped = ModelSet.from_dict(run.metadata["model_set"], "run")
    slopes = tuple(np.zeros(1) for _ in shipped.models)
    cost = ContextCost(120.0, 120.0, -0.006, slopes, (60.0, 400.0))
    model_set = replace(shipped, context_cost=cost)
    assert timing_at(model_set, 150) is not None
    assert timing_at(model_set, 800) is None  # at the span's edge: 1 + 280 · (−0.006) < 0
    n = run.prompts
    short = context_predictions(run, model_set, [150] * n)
    far = context_predictions(run, model_set, [800] * n)
    assert short and all(v["point"] > 0 for v in short.values())
    assert set(far) == set(short)
    assert all(v["point"] is None and "does not admit" in v["refused"] for v in far.values())
    # below the span: priced at its edge (60 tokens) wherever it is, counted, not extrapolated
    assert all(v["outside_span"] == 0 for v in short.values())
    below = context_predictions(run, model_set, [1] * n)
    further = context_predictions(run, model_set, [20] * n)
    assert all(v["outside_span"] > 0 for v in below.values())
    assert [v["point"] for v in below.values()] == [v["point"] for v in further.values()]
    assert below != short


def test_a_pass_is_priced_at_a_context_by_its_models_slope():
    from dataclasses import replace
    from pathlib import Path

    from ewif.files import results as results_io
    from ewif.files.context_cost import ContextCost
    from realrun.run_context import pass_seconds_at

    run = results_io.load(Path(__file__).parents[2] / "realrun/data/cpu_results_smollm2.json")
    shipped = ModelSet.from_dict(run.metadata["model_set"], "run")
    name = shipped.models[0]
    grid = shipped.metadata["timing"][name]
    unit = shipped.metadata["ar_seconds_per_token"]
    slopes = tuple(np.full(len(c), 0.002 * (i == 0)) for i, c in enumerate(shipped.cost_curve))
    model_set = replace(shipped, context_cost=ContextCost(120.0, 120.0, 0.0, slopes, (60.0, 400.0)))
    at_mean = float(np.interp(2, grid["m"], grid["seconds"]))
    assert pass_seconds_at(model_set, name, 2, 120.0) == pytest.approx(at_mean)
    assert pass_seconds_at(model_set, name, 2, 320.0) == pytest.approx(at_mean + 200 * 0.002 * unit)
    # beyond the span: at its edge, never extrapolated
    assert pass_seconds_at(model_set, name, 2, 900.0) == pass_seconds_at(model_set, name, 2, 400.0)
    with pytest.raises(ValueError, match="context_cost"):
        pass_seconds_at(replace(shipped, context_cost=None), name, 2, 120.0)
