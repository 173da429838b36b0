"""Exact cascade evaluation and the optimizer, measured side by side in one run.

1. one 3-drafter configuration (paper's Table 5 GSM8K setting) evaluated exactly: median time;
2. ``csd recommend`` (default preset, the paper's full space: 27,000 K × 3 leniences) wall time,
   as a subprocess (includes interpreter start-up and imports);
3. the optimizer versus evaluating every configuration of that space with the same evaluator
   (``Cascade(...).ewif()``): the per-configuration cost is measured on a random sample of
   configurations of the space and multiplied by its size (the full loop takes about a minute);
4. the same paper space with measured-style pass-cost curves (``cost_curve``, 64 points,
   non-monotone tile bumps, non-affine target): the exact exhaustive search (the target's
   review cost by the backward pass) and, with only the drafters curved, Dinkelbach.

Run: ``.venv/bin/python benchmarks/bench_cascade.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ewif.files.presets import load_preset
from ewif.search.optimizer import optimize
from ewif.search.space import paper_bounds


def main(sample: int = 2000) -> None:
    ms = load_preset("flan-t5-ms")
    K = [[8, 13, 10], [0, 1, 10], [0, 0, 10]]
    times = []
    for _ in range(500):
        t = time.perf_counter()
        ms.to_cascade(K=K, lenience=3).ewif()
        times.append(time.perf_counter() - t)
    med = statistics.median(times) * 1e3
    print(
        f"1. exact evaluation of one 3-drafter cascade: median {med:.3f} ms"
        f" (p90 {np.percentile(times, 90) * 1e3:.3f} ms, 500 runs)"
    )

    from ewif.cli import main as csd_main

    t = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        csd_main(["recommend"])
    in_process = time.perf_counter() - t
    csd = Path(sys.executable).with_name("csd")
    t = time.perf_counter()
    subprocess.run([str(csd), "recommend"], check=True, capture_output=True)
    wall = time.perf_counter() - t
    print(
        f"2. `csd recommend` (81,000 configurations): {wall:.2f} s wall as a subprocess "
        f"(incl. interpreter start-up and imports), {in_process:.2f} s in-process"
    )

    t = time.perf_counter()
    res = optimize(ms, bounds=paper_bounds(), subsets=False, method="exhaustive")
    t_opt = time.perf_counter() - t
    t = time.perf_counter()
    res_d = optimize(ms, bounds=paper_bounds(), subsets=False, method="dinkelbach")
    t_dk = time.perf_counter() - t
    rng = np.random.default_rng(0)
    t = time.perf_counter()
    best = 0.0
    for _ in range(sample):
        k11, k12, k22 = rng.integers(1, 31, size=3)
        lenience = float(rng.choice(ms.leniences))
        Kc = [[k11, k12, 10], [0, k22, 10], [0, 0, 10]]
        best = max(best, ms.to_cascade(K=Kc, lenience=lenience).ewif())
    per = (time.perf_counter() - t) / sample
    brute = per * res.n_configurations
    print(
        f"3. optimizer exhaustive {t_opt:.3f} s, Dinkelbach {t_dk:.3f} s; "
        f"every configuration with Cascade: {per * 1e3:.3f} ms x {res.n_configurations:,} "
        f"= {brute:.1f} s "
        f"-> {brute / t_opt:.0f}x / {brute / t_dk:.0f}x faster"
    )
    assert abs(res.best.ewif - res_d.best.ewif) < 1e-12 and best <= res.best.ewif + 1e-12
    print(f"   optimum {res.best.describe()} EWIF {res.best.ewif:.6f}")

    curved = with_curves(ms, target_curved=True)
    t = time.perf_counter()
    rc = optimize(curved, bounds=paper_bounds(), subsets=False)
    t_curve = time.perf_counter() - t
    drafters_only = with_curves(ms, target_curved=False)
    t = time.perf_counter()
    rd = optimize(drafters_only, bounds=paper_bounds(), subsets=False, method="dinkelbach")
    t_dcurve = time.perf_counter() - t
    print(
        f"4. paper space with curves: non-affine target, {rc.method} {t_curve:.3f} s "
        f"(optimum {rc.best.describe()} EWIF {rc.best.ewif:.6f}); affine target, curved "
        f"drafters, dinkelbach {t_dcurve:.3f} s (EWIF {rd.best.ewif:.6f})"
    )


def with_curves(ms, target_curved: bool):
    """``ms`` with 64-point pass-cost curves: +0.3 % of the m = 1 cost per extra position and
    a 2 % bump at every 8th position (tile effects; not monotone); MaG stays free."""
    m = np.arange(1, 65)
    shape = 1 + 0.003 * (m - 1) + 0.02 * ((m % 8 == 1) & (m > 1))
    curves = [shape * c if c > 0 else np.zeros(1) for c in ms.cost]
    if not target_curved:
        curves[0] = np.array([1.0, 1.003])  # affine target (a line)
    return dataclasses.replace(ms, cost_curve=tuple(curves))


if __name__ == "__main__":
    main()
