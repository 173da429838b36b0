"""Plain-language parts of a recommendation: the decision and the review sizes.

Shared by ``csd recommend``, ``csd evaluate`` and ``csd realrun`` (:mod:`realrun.side_by_side`).

* **Decision.** EWIF is in units of autoregressive decoding (EWIF 1), so a configuration
  is only worth running when its EWIF exceeds 1; otherwise the honest answer is "decode
  autoregressively".
* **Review sizes.** A pass of model ``i`` over ``m`` positions costs ``c_i(m)``
  (:mod:`ewif.kernel.pass_cost`); :meth:`ewif.kernel.cascade.Cascade.pass_sizes` gives, per model,
  the expected passes per target step by ``m`` and what they cost. With measured curves this
  says which part of each curve the recommendation relies on.
"""

from __future__ import annotations

from typing import Any

from ewif.kernel.cascade import Cascade


def decision(ewif: float) -> str:
    """``"speculative"`` when ``ewif > 1``, else ``"autoregressive"``."""
    return "speculative" if ewif > 1.0 else "autoregressive"


def autoregressive_line(what: str, ewif: float) -> str:
    """The plain statement for a configuration ``what`` that does not beat EWIF 1."""
    return (
        f"on these costs, decode autoregressively; the best speculative configuration is "
        f"{what} at {ewif:.4f}x"
    )


def lenience_words(K: Any, lenience: float) -> str:
    """``lenience L`` where a drafter reviews under ``K``; where only the target reviews, a
    lenience other than 1 is named as unused (the target's review is exact)."""
    import numpy as np

    if np.asarray(K)[1:].any():
        return f"lenience {lenience:g}"
    return "" if lenience == 1.0 else f"lenience {lenience:g} (unused: only the target reviews)"


def review_sizes(cascade: Cascade) -> list[dict[str, Any]]:
    """Per model with passes: passes per target step, the range and mean of ``m`` over its
    passes, the expected cost of those passes per step (a catch-up drafter's less the logit
    rows it does not return, :meth:`~ewif.kernel.cascade.Cascade.model_step_costs`), and the exact
    pmf of ``m`` (``pmf[m]``)."""
    out = []
    costs = cascade.model_step_costs()
    for s in cascade.pass_sizes():
        if s.passes <= 0:
            continue
        support = s.support
        out.append(
            {
                "model": s.name if s.name is not None else str(s.model),
                "passes": s.passes,
                "m_min": int(support[0]),
                "m_max": int(support[-1]),
                "m_mean": s.mean_m,
                "cost": float(costs[s.model]),
                "m_pmf": s.pmf.tolist(),
            }
        )
    return out


def review_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Human lines: ``the target reviews m = a..b positions (mean x) at cost y per step``."""
    lines = []
    for i, r in enumerate(rows):
        m = f"m = {r['m_min']}" if r["m_min"] == r["m_max"] else f"m = {r['m_min']}..{r['m_max']}"
        who = "the target" if i == 0 else r["model"]
        verb = "reviews" if r["m_max"] > 1 else "generates with"
        lines.append(
            f"  {who} {verb} {m} positions (mean {r['m_mean']:.2f}) in {r['passes']:.3f} "
            f"pass(es) per step, at cost {r['cost']:.4f}"
        )
    return lines


def decision_line(
    best_ewif: float,
    sd: str,
    sd_ewif: float,
    *,
    best: str = "the configuration below",
    interrupted: int | None = None,
    unsettled: bool = False,
    unassured: str | None = None,
) -> tuple[str, str]:
    """``(choice, line)``: the one decision a recommendation leads with, agreeing with every
    line after it. ``best`` names the best configuration of the searched space (EWIF
    ``best_ewif``), ``sd`` the best plain SD (``sd_ewif``), searched beyond the space. The
    choice is ``"interrupted"`` (a partial search decides nothing; ``interrupted``: the
    configurations searched), ``"autoregressive"`` (nothing beats EWIF 1), ``"plain-sd"``
    (plain SD beats every configuration of the space) or ``"cascade"``. ``unsettled``: the
    interval of the choice does not exclude EWIF 1; ``unassured``: why the decision rule
    (:mod:`ewif.predict.assurance`) does not speculate although the best EWIF exceeds 1 —
    the choice is then ``"autoregressive"``."""
    if interrupted is not None:
        return "interrupted", (
            f"decision: none: the search was interrupted after {interrupted:,} configurations; "
            f"the best so far ({best}, EWIF {best_ewif:.4f}) may not be the optimum"
        )
    top, top_ewif = (f"plain SD with {sd}", sd_ewif) if sd_ewif > best_ewif else (best, best_ewif)
    if decision(top_ewif) == "autoregressive":
        return "autoregressive", "decision: " + autoregressive_line(top, top_ewif)
    if unassured is not None:
        return "autoregressive", (
            f"decision: decode autoregressively: {top} at EWIF {top_ewif:.4f} is "
            f"not assured ({unassured}): measure more prompts, or --decision mean to run it"
        )
    noise = "; within the noise of AR: measure more prompts" if unsettled else ""
    if sd_ewif > best_ewif:
        return "plain-sd", (
            f"decision: run plain SD with {sd} at EWIF {sd_ewif:.4f}; it beats every "
            f"configuration of the searched space (at best {best_ewif:.4f}, {best}){noise}"
        )
    return "cascade", (
        f"decision: run {best} at EWIF {best_ewif:.4f}, x{best_ewif / sd_ewif:.4f} the best "
        f"plain SD{noise}"
    )
