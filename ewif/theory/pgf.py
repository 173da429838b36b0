"""Probability generating functions of non-negative integer counts.

A ``Pgf`` holds the full coefficient vector ``p`` of ``g(x) = Σ_i p_i x^i`` with
``p_i = P(X = i)``: nothing is truncated, so products (sums of independent counts),
powers and compositions are exact up to floating-point rounding.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from ewif.base import validate
from ewif.base.arithmetic import padded_add, pmf_power

if TYPE_CHECKING:
    import sympy

_SUM_TOLERANCE = 1e-9
_ROUNDING = 1e-12


class Pgf:
    """The PGF ``g(x) = Σ_i p_i x^i`` of a count ``X`` with ``P(X = i) = p_i``.

    Immutable. ``coefficients`` must be non-negative and sum to 1 (within 1e-9).
    ``g * h`` is the PGF of ``X + Y`` for independent ``X ~ g, Y ~ h``; ``g ** n`` that
    of ``X_1 + … + X_n`` (i.i.d.); ``g.compose(h)`` is ``g(h(x))``, the count of a
    ``g``-distributed number of independent ``h``-counts.
    """

    __slots__ = ("_p",)

    def __init__(self, coefficients: Iterable[float] | np.ndarray) -> None:
        p = np.asarray(coefficients, dtype=float)
        # Products and powers of exact PGFs can round a probability to 1 + 2e-16 or -1e-17;
        # such rounding is clipped, anything further outside [0, 1] is refused.
        if p.size and p.min() >= -_ROUNDING and p.max() <= 1.0 + _ROUNDING:
            p = np.clip(p, 0.0, 1.0)
        p = validate.probabilities("coefficients", p)
        if p.ndim != 1 or p.size == 0:
            raise ValueError(f"coefficients must be a non-empty 1-D array, got shape {p.shape}")
        total = float(p.sum())
        if abs(total - 1.0) > _SUM_TOLERANCE:
            raise ValueError(f"coefficients must sum to 1, got sum {total!r}")
        nonzero = np.flatnonzero(p)
        p = p[: nonzero[-1] + 1].copy()
        p.setflags(write=False)
        self._p = p

    @classmethod
    def point(cls, value: int) -> Pgf:
        """The PGF ``x^value`` of the constant ``value``."""
        value = validate.count("value", value)
        p = np.zeros(value + 1)
        p[value] = 1.0
        return cls(p)

    @property
    def coefficients(self) -> np.ndarray:
        """Read-only ``p`` with ``p[i] = P(X = i)``; the last entry is non-zero."""
        return self._p

    @property
    def max_value(self) -> int:
        """The largest value with non-zero probability."""
        return self._p.size - 1

    def pmf(self, i: int | np.ndarray) -> float | np.ndarray:
        """``P(X = i)`` (0 outside the support)."""
        idx = np.asarray(i)
        inside = (idx >= 0) & (idx < self._p.size)
        out = np.where(inside, self._p[np.clip(idx, 0, self._p.size - 1)], 0.0)
        return float(out) if out.ndim == 0 else out

    def __call__(self, x: float | np.ndarray) -> float | np.ndarray:
        """``g(x) = E[x^X]`` at a point or elementwise over an array (Horner)."""
        out = np.polynomial.polynomial.polyval(np.asarray(x, dtype=float), self._p)
        return float(out) if np.ndim(out) == 0 else out

    def mean(self) -> float:
        """``E[X] = g'(1)``."""
        return float(np.arange(self._p.size) @ self._p)

    def variance(self) -> float:
        """``Var X = g''(1) + g'(1) − g'(1)²`` (computed as a central moment)."""
        i = np.arange(self._p.size)
        mu = float(i @ self._p)
        return float(((i - mu) ** 2) @ self._p)

    def __mul__(self, other: Pgf) -> Pgf:
        if not isinstance(other, Pgf):
            return NotImplemented
        return Pgf(np.convolve(self._p, other._p))

    def __pow__(self, n: int) -> Pgf:
        return Pgf(pmf_power(self._p, validate.count("n", n)))

    def compose(self, inner: Pgf) -> Pgf:
        """``g(h(x))``: the sum of ``X ~ g`` independent copies of ``Y ~ h``."""
        out = np.zeros(1)
        power = np.ones(1)
        for p_i in self._p:
            if p_i:
                out = padded_add(out, p_i * power)
            power = np.convolve(power, inner._p)
        return Pgf(out)

    def to_sympy(self, x: sympy.Symbol | None = None) -> sympy.Expr:
        """The polynomial ``Σ p_i x^i`` as a sympy expression (floats kept as given)."""
        import sympy  # imported here: sympy costs ~1 s at start-up of every `csd` command

        x = sympy.Symbol("x") if x is None else x
        return sympy.Add(*(sympy.Float(p) * x**i for i, p in enumerate(self._p) if p))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pgf) and np.array_equal(self._p, other._p)

    def __hash__(self) -> int:
        return hash(self._p.tobytes())

    def isclose(self, other: Pgf, atol: float = 1e-12) -> bool:
        """Coefficient-wise agreement within ``atol``."""
        n = max(self._p.size, other._p.size)
        return bool(np.allclose(_pad(self._p, n), _pad(other._p, n), rtol=0.0, atol=atol))

    def __repr__(self) -> str:
        shown = ", ".join(f"{p:.6g}" for p in self._p[:8])
        more = ", …" if self._p.size > 8 else ""
        return f"Pgf([{shown}{more}], mean={self.mean():.6g})"


def _pad(p: np.ndarray, n: int) -> np.ndarray:
    return np.concatenate([p, np.zeros(n - p.size)])
