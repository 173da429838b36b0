"""What a first user meets on the command line: --version, command descriptions in --help,
defaults in every flag's help, one line (not a traceback) when an extra is missing, Ctrl-C,
and normal output free of library warnings and progress bars off a terminal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest

from ewif import cli


def csd(*args: str, block: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Run ``csd`` in a fresh interpreter, with the modules in ``block`` made unimportable
    (as on a theory-only install)."""
    code = (
        "import sys\n"
        + "".join(f"sys.modules[{name!r}] = None\n" for name in block)
        + "from ewif.cli import main\nraise SystemExit(main(sys.argv[1:]))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120
    )


def test_version(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"csd {version(cli.DISTRIBUTION)}"


def test_help_lists_every_command_with_its_description(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name, module in cli._commands().items():
        import importlib

        help_line = importlib.import_module(module).HELP
        assert any(line.split() == [name, *help_line.split()] for line in out.splitlines()), name


@pytest.mark.parametrize("command", ["recommend", "simulate", "measure", "realrun"])
def test_every_flag_help_shows_its_default(command, capsys):
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for flag in {
        "measure": ["--max-new-tokens", "--k-max", "--limit"],
        "realrun": ["--max-new-tokens", "--k-max", "--measure-prompts"],
        "recommend": ["--k-max"],
        "simulate": ["--trials"],
    }[command]:
        tail = out.split(flag, 2)[-1]  # the option's own entry, after the usage line
        assert "default" in tail.split(" --")[0], (command, flag)


@pytest.mark.parametrize("command", [["measure", "m", "-o", "x.json"], ["realrun", "m"]])
def test_missing_extra_is_one_line_naming_it(command):
    done = csd(*command, block=("torch", "transformers"))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert "is not installed" in lines[0] and "[realrun]" in lines[0]


def test_ctrl_c_with_a_partial_result_prints_it_and_exits_130(monkeypatch, capsys):
    import simulate.bernoulli as bernoulli

    real = bernoulli.simulate

    def interrupted(cascade, trials, seed=0, **kwargs):
        class Stop(bernoulli.IidAcceptance):
            calls = 0

            def accepted(self, *args):
                type(self).calls += 1
                if type(self).calls > 50:
                    raise KeyboardInterrupt
                return super().accepted(*args)

        spec = bernoulli.CascadeSpec.of(cascade)
        return real(cascade, trials, seed, batch_size=500, acceptance=Stop(spec.alpha))

    monkeypatch.setattr(bernoulli, "simulate", interrupted)
    assert cli.main(["simulate", "--trials", "1000000"]) == 130
    out = capsys.readouterr().out
    assert "INTERRUPTED" in out


def test_recommender_says_when_its_space_misses_a_better_plain_sd(capsys):
    import json

    assert cli.main(["recommend", "--preset", "t5-cnndm-ms", "--space", "paper", "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any("plain SD with t5-base, k = 8" in n and "beats every" in n for n in notes)
    assert any("meant for a free Max-Gram" in n and "'t5-small'" in n for n in notes)
    assert cli.main(["recommend"]) == 0  # the paper's own family: nothing to warn about
    assert "note:" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("call", "shown"),
    [
        (lambda v: v.probabilities("a", np.array([0.5, 1.5])), "got 1.5"),
        (lambda v: v.probability("a", np.float64(1.5)), "got 1.5"),
        (lambda v: v.count("k", np.int64(-1)), "got -1"),
        (lambda v: v.costs("c", [1.0, -np.float64(2)]), "got -2.0"),
    ],
)
def test_numpy_reprs_never_reach_a_message(call, shown):
    from ewif.base import validate

    with pytest.raises(ValueError) as info:
        call(validate)
    assert str(info.value).endswith(shown) and "np." not in str(info.value)


def test_a_new_user_meets_version_commands_and_defaults():
    """The same, as a first user meets them: each in a fresh interpreter."""
    done = csd("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"csd {version(cli.DISTRIBUTION)}"
    listed = csd("--help").stdout.splitlines()
    for name in cli._commands():
        assert any(line.split()[:1] == [name] and len(line.split()) > 2 for line in listed), name
    usage = " ".join(csd("measure", "--help").stdout.split())
    for flag, default in [("--max-new-tokens", "32"), ("--k-max", "12"), ("--limit", "4")]:
        assert f"(default: {default})" in usage.split(flag, 2)[-1].split(" --")[0], flag


@pytest.mark.parametrize(
    "command",
    [
        ["recommend"],
        ["simulate", "--trials", "20000", "--plot", "s.png"],
        ["plot", "decay", "--trials", "2000", "-o", "d.png"],
        ["plot", "ewif-vs-k", "-o", "e.png"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_normal_output_has_no_warning_and_no_bar_off_a_terminal(command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    done = csd(*command)
    assert done.returncode == 0 and done.stderr == "", done.stderr


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a running process (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_ctrl_c_in_a_fresh_interpreter_prints_the_partial_result_and_exits_130():
    code = "import sys\nfrom ewif.cli import main\nraise SystemExit(main(sys.argv[1:]))\n"
    child = subprocess.Popen(
        [sys.executable, "-c", code, "simulate", "--trials", "1000000000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A terminal's Ctrl-C reaches a process that handles SIGINT; a runner started in the
        # background (`cmd &` without job control) ignores it, its children inherit that,
        # and Python then installs no KeyboardInterrupt handler at all.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 120
        while _cpu_seconds(child.pid) < 3.0 and time.monotonic() < deadline:
            time.sleep(0.1)  # imports done, the simulation running: Ctrl-C now
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=120)
    finally:
        child.kill()
    assert child.returncode == 130, err
    assert "INTERRUPTED" in out and "Traceback" not in err
