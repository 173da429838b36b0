"""Predictions of a finished run for its held-out prompts: intervals, replays, in-run ewif.

Each is made on the generations the run made: the bootstrap prediction interval
(:func:`method_intervals`), the replay of the measuring prompts' acceptance traces
(:func:`replay_predictions`) and ewif with the acceptance the run itself observed
(:func:`ewif_with_run_acceptance`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ewif.base.configuration import Configuration
from ewif.base.resampling import HeldOut
from ewif.files.model_set import ModelSet
from ewif.files.results import Results
from ewif.files.tree_config import TreeConfig
from ewif.kernel.cascade import Cascade
from ewif.predict.bootstrap import LEVEL, prediction_intervals, tree_prediction_intervals
from simulate.decoder.cascade import CascadeStats
from simulate.trace_replay import replay


def method_intervals(results: Results, model_set: ModelSet) -> dict[str, dict]:
    """Per sd/csd method: the 90 % bootstrap prediction interval of the speed-up measured on
    the run's ``results.prompts`` held-out prompts (a token tree's by
    :func:`ewif.predict.bootstrap.tree_prediction_intervals`)
    (:func:`ewif.predict.bootstrap.prediction_intervals` with ``held_out_prompts``, one set of
    replicates for all) and whether the measured speed-up fell in it."""
    chosen = [m for m in results.methods if m.kind in ("sd", "csd") and m.speedup is not None]
    chains = [m for m in chosen if not is_tree_config(m.config)]
    trees = [m for m in chosen if is_tree_config(m.config)]
    configs = [
        Configuration(m.config["models"], np.array(m.config["K"]), m.config["lenience"])
        for m in chains
    ]
    held = held_out_of(results, model_set)
    found = prediction_intervals(
        model_set,
        configs,
        held_out_prompts=held,
        max_new_tokens=[method_lengths(results, m.name) for m in chains],
    )
    if trees:  # the same seed: the same replicates, rank vectors redrawn with α
        found += tree_prediction_intervals(
            model_set,
            [TreeConfig.from_dict(m.config) for m in trees],
            held_out_prompts=held,
            max_new_tokens=[method_lengths(results, m.name) for m in trees],
        )
    unseen = held.unseen if isinstance(held, HeldOut) else {}
    return {
        m.name: {
            "point": iv.point,
            "low": iv.low,
            "high": iv.high,
            "level": iv.level,
            "held_out_prompts": results.prompts,
            "inside": iv.contains(m.speedup),
            **({"unseen_categories": unseen} if unseen else {}),
        }
        for m, iv in zip(chains + trees, found, strict=True)
    }


def held_out_of(results: Results, model_set: ModelSet) -> int | HeldOut:
    """What the run's intervals predict for: its held-out prompts by category
    (:class:`ewif.base.resampling.HeldOut`, so that a category the measuring prompts never
    saw is drawn as a category, :mod:`ewif.predict.bootstrap`) where the run recorded the
    categories of both splits, one per measuring prompt of the set; else their count."""
    meta = results.metadata
    measuring = meta.get("measuring_prompt_categories")
    held = (meta.get("held_out_prompt_categories") or [])[: results.prompts]
    data = model_set.bootstrap
    if (
        not measuring
        or len(held) != results.prompts
        or data is None
        or len(measuring) != data.prompts
    ):
        return results.prompts
    return HeldOut(tuple(measuring), tuple(held))


def is_tree_config(config: Mapping) -> bool:
    """Whether a results file's method configuration has token-tree parts (a tree review or
    siblings, :mod:`realrun.tree_methods`)."""
    return bool(config.get("review") or config.get("siblings"))


def replay_predictions(results: Results, model_set: ModelSet, replays: int = 10) -> dict:
    """Per sd/csd chain method: the speed-up that replaying it over the measuring prompts'
    acceptance traces predicts (:func:`simulate.trace_replay.replay`; sampling traces
    ``replays`` times per prompt), its 90 % prediction interval for the run's held-out
    prompts, whether the measurement fell inside and the error ``|replay/measured − 1|``."""
    greedy = results.decoding.get("temperature", 0.0) == 0.0
    held, out = held_out_of(results, model_set), {}
    for m in results.methods:
        if m.kind not in ("sd", "csd") or not m.speedup or is_tree_config(m.config):
            continue  # the trace replay plays chains
        c = m.config
        found = replay(
            model_set,
            c["models"],
            np.array(c["K"]),
            c["lenience"],
            repeats=1 if greedy else replays,
        )
        low, high = found.interval(held_out_prompts=held)
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
