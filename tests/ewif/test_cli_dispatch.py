"""The ``csd`` dispatcher: commands are imported lazily, so the ewif commands never import
torch, simulate or realrun; an unknown command is a one-line error with exit status 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ewif.cli import main

PROBE = """
import contextlib, io, sys
from ewif.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    status = main([{args}])
loaded = sorted(m for m in ("torch", "transformers", "simulate", "realrun") if m in sys.modules)
print(status, ",".join(loaded))
"""


def _probe(args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(args=args)], capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def test_ewif_commands_import_neither_torch_nor_the_other_packages() -> None:
    assert _probe("'recommend', '--json'") == "0"
    assert _probe("'presets'") == "0"


def test_simulate_command_does_not_import_torch_or_realrun() -> None:
    assert _probe("'simulate', '--trials', '2000'") == "0 simulate"


def test_unknown_command_is_a_one_line_error(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["no-such-command"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown command 'no-such-command'" in err[0]


RUN_CSD = "import sys; from ewif.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.mark.parametrize(
    "args", [["presets"], ["recommend", "--preset", "flan-t5-ms"], ["recommend", "--json"]]
)
def test_a_reader_closing_stdout_early_ends_the_command_quietly(args) -> None:
    """``csd ... | head -1``: the reader keeps one line and closes the pipe. Whether the
    command still had output to write when that happened (exit 141 = 128 + SIGPIPE) or
    had finished (exit 0) is a race; stderr is empty either way."""
    proc = subprocess.Popen(
        [sys.executable, "-c", RUN_CSD, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=60) in (0, 141)
    assert err == b""


def test_a_reader_gone_before_any_output_gives_exit_141_and_no_message() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", RUN_CSD, "presets"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before the interpreter has even started: every write fails
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 141
    assert err == b""
