"""``csd`` as a first user runs it: a fresh interpreter whose stderr is not a terminal.

``csd measure`` and ``csd realrun``: normal output carries no warning from a library
(transformers' assisted generation warns about its own call, llama.cpp logs to stderr) and no
progress bar unless ``--progress`` asks for one. Then one test per item that a newcomer found
wrong (issue 35, "A newcomer's first hour"): (1) a plot of a run uses the run's own model set
and cascade, or refuses another; (2) a missing backend extra is one line; (3) bad arguments
are refused before any model is converted; (4) every plot's work is bounded up front; (5)
figures keep their text on the canvas and their markers visible; (8) the recommendation
leads with one decision that every later line agrees with.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ONE_THREAD = ["--threads", "1", "--max-new-tokens", "4"]
ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "realrun" / "data"


def csd(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """``csd ARGS`` in a fresh interpreter, stdout and stderr captured (not a terminal)."""
    return subprocess.run(
        [sys.executable, "-m", "ewif.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env=None if env is None else {**os.environ, **env},
    )


def one_line_exit_2(done: subprocess.CompletedProcess, needle: str) -> None:
    """A usage error: exit status 2, one line on stderr naming ``needle``, no traceback."""
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and needle in done.stderr, done.stderr


def test_transformers_measure_and_realrun_print_no_warning_and_no_bar(
    tiny_model_dirs, prompt_file, tmp_path
):
    models = [str(tiny_model_dirs["target"]), str(tiny_model_dirs["near"]), "--mag"]
    done = csd(
        "measure", *models, "--prompts", str(prompt_file), "--limit", "2",
        "--leniences", "1", "--max-m", "3", "--repeats", "1", "--warmup", "0",
        "--dtype", "float32", *ONE_THREAD, "-o", "m.json",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0 and done.stderr == "", done.stderr
    done = csd(
        "realrun", *models, "--from", "m.json", "--prompts", str(prompt_file),
        "--measure-prompts", "2", "--limit", "1", "--dtype", "float32", *ONE_THREAD,
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0 and done.stderr == "", done.stderr  # HF assisted ran
    assert "HF assisted near" in done.stdout


def test_progress_bars_only_when_asked_or_on_a_terminal(tiny_model_dirs, prompt_file, tmp_path):
    done = csd(
        "measure", str(tiny_model_dirs["target"]), "--mag", "--prompts", str(prompt_file),
        "--limit", "1", "--leniences", "1", "--max-m", "2", "--repeats", "1",
        "--warmup", "0", "--dtype", "float32", *ONE_THREAD, "--progress", "-o", "m.json",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0
    assert "measure α: 100%|" in done.stderr and "Warning" not in done.stderr


def test_llamacpp_measure_and_realrun_print_nothing_on_stderr(prompt_file, tmp_path):
    pytest.importorskip("llama_cpp")
    from realrun.tiny import build_qwen2, write_gguf

    write_gguf(build_qwen2(32, 2, seed=5, vocab_size=259), tmp_path / "target.gguf")
    write_gguf(build_qwen2(16, 1, seed=7, vocab_size=259), tmp_path / "draft.gguf")
    family = ["target.gguf", "draft.gguf", "--mag", "--backend", "llama.cpp"]
    done = csd(
        "measure", *family, "--prompts", str(prompt_file), "--limit", "2",
        "--leniences", "1", "--max-m", "3", "--repeats", "1", "--warmup", "0",
        *ONE_THREAD, "-o", "g.json",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0 and done.stderr == "", done.stderr
    done = csd(
        "realrun", *family, "--prompts", str(prompt_file), "--measure-prompts", "2",
        "--limit", "1", *ONE_THREAD,
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0 and done.stderr == "", done.stderr


# ----------------------------------------------------------------------------- issue 35


def test_item1_a_plot_of_a_run_uses_its_own_model_set_and_cascade(tmp_path):
    run = str(DATA / "cpu_results_smollm2.json")
    done = csd("plot", "decay", "--measured", run, "--trials", "0", "--json", "-o", "d.png",
               cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["models"] == ["smollm2", "mag"] and data["K"] == [[1]]
    assert data["chosen"] == "the cascade the run measured" and run in data["source"]
    done = csd("plot", "decay", "--from", str(DATA / "models_qwen.json"),
               "--measured", str(DATA / "cpu_results_qwen.json"), "--K", "[[2]]",
               "--models", "qwen-1.5b,qwen-0.5b", "-o", "d.png", cwd=tmp_path)  # fmt: skip
    one_line_exit_2(done, "ran qwen-1.5b > qwen-0.5b K=[[1]]")
    # item 7: a results file where a model set is expected gives its run's model set
    done = csd("recommend", "--from", str(DATA / "cpu_results_qwen.json"), cwd=tmp_path)
    assert done.returncode == 0 and "(metadata.model_set)" not in done.stderr, done.stderr


def test_item2_a_missing_backend_extra_is_one_line(tiny_gguf, prompt_file, tmp_path):
    blocked = "import sys; sys.modules['llama_cpp'] = None; from ewif.cli import main; "
    for command in ("realrun", "measure"):
        argv = [command, str(tiny_gguf[0]), "--mag", "--backend", "llama.cpp", "--prompts",
                str(prompt_file), *(["-o", "m.json"] if command == "measure" else [])]  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-c", blocked + f"sys.exit(main({argv!r}))"],
            capture_output=True, text=True, timeout=120, cwd=tmp_path,
        )  # fmt: skip
        one_line_exit_2(done, "needs 'llama_cpp', which is not installed")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--K", "[[2,1],[1,2]]"], "upper"),
        (["--lenience", "3", "--K", "[[2, 0], [0, 0]]"], "would apply at the target"),
        (["--lenience", "4", "--K", "[[2, 1], [0, 2]]"], "--lenience 4 is not measured"),
        (["--dtype", "float64"], "invalid choice: 'float64'"),
        (["--max-new-tokens", "0"], "--max-new-tokens must be an integer >= 1"),
        (["--limit", "99"], "fewer than the 2 measuring and 99 held-out"),
        (["-o", "/nonexistent/o.json"], "folder '/nonexistent' does not exist"),
    ],
)
def test_item3_arguments_are_refused_before_any_model_is_converted(
    tiny_gguf, prompt_file, tmp_path, args, needle
):
    cache = tmp_path / "cache"
    cache.mkdir()
    done = csd("realrun", str(tiny_gguf[0]), str(tiny_gguf[0]), "--mag", "--prompts",
               str(prompt_file), "--measure-prompts", "2", *args, cwd=tmp_path,
               env={"CSD_CACHE": str(cache)})  # fmt: skip
    one_line_exit_2(done, needle)
    assert list(cache.iterdir()) == [] and "converting" not in done.stderr  # nothing converted


def test_item3_a_conversion_says_where_and_how_large(tiny_gguf, tmp_path):
    from realrun.loading import dense_bytes

    script = f"from realrun.loading import convert_gguf; print(convert_gguf({str(tiny_gguf[0])!r}))"
    env = {**os.environ, "CSD_CACHE": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    size = dense_bytes(tiny_gguf[0])
    assert f"in {done.stdout.strip()} ({size / 1e6:,.0f} MB;" in done.stderr


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["landscape", "--k-max", "100000"], "--k-max must be at most 100"),
        (["decay", "--trials", "2000000000"], "--trials must be at most 1,000,000,000"),
        (["decay", "--max-position", "100000"], "--max-position must be at most 1,000"),
        (["ewif-vs-k", "--alpha", "0.8", "--cost", "0.1", "--k-max", "100000000"],
         "--k-max must be at most 200"),
    ],
)  # fmt: skip
def test_item4_every_plot_is_bounded_up_front(tmp_path, argv, needle):
    done = csd("plot", *argv, "-o", "x.png", cwd=tmp_path)
    one_line_exit_2(done, needle)
    assert not (tmp_path / "x.png").exists()


FIGURE_CHECK = """
import sys
from ewif.cli import main
from ewif.plotting import style
from tests.notebooks.test_figure_bounds import outside
figures, save = [], style.save
style.save = lambda fig, path: (figures.append(fig), save(fig, path))[1]
assert main(sys.argv[1:]) == 0
for fig in figures:
    assert outside(fig) == "", outside(fig)
    for ax in fig.axes:
        for line in ax.get_lines():
            if line.get_label().startswith("the cascade (EWIF"):  # the landscape's ring
                assert line.get_markeredgecolor() == "black" and line.get_path_effects()
print(len(figures))
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["plot", "landscape", "--k-max", "10", "-o", "l.png"],
        ["plot", "calibration", str(DATA / "cpu_results_qwen_amx.json"), "-o", "c.png"],
        ["plot", "decay", "--trials", "0", "-o", "d.png"],
    ],
)
def test_item5_figures_keep_their_text_on_the_canvas(tmp_path, argv):
    done = subprocess.run([sys.executable, "-c", FIGURE_CHECK, *argv], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "1", done.stderr


def _model_set(tmp_path, name: str, alpha: float) -> str:
    path = tmp_path / name
    data = {"schema": "csd.models/5", "models": ["t", "d"], "cost": [1.0, 0.1],
            "alpha": [[None, alpha], [None, None]]}  # fmt: skip
    path.write_text(json.dumps(data))
    return str(path)


def test_item8_the_recommendation_leads_with_one_decision(tmp_path):
    # alpha = 1: plain SD at k = 100 beats every configuration of the searched space
    done = csd("recommend", "--from", _model_set(tmp_path, "one.json", 1.0), cwd=tmp_path)
    lines = done.stdout.splitlines()
    assert lines[0].startswith("decision: run plain SD with d, k = 100 at EWIF 9.1818")
    assert "recommended cascade" not in done.stdout and "best in the space" in done.stdout
    # nothing beats AR: no "recommended cascade" after "decode autoregressively"
    done = csd("recommend", "--from", _model_set(tmp_path, "slow.json", 0.05), cwd=tmp_path)
    assert done.stdout.startswith("decision: on these costs, decode autoregressively")
    assert "recommended cascade" not in done.stdout
    assert sum(x.startswith("decision") for x in done.stdout.splitlines()) == 1
    # a NaN alpha is named
    done = csd("recommend", "--from", _model_set(tmp_path, "nan.json", float("nan")), cwd=tmp_path)
    one_line_exit_2(done, "alpha[0][1] (t reviewing d) is missing (null or NaN)")


def test_item10_the_transformers_snippet_runs_as_printed(tiny_model_dirs, tmp_path, capsys):
    """``csd recommend --emit transformers`` prints a program that runs: its tokenizer, its
    inputs, the model class the target's config asks for, the emitted assistant."""
    from ewif.cli import main

    data = {"schema": "csd.models/5", "models": ["target", "near"], "cost": [1.0, 0.05],
            "alpha": [[None, 0.9], [None, None]]}  # fmt: skip
    path = tmp_path / "pair.json"
    path.write_text(json.dumps(data))
    paths = [f"--model-path={n}={tiny_model_dirs[n]}" for n in ("target", "near")]
    assert main(["recommend", "--from", str(path), "--emit", "transformers", *paths,
                 "--json"]) == 0  # fmt: skip
    text = json.loads(capsys.readouterr().out)["emit"]["text"]
    assert "assistant_model=assistant" in text
    namespace: dict = {}
    exec(compile(text, "emitted", "exec"), namespace)
    assert namespace["out"].shape[0] == 1 and namespace["inputs"]["input_ids"].shape[0] == 1
