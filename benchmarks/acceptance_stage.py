"""The acceptance stage with the target's scores kept from its generation, against the second
pass it made before, side by side on one family.

:func:`realrun.acceptance.measure_acceptance` generates each measuring prompt's continuation
with the target and scores every pair on it. Two arms, alternating per prompt (the order
rotated), each from empty caches and stores: ``kept`` (as now: the target's scores are the rows
its generation computed, and its cache at the generation's end is kept for the timing rounds)
and ``second pass`` (as before: those rows withheld, so the target runs once more over the
continuation, and nothing kept at the end). After each arm, what a timing round's start pays
on that prompt, its caches emptied as after the other prompts (:func:`realrun.timing.time_family`
brings every neural model to the prompt and a drawn part of its continuation, outside the
clock; the same draw in both arms). It reports
each arm's seconds, their ratio, and how many per-position acceptances differ between the arms
(the target's one-row passes against its pass over all positions: equal up to summation order).

Run: ``.venv/bin/python benchmarks/acceptance_stage.py [--family qwen] [--dtype float16]
[--limit 8] [--out DIR]`` (weights as ``benchmarks/fetch_weights.py`` caches them).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import fetch_weights
import numpy as np
from realrun_cpu import FAMILIES
from tqdm.auto import tqdm

from realrun.acceptance import Acceptance, _RowKeeper, measure_acceptance
from realrun.cached_model import CachedTokenModel
from realrun.family import load_family, set_threads
from realrun.pipeline import cpu_description, split_prompts
from realrun.prefix_store import PrefixStore
from realrun.prompts import encode
from simulate.decoder.interface import TokenModel
from simulate.decoder.sampling import Decoding

ARMS = ("kept", "second pass")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", choices=sorted(FAMILIES), default="qwen")
    p.add_argument("--dtype", default="float16")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--limit", type=int, default=8, help="measuring prompts (default 8)")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--out", type=Path, default=Path("out"))
    args = p.parse_args(argv)
    _, keys = FAMILIES[args.family]
    family = load_family(
        fetch_weights.model_dirs(keys), mag=True, device="cpu", dtype=args.dtype, names=keys
    )
    set_threads(family, args.threads)
    neural = [m for m in family.chain if isinstance(m, TokenModel)]
    measuring, _ = split_prompts("all", args.limit, None, held_out=False)
    draws = random.Random(0)
    seconds = {arm: {"alpha": [], "round start": []} for arm in ARMS}
    found: dict[str, list[Acceptance]] = {arm: [] for arm in ARMS}
    started = time.perf_counter()
    for i, prompt in enumerate(tqdm(measuring, desc="prompts", unit="prompt")):
        ids = encode(prompt, family.tokenizer)
        cut = draws.randint(0, args.max_new_tokens)
        for arm in ARMS[i % 2 :] + ARMS[: i % 2]:
            for m in neural:
                m.prefix_store = PrefixStore()
                m.reset()
            with _as_before(arm == "second pass"):
                start = time.perf_counter()
                acc = measure_acceptance(
                    family.chain, [ids], max_new_tokens=args.max_new_tokens,
                    leniences=(1.0, 3.0), decoding=Decoding(),
                    eos_token_id=family.tokenizer.eos_token_id, progress=False,
                )  # fmt: skip
                seconds[arm]["alpha"].append(time.perf_counter() - start)
            context = ids + acc.contexts[0][1][:cut]
            for m in neural:  # the rounds come back to a prompt after the others: caches moved
                m.reset()
            start = time.perf_counter()
            for m in neural:
                m.logits(context, 1)
            seconds[arm]["round start"].append(time.perf_counter() - start)
            found[arm].append(acc)
    record = _record(args, keys, seconds, found, time.perf_counter() - started)
    for arm in ARMS:
        print(
            f"{arm:<12} " + "  ".join(f"{k} {v:6.1f} s" for k, v in record["seconds"][arm].items())
        )
    print(f"kept / second pass: {json.dumps(record['kept_over_second_pass'])}; "
          f"acceptances differing: {record['acceptances_differing']}")  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"acceptance_stage_{args.family}_{args.dtype}.json"
    path.write_text(json.dumps(record, indent=2))
    print(json.dumps({"results": str(path), "total_s": round(record["total_s"], 1)}))
    return 0


@contextlib.contextmanager
def _as_before(before: bool) -> Iterator[None]:
    """Within it, when ``before``, the target's kept rows are withheld and nothing is kept at a
    generation's end: the acceptance stage before this change."""
    if not before:
        yield
        return
    with (
        mock.patch.object(_RowKeeper, "after", lambda self, prompt_length, T: None),
        mock.patch.object(CachedTokenModel, "keep_context", lambda self: None),
    ):
        yield


def _record(args, keys, seconds, found, total: float) -> dict:
    """Each arm's total seconds per kind, the kept/second-pass ratios (totals, and the paired
    per-prompt geometric mean with its standard error in log units), and the per-position
    acceptances that differ between the arms, of all compared."""
    totals = {arm: {k: float(np.sum(v)) for k, v in seconds[arm].items()} for arm in ARMS}
    ratios = {}
    for kind in ("alpha", "round start"):
        a, b = (np.asarray(seconds[arm][kind]) for arm in ARMS)
        logs = np.log(a / b)
        ratios[kind] = {
            "total": float(a.sum() / b.sum()),
            "paired": float(np.exp(logs.mean())),
            "log_se": float(logs.std(ddof=1) / np.sqrt(logs.size)) if logs.size > 1 else None,
        }
    kept, second = (totals[arm]["alpha"] + totals[arm]["round start"] for arm in ARMS)
    ratios["both"] = {"total": kept / second}
    differ = compared = 0
    for x, y in zip(found["kept"], found["second pass"], strict=True):
        for key, runs in x.runs.items():
            differ += int(np.sum(runs[0] != y.runs[key][0]))
            compared += runs[0].size
    return {
        "family": args.family,
        "models": list(keys),
        "dtype": args.dtype,
        "threads": args.threads,
        "prompts": args.limit,
        "max_new_tokens": args.max_new_tokens,
        "seconds": totals,
        "seconds_by_prompt": seconds,
        "kept_over_second_pass": ratios,
        "acceptances_differing": f"{differ} of {compared}",
        "total_s": total,
        "cpu": cpu_description(),
    }


if __name__ == "__main__":
    raise SystemExit(main())
