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
for usage errors). A missing optional dependency (``torch`` on a theory-only install) is one
line naming the extra to install (:data:`EXTRAS`), exit 2. ``KeyboardInterrupt`` exits with
130. ``csd --help`` lists every command with its one-line ``HELP``; ``csd --version`` prints
the installed version.

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
import re
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points, version

GROUP = "csd.commands"
DISTRIBUTION = "cascade-speculative-drafting"
#: Top-level module -> the ``pip install`` that provides it.
EXTRAS = {
    "torch": f"pip install torch==2.13.0 && pip install '{DISTRIBUTION}[realrun]'",
    "transformers": f"pip install '{DISTRIBUTION}[realrun]'",
    "accelerate": f"pip install '{DISTRIBUTION}[realrun]'",
    "safetensors": f"pip install '{DISTRIBUTION}[realrun]'",
    "gguf": f"pip install '{DISTRIBUTION}[realrun]'",
    "llama_cpp": 'pip install "$(benchmarks/build_llamacpp_wheel.sh)" (see docs/realrun.md)',
}


def add_fill_argument(parser: argparse.ArgumentParser) -> None:
    """``--fill tokens|rounds``, Algorithm 1's two readings of a drafter's budget, for every
    command that evaluates a cascade."""
    parser.add_argument(
        "--fill",
        choices=("tokens", "rounds"),
        default="tokens",
        help="how a reviewing drafter fills its block: review calls until it holds at least "
        "its K entry in tokens, or exactly K entry review calls (rounds)",
    )


def _commands() -> dict[str, str]:
    """Map command name -> module path, from the installed entry points."""
    return {ep.name: ep.value for ep in entry_points(group=GROUP)}


def _command_list(commands: dict[str, str]) -> str:
    """``commands:`` and one line per command with its ``HELP`` (the modules are light:
    they import heavy dependencies only when run)."""
    width = max(map(len, commands), default=0)
    lines = ["commands:"]
    for name in sorted(commands):
        help_line = getattr(importlib.import_module(commands[name]), "HELP", "")
        lines.append(f"  {name:<{width}}  {help_line}")
    return "\n".join(lines)


def _show_defaults(parser: argparse.ArgumentParser) -> None:
    """Append ``(default: …)`` to the help of every option with a default its help does not
    already state (flags that are off by default and options without a default excepted)."""
    for action in parser._actions:
        default = action.default
        if not action.option_strings or any(default is v for v in (None, False, argparse.SUPPRESS)):
            continue
        text = action.help or ""
        if "default" not in text:
            action.help = f"{text} (default: %(default)s)".strip()


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # "-1,2" (a list with a negative first value) is a value, not an option: argparse
        # otherwise says "expected one argument" instead of the option's own check
        self._negative_number_matcher = re.compile(r"^-\d[\d.,eE+-]*$|^-\.\d+$")

    def error(self, message: str) -> None:  # one line, exit 2
        self.exit(2, f"{self.prog}: error: {message}\n")


#: Exit status after the reader of stdout went away: 128 + SIGPIPE (13).
BROKEN_PIPE = 141
#: Exit status after Ctrl-C (128 + SIGINT), also when a command printed a partial result.
INTERRUPTED = 130


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
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument("command", choices=sorted(commands), metavar="COMMAND")
    top.add_argument("--version", action="store_true", help="print the version and exit")
    if argv and argv[0] == "--version":
        print(f"csd {version(DISTRIBUTION)}")
        return 0
    if not argv or argv[0] in ("-h", "--help"):  # only help imports every command module
        top.epilog = _command_list(commands) + "\n\nRun 'csd COMMAND --help' for its options."
        top.print_help()
        return 0 if argv else 2
    name = argv[0]
    if name not in commands:
        top.error(f"unknown command {name!r}; choose from {', '.join(sorted(commands))}")
    module = importlib.import_module(commands[name])
    parser = _Parser(prog=f"csd {name}", description=module.HELP)
    module.add_arguments(parser)
    _show_defaults(parser)
    args = parser.parse_args(argv[1:])
    try:
        return int(module.run(args) or 0)
    except BrokenPipeError:
        raise
    except ModuleNotFoundError as exc:
        top_level = (exc.name or "").split(".")[0]
        if top_level not in EXTRAS:
            raise
        print(
            f"csd {name}: error: this command needs {top_level!r}, which is not installed; "
            f"install it with: {EXTRAS[top_level]}",
            file=sys.stderr,
        )
        return 2
    except (ValueError, TypeError, OSError) as exc:
        print(f"csd {name}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"csd {name}: interrupted", file=sys.stderr)
        return INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
