"""A newcomer's first hour (issue 35), the in-process items: an interrupted search decides
nothing (12), options never silently ignored or capped (13), messages that name the option
and help for every option (14), batch sizes priced alike are said to be (10), and one
separator rule for ``--models``."""

from __future__ import annotations

import json

import pytest

from ewif.cli import main


def run(capsys, *argv):
    try:
        rc = main(list(argv))
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


def test_an_interrupted_search_decides_nothing(capsys, monkeypatch):
    from ewif.search import recommendation

    real = recommendation.optimize

    def interrupted(*args, **kwargs):
        result = real(*args, **kwargs)
        result.interrupted = True
        return result

    monkeypatch.setattr(recommendation, "optimize", interrupted)
    rc, out, _ = run(capsys, "recommend")
    lines = out.splitlines()
    assert rc == 130
    assert lines[0].startswith("decision: none: the search was interrupted after 81,000")
    assert lines[2].startswith("interrupted after 81,000 configurations")
    assert "recommended cascade" not in out


def test_models_without_K_say_so_in_plot_and_simulate_alike(capsys, tmp_path):
    _, _, plot = run(capsys, "plot", "decay", "--models", "flan-t5-xxl,flan-t5-base",
                     "-o", str(tmp_path / "d.png"))  # fmt: skip
    _, _, sim = run(capsys, "simulate", "--models", "flan-t5-xxl,flan-t5-base")
    needle = "--models needs --K"
    assert needle in plot and needle in sim


def test_models_take_commas_or_spaces(capsys, tmp_path):
    outs = []
    for models in (["flan-t5-xxl,flan-t5-base,mag"], ["flan-t5-xxl", "flan-t5-base", "mag"]):
        rc, out, err = run(capsys, "plot", "landscape", "--models", *models, "--K",
                           "[[4,10],[0,10]]", "--k-max", "4", "--json",
                           "-o", str(tmp_path / "l.png"))  # fmt: skip
        assert rc == 0, err
        outs.append(json.loads(out)["models"])
    assert outs[0] == outs[1] == ["flan-t5-xxl", "flan-t5-base", "mag"]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["plot", "ewif-vs-k", "--alpha", "0.8", "--cost", "0.1", "--k-max", "100000000"],
         "--k-max must be at most 200"),
        (["recommend", "--batch-sizes", ""], "--batch-sizes must be batch sizes"),
        (["plot", "decay", "--pair", "0,1"], "--pair chooses a curve of --measured"),
        (["simulate", "--models", "flan-t5-xxl,flan-t5-base", "--K", "[[3]]", "--lenience",
          "3"], "would apply at the target"),
        (["plot", "decay", "--models", "flan-t5-xxl,flan-t5-base", "--K", "[[3]]",
          "--lenience", "3"], "would apply at the target"),
        (["recommend", "--preset", "t5-cnndm-ms", "--mag-block", "5"],
         "--mag-block sets Max-Gram's budgets in the paper space"),
        (["recommend", "--batch-sizes", "-1,2"], "--batch-sizes must lie in 1..1024, got -1"),
        (["simulate", "--seed", "-1"], "--seed must be an integer >= 0"),
    ],
)  # fmt: skip
def test_options_are_refused_not_ignored(capsys, tmp_path, argv, needle):
    if argv[0] == "plot":
        argv = [*argv, "-o", str(tmp_path / "x.png")]
    rc, _, err = run(capsys, *argv)
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1, err


def test_a_plain_sd_section_names_its_lenience_unused(capsys, tmp_path):
    from ewif.files import presets

    data = presets.load_preset("t5-cnndm-ms").to_dict()
    data["alpha"] = {"1": data["alpha"]["1"], "3": data["alpha"]["1"]}
    data["cascade"] = {"models": ["t5-xxl", "t5-small"], "K": [[3]], "lenience": 3}
    path = tmp_path / "sd.json"
    path.write_text(json.dumps(data))
    rc, out, err = run(capsys, "evaluate", str(path))
    assert rc == 0, err
    assert "lenience 3 (unused: only the target reviews)" in out


def test_batch_sizes_priced_alike_are_said_to_be(capsys):
    rc, out, err = run(capsys, "recommend", "--emit", "vllm", "--batch-sizes", "1,4,16,64")
    assert rc == 0, err
    assert "every batch size is priced alike" in out
    rc, out, _ = run(capsys, "recommend", "--batch-sizes", "1,4")
    assert "note: this set has no batched costs" in out


def _parsers():
    """Every command's parser, and every ``csd plot`` kind's."""
    import argparse
    import importlib

    from ewif import cli

    for name, module in sorted(cli._commands().items()):
        parser = cli._Parser(prog=f"csd {name}", description="-")
        importlib.import_module(module).add_arguments(parser)
        yield f"csd {name}", parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for kind, sub in action.choices.items():
                    yield f"csd {name} {kind}", sub


def test_every_option_has_a_description_and_every_plot_kind_a_description_line():
    missing = [
        f"{prog} {action.option_strings[0]}"
        for prog, parser in _parsers()
        for action in parser._actions
        if action.option_strings and action.help in (None, "") and action.dest != "help"
    ]
    assert missing == []
    for prog, parser in _parsers():
        assert parser.description, prog


def test_one_rule_chooses_the_cascade_of_a_file():
    """Given K, else the set's cascade section, else the recommendation; models without K
    refused whatever the set holds."""
    from ewif.files import presets
    from ewif.search import recommendation as rec

    with_section, without = presets.load_preset("flan-t5-ms"), presets.load_preset("t5-cnndm-ms")
    given = rec.choose_cascade(without, ["t5-xxl", "t5-small"], [[3]])
    assert given.how == rec.GIVEN and given.cascade.K.tolist() == [[3]]
    section = rec.choose_cascade(with_section)
    assert section.how == rec.SECTION and section.lenience == with_section.cascade.lenience
    chosen = rec.choose_cascade(without)
    assert chosen.how == rec.RECOMMENDED
    assert chosen.cascade.K.tolist() == rec.recommend(without).best.K.tolist()
    for ms in (with_section, without):
        with pytest.raises(ValueError, match="--models needs --K"):
            rec.choose_cascade(ms, ["t5-xxl", "t5-small"] if ms is without else ms.models[:2])


@pytest.mark.parametrize("preset", ["flan-t5-ms", "t5-cnndm-ms"])
def test_plot_and_simulate_choose_the_same_cascade(capsys, tmp_path, preset):
    rc, out, err = run(capsys, "simulate", "--preset", preset, "--trials", "2000", "--json")
    assert rc in (0, 1), err
    simulated = json.loads(out)["cascade"]
    rc, out, err = run(capsys, "plot", "landscape", "--preset", preset, "--k-max", "3",
                       "--json", "-o", str(tmp_path / "l.png"))  # fmt: skip
    assert rc == 0, err
    plotted = json.loads(out)
    assert (plotted["models"], plotted["K"]) == (simulated["models"], simulated["K"])
    assert plotted["chosen"] == simulated["chosen"]
