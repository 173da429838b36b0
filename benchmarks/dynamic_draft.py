"""Would a dynamic draft length beat our fixed k? transformers' schedules replayed over measured
acceptance traces (:mod:`simulate.dynamic_draft`), side by side with the fixed k ewif chose.

Part 1 (no model runs): every shipped run whose model set carries acceptance traces; per
drafter, the replayed speed-up of

* ``fixed k*`` — plain SD at the k of highest exact EWIF (k = 1..12, what ``csd recommend``
  gives plain SD; the traces never chose it), and the best fixed k on the traces (hindsight);
* transformers' ``heuristic`` schedule from 5 (+2 after a fully accepted draft, −1 otherwise;
  kept across generations) and ``heuristic_transient`` (reset per generation);
* transformers 5.x's default without its threshold: 20 tokens, capped at the generation's end.

Part 2 (``--confidence``, runs the Qwen models, times nothing): teacher-forced traces *and* the
drafter's confidence of Qwen2.5-Coder-0.5B under the 1.5B target on ``--per-category`` prompts
of every shipped category (the measuring prompts of ``csd realrun --prompts all``), priced
with the cost curves of a shipped model set measured on this machine kind
(``--costs``, default the EPYC float16 run): fixed k*, transformers' default (20 tokens,
confidence 0.4), the heuristic schedule with and without the threshold, other thresholds;
overall and per category.

Usage::

    python benchmarks/dynamic_draft.py                      # part 1, seconds
    python benchmarks/dynamic_draft.py --confidence --per-category 2   # + part 2, minutes
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ewif.files import results as results_io
from ewif.files.bootstrap_data import BootstrapData
from ewif.files.categories import alpha_from_rows
from ewif.files.model_set import ModelSet
from simulate.dynamic_draft import Schedule, replay_schedule

DATA = Path(__file__).resolve().parents[1] / "realrun" / "data"
K_MAX = 12


def ewif_k(ms: ModelSet, drafter: str) -> int:
    """The k of plain SD with the highest exact EWIF (the set's catch-up flags)."""
    flags = None if ms.catch_up is None else [ms.catch_up[0], ms.catch_up[ms.index(drafter)]]
    values = [
        ms.to_cascade((ms.models[0], drafter), [[k]], catch_up=flags).ewif()
        for k in range(1, K_MAX + 1)
    ]
    return int(np.argmax(values)) + 1


def row(ms: ModelSet, drafter: str, schedule: Schedule, confidences=None) -> dict:
    """One schedule's replayed speed-up, its 90 % interval, mean draft and acceptance."""
    rep = replay_schedule(ms, drafter, schedule, confidences=confidences)
    low, high = rep.interval(replicates=300, seed=1)
    steps = rep.passes[:, 0].sum()
    drafted = (rep.passes[:, 0] * np.arange(rep.passes.shape[2])).sum()
    return {
        "schedule": schedule.describe(),
        "speedup": round(rep.speedup, 4),
        "interval": [round(low, 4), round(high, 4)],
        "tokens_per_step": round(float(rep.tokens.sum() / steps), 3),
        "mean_draft": round(float(drafted / steps), 3),
    }


def compare(ms: ModelSet, drafter: str, confidences=None, thresholds=()) -> list[dict]:
    """Every schedule of the module docstring for one drafter."""
    k = ewif_k(ms, drafter)
    fixed = [row(ms, drafter, Schedule.fixed(j)) for j in range(1, K_MAX + 1)]
    best = max(fixed, key=lambda r: r["speedup"])
    out = [
        {**fixed[k - 1], "schedule": f"fixed k*={k} (ewif)"},
        {**best, "schedule": best["schedule"] + " (hindsight)"},
    ]
    out += [
        row(ms, drafter, Schedule(5, "heuristic")),
        row(ms, drafter, Schedule(5, "heuristic_transient")),
        row(ms, drafter, Schedule(20, "constant")),
    ]
    if confidences is not None:
        out += [
            row(ms, drafter, Schedule.transformers_default(), confidences),
            row(ms, drafter, Schedule(5, "heuristic", 0.4), confidences),
            *(row(ms, drafter, Schedule(20, "constant", t), confidences) for t in thresholds),
        ]
    return out


def shipped() -> list[dict]:
    """Part 1 over every shipped run with traces."""
    out = []
    for path in sorted(DATA.glob("cpu_results_*.json")):
        run = results_io.load(path)
        ms = ModelSet.from_dict(run.metadata["model_set"], path.name)
        traces = None if ms.bootstrap is None else ms.bootstrap.acceptance_traces
        if not traces or run.decoding.get("temperature", 0.0) > 0:
            continue
        measured = {m.name: m.speedup for m in run.methods}
        for drafter in ms.models[1:]:
            if (1.0, 0, ms.index(drafter)) in traces:
                out.append(
                    {
                        "run": path.name,
                        "cpu": run.metadata.get("cpu", {}).get("model"),
                        "drafter": drafter,
                        "prompts": ms.bootstrap.prompts,
                        "measured_in_run": measured,
                        "schedules": compare(ms, drafter),
                    }
                )
    return out


def measured_with_confidence(costs: Path, per_category: int, max_new_tokens: int) -> dict:
    """Part 2: traces and confidences of Qwen 0.5B under 1.5B, priced by ``costs``."""
    import fetch_weights
    import torch

    from realrun.acceptance import measure_acceptance
    from realrun.confidence import draft_confidence
    from realrun.family import load_family
    from realrun.pipeline import split_prompts
    from realrun.prompts import CATEGORIES, encode
    from simulate.decoder.sampling import Decoding

    base = ModelSet.from_dict(results_io.load(costs).metadata["model_set"], costs.name)
    dtype = base.metadata.get("dtype", "float16")
    torch.set_num_threads(int(base.metadata.get("threads", 2)))
    keys = ["qwen-1.5b", "qwen-0.5b"]
    sources = fetch_weights.model_dirs(keys)
    family = load_family(sources, names=keys, device="cpu", dtype=dtype)
    prompts, _ = split_prompts("all", per_category * len(CATEGORIES), None, held_out=False)
    acc = measure_acceptance(
        family.chain,
        [encode(p, family.tokenizer) for p in prompts],
        max_new_tokens=max_new_tokens,
        leniences=(1.0,),
        decoding=Decoding(),
        eos_token_id=family.tokenizer.eos_token_id,
    )
    kept = [p for i, p in enumerate(prompts) if i not in set(acc.skipped)]
    traces = acc.traces()[(1.0, 0, 1)]
    conf = draft_confidence(family.chain[1], acc.contexts)
    two = _two_model_set(base, traces)
    from realrun.pipeline import cpu_description

    out = {
        "cpu": cpu_description(),
        "costs": costs.name,
        "dtype": dtype,
        "prompts": len(kept),
        "overall": compare(two, "qwen-0.5b", conf, (0.2, 0.6, 0.8)),
    }
    by = {}
    for kind in dict.fromkeys(p.kind for p in kept):
        idx = [i for i, p in enumerate(kept) if p.kind == kind]
        if len(idx) >= 2:
            sub = _two_model_set(base, [traces[i] for i in idx])
            by[kind] = compare(sub, "qwen-0.5b", [conf[i] for i in idx], (0.6, 0.8))
    out["by_category"] = by
    return out


def _two_model_set(base: ModelSet, traces) -> ModelSet:
    """The target and the 0.5B of ``base`` (costs, catch-up, row costs) with α and traces
    from ``traces``."""
    arrays = tuple(np.asarray(t, dtype=float) for t in traces)
    rows = {(1.0, 0, 1): np.array([[a.sum(), a.size] for a in arrays])}
    idx = [0, base.index("qwen-0.5b")]
    stderr = base.bootstrap.cost_curve_stderr if base.bootstrap else None
    return replace(
        base,
        models=tuple(base.models[i] for i in idx),
        cost=base.cost[idx],
        cost_per_token=base.cost_per_token[idx],
        cost_curve=tuple(base.cost_curve[i] for i in idx),
        catch_up=tuple(base.catch_up[i] for i in idx),
        row_cost=None if base.row_cost is None else base.row_cost[idx],
        alpha={1.0: alpha_from_rows(rows, 2, (1.0,))[1.0]},
        alpha_by_position={},
        bootstrap=BootstrapData(
            rows, None if stderr is None else tuple(stderr[i] for i in idx), {(1.0, 0, 1): arrays}
        ),
        categories=None,
        batch_costs=None,
        cascade=None,
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--confidence", action="store_true", help="also part 2 (runs the Qwen models)")
    p.add_argument("--per-category", type=int, default=2)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--costs", type=Path, default=DATA / "cpu_results_qwen.json")
    p.add_argument("--out", type=Path, default=Path("out") / "dynamic_draft.json")
    args = p.parse_args(argv)
    report: dict = {"shipped": shipped()}
    if args.confidence:
        report["confidence"] = measured_with_confidence(
            args.costs, args.per_category, args.max_new_tokens
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    for entry in report["shipped"]:
        print(
            f"\n{entry['run']} ({entry['cpu']}), drafter {entry['drafter']}, "
            f"{entry['prompts']} prompts"
        )
        _print(entry["schedules"])
    if "confidence" in report:
        c = report["confidence"]
        print(
            f"\nQwen 0.5B under 1.5B, {c['prompts']} prompts of every category, "
            f"costs of {c['costs']}"
        )
        _print(c["overall"])
        for kind, rows in c["by_category"].items():
            print(
                f"  {kind}: "
                + "; ".join(f"{r['schedule']} {r['speedup']:.3f}" for r in rows[:2] + rows[5:])
            )
    print(json.dumps({"written": str(args.out)}))
    return 0


def _print(rows: list[dict]) -> None:
    for r in rows:
        lo, hi = r["interval"]
        print(
            f"  {r['schedule']:<38} {r['speedup']:.3f}x [{lo:.2f}, {hi:.2f}]  "
            f"{r['tokens_per_step']:.2f} tokens/step, draft {r['mean_draft']:.2f}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
