"""A draft tree under construction, and how a drafter's distribution gives a node's ranked
candidates (the children of that node) and their laws.

Candidates of one node, ranks ``1..B``:

* ``"top-k"``: the ``B`` most likely tokens (greedy: by logit; sampling: by the decoding's
  probability; ties by lowest id), each a deterministic candidate whose law is the point mass
  (``None``) — or, with ``law="softmax"``, the drafter's distribution itself: the known wrong
  rule, lossy, kept only so a test can show the losslessness check rejects it;
* ``"sample"`` (sampling only): ``B`` tokens drawn without replacement from ``q``; the law of
  the ``b``-th is ``q`` masked to the tokens not drawn before it and renormalised. Ranks past
  the tokens ``q`` can still give (a small nucleus) are left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from simulate.decoder.sampling import sample
from simulate.decoder.verify import TokenLaw

__all__ = ["Draft", "ranked_candidates"]

SIBLING_RULES = ("top-k", "sample")
TOP_K_LAWS = ("one-hot", "softmax")


@dataclass
class Draft:
    """Nodes of a draft tree: node 0 the root (the sequence's last token); ``laws[v]`` the law
    of ``v``'s token as its parent's candidate, ``sources[v]`` a proposer's label or None."""

    tokens: list[int]
    parents: list[int] = field(default_factory=lambda: [-1])
    laws: list[TokenLaw] = field(default_factory=lambda: [None])
    sources: list[str | None] = field(default_factory=lambda: [None])
    children: list[list[int]] = field(default_factory=lambda: [[]])

    def add(self, parent: int, token: int, law: TokenLaw, source: str | None = None) -> int:
        self.tokens.append(int(token))
        self.parents.append(parent)
        self.laws.append(law)
        self.sources.append(source)
        self.children.append([])
        self.children[parent].append(len(self.tokens) - 1)
        return len(self.tokens) - 1

    @property
    def size(self) -> int:
        return len(self.tokens)

    def path(self, v: int) -> list[int]:
        """The nodes from depth 1 down to ``v``."""
        out = []
        while v > 0:
            out.append(v)
            v = self.parents[v]
        return out[::-1]

    def relative_parents(self) -> list[int]:
        """Parents of the nodes below the root, as :func:`tree_logits` takes them."""
        return [p - 1 for p in self.parents[1:]]


def ranked_candidates(
    logits: np.ndarray,
    probs: np.ndarray | None,
    count: int,
    rule: str,
    law: str,
    rng: np.random.Generator,
    exclude: tuple[int, ...] = (),
) -> list[tuple[int, TokenLaw]]:
    """Up to ``count`` candidates ``(token, law)`` of one node, best first (module docstring);
    ``probs`` None means greedy decoding; ``exclude`` tokens never taken (e.g. the main draft
    token, whose siblings these are) — a drawn sibling's law is masked to them too."""
    if rule == "sample" and probs is not None:
        q = probs.copy()
        q[list(exclude)] = 0.0
        out: list[tuple[int, TokenLaw]] = []
        for _ in range(count):
            total = float(q.sum())
            if total <= 0.0:
                break
            conditional = q / total
            x = sample(conditional, rng)
            out.append((x, conditional))
            q = q.copy()
            q[x] = 0.0
        return out
    score = logits if probs is None else probs
    order = [int(x) for x in np.argsort(-score, kind="stable") if int(x) not in exclude]
    wrong = law == "softmax" and probs is not None
    return [(x, probs if wrong else None) for x in order[:count]]
