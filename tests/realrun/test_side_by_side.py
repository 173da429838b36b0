"""realrun.side_by_side on tiny models: every method lossless (greedy = AR token for token), the
results file valid, SWI from counted passes, Ctrl-C keeps finished prompts."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ewif.base.configuration import Configuration
from ewif.base.row_cost import max_row_step
from ewif.files import results as results_io
from realrun.ar import ar_timer
from realrun.baselines import hf_generate
from realrun.bigram import BigramTable
from realrun.hf_model import HFTokenModel
from realrun.maxgram import MaxGram
from realrun.measure import measure
from realrun.methods import Method, cascade_method, default_methods
from realrun.predictions import interval_coverage
from realrun.results_tables import format_results, wall_time_lines
from realrun.side_by_side import run_side_by_side
from realrun.tiny import EOS, PROMPT_TEXTS
from simulate.decoder.sampling import Decoding
from simulate.trace_replay import replay

NEW = 12


@pytest.fixture(scope="module")
def setup(tiny_models, tiny_tokenizer, tiny_prompts):
    models = {n: HFTokenModel(tiny_models[n].model, n) for n in ("target", "near", "draft")}
    models["mag"] = MaxGram(BigramTable.from_corpus(PROMPT_TEXTS, tiny_tokenizer))
    chain = [models[n] for n in ("target", "near", "draft", "mag")]
    ms = measure(
        chain,
        tiny_prompts[:2],
        max_new_tokens=NEW,
        leniences=(1.0, 3.0),
        max_m=4,
        repeats=2,
        warmup=1,
        progress=False,
    )
    return models, ms


@pytest.fixture(scope="module")
def results(setup, tiny_prompts):
    models, ms = setup
    methods = default_methods(ms, assistants=["near", "draft"], k_max=4)
    methods.append(
        cascade_method(
            "CSD 3-level l=3",
            "csd",
            ("target", "near", "draft", "mag"),
            [[2, 0, 0], [0, 2, 0], [0, 0, 3]],
            3.0,
        )
    )
    return run_side_by_side(
        methods,
        models,
        tiny_prompts,
        model_set=ms,
        max_new_tokens=NEW,
        eos_token_id=EOS,
        family="tiny",
        progress=False,
    )


def test_every_method_reproduces_greedy_ar(results):
    diff = results.metadata["outputs_differing_from_AR"]
    kinds = {m.kind for m in results.methods}
    assert kinds == {"autoregressive", "sd", "csd", "hf-assisted", "hf-prompt-lookup"}
    assert diff == {m.name: 0 for m in results.methods}


def test_results_file_round_trip_and_consistency(results, tmp_path):
    again = results_io.load(results_io.save(results, tmp_path / "r.json"))
    assert again == results
    ar = results.method("AR")
    assert ar.speedup == 1.0 and ar.swi == 1.0 and ar.mean_accepted_length == 1.0
    for m in results.methods:
        assert m.speedup == pytest.approx(m.tokens_per_s / ar.tokens_per_s)
        assert m.tokens == results.prompts * NEW or m.tokens <= results.prompts * NEW
        if m.kind in ("sd", "csd"):
            assert m.predicted_speedup > 0 and m.swi > 0
            assert 1.0 <= m.mean_accepted_length <= 1 + max(sum(r) for r in m.config["K"])
            curves = m.acceptance_by_position
            assert len(curves["measured"]) == len(curves["predicted"])
    assert "AR" in format_results(results)


@pytest.mark.parametrize("step", [0.0, 0.5])
def test_swi_is_recomputed_from_counted_passes(setup, tiny_prompts, step):
    models, ms = setup
    # no row step, or one of half what the drafter's curve admits (not the one measured)
    near = ms.index("near")
    steps = np.zeros(len(ms.models))
    steps[near] = step * max_row_step(ms.cost_curve[near], ms.row_cost[near])
    ms = dataclasses.replace(ms, row_step=steps)
    method = cascade_method("SD near", "sd", ("target", "near"), [[3]])
    res = run_side_by_side(
        [method], models, tiny_prompts[:1], model_set=ms, max_new_tokens=NEW, progress=False
    )
    # rerun by hand, counting passes the same way
    t, d = models["target"], models["near"]
    for x in (t, d):
        x.logits(tiny_prompts[0], 1)
        x.reset_counters()
    from simulate.decoder.cascade import CascadeDecoder

    out = CascadeDecoder([t, d], [[3]]).generate(tiny_prompts[0], NEW)
    # every pass priced at its own size m on the measured curve, the catch-up drafter's
    # less its row cost for every position that returned no logit row and its row step for
    # every one-row pass over m >= 2 positions
    curves = {x.name: ms.cost_curve[ms.index(x.name)] for x in (t, d)}
    assert all(m <= curves[x.name].size for x in (t, d) for m in x.pass_sizes)
    cost = sum(curves[x.name][m - 1] * count for x in (t, d) for m, count in x.pass_sizes.items())
    assert ms.catch_up[ms.index("near")] and ms.row_cost[ms.index("target")] == 0.0
    cost -= ms.row_cost[ms.index("near")] * (d.tokens_fed - sum(d.pass_rows.values()))
    if step:
        stepped = sum(c for m, c in d.pass_one_row.items() if m >= 2)
        assert stepped > 0
        cost -= ms.row_step[ms.index("near")] * stepped
    expected = len(out.tokens) * 1.0 / cost
    assert res.methods[0].swi == pytest.approx(expected)
    # the prediction is the exact EWIF of the generation the method made (Theorem FL)
    cascade = ms.to_cascade(("target", "near"), [[3]])
    assert res.metadata["generation_lengths"]["SD near"] == [len(out.tokens)]
    assert res.methods[0].predicted_speedup == pytest.approx(cascade.ewif(len(out.tokens)))
    # not the endless EWIF: the first step starts from the prefilled prompt and the last one
    # may pay for tokens it cannot keep (either way, depending on the timed costs)
    assert res.methods[0].predicted_speedup != pytest.approx(cascade.ewif(), rel=1e-9)


class _Interrupting:
    """A TokenModel wrapper that raises KeyboardInterrupt on its n-th call."""

    def __init__(self, inner, after):
        self.inner, self.after = inner, after
        self.name, self.vocab_size = inner.name, inner.vocab_size
        self.model = inner.model
        self.calls = 0
        self.passes = self.tokens_fed = 0

    def logits(self, tokens, n):
        self.calls += 1
        if self.calls == self.after:
            raise KeyboardInterrupt
        return self.inner.logits(tokens, n)

    def reset_counters(self):
        self.passes = self.tokens_fed = 0


def test_ctrl_c_keeps_the_prompts_every_method_finished(setup, tiny_prompts):
    models, ms = setup
    wrapped = dict(models, near=_Interrupting(models["near"], after=20))
    method = cascade_method("SD near", "sd", ("target", "near"), [[2]])
    res = run_side_by_side(
        [method], wrapped, tiny_prompts, model_set=ms, max_new_tokens=NEW, progress=False
    )
    assert res.metadata["interrupted"] is True
    assert 1 <= res.prompts < len(tiny_prompts)


def test_hf_baselines_match_plain_greedy(tiny_models, tiny_prompts):
    target, draft = tiny_models["target"].model, tiny_models["draft"].model
    for prompt in tiny_prompts:
        ar = hf_generate(target, prompt, NEW, EOS)
        assert hf_generate(target, prompt, NEW, EOS, assistant_model=draft).tokens == ar.tokens
        assert hf_generate(target, prompt, NEW, EOS, prompt_lookup_num_tokens=3).tokens == ar.tokens
        assert len(ar.tokens) <= NEW and ar.seconds >= 0 and ar.prefill_seconds >= 0


def test_the_ar_timer_decodes_from_the_targets_own_cache(tiny_models, tiny_prompts):
    """A timing round's AR takes the prompt's keys and values from the target's cache (no
    second prefill) and decodes what plain greedy decodes; a cache that does not hold the
    prompt is not used, and a prefilled cache of the wrong length is refused."""
    target = HFTokenModel(tiny_models["target"].model, "target")
    prompt = list(tiny_prompts[0])
    assert target.prefix_cache(prompt[:-1]) is None  # nothing cached yet
    target.logits([*prompt, 5, 7], 1)  # a round's context: the prompt and more
    copy = target.prefix_cache(prompt[:-1])
    assert copy is not None and copy.get_seq_length() == len(prompt) - 1
    assert target.prefix_cache([*prompt[:-2], (prompt[-2] + 1) % target.vocab_size]) is None
    plain = hf_generate(target.model, prompt, NEW, EOS)
    reused = hf_generate(target.model, prompt, NEW, EOS, prefilled=copy)
    assert reused.tokens == plain.tokens and target.cached_length == len(prompt) + 2
    tokens, seconds = ar_timer(target, Decoding(), EOS)(prompt, NEW)
    assert tokens == len(plain.tokens) and seconds > 0
    with pytest.raises(ValueError, match=r"prefilled must hold prompt\[:-1\]"):
        hf_generate(target.model, prompt[:-1], NEW, EOS, prefilled=target.prefix_cache(prompt[:-1]))


def test_bad_input(setup, tiny_prompts):
    models, ms = setup
    with pytest.raises(ValueError, match=r"upper[- ]triangular"):
        run_side_by_side(
            [cascade_method("bad", "csd", ("target", "near", "draft"), [[1, 0], [2, 1]])],
            models,
            tiny_prompts,
            model_set=ms,
            progress=False,
        )
    with pytest.raises(ValueError, match=r"shape \(2, 2\)"):
        cascade_method("bad", "csd", ("target", "near", "draft"), [[1]])
    with pytest.raises(ValueError, match="empty"):
        run_side_by_side(
            [Method("AR", "autoregressive", ("target",))],
            models,
            [tiny_prompts[0], []],
            model_set=ms,
            progress=False,
        )
    with pytest.raises(ValueError, match="not loaded"):
        run_side_by_side(
            [Method("AR", "autoregressive", ("ghost",))],
            models,
            tiny_prompts,
            model_set=ms,
            progress=False,
        )
    with pytest.raises(ValueError, match="greedy only"):
        run_side_by_side(
            [Method("PL", "hf-prompt-lookup", ("target",), k=3)],
            models,
            tiny_prompts,
            model_set=ms,
            decoding=Decoding(1.0),
            progress=False,
        )
    with pytest.raises(ValueError, match="kind"):
        Method("x", "beam", ("target",))
    assert np.isfinite(ms.cost).all()


def test_split_adds_up_to_the_wall_time_on_the_tiny_family(results):
    split = results.metadata["wall_time_split"]
    decoded = {m.name for m in results.methods if m.kind in ("sd", "csd")}
    assert decoded <= set(split)
    for name, b in split.items():
        parts = (
            b["pass_s"]
            + sum(b["call_overhead_s"].values())
            + sum(b["proposer_s"].values())
            + b["decoder_s"]
            + b["residual_s"]
        )
        assert parts == pytest.approx(b["wall_s"], rel=1e-12)
        method = results.method(name)
        assert b["wall_s"] == pytest.approx(method.seconds)
        counted = results.metadata["counted_passes"][name]
        for model, by_m in b["passes"].items():  # every counted pass was timed
            assert {m: v["count"] for m, v in by_m.items()} == counted[model]["by_m"]
            for v in by_m.values():
                assert v["median_s"] <= v["p90_s"] + 1e-15 and v["total_s"] > 0
        assert all(v >= 0 for v in b["call_overhead_s"].values())
        # tiny models make the decoder's glue relatively large; still well under the wall
        share = b["residual_share"]
        assert -0.01 < share < 0.5 and b["flagged"] == (abs(share) > 0.03)
    assert "wall" in format_results(results) and wall_time_lines(split)


def test_replay_predictions_are_reported(results, setup):
    """Every sd/csd method gets the trace replay's prediction and interval (the measuring
    prompts' traces travel in the model set)."""
    _, ms = setup
    replays = results.metadata["replay_predictions"]
    assert replays.keys() == {m.name for m in results.methods if m.kind in ("sd", "csd")}
    for name, v in replays.items():
        m = results.method(name)
        c = m.config
        point = replay(ms, c["models"], np.array(c["K"]), c["lenience"]).speedup
        assert v["point"] == pytest.approx(point, rel=1e-12)
        assert v["low"] <= v["point"] <= v["high"]
        assert v["inside"] == (v["low"] <= m.speedup <= v["high"])
    assert results.metadata["replay_coverage"] == interval_coverage(replays)
    assert "replaying the measuring traces predicts" in format_results(results)


@pytest.mark.parametrize("drafter", ["near", "mag"])
def test_replay_of_the_runs_own_prompts_is_its_swi(setup, tiny_prompts, drafter):
    """Replaying SD over the traces of the very prompts the run decodes reproduces the run
    pass for pass: its speed-up equals the run's SWI (every counted pass priced at its size,
    catch-up included) exactly."""
    models, ms = setup
    methods = [Method("AR", "autoregressive", ("target",))]
    methods.append(cascade_method("SD", "sd", ("target", drafter), [[3]]))
    res = run_side_by_side(
        methods, models, tiny_prompts[:2], model_set=ms, max_new_tokens=NEW, progress=False
    )
    assert res.metadata["replay_predictions"]["SD"]["point"] == pytest.approx(
        res.method("SD").swi, rel=1e-9
    )


def test_a_realrun_method_gives_its_configuration():
    m = cascade_method("CSD", "csd", ("t", "d", "e"), [[2, 1], [0, 3]], 3.0)
    assert m.configuration == Configuration(("t", "d", "e"), [[2, 1], [0, 3]], 3.0)
    with pytest.raises(ValueError, match="runs no cascade configuration"):
        Method("AR", "autoregressive", ("t",)).configuration  # noqa: B018
