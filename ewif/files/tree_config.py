"""A token-tree configuration: the ``tree`` section of a model-set file (``csd.models/6``).

Plain data, checked on its own (model names are matched against a model set when it is
priced, :mod:`ewif.files.tree_models`); :mod:`simulate` and :mod:`realrun` read it too::

    tree:
      models: [qwen-1.5b, qwen-0.5b, mag]     # target first, largest first, as in `cascade`
      K: [[3, 0], [0, 6]]                     # Algorithm 1's budgets (ewif.kernel.cascade)
      lenience: 3                             # below the target only
      review:                                 # optional: a tree review (ewif.kernel.tree)
        reviewer: qwen-0.5b                   #   K's row of the reviewer gives the drafter its
        drafter: mag                          #   only block, with n − 1 tokens
        parents: [-1, 0, 0, 1, 1, 2, 3]       #   parents[0] = -1: the root
        ranks: null                           #   optional: ranks among siblings (default 1, 2, …)
      siblings: {qwen-0.5b: 1}                # optional: siblings per token of a target block

The meaning is :class:`ewif.kernel.tree_cascade.TreeCascade`'s (docs/theory.md, "Token
trees"). Anything malformed raises a one-line ``ValueError`` naming the value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ewif.base import validate
from ewif.base.tree_checks import tree_parents, tree_ranks

__all__ = ["TreeConfig", "TreeSpec"]


@dataclass(frozen=True)
class TreeSpec:
    """``reviewer`` reviews the tree ``parents`` (ranks ``ranks``) drafted by ``drafter``."""

    reviewer: str
    drafter: str
    parents: tuple[int, ...]
    ranks: tuple[int, ...]

    def __post_init__(self) -> None:
        parents = tree_parents("tree.review.parents", self.parents)
        if len(parents) < 2:
            raise ValueError(
                f"tree.review.parents must hold the root and at least one draft token, got "
                f"{list(self.parents)}"
            )
        object.__setattr__(self, "parents", parents)
        object.__setattr__(self, "ranks", tree_ranks("tree.review.ranks", parents, self.ranks))

    @property
    def size(self) -> int:
        """Nodes, the root included."""
        return len(self.parents)

    @property
    def is_chain(self) -> bool:
        """True when no node has two children."""
        return len(set(self.parents[1:])) == len(self.parents) - 1


@dataclass(frozen=True)
class TreeConfig:
    """Models (target first), ``K``, lenience, and the tree parts: a :class:`TreeSpec` and/or
    ``siblings`` (drafter name -> siblings per token of its block in the target's draft)."""

    models: tuple[str, ...]
    K: np.ndarray
    lenience: float = 1.0
    review: TreeSpec | None = None
    siblings: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        models = tuple(self.models)
        if len(models) < 2 or not all(isinstance(m, str) for m in models):
            raise ValueError(f"tree.models must name the target and drafters, got {models!r}")
        object.__setattr__(self, "models", models)
        K = validate.budget_matrix("tree.K", self.K, len(models) - 1)
        K.setflags(write=False)
        object.__setattr__(self, "K", K)
        lenience = validate.real("tree.lenience", self.lenience)
        if lenience < 1:
            raise ValueError(f"tree.lenience must be a finite number >= 1, got {lenience!r}")
        object.__setattr__(self, "lenience", lenience)
        siblings = {}
        for name, s in dict(self.siblings).items():
            if name not in models[1:]:
                raise ValueError(f"tree.siblings names {name!r}, not a drafter of {list(models)}")
            siblings[name] = validate.count(f"tree.siblings[{name!r}]", s)
        object.__setattr__(self, "siblings", siblings)
        if self.review is not None:
            for role in ("reviewer", "drafter"):
                if getattr(self.review, role) not in models:
                    raise ValueError(
                        f"tree.review.{role} {getattr(self.review, role)!r} is not one of "
                        f"{list(models)}"
                    )

    @property
    def is_tree(self) -> bool:
        """True when some node has two children (siblings, or a branching tree review)."""
        return any(self.siblings.values()) or (self.review is not None and not self.review.is_chain)

    def describe(self) -> str:
        """One line: models, K, lenience and the tree parts."""
        out = f"{' > '.join(self.models)}  K={self.K.tolist()}  l={self.lenience:g}"
        if self.review is not None:
            r = self.review
            out += (
                f"  tree: {r.reviewer} reviews {r.drafter}'s {r.size} nodes "
                f"(depth {_height(r.parents)}) {list(r.parents)}"
            )
            if r.ranks != tree_ranks("ranks", r.parents, None):
                out += f" ranks {list(r.ranks)}"
        if any(self.siblings.values()):
            parts = ", ".join(f"{m} {s}" for m, s in self.siblings.items() if s)
            out += f"  siblings: {parts}"
        return out

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "models": list(self.models),
            "K": self.K.tolist(),
            "lenience": self.lenience,
        }
        if self.review is not None:
            out["review"] = {
                "reviewer": self.review.reviewer,
                "drafter": self.review.drafter,
                "parents": list(self.review.parents),
                "ranks": list(self.review.ranks),
            }
        if any(self.siblings.values()):
            out["siblings"] = {m: s for m, s in self.siblings.items() if s}
        return out

    @classmethod
    def from_dict(cls, raw: Any) -> TreeConfig:
        """The ``tree`` section of a parsed file (module docstring)."""
        if not isinstance(raw, dict) or "models" not in raw or "K" not in raw:
            raise ValueError("tree must be a mapping with 'models' and 'K'")
        unknown = set(raw) - {"models", "K", "lenience", "review", "siblings"}
        if unknown:
            raise ValueError(f"tree has unknown keys {sorted(unknown)}")
        review = raw.get("review")
        if review is not None:
            if not isinstance(review, dict) or not {"reviewer", "drafter", "parents"} <= set(
                review
            ):
                raise ValueError(
                    "tree.review must be a mapping with 'reviewer', 'drafter' and 'parents'"
                )
            review = TreeSpec(
                str(review["reviewer"]),
                str(review["drafter"]),
                review["parents"],
                review.get("ranks"),
            )
        siblings = raw.get("siblings") or {}
        if not isinstance(siblings, dict):
            raise ValueError(f"tree.siblings must map drafter names to counts, got {siblings!r}")
        models = raw["models"]
        if not isinstance(models, list):
            raise ValueError(f"tree.models must be a list of names, got {models!r}")
        return cls(
            tuple(models),
            validate.counts("tree.K", raw["K"]),
            raw.get("lenience", 1.0),
            review,
            siblings,
        )


def _height(parents: tuple[int, ...]) -> int:
    depth = [0] * len(parents)
    for v in range(1, len(parents)):
        depth[v] = depth[parents[v]] + 1
    return max(depth)
