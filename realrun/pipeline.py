"""The real-model pipeline as a library: load → choose numerics → measure → recommend → run.

:func:`realrun` is what ``csd realrun`` and ``benchmarks/realrun_cpu.py`` call; it takes plain
arguments (model sources, prompt set, options) and returns :class:`ewif.files.results.Results`.

Held-out calibration. The prompts are split: the first ``measure_prompts`` are the
*measuring* split (α, cost curves, numerics), the next ``limit`` the *held-out* split on
which every method runs. The predictions are therefore tested on prompts they never saw.

Numerics (``dtype="auto"``/``threads="auto"`` on a CPU): chosen by measurement on the
measuring split, :mod:`realrun.numerics`. Families and backends: :mod:`realrun.family`.

Token trees (``trees=True``): the exact tree search (:func:`ewif.search.tree_search.
optimize_trees`) on the measured set, with its rank-acceptance vectors; its recommended
configuration, its best tree and its best chain join the methods (:mod:`realrun.tree_methods`),
``metadata.tree_recommendation`` records what it decided, and ``metadata.tree_pass_timing``
how tree-shaped passes compare with the chain passes the curves price
(:mod:`realrun.tree_timing`, timed on the measuring prompts before the run).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from dataclasses import replace
from functools import partial

import numpy as np
import torch

from ewif.base import validate
from ewif.files.model_set import ModelSet
from ewif.files.results import Results
from ewif.search.recommendation import Recommendation, recommend
from ewif.search.tree_search import TreeBounds, TreeSearchResult
from realrun.books import ar_agreement, timing_agreement
from realrun.categories import with_categories
from realrun.family import Family, load_family, set_threads
from realrun.measure import MIN_TIMING_SECONDS
from realrun.methods import (
    Method,
    cascade_method,
    decide_recommendation,
    default_methods,
    recommendation_record,
    recommended_method,
)
from realrun.numerics import measure_numerics
from realrun.numerics_choice import DEFAULT_CHOICE
from realrun.predictions import method_lengths
from realrun.prompts import Prompt, categories, encode, load_prompts, stratified
from realrun.run_context import context_predictions, pass_seconds_at, run_context, timing_at
from realrun.side_by_side import run_side_by_side
from realrun.tree_methods import tree_methods, tree_record, tree_search
from realrun.tree_timing import tree_pass_timing
from simulate.decoder.sampling import Decoding

_CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_fp16")


def split_prompts(
    prompts: str,
    measure_prompts: int,
    limit: int | None,
    *,
    held_out: bool = True,
    held_out_categories: Sequence[str] = (),
) -> tuple[list[Prompt], list[Prompt]]:
    """(measuring split, held-out split), stratified by category: the set dealt round-robin
    over its categories (:func:`realrun.prompts.stratified`; ``all`` and ``classic`` are
    dealt so already), its first ``measure_prompts`` prompts measuring, the next ``limit``
    held out (all remaining when None). ``held_out_categories`` leave whole categories out
    of the measuring split: the measuring split is dealt from the other categories, the
    held-out split from everything left, those categories included (a check of predictions
    on kinds of text the measurement never saw). With ``held_out`` the held-out split must
    be non-empty."""
    k = validate.count("measure_prompts", measure_prompts, minimum=1)
    every = stratified(load_prompts(prompts))
    present = categories(every)
    left_out = set(held_out_categories)
    unknown = sorted(left_out - set(present))
    if unknown:
        raise ValueError(
            f"held-out categories {unknown} are not in the prompt set {prompts!r}; "
            f"its categories: {', '.join(present)}"
        )
    pool = [p for p in every if p.kind not in left_out]
    if not pool:
        raise ValueError(
            f"held-out categories {sorted(left_out)} leave no prompt of {prompts!r} to measure on"
        )
    measuring = pool[:k]
    chosen = {id(p) for p in measuring}
    rest = stratified([p for p in every if id(p) not in chosen])
    held = rest if limit is None else rest[: validate.count("limit", limit, minimum=1)]
    if held_out and not held:
        raise ValueError(
            f"the prompt set {prompts!r} has {len(every)} prompts: none is left "
            f"for the held-out split after the {len(measuring)} measuring prompts"
        )
    return measuring, held


def cpu_description() -> dict:
    """The CPU as the results file records it: model name, cores, the instruction-set flags
    that decide dtype speed, and torch's detected capability."""
    flags: set[str] = set()
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    return {
        "model": model,
        "cores": os.cpu_count(),
        "flags": [f for f in _CPU_FLAGS if f in flags],
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch": torch.__version__,
    }


def run_pipeline(
    sources: Sequence[str],
    *,
    mag: bool = False,
    bigram: str | None = None,
    names: Sequence[str] | None = None,
    prompts: str = "all",
    measure_prompts: int = 4,
    limit: int | None = None,
    max_new_tokens: int = 32,
    decoding: Decoding | None = None,
    device: str = "auto",
    dtype: str = "auto",
    threads: int | str = "auto",
    k_max: int = 12,
    batch_invariance: str = "strict",
    numerics_choice: str = DEFAULT_CHOICE,
    leniences: Sequence[float] = (1.0, 2.0, 3.0, 5.0),
    model_set: ModelSet | None = None,
    K: object | None = None,
    lenience: float = 1.0,
    baselines: bool = True,
    family_label: str | None = None,
    progress: bool = True,
    backend: str = "transformers",
    held_out_categories: Sequence[str] = (),
    trees: bool = False,
    tree_bounds: TreeBounds | None = None,
    min_timing_seconds: float = MIN_TIMING_SECONDS,
) -> Results:
    """Measure on the measuring split (or take ``model_set``), recommend, and run every
    method on the held-out split (module docstring). ``K``/``lenience`` give the cascade
    instead of the recommendation (``K`` over all models, target first). ``backend``: see
    :func:`load_family`; on llama.cpp the transformers baselines (hf-*) are left out and AR
    is the cascade decoder with the target alone. ``held_out_categories``: categories left
    out of the measuring split (:func:`split_prompts`); a measured model set carries α per
    category (:func:`realrun.categories.with_categories`). ``batch_invariance`` is the numerics
    search's rule (``strict`` or ``near-ties``, :mod:`realrun.invariance`), ``numerics_choice``
    its ranking (``assured`` or ``mean``, :mod:`realrun.numerics_choice`). ``trees``: add the
    tree search's methods (module docstring; ``tree_bounds`` its bounds, default budgets
    ``0..min(k_max, 8)``). ``min_timing_seconds``: the cost curves' rounds are extended
    while they took less (:func:`realrun.timing.time_family`, *Rounds by time*)."""
    decoding = Decoding() if decoding is None else decoding
    measuring, held = split_prompts(
        prompts, measure_prompts, limit, held_out_categories=held_out_categories
    )
    load = dict(mag=mag, bigram=bigram, device=device, dtype=dtype, names=names, backend=backend)
    family, model_set = _measured_or_loaded(
        sources,
        measuring,
        model_set,
        threads,
        load,
        max_new_tokens=max_new_tokens,
        leniences=leniences,
        decoding=decoding,
        k_max=k_max,
        batch_invariance=batch_invariance,
        numerics_choice=numerics_choice,
        progress=progress,
        min_timing_seconds=min_timing_seconds,
    )
    csd, rec = _cascade_to_run(family.names, model_set, K, lenience, k_max)
    decided = None if rec is None else decide_recommendation(model_set, rec, numerics_choice)
    record = None if rec is None else recommendation_record(rec, decided)
    methods = _methods_to_run(model_set, family, csd, k_max, baselines, decoding)
    tree_parts = None
    if trees:
        found = tree_search(model_set, k_max, tree_bounds)
        methods += tree_methods(found, methods)
        tree_parts = (found, tree_pass_timing(family, measuring, model_set, progress))
    ids = [encode(p, family.tokenizer) for p in held]
    label = family_label or " > ".join(family.names)
    results = _run_held_out(
        methods, family, ids, model_set, (max_new_tokens, decoding), label, progress
    )
    return _with_pipeline_metadata(
        results, model_set, family, (measuring, held, ids), held_out_categories, record, tree_parts
    )


def _run_held_out(
    methods: list[Method],
    family: Family,
    ids: list[list[int]],
    model_set: ModelSet,
    generation: tuple[int, Decoding],
    label: str,
    progress: bool,
) -> Results:
    """Every method on the held-out prompts ``ids``, side by side, each generating up to
    ``max_new_tokens`` with ``decoding`` (``generation``;
    :func:`realrun.side_by_side.run_side_by_side`)."""
    max_new_tokens, decoding = generation
    return run_side_by_side(
        methods,
        {m.name: m for m in family.chain},
        ids,
        model_set=model_set,
        max_new_tokens=max_new_tokens,
        eos_token_id=family.tokenizer.eos_token_id,
        decoding=decoding,
        device=f"{family.device} ({family.dtype}, {torch.get_num_threads()} threads)",
        family=label,
        progress=progress,
    )


def _measured_or_loaded(
    sources: Sequence[str],
    measuring: Sequence[Prompt],
    model_set: ModelSet | None,
    threads: int | str,
    load: dict,
    **numerics,
) -> tuple[Family, ModelSet]:
    """The family and its model set: measured on the ``measuring`` prompts with its numerics
    chosen (:func:`realrun.numerics.measure_numerics`) and α per category
    (:func:`realrun.categories.with_categories`), or, for a pre-measured ``model_set``,
    the family it describes (:func:`_family_of`)."""
    if model_set is not None:
        return _family_of(model_set, sources, threads, load), model_set
    measured = measure_numerics(sources, measuring, threads=threads, **numerics, **load)
    return measured.family, with_categories(measured.model_set, measuring)


def _family_of(
    model_set: ModelSet, sources: Sequence[str], threads: int | str, load: dict
) -> Family:
    """The family a pre-measured ``model_set`` describes, loaded with the numerics it was
    measured with (``load``: :func:`load_family`'s options, ``dtype`` among them)."""
    if load["dtype"] == "auto" or threads == "auto":
        raise ValueError(
            "a pre-measured model set needs the numerics it was measured with: "
            "give dtype and threads (--dtype, --threads) explicitly"
        )
    family = load_family(sources, **load)
    set_threads(family, validate.count("threads", threads, minimum=1))
    if tuple(model_set.models) != tuple(family.names):
        raise ValueError(
            f"the model set describes models {list(model_set.models)}, but "
            f"the run loaded {family.names}"
        )
    return family


def _cascade_to_run(
    names: Sequence[str], model_set: ModelSet, K: object | None, lenience: float, k_max: int
) -> tuple[Method, Recommendation | None]:
    """The csd method of the run: the given ``K`` at ``lenience``, else ewif's
    recommendation (returned too, for the results file)."""
    if K is not None:
        return given_cascade(names, K, lenience, model_set), None
    if lenience != 1.0:
        raise ValueError("lenience needs K (the recommendation chooses its own lenience)")
    rec = recommend(model_set, k_max=k_max)
    return recommended_method(rec), rec


def _methods_to_run(
    model_set: ModelSet,
    family: Family,
    csd: Method,
    k_max: int,
    baselines: bool,
    decoding: Decoding,
) -> list[Method]:
    """The default methods (:func:`realrun.methods.default_methods`) less the baselines when
    not asked for, and less transformers' methods unless greedy on transformers."""
    methods = default_methods(model_set, family.assistants, csd=csd, k_max=k_max)
    if not baselines:
        methods = [m for m in methods if m.kind in ("autoregressive", "csd")]
    if not decoding.greedy or family.backend != "transformers":
        methods = [m for m in methods if not m.kind.startswith("hf-")]
    return methods


def _with_pipeline_metadata(
    results: Results,
    model_set: ModelSet,
    family: Family,
    splits: tuple[Sequence[Prompt], Sequence[Prompt], Sequence[list[int]]],
    held_out_categories: Sequence[str],
    recommendation: dict | None,
    trees: tuple[TreeSearchResult, dict] | None = None,
) -> Results:
    """``results`` with what the pipeline knows besides the run: the prompt splits
    (``splits``: measuring, held-out and its token ids) and the categories held out, the
    numerics and CPU, the median prediction error, the timing diagnostics and the
    ``recommendation`` (:func:`realrun.methods.recommendation_record`); ``trees``: the tree
    search and the tree-pass timing."""
    measuring, held, ids = splits
    meta = {
        **results.metadata,
        "measuring_prompt_ids": [p.id for p in measuring],
        "held_out_prompt_ids": [p.id for p in held[: results.prompts]],
        "measuring_prompt_categories": [p.kind for p in measuring],
        "held_out_prompt_categories": [p.kind for p in held[: results.prompts]],
        "held_out_categories": sorted(set(held_out_categories)),
        "held_out_context_tokens": [len(i) for i in ids[: results.prompts]],
        "dtype": family.dtype,
        "threads": torch.get_num_threads(),
        "backend": family.backend,
        "cpu": cpu_description(),
        "median_prediction_error": median_prediction_error(results),
    }
    meta.update(timing_diagnostics(replace(results, metadata=meta), model_set))
    meta["context_predictions"] = context_predictions(
        results, model_set, meta["held_out_context_tokens"]
    )
    if recommendation is not None:
        meta["recommendation"] = recommendation
    if trees is not None:
        meta["tree_recommendation"] = tree_record(trees[0])
        meta["tree_pass_timing"] = trees[1]
    return replace(results, metadata=meta)


def given_cascade(names: Sequence[str], K: object, lenience: float, model_set: ModelSet) -> Method:
    """The csd :class:`Method` of a user-given ``K`` over all ``names`` at ``lenience``."""
    method = cascade_method(
        f"CSD {np.asarray(K).tolist()} l={lenience:g}", "csd", names, K, lenience
    )
    if lenience != 1.0 and not any(any(row) for row in method.K[1:]):
        raise ValueError(
            f"lenience {lenience:g} would apply at the target, the only reviewer of this K; "
            "lenience is allowed only where a drafter reviews (it would change the output)"
        )
    model_set.checked_lenience(lenience)
    return method


def timing_diagnostics(results: Results, model_set: ModelSet) -> dict[str, dict]:
    """How the run's pass times compare with the measuring phase's
    (:mod:`realrun.books`): ``timing_agreement`` for the passes the cost curves price (the
    autoregressive method's left out) and, where both phases timed autoregressive decoding,
    ``ar_agreement`` for the reference that prices the rest. With the model set's
    ``context_cost`` and the held-out prompts' lengths (``metadata.held_out_context_tokens``)
    both price the measuring phase's times at the run's mean context
    (:mod:`realrun.run_context`, recorded as ``run_context_tokens``), and each size's passes
    where the run recorded their own mean context at that one
    (:func:`realrun.run_context.pass_seconds_at`)."""
    run_ar_s = _ar_seconds(results)
    timing = model_set.metadata.get("timing", {})
    timed_ar_s = model_set.metadata.get("ar_seconds_per_token")
    out: dict = {}
    timed_at = None
    prompts = results.metadata.get("held_out_context_tokens")
    ar = results.autoregressive
    if prompts and ar is not None and model_set.context_cost is not None:
        length = run_context(prompts, method_lengths(results, ar.name))
        try:
            moved = timing_at(model_set, length)
        except ValueError as exc:  # a context the fit does not admit: one curve, as before
            moved, out["run_context_refused"] = None, str(exc)
        if moved is not None:
            (timing, timed_ar_s), out["run_context_tokens"] = moved, length
            timed_at = partial(pass_seconds_at, model_set)
    out["timing_agreement"] = timing_agreement(
        results.metadata.get("in_run_pass_seconds", {}),
        timing,
        run_ar_s,
        timed_ar_s,
        priced_by_ar=[] if ar is None else [ar.name],
        row_seconds=_row_seconds(model_set, model_set.row_cost),
        step_seconds=_row_seconds(model_set, model_set.row_step),
        timed_at=timed_at,
    )
    if run_ar_s and timed_ar_s:
        out["ar_agreement"] = ar_agreement(run_ar_s, timed_ar_s)
    return out


def _row_seconds(model_set: ModelSet, rows: object) -> dict[str, float]:
    """Each catch-up drafter's priced ``rows`` (its row cost or row step) in seconds (× the
    unit)."""
    unit = model_set.metadata.get("ar_seconds_per_token")
    if rows is None or model_set.catch_up is None or not unit:
        return {}
    return {
        name: float(h) * unit
        for name, h, flag in zip(model_set.models, rows, model_set.catch_up, strict=True)
        if flag and h
    }


def _ar_seconds(results: Results) -> float | None:
    """Seconds per token of the run's autoregressive method (None without one)."""
    ar = results.autoregressive
    return 1.0 / ar.tokens_per_s if ar is not None and ar.tokens_per_s > 0 else None


def median_prediction_error(results: Results) -> float | None:
    """Median over sd/csd methods of ``|predicted/measured − 1|`` (None without any)."""
    errors = [
        m.prediction_error
        for m in results.methods
        if m.kind in ("sd", "csd") and m.prediction_error is not None
    ]
    return float(np.median(errors)) if errors else None
