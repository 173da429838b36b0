"""``csd measure`` and ``csd realrun`` as a first user runs them: a fresh interpreter whose
stderr is not a terminal. Normal output carries no warning from a library (transformers'
assisted generation warns about its own call, llama.cpp logs to stderr) and no progress bar
unless ``--progress`` asks for one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ONE_THREAD = ["--threads", "1", "--max-new-tokens", "4"]


def csd(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``csd ARGS`` in a fresh interpreter, stdout and stderr captured (not a terminal)."""
    return subprocess.run(
        [sys.executable, "-m", "ewif.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


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
