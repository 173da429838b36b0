"""Run a cascade and the baselines side by side on a prompt set; compare with ewif's prediction.

The methods (:mod:`realrun.methods`) run greedy or all with one decoding, on the same
prompts with the same ``max_new_tokens`` and EOS. The prompts form the outer loop and the
methods the inner one, rotated by one place per prompt, so slow drifts of a shared
machine's speed hit every method alike. Wall time of a method excludes the prompt prefill
of its models (caches are filled before the clock starts; see :mod:`realrun.baselines` for
transformers' methods), so the measured speed-up is the steady-state decoding speed-up that
EWIF predicts. Every pass our decoder's neural models make is counted by its size m and
priced (:func:`_priced`); what the run records from these tallies, next to ewif's
predictions, is :mod:`realrun.run_record`. Greedy runs also record where a method's output
first differs from AR's (:func:`divergences`, with the target's logit gap).

Ctrl-C discards the current prompt's partial work and returns the prompts every method
finished (``metadata.interrupted``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
from tqdm.auto import tqdm

from ewif.base import validate
from ewif.files.model_set import ModelSet
from ewif.files.results import Results
from realrun.ar import hf_reference
from realrun.baselines import hf_generate
from realrun.hf_model import HFTokenModel
from realrun.llamacpp_model import LlamaCppTokenModel
from realrun.methods import Method, ar_name
from realrun.run_record import run_results
from realrun.tally import MethodTally, PromptRun
from realrun.tree_methods import method_cascade, tree_decoder
from simulate.decoder.cascade import CascadeDecoder
from simulate.decoder.interface import Proposer
from simulate.decoder.sampling import Decoding

#: The real neural models (the term: :mod:`ewif.kernel.cascade`, "Terms"): they count their passes
#: (prefilled before the clock, priced per pass size).
_COUNTED = (HFTokenModel, LlamaCppTokenModel)


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
    results = run_results(
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
            method_cascade(model_set, m)
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
    decoder = tree_decoder(m, chain, decoding, seed)
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
    its row cost for every position that returned no logit row and its row step for every
    one-row pass over ``m >= 2`` positions, :mod:`ewif.kernel.pass_cost`); a
    proposer's every proposed token one generating pass (m = 1)."""
    prices = model_set.pass_cost
    cost, counted, rows, ones, contexts = 0.0, {}, {}, {}, {}
    for i, (name, x) in enumerate(zip(m.models, chain, strict=True)):
        j = model_set.index(name)
        if isinstance(x, _COUNTED):
            counted[name] = Counter(x.pass_sizes)
            rows[name] = Counter(x.pass_rows)
            ones[name] = Counter(x.pass_one_row)
            contexts[name] = Counter(x.pass_context)
            sizes = np.array(sorted(x.pass_sizes))
            if sizes.size:
                cost += float(np.asarray(prices.at(j, sizes)) @ [x.pass_sizes[s] for s in sizes])
            if model_set.catch_up is not None and model_set.catch_up[j]:
                rowless = x.tokens_fed - sum(x.pass_rows.values())
                cost -= float(prices.row_cost[j]) * rowless
                stepped = sum(c for fed, c in x.pass_one_row.items() if fed >= 2)
                cost -= float(prices.row_step[j]) * stepped
        else:
            counted[name] = Counter({1: int(run.stats.tokens_fed[i])})
            cost += float(run.stats.tokens_fed[i] * prices.at(j, 1))
    return replace(
        run,
        weighted_cost=cost,
        counted=counted,
        counted_rows=rows,
        counted_one_row=ones,
        counted_context=contexts,
    )
