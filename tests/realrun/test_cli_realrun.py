"""``csd measure`` and ``csd realrun`` end to end on tiny model directories; bad input
-> one-line error, exit 2."""

from __future__ import annotations

import json

import pytest

from ewif.cli import main
from ewif.files import model_set as model_io
from ewif.files import results as results_io
from realrun.numerics_choice import CHOICE_RULES

NUMERICS = ["--dtype", "float32", "--threads", "1", "--measure-prompts", "2"]


@pytest.fixture(scope="module")
def prompt_file(tmp_path_factory):
    from realrun.tiny import PROMPT_TEXTS

    path = tmp_path_factory.mktemp("prompts") / "p.jsonl"
    path.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in PROMPT_TEXTS))
    return path


@pytest.fixture(scope="module")
def measured(tiny_model_dirs, prompt_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("measured") / "m.json"
    code = main(
        [
            "measure",
            str(tiny_model_dirs["target"]),
            str(tiny_model_dirs["near"]),
            "--mag",
            "--prompts",
            str(prompt_file),
            "--limit",
            "2",
            "--max-new-tokens",
            "6",
            "--leniences",
            "1",
            "3",
            "--max-m",
            "3",
            "--repeats",
            "1",
            "--warmup",
            "0",
            *NUMERICS[:4],
            "-o",
            str(out),
        ]
    )
    assert code == 0
    return out


def test_measure_writes_a_model_set(measured, capsys):
    ms = model_io.load(measured)
    assert ms.models == ("target", "near", "mag") and ms.leniences == (1.0, 3.0)
    assert main(["recommend", "--from", str(measured)]) == 0


def test_realrun_given_cascade_with_plots(tiny_model_dirs, measured, prompt_file, tmp_path, capsys):
    out, plot = tmp_path / "r.json", tmp_path / "cal.png"
    code = main(
        [
            "realrun",
            str(tiny_model_dirs["target"]),
            str(tiny_model_dirs["near"]),
            "--mag",
            "--from",
            str(measured),
            *NUMERICS,
            "--prompts",
            str(prompt_file),
            "--max-new-tokens",
            "6",
            "--K",
            "[[2, 0], [0, 3]]",
            "--lenience",
            "3",
            "-o",
            str(out),
            "--plot",
            str(plot),
            "--json",
        ]
    )
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    res = results_io.load(out)
    assert printed["schema"] == "csd.results/1" and res.prompts == 2  # the held-out split
    assert res.method("CSD [[2, 0], [0, 3]] l=3").config["lenience"] == 3.0
    assert set(res.metadata["outputs_differing_from_AR"].values()) == {0}
    for path in (plot, tmp_path / "cal-decay.png"):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_realrun_recommends_when_no_cascade_is_given(
    tiny_model_dirs, measured, prompt_file, capsys
):
    code = main(
        [
            "realrun",
            str(tiny_model_dirs["target"]),
            str(tiny_model_dirs["near"]),
            "--mag",
            "--from",
            str(measured),
            *NUMERICS,
            "--prompts",
            str(prompt_file),
            "--limit",
            "1",
            "--max-new-tokens",
            "4",
            "--no-baselines",
            "--k-max",
            "3",
        ]
    )
    assert code == 0
    captured = capsys.readouterr()
    assert "AR" in captured.out and "CSD" in captured.out
    assert "csd realrun:" not in captured.err  # no progress bars when stderr is not a terminal


def test_realrun_refuses_a_model_set_of_other_models(
    tiny_model_dirs, measured, prompt_file, capsys
):
    # the file describes (target, near, mag), the run loads (target, mag)
    code = main(
        [
            "realrun",
            str(tiny_model_dirs["target"]),
            "--mag",
            "--from",
            str(measured),
            *NUMERICS,
            "--prompts",
            str(prompt_file),
            "--limit",
            "1",
            "--max-new-tokens",
            "4",
        ]
    )
    assert code == 2
    assert "describes models" in capsys.readouterr().err


@pytest.fixture(scope="module")
def other_tokenizer_dir(tiny_model_dirs, tmp_path_factory):
    from transformers import AutoTokenizer

    path = tmp_path_factory.mktemp("other")
    import shutil

    shutil.copytree(tiny_model_dirs["near"], path, dirs_exist_ok=True)
    tok = AutoTokenizer.from_pretrained(path)
    tok.add_tokens(["zebra"])
    tok.save_pretrained(path)
    return path


def _bad(args, capsys, needle):
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err, err


def test_bad_input_exits_2_with_one_line(
    tiny_model_dirs, measured, prompt_file, tmp_path, other_tokenizer_dir, capsys
):
    t, near = str(tiny_model_dirs["target"]), str(tiny_model_dirs["near"])
    common = ["--prompts", str(prompt_file), "--limit", "1", "--max-new-tokens", "3", *NUMERICS[:4]]
    rr = [*common, "--measure-prompts", "2"]
    _bad(
        ["measure", t, str(other_tokenizer_dir), *common, "-o", str(tmp_path / "x.json")],
        capsys,
        "do not share a tokenizer",
    )
    _bad(
        ["realrun", t, near, "--mag", "--from", str(measured), *rr, "--K", "[[1, 1], [1, 1]]"],
        capsys,
        "upper",
    )
    _bad(
        [
            "realrun",
            t,
            near,
            "--mag",
            "--from",
            str(measured),
            *rr,
            "--K",
            "[[2, 3], [0, 0]]",
            "--lenience",
            "3",
        ],
        capsys,
        "would apply at the target",
    )
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"prompt": ""}\n')
    _bad(
        ["realrun", t, near, "--mag", "--from", str(measured), "--prompts", str(empty)],
        capsys,
        "non-empty string",
    )
    _bad(
        ["measure", str(tmp_path / "no-such-model"), near, *common, "-o", str(tmp_path / "x.json")],
        capsys,
        "does not exist",
    )
    _bad(
        ["realrun", t, near, "--mag", "--from", str(measured), *rr, "--K", "[[2"],
        capsys,
        "JSON matrix",
    )
    _bad(
        [
            "realrun",
            t,
            near,
            "--mag",
            "--from",
            str(measured),
            "--prompts",
            str(prompt_file),
            "--measure-prompts",
            "2",
        ],
        capsys,
        "give dtype and threads",
    )
    _bad(["realrun", t, near, "--mag", *common], capsys, "none is left for the held-out split")
    _bad(
        ["measure", t, near, *common, "--min-timing-seconds", "-5", "-o", str(tmp_path / "x.json")],
        capsys,
        "--min-timing-seconds must be",
    )
    with pytest.raises(SystemExit) as exit_:  # argparse's usage error
        main(["measure", t, near, "--threads", "0", "-o", str(tmp_path / "x.json")])
    assert exit_.value.code == 2 and "positive integer" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["measure", t, near, "--batch-invariance", "loose", "-o", str(tmp_path / "x.json")])
    assert exit_.value.code == 2 and "invalid choice: 'loose'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["realrun", t, near, "--numerics-choice", "best", "-o", str(tmp_path / "x.json")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "invalid choice: 'best'" in err
    assert all(f"'{rule}'" in err for rule in CHOICE_RULES)  # the parser's list is the rules'


def test_the_batch_invariance_rule_reaches_the_model_set(tiny_model_dirs, prompt_file, tmp_path):
    out = tmp_path / "m.json"
    args = ["--prompts", str(prompt_file), "--limit", "2", "--max-new-tokens", "4"]
    args += ["--leniences", "1", "--max-m", "2", "--repeats", "1", "--warmup", "0"]
    t, near = str(tiny_model_dirs["target"]), str(tiny_model_dirs["near"])
    rule = ["--batch-invariance", "near-ties"]
    assert main(["measure", t, near, *args, *NUMERICS[:4], *rule, "-o", str(out)]) == 0
    meta = model_io.load(out).metadata
    assert meta["batch_invariance_rule"] == "near-ties" and meta["batch_invariance"]["positions"]
