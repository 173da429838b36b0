"""The tree commands end to end (in-process): ``csd recommend --tree``, ``csd evaluate
--tree``, ``csd simulate --tree`` and ``csd plot tree``; bad trees, vectors and bounds are
one line and exit 2."""

from __future__ import annotations

import json

import pytest

from ewif.cli import main
from ewif.files.presets import _DIR

TREE = {
    "models": ["llama2-7b", "jf68m"],
    "K": [[6]],
    "review": {"reviewer": "llama2-7b", "drafter": "jf68m", "parents": [-1, 0, 0, 1, 1, 2, 3]},
}


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def _file(tmp_path, **tree) -> str:
    data = json.loads((_DIR / "sequoia-a100.json").read_text())
    data["tree"] = {**TREE, **tree}
    path = tmp_path / "set.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_recommend_tree_on_the_sequoia_preset(capsys) -> None:
    rc, out, _ = run(capsys, "recommend", "--tree", "--preset", "sequoia-a100", "--top", "3")
    assert rc == 0 and "decision: a tree" in out and "best chain" in out
    rc, out, _ = run(capsys, "recommend", "--tree", "--preset", "sequoia-a100", "--json")
    data = json.loads(out)
    assert data["decision"] == "tree" and data["best"]["is_tree"]
    assert data["best"]["ewif"] >= data["best_chain"]["ewif"] and data["autoregressive"] == 1.0


def test_recommend_tree_on_a_set_without_vectors_says_chain(capsys) -> None:
    rc, out, _ = run(capsys, "recommend", "--tree", "--preset", "t5-cnndm-ms", "--k-max", "4")
    assert rc == 0 and "every tree is a chain" in out and "decision: a chain" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tree-nodes", "0"], "--tree-nodes must be an integer >= 1, got 0"),
        (["--tree-depth", "-1"], "--tree-depth must be an integer >= 0, got -1"),
        (["--siblings", "-2"], "--siblings must be an integer >= 0, got -2"),
        (["--k-max", "0"], "--k-max must be an integer >= 1, got 0"),
        (["--batch-sizes", "1,2"], "--tree does not combine with --batch-sizes"),
    ],
)
def test_recommend_tree_bad_bounds(capsys, args, message) -> None:
    rc, _, err = run(capsys, "recommend", "--tree", "--preset", "sequoia-a100", *args)
    assert rc == 2 and message in err and err.count("\n") == 1


def test_evaluate_and_simulate_a_tree_section(capsys, tmp_path) -> None:
    path = _file(tmp_path)
    rc, out, _ = run(capsys, "evaluate", "--tree", path, "--json", "--max-new-tokens", "64")
    data = json.loads(out)
    assert rc == 0 and data["is_tree"] and data["tokens_at_least"][:2] == [1.0, pytest.approx(0.7)]
    assert data["ewif_at_length"] < data["ewif"]
    rc, out, _ = run(capsys, "simulate", "--tree", path, "--trials", "2000", "--json")
    data = json.loads(out)
    assert (
        rc == 0
        and data["agrees"]
        and {r["quantity"] for r in data["rows"]}
        == {
            "expected_tokens",
            "expected_cost",
            "ewif",
        }
    )
    rc, out, _ = run(capsys, "evaluate", "--tree", path)
    assert rc == 0 and "P(tokens >= d + 1)" in out and "jf68m's 7 nodes" in out


@pytest.mark.parametrize(
    ("tree", "message"),
    [
        ({"review": {**TREE["review"], "parents": [-1, 2, 0]}}, "must be a node index in [0, 1)"),
        ({"K": [[5]]}, "must be the tree's draft tokens, 6, got 5"),
        ({"review": {**TREE["review"], "ranks": [0, 1, 1, 1, 2, 1, 1]}}, "same rank 1"),
    ],
)
def test_bad_tree_sections_exit_2(capsys, tmp_path, tree, message) -> None:
    path = _file(tmp_path, **tree)
    for command in ("evaluate", "simulate"):
        rc, _, err = run(capsys, command, "--tree", path)
        assert rc == 2 and message in err and err.count("\n") == 1


def test_plot_tree(capsys, tmp_path) -> None:
    out_path = tmp_path / "tree.png"
    rc, out, _ = run(
        capsys, "plot", "tree", "-o", str(out_path), "--parents", "[-1,0,0,1]",
        "--acceptance", "[0.6,0.2]", "--json",
    )  # fmt: skip
    data = json.loads(out)
    assert rc == 0 and out_path.stat().st_size > 0
    assert data["f"] == pytest.approx([1, 0.6, 0.2, 0.36]) and data["expected_tokens"] == 2.16
    rc, out, _ = run(capsys, "plot", "tree", "-o", str(out_path), "--from", _file(tmp_path))
    assert rc == 0 and "7 nodes" in out
    rc, out, _ = run(capsys, "plot", "tree", "-o", str(out_path), "--preset", "sequoia-a100")
    assert rc == 0 and "16 nodes" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--parents", "[-1,1]", "--acceptance", "[0.5]"], "parents[1] must be a node index"),
        (["--parents", "[-1,0]", "--acceptance", "[0.5,0.7]"], "must sum to at most 1"),
        (["--parents", "[-1,0]", "--acceptance", "[-0.5]"], "p_1 = -0.5"),
        (["--parents", "[-1,0]", "--acceptance", "[NaN]"], "p_1 = nan"),
        (["--parents", "[-1,0]"], "give --parents and --acceptance together"),
        (["--preset", "sequoia-a100", "--nodes", "0"], "--nodes must be an integer >= 1, got 0"),
        (["--preset", "sequoia-a100", "--depth", "-1"], "--depth must be an integer >= 0"),
    ],
)
def test_plot_tree_bad_input(capsys, tmp_path, args, message) -> None:
    rc, _, err = run(capsys, "plot", "tree", "-o", str(tmp_path / "t.png"), *args)
    assert rc == 2 and message in err and err.count("\n") == 1
