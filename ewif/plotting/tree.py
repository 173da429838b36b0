"""A token tree drawn, each node shaded by ``f(v)``, the chance that it is accepted
(Theorem TT, :mod:`ewif.kernel.tree`): the figure of ``csd plot tree``.

Nodes sit at their depth (top: the root); leaves are spaced evenly and a parent is centred
over its children. Each node is labelled with ``f(v)`` and each edge with the child's rank;
the shading uses the project's colour map with a colour bar, and the labels keep it
readable in greyscale.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ewif.kernel.tree import Tree
from ewif.plotting import style

__all__ = ["TreeFigure", "compute_tree", "draw_tree"]


@dataclass(frozen=True)
class TreeFigure:
    """The tree, ``f(v)`` per node, the expected tokens ``Σ f`` and where it came from."""

    parents: tuple[int, ...]
    ranks: tuple[int, ...]
    f: np.ndarray
    acceptance: np.ndarray
    label: str

    @property
    def expected_tokens(self) -> float:
        return float(self.f.sum())

    def to_dict(self) -> dict:
        return {
            "parents": list(self.parents),
            "ranks": list(self.ranks),
            "f": self.f.tolist(),
            "acceptance": self.acceptance.tolist(),
            "expected_tokens": self.expected_tokens,
            "label": self.label,
        }


def compute_tree(
    parents: object, acceptance: object, ranks: object | None = None, label: str = ""
) -> TreeFigure:
    """The figure's data: the checked tree and ``f(v)`` under ``acceptance``."""
    tree = Tree(parents, ranks)
    f = tree.path_probabilities(acceptance)
    p = np.asarray(acceptance, dtype=float)
    return TreeFigure(tree.parents, tree.ranks, f, p, label)


def _layout(tree: Tree) -> np.ndarray:
    """x of every node: leaves 0, 1, 2, … left to right (children by rank), parents centred."""
    x = np.zeros(tree.size)
    nxt = 0.0

    def place(v: int) -> float:
        nonlocal nxt
        if not tree.children[v]:
            x[v] = nxt
            nxt += 1.0
        else:
            xs = [place(c) for c in tree.children[v]]
            x[v] = (xs[0] + xs[-1]) / 2.0
        return x[v]

    place(0)
    return x


def draw_tree(data: TreeFigure, path: str | os.PathLike[str], *, title: str | None = None) -> Path:
    """Draw ``data`` to ``path`` (PNG/SVG/PDF)."""
    from matplotlib import colormaps
    from matplotlib.colors import Normalize

    path = style.output_path(path)
    tree = Tree(data.parents, data.ranks)
    x, y = _layout(tree), -np.asarray(tree.depth, dtype=float)
    width = max(6.4, 0.55 * (x.max() + 1))
    fig, ax = style.figure(
        title
        or f"Token tree, {tree.size} nodes: each node shaded by f(v) = P(accepted); "
        f"E[tokens per step] = {data.expected_tokens:.3f}",
        "",
        "depth below the root",
        size=(min(width, 20.0), max(3.2, 1.0 + 0.9 * (tree.height + 1))),
    )
    ax.grid(False)
    for v in range(1, tree.size):
        p = data.parents[v]
        ax.plot([x[p], x[v]], [y[p], y[v]], color="0.4", linewidth=0.8, zorder=1)
        ax.annotate(
            str(data.ranks[v]), ((x[p] + x[v]) / 2, (y[p] + y[v]) / 2),
            fontsize="x-small", color="0.3", ha="center", va="center",
            bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none"},
        )  # fmt: skip
    norm = Normalize(0.0, 1.0)
    cmap = colormaps[style.CMAP]
    ax.scatter(x, y, c=data.f, cmap=cmap, norm=norm, s=260, edgecolors="black", zorder=2)
    for v in range(tree.size):
        shade = cmap(norm(data.f[v]))
        text = "black" if 0.299 * shade[0] + 0.587 * shade[1] + 0.114 * shade[2] > 0.5 else "white"
        ax.annotate(f"{data.f[v]:.2f}", (x[v], y[v]), fontsize=6, ha="center", va="center",
                    color=text, zorder=3)  # fmt: skip
    cbar = fig.colorbar(ax.collections[-1], ax=ax)
    cbar.set_label("f(v): P(node accepted)")
    ax.set_xticks([])
    ax.set_yticks(-np.arange(tree.height + 1), [str(d) for d in range(tree.height + 1)])
    ax.set_xlim(x.min() - 0.7, x.max() + 0.7)
    ax.set_ylim(-tree.height - 0.6, 0.6)
    if data.label:
        ax.set_xlabel(
            style.wrap_title(data.label, int(style.TITLE_WIDTH * fig.get_figwidth() / 6.4))
        )
    return style.save(fig, path)


def tree_of(
    model_set: object | None,
    config: object | None,
    nodes: int = 16,
    depth: int = 6,
) -> TreeFigure:
    """The tree a model set's figure shows: its ``tree`` section's review (``config``, a
    :class:`~ewif.files.tree_config.TreeConfig`) under the pair's vector, or else the best
    tree (Theorem TO) of ``nodes`` nodes and depth ``depth`` under the target's vector of its
    first drafter."""
    from ewif.files.tree_models import rank_vector
    from ewif.search.best_tree import best_tree

    ms = model_set
    if config is not None and config.review is not None:
        r, j = (ms.index(getattr(config.review, x)) for x in ("reviewer", "drafter"))
        p = rank_vector(ms, config.lenience, r, j)
        label = f"{config.review.reviewer} reviews {config.review.drafter}'s tree"
        return compute_tree(config.review.parents, p, config.review.ranks, label)
    p = rank_vector(ms, ms.leniences[0], 0, 1)
    best = best_tree(p, nodes, depth)
    label = (
        f"the best tree of <= {nodes} nodes, depth <= {depth}, for {ms.models[0]} reviewing "
        f"{ms.models[1]} (Theorem TO)"
    )
    return compute_tree(best.parents, p, best.ranks, label)
