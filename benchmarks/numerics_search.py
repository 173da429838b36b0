"""The numerics search, staged against exhaustive, on the same family and prompts.

Both measure the same family on the same measuring prompts with ``dtype="auto"`` and
``threads="auto"`` (:mod:`realrun.numerics`):

* ``exhaustive`` — every candidate ``(dtype, threads)`` gets the full cost curve (all
  rounds) and its batch-invariance check; the choice is the highest-scoring eligible one;
* ``staged`` — the default search: the quick-look bound, the short curve, batch invariance
  before more rounds, a runner-up's rounds one at a time while it is not statistically
  separated from the leader, and the leader's rounds until its AR unit is precise
  (:mod:`realrun.numerics_rounds`).

It prints the wall time of each, their ratio, each one's choice and its account, and every
candidate's score and the rule that excluded it; ``--json PATH`` writes it all with the CPU
and each search's wall time by kind of work (loading, quick look, α, curves, batch
invariance). The exhaustive search of a three-model family takes longer than one timing
run should hold the machine (about 22 min on a 2-core EPYC), so ``--dtypes`` and
``--threads`` give it a reduced candidate set (the staged search still searches every
candidate): the two then agree when the staged choice is in that set, the exhaustive search
chooses it too, and every candidate outside the set was stopped by the staged search's
quick-look bound or assured bound (upper bounds of its rank, so the exhaustive search could
not have chosen it either) or measured in full by it and scored lower (``lower score``);
``covered`` and ``agree_over_all_candidates`` in the output say which (a candidate stopped as
``separated`` is a statistical judgement, not a bound, and leaves the question open). Where the
choices differ, ``staged_choice_in_exhaustive`` says whether the exhaustive search measured
the staged choice separated below its own or within their errors (a tie, which a machine whose
speed drifts between the two searches may break either way).
``--exhaustive-from FILE ...`` joins earlier exhaustive runs (same machine, models and
prompts): the choice is then the highest-scoring eligible candidate over all of them.

``--prompts all`` (the default, as of ``csd measure``): the ten categories dealt in turn, so
the first 8 measuring prompts are one each of math, mc, code, writing, translation,
summary, qa and reasoning; ``classic`` is the three sets the shipped runs measured on.

Run: ``.venv/bin/python benchmarks/numerics_search.py MODEL [MODEL ...] [--mag]
[--limit 8] [--json PATH]`` (target first; e.g. the Qwen2.5-Coder 1.5B and 0.5B GGUFs with
``--mag``, as ``benchmarks/fetch_weights.py`` caches them).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from realrun.numerics import CPU_DTYPES, Measured, measure_numerics
from realrun.numerics_choice import CHOICE_RULES, DEFAULT_CHOICE
from realrun.numerics_rounds import separation
from realrun.pipeline import cpu_description, split_prompts
from simulate.decoder.sampling import Decoding


def search(args: argparse.Namespace, exhaustive: bool) -> tuple[Measured, float]:
    """One search over the first ``--limit`` prompts (the exhaustive one over ``--dtypes`` x
    ``--threads`` when given); (what it measured, wall seconds)."""
    measuring, _ = split_prompts(args.prompts, args.limit, None, held_out=False)
    reduced = exhaustive and (args.dtypes or args.threads)
    start = time.perf_counter()
    measured = measure_numerics(
        args.models,
        measuring,
        mag=args.mag,
        bigram=None,
        device="cpu",
        dtype=tuple(args.dtypes or CPU_DTYPES) if reduced else "auto",
        threads=tuple(args.threads or range(os.cpu_count() or 1, 0, -1)) if reduced else "auto",
        max_new_tokens=args.max_new_tokens,
        leniences=(1.0, 2.0, 3.0, 5.0),
        decoding=Decoding(),
        k_max=12,
        exhaustive=exhaustive,
        batch_invariance=args.batch_invariance,
        numerics_choice=args.numerics_choice,
        progress=False,
    )
    return measured, time.perf_counter() - start


def record(measured: Measured, seconds: float) -> dict:
    meta = measured.model_set.metadata
    return {
        "seconds": seconds,
        "choice": {"dtype": measured.family.dtype, "threads": measured.threads},
        "summary": list(measured.summary),
        "seconds_by_work": meta.get("numerics_seconds"),
        "trials": [t.to_dict() for t in measured.trials],
    }


def joined(parts: list[dict], choice: str) -> dict:
    """Partial exhaustive runs (over some dtypes each) as one: every trial, the summed wall
    time, the highest-ranked eligible candidate as the choice (``choice``: the rule; a trial
    recorded before the assured rule existed ranks by its score under it too — the score
    bounds the assured throughput from above and equals it for autoregressive decoding, so
    an autoregressive choice is exact)."""
    trials = [t for p in parts for t in p["trials"]]
    eligible = [t for t in trials if t.get("eligible")] or trials
    rank = "assured_tokens_per_s" if choice == "assured" else "predicted_tokens_per_s"
    best = max(eligible, key=lambda t: t.get(rank, t["predicted_tokens_per_s"]))
    return {
        "seconds": sum(p["seconds"] for p in parts),
        "choice": {"dtype": best["dtype"], "threads": best["threads"]},
        "summary": [line for p in parts for line in p["summary"]],
        "seconds_by_work": [p.get("seconds_by_work") for p in parts],
        "trials": trials,
        "runs": len(parts),
    }


def compared(staged: dict, exhaustive: dict) -> dict:
    """Wall times and choices of the two searches, and how the candidates the exhaustive search
    did not measure (a reduced set) left the staged one (module docstring)."""
    covered = {(t["dtype"], t["threads"]) for t in exhaustive["trials"]}
    outside = {
        f"{t['dtype']} x {t['threads']}": t.get("excluded_by")
        for t in staged["trials"]
        if (t["dtype"], t["threads"]) not in covered
    }
    return {
        "staged_s": staged["seconds"],
        "exhaustive_s": exhaustive["seconds"],
        "ratio": staged["seconds"] / exhaustive["seconds"],
        "same_choice": staged["choice"] == exhaustive["choice"],
        "staged_choice_in_exhaustive": None
        if staged["choice"] == exhaustive["choice"]
        else as_measured(staged["choice"], exhaustive),
        "covered": sorted(f"{d} x {t}" for d, t in covered),
        "not_covered_staged_exclusion": outside,
        "agree_over_all_candidates": staged["choice"] == exhaustive["choice"]
        and all(
            why in ("quick-look bound", "assured bound", "lower score") for why in outside.values()
        ),
    }


def as_measured(choice: dict, exhaustive: dict) -> dict | None:
    """How the exhaustive search measured the staged search's choice against its own: both
    ranks (the choice rule's throughput, :attr:`realrun.numerics_trials.NumericsTrial.rank`)
    with their timing errors, and their :func:`realrun.numerics_rounds.separation` (None: the
    two are within their errors — a tie either search may break either way); None when the
    exhaustive search did not measure it."""
    trials = {(t["dtype"], t["threads"]): t for t in exhaustive["trials"]}
    ours = trials.get((choice["dtype"], choice["threads"]))
    theirs = trials[(exhaustive["choice"]["dtype"], exhaustive["choice"]["threads"])]
    if ours is None or "predicted_tokens_per_s" not in ours:
        return None
    (r1, se1), (r2, se2) = (_rank(t) for t in (ours, theirs))
    return {
        "rank_tokens_per_s": r1,
        "rank_se": se1,
        "exhaustive_choice_rank_tokens_per_s": r2,
        "exhaustive_choice_rank_se": se2,
        "separation": separation(r1, se1, ours["rounds"], r2, se2, theirs["rounds"]),
    }


def _rank(trial: dict) -> tuple[float, float]:
    """A recorded trial's rank and its timing error (``se(S)·rank/S``)."""
    score = trial["predicted_tokens_per_s"]
    rank = (
        trial.get("assured_tokens_per_s", score) if trial.get("choice_rule") == "assured" else score
    )
    return rank, trial["score_stderr_tokens_per_s"] * rank / score


def show(name: str, run: dict) -> None:
    print(f"{name}: {run['seconds']:.0f} s, chose {run['choice']}")
    print(*("  " + line for line in run["summary"]), sep="\n")
    for t in run["trials"]:
        score = t.get("predicted_tokens_per_s", t.get("upper_bound_tokens_per_s"))
        why = t.get("excluded_by") or "chosen"
        print(
            f"    {t['dtype']:>9} x {t['threads']}  {t['stage']:<11}  {t['rounds']:>2} rounds "
            f"({t['stopped']})  {score:6.2f} tokens/s  {why}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="target first, then drafters")
    parser.add_argument("--mag", action="store_true", help="append Max-Gram")
    parser.add_argument("--prompts", default="all")
    parser.add_argument("--limit", type=int, default=8, help="measuring prompts (default: 8)")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--batch-invariance", choices=("strict", "near-ties"), default="strict")
    parser.add_argument("--numerics-choice", choices=tuple(CHOICE_RULES), default=DEFAULT_CHOICE)
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument(
        "--only", choices=("staged", "exhaustive"), help="run one search (default: both)"
    )
    parser.add_argument(
        "--dtypes", nargs="+", choices=CPU_DTYPES, help="exhaustive over these dtypes only"
    )
    parser.add_argument(
        "--threads", nargs="+", type=int, help="exhaustive over these thread counts only"
    )
    parser.add_argument(
        "--exhaustive-from",
        type=Path,
        nargs="+",
        help="take the exhaustive search from these earlier --json files (same machine, models "
        "and prompts; partial runs over some dtypes are joined) instead of running it",
    )
    args = parser.parse_args(argv)
    runs = {}
    if args.exhaustive_from:
        runs["exhaustive"] = joined(
            [json.loads(p.read_text())["exhaustive"] for p in args.exhaustive_from],
            args.numerics_choice,
        )
    todo = [args.only] if args.only else ["exhaustive", "staged"]
    for name in [n for n in todo if n not in runs]:
        runs[name] = record(*search(args, name == "exhaustive"))
        show(name, runs[name])
    if "exhaustive" in runs and "staged" in runs:
        runs["comparison"] = compared(runs["staged"], runs["exhaustive"])
        print(json.dumps(runs["comparison"], indent=1))
    if args.json:
        out = {
            "models": [Path(m).name for m in args.models],
            "mag": args.mag,
            "prompts": args.prompts,
            "measuring_prompts": args.limit,
            "max_new_tokens": args.max_new_tokens,
            "batch_invariance": args.batch_invariance,
            "numerics_choice": args.numerics_choice,
            "cpu": cpu_description(),
            **runs,
        }
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
