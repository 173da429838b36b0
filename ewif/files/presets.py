"""Embedded model-set presets (model-set files under ``ewif/files/presets/``).

Each preset carries its sources in ``metadata`` (``source``, ``citation``, and
``assumptions`` for any value that is not a published measurement).

* ``flan-t5-ms`` (the default of ``csd recommend``): FLAN-T5-XXL with BASE, SMALL and MaG,
  model-size costs; acceptance rates are stated assumptions.
* ``t5-cnndm-ms``, ``t5-ende-ms``: T5-XXL with LARGE/BASE/SMALL drafters, the acceptance
  rates of Leviathan et al. (2023, Table 2) used by the paper's Table 1, model-size costs.
* ``sequoia-a100``: Llama2-7B verifying on an A100 with a JF68M drafter — Sequoia's published
  timings (arXiv 2402.12374, its ``demo-config.json``) as a measured-style curve, and an
  assumed rank-acceptance vector (``csd.models/6``): what the tree search picks in a GPU regime.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ewif.files.model_set import ModelSet, load

DEFAULT = "flan-t5-ms"
_DIR = Path(__file__).with_name("presets")


@dataclass(frozen=True)
class PresetInfo:
    name: str
    title: str
    source: str
    models: tuple[str, ...]


def names() -> list[str]:
    """Names of the embedded presets, sorted."""
    return sorted(p.stem for p in _DIR.glob("*.json"))


def load_preset(name: str = DEFAULT) -> ModelSet:
    """The :class:`ModelSet` of preset ``name``; unknown names raise ``ValueError``."""
    if name not in names():
        raise ValueError(f"unknown preset {name!r}; choose from {', '.join(names())}")
    return load(_DIR / f"{name}.json")


def info(name: str) -> PresetInfo:
    ms = load_preset(name)
    meta = ms.metadata
    return PresetInfo(name, str(meta.get("title", "")), str(meta.get("source", "")), ms.models)
