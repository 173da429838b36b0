"""Does counting passes explain the walltime? Re-price a results file with the measured cost curve.

``realrun.measure`` fits one affine line ``t(m) = a + b·m`` per model, which ewif needs. On
CPUs the measured median pass times ``t(m)`` (stored in the results file's model set) are
concave, so this script re-prices the passes a run actually counted
(``metadata.counted_passes``: passes and positions per model and method) with the measured
curve itself, linearly interpolated at each model's mean positions per pass:

    SWI_curve = tokens · t_target(1) / Σ_models passes · t_model(positions / passes)

and prints it next to the measured speed-up, ewif's prediction and the affine SWI. Exact
for a model whose passes all have one size (the target of SD with a fixed k); a mean over
mixed sizes of a concave curve slightly over-charges (Jensen).

Usage: ``python benchmarks/realrun_calibration.py realrun/data/cpu_results_qwen.json``
"""

from __future__ import annotations

import sys

import numpy as np

from ewif import results as results_io
from ewif.io import ModelSet


def curve_swi(results: results_io.Results) -> dict[str, float]:
    """Method name -> SWI re-priced with the measured cost curve (methods with counts)."""
    ms = ModelSet.from_dict(results.metadata["model_set"])
    timing = ms.metadata["timing"]
    target = ms.models[0]
    t1 = _seconds(timing[target])[0]
    out = {}
    for m in results.methods:
        counted = results.metadata.get("counted_passes", {}).get(m.name)
        if not counted or not m.tokens:
            continue
        seconds = 0.0
        for model, c in counted.items():
            if not c["passes"]:
                continue
            grid = np.asarray(timing[model]["m"], dtype=float)
            med = np.asarray(_seconds(timing[model]), dtype=float)
            # a Max-Gram call proposing k tokens was timed at k, like a pass of k positions
            seconds += c["passes"] * float(np.interp(c["positions"] / c["passes"], grid, med))
        out[m.name] = m.tokens * t1 / seconds
    return out


def _seconds(fit: dict) -> list[float]:
    """Per-m pass times of a fit record (``median_seconds`` in files written before
    ``realrun.measure`` switched to the fastest of its repeats)."""
    return fit["seconds"] if "seconds" in fit else fit["median_seconds"]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.splitlines()[-1], file=sys.stderr)
        return 2
    res = results_io.load(argv[0])
    curve = curve_swi(res)
    print(f"{'method':<28} {'measured':>8} {'ewif':>7} {'SWI affine':>10} {'SWI curve':>9} "
          f"{'|curve/meas-1|':>14}")
    for m in res.methods:
        c = curve.get(m.name)
        err = "-" if c is None or not m.speedup else f"{100 * abs(c / m.speedup - 1):.1f}%"
        print(f"{m.name:<28} {m.speedup or 0:8.3f} "
              f"{'-' if m.predicted_speedup is None else f'{m.predicted_speedup:.3f}':>7} "
              f"{'-' if m.swi is None else f'{m.swi:.3f}':>10} "
              f"{'-' if c is None else f'{c:.3f}':>9} {err:>14}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

