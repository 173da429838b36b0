"""A tree configuration's witness against its exact law (``csd simulate --tree``).

:func:`compare_tree` plays the configuration of an
:class:`ewif.kernel.tree_cascade.TreeCascade` on explicit token lists
(:class:`simulate.tree_witness.TreeSteps`, which shares no evaluation code with it: it reads
the configuration and prices each pass from the cascade's cost table) in independent streams
of one warm-up step and ``steps`` counted steps, and sets the tokens per step, the cost per
step (CLT over the streams' means) and the EWIF (delta method on the streams' totals) against
the exact values. Every ``z`` is about standard normal under a correct theory;
:meth:`TreeComparison.agrees` tests the three at once (Bonferroni).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from simulate.compare import Row
from simulate.stats import normal_quantile, ratio_estimate, z_score
from simulate.tree_witness import TreeSteps

__all__ = ["TreeComparison", "compare_tree", "witness"]


@dataclass(frozen=True)
class TreeComparison:
    """The rows (tokens per step, cost per step, EWIF) and how they were simulated."""

    rows: tuple[Row, ...]
    streams: int
    steps: int
    seconds: float

    def agrees(self, level: float) -> bool:
        """Every ``|z|`` within the Bonferroni-corrected quantile of ``level``."""
        bound = normal_quantile(1.0 - (1.0 - level) / len(self.rows))
        return all(abs(r.z) <= bound for r in self.rows)

    def to_dict(self, level: float) -> dict[str, Any]:
        return {
            "streams": self.streams,
            "steps": self.steps,
            "seconds": self.seconds,
            "rows": [r.to_dict() for r in self.rows],
            "agrees": self.agrees(level),
        }


def witness(cascade: Any, seed: int) -> TreeSteps:
    """The explicit-token player of ``cascade``'s configuration, priced by its cost table."""
    tree = None
    if cascade.tree is not None:
        t = cascade.tree
        tree = (t.reviewer, t.drafter, t.tree.parents, t.tree.ranks)
    return TreeSteps(
        cascade.alpha,
        cascade.K,
        cascade.fill,
        cascade.catch_up,
        lambda i, m, rows: float(cascade.pass_cost.at_rows(i, m, rows)),
        rank={k: v.tolist() for k, v in cascade.rank.items()},
        tree=tree,
        siblings=cascade.siblings,
        proposers=cascade.proposers,
        presence={j: q.tolist() for j, q in cascade.presence.items()},
        seed=seed,
    )


def compare_tree(cascade: Any, trials: int, seed: int = 0) -> TreeComparison:
    """``trials`` counted target steps (in at most 200 streams) of ``cascade``'s witness
    against its exact tokens, cost and EWIF per step."""
    streams = max(2, min(200, trials // 20))
    steps = max(1, trials // streams)
    started = time.perf_counter()
    run = witness(cascade, seed).run(streams, steps)
    seconds = time.perf_counter() - started
    x, y = run.tokens, run.cost
    per_step = [
        ("expected_tokens", x / steps, cascade.expected_tokens()),
        ("expected_cost", y / steps, cascade.expected_cost()),
    ]
    rows = []
    for name, values, exact in per_step:
        mean, se = float(values.mean()), float(values.std(ddof=1) / math.sqrt(values.size))
        se = 0.0 if se <= 1e-12 * max(1.0, abs(mean)) else se  # a constant, up to rounding
        rows.append(Row(name, mean, float(exact), se, z_score(mean, exact, se)))
    ratio = ratio_estimate(x.sum(), y.sum(), x @ x, y @ y, x @ y, x.size)
    unit = float(cascade.pass_cost.unit)
    exact = float(cascade.ewif())
    value, se = ratio.value * unit, ratio.se * unit
    rows.append(Row("ewif", value, exact, se, z_score(value, exact, se)))
    return TreeComparison(tuple(rows), streams, steps, seconds)
