"""Run a cascade and the baselines side by side on a prompt set; compare with ewif's prediction.

Methods (:class:`Method`) of one run, all greedy or all with one decoding, same prompts,
same ``max_new_tokens`` and EOS:

* ``autoregressive`` — the target alone through transformers' ``generate`` (the reference;
  with sampling, our decoder with an empty K, because transformers' sampler draws other
  random numbers; on the llama.cpp backend always our decoder with an empty K);
* ``sd`` — plain speculative decoding with one drafter and budget ``k`` (our
  :class:`~simulate.decoder.cascade.CascadeDecoder`, ``K = [[k]]``);
* ``csd`` — a cascade ``models``/``K``/``lenience`` (given, or recommended by
  :func:`ewif.search.recommendation.recommend` on the measured model set);
* ``hf-assisted`` / ``hf-prompt-lookup`` — transformers' assisted generation with a neural
  drafter, and prompt lookup decoding (:mod:`realrun.baselines`).

The prompts form the outer loop and the methods the inner one, rotated by one place per
prompt, so slow drifts of a shared machine's speed hit every method alike. Wall time of a
method excludes the prompt prefill of its models (caches are filled before the clock
starts; see :mod:`realrun.baselines` for transformers' methods), so the measured speed-up is
the steady-state decoding speed-up that EWIF predicts.

Reported per method (:mod:`ewif.files.results`): ``tokens_per_s`` = tokens / seconds over all
prompts; ``speedup`` against AR of the same run; ``predicted_speedup`` = ewif's exact EWIF
of the configuration for the measured α and pass costs; ``swi`` = tokens·c_0(1) / Σ over
counted passes of c_i(m) (less a catch-up drafter's row cost per position without a row) —
the standardized walltime improvement from the passes the run actually made, each priced
at its own size m (Max-Gram: every proposed token one pass at m = 1);
``mean_accepted_length`` = tokens per target step, bonus token included (vLLM's convention;
AR = 1); acceptance by draft position at the target,
measured ``P(position i exists and is accepted)`` (accepted count / target steps) next to
ewif's :meth:`~ewif.kernel.cascade.Cascade.acceptance_by_position`. Greedy runs also record, per
method, on how many prompts the output differs from AR's (0 expected: lossless), and
:func:`divergences` says where, with the target's logit gap.

Ctrl-C discards the current prompt's partial work and returns the prompts every method
finished (``metadata.interrupted``). ``metadata.counted_passes`` keeps, per sd/csd method and
model, the passes, the positions and the passes by size m counted, so a run can be re-priced
with another cost model; ``metadata.in_run_pass_seconds`` the mean and median wall time of
those passes by size m (the in-run cost curve, to set against the measured one);
``metadata.prediction_intervals`` the 90 % bootstrap prediction interval of every sd/csd
speed-up on the run's held-out prompts (resampling measuring prompts, plus the sampling of
as many held-out prompts, :mod:`ewif.predict.bootstrap`) with whether the measurement fell inside,
``metadata.interval_coverage`` the share that did; ``metadata.wall_time_split`` every
method's wall time split into passes, call overhead, proposers, the decoder's own work and
the residual (:mod:`realrun.books`; methods our decoder runs).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from tqdm.auto import tqdm

from ewif.base import validate
from ewif.files.model_set import ModelSet
from ewif.files.results import METHOD_KINDS, MethodResult, Results, with_speedups
from ewif.kernel.cascade import Cascade
from ewif.predict.bootstrap import LEVEL, prediction_intervals
from ewif.search import explain
from ewif.search.optimizer import optimize
from ewif.search.recommendation import Recommendation, recommend
from realrun import books
from realrun.ar import hf_reference
from realrun.baselines import hf_generate
from realrun.hf_model import HFTokenModel
from realrun.llamacpp_model import LlamaCppTokenModel
from simulate.decoder.cascade import CascadeDecoder, CascadeStats
from simulate.decoder.interface import Proposer
from simulate.decoder.sampling import Decoding
from simulate.trace_replay import replay

#: The real neural models (the term: :mod:`ewif.kernel.cascade`, "Terms"): they count their passes
#: (prefilled before the clock, priced per pass size).
_COUNTED = (HFTokenModel, LlamaCppTokenModel)


@dataclass(frozen=True)
class Method:
    """One decoding method: ``models`` (target first) and ``K``/``lenience`` for sd/csd;
    the assistant's name for hf-assisted (``models = (target, assistant)``); ``k`` draft
    tokens for hf-prompt-lookup."""

    name: str
    kind: str
    models: tuple[str, ...]
    K: tuple[tuple[int, ...], ...] = ()
    lenience: float = 1.0
    k: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in METHOD_KINDS:
            raise ValueError(
                f"method kind must be one of {', '.join(METHOD_KINDS)}, got {self.kind!r}"
            )
        if not self.models:
            raise ValueError(f"method {self.name!r} needs at least the target model")

    @property
    def config(self) -> dict:
        out: dict = {"models": list(self.models)}
        if self.kind in ("sd", "csd"):
            out.update(K=[list(r) for r in self.K], lenience=self.lenience)
        if self.k is not None:
            out["prompt_lookup_num_tokens"] = self.k
        return out


def cascade_method(
    name: str, kind: str, models: Sequence[str], K: object, lenience: float = 1.0
) -> Method:
    """An sd/csd :class:`Method` with K checked (:func:`ewif.base.validate.budget_matrix`)."""
    arr = validate.budget_matrix("K", K, len(models) - 1)
    return Method(
        name, kind, tuple(models), tuple(tuple(int(v) for v in r) for r in arr), float(lenience)
    )


def recommended_method(rec: Recommendation) -> Method:
    """The csd :class:`Method` of ewif's recommended configuration
    (:func:`ewif.search.recommendation.recommend`, the rule every command uses)."""
    best = rec.best
    lenience = f" l={best.lenience:g}" if best.K.shape[0] > 1 and best.K[1:].any() else ""
    name = f"CSD {'>'.join(best.models[1:])} {best.K.tolist()}{lenience}"
    return cascade_method(name, "csd", best.models, best.K, best.lenience)


def recommendation_record(rec: Recommendation) -> dict:
    """What a results file keeps of a recommendation: the decision, the configuration by its
    method name, its exact EWIF, a one-line statement and the review sizes it uses."""
    method = recommended_method(rec)
    describe = (
        f"recommended: {method.name} at {rec.ewif:.3f}x (ewif)"
        if rec.decision == "speculative"
        else explain.autoregressive_line(method.name, rec.ewif)
    )
    return {
        "decision": rec.decision,
        "best_speculative": method.name,
        "config": method.config,
        "predicted_ewif": rec.ewif,
        "describe": describe,
        "review_sizes": explain.review_sizes(rec.cascade()),
    }


def best_sd_method(model_set: ModelSet, drafter: str, k_max: int = 12) -> Method:
    """Plain SD with ``drafter`` at its ewif-optimal ``k ∈ 1..k_max``."""
    target = model_set.models[0]
    best = optimize(
        model_set, candidates=(target, drafter), bounds=(1, k_max), leniences=(1.0,), subsets=False
    ).best
    k = int(best.K[0, 0])
    return cascade_method(f"SD {drafter} k={k}", "sd", (target, drafter), [[k]])


def default_methods(
    model_set: ModelSet,
    assistants: Sequence[str],
    *,
    csd: Method | None = None,
    k_max: int = 12,
    prompt_lookup_k: int = 10,
) -> list[Method]:
    """AR, SD with each drafter (best k), the CSD (given or recommended), HF assisted with
    each drafter in ``assistants`` (models loaded through transformers), HF prompt lookup.
    An SD identical to the CSD (a recommendation can be a single drafter) is listed once,
    as the CSD."""
    target = model_set.models[0]
    csd = csd if csd is not None else recommended_method(recommend(model_set, k_max=k_max))
    methods = [Method("AR", "autoregressive", (target,))]
    methods += [
        sd
        for sd in (best_sd_method(model_set, d, k_max) for d in model_set.models[1:])
        if (sd.models, sd.K) != (csd.models, csd.K)
    ]  # the CSD may be a plain SD
    methods.append(csd)
    methods += [
        Method(f"HF assisted {d}", "hf-assisted", (target, d))
        for d in model_set.models[1:]
        if d in assistants
    ]
    methods.append(
        Method(
            f"HF prompt lookup k={prompt_lookup_k}",
            "hf-prompt-lookup",
            (target,),
            k=prompt_lookup_k,
        )
    )
    return methods


@dataclass(frozen=True)
class PromptRun:
    """What one method did on one prompt: its output ``tokens`` and decoding ``seconds``;
    ``weighted_cost``, the standardized cost of its counted passes (each priced at its size
    m), and ``counted``, those passes by size m per model; our decoder's ``stats`` and every
    neural model's ``pass_seconds`` by size m (None and empty for transformers' ``generate``,
    which counts nothing)."""

    tokens: list[int]
    seconds: float
    weighted_cost: float = 0.0
    counted: dict[str, Counter[int]] = field(default_factory=dict)
    counted_rows: dict[str, Counter[int]] = field(default_factory=dict)
    stats: CascadeStats | None = None
    pass_seconds: dict[str, dict[int, list[float]]] = field(default_factory=dict)


@dataclass
class MethodTally:
    """Accumulated measurements of one method of a run (what :func:`divergences` reads)."""

    tokens: int = 0
    seconds: float = 0.0
    weighted_cost: float = 0.0
    counted: dict[str, Counter[int]] = field(default_factory=dict)  # model -> passes by m
    counted_rows: dict[str, Counter[int]] = field(default_factory=dict)  # -> their logit rows
    pass_seconds: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    stats: CascadeStats | None = None
    outputs: list[list[int]] = field(default_factory=list)

    def add(self, run: PromptRun) -> None:
        """Add one prompt's run."""
        self.tokens += len(run.tokens)
        self.seconds += run.seconds
        self.weighted_cost += run.weighted_cost
        for model, sizes in run.counted.items():
            self.counted.setdefault(model, Counter()).update(sizes)
        for model, rows in run.counted_rows.items():
            self.counted_rows.setdefault(model, Counter()).update(rows)
        for model, by_m in run.pass_seconds.items():
            for size, values in by_m.items():
                self.pass_seconds.setdefault(model, {}).setdefault(size, []).extend(values)
        self.outputs.append(run.tokens)
        if run.stats is not None:
            self.stats = run.stats if self.stats is None else self.stats + run.stats


def run_side_by_side(
    methods: Sequence[Method],
    models: Mapping[str, HFTokenModel | Proposer],
    prompts: Sequence[Sequence[int]],
    *,
    model_set: ModelSet,
    max_new_tokens: int = 64,
    eos_token_id: int | None = None,
    decoding: Decoding | None = None,
    device: str = "cpu",
    family: str = "",
    seed: int = 0,
    progress: bool = True,
) -> Results:
    """Run every method on every prompt (token-id lists) and compare (module docstring)."""
    decoding = Decoding() if decoding is None else decoding
    max_new_tokens = validate.count("max_new_tokens", max_new_tokens, minimum=1)
    prompts = validate.prompts("prompts", prompts)
    methods = list(methods)
    _check_methods(methods, models, model_set, decoding)
    tallies = {m.name: MethodTally() for m in methods}
    done = 0
    interrupted = False
    bar = tqdm(
        total=len(prompts) * len(methods), desc="csd realrun", unit="run", disable=not progress
    )
    try:
        for i, prompt in enumerate(prompts):
            order = methods[i % len(methods) :] + methods[: i % len(methods)]
            partial = {}
            for m in order:
                partial[m.name] = _run_one(
                    m, models, model_set, prompt, max_new_tokens, eos_token_id, decoding, seed + i
                )
                bar.update(1)
            for name, run in partial.items():  # a prompt counts only once every method ran it
                tallies[name].add(run)
            done += 1
    except KeyboardInterrupt:
        interrupted = True
    finally:
        bar.close()
    if done == 0:
        raise KeyboardInterrupt
    results = _results(
        methods, tallies, model_set, done, max_new_tokens, decoding, device, family, interrupted
    )
    if decoding.greedy and ar_name(methods) is not None:
        target = models[methods[0].models[0]]
        found = divergences(target, prompts[:done], tallies, ar_name(methods))
        results.metadata["divergences"] = found
    return results


def _check_methods(
    methods: list[Method],
    models: Mapping[str, HFTokenModel | Proposer],
    model_set: ModelSet,
    decoding: Decoding,
) -> None:
    """Before any work: every method's models loaded and described by the model set, sd/csd
    configurations valid (K, lenience, measured alphas), transformers' methods greedy and on
    transformers models."""
    if not methods:
        raise ValueError("methods must hold at least one method")
    for m in methods:
        for name in m.models:
            if name not in models:
                raise ValueError(
                    f"method {m.name!r} uses model {name!r}, which is not loaded; "
                    f"loaded: {sorted(models)}"
                )
            if name not in model_set.models:
                raise ValueError(
                    f"method {m.name!r} uses model {name!r}, which the model set "
                    f"does not describe; it has {list(model_set.models)}"
                )
        if m.kind in ("sd", "csd"):
            model_set.to_cascade(m.models, np.array(m.K), m.lenience)
        if m.kind.startswith("hf-") and not decoding.greedy:
            raise ValueError(
                f"method {m.name!r} ({m.kind}) is run greedy only; use temperature 0 or drop it"
            )
        if m.kind.startswith("hf-"):
            for name in m.models:
                if not isinstance(models[name], HFTokenModel):
                    raise ValueError(
                        f"method {m.name!r} needs a transformers model, but "
                        f"{name!r} is {type(models[name]).__name__}"
                    )


def ar_name(methods: Sequence[Method]) -> str | None:
    """The name of the run's autoregressive method (None when it has none)."""
    return next((m.name for m in methods if m.kind == "autoregressive"), None)


def divergences(
    target, prompts: Sequence[list[int]], tallies: Mapping[str, MethodTally], ar: str
) -> list[dict]:
    """Where a greedy method's output first differs from AR's, with the target's logit gap
    ``z[AR token] − z[method token]`` on AR's prefix (a near-tie has a gap of the order of
    the dtype's rounding; ``None`` when one output ends there)."""
    out = []
    reference = tallies[ar].outputs
    for name, tally in tallies.items():
        for i, (got, want) in enumerate(zip(tally.outputs, reference, strict=False)):
            if got == want:
                continue
            t = next(
                (p for p, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
                min(len(got), len(want)),
            )
            gap = None
            if t < min(len(got), len(want)):
                z = np.asarray(target.logits(prompts[i] + want[:t], 1)[0], dtype=np.float64)
                gap = float(z[want[t]] - z[got[t]])
            out.append(
                {
                    "method": name,
                    "prompt": i,
                    "position": t,
                    "ar_token": want[t] if t < len(want) else None,
                    "method_token": got[t] if t < len(got) else None,
                    "logit_gap": gap,
                }
            )
    return out


def _run_one(
    m: Method,
    models: Mapping[str, HFTokenModel | Proposer],
    model_set: ModelSet,
    prompt: list[int],
    max_new_tokens: int,
    eos: int | None,
    decoding: Decoding,
    seed: int,
) -> PromptRun:
    """One method on one prompt: transformers' ``generate`` (AR when greedy on transformers,
    the hf- baselines) or our decoder, its passes counted and priced (:func:`_priced`)."""
    target = models[m.models[0]]
    if m.kind.startswith("hf-") or (m.kind == "autoregressive" and hf_reference(target, decoding)):
        assistant = models[m.models[1]].model if m.kind == "hf-assisted" else None
        g = hf_generate(
            target.model,
            prompt,
            max_new_tokens,
            eos,
            assistant_model=assistant,
            prompt_lookup_num_tokens=m.k,
        )
        return PromptRun(g.tokens, g.seconds)
    chain = [models[name] for name in m.models]
    decoder = CascadeDecoder(chain, np.array(m.K, dtype=np.int64), m.lenience, decoding, seed)
    neural = [x for x in chain if isinstance(x, _COUNTED)]
    run = _decode(decoder, neural, prompt, max_new_tokens, eos)
    return _priced(run, m, chain, model_set)


def _decode(
    decoder: CascadeDecoder, neural: list, prompt: list[int], max_new_tokens: int, eos: int | None
) -> PromptRun:
    """``decoder`` on one prompt: the prompt prefilled outside the clock, every ``neural``
    model's pass times recorded by size m (the in-run cost curve); Ctrl-C is re-raised."""
    for x in neural:  # prefill outside the clock
        x.logits(prompt, 1)
        x.reset_counters()
    pass_seconds: dict[str, dict[int, list[float]]] = {x.name: {} for x in neural}
    hooks = [x.timing_hook for x in neural]
    for x in neural:  # every pass's wall time by its size m
        x.timing_hook = lambda fed, s, seen=pass_seconds[x.name]: seen.setdefault(fed, []).append(s)
    try:
        start = time.perf_counter()
        res = decoder.generate(prompt, max_new_tokens, eos)
        seconds = time.perf_counter() - start
    finally:
        for x, hook in zip(neural, hooks, strict=True):
            x.timing_hook = hook
    if res.stop_reason == "interrupted":
        raise KeyboardInterrupt
    return PromptRun(res.tokens, seconds, stats=res.stats, pass_seconds=pass_seconds)


def _priced(
    run: PromptRun, m: Method, chain: list[HFTokenModel | Proposer], model_set: ModelSet
) -> PromptRun:
    """``run`` with its counted passes by size m and their standardized cost: a neural
    model's passes as it counted them, each priced at its size (a catch-up drafter's less
    its row cost for every position that returned no logit row, :mod:`ewif.kernel.pass_cost`); a
    proposer's every proposed token one generating pass (m = 1)."""
    prices = model_set.pass_cost
    cost, counted, rows = 0.0, {}, {}
    for i, (name, x) in enumerate(zip(m.models, chain, strict=True)):
        j = model_set.index(name)
        if isinstance(x, _COUNTED):
            counted[name] = Counter(x.pass_sizes)
            rows[name] = Counter(x.pass_rows)
            sizes = np.array(sorted(x.pass_sizes))
            if sizes.size:
                cost += float(np.asarray(prices.at(j, sizes)) @ [x.pass_sizes[s] for s in sizes])
            if model_set.catch_up is not None and model_set.catch_up[j]:
                rowless = x.tokens_fed - sum(x.pass_rows.values())
                cost -= float(prices.row_cost[j]) * rowless
        else:
            counted[name] = Counter({1: int(run.stats.tokens_fed[i])})
            cost += float(run.stats.tokens_fed[i] * prices.at(j, 1))
    return replace(run, weighted_cost=cost, counted=counted, counted_rows=rows)


def _results(
    methods: list[Method],
    tallies: Mapping[str, MethodTally],
    model_set: ModelSet,
    done: int,
    max_new_tokens: int,
    decoding: Decoding,
    device: str,
    family: str,
    interrupted: bool,
) -> Results:
    """The run's :class:`~ewif.files.results.Results`: one :class:`MethodResult` per method and the
    metadata of the module docstring."""
    ar = ar_name(methods)
    ar_out = tallies[ar].outputs if ar is not None else None
    out, mismatches, in_run = [], {}, {}
    lengths = {m.name: [len(o) for o in tallies[m.name].outputs] for m in methods}
    for m in methods:
        t = tallies[m.name]
        cascade = None
        if m.kind in ("sd", "csd"):
            cascade = model_set.to_cascade(m.models, np.array(m.K), m.lenience)
            if t.stats is not None and t.stats.target_steps:
                in_run[m.name] = ewif_with_run_acceptance(cascade, t.stats, lengths[m.name])
        out.append(_method_result(m, t, model_set.pass_cost.unit, cascade, lengths[m.name]))
        if ar_out is not None and decoding.greedy:
            mismatches[m.name] = sum(a != b for a, b in zip(t.outputs, ar_out, strict=True))
    metadata = {
        "interrupted": interrupted,
        "timing": "decoding wall time; prompt prefill excluded (see realrun.side_by_side)",
        "mean_accepted_length": "tokens per target step, bonus token included (vLLM)",
        "outputs_differing_from_AR": mismatches,
        "accepted_token_sources": {
            m.name: dict(st.sources)
            for m in methods
            if (st := tallies[m.name].stats) is not None and st.sources
        },
        "counted_passes": _counted_passes(methods, tallies),
        "in_run_pass_seconds": _in_run_pass_seconds(methods, tallies),
        "wall_time_split": _wall_time_split(methods, tallies),
        "model_set": model_set.to_dict(),
        "generation_lengths": lengths,
    }
    results = Results(
        device=device,
        family=family,
        prompts=done,
        max_new_tokens=max_new_tokens,
        decoding={"temperature": decoding.temperature, "top_p": decoding.top_p},
        methods=with_speedups(out),
        metadata=metadata,
    )
    metadata["prediction_with_run_acceptance"] = {
        m.name: {"ewif": in_run[m.name], "error": abs(in_run[m.name] / m.speedup - 1.0)}
        for m in results.methods
        if m.name in in_run and m.speedup
    }
    if model_set.bootstrap is not None:
        intervals = method_intervals(results, model_set)
        metadata["prediction_intervals"] = intervals
        metadata["interval_coverage"] = interval_coverage(intervals)
        if model_set.bootstrap.acceptance_traces is not None:
            replays = replay_predictions(results, model_set)
            metadata["replay_predictions"] = replays
            metadata["replay_coverage"] = interval_coverage(replays)
    return results


def _method_result(
    m: Method, t: MethodTally, unit: float, cascade: Cascade | None, lengths: list[int]
) -> MethodResult:
    """What ``m`` measured (``t``) next to what ewif predicts for it (``cascade``, sd/csd, on
    generations of the ``lengths`` it made, Theorem FL); ``unit``: the standardized cost of
    one autoregressive target token."""
    predicted = swi = mal = curves = None
    if m.kind == "autoregressive":
        predicted, swi, mal = 1.0, 1.0, 1.0
    elif cascade is not None:
        predicted = float(cascade.ewif(lengths))
        swi = t.tokens * unit / t.weighted_cost if t.weighted_cost > 0 else None
        if t.stats is not None and t.stats.target_steps:
            mal = float(t.stats.mean_accepted_length)
            accepted = t.stats.target_position_counts[1]
            if accepted.size:
                curves = {
                    "measured": (accepted / t.stats.target_steps).tolist(),
                    "predicted": cascade.acceptance_by_position(accepted.size).tolist(),
                }
    return MethodResult(
        name=m.name,
        kind=m.kind,
        tokens_per_s=t.tokens / t.seconds if t.seconds > 0 else 0.0,
        speedup=None,
        predicted_speedup=predicted,
        swi=swi,
        mean_accepted_length=mal,
        acceptance_by_position=curves,
        config=m.config,
        tokens=t.tokens,
        seconds=t.seconds,
    )


def _counted_passes(methods: list[Method], tallies: Mapping[str, MethodTally]) -> dict:
    """``metadata.counted_passes``: per method and model, passes, positions and passes by m."""
    return {
        m.name: {
            k: {
                "passes": v.total(),
                "positions": sum(s * c for s, c in v.items()),
                "by_m": {str(s): c for s, c in sorted(v.items())},
            }
            for k, v in tallies[m.name].counted.items()
        }
        for m in methods
        if tallies[m.name].counted
    }


def _in_run_pass_seconds(methods: list[Method], tallies: Mapping[str, MethodTally]) -> dict:
    """``metadata.in_run_pass_seconds``: per method, model and size m, the passes, their
    mean and median wall time and the mean logit rows they returned."""
    out = {}
    for m in methods:
        t = tallies[m.name]
        if not t.pass_seconds:
            continue
        out[m.name] = {
            model: {
                str(size): {
                    "passes": len(v),
                    "mean_s": float(np.mean(v)),
                    "median_s": float(np.median(v)),
                    "rows": t.counted_rows[model][size] / t.counted[model][size],
                }
                for size, v in sorted(by_m.items())
            }
            for model, by_m in t.pass_seconds.items()
        }
    return out


def _wall_time_split(methods: list[Method], tallies: Mapping[str, MethodTally]) -> dict:
    """``metadata.wall_time_split``: the books of every method our decoder ran
    (:func:`realrun.books.split`)."""
    return {
        m.name: books.split(
            t.seconds,
            m.models,
            [name in t.pass_seconds for name in m.models],
            t.pass_seconds,
            t.stats.call_seconds,
            t.stats.decode_seconds,
        ).to_dict()
        for m in methods
        if (t := tallies[m.name]).stats is not None and t.stats.call_seconds
    }


def method_intervals(results: Results, model_set: ModelSet) -> dict[str, dict]:
    """Per sd/csd method: the 90 % bootstrap prediction interval of the speed-up measured on
    the run's ``results.prompts`` held-out prompts
    (:func:`ewif.predict.bootstrap.prediction_intervals` with ``held_out_prompts``, one set of
    replicates for all) and whether the measured speed-up fell in it."""
    chosen = [m for m in results.methods if m.kind in ("sd", "csd") and m.speedup is not None]
    configs = [
        (m.config["models"], np.array(m.config["K"]), m.config["lenience"], None) for m in chosen
    ]
    lengths = [method_lengths(results, m.name) for m in chosen]
    return {
        m.name: {
            "point": iv.point,
            "low": iv.low,
            "high": iv.high,
            "level": iv.level,
            "held_out_prompts": results.prompts,
            "inside": iv.contains(m.speedup),
        }
        for m, iv in zip(
            chosen,
            prediction_intervals(
                model_set, configs, held_out_prompts=results.prompts, max_new_tokens=lengths
            ),
            strict=True,
        )
    }


def replay_predictions(results: Results, model_set: ModelSet, replays: int = 10) -> dict:
    """Per sd/csd method: the speed-up that replaying it over the measuring prompts' acceptance
    traces predicts (:func:`simulate.trace_replay.replay`; sampling traces ``replays`` times
    per prompt), its 90 % prediction interval for the run's held-out prompts, whether the
    measurement fell inside and the error ``|replay/measured − 1|``."""
    greedy = results.decoding.get("temperature", 0.0) == 0.0
    out = {}
    for m in results.methods:
        if m.kind not in ("sd", "csd") or not m.speedup:
            continue
        c = m.config
        found = replay(
            model_set,
            c["models"],
            np.array(c["K"]),
            c["lenience"],
            repeats=1 if greedy else replays,
        )
        low, high = found.interval(held_out_prompts=results.prompts)
        out[m.name] = {
            "point": found.speedup,
            "low": low,
            "high": high,
            "level": LEVEL,
            "held_out_prompts": results.prompts,
            "inside": low <= m.speedup <= high,
            "error": abs(found.speedup / m.speedup - 1.0),
        }
    return out


def method_lengths(results: Results, name: str) -> list[int]:
    """The lengths of the generations method ``name`` made, one per prompt: the run's
    ``metadata.generation_lengths``; a run that did not record them (before Theorem FL)
    gets the most even split of the method's token total over its prompts (the overshoot
    cost is nearly the same per generation, so the split hardly moves the prediction)."""
    recorded = results.metadata.get("generation_lengths", {}).get(name)
    if recorded is not None:
        return [int(n) for n in recorded]
    tokens = results.method(name).tokens
    base, extra = divmod(int(tokens), results.prompts)
    return [base + 1] * extra + [base] * (results.prompts - extra)


def interval_coverage(intervals: Mapping[str, Mapping]) -> float | None:
    """The share of :func:`method_intervals` whose measurement fell inside (None if none)."""
    inside = [v["inside"] for v in intervals.values()]
    return sum(inside) / len(inside) if inside else None


def ewif_with_run_acceptance(
    cascade: Cascade, stats: CascadeStats, lengths: Sequence[int] | None = None
) -> float:
    """The exact EWIF of ``cascade`` (on generations of ``lengths``, Theorem FL; endless
    when None) with every acceptance rate the run observed (``stats.acceptance(r, j)``, the
    in-run ``accepted / reviewed`` of each pair) in place of the measured α: what the cost
    model alone predicts, so that ``|this/measured − 1|`` isolates the cost model's error
    from the sampling error of α between prompt splits."""
    alpha = np.array(cascade.alpha)
    for (r, j), (reviewed, _) in stats.reviews.items():
        if reviewed:
            alpha[r, j] = stats.acceptance(r, j)
    return float(cascade.with_alpha(alpha).ewif(lengths))
