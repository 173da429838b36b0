"""What a real model counts about its passes, shared by every backend's ``TokenModel``.

``pass_sizes[m]`` is the number of forward passes that computed ``m`` positions since the
last :meth:`PassCounters.reset_counters`, ``pass_rows[m]`` the logit rows they returned in
all, ``pass_one_row[m]`` how many of them returned one row (a row step prices those of
``m >= 2`` lower, :mod:`ewif.kernel.pass_cost`), ``pass_context[m]`` the sum of the cached
context lengths they ran after (their mean is where the run's passes of that size fall on
c(m, L), :mod:`realrun.run_context`); ``passes`` and ``tokens_fed`` (positions computed)
follow from them. An optional ``timing_hook(fed, seconds)`` sees the wall time of
every pass.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

TimingHook = Callable[[int, float], None]


class PassCounters:
    """Pass counters and the timing hook of a model wrapper (module docstring)."""

    def __init__(self, timing_hook: TimingHook | None = None) -> None:
        self.timing_hook = timing_hook
        self.pass_sizes: Counter[int] = Counter()
        self.pass_rows: Counter[int] = Counter()
        self.pass_one_row: Counter[int] = Counter()
        self.pass_context: Counter[int] = Counter()

    @property
    def passes(self) -> int:
        """Forward passes since the last reset."""
        return self.pass_sizes.total()

    @property
    def tokens_fed(self) -> int:
        """Positions computed since the last reset."""
        return sum(m * count for m, count in self.pass_sizes.items())

    def reset_counters(self) -> None:
        """Zero the counters."""
        self.pass_sizes = Counter()
        self.pass_rows = Counter()
        self.pass_one_row = Counter()
        self.pass_context = Counter()

    def _record(self, fed: int, rows: int, seconds: float, context: int) -> None:
        """Count one pass over ``fed`` positions after ``context`` cached ones that returned
        ``rows`` logit rows and took ``seconds``."""
        self.pass_sizes[fed] += 1
        self.pass_context[fed] += context
        self.pass_rows[fed] += rows
        self.pass_one_row[fed] += rows == 1
        if self.timing_hook is not None:
            self.timing_hook(fed, seconds)
