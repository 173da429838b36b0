"""vLLM's own step costs and n-gram behaviour on this machine: the ``csd.vllm-profile/1`` file
``csd recommend --emit vllm --vllm-profile`` prices with (``ewif.predict.batch``, drafting
"vllm").

Everything is read from vLLM itself — its per-step log (``--enable-logging-iteration-details``)
and its per-request metrics — on servers started like the benchmark's (bf16, eager unless
``--compiled``, 2 GiB of KV cache, vLLM's default binding: it computes on one core), driven
in synchronized rounds (``realrun.vllm_rounds``: all ``B`` prompts prefilled in one step, then
``B`` rows decoded in lock-step) at every batch size, on the *measuring* prompts (the
benchmark serves the held-out ones). How each part is isolated (``realrun.vllm_costs``):

1. the target's step ``c_0(B, T)``: the 1.5B served without speculation (``T = B``), and with
   n-gram speculation at draft lengths ``1..--k-ngram`` on the controlled repeat prompts
   (every row finds a match: ``T = B(k+1)``) — no drafter model runs, the n-gram lookup is a
   CPU search inside the step;
2. vLLM's n-gram behaviour: the same n-gram servers on the measuring prompts at ``B = 8``
   (its match rate and α by position, exact from the per-request ``detailed`` arrays);
3. the draft model's step: the 1.5B with the 0.5B as ``draft_model`` at ``k = 0..--k-draft``
   (``k = 0``: a schedule's K = 0, the drafter's first pass alone), on the measuring prompts;
   the drafter's share is that step minus ``c_0(B, B(k+1))``;
4. the drafter's one-position pass ``c_d1(B, 1)``: the 0.5B served alone without speculation.

Draft lengths vary by batch size inside one server (``num_speculative_tokens_per_batch_size``,
a Latin design: each server runs a different ``k`` at each ``B``), so ``n`` draft lengths need
``n`` servers, not ``n × (batch sizes)``. With ``--compare-compiled`` it also serves the
target alone and one draft-model schedule compiled (vLLM's default, ``torch.compile``) next
to the same eager servers and records both step costs (``compile_check``).

Usage::

    python benchmarks/vllm_profile.py --batch-sizes 1,2,4,8 --k-ngram 6 --k-draft 5

Writes ``--out``/vllm_profile_qwen.json.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
from pathlib import Path

from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fetch_weights
import vllm_common as vc

from ewif.files.vllm_profile import NgramBehaviour, VllmProfile
from ewif.files.vllm_profile import save as save_profile
from realrun.engine_counters.reading import parse_counters
from realrun.engine_metrics import acceptance
from realrun.pipeline import cpu_description
from realrun.vllm_costs import Cells, drafter_first_pass, negative_differences, ngram_counts
from realrun.vllm_rounds import synchronized_rounds
from realrun.vllm_server import VllmServerError, vllm_python


def run_server(model_dir, name, spec, by_batch, prompts, args, record, natural=None):
    """One server: ``args.rounds`` rounds at every batch size on ``prompts``; optionally one
    round of all ``natural`` prompts at the largest batch size. Returns (per-B rounds, the
    natural round, the /metrics text)."""
    started = time.perf_counter()
    with vc.server(model_dir, name, spec, args) as s:
        per_b = {
            b: synchronized_rounds(s, prompts, b, args.rounds, args.max_tokens)
            for b in args.batch_sizes
        }
        nat = None
        if natural is not None:
            nat = synchronized_rounds(s, natural, len(natural), 1, args.max_tokens)
        text = s.metrics() if spec else ""
        record.append(
            {
                "model": name,
                "speculative_config": _portable(spec),
                "k_by_batch": {str(b): k for b, k in by_batch.items()},
                "ready_s": s.ready_seconds,
                "seconds": time.perf_counter() - started,
            }
        )
    return per_b, nat, text


def _portable(spec: dict | None) -> dict | None:
    """The config with the drafter's directory replaced by its name (no absolute paths)."""
    if spec is None or "model" not in spec:
        return spec
    return {**spec, "model": vc.KEYS[1]}


def measure(dirs, ids, args) -> dict:
    target_dir, drafter_dir = dirs
    sizes, record = args.batch_sizes, []
    target, dm, drafter = Cells(), Cells(), Cells()
    ngram_rounds, dm_counters = [], []
    ng_values = list(range(1, args.k_ngram + 1))
    dm_values = list(range(0, args.k_draft + 1))
    jobs = [("ar", 0), ("drafter", 0)]
    jobs += [("ngram", s) for s in range(len(ng_values))]
    jobs += [("draft_model", s) for s in range(len(dm_values))]
    for kind, s in tqdm(jobs, desc="vLLM servers", unit="server"):
        if kind in ("ar", "drafter"):
            which = (target_dir, vc.KEYS[0]) if kind == "ar" else (drafter_dir, vc.KEYS[1])
            per_b, _, _ = run_server(*which, None, {}, ids["measuring"], args, record)
            for r in per_b.values():
                (target if kind == "ar" else drafter).add(r, 0)
        elif kind == "ngram":
            by_b = vc.latin(sizes, ng_values, s)
            spec = vc.spec_config("ngram", by_b)
            per_b, nat, _ = run_server(
                target_dir, vc.KEYS[0], spec, by_b, ids["controlled"], args, record,
                natural=ids["measuring"][: max(sizes)],
            )  # fmt: skip
            for b, r in per_b.items():
                target.add(r, by_b[b])
            target.add(nat, by_b[nat.batch])  # rows with and without a match: mixed T
            ngram_rounds += nat.rounds
        else:
            by_b = vc.latin(sizes, dm_values, s)
            spec = vc.spec_config("draft_model", by_b, drafter_dir)
            per_b, _, text = run_server(
                target_dir, vc.KEYS[0], spec, by_b, ids["measuring"], args, record
            )
            for b, r in per_b.items():
                dm.add(r, by_b[b])
            dm_counters.append(text)
    return {
        "target": target,
        "dm": dm,
        "drafter": drafter,
        "ngram_rounds": ngram_rounds,
        "dm_counters": dm_counters,
        "servers": record,
        "ng_values": ng_values,
        "dm_values": dm_values,
    }


def compose(m: dict, args, engine: str) -> VllmProfile:
    """The profile from the measured cells (module docstring)."""
    sizes = args.batch_sizes
    target_table = m["target"].table()
    host_ar = {b: {0: m["target"].host_table()[b][0]} for b in sizes}
    host_ng = {b: {k: v for k, v in m["target"].host_table()[b].items() if k} for b in sizes}
    base = VllmProfile(vc.KEYS[0], target_table, {"ar": host_ar, "ngram": host_ng})
    drafter_pass = {b: m["drafter"].mean(b, b) for b in sizes}
    schedule_k = {b: m["dm_values"] for b in sizes}
    first = drafter_first_pass(m["dm"].table(), base.target_at, drafter_pass, schedule_k)
    below = negative_differences(m["dm"].table(), base.target_at, drafter_pass, schedule_k)
    counts = ngram_counts(m["ngram_rounds"])
    alphas = counts.alpha_by_position[: args.k_ngram]
    dm_alpha = [acceptance(parse_counters(t, "vllm", "vLLM /metrics")) for t in m["dm_counters"]]
    return VllmProfile(
        target=vc.KEYS[0],
        drafter=vc.KEYS[1],
        target_pass=target_table,
        overhead={
            "ar": _floor(host_ar),
            "ngram": _floor(host_ng),
            "draft_model": _floor(m["dm"].host_table()),
        },
        drafter_pass=drafter_pass,
        drafter_first_pass=first,
        ngram=NgramBehaviour(counts.match_rate, alphas, 1, 4),
        metadata={
            "engine": engine,
            "unit": "milliseconds per engine step (vLLM's iteration elapsed time)",
            "eager": args.eager,
            "dtype": "bfloat16",
            "batch_sizes": sizes,
            "max_tokens": args.max_tokens,
            "rounds": args.rounds,
            "ngram_counts": {
                "reviewed": list(counts.reviewed),
                "accepted": list(counts.accepted),
                "drafted_steps": counts.drafted_steps,
                "row_steps": counts.row_steps,
            },
            "draft_model_alpha_from_vllm_counters": [
                {"alpha": a.alpha, "interval": [a.low, a.high], "reviewed": a.reviewed}
                for a in dm_alpha
            ],
            "first_pass_below_zero_priced_0": below,
            "host_overhead_below_zero_priced_0": [
                {"method": name, "batch": b, "k": k, "ms": v}
                for name, table in (
                    ("ar", host_ar),
                    ("ngram", host_ng),
                    ("draft_model", m["dm"].host_table()),
                )
                for b, row in table.items()
                for k, v in row.items()
                if v < 0
            ],
            "cells": {
                "target": m["target"].summary(),
                "draft_model_step": m["dm"].summary(),
                "drafter_alone": m["drafter"].summary(),
            },
            "servers": m["servers"],
        },
    )


def _floor(table: dict) -> dict:
    """Host overhead below 0 (noise around a few milliseconds) priced 0; listed in the file."""
    return {b: {k: max(v, 0.0) for k, v in row.items()} for b, row in table.items()}


def compile_check(dirs, ids, args) -> dict:
    """The target alone and one draft-model schedule, eager and compiled, side by side: the
    mean step of every full cell of both."""
    out = {}
    by_b = vc.latin(args.batch_sizes, list(range(0, args.k_draft + 1)), 2)
    spec = vc.spec_config("draft_model", by_b, dirs[1])
    for label, sp in (("ar", None), ("draft_model", spec)):
        cells = {}
        for eager in (True, False):
            args.eager = eager
            record: list = []
            per_b, _, _ = run_server(dirs[0], vc.KEYS[0], sp, by_b, ids["measuring"], args, record)
            c = Cells()
            for b, r in per_b.items():
                c.add(r, by_b[b] if sp else 0)
            cells["eager" if eager else "compiled"] = {
                "cells": c.summary(),
                "ready_s": record[0]["ready_s"],
            }
        out[label] = cells
    args.eager = True
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--batch-sizes", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 4, 8]
    )
    p.add_argument("--k-ngram", type=int, default=6)
    p.add_argument("--k-draft", type=int, default=5)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--rounds", type=int, default=1, help="rounds per batch size and server")
    p.add_argument("--measure-prompts", type=int, default=8)
    p.add_argument(
        "--compiled", dest="eager", action="store_false", help="torch.compile (slow start)"
    )
    p.add_argument("--compare-compiled", action="store_true")
    p.add_argument("--only-compile-check", action="store_true")
    p.add_argument("--wheels", type=Path, default=fetch_weights.default_wheels())
    p.add_argument(
        "--model-dirs",
        type=lambda s: [Path(x) for x in s.split(",")],
        help="TARGET_DIR,DRAFTER_DIR instead of the Qwen pair (a quick check of the script)",
    )
    p.add_argument("--out", type=Path, default=Path("out"))
    p.add_argument(
        "--from-raw",
        action="store_true",
        help="compose the profile from --out's vllm_profile_raw.pkl instead of measuring",
    )
    args = p.parse_args(argv)
    started = time.perf_counter()
    try:
        engine = vc.vllm_version(vllm_python())
        dirs = args.model_dirs or vc.model_dirs(args.wheels)
        ids = vc.prompt_ids(dirs[0], args.measure_prompts, 1)
        args.out.mkdir(parents=True, exist_ok=True)
        if args.only_compile_check:
            check = compile_check(dirs, ids, args)
            path = args.out / "vllm_compile_check.json"
            path.write_text(
                json.dumps({"engine": engine, "cpu": cpu_description(), **check}, indent=1)
            )
            print(json.dumps({"results": str(path)}))
            return 0
        raw = args.out / "vllm_profile_raw.pkl"  # the measurements: compose() can be redone
        if args.from_raw:
            m = pickle.loads(raw.read_bytes())
        else:
            m = measure(dirs, ids, args)
            raw.write_bytes(pickle.dumps(m))
        profile = compose(m, args, engine)
        meta = profile.metadata | {
            "cpu": cpu_description(),
            "measuring_prompt_ids": ids["measuring_ids"],
            "total_seconds": time.perf_counter() - started,
            "load_average": list(os.getloadavg()),
        }
        if args.compare_compiled:
            meta["compile_check"] = compile_check(dirs, ids, args)
        profile = VllmProfile(**{**profile.__dict__, "metadata": meta})
    except VllmServerError as exc:
        print(f"vllm_profile: error: {exc}", file=sys.stderr)
        return 2
    path = save_profile(profile, args.out / "vllm_profile_qwen.json")
    print(summary(profile))
    print(json.dumps({"results": str(path), "total_s": round(time.perf_counter() - started, 1)}))
    return 0


def summary(profile: VllmProfile) -> str:
    lines = [
        "B  AR step (ms)  target c0(B, B(k+1)) k=1..  drafter first pass c_d1(B, k+2)  c_d1(B,1)"
    ]
    for b in profile.batch_sizes:
        c0 = [profile.target_pass[b].get(b * (k + 1)) for k in range(1, 7)]
        first = profile.drafter_first_pass.get(b, {}) if profile.drafter_first_pass else {}
        lines.append(
            f"{b:<2} {profile.ar_step(b):12.1f}  "
            + " ".join("-" if c is None else f"{c:.0f}" for c in c0)
            + "  "
            + " ".join(f"{v:.0f}" for _, v in sorted(first.items()))
            + f"  {profile.drafter_pass[b]:.1f}"
        )
    ng = profile.ngram
    lines.append(
        f"n-gram: match rate {ng.match_rate:.3f}, α by position "
        + ", ".join(f"{a:.3f}" for a in ng.alpha_by_position)
    )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
