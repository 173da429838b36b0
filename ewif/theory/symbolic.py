"""Sympy twins of :mod:`ewif.theory.theorems` and :mod:`ewif.theory.horizontal`, and the proofs.

The twins build exact expressions in any sympy symbols or Rationals (evaluate with
``.subs``). The ``prove_*`` functions decide each identity: for a concrete ``k`` (and
``n``) both sides are rational functions and ``sympy.cancel(lhs − rhs) == 0`` is a
complete decision procedure; ``k=None`` proves Theorem 4.1 and its mean for a symbolic
integer ``k ≥ 0`` (away from the removable singularity ``αx = 1`` of the closed form).
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy

x, alpha, alpha2 = sympy.symbols("x alpha alpha2", positive=True)


def phi_closed_form(a: sympy.Expr, k: int | sympy.Expr, var: sympy.Expr = x) -> sympy.Expr:
    """Theorem 4.1's closed form ``1 + (x − 1)(1 − (αx)^(k+1))/(1 − αx)``."""
    return 1 + (var - 1) * (1 - (a * var) ** (k + 1)) / (1 - a * var)


def phi_polynomial(a: sympy.Expr, k: int | sympy.Expr, var: sympy.Expr = x) -> sympy.Expr:
    """Theorem 4.1's coefficients: ``Σ_{i=1}^{k} (α^(i−1) − α^i) x^i + α^k x^(k+1)``
    (an explicit polynomial for integer ``k``, a ``sympy.Sum`` for symbolic ``k``)."""
    i = sympy.Symbol("i", integer=True, positive=True)
    body = (a ** (i - 1) - a**i) * var**i
    head = (
        sympy.Add(*(body.subs(i, j) for j in range(1, k + 1)))
        if isinstance(k, int)
        else sympy.Sum(body, (i, 1, k))
    )
    return head + a**k * var ** (k + 1)


def T_alpha(a: sympy.Expr, g: sympy.Expr, var: sympy.Expr = x) -> sympy.Expr:
    """The operator ``T_α(g) = (1 − α g(α))/(1 − α)`` applied to the expression ``g(var)``."""
    return (1 - a * g.subs(var, a)) / (1 - a)


def sd_ewif(a: sympy.Expr, k: int | sympy.Expr, c: sympy.Expr) -> sympy.Expr:
    """Corollary 4.2: ``(1 − α^(k+1))/((1 − α)(1 + kc))``."""
    return (1 - a ** (k + 1)) / ((1 - a) * (1 + k * c))


def vertical_ewif(
    a: sympy.Expr, a2: sympy.Expr, k: int, n: int, c1: sympy.Expr, c2: sympy.Expr
) -> sympy.Expr:
    """Theorem 4.3 with the n-th power: ``(1 − α φ_{α2,k}(α)^n)/((1 − α)(1 + n c1 + n k c2))``."""
    return (1 - a * phi_closed_form(a2, k, a) ** n) / ((1 - a) * (1 + n * c1 + n * k * c2))


def vertical_c2_threshold(
    a: sympy.Expr, a2: sympy.Expr, k: int, n: int, c1: sympy.Expr
) -> sympy.Expr:
    """Corollary 4.4's exact break-even cost
    ``c2* = (1 + n c1)(α^(n+1) − α φ(α)^n)/(n k (1 − α^(n+1)))``."""
    phi_a = phi_closed_form(a2, k, a)
    return (1 + n * c1) * (a ** (n + 1) - a * phi_a**n) / (n * k * (1 - a ** (n + 1)))


def horizontal_ewif(alphas: Sequence[sympy.Expr], costs: Sequence[sympy.Expr]) -> sympy.Expr:
    """Theorem 4.5: ``(Σ_{i=0}^{k} Π_{j=1}^{i} α_j)/(1 + Σ c_i)``."""
    numerator = sum((sympy.Mul(*alphas[:i]) for i in range(len(alphas) + 1)), sympy.S.Zero)
    return numerator / (1 + sympy.Add(*costs))


def horizontal_gradient(
    alphas: Sequence[sympy.Expr], costs: Sequence[sympy.Expr]
) -> list[sympy.Expr]:
    """Corollary 4.6 as the paper states it:
    ``dT/dα_l = (Σ_{i=l}^{k} Π_{j≤i, j≠l} α_j)/(1 + Σ c_i)`` for ``l = 1..k``."""
    k = len(alphas)
    denominator = 1 + sympy.Add(*costs)
    return [
        sympy.Add(*(sympy.Mul(*alphas[:pos], *alphas[pos + 1 : i]) for i in range(pos + 1, k + 1)))
        / denominator
        for pos in range(k)  # position l = pos + 1
    ]


def prove_phi_closed_form(k: int | None = None) -> bool:
    """Theorem 4.1: the coefficient polynomial equals the closed form (symbolic α, x;
    symbolic integer k ≥ 0 when ``k`` is None, proved for ``αx ≠ 1``)."""
    if k is not None:
        return sympy.cancel(phi_polynomial(alpha, k) - phi_closed_form(alpha, k)) == 0
    ks = sympy.Symbol("k", integer=True, nonnegative=True)
    poly = phi_polynomial(alpha, ks).doit()
    difference = sympy.piecewise_fold(poly - phi_closed_form(alpha, ks))
    return _generic_branch_is_zero(difference)


def prove_phi_mean(k: int | None = None) -> bool:
    """``φ'_{α,k}(1) = (1 − α^(k+1))/(1 − α)`` (symbolic k when ``k`` is None)."""
    kk = sympy.Symbol("k", integer=True, nonnegative=True) if k is None else k
    slope = sympy.diff(phi_closed_form(alpha, kk), x).subs(x, 1)
    return sympy.simplify(slope - (1 - alpha ** (kk + 1)) / (1 - alpha)) == 0


def prove_T_monomial(j: int) -> bool:
    """``T_α(x^j) = φ'_{α,j}(1)``: the operator gives the mean tokens of a j-token review."""
    mean = sympy.diff(phi_polynomial(alpha, j), x).subs(x, 1)
    return sympy.cancel(T_alpha(alpha, x**j) - mean) == 0


def prove_phi_gap(k: int) -> bool:
    """Corollary 4.4's core: ``α − φ_{α2,k}(α) = (1 − α) Σ_{i=1}^{k} (α α2)^i``."""
    gap = (1 - alpha) * sympy.Add(*((alpha * alpha2) ** i for i in range(1, k + 1)))
    return sympy.cancel(alpha - phi_polynomial(alpha2, k, alpha) - gap) == 0


def prove_c2_threshold(k: int, n: int) -> bool:
    """Solving ``vertical_ewif = sd_ewif(α, n, c1)`` for ``c2`` gives exactly one root,
    :func:`vertical_c2_threshold`."""
    c1, c2 = sympy.symbols("c1 c2", nonnegative=True)
    equation = sympy.numer(
        sympy.together(vertical_ewif(alpha, alpha2, k, n, c1, c2) - sd_ewif(alpha, n, c1))
    )
    roots = sympy.solve(equation, c2)
    target = vertical_c2_threshold(alpha, alpha2, k, n, c1)
    return len(roots) == 1 and sympy.cancel(roots[0] - target) == 0


def prove_horizontal_gradient(k: int) -> bool:
    """Corollary 4.6: the derivatives of Theorem 4.5 equal the paper's closed forms, and
    Theorem 4.5 with equal α, c is Corollary 4.2."""
    alphas = sympy.symbols(f"a1:{k + 1}", positive=True)
    costs = sympy.symbols(f"c1:{k + 1}", nonnegative=True)
    ewif = horizontal_ewif(alphas, costs)
    closed = horizontal_gradient(alphas, costs)
    gradient_ok = all(
        sympy.cancel(sympy.diff(ewif, a) - g) == 0 for a, g in zip(alphas, closed, strict=True)
    )
    c = sympy.Symbol("c", nonnegative=True)
    equal = ewif.subs({**dict.fromkeys(alphas, alpha), **dict.fromkeys(costs, c)})
    return gradient_ok and sympy.cancel(equal - sd_ewif(alpha, k, c)) == 0


def _generic_branch_is_zero(expr: sympy.Expr) -> bool:
    """True iff the ``otherwise`` branch of a (folded) Piecewise simplifies to 0."""
    if isinstance(expr, sympy.Piecewise):
        expr = expr.args[-1].expr
    return sympy.simplify(expr) == 0
