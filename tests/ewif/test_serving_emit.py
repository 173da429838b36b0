"""Configurations out (ewif.serving, csd recommend --emit): every emitted option name is in its
engine's table read from the engine's source, the printed EWIF is ewif's on the emitted method,
the per-batch-size schedule is ewif.predict.batch's as the engine reads it, and bad input is
refused."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif import cli
from ewif.files import model_set as model_io
from ewif.files.presets import load_preset
from ewif.predict.batch import batch_ratio, best_draft_lengths, schedule
from ewif.search.optimizer import best_sd
from ewif.serving import emit as serving
from ewif.serving.engines import ENGINES, help_flags
from tests.ewif.test_batch import model_set as batch_set

SIZES = [1, 2, 4, 8, 16, 32]


def qwen_set() -> model_io.ModelSet:
    return model_io.load(
        Path(__file__).resolve().parents[2] / "realrun" / "data" / "models_qwen.json"
    )


def mag_set(alpha_mag: float = 0.8) -> model_io.ModelSet:
    """Target, a dear drafter and a free Max-Gram of high α: the n-gram lookup wins."""
    alpha = np.full((3, 3), np.nan)
    alpha[0, 1], alpha[0, 2], alpha[1, 2] = 0.5, alpha_mag, 0.5
    return model_io.ModelSet(
        models=("t", "d", "mag"),
        cost=np.array([1.0, 0.5, 0.0]),
        cost_per_token=np.zeros(3),
        alpha={1.0: alpha},
    )


SETS = {"flan": lambda: load_preset("flan-t5-ms"), "batch": batch_set, "qwen": qwen_set}


@pytest.mark.parametrize("sizes", [None, SIZES], ids=["batch1", "batches"])
@pytest.mark.parametrize("key", sorted(ENGINES))
@pytest.mark.parametrize("which", [*SETS, "mag"])
def test_emitted_configs_use_only_the_engines_option_names(which, key, sizes):
    ms = mag_set() if which == "mag" else SETS[which]()
    em = serving.emission(ms, key, sizes, k_max=12)
    eng = ENGINES[key]
    assert em.option_names() <= eng.options, em.option_names() - eng.options
    for name, value in em.option_values().items():
        assert value in eng.values[name], (name, value)
    assert em.notes[0].startswith(f"{eng.name} runs plain speculative drafting")
    if em.plan.method != serving.NONE:
        assert em.option_names(), "a speculating configuration names its options"


@pytest.mark.parametrize("key", sorted(ENGINES))
def test_a_free_max_gram_is_emitted_as_the_engines_ngram_lookup(key):
    em = serving.emission(mag_set(), key)
    assert (em.plan.method, em.plan.drafter) == (serving.NGRAM, "mag")
    assert "n-gram lookup" in em.notes[1]
    method = {
        "vllm": ("method", "ngram"),
        "sglang": ("--speculative-algorithm", "NGRAM"),
        "trtllm": ("decoding_type", "SA"),
        "llama.cpp": ("--spec-type", "ngram-simple"),
    }
    if key in method:
        name, value = method[key]
        assert em.option_values()[name] == value
    else:
        assert em.config["prompt_lookup_num_tokens"] == em.plan.k


@pytest.mark.parametrize("which", [*SETS, "mag"])
def test_the_printed_ewif_is_ewifs_on_the_emitted_method(which, tmp_path, capsys):
    ms = mag_set() if which == "mag" else SETS[which]()
    path = model_io.save(ms, tmp_path / "set.json")
    assert cli.main(["recommend", "--from", str(path), "--emit", "trtllm", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    em = out["emit"]
    target, drafter, k = ms.models[0], em["drafter"], em["k"]
    sd = best_sd(ms, [drafter])
    assert k == int(sd.K[0, 0])
    assert em["ewif"] == ms.to_cascade([target, drafter], [[k]]).ewif()
    assert em["ewif"] == max(best_sd(ms, [d]).ewif for d in ms.models[1:])
    assert em["config"]["speculative_config"]["max_draft_len"] == k
    human = _human(path, "trtllm")
    assert f"emitted {em['ewif']:.4f}; best cascade" in human
    assert f"{out['recommended']['ewif']:.4f}" in human


@pytest.mark.parametrize("which", [*SETS, "mag"])
def test_vllm_is_priced_as_vllm_drafts(which, tmp_path, capsys):
    """vLLM's draft model pays a padded catch-up pass of k + 2 positions every step
    (ewif.predict.batch, drafting 'vllm'): the emitted k and EWIF are that pricing's best."""
    ms = mag_set() if which == "mag" else SETS[which]()
    path = model_io.save(ms, tmp_path / "set.json")
    assert cli.main(["recommend", "--from", str(path), "--emit", "vllm", "--json"]) == 0
    em = json.loads(capsys.readouterr().out)["emit"]
    drafter, k = em["drafter"], em["k"]
    best = {
        d: max(batch_ratio(ms, d, j, 1, drafting="vllm") for j in range(1, 13))
        for d in ms.models[1:]
        if not np.isnan(ms.alpha[1.0][0, ms.index(d)])
    }
    if em["method"] == serving.NONE:
        assert max(best.values()) <= 1.0 and not em["config"]
        assert "--speculative-config" not in em["text"]
        return
    assert em["ewif"] == batch_ratio(ms, drafter, k, 1, drafting="vllm") == max(best.values())
    assert em["config"]["num_speculative_tokens"] == k
    assert em["text"].startswith("python -m vllm.entrypoints.openai.api_server --model ")


def _human(path, engine, *more) -> str:
    import contextlib
    import io as _io

    buf = _io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert cli.main(["recommend", "--from", str(path), "--emit", engine, *more]) == 0
    return buf.getvalue()


def vllm_k(entries: list[list[int]], batch: int) -> int:
    """vLLM's lookup (vllm/v1/spec_decode/dynamic/utils.py): the range holding ``batch``, a gap
    takes the previous range's K, past the last range the last K."""
    k = None
    for low, high, kk in entries:
        if batch < low:
            break
        k = kk
        if batch <= high:
            break
    return k


def trtllm_k(schedule_: dict[int, int], batch: int) -> int:
    """TensorRT-LLM's draft_len_schedule (llm_args.py): the smallest key >= batch, else 0."""
    keys = [key for key in sorted(schedule_) if key >= batch]
    return schedule_[keys[0]] if keys else 0


@settings(max_examples=40)
@given(
    alpha=st.floats(0.3, 0.95),
    draft=st.floats(0.02, 0.6),
    slope=st.floats(0.0, 0.2),
    sizes=st.lists(st.integers(1, 24), min_size=1, max_size=6, unique=True),
)
def test_the_schedule_by_batch_size_is_ewif_batch_as_the_engine_reads_it(
    alpha, draft, slope, sizes
):
    target = np.concatenate([[1.0, 1.01, 1.02], 1.02 + slope * np.arange(1, 200)])
    a = np.full((2, 2), np.nan)
    a[0, 1] = alpha
    ms = model_io.ModelSet(
        models=("t", "d"),
        cost=np.array([1.0, draft]),
        cost_per_token=np.zeros(2),
        alpha={1.0: a},
        cost_curve=(target, draft * target[:8]),
    )
    for key in ("vllm", "trtllm"):
        drafting = ENGINES[key].drafting
        best = best_draft_lengths(ms, "d", sorted(sizes), k_max=8, drafting=drafting)
        em = serving.emission(ms, key, sizes, k_max=8)
        if em.plan.method == serving.NONE:
            if key == "vllm":  # a draft model's K = 0 is priced below AR: the mean decides
                assert np.mean([c.ratio for c in best]) <= 1.0
                assert all((c.k, c.ratio) == (0, 1.0) for c in em.plan.by_batch)
            else:
                assert all(c.k == 0 for c in best)
            continue
        assert tuple(em.plan.best_ranges) == tuple(schedule(best))
        if em.plan.ranges is None:  # one k for every size: the best mean, checked by brute force
            k = em.plan.k
            means = [np.mean([batch_ratio(ms, "d", j, b) for b in sorted(sizes)]) for j in range(9)]
            assert means[k] == max(means) and all(c.k == k for c in em.plan.by_batch)
            continue
        assert [(c.batch, c.k, c.ratio) for c in em.plan.by_batch] == [
            (c.batch, c.k, c.ratio) for c in best
        ]
        for c in best:
            if key == "vllm":
                got = vllm_k(em.config["num_speculative_tokens_per_batch_size"], c.batch)
                assert min(got, em.config["num_speculative_tokens"]) == c.k
            else:
                spec = em.config["speculative_config"]
                assert trtllm_k(spec["draft_len_schedule"], c.batch) == c.k
                assert (
                    spec["draft_len_schedule"][min(spec["draft_len_schedule"])]
                    == spec["max_draft_len"]
                )
        if key == "vllm":
            assert em.plan.ewif == batch_ratio(ms, "d", em.plan.k, 1, drafting="vllm")
        else:
            assert em.plan.ewif == ms.to_cascade(["t", "d"], [[em.plan.k]]).ewif()


def test_llama_cpp_is_priced_with_its_drafter_reevaluating_the_targets_batch():
    ms = batch_set()
    em = serving.emission(ms, "llama.cpp")
    assert em.plan.ewif == batch_ratio(ms, "d", em.plan.k, 1, drafting="reevaluate")
    assert em.plan.ewif < ms.to_cascade(["t", "d"], [[em.plan.k]]).ewif()
    (plan,) = [p for p in serving.plans(ms, ENGINES["llama.cpp"], SIZES, 12) if p.drafter == "d"]
    k = serving.single_k(ms, "d", SIZES, 12, "reevaluate")
    assert plan.k == k
    assert [c.ratio for c in plan.by_batch] == [
        batch_ratio(ms, "d", k, b, drafting="reevaluate") for b in SIZES
    ]


def test_engines_without_a_schedule_get_the_one_k_of_the_best_mean_throughput():
    ms = batch_set()
    em = serving.emission(ms, "sglang", SIZES, k_max=12)
    k = serving.single_k(ms, "d", SIZES, 12)
    assert em.plan.k == k and em.plan.ranges is None and len(em.plan.best_ranges) > 1
    assert [c.ratio for c in em.plan.by_batch] == [batch_ratio(ms, "d", k, b) for b in SIZES]
    assert any("cannot express it" in n for n in em.notes)
    assert em.config[em.config.index("--speculative-num-steps") + 1] == str(k)


def test_no_speculation_when_nothing_beats_autoregressive(capsys):
    alpha = np.full((2, 2), np.nan)
    alpha[0, 1] = 0.05
    ms = model_io.ModelSet(("t", "d"), np.array([1.0, 0.6]), np.zeros(2), {1.0: alpha})
    for key in ENGINES:
        em = serving.emission(ms, key, [1, 4])
        assert em.plan.method == serving.NONE and em.plan.ewif == 1.0 and em.plan.k == 0
        assert any("serve the target alone" in n for n in em.notes)
    assert serving.emission(ms, "vllm").config == {}


@pytest.mark.parametrize("key", sorted(ENGINES))
def test_a_declined_speculation_comes_with_its_configuration(key, capsys):
    """Where nothing beats AR the best speculation is still rendered (not emitted), with
    its EWIF and only the engine's option names; where speculation is emitted, nothing is
    declined."""
    alpha = np.full((2, 2), np.nan)
    alpha[0, 1] = 0.05
    ms = model_io.ModelSet(("t", "d"), np.array([1.0, 0.6]), np.zeros(2), {1.0: alpha})
    em = serving.emission(ms, key)
    no = em.declined
    assert no is not None and no.plan.k >= 1 and no.plan.ewif < 1.0
    if ENGINES[key].drafting == "kv-cached":  # priced as ewif's best plain SD
        sd = best_sd(ms, ["d"])
        assert no.plan.k == int(sd.K[0, 0]) and no.plan.ewif == pytest.approx(sd.ewif)
    shown = serving.Emission(em.engine, no.plan, em.target, no.config, no.text, ())
    assert shown.option_names() and shown.option_names() <= ENGINES[key].options
    assert em.to_dict()["declined"]["k"] == no.plan.k
    assert serving.emission(batch_set(), key).declined is None


def test_model_paths_replace_names():
    em = serving.emission(batch_set(), "llama.cpp", paths={"t": "/m/t.gguf", "d": "/m/d.gguf"})
    assert em.config[:4] == ["-m", "/m/t.gguf", "-md", "/m/d.gguf"]
    with pytest.raises(ValueError, match="unknown model 'x'"):
        serving.emission(batch_set(), "vllm", paths={"x": "p"})


def test_transformers_speculates_at_batch_size_one_only():
    em = serving.emission(batch_set(), "transformers", [1, 4])
    assert [c.batch for c in em.plan.by_batch] == [1]
    assert any("not [4]" in n for n in em.notes)
    with pytest.raises(ValueError, match="batch size 1 only"):
        serving.emission(batch_set(), "transformers", [2, 4])


def test_transformers_names_exist_in_the_installed_package():
    import inspect

    pytest.importorskip("transformers")
    from transformers import GenerationConfig, GenerationMixin

    config = GenerationConfig()
    em = serving.emission(batch_set(), "transformers")
    for name in em.config:
        if name == "assistant_model":
            assert name in inspect.signature(GenerationMixin.generate).parameters
        else:
            assert hasattr(config, name), name
    GenerationConfig(**{k: v for k, v in em.config.items() if k != "assistant_model"}).validate()


HELP = """----- common params -----

-h,    --help, --usage                  print usage and exit
-m,    --model FNAME                    model path to load
-md,   --spec-draft-model, --model-draft FNAME
                                        draft model for speculative decoding (default: unused)
--spec-draft-n-max N                    number of tokens to draft for speculative decoding
                                        (default: 3, -1 = auto)
-np,   --parallel N                     number of server slots (default: -1, -1 = auto)
"""


LLAMA_HELP = Path(__file__).resolve().parent / "fixtures" / "llama_server_help.txt"
LLAMA_SERVER = (
    Path(os.environ.get("CSD_CACHE") or Path.home() / ".cache" / "csd")
    / "llamacpp-bin"
    / "0.3.36"
    / "bin"
    / "llama-server"
)


def check_against_llama_help(text: str) -> None:
    """Every llama.cpp emission (both methods, with and without batch sizes) uses flags the
    real ``--help`` lists, none of them a removed one, and --spec-type values it offers."""
    flags = help_flags(text)
    removed = {
        f for line in text.splitlines() if "has been removed" in line for f in help_flags(line)
    }
    assert ENGINES["llama.cpp"].options <= flags
    line = next(x for x in text.splitlines() if x.startswith("--spec-type "))
    types = set(line.split()[1].split(","))
    for ms in (batch_set(), mag_set()):
        for sizes in (None, SIZES):
            em = serving.emission(ms, "llama.cpp", sizes)
            assert em.option_names() <= flags - removed, em.option_names() - flags
            assert em.option_values()["--spec-type"] in types


def test_llama_cpp_flags_are_in_the_captured_llama_server_help():
    check_against_llama_help(LLAMA_HELP.read_text(encoding="utf-8"))


@pytest.mark.skipif(not LLAMA_SERVER.exists(), reason="llama-server not built here")
def test_llama_cpp_flags_are_in_the_live_llama_server_help():
    done = subprocess.run(
        [str(LLAMA_SERVER), "--help"], capture_output=True, text=True, timeout=60, check=True
    )
    check_against_llama_help(done.stdout)


def test_help_flags_reads_llama_cpp_help_entries():
    assert help_flags(HELP) == {
        "-h",
        "--help",
        "--usage",
        "-m",
        "--model",
        "-md",
        "--spec-draft-model",
        "--model-draft",
        "--spec-draft-n-max",
        "-np",
        "--parallel",
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--emit", "vllm", "--model-path", "flan-t5-xxl"], "--model-path must be NAME=PATH"),
        (["--emit", "vllm", "--model-path", "nope=x"], "unknown model 'nope'"),
        (["--model-path", "flan-t5-xxl=x"], "give --emit ENGINE too"),
        (
            ["--emit", "vllm", "--model-path", "flan-t5-xxl=a", "--model-path", "flan-t5-xxl=b"],
            "twice",
        ),
        (["--emit", "transformers", "--batch-sizes", "4,8"], "batch size 1 only"),
        (["--emit", "vllm", "--batch-sizes", "0,8"], "--batch-sizes must lie in"),
    ],
)
def test_bad_emit_arguments_are_one_line_with_exit_2(args, message, capsys):
    assert cli.main(["recommend", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_unknown_engine_is_refused(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["recommend", "--emit", "tgi"])
    assert exc.value.code == 2
    with pytest.raises(ValueError, match="unknown engine 'tgi'"):
        serving.emission(batch_set(), "tgi")


def test_emit_imports_neither_torch_nor_the_other_packages():
    import sys

    probe = (
        "import contextlib, io, sys\nfrom ewif.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    status = main(['recommend', '--emit', 'trtllm', '--batch-sizes', '1,8'])\n"
        "print(status, sorted(m for m in ('torch', 'transformers', 'simulate', 'realrun') "
        "if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "0 []"
