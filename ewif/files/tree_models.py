"""A model set's token-tree configurations as the kernel prices them: which drafters are
proposers, each pair's rank-acceptance vector, and :func:`tree_cascade`, the
:class:`~ewif.kernel.tree_cascade.TreeCascade` of a :class:`~ewif.files.tree_config.TreeConfig`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ewif.files.model_set import ModelSet
from ewif.files.reading import read_data
from ewif.files.tree_config import TreeConfig
from ewif.kernel.tree import Tree
from ewif.kernel.tree_cascade import TreeCascade, TreeReview

__all__ = ["candidate_presence", "is_proposer", "load_tree", "rank_vector", "tree_cascade"]


def is_proposer(model_set: ModelSet, name: str) -> bool:
    """Whether ``name`` is a proposer (Max-Gram, bigram) rather than a neural model: the
    measurement records a proposer's timing as ``seconds_per_token``; a set without timing
    metadata (a preset) treats a drafter of zero cost as a proposer."""
    timing = model_set.metadata.get("timing", {})
    if name in timing:
        return "seconds_per_token" in timing[name]
    return float(model_set.pass_cost.at(model_set.index(name), 1)) == 0.0


def rank_vector(model_set: ModelSet, lenience: float, r: int, j: int) -> np.ndarray:
    """``p^(rj)`` at ``lenience`` (set indices): the measured vector, or ``(alpha,)`` (a chain)
    for a pair without one (and for every pair of a set older than ``csd.models/6``). The
    target's vectors do not depend on lenience."""
    lenience = model_set.checked_lenience(lenience)
    alpha = float(model_set.alpha[lenience][r, j])
    if model_set.rank_acceptance is None:
        return np.array([alpha])
    return model_set.rank_acceptance.vector(lenience, r, j, alpha)


def tree_cascade(
    model_set: ModelSet,
    config: TreeConfig,
    fill: str = "tokens",
    catch_up: Sequence[bool] | None = None,
) -> TreeCascade:
    """The exact :class:`~ewif.kernel.tree_cascade.TreeCascade` of ``config`` priced with the
    set's costs (curves, row costs), catch-up flags (``catch_up``, one per chosen model,
    overrides them) and rank vectors; the tree's drafter grows it level by level unless it
    is a proposer (:func:`is_proposer`)."""
    cascade = model_set.to_cascade(
        config.models, config.K, config.lenience, fill=fill, catch_up=catch_up
    )
    idx = [model_set.index(m) for m in config.models]
    lenience = model_set.checked_lenience(config.lenience)
    pairs = {(0, config.models.index(m)) for m, s in config.siblings.items() if s}
    review = None
    if config.review is not None:
        r, j = (config.models.index(getattr(config.review, x)) for x in ("reviewer", "drafter"))
        pairs.add((r, j))
        review = TreeReview(r, j, Tree(config.review.parents, config.review.ranks))
    rank = {(r, j): rank_vector(model_set, lenience, idx[r], idx[j]) for r, j in pairs}
    siblings = [config.siblings.get(m, 0) for m in config.models]
    siblings[0] = 0
    proposers = [i > 0 and is_proposer(model_set, m) for i, m in enumerate(config.models)]
    curves = cascade.cost_curve
    return TreeCascade(
        cascade.alpha,
        cascade.cost,
        cascade.K,
        rank=rank,
        tree=review,
        siblings=siblings,
        proposers=proposers,
        presence=candidate_presence(model_set, idx, proposers),
        cost_per_token=None if curves is not None else cascade.cost_per_token,
        fill=fill,
        names=config.models,
        cost_curve=None if curves is None else list(curves),
        catch_up=cascade.catch_up,
        row_cost=cascade.pass_cost.row_cost,
        row_step=cascade.pass_cost.row_step,
    )


def candidate_presence(
    model_set: ModelSet, idx: Sequence[int], proposers: Sequence[bool]
) -> dict[int, np.ndarray]:
    """The measured candidate presence of the chosen proposers (Theorem TP), by position in
    the configuration (``idx``: their set indices); empty for a set without it."""
    section = model_set.rank_acceptance
    measured = {} if section is None else section.presence
    return {i: measured[j] for i, j in enumerate(idx) if proposers[i] and j in measured}


def load_tree(path: str | Path) -> tuple[ModelSet, TreeConfig | None]:
    """A model-set file and its ``tree`` section (None when it has none)."""
    data = read_data(path, "model-set file")
    model_set = ModelSet.from_dict(data, source=str(path))
    raw = data.get("tree") if isinstance(data, dict) else None
    if raw is None:
        return model_set, None
    try:
        config = TreeConfig.from_dict(raw)
        for m in config.models:
            model_set.index(m)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return model_set, config
