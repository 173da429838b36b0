"""Metrics in (realrun.engine_metrics, csd measure --from-metrics): the parsers on fixtures
written in each engine's format from its source, the round trip from a known α through the
engines' counters back to α within its Wilson interval, every kind of bad metrics refused
(ValueError in the library, one line and exit 2 on the command line), and the path runs on a
theory-only install (no torch, no transformers)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif import cli
from ewif.files import model_set as model_io
from realrun import engine_metrics as em
from realrun.engine_counters.reading import parse_counters, read_counters

FIXTURES = Path(__file__).resolve().parent / "fixtures"
ROOT = Path(__file__).resolve().parents[2]
COSTS = ["--cost-curve", "target=1,1.1,1.2", "--cost-curve", "drafter=0.2,0.21"]


def test_vllm_exposition_fixture():
    c = read_counters([FIXTURES / "vllm_metrics.prom"])
    assert (c.format, c.model_name) == ("vllm-prometheus", "Qwen/Qwen2.5-1.5B-Instruct")
    assert (c.drafts, c.draft_tokens, c.accepted, c.k) == (3000, 12000, 6079, 4)
    assert c.per_position == (2233, 1667, 1249, 930)
    acc = em.acceptance(c)
    assert acc.alpha == 6079 / (3000 + 2233 + 1667 + 1249) and acc.reviewed == 8149
    assert [p.alpha for p in acc.by_position] == [2233 / 3000, 1667 / 2233, 1249 / 1667, 930 / 1249]
    assert acc.low < 0.75 < acc.high  # the fixture's counts were simulated with α = 0.75


def test_two_scrapes_give_the_counts_between_them():
    files = [FIXTURES / "vllm_metrics_before.prom", FIXTURES / "vllm_metrics.prom"]
    c = read_counters(files, "vllm")
    assert (c.drafts, c.draft_tokens, c.accepted) == (1800, 7200, 6079 - 2466)
    assert c.per_position == (2233 - 896, 1667 - 670, 1249 - 506, 930 - 394)
    with pytest.raises(ValueError, match=r"decreased between the two scrapes \(3000 → 1200\)"):
        read_counters(files[::-1])


def test_a_fresh_llama_server_scrape_counts_from_zero(tmp_path):
    """Before its first verified draft llama-server prints zero totals and no per-position
    counter (server-task.cpp); as the earlier scrape it subtracts nothing."""
    after = FIXTURES / "llamacpp_metrics.prom"
    fresh = tmp_path / "fresh.prom"
    fresh.write_text(
        "\n".join(
            line.rsplit(" ", 1)[0] + " 0"
            for line in after.read_text().splitlines()
            if line.startswith("llamacpp:") and "per_pos" not in line
        )
    )
    assert read_counters([fresh, after]) == read_counters([after])
    with pytest.raises(ValueError, match="nothing to read"):
        em.acceptance(read_counters([fresh]))


def test_a_real_llama_server_capture():
    """Two scrapes of a real llama-server (tiny GGUFs; see the fixtures' header): the first,
    before any request, has zero totals and no per-position counter."""
    before, after = FIXTURES / "llamacpp_tiny_before.prom", FIXTURES / "llamacpp_tiny_after.prom"
    assert "per_pos" not in before.read_text()
    c = read_counters([before, after], "llama.cpp")
    assert (c.drafts, c.draft_tokens, c.accepted, c.per_position) == (
        114,
        442,
        262,
        (92, 72, 55, 43),
    )
    acc = em.acceptance(c)
    assert acc.alpha == 262 / (114 + 92 + 72 + 55) and "lower bounds" in acc.notes[0]


def test_a_real_qwen_llama_server_capture():
    """The α round trip of benchmarks/serving_llamacpp.py: a real llama-server serving the
    Qwen2.5-Coder 1.5B/0.5B pair (see the fixture's header)."""
    c = read_counters([FIXTURES / "llamacpp_qwen_round_trip.prom"], "llama.cpp")
    assert (c.drafts, c.draft_tokens, c.accepted, c.k) == (134, 506, 357, 4)
    assert c.per_position == (112, 93, 81, 71)
    acc = em.acceptance(c)
    assert acc.reviewed == 134 + 112 + 93 + 81 and acc.alpha == pytest.approx(357 / 420)
    assert acc.low < 0.85 < acc.high and [p.accepted for p in acc.by_position] == [112, 93, 81, 71]


def test_llama_server_fixture():
    c = read_counters([FIXTURES / "llamacpp_metrics.prom"], "llama.cpp")
    assert (c.format, c.drafts, c.draft_tokens, c.accepted, c.k) == (
        "llamacpp-prometheus",
        900,
        4500,
        1178,
        5,
    )
    assert c.per_position == (525, 305, 174, 108, 66)
    acc = em.acceptance(c)
    assert acc.low < 0.6 < acc.high


def test_vllm_per_request_fixture_adds_the_requests():
    c = read_counters([FIXTURES / "vllm_per_request.jsonl"])
    # histograms [16, 5, 5, 14] and [10, 4, 3, 8]: steps that accepted >= i tokens
    assert (c.format, c.drafts, c.draft_tokens, c.accepted, c.k) == (
        "vllm-per-request",
        65,
        195,
        91,
        3,
    )
    assert c.per_position == (5 + 5 + 14 + 4 + 3 + 8, 5 + 14 + 3 + 8, 14 + 8)


def test_speculative_simple_log_fixture():
    c = read_counters([FIXTURES / "llama_speculative_simple.log"], "llama.cpp")
    assert (c.format, c.drafts, c.draft_tokens, c.accepted, c.k, c.per_position) == (
        "llama-speculative-simple",
        66 - 42,
        96,
        42,
        4,
        None,
    )
    acc = em.acceptance(c)
    assert acc.low is None and acc.alpha == pytest.approx(em.iid_alpha(42 / 96, 4))
    assert sum(acc.alpha**i for i in range(1, 5)) / 4 == pytest.approx(42 / 96, abs=1e-12)
    twice = read_counters([FIXTURES / "llama_speculative_simple.log"] * 2)
    assert (twice.drafts, twice.accepted) == (2 * c.drafts, 2 * c.accepted)


def test_a_real_speculative_simple_log():
    """llama-speculative-simple's own output (tiny GGUFs; bytes that are not UTF-8 included)."""
    c = read_counters([FIXTURES / "llama_speculative_simple_tiny.log"])
    assert (c.format, c.drafts, c.draft_tokens, c.accepted, c.k) == (
        "llama-speculative-simple",
        26 - 8,
        72,
        8,
        4,
    )


def simulate(alpha: float, k: int, steps: int, seed: int) -> np.ndarray:
    """Accepted tokens of ``steps`` drafts of ``k`` Bernoulli(α) tokens, left to right."""
    first_reject = np.random.default_rng(seed).geometric(1 - alpha, size=steps) - 1
    return np.minimum(first_reject, k)


def prometheus_text(accepted: np.ndarray, k: int, engine: str) -> str:
    """The four counters as ``engine`` exposes them: vLLM's with its labels and float values,
    llama.cpp's totals as server-task.cpp prints a double (6 significant digits)."""
    if engine == "vllm":
        prefix, labels, total = "vllm:", 'model_name="m",engine="0",', lambda x: f"{float(x)}"
    else:
        prefix, labels, total = "llamacpp:", "", lambda x: f"{float(x):.6g}"
    values = {"drafts": accepted.size, "draft_tokens": k * accepted.size}
    braces = f"{{{labels.rstrip(',')}}}" if labels else ""
    lines = [
        f"{prefix}spec_decode_num_{key}_total{braces} {total(v)}"
        for key, v in {**values, "accepted_tokens": accepted.sum()}.items()
    ]
    lines += [
        f'{prefix}spec_decode_num_accepted_tokens_per_pos_total{{{labels}position="{i}"}} '
        f"{(accepted > i).sum()}"
        for i in range(k)
    ]
    return "\n".join(lines)


def vllm_text(accepted: np.ndarray, k: int) -> str:
    return prometheus_text(accepted, k, "vllm")


def llamacpp_text(accepted: np.ndarray, k: int) -> str:
    return prometheus_text(accepted, k, "llama.cpp")


def per_request_text(accepted: np.ndarray, k: int) -> str:
    lines = []
    for chunk in np.array_split(accepted, 3):
        hist = np.bincount(chunk, minlength=k + 1).tolist()
        sd = {
            "acceptance_histogram": hist,
            "num_spec_steps": int(chunk.size),
            "num_accepted_draft_tokens": int(chunk.sum()),
            "num_draft_tokens": int(k * chunk.size),
            "num_spec_tokens": k,
        }
        lines.append(json.dumps({"metrics": {"speculative_decoding": sd}}))
    return "\n".join(lines)


@settings(max_examples=25)
@given(alpha=st.floats(0.2, 0.95), k=st.integers(1, 8), seed=st.integers(0, 10**6))
def test_round_trip_from_a_known_alpha(alpha, k, seed):
    accepted = simulate(alpha, k, 4000, seed)
    for render in (vllm_text, llamacpp_text, per_request_text):
        counters = parse_counters(render(accepted, k))
        acc = em.acceptance(counters, level=0.9999)
        assert acc.low <= alpha <= acc.high, (render.__name__, acc.alpha, acc.low, acc.high)
        assert counters.accepted == accepted.sum() and counters.k == k


def test_round_trip_past_a_million_draft_tokens():
    """llama.cpp prints totals with 6 significant digits: 1.2e6 drafts still read."""
    accepted = simulate(0.7, 5, 1_200_001, seed=3)
    counters = parse_counters(llamacpp_text(accepted, 5))
    assert counters.drafts == round(float(f"{accepted.size:.6g}"))
    assert abs(em.acceptance(counters).alpha - 0.7) < 0.002


def per_pos(values):
    return list(enumerate(values))


GOOD = {"drafts": 100, "draft_tokens": 400, "accepted": 150, "per_pos": per_pos([60, 45, 30, 15])}


def exposition(**change) -> str:
    v = {**GOOD, **change}
    lines = [
        f"vllm:spec_decode_num_drafts_total {v['drafts']}",
        f"vllm:spec_decode_num_draft_tokens_total {v['draft_tokens']}",
        f"vllm:spec_decode_num_accepted_tokens_total {v['accepted']}",
    ]
    lines += [
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {x}'
        for i, x in v["per_pos"]
    ]
    return "\n".join(lines)


BAD = {
    "accepted exceeds drafted": (
        exposition(accepted=500, per_pos=per_pos([100, 100, 100, 100, 100]), draft_tokens=400),
        "exceed drafted tokens",
    ),
    "a missing position": (
        exposition(per_pos=[(0, 60), (1, 45), (3, 45)]),
        r"every position 0..3; missing \[2\]",
    ),
    "NaN": (exposition(drafts="NaN"), "must be a count"),
    "negative": (exposition(accepted=-1), "must be a count"),
    "fractional": (exposition(drafts=100.5), "must be a count"),
    "increasing by position": (
        exposition(accepted=150, per_pos=per_pos([40, 50, 30, 30])),
        "position 1 accepted more often",
    ),
    "sum differs from accepted": (
        exposition(accepted=151),
        "sum to 150, not the accepted total 151",
    ),
    "more drafts accepted than drafted": (
        exposition(drafts=50, draft_tokens=200),
        "steps accepted position 0 but only 50 drafts",
    ),
    "more draft tokens than k per draft": (
        exposition(draft_tokens=401),
        "exceed k·drafts",
    ),
    "no per-position counter": (
        "\n".join(exposition(per_pos=[]).splitlines()[:3]),
        "per-position counters are needed",
    ),
    "a missing total": (
        "\n".join(exposition().splitlines()[1:]),
        "missing counter",
    ),
    "no verify step": (
        exposition(drafts=0, draft_tokens=0, accepted=0, per_pos=per_pos([0, 0, 0, 0])),
        "no verify step",
    ),
    "not a number": (
        exposition() + "\nvllm:spec_decode_num_drafts_total x",
        "not a number",
    ),
    "a malformed line": ("vllm:spec_decode_num_drafts_total{position=0} 1", "malformed labels"),
    "two models mixed": (
        exposition()
        + '\nvllm:spec_decode_num_drafts_total{model_name="a"} 1'
        + '\nvllm:spec_decode_num_drafts_total{model_name="b"} 1',
        "several models",
    ),
    "an unknown format": ("hello\n", "no speculative-decoding counters found"),
    "SGLang gauges": ("sglang:spec_accept_rate 0.5\n", "SGLang exports no cumulative"),
    "per-request histogram disagrees": (
        json.dumps(
            {
                "acceptance_histogram": [1, 1],
                "num_spec_steps": 3,
                "num_accepted_draft_tokens": 1,
                "num_draft_tokens": 3,
                "num_spec_tokens": 1,
            }
        ),
        "disagrees with num_spec_steps",
    ),
    "per-request with no draft position": (
        json.dumps(
            {
                "acceptance_histogram": [3],
                "num_spec_steps": 3,
                "num_accepted_draft_tokens": 0,
                "num_draft_tokens": 0,
                "num_spec_tokens": 0,
            }
        ),
        "nothing to read",
    ),
    "per-request without the object": (json.dumps({"choices": []}), "no metrics.speculative"),
    "log runs with different k": (
        "n_draft = 4\nn_predict = 10\nn_drafted = 8\nn_accept = 5\n"
        "n_draft = 5\nn_predict = 10\nn_drafted = 8\nn_accept = 5\n",
        "different draft lengths",
    ),
    "log without n_predict": ("n_draft = 4\nn_drafted = 8\nn_accept = 5\n", "every run's"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_metrics_are_refused(case):
    text, message = BAD[case]
    with pytest.raises(ValueError, match=message):
        em.acceptance(parse_counters(text))


def test_the_good_exposition_reads():
    assert parse_counters(exposition()).accepted == 150


def test_engine_mismatch_and_sglang_are_refused():
    with pytest.raises(ValueError, match=r"--engine llama\.cpp given, but the file holds"):
        read_counters([FIXTURES / "vllm_metrics.prom"], "llama.cpp")
    with pytest.raises(ValueError, match="SGLang exports no cumulative"):
        read_counters([FIXTURES / "vllm_metrics.prom"], "sglang")
    with pytest.raises(ValueError, match="one Prometheus scrape or two"):
        read_counters([FIXTURES / "vllm_metrics.prom"] * 3)
    with pytest.raises(ValueError, match="different formats"):
        read_counters([FIXTURES / "vllm_metrics.prom", FIXTURES / "llamacpp_metrics.prom"])
    with pytest.raises(ValueError, match="cannot read metrics file"):
        read_counters([FIXTURES / "absent.prom"])


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        (["target"], "must be NAME=C1,C2"),
        (["target=1,x"], "must be costs separated by commas"),
        (["target=1,-2"], "finite numbers >= 0"),
        (["target=1", "target=1"], "twice"),
        (["target=1,inf"], "must hold finite numbers"),
    ],
)
def test_bad_cost_curves_are_refused(specs, message):
    with pytest.raises(ValueError, match=message):
        em.parse_cost_curves(specs)


def test_the_model_set_carries_alpha_and_the_costs(tmp_path):
    out = tmp_path / "set.json"
    argv = ["measure", "q", "d", "--from-metrics", str(FIXTURES / "vllm_metrics.prom")]
    assert (
        cli.main([*argv, "--cost-curve", "q=1,1.1", "--cost-curve", "d=0.2", "-o", str(out)]) == 0
    )
    ms = model_io.load(out)
    assert ms.models == ("q", "d") and ms.alpha[1.0][0, 1] == 6079 / 8149
    assert ms.alpha_by_position[(0, 1)].tolist() == [
        2233 / 3000,
        1667 / 2233,
        1249 / 1667,
        930 / 1249,
    ]
    assert [c.tolist() for c in ms.cost_curve] == [[1.0, 1.1], [0.2]]
    assert ms.metadata["engine_metrics"]["counters"]["drafts"] == 3000
    assert cli.main(["recommend", "--from", str(out), "--emit", "vllm"]) == 0


def test_costs_from_a_measured_set(tmp_path, capsys):
    out = tmp_path / "set.json"
    measured = ROOT / "realrun" / "data" / "models_qwen.json"
    files = ["--from-metrics", str(FIXTURES / "llamacpp_metrics.prom")]
    args = ["measure", "qwen-1.5b", "mag", *files, "--costs", str(measured), "-o", str(out)]
    assert cli.main([*args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["models"] == ["qwen-1.5b", "mag"] and report["counters"]["k"] == 5
    ms, source = model_io.load(out), model_io.load(measured)
    assert ms.cost_curve[1].tolist() == source.cost_curve[2].tolist()
    assert ms.catch_up == (False, False) and "seconds_per_token" in ms.metadata["timing"]["mag"]
    assert cli.main(["measure", "x", "mag", *files, "--costs", str(measured), "-o", str(out)]) == 2
    assert "its target is 'qwen-1.5b', not 'x'" in capsys.readouterr().err


def test_costs_carry_the_batched_cost_curves(tmp_path):
    from dataclasses import replace

    from ewif.files.batch_costs import BatchCosts

    source = model_io.load(ROOT / "realrun" / "data" / "models_qwen.json")
    batched = BatchCosts({1: source.cost_curve, 4: tuple(3 * c for c in source.cost_curve)})
    measured = model_io.save(replace(source, batch_costs=batched), tmp_path / "measured.json")
    out = tmp_path / "set.json"
    files = ["--from-metrics", str(FIXTURES / "vllm_metrics.prom")]
    args = ["measure", "qwen-1.5b", "qwen-0.5b", *files, "--costs", str(measured), "-o", str(out)]
    assert cli.main(args) == 0
    got = model_io.load(out).batch_costs.curves
    assert [c.tolist() for c in got[4]] == [(3 * source.cost_curve[i]).tolist() for i in (0, 1)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from-metrics", str(FIXTURES / "vllm_metrics.prom")], "needs pass costs"),
        (["a", "b", "c", "--from-metrics", "f", *COSTS], "two MODEL names"),
        (
            ["--from-metrics", str(FIXTURES / "vllm_metrics.prom"), "--cost-curve", "x=1"],
            "must give",
        ),
        (["--from-metrics", str(FIXTURES / "absent.prom"), *COSTS], "cannot read metrics file"),
        (
            ["--from-metrics", str(FIXTURES / "vllm_metrics.prom"), "--engine", "sglang", *COSTS],
            "SGLang exports no cumulative",
        ),
        ([], "give MODEL"),
    ],
)
def test_bad_from_metrics_input_is_one_line_with_exit_2(args, message, tmp_path, capsys):
    assert cli.main(["measure", *args, "-o", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_from_metrics_runs_without_torch_or_transformers(tmp_path):
    """As on a theory-only install: torch and transformers unimportable."""
    code = (
        "import sys\n"
        "sys.modules['torch'] = None\nsys.modules['transformers'] = None\n"
        "from ewif.cli import main\nraise SystemExit(main(sys.argv[1:]))\n"
    )
    argv = ["measure", "--from-metrics", str(FIXTURES / "llamacpp_metrics.prom"), *COSTS]
    done = subprocess.run(
        [sys.executable, "-c", code, *argv, "-o", str(tmp_path / "o.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "α = 0.5855" in done.stdout
