"""Token-tree methods of a side-by-side run: what the tree search recommends, run as methods.

:func:`tree_methods` turns :func:`ewif.search.tree_search.optimize_trees` on the measured set
into :class:`~realrun.methods.Method`\\ s: the recommended configuration (a tree, a chain or
— when nothing beats AR — no method), the best branching configuration even when it is not
recommended (so that its prediction is checked against a measurement), and the best chain
of the same search. :func:`method_cascade` prices any sd/csd method exactly (a chain by
:meth:`~ewif.files.model_set.ModelSet.to_cascade`, a tree by
:func:`~ewif.files.tree_models.tree_cascade`); :func:`tree_decoder` runs it
(:class:`~simulate.decoder.tree.TreeDecoder`: deterministic top-k siblings when greedy,
siblings drawn without replacement when sampling — the rules the rank vectors are measured
for, :mod:`realrun.rank_measure`). :func:`tree_record` is what a results file keeps of the
search.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ewif.files.model_set import ModelSet
from ewif.files.tree_config import TreeConfig
from ewif.files.tree_models import tree_cascade
from ewif.kernel.cascade import Cascade
from ewif.search.tree_search import RankedTree, TreeBounds, TreeSearchResult, optimize_trees
from realrun.methods import Method, cascade_method
from simulate.decoder.cascade import CascadeDecoder
from simulate.decoder.sampling import Decoding
from simulate.decoder.tree import TreeDecoder

__all__ = [
    "method_cascade",
    "tree_decoder",
    "tree_method",
    "tree_methods",
    "tree_record",
    "tree_search",
]


def tree_method(config: TreeConfig) -> Method:
    """The csd :class:`Method` of a tree configuration, named by its parts; a configuration
    without tree parts is the chain method of its K."""
    drafters = ">".join(config.models[1:])
    K = config.K.tolist()
    lenience = f" l={config.lenience:g}" if config.K.shape[0] > 1 and config.K[1:].any() else ""
    name = f"CSD {drafters} {K}{lenience}"
    review, siblings = config.review, {m: s for m, s in config.siblings.items() if s}
    if review is None and not siblings:
        return cascade_method(name, "csd", config.models, config.K, config.lenience)
    if review is not None:
        depth = _depth(review.parents)
        shape = f"{review.size - 1} nodes depth {depth}"
        if review.reviewer == config.models[0]:
            name = f"Tree {review.drafter} {shape}"
        else:
            name += f" tree {review.reviewer}<{review.drafter} {shape}"
    if siblings:
        name += " siblings " + ",".join(f"{m}:{s}" for m, s in siblings.items())
    base = cascade_method(name, "csd", config.models, config.K, config.lenience)
    return Method(base.name, "csd", base.models, base.K, base.lenience, tree=config)


def tree_search(
    model_set: ModelSet, k_max: int, bounds: TreeBounds | None = None
) -> TreeSearchResult:
    """The exact tree search (:func:`~ewif.search.tree_search.optimize_trees`) on the
    measured ``model_set``; default ``bounds``: budgets ``0..min(k_max, 8)``."""
    bounds = bounds or TreeBounds(k_max=min(k_max, TreeBounds().k_max))
    return optimize_trees(model_set, bounds=bounds)


def tree_methods(search: TreeSearchResult, existing: Sequence[Method]) -> list[Method]:
    """The recommended configuration, the best branching one and the best chain of
    ``search``, those not already among ``existing`` (same models, K, lenience and tree
    parts), recommended first."""
    out: list[Method] = []
    seen = {_key(m) for m in existing}
    for ranked in (search.best, search.best_tree, search.best_chain):
        if ranked is None:
            continue
        method = tree_method(ranked.config)
        if _key(method) not in seen:
            seen.add(_key(method))
            out.append(method)
    return out


def tree_record(search: TreeSearchResult) -> dict:
    """What a results file keeps of the tree search: the decision, the recommended, best
    branching and best chain configurations (method name, configuration, exact EWIF)."""

    def entry(ranked: RankedTree | None) -> dict | None:
        if ranked is None:
            return None
        method = tree_method(ranked.config)
        return {
            "method": method.name,
            "config": method.config,
            "predicted_ewif": ranked.ewif,
            "describe": ranked.config.describe(),
        }

    b = search.bounds
    return {
        "decision": search.decision,
        "best": entry(search.best),
        "best_tree": entry(search.best_tree),
        "best_chain": entry(search.best_chain),
        "configurations": search.n_configurations,
        "bounds": {"k_max": b.k_max, "nodes": b.nodes, "depth": b.depth, "siblings": b.siblings},
    }


def method_cascade(model_set: ModelSet, method: Method) -> Cascade:
    """The exact cascade of an sd/csd ``method``: its tree's
    (:func:`~ewif.files.tree_models.tree_cascade`) or its chain's."""
    if method.tree is not None:
        return tree_cascade(model_set, method.tree)
    return model_set.to_cascade(method.configuration)


def tree_decoder(method: Method, chain: Sequence, decoding: Decoding, seed: int) -> CascadeDecoder:
    """The decoder of an sd/csd ``method`` over its loaded models ``chain``: a
    :class:`TreeDecoder` for a tree (module docstring), else a :class:`CascadeDecoder`."""
    K = np.array(method.K, dtype=np.int64)
    config = method.tree
    if config is None:
        return CascadeDecoder(chain, K, method.lenience, decoding, seed)
    tree = None
    if config.review is not None:
        r = config.models.index(config.review.reviewer)
        j = config.models.index(config.review.drafter)
        tree = (r, j, config.review.parents, config.review.ranks)
    siblings = [0] + [config.siblings.get(m, 0) for m in config.models[1:]]
    return TreeDecoder(
        chain,
        K,
        tree=tree,
        siblings=siblings,
        sibling_rule="top-k" if decoding.greedy else "sample",
        lenience=method.lenience,
        decoding=decoding,
        seed=seed,
    )


def _key(method: Method) -> tuple:
    config = method.config
    return (
        tuple(config["models"]),
        str(config.get("K")),
        config.get("lenience"),
        str(config.get("review")),
        str(config.get("siblings")),
    )


def _depth(parents: Sequence[int]) -> int:
    depth = [0] * len(parents)
    for v in range(1, len(parents)):
        depth[v] = depth[parents[v]] + 1
    return max(depth)
