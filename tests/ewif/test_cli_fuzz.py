"""Fuzzed model-set files through ``csd recommend --from``, ``csd evaluate`` and
``csd simulate`` (in-process): a malformed file ends with exactly one line on stderr and
exit status 2 — never a traceback, a hang or a silent wrong answer — and oversized
requests are refused up front with their size and the limit."""

from __future__ import annotations

import contextlib
import copy
import io as stdio
import json
import math
import signal
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif.cli import main
from ewif.files import presets

BASE = presets.load_preset("flan-t5-ms").to_dict()  # csd.models/2, with a cascade section
CURVES = [[1.0, 1.02, 1.05], [0.0227, 0.0231], [0.0070], [0.0]]
COMMANDS = (
    ("recommend", "--from", "{path}", "--k-max", "3", "--json"),
    ("evaluate", "{path}", "--json"),
    ("simulate", "{path}", "--trials", "2000", "--positions", "2", "--json"),
)
SECONDS = 20  # one command taking longer than this counts as a hang


class Hang(Exception):
    pass


def _run(argv: list[str]) -> tuple[int, str, str]:
    """``csd argv`` in-process with stdout/stderr captured and an alarm against hangs; an
    exception escaping ``main`` (a traceback for the user) fails the test."""

    def alarm(signum, frame):
        raise Hang(f"csd {' '.join(argv)} ran over {SECONDS} s")

    out, err = stdio.StringIO(), stdio.StringIO()
    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(SECONDS)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return rc, out.getvalue(), err.getvalue()


def _write(content: bytes | str | object, suffix: str, folder: str) -> str:
    path = Path(folder) / f"set{suffix}"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content)
    elif suffix == ".json":
        path.write_text(json.dumps(content))  # NaN/Infinity are written as JSON extensions
    else:
        path.write_text(yaml.safe_dump(content))
    return str(path)


def _assert_refused(content: object, suffix: str, commands=COMMANDS) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = _write(content, suffix, folder)
        for command in commands:
            argv = [a.format(path=path) for a in command]
            rc, _, err = _run(argv)
            assert rc == 2, (argv, err)
            assert err.count("\n") == 1 and err.startswith(f"csd {argv[0]}: error: "), err
            assert "Traceback" not in err


def _with(path: tuple, value: object) -> dict:
    """BASE with the entry at ``path`` (keys and list indices) set to ``value``."""
    data = copy.deepcopy(BASE)
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return data


def _without(key: str) -> dict:
    data = copy.deepcopy(BASE)
    del data[key]
    return data


NAN, INF = math.nan, math.inf
# Each entry is malformed for every command (the cascade section is checked on load).
MALFORMED = [
    b"",
    b"\x00\xff\xfe garbage \x80\x81",
    "{not json",
    "[" * 50_000,
    "[1, 2, 3]",
    "null",
    '"a string"',
    _with(("schema",), "csd.models/9"),
    _with(("schema",), ["csd.models/2"]),
    _without("models"),
    _without("alpha"),
    _with(("models",), "target"),
    _with(("models",), ["a", "a", "b", "c"]),
    _with(("models",), ["t"]),
    _with(("models", 0), 7),
    _with(("cost",), [1.0, 0.1]),
    _with(("cost",), "cheap"),
    _with(("cost", 0), 2.0),
    _with(("cost", 1), -0.5),
    _with(("cost", 1), NAN),
    _with(("cost", 2), INF),
    _with(("cost", 2), None),
    _with(("cost", 2), True),
    _with(("cost", 1), 10**400),
    _with(("cost_per_token",), [0, 0, -1, 0]),
    _with(("alpha",), "high"),
    _with(("alpha",), {"x": BASE["alpha"]["1"]}),
    _with(("alpha",), {"nan": BASE["alpha"]["1"]}),
    _with(("alpha",), {"0.5": BASE["alpha"]["1"]}),
    _with(("alpha", "1"), [[None, 0.5], [None, None]]),
    _with(("alpha", "1"), [[None, 0.5, 0.5, 0.5], [None, None, 0.5]]),
    _with(("alpha", "1"), [1, 2, 3, 4]),
    _with(("alpha", "1", 0, 1), 1.5),
    _with(("alpha", "1", 0, 2), -0.1),
    _with(("alpha", "1", 1, 2), "0.5"),
    _with(("alpha", "1", 0, 3), INF),
    _with(("alpha_by_position",), [0.5, 0.4]),
    _with(("alpha_by_position",), {"0;1": [0.5]}),
    _with(("alpha_by_position",), {"0,1": [1.5]}),
    _with(("alpha_by_position",), {"0,9": [0.5]}),
    _with(("alpha_by_position",), {"1,0": [0.5]}),
    _with(("metadata",), "notes"),
    _with(("metadata",), [1, 2]),
    _with(("cascade",), "best"),
    _with(("cascade",), {"models": [], "K": []}),
    _with(("cascade", "models"), "flan-t5-xxl"),
    _with(("cascade", "models"), ["flan-t5-xxl", "nope"]),
    _with(("cascade", "models"), [BASE["models"][1], BASE["models"][0]]),
    _with(("cascade", "K"), [[1, 2], [3]]),
    _with(("cascade", "K"), [[1, 2, 3], [0, 1, 2]]),
    _with(("cascade", "K"), [[1, 2, 3], [1, 1, 2], [0, 0, 1]]),  # not upper triangular
    _with(("cascade", "K"), [[0, 0, 0], [0, 1, 2], [0, 0, 1]]),
    _with(("cascade", "K"), [[1.5, 2, 3], [0, 1, 2], [0, 0, 1]]),
    _with(("cascade", "K"), [[-1, 2, 3], [0, 1, 2], [0, 0, 1]]),
    _with(("cascade", "K"), [[10**9, 2, 3], [0, 1, 2], [0, 0, 1]]),
    _with(("cascade", "K"), [[2**62, 2**62, 2**62], [0, 1, 2], [0, 0, 1]]),
    _with(("cascade", "K"), [[10**30, 2, 3], [0, 1, 2], [0, 0, 1]]),
    _with(("cascade", "K"), "[[1]]"),
    _with(("cascade", "lenience"), 7.0),
    _with(("cascade", "lenience"), "three"),
    _with(("cascade", "lenience"), [3]),
    _with(("cascade", "lenience"), NAN),
    _with(("cost_curve",), "flat"),
    _with(("cost_curve",), CURVES[:2]),
    _with(("cost_curve",), [[2.0], *CURVES[1:]]),
    _with(("cost_curve",), [[], *CURVES[1:]]),
    _with(("cost_curve",), [CURVES[0], [NAN], *CURVES[2:]]),
    _with(("cost_curve",), [CURVES[0], [-1.0], *CURVES[2:]]),
    _with(("cost_curve",), [CURVES[0], ["x"], *CURVES[2:]]),
    _with(("cost_curve",), [CURVES[0], [[0.1]], *CURVES[2:]]),
    {**_with(("cost_curve",), CURVES), "schema": "csd.models/1"},
]


@settings(max_examples=60)
@given(st.sampled_from(MALFORMED), st.sampled_from([".json", ".yaml"]))
def test_malformed_model_set_files_give_one_line_and_exit_2(content, suffix) -> None:
    _assert_refused(content, suffix)


PATHS = [
    ("schema",),
    ("models",),
    ("models", 1),
    ("cost",),
    ("cost", 1),
    ("cost_per_token",),
    ("alpha",),
    ("alpha", "1"),
    ("alpha", "1", 0, 1),
    ("alpha", "1", 2),
    ("alpha", "3", 1, 2),
    ("alpha_by_position",),
    ("metadata",),
    ("cascade",),
    ("cascade", "models"),
    ("cascade", "K"),
    ("cascade", "K", 0),
    ("cascade", "K", 1, 2),
    ("cascade", "lenience"),
    ("cost_curve",),
]
VALUES = st.one_of(
    st.sampled_from([None, True, "", "x", [], {}, [[]], NAN, INF, -INF, -1, 0, 1, 2, 10**9]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**70), 2**70),
    st.lists(st.one_of(st.none(), st.floats(-2, 2), st.integers(-3, 40)), max_size=5),
    st.lists(
        st.lists(st.one_of(st.none(), st.floats(0, 1), st.integers(0, 12)), max_size=5), max_size=5
    ),
)


def _finite(node: object) -> bool:
    if isinstance(node, float):
        return math.isfinite(node)
    if isinstance(node, dict):
        return all(_finite(v) for v in node.values())
    if isinstance(node, list):
        return all(_finite(v) for v in node)
    return True


@settings(max_examples=40)
@given(st.sampled_from(PATHS), VALUES, st.sampled_from([".json", ".yaml"]))
def test_any_single_edit_is_answered_or_refused_in_one_line(path, value, suffix) -> None:
    """Whatever one entry is set to: exit 2 with one stderr line, or a finite answer
    (exit 0; ``simulate`` may also exit 1 when its statistical test rejects)."""
    try:
        content = _with(path, value)
    except (IndexError, KeyError, TypeError):
        return  # the path does not exist in BASE (e.g. cost_curve is optional)
    with tempfile.TemporaryDirectory() as folder:
        file = _write(content, suffix, folder)
        for command in COMMANDS:
            argv = [a.format(path=file) for a in command]
            rc, out, err = _run(argv)
            if rc == 2:
                assert err.count("\n") == 1 and err.startswith(f"csd {argv[0]}: error: "), err
            else:
                assert rc in ((0, 1) if argv[0] == "simulate" else (0,)), (argv, rc, err)
                assert err == "" and _finite(json.loads(out)), (argv, out)


def test_the_unedited_base_file_is_answered() -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = _write(BASE, ".json", folder)
        for command in COMMANDS:
            rc, out, err = _run([a.format(path=path) for a in command])
            assert rc in (0, 1) and err == "" and _finite(json.loads(out))


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["recommend", "--k-max", "10000"], "at most 4e+09"),
        (["recommend", "--space", "full", "--k-max", "40"], "at most 1e+08"),
        (["recommend", "--mag-block", "10000000"], "at most 100,000"),
        (["simulate", "--trials", str(10**12)], "at most 1,000,000,000"),
        (["simulate", "--positions", str(10**9)], "at most 100,000"),
        (["recommend", "--top", str(10**9)], "at most 10,000"),
    ],
)
def test_oversized_requests_are_refused_with_size_and_limit(argv, says) -> None:
    rc, _, err = _run(argv)
    assert rc == 2 and err.count("\n") == 1 and says in err


def test_huge_cascade_budgets_are_refused_on_load() -> None:
    content = _with(("cascade", "K"), [[10**6, 0, 0], [0, 0, 0], [0, 0, 0]])
    _assert_refused(content, ".json")
