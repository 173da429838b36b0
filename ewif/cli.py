"""The ``csd`` command-line dispatcher.

Sub-commands are plugins registered under the entry-point group ``csd.commands`` in
``pyproject.toml``; each value names a module exposing

* ``HELP: str`` — one line for ``csd --help``;
* ``add_arguments(parser: argparse.ArgumentParser) -> None``;
* ``run(args: argparse.Namespace) -> int`` — the exit status.

Only the module of the command being run is imported, so ``csd recommend`` never
imports ``simulate`` or ``realrun`` (and never torch); command modules import heavy
dependencies inside ``run``. The dispatcher knows no command by name, which keeps the
package dependencies pointing one way (ewif ← simulate ← realrun).

Errors: a ``ValueError``/``TypeError``/``OSError`` raised by a command is printed as one
line ``csd <command>: error: <message>`` and the exit status is 2 (argparse's convention
for usage errors). ``KeyboardInterrupt`` exits with 130.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points

GROUP = "csd.commands"


def _commands() -> dict[str, str]:
    """Map command name -> module path, from the installed entry points."""
    return {ep.name: ep.value for ep in entry_points(group=GROUP)}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        self.exit(2, f"{self.prog}: error: {message}\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``csd``; returns the exit status (also used by the console script)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = _commands()
    top = _Parser(
        prog="csd",
        description="Cascade Speculative Drafting: theory, simulation and real-model runs.",
        epilog="commands: " + ", ".join(sorted(commands)) + ". Run 'csd COMMAND --help'.",
    )
    top.add_argument("command", choices=sorted(commands), metavar="COMMAND")
    if not argv or argv[0] in ("-h", "--help"):
        top.print_help()
        return 0 if argv else 2
    name = argv[0]
    if name not in commands:
        top.error(f"unknown command {name!r}; choose from {', '.join(sorted(commands))}")
    module = importlib.import_module(commands[name])
    parser = _Parser(prog=f"csd {name}", description=module.HELP)
    module.add_arguments(parser)
    args = parser.parse_args(argv[1:])
    try:
        return int(module.run(args) or 0)
    except (ValueError, TypeError, OSError) as exc:
        print(f"csd {name}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"csd {name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
