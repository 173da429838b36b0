"""What a first user meets on the command line: --version, command descriptions in --help,
defaults in every flag's help, and one line (not a traceback) when an extra is missing."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

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
    from ewif import validate

    with pytest.raises(ValueError) as info:
        call(validate)
    assert str(info.value).endswith(shown) and "np." not in str(info.value)
