"""Add acceptance traces to a shipped run measured before model sets carried them.

A results file's model set holds, per measuring prompt, the sums of the per-position
acceptances (``bootstrap.acceptance_by_prompt``) but, before this release, not the positions
themselves, which :mod:`simulate.trace_replay` replays. On a machine with the run's numerics
(same CPU kind, the dtype and threads the file records, the same weights) the teacher-forced
acceptances are deterministic, so this script measures them again on the file's measuring
prompts (:func:`realrun.acceptance.measure_acceptance`, the run's decoding and
``max_new_tokens``) and stores them only if every prompt's sum and length equal the stored
ones exactly — the check :class:`ewif.files.bootstrap_data.BootstrapData` makes; otherwise it says
which pair differs and writes nothing. No timing: the machine may be busy.

Run: ``.venv/bin/python benchmarks/retrace.py FILE [FILE ...] [--write]`` (after
``benchmarks/fetch_weights.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import fetch_weights
import numpy as np
from realrun_cpu import FAMILIES

from ewif.files import results as results_io
from ewif.files.bootstrap_data import BootstrapData
from ewif.files.model_set import ModelSet
from realrun.acceptance import Acceptance, measure_acceptance
from realrun.family import Family, load_family, set_threads
from realrun.prompts import encode, load_prompts
from simulate.decoder.sampling import Decoding


def run_family(run: results_io.Results, wheels: Path) -> Family:
    """The run's models loaded with its numerics (weights from ``fetch_weights``)."""
    meta = run.metadata
    family = next(k for k, (label, _) in FAMILIES.items() if label == run.family)
    keys = FAMILIES[family][1]
    llamacpp = meta.get("backend") == "llama.cpp"
    ggufs = [fetch_weights.fetch(fetch_weights.SPECS[k], wheels) for k in keys]
    sources = [str(g if llamacpp else fetch_weights.convert(g)) for g in ggufs]
    loaded = load_family(
        sources,
        names=keys,
        mag=True,
        device="cpu",
        dtype="auto" if llamacpp else meta["dtype"],
        backend=meta.get("backend", "transformers"),
    )
    set_threads(loaded, int(meta["threads"]))
    return loaded


def acceptance_on(run: results_io.Results, family: Family, prompt_ids: list[str]) -> Acceptance:
    """Teacher-forced acceptances of every pair and lenience of the run's model set on the
    prompts ``prompt_ids``, with the run's decoding and ``max_new_tokens``."""
    meta = run.metadata
    by_id = {q.id: q for q in load_prompts(meta.get("prompt_set", "all"))}
    return measure_acceptance(
        family.chain,
        [encode(by_id[i], family.tokenizer) for i in prompt_ids],
        max_new_tokens=run.max_new_tokens,
        leniences=sorted(meta["model_set"]["alpha"], key=float),
        decoding=Decoding(run.decoding["temperature"], run.decoding["top_p"]),
        eos_token_id=family.tokenizer.eos_token_id,
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("--write", action="store_true", help="store the traces in the files")
    p.add_argument("--wheels", type=Path, default=fetch_weights.default_wheels())
    args = p.parse_args(argv)
    status = 0
    for path in args.files:
        run = results_io.load(path)
        stored = ModelSet.from_dict(run.metadata["model_set"], str(path))
        acceptance = acceptance_on(
            run, run_family(run, args.wheels), run.metadata["measuring_prompt_ids"]
        )
        old = stored.bootstrap
        try:
            data = BootstrapData(
                old.acceptance_by_prompt, old.cost_curve_stderr, acceptance.traces()
            )
        except ValueError as exc:
            print(f"{path.name}: the traces do not reproduce the stored acceptances: {exc}")
            status = 1
            continue
        total = sum(float(np.sum(a)) for arrs in acceptance.traces().values() for a in arrs)
        print(f"{path.name}: traces reproduce every stored per-prompt sum ({total:g} in all)")
        if args.write:
            model_set = dataclasses.replace(stored, bootstrap=data)
            results_io.save(
                dataclasses.replace(
                    run, metadata={**run.metadata, "model_set": model_set.to_dict()}
                ),
                path,
            )
    return status


if __name__ == "__main__":
    sys.exit(main())
