"""The statistics llama.cpp's ``llama-speculative-simple`` prints at the end of a run.

From examples/speculative-simple/speculative-simple.cpp (ggml-org/llama.cpp @
0c1e57098bba43ac29e6e3b677cdceebdd22334f): ``n_draft`` (the draft length k), ``n_predict``,
``n_drafted``, ``n_accept``; each verify step yields its accepted tokens plus one, so the
steps are ``n_predict − n_accept``. No per-position counts (α from them:
:func:`realrun.engine_metrics.iid_alpha`). Several runs' statistics in one log add up.
"""

from __future__ import annotations

import re

from realrun.engine_counters.spec_counters import SpecCounters

#: llama-speculative-simple's statistics lines (``LOG_INF("n_drafted = %d\n", ...)``).
SIMPLE_STATS = {
    key: re.compile(rf"\b{key}\s*=\s*(\d+)")
    for key in ("n_draft", "n_predict", "n_drafted", "n_accept")
}


def counters_from_simple_log(text: str) -> SpecCounters:
    """The summed counters of every run's statistics in ``text``."""
    found = {key: [int(v) for v in r.findall(text)] for key, r in SIMPLE_STATS.items()}
    runs = len(found["n_drafted"])
    if any(len(v) != runs for v in found.values()):
        raise ValueError(
            "every run's statistics need n_draft, n_predict, n_drafted and n_accept; found "
            + ", ".join(f"{k} {len(v)}x" for k, v in found.items())
        )
    ks = set(found["n_draft"])
    if len(ks) > 1:
        raise ValueError(f"the runs used different draft lengths n_draft {sorted(ks)}")
    steps = sum(p - a for p, a in zip(found["n_predict"], found["n_accept"], strict=True))
    return SpecCounters(
        "llama-speculative-simple",
        drafts=steps,
        draft_tokens=sum(found["n_drafted"]),
        accepted=sum(found["n_accept"]),
        k=ks.pop(),
    )
