"""Did a peer beat our best speculative method? The numbers behind the report's sentence.

A run measures transformers' own assisted generation and prompt lookup (``hf-*`` methods)
beside ours (``sd``/``csd``). :func:`peer_comparison` says which peer measured fastest
against our fastest, and — for an assisted peer whose drafter has measuring traces in the
run's model set — what its draft schedule is worth *at our costs*: transformers' schedules
replayed over those traces (:mod:`simulate.dynamic_draft`; the confidence threshold of its
default needs the drafter's confidence, which a model set does not carry, so the replays here
are the +2/−1 schedule in its two forms and 20 tokens without threshold), beside our fixed k
of highest exact EWIF replayed the same way. A peer that beats us while its schedule, priced
at our costs, does not, beat us by what its engine pays per pass.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ewif.files.model_set import ModelSet
from ewif.files.results import Results
from simulate.dynamic_draft import Schedule, replay_schedule

PEER_KINDS = ("hf-assisted", "hf-prompt-lookup")
OURS = ("sd", "csd")
K_MAX = 12


def best_fixed_k(model_set: ModelSet, drafter: str, k_max: int = K_MAX) -> int:
    """Plain SD's draft length of highest exact EWIF (the set's catch-up flags)."""
    i = model_set.index(drafter)
    flags = None if model_set.catch_up is None else [model_set.catch_up[0], model_set.catch_up[i]]
    values = [
        model_set.to_cascade((model_set.models[0], drafter), [[k]], catch_up=flags).ewif()
        for k in range(1, k_max + 1)
    ]
    return int(np.argmax(values)) + 1


def schedule_prices(model_set: ModelSet, drafter: str) -> dict[str, float]:
    """Replayed speed-ups of our fixed k* and of transformers' schedules that need no
    confidence (module docstring); empty when the set has no traces of ``drafter``."""
    data = model_set.bootstrap
    j = model_set.index(drafter)
    if data is None or not data.acceptance_traces or (1.0, 0, j) not in data.acceptance_traces:
        return {}
    schedules = [
        Schedule.fixed(best_fixed_k(model_set, drafter)),
        Schedule(5, "heuristic"),
        Schedule(5, "heuristic_transient"),
        Schedule(20, "constant"),
    ]
    return {s.describe(): replay_schedule(model_set, drafter, s).speedup for s in schedules}


def peer_comparison(results: Results) -> dict[str, Any] | None:
    """The fastest peer against our fastest sd/csd method (None when the run lacks either):
    names, measured speed-ups, whether the peer won, and, for an assisted peer, the replayed
    prices of the schedules (:func:`schedule_prices`)."""
    peers = [m for m in results.methods if m.kind in PEER_KINDS and m.speedup]
    ours = [m for m in results.methods if m.kind in OURS and m.speedup]
    if not peers or not ours:
        return None
    peer = max(peers, key=lambda m: m.speedup)
    best = max(ours, key=lambda m: m.speedup)
    out: dict[str, Any] = {
        "peer": peer.name,
        "peer_speedup": peer.speedup,
        "ours": best.name,
        "ours_speedup": best.speedup,
        "peer_won": peer.speedup > best.speedup,
    }
    models = peer.config.get("models", [])
    raw = results.metadata.get("model_set")
    if peer.kind == "hf-assisted" and len(models) == 2 and raw:
        out["schedules_at_our_costs"] = schedule_prices(ModelSet.from_dict(raw, "run"), models[1])
    return out
