"""``csd presets``: list the embedded model-set presets with their sources."""

from __future__ import annotations

import argparse
import json

HELP = "list the embedded model-set presets (models, costs, sources)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="show one preset in full (its model-set file)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    from ewif.files import presets

    if args.name:
        ms = presets.load_preset(args.name)
        print(json.dumps(ms.to_dict(), indent=2))
        return 0
    infos = [presets.info(n) for n in presets.names()]
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "name": i.name,
                        "title": i.title,
                        "models": list(i.models),
                        "source": i.source,
                        "default": i.name == presets.DEFAULT,
                    }
                    for i in infos
                ],
                indent=2,
            )
        )
        return 0
    for i in infos:
        star = " (default)" if i.name == presets.DEFAULT else ""
        print(f"{i.name}{star}: {i.title}")
        print(f"  models: {', '.join(i.models)}")
        print(f"  source: {i.source}")
    return 0
