"""Re-predict real runs with and without the catch-up pass priced (Theorem CU).

No model runs: every results file (default: the shipped ``realrun/data/cpu_results_*.json``;
or the files given) carries its model set, its measured speed-ups and, per method, the
acceptance the run itself saw. For every speculative method this prints, side by side:

* ``paper`` — EWIF with the paper's pass sizes (leaf passes ``m = 1``), what the run shipped;
* ``catch-up`` — the same with every timed drafter's catch-up pass (:mod:`ewif.kernel.catch_up`);
* both again with the run's acceptance at draft position 1 (single-drafter ``K = [[k]]`` only;
  for ``k > 1`` this differs from the accepted/reviewed ratio over all positions that
  ``csd realrun`` uses in ``metadata.prediction_with_run_acceptance``);
* ``swi`` — the run's counted passes priced on the measured curve (no acceptance model at all),
  the best any pass-size accounting can do on these curves;

and the median ``|predicted / measured − 1|`` of each column; the prediction the file shipped
must equal one of the two accountings (the one its model set's ``catch_up`` flags select).
``--json PATH`` writes the rows. The runs shipped before the catch-up pass existed are in the
history: ``git show a2e2bac:realrun/data/cpu_results_qwen.json > old_qwen.json``.

Run: ``.venv/bin/python benchmarks/catch_up_repredict.py [FILE ...] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np

from ewif.files.model_set import ModelSet
from ewif.kernel.cascade import Cascade

DATA = Path(__file__).resolve().parent.parent / "realrun" / "data"
COLUMNS = ("paper", "catch_up", "paper_run_alpha", "catch_up_run_alpha", "swi")


def timed_drafters(model_set: ModelSet) -> list[bool]:
    """The models whose passes the run timed (KV-cached token models): they catch up."""
    timing = model_set.metadata.get("timing", {})
    return [i > 0 and "seconds" in timing.get(name, {}) for i, name in enumerate(model_set.models)]


def with_alpha(cascade: Cascade, alpha: float) -> Cascade:
    """``cascade`` with its one drafter's acceptance replaced by ``alpha``."""
    a = np.array(cascade.alpha, dtype=float)
    a[0, 1] = alpha
    return cascade.with_alpha(a)


def rows_of(path: Path) -> list[dict]:
    result = json.loads(path.read_text())
    model_set = ModelSet.from_dict(result["metadata"]["model_set"], source=path.name)
    flags = timed_drafters(model_set)
    rows = []
    for method in result["methods"]:
        if method["kind"] not in ("sd", "csd"):
            continue
        cfg = method["config"]
        chosen = [flags[model_set.index(m)] for m in cfg["models"]]
        paper = model_set.to_cascade(
            cfg["models"],
            np.array(cfg["K"]),
            cfg["lenience"],
            catch_up=[False] * len(chosen),
        )
        caught = model_set.to_cascade(
            cfg["models"], np.array(cfg["K"]), cfg["lenience"], catch_up=chosen
        )
        row = {
            "run": path.stem,
            "method": method["name"],
            "measured": method["speedup"],
            "paper": paper.ewif(),
            "catch_up": caught.ewif(),
            "swi": method["swi"],
            "shipped_prediction": method["predicted_speedup"],
            "flags_set": model_set.catch_up is not None,
        }
        run_alpha = method.get("acceptance_by_position", {}).get("measured")
        if len(cfg["K"]) == 1 and run_alpha:
            row["paper_run_alpha"] = with_alpha(paper, run_alpha[0]).ewif()
            row["catch_up_run_alpha"] = with_alpha(caught, run_alpha[0]).ewif()
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="results files (default: shipped)")
    parser.add_argument("--json", type=Path, help="write the rows and medians here")
    args = parser.parse_args()
    files = args.files or sorted(DATA.glob("cpu_results_*.json"))
    rows = [row for path in files for row in rows_of(path)]
    header = f"{'run':<28} {'method':<22} {'measured':>8} " + " ".join(f"{c:>18}" for c in COLUMNS)
    print(header)
    for row in rows:
        cells = []
        for c in COLUMNS:
            v = row.get(c)
            cells.append(
                f"{'—':>18}" if v is None else f"{v:>7.3f}× ({v / row['measured'] - 1:+6.1%})"
            )
        print(f"{row['run']:<28} {row['method']:<22} {row['measured']:>7.3f}× " + " ".join(cells))
    medians = {
        c: statistics.median(abs(r[c] / r["measured"] - 1) for r in rows if c in r) for c in COLUMNS
    }
    print("median |pred/meas − 1|:  " + "  ".join(f"{c} {v:.1%}" for c, v in medians.items()))
    for row in rows:  # the file's own prediction is one of the two accountings
        expected = row["catch_up"] if row["flags_set"] else row["paper"]
        assert abs(expected - row["shipped_prediction"]) < 1e-9, row
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "median_abs_error": medians}, indent=1))


if __name__ == "__main__":
    main()
