"""Vectorised ``sd_ewif`` / ``horizontal_ewif`` versus per-point Python loops, side by side.

One run, same random parameter points, two per-point baselines:

* ``api loop``: the public function called once per point, ``[sd_ewif(a, k, c) for …]``
  (what one writes without broadcasting; validation included). Timed on the first
  ``--loop-points`` points and reported per point.
* ``bare loop``: the same cancellation-free formula written as plain Python floats
  (``math.expm1``/``math.log1p``, no validation) over all points — the strictest baseline.

Times are process CPU times (best of repeats), so other jobs on a shared machine distort
them less. The speed-up is (loop time per point) / (vectorised time per point); results are
checked to agree with the vectorised ones. Ctrl-C prints the measurements finished so far.

    python benchmarks/bench_ewif_vectorised.py [--points 1000000] [--loop-points 20000] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable

import numpy as np

from ewif import horizontal_ewif, sd_ewif


def sd_point(alpha: float, k: int, c: float) -> float:
    """Corollary 4.2 for one point: ``Σ_{i≤k} α^i / (1 + kc)`` in the expm1/log1p form."""
    gap = 1.0 - alpha
    if k == 0:
        tokens = 1.0
    elif gap == 0.0:
        tokens = k + 1.0
    elif gap == 1.0:
        tokens = 1.0
    else:
        tokens = -math.expm1((k + 1) * math.log1p(-gap)) / gap
    return tokens / (1.0 + k * c)


def horizontal_point(alphas: list[float], costs: list[float]) -> float:
    """Theorem 4.5 for one cascade: ``Σ_i Π_{j≤i} α_j / (1 + Σ c_i)``."""
    numerator, prefix = 1.0, 1.0
    for a in alphas:
        prefix *= a
        numerator += prefix
    return numerator / (1.0 + sum(costs))


def timed(fn: Callable[[], object], repeats: int = 1) -> tuple[float, object]:
    best, result = math.inf, None
    for _ in range(repeats):
        start = time.process_time()  # CPU time: robust to other processes on a shared machine
        result = fn()
        best = min(best, time.process_time() - start)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--loop-points", type=int, default=20_000, help="points for the api loop")
    parser.add_argument("--positions", type=int, default=4, help="k of the horizontal cascade")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args()
    if min(args.points, args.loop_points, args.positions) < 1:
        parser.error("--points, --loop-points and --positions must be >= 1")

    rng = np.random.default_rng(args.seed)
    alpha = rng.uniform(0.0, 1.0, args.points)
    k = rng.integers(0, 21, args.points)
    c = rng.uniform(0.0, 0.5, args.points)
    h_alphas = rng.uniform(0.0, 1.0, (args.points, args.positions))
    h_costs = rng.uniform(0.0, 0.5, (args.points, args.positions))

    n_api = min(args.loop_points, args.points)
    rows: list[dict] = []
    try:
        t_vec, vec = timed(lambda: sd_ewif(alpha, k, c), repeats=3)
        a_list, k_list, c_list = alpha.tolist(), k.tolist(), c.tolist()
        points = list(zip(a_list, k_list, c_list, strict=True))
        t_api, api = timed(lambda: [sd_ewif(a, kk, cc) for a, kk, cc in points[:n_api]])
        t_bare, bare = timed(lambda: [sd_point(a, kk, cc) for a, kk, cc in points], repeats=2)
        rows.append(_row("sd_ewif", vec, t_vec, (api, t_api), (bare, t_bare)))

        t_vec, vec = timed(lambda: horizontal_ewif(h_alphas, h_costs), repeats=3)
        cascades = list(zip(h_alphas.tolist(), h_costs.tolist(), strict=True))
        t_api, api = timed(lambda: [horizontal_ewif(a, cc) for a, cc in cascades[:n_api]])
        t_bare, bare = timed(lambda: [horizontal_point(a, cc) for a, cc in cascades], repeats=2)
        rows.append(_row("horizontal_ewif", vec, t_vec, (api, t_api), (bare, t_bare)))
    except KeyboardInterrupt:
        print("interrupted; partial results:")

    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        f"{args.points} points ({args.positions} positions for horizontal_ewif); "
        f"api loop timed on {n_api} points"
    )
    print(
        f"{'function':<16} {'vector ns/pt':>12} {'api ns/pt':>10} {'api x':>8} "
        f"{'bare ns/pt':>10} {'bare x':>7} {'max rel diff':>12}"
    )
    for r in rows:
        print(
            f"{r['function']:<16} {r['vectorised_ns']:>12.1f} {r['api_loop_ns']:>10.0f} "
            f"{r['api_speedup']:>7.0f}x {r['bare_loop_ns']:>10.0f} {r['bare_speedup']:>6.1f}x "
            f"{r['max_rel_diff']:>12.1e}"
        )
    return 0


def _row(name: str, vec: np.ndarray, t_vec: float, api: tuple, bare: tuple) -> dict:
    (api_values, t_api), (bare_values, t_bare) = api, bare
    per = {
        "vectorised_ns": 1e9 * t_vec / vec.size,
        "api_loop_ns": 1e9 * t_api / len(api_values),
        "bare_loop_ns": 1e9 * t_bare / len(bare_values),
    }
    n_api = len(api_values)
    diff = max(
        float(np.max(np.abs(np.asarray(bare_values) - vec) / vec)),
        float(np.max(np.abs(np.asarray(api_values) - vec[:n_api]) / vec[:n_api])),
    )
    return {
        "function": name,
        "points": int(vec.size),
        **per,
        "api_speedup": per["api_loop_ns"] / per["vectorised_ns"],
        "bare_speedup": per["bare_loop_ns"] / per["vectorised_ns"],
        "max_rel_diff": diff,
    }


if __name__ == "__main__":
    raise SystemExit(main())
