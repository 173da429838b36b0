"""The arguments of ``csd measure`` and ``csd realrun``, checked before any model is loaded
or converted: each bad one is a one-line ``ValueError`` (exit status 2 in ``csd``), or a
``ModuleNotFoundError`` naming the extra to install, in seconds rather than after a GGUF
conversion and a minute of measuring.

Checked: the counts (``--max-new-tokens``, ``--k-max``, the prompt splits, ``--repeats`` …),
the decoding (``--temperature``, ``--top-p``), the backend's extra being installed and its
limits (llama.cpp: ``.gguf`` files, their own dtype), that every model exists (a directory
with ``config.json``, a ``.gguf`` file, or a hub id in the local cache), the prompt set and
its splits, ``--K`` against the number of models, ``--lenience`` against ``--K`` and the
leniences measured (or the ``--from`` model set's), the ``--from`` model set against the
models given, and that the output files can be written. Imports neither torch nor
transformers.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ewif.base import validate

#: The leniences ``csd realrun`` measures when it measures (``run_pipeline``'s default).
REALRUN_LENIENCES = (1.0, 2.0, 3.0, 5.0)


def check_model_options(args: argparse.Namespace) -> None:
    """What ``csd measure`` and ``csd realrun`` share: the extras, counts, decoding, backend,
    models."""
    for module in ("torch", "transformers"):  # the realrun extra, whichever the backend
        if _missing(module):
            raise ModuleNotFoundError(f"{module} is not installed", name=module)
    validate.count("--max-new-tokens", args.max_new_tokens, minimum=1)
    validate.count("--k-max", args.k_max, minimum=1)
    validate.cost("--min-timing-seconds", args.min_timing_seconds)
    validate.cost("--temperature", args.temperature)
    top_p = validate.probability("--top-p", args.top_p)
    if top_p == 0.0:
        raise ValueError("--top-p must be in (0, 1], got 0")
    if args.bigram is not None and not args.mag:
        raise ValueError("--bigram is Max-Gram's table: give --mag too")
    if args.backend == "llama.cpp":
        if _missing("llama_cpp"):
            raise ModuleNotFoundError("llama-cpp-python is not installed", name="llama_cpp")
        if args.dtype != "auto":
            raise ValueError(
                f"--backend llama.cpp runs a GGUF's weights as stored: dtype must be 'auto', "
                f"got {args.dtype!r}"
            )
        bad = [m for m in args.models if Path(m).suffix.lower() != ".gguf"]
        if bad:
            raise ValueError(f"--backend llama.cpp runs .gguf files only, got {bad[0]!r}")
    for source in args.models:
        check_source(source)


def _missing(module: str) -> bool:
    """Whether ``module`` cannot be imported (not installed, or blocked)."""
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):  # a parent missing, or sys.modules[module] is None
        return True


def check_source(source: str) -> None:
    """``source`` names a model that can be loaded without a download: an existing
    ``.gguf`` file, a directory with ``config.json``, or a hub id in the local cache."""
    path = Path(source).expanduser()
    if path.suffix.lower() == ".gguf":
        if not path.is_file():
            raise ValueError(f"model file {source!r} does not exist")
        return
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ValueError(
                f"model directory {source!r} has no config.json (not a save_pretrained "
                "directory); for a GGUF model pass the path of the .gguf file"
            )
        return
    if source.startswith((".", "/", "~")):
        raise ValueError(f"model path {source!r} does not exist")
    if not _in_hub_cache(source):
        raise ValueError(
            f"model {source!r} is not a local directory or .gguf file, and not in the local "
            "Hugging Face cache (nothing is downloaded at run time)"
        )


def _in_hub_cache(repo_id: str) -> bool:
    """Whether the local Hugging Face cache holds ``repo_id``'s ``config.json``."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # no hub client: loading will say what is missing
        return True
    try:
        found = try_to_load_from_cache(repo_id, "config.json")
    except ValueError:  # not a valid repo id
        return False
    return isinstance(found, str)


def n_models(args: argparse.Namespace) -> int:
    """The models of the family: those given, and Max-Gram with ``--mag``."""
    return len(args.models) + bool(args.mag)


def check_measure(args: argparse.Namespace) -> list[int] | None:
    """``csd measure``'s own options (and :func:`check_model_options`); the batch sizes."""
    check_model_options(args)
    if n_models(args) < 2:
        raise ValueError("give at least two models (target and a drafter), or one and --mag")
    validate.count("--limit", args.limit, minimum=1)
    validate.count("--repeats", args.repeats, minimum=1)
    validate.count("--warmup", args.warmup)
    if args.max_m is not None:
        validate.count("--max-m", args.max_m, minimum=1)
    for lenience in args.leniences:
        if not validate.real("--leniences", lenience) >= 1.0:
            raise ValueError(f"--leniences must each be >= 1, got {lenience:g}")
    sizes = None
    if args.batch_sizes is not None:
        sizes = validate.comma_separated("--batch-sizes", args.batch_sizes, int, "batch sizes")
        for b in sizes:
            validate.count("--batch-sizes", b, minimum=1)
    _prompts(args.prompts, args.limit, 0)
    writable(args.output, "model-set file")
    return sizes


def check_realrun(args: argparse.Namespace, K: object | None):
    """``csd realrun``'s own options (and :func:`check_model_options`); the ``--from``
    model set, loaded (None without ``--from``)."""
    from ewif.files import model_set as model_io

    check_model_options(args)
    n = n_models(args)
    if n < 2:
        raise ValueError("give at least two models (target and a drafter), or one and --mag")
    validate.count("--measure-prompts", args.measure_prompts, minimum=1)
    if args.limit is not None:
        validate.count("--limit", args.limit, minimum=1)
    _prompts(args.prompts, args.measure_prompts, args.limit or 1)
    given = None
    if args.model_set is not None:
        given = model_io.load(args.model_set)
        if args.dtype == "auto" or args.threads == "auto":
            raise ValueError(
                "a pre-measured model set (--from) needs the numerics it was measured with: "
                "give dtype and threads (--dtype, --threads) explicitly"
            )
        if len(given.models) != n:
            raise ValueError(
                f"--from {args.model_set} describes models {list(given.models)}, but "
                f"{n} are given" + (" (with --mag's Max-Gram)" if args.mag else "")
            )
    leniences = given.leniences if given is not None else REALRUN_LENIENCES
    check_lenience(args.lenience, K, n, leniences)
    if args.output:
        writable(args.output, "results file")
    return given


def check_lenience(lenience: float, K: object | None, n: int, measured: Sequence[float]) -> None:
    """``--lenience`` against ``--K`` (over ``n`` models) and the ``measured`` leniences: a
    lenience other than 1 needs a K in which a drafter reviews, and must be measured."""
    lenience = validate.real("--lenience", lenience)
    if K is not None:
        K = validate.budget_matrix("--K", K, n - 1)
    if lenience == 1.0:
        return
    if K is None:
        raise ValueError(
            f"--lenience {lenience:g} needs --K (the recommendation chooses its own lenience)"
        )
    if not np.asarray(K)[1:].any():
        raise ValueError(
            f"--lenience {lenience:g} would apply at the target, the only reviewer of --K "
            f"{np.asarray(K).tolist()}; lenience applies only where a drafter reviews"
        )
    if lenience not in [float(x) for x in measured]:
        raise ValueError(
            f"--lenience {lenience:g} is not measured; the leniences are "
            f"{', '.join(f'{x:g}' for x in measured)}"
        )


def _prompts(source: str, first: int, then: int) -> None:
    """The prompt set exists and holds ``first`` prompts and ``then`` more."""
    from realrun.prompts import load_prompts

    n = len(load_prompts(source))
    if then and n <= first:
        raise ValueError(
            f"the prompt set {source!r} has {n} prompts: none is left for the held-out split "
            f"after the {first} measuring prompts"
        )
    if n < first + then:
        asked = f"{first} measuring and {then} held-out" if then else f"{first}"
        raise ValueError(
            f"the prompt set {source!r} has {n} prompts, fewer than the {asked} asked "
            "(--measure-prompts, --limit)"
        )


def writable(path: str, what: str) -> Path:
    """``path`` can be written: its folder exists and is writable, it is not a folder."""
    p = Path(path).expanduser()
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise ValueError(f"cannot write {what} {path!r}: it is a folder")
    if not parent.is_dir():
        raise ValueError(f"cannot write {what} {path!r}: folder {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise ValueError(f"cannot write {what} {path!r}: permission denied")
    return p
