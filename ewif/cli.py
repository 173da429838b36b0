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

Pipes: a reader that stops early (``csd recommend | head -20``) is normal, not an error.
A ``BrokenPipeError`` (raised by a write, or by the flush of buffered output that
:func:`main` performs before returning) ends the command quietly with exit status 141,
the shell's ``128 + SIGPIPE`` that ``yes | head`` reports for ``yes``; stdout is then
pointed at ``/dev/null`` so the interpreter's final flush has nothing left to fail on.
"""

from __future__ import annotations

import argparse
import importlib
import os
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


#: Exit status after the reader of stdout went away: 128 + SIGPIPE (13).
BROKEN_PIPE = 141


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``csd``; returns the exit status (also used by the console script)."""
    try:
        try:
            return _dispatch(list(sys.argv[1:] if argv is None else argv))
        finally:  # also after --help's SystemExit: the flush is the write that may fail
            sys.stdout.flush()
    except BrokenPipeError:
        _discard_stdout()
        return BROKEN_PIPE


def _discard_stdout() -> None:
    """Point stdout's file descriptor at ``/dev/null``: output still buffered when the
    reader went away is then dropped silently by the interpreter's flush at exit."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not backed by a descriptor
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _dispatch(argv: list[str]) -> int:
    """Parse ``argv`` (without the program name), run the command, return its status."""
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
    except BrokenPipeError:
        raise
    except (ValueError, TypeError, OSError) as exc:
        print(f"csd {name}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"csd {name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
