"""Plain-language report of a tree search (``csd recommend --tree``): the decision — a tree,
a chain or autoregressive decoding — the three bests, what each model's passes cost, and the
ranked configurations; and of one tree configuration (``csd evaluate --tree``)."""

from __future__ import annotations

from typing import Any

from ewif.base.text_table import table
from ewif.kernel.tree_cascade import TreeCascade
from ewif.search.explain import review_lines, review_sizes
from ewif.search.tree_search import RankedTree, TreeSearchResult

__all__ = ["configuration_lines", "configuration_report", "search_lines", "search_report"]


def configuration_report(cascade: TreeCascade, max_new_tokens: int | None = None) -> dict:
    """EWIF, tokens and cost per step, ``P(N >= d + 1)``, passes and review sizes of a tree
    configuration (``max_new_tokens``: also the EWIF of a generation of that length)."""
    pmf = cascade.tokens_pgf().coefficients
    tail = [float(pmf[d + 1 :].sum()) for d in range(pmf.size - 1)]
    out: dict[str, Any] = {
        "models": list(cascade.names or ()),
        "K": cascade.K.tolist(),
        "ewif": cascade.ewif(),
        "expected_tokens": cascade.expected_tokens(),
        "expected_cost": cascade.expected_cost(),
        "tokens_at_least": tail,  # tokens_at_least[d] = P(N >= d + 1)
        "passes": dict(zip(cascade.names or (), cascade.passes_per_step().tolist(), strict=True)),
        "review_sizes": review_sizes(cascade),
        "is_tree": cascade.is_tree,
    }
    if max_new_tokens is not None:
        out["max_new_tokens"] = max_new_tokens
        out["ewif_at_length"] = cascade.ewif(max_new_tokens)
    return out


def configuration_lines(out: dict) -> list[str]:
    """Human lines of :func:`configuration_report`."""
    lines = [
        f"EWIF {out['ewif']:.4f}   tokens/step {out['expected_tokens']:.4f}   "
        f"cost/step {out['expected_cost']:.4f}"
    ]
    if "ewif_at_length" in out:
        lines.append(
            f"EWIF of a generation of {out['max_new_tokens']} tokens {out['ewif_at_length']:.4f} "
            "(its last step pays for tokens it cannot keep)"
        )
    lines.append(
        "P(tokens >= d + 1), d = 0, 1, ...: " + " ".join(f"{p:.3f}" for p in out["tokens_at_least"])
    )
    lines += ["review sizes (m = positions per pass):", *review_lines(out["review_sizes"])]
    return lines


def search_report(result: TreeSearchResult, source: str) -> dict:
    """The report of a tree search, for ``--json`` and :func:`search_lines`."""
    b = result.bounds
    best = configuration_report(result.cascade())
    return {
        "source": source,
        "title": result.model_set.metadata.get("title"),
        "space": {
            "k_max": b.k_max,
            "nodes": b.nodes,
            "depth": b.depth,
            "siblings": b.siblings,
        },
        "configurations": result.n_configurations,
        "seconds": result.seconds,
        "has_rank_vectors": result.model_set.rank_acceptance is not None,
        "decision": result.decision,
        "best": _ranked(result.best) | {k: best[k] for k in ("expected_tokens", "expected_cost")},
        "best_tree": None if result.best_tree is None else _ranked(result.best_tree),
        "best_chain": None if result.best_chain is None else _ranked(result.best_chain),
        "autoregressive": 1.0,
        "review_sizes": best["review_sizes"],
        "table": [_ranked(r) for r in result.table],
    }


def search_lines(out: dict) -> str:
    """``csd recommend --tree``'s human report."""
    s = out["space"]
    lines = [
        f"csd recommend --tree — {out['source']}" + (f": {out['title']}" if out["title"] else ""),
        f"searched {out['configurations']:,} configurations (budgets 0..{s['k_max']}, trees of "
        f"<= {s['nodes']} nodes and depth <= {s['depth']}, <= {s['siblings']} siblings per "
        f"token; exact, best first) in {out['seconds']:.2f} s",
    ]
    if not out["has_rank_vectors"]:
        lines.append(
            "the set has no rank-acceptance vectors (csd.models/6 'rank_acceptance'): every "
            "pair is p = (alpha), so every tree is a chain"
        )
    best, tree, chain = out["best"], out["best_tree"], out["best_chain"]
    lines += ["", _decision_line(out), ""]
    lines.append(
        f"best configuration : {best['configuration']}\n"
        f"  EWIF             : {best['ewif']:.4f}   ({best['expected_tokens']:.3f} tokens per "
        f"target step, cost {best['expected_cost']:.4f} target passes)"
    )
    lines.append(
        "best tree          : "
        + ("none in the space" if tree is None else f"{tree['ewif']:.4f}  {tree['configuration']}")
    )
    lines.append(
        "best chain         : "
        + (
            "none in the space"
            if chain is None
            else f"{chain['ewif']:.4f}  {chain['configuration']}"
        )
    )
    lines += [
        "autoregressive     : 1.0000",
        "",
        "review sizes of the best (m = positions per pass):",
    ]
    lines += review_lines(out["review_sizes"])
    lines += [
        "",
        "ranked configurations:",
        table(
            ["rank", "EWIF", "kind", "configuration"],
            [
                [i + 1, r["ewif"], "tree" if r["is_tree"] else "chain", r["configuration"]]
                for i, r in enumerate(out["table"])
            ],
        ),
    ]
    return "\n".join(lines)


def _decision_line(out: dict) -> str:
    best, tree, chain = out["best"], out["best_tree"], out["best_chain"]
    if out["decision"] == "autoregressive":
        return (
            f"on these costs, decode autoregressively: every tree and every chain is at most "
            f"{best['ewif']:.4f}x"
        )
    if out["decision"] == "chain":
        if tree is None:
            return f"decision: a chain ({best['ewif']:.4f}x); the space has no tree"
        return (
            f"decision: a chain — the best chain ({chain['ewif']:.4f}x) beats every tree (best "
            f"{tree['ewif']:.4f}x, {100 * (tree['ewif'] / chain['ewif'] - 1):+.1f}%)"
        )
    gain = "" if chain is None else f", {100 * (tree['ewif'] / chain['ewif'] - 1):+.2f}% over "
    gain += "" if chain is None else f"the best chain ({chain['ewif']:.4f}x)"
    return f"decision: a tree ({tree['ewif']:.4f}x{gain})"


def _ranked(r: RankedTree) -> dict:
    return {
        "configuration": r.config.describe(),
        "ewif": r.ewif,
        "is_tree": r.config.is_tree,
        "tree": r.config.to_dict(),
    }
