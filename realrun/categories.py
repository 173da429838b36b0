"""Task categories in a real-model run: α per category into the model set, and how often each
category's outputs differ from autoregressive decoding.

:func:`with_categories` splits the measuring prompts' evidence (the model set's
``bootstrap.acceptance_by_prompt``, one row per measured prompt) by the prompts' categories
into the set's ``alpha_by_category`` (:mod:`ewif.files.categories`), which ``csd recommend
--mix`` prices (:mod:`ewif.predict.mix`).

:func:`outputs_differing_by_category` reads a results file: per method and category, on how
many held-out prompts the greedy output differs from the autoregressive method's (the run's
``divergences``, one per differing prompt and method). Lossless speculative decoding gives
AR's output exactly when the verifying passes compute what the one-position passes compute;
an engine whose multi-position pass differs from its one-position pass in the last bits
(bfloat16 on transformers, quantized kernels on llama.cpp) can flip a near-tie, and then the
output is that of the verifying passes, not of AR (docs/realrun.md, "Lossless").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ewif.files.categories import CategoryAcceptance
from ewif.files.model_set import ModelSet
from ewif.files.results import Results
from realrun.prompts import Prompt, load_prompts


def measured_prompts(model_set: ModelSet, measuring: Sequence[Prompt]) -> list[Prompt]:
    """The prompts of ``measuring`` whose acceptances the model set holds: those the target
    continued (``metadata.skipped_prompts`` left out), as many as were measured."""
    skipped = set(model_set.metadata.get("skipped_prompts", []))
    kept = [p for i, p in enumerate(measuring) if i not in skipped]
    return kept[: int(model_set.metadata.get("prompts", len(kept)))]


def with_categories(model_set: ModelSet, measuring: Sequence[Prompt]) -> ModelSet:
    """``model_set`` with ``alpha_by_category`` from its per-prompt evidence, ``measuring``
    being the prompts it was measured on, in order; unchanged without that evidence (a
    measurement on one prompt has none)."""
    data = model_set.bootstrap
    if data is None:
        return model_set
    prompts = measured_prompts(model_set, measuring)
    if len(prompts) != data.prompts:
        raise ValueError(
            f"the model set holds {data.prompts} measured prompts, but {len(prompts)} "
            "measuring prompts were given"
        )
    section = CategoryAcceptance.from_prompts(
        [p.kind for p in prompts],
        data.acceptance_by_prompt,
        len(model_set.models),
        model_set.alpha.keys(),
        [p.id for p in prompts],
    )
    return replace(model_set, categories=section)


def held_out_categories(results: Results) -> list[str]:
    """The category of each held-out prompt of a run: recorded by the run
    (``metadata.held_out_prompt_categories``), else looked up by id in the shipped sets."""
    meta = results.metadata
    recorded = meta.get("held_out_prompt_categories")
    if recorded is not None:
        return list(recorded)
    by_id = {p.id: p.kind for p in load_prompts("all")}
    ids = meta.get("held_out_prompt_ids")
    if ids is None:
        raise ValueError("the results file does not say which prompts were held out")
    unknown = [i for i in ids if i not in by_id]
    if unknown:
        raise ValueError(
            f"held-out prompts {unknown[:3]} are not shipped prompts and the run did not "
            "record their categories"
        )
    return [by_id[i] for i in ids]


def outputs_differing_by_category(results: Results) -> dict[str, dict[str, tuple[int, int]]]:
    """Per method, per category: ``(prompts whose output differs from AR's, prompts run)``
    over the run's held-out prompts (module docstring). Empty for a run without the
    comparison (no AR method, or sampling: outputs differ by chance there)."""
    meta = results.metadata
    if "divergences" not in meta or not meta.get("outputs_differing_from_AR"):
        return {}
    kinds = held_out_categories(results)[: results.prompts]
    totals: dict[str, int] = {}
    for kind in kinds:
        totals[kind] = totals.get(kind, 0) + 1
    out: dict[str, dict[str, tuple[int, int]]] = {}
    for name in meta["outputs_differing_from_AR"]:
        differing = {d["prompt"] for d in meta["divergences"] if d["method"] == name}
        out[name] = {
            kind: (sum(1 for i in differing if kinds[i] == kind), total)
            for kind, total in totals.items()
        }
    return out


def differing_lines(by_category: Mapping[str, Mapping[str, tuple[int, int]]]) -> list[str]:
    """One line per method whose outputs differ from AR's on some prompt, by category:
    ``CSD ...: rag 1/2, code 0/2``."""
    return [
        f"  {name}: " + ", ".join(f"{kind} {d}/{n}" for kind, (d, n) in counts.items())
        for name, counts in by_category.items()
        if any(d for d, _ in counts.values())
    ]
