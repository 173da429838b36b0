"""Choose the numerics (dtype and CPU threads) of a family by measurement, in minutes.

CPUs differ (bf16 instructions make a bfloat16 review pass nearly as cheap as a one-token
pass; AVX2 emulates it slowly), so nothing is assumed: every candidate ``(dtype, threads)``
— float32, bfloat16, float16 (:data:`CPU_DTYPES`) × ``1..cores`` — has a **score**
``max(EWIF*, 1) / t_AR`` tokens/s (the recommended configuration's exact EWIF, 1 for
autoregressive decoding, over one AR token's seconds, :mod:`realrun.ar`) and a **rank**
by the ``choice`` rule (:mod:`realrun.numerics_choice`: ``assured``, the default, the
score's 95 % lower bound over the drafts' acceptance; ``mean``, the score). The winner is
the highest-ranked *eligible* candidate: its target's greedy choices do not change between
a pass over ``m`` positions and ``m`` single passes, under the user's rule (``strict``,
the default, or ``near-ties``; :mod:`realrun.invariance`). A GPU's ``"auto"`` is bfloat16
(float16 where unsupported), unmeasured; on llama.cpp only the thread count is searched.

The search runs in named stages (:class:`_Search`); a candidate not chosen is recorded with
the rule that excluded it (:data:`realrun.numerics_trials.EXCLUSIONS`), and the account of the
choice names every one predicted faster, with its reason (:func:`realrun.numerics_trials.summary`):

0. **Quick look** (:meth:`_Search.quick_look`): every neural model's fastest of two passes
   over ``m = 1..4`` on the first measuring prompt, per candidate (a load, a warm-up per dtype).
1. **α once** (:meth:`_Search.measure_alpha`) in the dtype loaded last (dtypes differ in what
   a pass costs, not, beyond rounding, in what the models predict); again in the winner's.
2. **The quick-look bounds** (:mod:`realrun.numerics_bound`): candidates in order of their
   score bound (one dtype at a time); one whose bound — under ``assured`` also its bound of the
   assured throughput, computed only then — is below the best *eligible* rank stops here.
3. **A short curve** (``screen_repeats`` rounds after a warm-up, none where α just ran): a
   candidate *separated* below the leader (:mod:`realrun.numerics_rounds`) stops here.
4. **Batch invariance**, before more rounds (it is cheaper).
5. **Rounds, one at a time** (to it or the leader) while a runner-up is not separated from
   the leader, up to ``repeats`` or, behind, until the cap could not separate it (futile);
   separated above, or ahead at the cap, it leads. The leader is **confirmed** (rounds to
   ``PRECISION`` or ``repeats``) before a bound excludes against it — after every other
   candidate has run (:meth:`_Search.revisit`); the chosen one gets ``repeats`` rounds, as
   given numerics do (its curves are the run's).

Every bar is the best *eligible* rank, so a candidate is never dropped in favour of one
that batch invariance later excludes. ``exhaustive=True`` measures every candidate for
``repeats`` rounds and checks every one (the baseline of ``benchmarks/numerics_search.py``).
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from tqdm.auto import tqdm

from ewif.files.model_set import ModelSet
from ewif.search.recommendation import Recommendation, recommend
from realrun.acceptance import Acceptance, measure_acceptance
from realrun.ar import ar_timer
from realrun.family import Family, load_family, room_for_another, set_threads
from realrun.invariance import batch_invariance
from realrun.measure import Costs, assemble_model_set, check_models, measure_costs
from realrun.numerics_bound import assured_bound, quick_passes, throughput_bound
from realrun.numerics_choice import DEFAULT_CHOICE, throughput_interval
from realrun.numerics_rounds import MIN_ROUNDS, confirmation_stop, race_verdict, score_stderr
from realrun.numerics_settings import (
    CPU_DTYPES,
    SETTINGS_ARGUMENTS,
    SearchSettings,
    search_settings,
)
from realrun.numerics_trials import (
    STAGES,
    Candidate,
    Measured,
    NumericsTrial,
    reread_separation,
    score,
    summary,
)
from realrun.prompts import Prompt, encode
from simulate.decoder.sampling import Decoding

__all__ = ["CPU_DTYPES", "STAGES", "Measured", "NumericsTrial", "measure_numerics"]


@dataclass
class _Search:
    """The search's state, passed from stage to stage (module docstring)."""

    settings: SearchSettings
    measuring: list[Prompt]
    load: Callable[[str], Family]
    families: dict[str, Family] = field(default_factory=dict)
    acceptance: Acceptance | None = None
    alpha_dtype: str = ""
    quick: dict[tuple[str, int], dict[str, list[float]]] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)  # the family's models (in every dtype)
    labels: dict[str, str] = field(default_factory=dict)  # requested dtype -> family.dtype
    candidates: list[Candidate] = field(default_factory=list)
    best: Candidate | None = None
    deferred: list[Candidate] = field(default_factory=list)  # bound against an unconfirmed lead
    warm: tuple[str, int] | None = None  # the numerics that ran passes last
    seconds: dict[str, float] = field(default_factory=dict)  # wall time by kind of work
    own: dict[str, float] = field(default_factory=dict)  # a dtype's load; "alpha": a full α

    @contextlib.contextmanager
    def timed(self, work: str, own: str = "", c: Candidate | None = None) -> Iterator[None]:
        """Add the block's wall time to ``seconds[work]`` (and to ``c.seconds``, as ``own[own]``
        where given: what measuring one candidate alone pays)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            spent = time.perf_counter() - start
            self.seconds[work] = self.seconds.get(work, 0.0) + spent
            if own:
                self.own[own] = spent
            if c is not None:
                c.seconds += spent

    # ------------------------------------------------------------------ families
    def family(self, dtype: str) -> Family:
        """The family in ``dtype``, loaded once; the others but the best candidate's are
        dropped first unless there is room (:func:`realrun.family.room_for_another`)."""
        if dtype not in self.families:
            keep = None if self.best is None else self.best.dtype
            room = room_for_another(self.families.values())
            for name in [d for d in self.families if d != keep and not room]:
                del self.families[name]
            gc.collect()
            with self.timed("load", own=dtype):
                self.families[dtype] = self.load(dtype)
            self.labels[dtype] = self.families[dtype].dtype
        return self.families[dtype]

    def family_of(self, c: Candidate) -> Family:
        family = self.family(c.dtype)
        set_threads(family, c.threads)
        return family

    @property
    def best_rank(self) -> float:
        """The leader's rank (:attr:`realrun.numerics_trials.NumericsTrial.rank`), 0 if none."""
        return 0.0 if self.best is None or self.best.trial is None else self.best.trial.rank

    # ------------------------------------------------------------------ stages 0-2
    def quick_look(self) -> None:
        """Stage 0: every neural model's fastest passes over ``m = 1..4``, per candidate."""
        s = self.settings
        for dtype in s.dtypes:
            family = self.family(dtype)
            context = encode(self.measuring[0], family.tokenizer)
            for warmup, t in zip((1, *[0] * len(s.counts)), s.counts, strict=False):
                set_threads(family, t)
                with self.timed("quick look"):
                    self.quick[(dtype, t)] = quick_passes(family.chain, context, warmup)

    def measure_alpha(self, dtype: str) -> None:
        """Stage 1 (and at the end, when another dtype won, verifying the continuations of
        the first, :func:`realrun.acceptance.measure_acceptance`; a run given the numerics
        pays the first's time): α in ``dtype``."""
        s, earlier = self.settings, self.acceptance
        family = self.family(dtype)
        set_threads(family, max(s.counts))
        with self.timed("alpha", own="" if earlier else "alpha"):
            self.acceptance = measure_acceptance(
                family.chain,
                [encode(p, family.tokenizer) for p in self.measuring],
                max_new_tokens=s.max_new_tokens,
                leniences=s.leniences,
                decoding=s.decoding,
                eos_token_id=family.tokenizer.eos_token_id,
                progress=s.progress,
                earlier=earlier,
            )
        self.alpha_dtype = family.dtype
        self.warm = (dtype, max(s.counts))

    def order_by_bound(self) -> None:
        """Stage 2's order: every candidate's quick-look bound; dtypes in the order of their
        best bound (each loaded once), within one the best bound first."""
        assert self.acceptance is not None
        self.names = next(iter(self.families.values())).names
        alpha = self.acceptance.alpha(len(self.names))
        for c in self.candidates:
            quick = self.quick[(c.dtype, c.threads)]
            c.bound = throughput_bound(self.names, alpha, quick, self.settings.k_max)
        top = {d: max(c.bound or 0.0 for c in self.candidates if c.dtype == d) for d in self.labels}
        self.candidates.sort(key=lambda c: (-top[c.dtype], -(c.bound or 0.0)))

    # ------------------------------------------------------------------ stages 3-5
    def run_candidate(self, c: Candidate, deferring: bool = True) -> None:
        """Stages 2-5 for one candidate; its trial names the rule that stopped it. One a
        bound stops against an unconfirmed leader waits in ``deferred`` (:meth:`revisit`)."""
        s, why = self.settings, self.bounded(c)
        if why and deferring:
            return self.deferred.append(c)
        if why:
            target = next(iter(self.quick[(c.dtype, c.threads)].values()))[0]
            c.trial = replace(self.trial(c, "bound", c.bound, target, why), stopped="bound")
            return
        self.add_rounds(c, s.screen_repeats)
        self.scored(c, "short curve")
        if s.exhaustive:
            self.confirm(c)
            eligible = self.check_invariance(c)
            if eligible and (self.best is None or c.trial.rank > self.best_rank):
                self.lead(c, "lower score")
            else:
                self.exclude(c, "confirmed", "lower score" if eligible else "batch invariance")
        elif self.verdict(c) == "below":
            self.exclude(c, "short curve", "separated", stopped="separated")
        elif not self.check_invariance(c):
            self.exclude(c, "invariance", "batch invariance", stopped="batch invariance")
        else:
            self.race(c)

    def revisit(self) -> None:
        """Stage 2 again, once every other candidate has run, for those a bound stopped: a
        bound excludes only against a confirmed rank, so the leader is confirmed then, when
        it has most likely won (a leader overtaken later never pays those rounds)."""
        while self.deferred:
            self.confirm(self.best)
            self.run_candidate(self.deferred.pop(0), deferring=False)

    def bounded(self, c: Candidate) -> str | None:
        """Stage 2 (a search only): the bound of ``c`` below the leader's rank, by name."""
        s, rank = self.settings, self.best_rank
        if s.exhaustive or c.bound is None:
            return None
        if c.bound < rank:
            return "quick-look bound"
        if s.choice != "assured" or self.best is None:
            return None
        if c.assured_bound is None:
            c.assured_bound = self.assured_bound_of(c)
        return "assured bound" if c.assured_bound < rank else None

    def assured_bound_of(self, c: Candidate) -> float:
        """:func:`realrun.numerics_bound.assured_bound` of ``c``'s quick look (computed once)."""
        a, quick = self.acceptance, self.quick[(c.dtype, c.threads)]
        alpha = a.alpha(len(self.names))
        return assured_bound(self.names, alpha, a.by_prompt(), quick, self.settings.k_max)

    def race(self, c: Candidate) -> None:
        """Stage 5 for a runner-up (the first eligible candidate leads at once): one round
        at a time while it is not separated from the leader, up to ``repeats``, to the one of
        the two whose rank has the larger standard error (the leader's, below ``repeats``,
        count toward the rounds it takes if chosen); it leads when separated above, or ahead
        at the cap."""
        if (lead := self.best) is None:
            return self.lead(c, "")
        repeats = self.settings.repeats
        while (side := self.verdict(c)) is None and c.rounds < repeats:
            x = lead if lead.rounds < repeats and lead.trial.rank_se > c.trial.rank_se else c
            self.add_rounds(x, 1)
            self.scored(x, "rounds" if x is c else x.trial.stage, x.trial.recommendation)
        self.scored(c, "rounds")
        if side == "below":
            return self.exclude(c, "rounds", "separated", stopped="separated")
        if side == "above" or c.trial.rank > self.best_rank:
            return self.lead(c, "separated" if side == "above" else "lower score")
        self.exclude(c, "rounds", "lower score", stopped=side or "repeats")

    def verdict(self, c: Candidate) -> str | None:
        """:func:`realrun.numerics_rounds.race_verdict` of ``c`` against the leader."""
        if self.best is None:
            return None
        lead, t = self.best, c.trial
        assert lead.trial is not None and t is not None
        return race_verdict(t.rank, t.rank_se, c.rounds, lead.trial.rank, lead.trial.rank_se,
                            lead.rounds, self.settings.repeats)  # fmt: skip

    def lead(self, c: Candidate, why: str) -> None:
        """``c`` becomes the leader; the old one is excluded by ``why``."""
        if self.best is not None:
            self.exclude(self.best, self.best.trial.stage, why)
        self.best = c

    def exclude(self, c: Candidate, stage: str, why: str, stopped: str | None = None) -> None:
        c.trial = replace(c.trial, stage=stage, excluded_by=why, stopped=stopped or c.trial.stopped)

    def confirm(self, c: Candidate, final: bool = False) -> None:
        """Rounds until :func:`realrun.numerics_rounds.confirmation_stop`, then the score
        (once, unless ``final`` finds fewer than ``repeats`` rounds). The chosen candidate
        (``final``), the exhaustive baseline and given numerics take ``repeats`` rounds, no
        precision rule: a run's model set is measured alike, its numerics searched or given."""
        s = self.settings
        precise = s.searching and not s.exhaustive and not final
        done = c.trial is not None and c.trial.stage == "confirmed"
        if done and (precise or c.rounds >= s.repeats):
            return
        while True:
            rse = c.costs.family.ar_stderr / c.costs.unit_seconds if precise else float("inf")
            why = confirmation_stop(c.rounds, rse, c.spent, s.repeats, s.min_timing_seconds)
            if why is not None:
                break
            self.add_rounds(c, 1)
        c.trial = replace(self.scored(c, "confirmed"), stopped=why)

    def add_rounds(self, c: Candidate, rounds: int) -> None:
        """``rounds`` more rounds (:func:`realrun.measure.measure_costs`) pooled with the
        earlier ones, after warm-up rounds on a first call unless the numerics are warm (α just
        ran in them), on through the measuring prompts from where the last call stopped."""
        s = self.settings
        family = self.family_of(c)
        warmup = s.warmup if c.offset == 0 and self.warm != (c.dtype, c.threads) else 0
        with self.timed("curves", c=c):
            if warmup:
                self._costs(family, warmup, c.offset)
            start = time.perf_counter()
            more = self._costs(family, rounds, c.offset + warmup)
        c.spent += time.perf_counter() - start
        c.offset += warmup + rounds
        self.warm = (c.dtype, c.threads)
        c.costs = replace(more, warmup=warmup) if c.costs is None else c.costs.merged(more)

    def _costs(self, family: Family, rounds: int, offset: int) -> Costs:
        """``rounds`` timed rounds on the measuring contexts from the ``offset``-th on."""
        s = self.settings
        assert self.acceptance is not None
        contexts = list(self.acceptance.contexts)
        k = offset % len(contexts)
        return measure_costs(
            family.chain,
            contexts[k:] + contexts[:k],
            max_m=s.max_m,
            ar=ar_timer(family.chain[0], s.decoding, family.tokenizer.eos_token_id, offset),
            decoding=s.decoding,
            repeats=rounds,
            warmup=0,
            ar_tokens=s.max_new_tokens,
            seed=offset,
            progress=s.progress,
        )

    def scored(self, c: Candidate, stage: str, held: Recommendation | None = None) -> NumericsTrial:
        """The candidate's trial at ``stage``: the recommendation on its curves so far (or the
        ``held`` one, EWIF* kept at its estimate as :mod:`realrun.numerics_rounds` keeps it: a
        recommendation may take minutes), the score's standard error, its throughput interval
        and its rounds (its invariance check and why its rounds stopped kept)."""
        assert c.costs is not None
        model_set = self.model_set(c)
        rec = held or recommend(model_set, k_max=self.settings.k_max)
        unit, old = c.costs.unit_seconds, c.trial
        value = score(rec, unit)
        c.trial = replace(
            self.trial(c, stage, value, unit),
            recommendation=rec,
            score_se=score_stderr(value, unit, c.costs.family.ar_stderr),
            interval=throughput_interval(rec, model_set, unit),
            rounds=c.rounds,
            invariance=None if old is None else old.invariance,
            stopped=None if old is None else old.stopped,
        )
        return c.trial

    def trial(
        self, c: Candidate, stage: str, value: float, unit: float, excluded_by: str | None = None
    ) -> NumericsTrial:
        s = self.settings
        return NumericsTrial(
            self.labels[c.dtype], c.threads, unit, stage, value, min_agreement=s.min_agreement,
            rule=s.rule, choice=s.choice, excluded_by=excluded_by, bound=c.bound,
            assured_bound=c.assured_bound,
        )  # fmt: skip

    def model_set(self, c: Candidate) -> ModelSet:
        """The model set of the candidate's curves with the search's α."""
        family = self.family_of(c)
        assert self.acceptance is not None and c.costs is not None
        return assemble_model_set(
            check_models(family.chain),
            self.acceptance,
            c.costs,
            metadata={"dtype": family.dtype, "threads": c.threads},
        )

    def check_invariance(self, c: Candidate) -> bool:
        """Stage 4: the target's batch invariance on the measuring continuations; True when
        eligible under the rule."""
        family = self.family_of(c)
        assert self.acceptance is not None and c.trial is not None
        s = self.settings
        with self.timed("batch invariance", c=c):
            inv = batch_invariance(
                family.chain[0], self.acceptance.contexts, m=4, max_positions=s.invariance_positions
            )
        c.trial = replace(c.trial, invariance=inv)
        return bool(c.trial.eligible)

    # ------------------------------------------------------------------ the choice
    def choose(self) -> Candidate:
        """The best eligible candidate (none eligible: the highest agreement, then rank, of
        those checked), confirmed to ``repeats`` rounds only now: an overtaken leader never
        needed them."""
        chosen = self.best
        if chosen is None:
            checked = [c for c in self.candidates if c.trial and c.trial.invariance is not None]
            chosen = max(checked, key=lambda c: (c.trial.invariance.rate, c.trial.rank))
            for c in checked:
                if c is not chosen and c.trial.excluded_by is None:
                    c.trial = replace(c.trial, excluded_by="batch invariance")
        self.confirm(chosen, final=True)
        chosen.trial = replace(chosen.trial, excluded_by=None)
        return chosen

    def finish(self, started: float) -> Measured:
        """The chosen candidate's model set (α again in its dtype if it was measured in
        another), its metadata and the account of the choice."""
        chosen = self.choose()
        family = self.family_of(chosen)
        if family.dtype != self.alpha_dtype:
            self.measure_alpha(chosen.dtype)
            family = self.family_of(chosen)
            self.scored(chosen, chosen.trial.stage)
        model_set = self.model_set(chosen)
        for c in [c for c in self.candidates if c.trial is not None]:
            c.trial = replace(c.trial, seconds=c.seconds)
        trials = [reread_separation(c.trial, chosen.trial) for c in self.candidates if c.trial]
        searched, total = self.settings.searching, time.perf_counter() - started
        own = chosen.seconds + self.own["alpha"] + self.own.get(chosen.dtype, 0.0)
        lines = summary(chosen.trial, trials, total, own) if searched else []
        inv = chosen.trial.invariance
        meta = {
            **model_set.metadata,
            "batch_invariance": None if inv is None else inv.to_dict(),
            "batch_invariance_rule": self.settings.rule,
            "numerics_trials": [t.to_dict() for t in trials] if searched else [],
            "numerics_choice": "\n".join(lines) if searched else "given",
            "numerics_seconds": {**self.seconds, "total": total, "chosen numerics alone": own},
        }
        trials = trials if searched else []
        return Measured(
            family, replace(model_set, metadata=meta), trials, chosen.threads, tuple(lines)
        )


def measure_numerics(
    sources: Sequence[str],
    measuring: list[Prompt],
    *,
    mag: bool,
    bigram: str | None,
    device: str,
    dtype: str | Sequence[str],
    threads: int | str | Sequence[int],
    max_new_tokens: int,
    leniences: Sequence[float],
    decoding: Decoding,
    k_max: int,
    max_m: int | None = None,
    repeats: int = 10,
    warmup: int = 1,
    screen_repeats: int = MIN_ROUNDS,
    exhaustive: bool = False,
    min_agreement: float = 0.99,
    batch_invariance: str = "strict",
    invariance_positions: int = 48,
    names: Sequence[str] | None = None,
    progress: bool = True,
    backend: str = "transformers",
    min_timing_seconds: float = 0.0,
    numerics_choice: str = DEFAULT_CHOICE,
) -> Measured:
    """Measure the family on the measuring split, choosing dtype and threads when ``"auto"``
    (or given as lists of candidates) on a CPU by the staged search of the module docstring
    (``batch_invariance``: ``strict`` or ``near-ties``, :mod:`realrun.invariance`;
    ``numerics_choice``: ``assured`` or ``mean``, :mod:`realrun.numerics_choice`;
    ``min_timing_seconds``: the confirmed candidate's rounds go on while they took less,
    :func:`realrun.numerics_rounds.confirmation_stop`; ``repeats`` caps a candidate's rounds;
    given numerics take all of them); returns the family loaded in the chosen numerics with
    its model set (α measured in those numerics)."""
    given = locals()
    settings = search_settings(**{name: given[name] for name in SETTINGS_ARGUMENTS})

    def load(name: str) -> Family:
        return load_family(
            sources, mag=mag, bigram=bigram, device=device, dtype=name, names=names, backend=backend
        )

    started = time.perf_counter()
    search = _Search(settings, list(measuring), load)
    search.candidates = [Candidate(d, t) for d in settings.dtypes for t in settings.counts]
    if settings.searching and not settings.exhaustive:
        search.quick_look()
    search.measure_alpha(next(reversed(search.families), settings.dtypes[0]))
    if search.quick:
        search.order_by_bound()
    for candidate in tqdm(
        search.candidates, desc="numerics", unit="candidate", disable=not progress
    ):
        search.run_candidate(candidate)
    search.revisit()
    return search.finish(started)
