"""The methods a side-by-side run compares (:mod:`realrun.side_by_side`), and the default set.

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
  drafter, and prompt lookup decoding (:mod:`realrun.baselines`);
* a token-tree configuration (``csd`` with a :class:`~ewif.files.tree_config.TreeConfig`:
  a tree review and/or siblings, :mod:`realrun.tree_methods`), run by
  :class:`~simulate.decoder.tree.TreeDecoder` and priced by
  :func:`ewif.files.tree_models.tree_cascade`.

What a results file keeps of the recommendation: :func:`recommendation_record`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ewif.base import validate
from ewif.base.configuration import Configuration
from ewif.files.model_set import ModelSet
from ewif.files.results import METHOD_KINDS
from ewif.files.tree_config import TreeConfig
from ewif.predict.assurance import Decision, decide
from ewif.search import explain
from ewif.search.optimizer import optimize
from ewif.search.recommendation import Recommendation, recommend


@dataclass(frozen=True)
class Method:
    """One decoding method: ``models`` (target first) and ``K``/``lenience`` for sd/csd;
    the assistant's name for hf-assisted (``models = (target, assistant)``); ``k`` draft
    tokens for hf-prompt-lookup; ``tree`` the token-tree parts of a csd (None: a chain)."""

    name: str
    kind: str
    models: tuple[str, ...]
    K: tuple[tuple[int, ...], ...] = ()
    lenience: float = 1.0
    k: int | None = None
    tree: TreeConfig | None = None

    def __post_init__(self) -> None:
        if self.kind not in METHOD_KINDS:
            raise ValueError(
                f"method kind must be one of {', '.join(METHOD_KINDS)}, got {self.kind!r}"
            )
        if not self.models:
            raise ValueError(f"method {self.name!r} needs at least the target model")

    @property
    def configuration(self) -> Configuration:
        """The cascade configuration an sd/csd method decodes with (ValueError for the
        other kinds, which run none)."""
        if self.kind not in ("sd", "csd"):
            raise ValueError(f"method {self.name!r} ({self.kind}) runs no cascade configuration")
        return Configuration(self.models, np.array(self.K, dtype=np.int64), self.lenience)

    @property
    def config(self) -> dict:
        out: dict = {"models": list(self.models)}
        if self.kind in ("sd", "csd"):
            out.update(K=[list(r) for r in self.K], lenience=self.lenience)
        if self.k is not None:
            out["prompt_lookup_num_tokens"] = self.k
        if self.tree is not None:
            parts = self.tree.to_dict()
            out.update({key: parts[key] for key in ("review", "siblings") if key in parts})
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


def recommendation_record(rec: Recommendation, decided: Decision | None = None) -> dict:
    """What a results file keeps of a recommendation: the decision (``decided``'s, under its
    rule, :mod:`ewif.predict.assurance`; else the mean's), the configuration by its method
    name, its exact EWIF, a one-line statement and the review sizes it uses."""
    method = recommended_method(rec)
    decision = rec.decision if decided is None else decided.decision
    if decision == "speculative":
        describe = f"recommended: {method.name} at {rec.ewif:.3f}x (ewif)"
    elif decided is not None and decided.unassured:
        describe = (
            f"decode autoregressively: {method.name} at {rec.ewif:.3f}x (ewif) is not assured "
            f"({decided.reason()})"
        )
    else:
        describe = explain.autoregressive_line(method.name, rec.ewif)
    out = {
        "decision": decision,
        "best_speculative": method.name,
        "config": method.config,
        "predicted_ewif": rec.ewif,
        "describe": describe,
        "review_sizes": explain.review_sizes(rec.cascade()),
    }
    if decided is not None:
        out["decision_rule"] = decided.rule
        if decided.interval is not None:
            out["interval"] = [decided.interval.low, decided.interval.high]
    return out


def decide_recommendation(model_set: ModelSet, rec: Recommendation, rule: str) -> Decision:
    """The decision on ``rec``'s configuration under ``rule``
    (:func:`ewif.predict.assurance.decide`)."""
    best = rec.best
    return decide(model_set, best.models, best.K, best.lenience, rec.ewif, rule)


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


def ar_name(methods: Sequence[Method]) -> str | None:
    """The name of the run's autoregressive method (None when it has none)."""
    return next((m.name for m in methods if m.kind == "autoregressive"), None)
