"""The numerics search, staged against exhaustive, side by side in one run.

Both measure the same family on the same measuring prompts with ``dtype="auto"`` and
``threads="auto"`` (:mod:`realrun.numerics`):

* ``exhaustive`` — every candidate ``(dtype, threads)`` gets the full cost curve (all
  rounds) and its batch-invariance check (α once, as in the staged search; the search
  before the stages also measured α once per dtype, which this baseline leaves out, so the
  ratio below understates the saving);
* ``staged`` — the default search: the two-pass bound, the short curve, confirmation, and
  batch invariance only until one candidate is eligible.

It prints the wall time of each, their ratio, each one's choice and its two-line account,
and the score of every candidate in both; ``--json PATH`` writes it all with the CPU.

Run: ``.venv/bin/python benchmarks/numerics_search.py MODEL [MODEL ...] [--mag]
[--limit 8] [--json PATH]`` (e.g. the Qwen2.5-Coder 0.5B GGUF with ``--mag``, as
``benchmarks/fetch_weights.py --models qwen-0.5b`` caches it). About 15 min for a 0.5B model
on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from realrun.numerics import Measured, measure_numerics
from realrun.pipeline import cpu_description, split_prompts
from simulate.decoder.sampling import Decoding


def search(models: list[str], mag: bool, limit: int, exhaustive: bool) -> tuple[Measured, float]:
    """One search over the first ``limit`` prompts; (what it measured, wall seconds)."""
    measuring, _ = split_prompts("all", limit, None, held_out=False)
    start = time.perf_counter()
    measured = measure_numerics(
        models,
        measuring,
        mag=mag,
        bigram=None,
        device="cpu",
        dtype="auto",
        threads="auto",
        max_new_tokens=32,
        leniences=(1.0, 2.0, 3.0, 5.0),
        decoding=Decoding(),
        k_max=12,
        exhaustive=exhaustive,
        progress=False,
    )
    return measured, time.perf_counter() - start


def record(measured: Measured, seconds: float) -> dict:
    return {
        "seconds": seconds,
        "choice": {"dtype": measured.family.dtype, "threads": measured.threads},
        "summary": list(measured.summary),
        "trials": [t.to_dict() for t in measured.trials],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="target first, then drafters")
    parser.add_argument("--mag", action="store_true", help="append Max-Gram")
    parser.add_argument("--limit", type=int, default=8, help="measuring prompts (default: 8)")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument(
        "--exhaustive-from",
        type=Path,
        help="take the exhaustive search from this earlier --json file (same machine, same "
        "models) instead of running it again",
    )
    args = parser.parse_args(argv)
    runs = {}
    if args.exhaustive_from:
        runs["exhaustive"] = json.loads(args.exhaustive_from.read_text())["exhaustive"]
    for name, exhaustive in (("exhaustive", True), ("staged", False)):
        if name in runs:
            continue
        measured, seconds = search(args.models, args.mag, args.limit, exhaustive)
        runs[name] = record(measured, seconds)
        del measured
        print(f"{name}: {seconds:.0f} s, chose {runs[name]['choice']}")
        print(*("  " + line for line in runs[name]["summary"]), sep="\n")
        for t in runs[name]["trials"]:
            score = t.get("predicted_tokens_per_s", t.get("upper_bound_tokens_per_s"))
            print(f"    {t['dtype']:>9} x {t['threads']}  {t['stage']:<11}  {score:.2f} tokens/s")
    ex, st = runs["exhaustive"], runs["staged"]
    print(
        f"staged / exhaustive wall time: {st['seconds'] / ex['seconds']:.3f}; "
        f"same choice: {ex['choice'] == st['choice']}"
    )
    if args.json:
        out = {
            "models": [Path(m).name for m in args.models],
            "mag": args.mag,
            "measuring_prompts": args.limit,
            "cpu": cpu_description(),
            **runs,
        }
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
