"""The real-model pipeline as a library: load → choose numerics → measure → recommend → run.

:func:`realrun` is what ``csd realrun`` and ``benchmarks/realrun_cpu.py`` call; it takes plain
arguments (model sources, prompt set, options) and returns :class:`ewif.results.Results`.

Held-out calibration. The prompts are split: the first ``measure_prompts`` are the
*measuring* split (α, cost curves, numerics), the next ``limit`` the *held-out* split on
which every method runs. The predictions are therefore tested on prompts they never saw.

Numerics (``dtype="auto"``/``threads="auto"`` on a CPU, :func:`measure_numerics`). CPUs
differ (AVX-512 with bf16 instructions make a bfloat16 review pass nearly as cheap as a
one-token pass; an AVX2-only CPU emulates bfloat16 slowly), so nothing is assumed: every
candidate dtype (float32, bfloat16, float16) is loaded and measured on the measuring split
(α, then for every thread count the pass-cost curves and the target's batch invariance,
:mod:`realrun.invariance`). A candidate is *eligible* when the target's argmax of a pass
over ``m`` positions agrees with ``m`` single passes on at least ``min_agreement`` of the
checked positions (greedy speculative decoding is lossless only then). Among eligible
candidates the one with the highest predicted throughput wins: ``max(EWIF*, 1) / t_0(1)``,
the recommended configuration's exact EWIF (autoregressive decoding when nothing beats it)
over the target's one-token pass time — the speed-up of the best configuration, not the
speed of ``m = 1`` alone. On a GPU ``"auto"`` is bfloat16 (float16 where unsupported) and
is not measured.

Backends (``backend=``, :data:`BACKENDS`): ``"transformers"`` (above) or ``"llama.cpp"``
(:mod:`realrun.llamacpp_model`: ``.gguf`` files run as stored on the CPU — one dtype, the
file's own, so only the thread count is measured; :func:`set_threads` reaches both torch
and llama.cpp; the transformers baselines are left out and AR is our decoder).
"""

from __future__ import annotations

import gc
import os
import platform
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import PreTrainedTokenizerBase

from ewif import validate
from ewif.io import ModelSet
from ewif.recommendation import Recommendation, recommend
from ewif.results import Results
from realrun.bigram import BigramTable
from realrun.hf_model import HFTokenModel
from realrun.invariance import Invariance, batch_invariance
from realrun.loading import load_model, select_device
from realrun.maxgram import MaxGram
from realrun.measure import assemble_model_set, check_models, measure_acceptance, measure_costs
from realrun.prompts import Prompt, encode, load_prompts
from realrun.side_by_side import (
    Method,
    cascade_method,
    default_methods,
    recommendation_record,
    recommended_method,
    run_side_by_side,
)
from realrun.vocabulary import check_shared_vocabulary
from simulate.decoder.interface import Proposer, TokenModel
from simulate.decoder.sampling import Decoding

CPU_DTYPES = ("float32", "bfloat16", "float16")
#: Inference engines a family can run on: transformers (hub ids, directories, GGUF files
#: dequantized) or llama.cpp (GGUF files as stored, :mod:`realrun.llamacpp_model`).
BACKENDS = ("transformers", "llama.cpp")
_CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_fp16")


@dataclass
class Family:
    """Loaded models of one cascade (target first, Max-Gram last if asked) and their tokenizer."""

    chain: list[TokenModel | Proposer]
    tokenizer: PreTrainedTokenizerBase
    dtype: str
    device: str
    backend: str = "transformers"

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.chain]

    @property
    def assistants(self) -> list[str]:
        """The models transformers' assisted generation can draft with (those loaded
        through transformers)."""
        return [m.name for m in self.chain if isinstance(m, HFTokenModel)]


def load_family(
    sources: Sequence[str],
    *,
    mag: bool = False,
    bigram: str | None = None,
    device: str = "auto",
    dtype: str = "auto",
    names: Sequence[str] | None = None,
    backend: str = "transformers",
) -> Family:
    """Load ``sources`` (target first; hub ids in the local cache, directories or ``.gguf``;
    ``backend="llama.cpp"``: ``.gguf`` files only, weights as stored, ``dtype="auto"``),
    check they share one vocabulary, and append Max-Gram when ``mag`` (bigram fallback from
    ``bigram``, an ``.npz`` table, else counted over the shipped prompts)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if not sources:
        raise ValueError("give at least one model (the target)")
    if bigram is not None and not mag:
        raise ValueError("a bigram table needs Max-Gram (mag=True / --mag)")
    if names is not None and len(names) != len(sources):
        raise ValueError(f"names must name each of the {len(sources)} sources, got {names}")
    if backend == "llama.cpp":
        from realrun.llamacpp_model import load_gguf_models

        loaded, tokenizer = load_gguf_models(sources, names=names, device=device, dtype=dtype)
        chain: list[TokenModel | Proposer] = list(loaded)
        dtype_name, device_name = f"gguf:{loaded[0].file_type}", "cpu"
    else:
        loaded = [
            load_model(s, device=device, dtype=dtype, name=None if names is None else names[i])
            for i, s in enumerate(sources)
        ]
        check_shared_vocabulary({m.name: m.tokenizer for m in loaded})
        tokenizer = loaded[0].tokenizer
        chain = [HFTokenModel(m.model, m.name) for m in loaded]
        dtype_name = str(loaded[0].dtype).removeprefix("torch.")
        device_name = str(loaded[0].device)
    if len({m.name for m in loaded}) != len(loaded):
        raise ValueError(f"models must be distinct, got names {[m.name for m in loaded]}")
    widths = {m.vocab_size for m in loaded}
    if len(widths) != 1:
        raise ValueError(
            "models share a tokenizer but not the logit width: "
            + ", ".join(f"{m.name}={m.vocab_size}" for m in loaded)
        )
    if mag:
        table = (
            BigramTable.load(bigram, tokenizer)
            if bigram
            else BigramTable.from_corpus(
                [p.text for p in load_prompts("all")], tokenizer, vocab_size=loaded[0].vocab_size
            )
        )
        chain.append(MaxGram(table))
    if len(chain) < 2:
        raise ValueError("give at least two models (target and a drafter), or one and --mag")
    return Family(chain, tokenizer, dtype_name, device_name, backend)


def set_threads(family: Family, threads: int) -> None:
    """Use ``threads`` CPU threads: torch's, and every llama.cpp model's of the family."""
    torch.set_num_threads(threads)
    for m in family.chain:
        if hasattr(m, "set_threads"):
            m.set_threads(threads)


def split_prompts(
    prompts: str, measure_prompts: int, limit: int | None, *, held_out: bool = True
) -> tuple[list[Prompt], list[Prompt]]:
    """(measuring split, held-out split): the first ``measure_prompts`` prompts of the set,
    then the next ``limit`` (all remaining when None); with ``held_out`` the held-out split
    must be non-empty."""
    k = validate.count("measure_prompts", measure_prompts, minimum=1)
    every = load_prompts(prompts)
    held = every[k:] if limit is None else every[k : k + validate.count("limit", limit, minimum=1)]
    if held_out and not held:
        raise ValueError(
            f"the prompt set {prompts!r} has {len(every)} prompts: none is left "
            f"for the held-out split after the {k} measuring prompts"
        )
    return every[:k], held


@dataclass(frozen=True)
class NumericsTrial:
    """One measured numerics candidate: dtype, threads, what it predicts, whether eligible."""

    dtype: str
    threads: int
    target_pass_s: float
    invariance: Invariance
    recommendation: Recommendation
    eligible: bool

    @property
    def predicted_tokens_per_s(self) -> float:
        """``max(EWIF*, 1) / t_0(1)``: the recommended configuration's throughput."""
        return max(self.recommendation.ewif, 1.0) / self.target_pass_s

    def to_dict(self) -> dict:
        return {
            "dtype": self.dtype,
            "threads": self.threads,
            "target_one_token_pass_s": self.target_pass_s,
            "batch_invariance": self.invariance.to_dict(),
            "recommendation": recommendation_record(self.recommendation),
            "predicted_tokens_per_s": self.predicted_tokens_per_s,
            "eligible": self.eligible,
        }


@dataclass
class Measured:
    """What the measuring split produced: the family (in the chosen numerics), its model set,
    the numerics trials (empty when numerics were given) and the chosen trial."""

    family: Family
    model_set: ModelSet
    trials: list[NumericsTrial]
    threads: int


def cpu_description() -> dict:
    """The CPU as the results file records it: model name, cores, the instruction-set flags
    that decide dtype speed, and torch's detected capability."""
    flags: set[str] = set()
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    return {
        "model": model,
        "cores": os.cpu_count(),
        "flags": [f for f in _CPU_FLAGS if f in flags],
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch": torch.__version__,
    }


def _measure_family(
    family: Family,
    measuring: list[list[int]],
    *,
    threads: Sequence[int],
    max_new_tokens: int,
    leniences: Sequence[float],
    decoding: Decoding,
    max_m: int,
    k_max: int,
    repeats: int,
    warmup: int,
    min_agreement: float,
    invariance_positions: int,
    progress: bool,
) -> list[tuple[NumericsTrial, ModelSet]]:
    """α once, then per thread count the cost curves, batch invariance and recommendation."""
    names = check_models(family.chain)
    eos = family.tokenizer.eos_token_id
    set_threads(family, max(threads))
    acceptance = measure_acceptance(
        family.chain,
        measuring,
        max_new_tokens=max_new_tokens,
        leniences=leniences,
        decoding=decoding,
        eos_token_id=eos,
        progress=progress,
    )
    out = []
    for t in threads:
        set_threads(family, t)
        costs = measure_costs(
            family.chain,
            acceptance.typical_context(),
            max_m=max_m,
            repeats=repeats,
            warmup=warmup,
            progress=progress,
        )
        invariance = batch_invariance(
            family.chain[0], acceptance.contexts, m=4, max_positions=invariance_positions
        )
        model_set = assemble_model_set(
            names,
            acceptance,
            costs,
            metadata={
                "dtype": family.dtype,
                "threads": t,
                "batch_invariance": invariance.to_dict(),
            },
        )
        rec = recommend(model_set, k_max=k_max)
        trial = NumericsTrial(
            family.dtype,
            t,
            costs.target_pass_seconds,
            invariance,
            rec,
            invariance.rate >= min_agreement,
        )
        out.append((trial, model_set))
    return out


def measure_numerics(
    sources: Sequence[str],
    measuring: list[Prompt],
    *,
    mag: bool,
    bigram: str | None,
    device: str,
    dtype: str,
    threads: int | str,
    max_new_tokens: int,
    leniences: Sequence[float],
    decoding: Decoding,
    k_max: int,
    max_m: int | None = None,
    repeats: int = 5,
    warmup: int = 1,
    min_agreement: float = 0.99,
    invariance_positions: int = 48,
    names: Sequence[str] | None = None,
    progress: bool = True,
    backend: str = "transformers",
) -> Measured:
    """Measure the family on the measuring split, choosing dtype and threads when ``"auto"``
    on a CPU (module docstring; the llama.cpp backend has one dtype, the GGUF's own, and
    runs on the CPU); returns the family loaded in the chosen numerics."""
    min_agreement = validate.probability("min_agreement", min_agreement)
    max_m = 2 * k_max if max_m is None else validate.count("max_m", max_m, minimum=1)
    on_cpu = backend == "llama.cpp" or select_device(device).type == "cpu"
    if threads == "auto":
        cores = os.cpu_count() or 1
        counts = tuple(range(1, cores + 1)) if on_cpu else (torch.get_num_threads(),)
    else:
        counts = (validate.count("threads", threads, minimum=1),)
    dtypes = CPU_DTYPES if (dtype == "auto" and on_cpu and backend == "transformers") else (dtype,)
    best: tuple[NumericsTrial, ModelSet, Family] | None = None
    trials: list[NumericsTrial] = []
    for name in tqdm(
        dtypes, desc="numerics", unit="dtype", disable=not progress or len(dtypes) == 1
    ):
        family = load_family(
            sources, mag=mag, bigram=bigram, device=device, dtype=name, names=names, backend=backend
        )
        ids = [encode(p, family.tokenizer) for p in measuring]
        for trial, model_set in _measure_family(
            family,
            ids,
            threads=counts,
            max_new_tokens=max_new_tokens,
            leniences=leniences,
            decoding=decoding,
            max_m=max_m,
            k_max=k_max,
            repeats=repeats,
            warmup=warmup,
            min_agreement=min_agreement,
            invariance_positions=invariance_positions,
            progress=progress,
        ):
            trials.append(trial)
            if best is None or _better(trial, best[0]):
                best = (trial, model_set, family)
        del family
        gc.collect()
    assert best is not None
    trial, model_set, family = best
    set_threads(family, trial.threads)
    if len(trials) == 1:
        trials = []
    meta = {
        **model_set.metadata,
        "numerics_trials": [t.to_dict() for t in trials],
        "numerics_choice": "given"
        if not trials
        else "highest predicted tokens/s among dtypes with batch-invariance agreement >= "
        f"{min_agreement:g}"
        + ("" if trial.eligible else " (none eligible: highest agreement taken)"),
    }
    return Measured(family, replace(model_set, metadata=meta), trials, trial.threads)


def _better(a: NumericsTrial, b: NumericsTrial) -> bool:
    """Eligible beats ineligible; then higher predicted tokens/s (ineligible: agreement)."""
    if a.eligible != b.eligible:
        return a.eligible
    if not a.eligible:
        return a.invariance.rate > b.invariance.rate
    return a.predicted_tokens_per_s > b.predicted_tokens_per_s


def run_pipeline(
    sources: Sequence[str],
    *,
    mag: bool = False,
    bigram: str | None = None,
    names: Sequence[str] | None = None,
    prompts: str = "all",
    measure_prompts: int = 4,
    limit: int | None = None,
    max_new_tokens: int = 32,
    decoding: Decoding | None = None,
    device: str = "auto",
    dtype: str = "auto",
    threads: int | str = "auto",
    k_max: int = 12,
    leniences: Sequence[float] = (1.0, 2.0, 3.0, 5.0),
    model_set: ModelSet | None = None,
    K: object | None = None,
    lenience: float = 1.0,
    baselines: bool = True,
    family_label: str | None = None,
    progress: bool = True,
    backend: str = "transformers",
) -> Results:
    """Measure on the measuring split (or take ``model_set``), recommend, and run every
    method on the held-out split (module docstring). ``K``/``lenience`` give the cascade
    instead of the recommendation (``K`` over all models, target first). ``backend``: see
    :func:`load_family`; on llama.cpp the transformers baselines (hf-*) are left out and AR
    is the cascade decoder with the target alone."""
    decoding = Decoding() if decoding is None else decoding
    measuring, held = split_prompts(prompts, measure_prompts, limit)
    if model_set is None:
        measured = measure_numerics(
            sources,
            measuring,
            mag=mag,
            bigram=bigram,
            device=device,
            dtype=dtype,
            threads=threads,
            max_new_tokens=max_new_tokens,
            leniences=leniences,
            decoding=decoding,
            k_max=k_max,
            names=names,
            progress=progress,
            backend=backend,
        )
        family, model_set = measured.family, measured.model_set
    else:
        if dtype == "auto" or threads == "auto":
            raise ValueError(
                "a pre-measured model set needs the numerics it was measured with: "
                "give dtype and threads (--dtype, --threads) explicitly"
            )
        family = load_family(
            sources,
            mag=mag,
            bigram=bigram,
            device=device,
            dtype=dtype,
            names=names,
            backend=backend,
        )
        set_threads(family, validate.count("threads", threads, minimum=1))
        if tuple(model_set.models) != tuple(family.names):
            raise ValueError(
                f"the model set describes models {list(model_set.models)}, but "
                f"the run loaded {family.names}"
            )
    rec = None
    if K is not None:
        csd = given_cascade(family.names, K, lenience, model_set)
    elif lenience != 1.0:
        raise ValueError("lenience needs K (the recommendation chooses its own lenience)")
    else:
        rec = recommend(model_set, k_max=k_max)
        csd = recommended_method(rec)
    methods = default_methods(model_set, family.assistants, csd=csd, k_max=k_max)
    if not baselines:
        methods = [m for m in methods if m.kind in ("autoregressive", "csd")]
    if not decoding.greedy or family.backend != "transformers":
        methods = [m for m in methods if not m.kind.startswith("hf-")]
    ids = [encode(p, family.tokenizer) for p in held]
    results = run_side_by_side(
        methods,
        {m.name: m for m in family.chain},
        ids,
        model_set=model_set,
        max_new_tokens=max_new_tokens,
        eos_token_id=family.tokenizer.eos_token_id,
        decoding=decoding,
        device=f"{family.device} ({family.dtype}, {torch.get_num_threads()} threads)",
        family=family_label or " > ".join(family.names),
        progress=progress,
    )
    meta = {
        **results.metadata,
        "measuring_prompt_ids": [p.id for p in measuring],
        "held_out_prompt_ids": [p.id for p in held[: results.prompts]],
        "dtype": family.dtype,
        "threads": torch.get_num_threads(),
        "backend": family.backend,
        "cpu": cpu_description(),
        "median_prediction_error": median_prediction_error(results),
    }
    if rec is not None:
        meta["recommendation"] = recommendation_record(rec)
    return replace(results, metadata=meta)


def given_cascade(names: Sequence[str], K: object, lenience: float, model_set: ModelSet) -> Method:
    """The csd :class:`Method` of a user-given ``K`` over all ``names`` at ``lenience``."""
    method = cascade_method(
        f"CSD {np.asarray(K).tolist()} l={lenience:g}", "csd", names, K, lenience
    )
    if lenience != 1.0 and not any(any(row) for row in method.K[1:]):
        raise ValueError(
            f"lenience {lenience:g} would apply at the target, the only reviewer of this K; "
            "lenience is allowed only where a drafter reviews (it would change the output)"
        )
    if lenience not in model_set.alpha:
        raise ValueError(
            f"lenience {lenience:g} was not measured; the model set has "
            f"{', '.join(f'{x:g}' for x in model_set.leniences)}"
        )
    return method


def median_prediction_error(results: Results) -> float | None:
    """Median over sd/csd methods of ``|predicted/measured − 1|`` (None without any)."""
    errors = [
        m.prediction_error
        for m in results.methods
        if m.kind in ("sd", "csd") and m.prediction_error is not None
    ]
    return float(np.median(errors)) if errors else None
