"""Acceptance of real models: every pair's α[r][j], teacher-forced on the target's continuations.

Step 1 of :func:`realrun.measure.measure`, which writes the model set.

Acceptance (teacher-forced on the **target's** continuations)
-------------------------------------------------------------
For every prompt the target generates a continuation ``y_1..y_T`` (greedy, or sampled with
the run's decoding), keeping the score rows its own passes computed (:class:`_RowKeeper`):
they are its scores after every prefix ``prompt + y_{<t}``, the continuation's argmax when
greedy, so it is not run over them again (a second pass over ``T`` positions cost a float16
Qwen 1.5B on 2 CPU cores ~2.5 s a prompt, a fifth of the step). They are one-position passes'
rows; a verifying pass computes the same scores up to summation order, and where an engine's
multi-position pass breaks a near-tie the other way (:mod:`realrun.invariance`) α follows the
generation's choice (on 8 prompts in float16 and in bfloat16 no acceptance moved:
``benchmarks/acceptance_stage.py``). Its cache at the generation's end is kept for reuse
(:meth:`realrun.cached_model.CachedTokenModel.keep_context`): the timing rounds feed a drawn
part of the continuation onto the prompt (~1.3 s a round for that model). Measured again in
other numerics (the numerics search's winner, another dtype than the one α was first
measured in), a greedy continuation is not generated anew: the target verifies the earlier
one in one teacher-forced pass, and is generated on only from where its choice first differs
(:func:`_continuation`; such a pass is the ~2.5 s above, a fifth of the step). Every drafter
then runs once over ``prompt + y`` and every pair ``r < j`` (``r`` neural) is scored at each
position ``t`` on the same prefix ``prompt + y_{<t}`` — the prefixes the cascade visits at its
first draft position (a reviewer that is itself a drafter also works on the target's text
inside a cascade, so this is closer to a cascade than the reviewer's own continuation). Per
position:

* greedy: ``a_t = 1`` iff drafter ``j``'s proposal ``x`` (its argmax; Max-Gram's
  ``propose(prefix, P, 1)``) passes reviewer ``r``'s greedy test with lenience ``l``,
  ``z_r(x) + log l >= max z_r`` (raw logits; ``l = 1``: ``x`` is ``r``'s argmax) — exactly
  :func:`simulate.decoder.verify.greedy_verify`;
* sampling: ``a_t = Σ_x min(q_j(x), l·p_r(x))`` with ``p, q`` the decoded (temperature,
  top-p) distributions — the acceptance probability of speculative sampling with lenience,
  ``1 − TV(p, q)`` at ``l = 1``; for Max-Gram (point mass at ``x``) ``min(1, l·p_r(x))``.

``α[l][r][j]`` is the mean of ``a_t`` over all positions of all prompts. The target's row
uses ``l = 1`` for every lenience (lenience never applies at the target).

Acceptance by position (Figure 2). Because an accepted greedy draft equals the reviewer's
text, draft position ``i`` starting at ``t`` is accepted given positions ``1..i−1`` were iff
``a_{t+i−1}`` holds; so ``curve[i] = Σ_t Π_{s<i} a_{t+s} / Σ_t Π_{s<i−1} a_{t+s}`` (starts
with ``t + i − 1 < T``) is the conditional acceptance of position ``i`` (for sampling the
same formula is the i.i.d.-in-context approximation). Stored for lenience 1.

Acceptance of ranked candidates (token trees). On the same prefixes, every pair and lenience
gets the probability that each of the drafter's ``R`` ranked candidates is the one the tree
verification rule accepts (:mod:`realrun.rank_measure`): the rank-acceptance vector
``p = (p_1, …, p_R)`` with ``p_1 = α`` (the model set's ``rank_acceptance``, with the
per-prompt sums the bootstrap resamples).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from tqdm.auto import tqdm

from ewif.base import validate
from ewif.files.rank_acceptance import RankAcceptance
from realrun.cached_model import CachedTokenModel
from realrun.rank_measure import RANKS, presence_rows, rank_rows, rank_section
from simulate.decoder.cascade import CascadeDecoder
from simulate.decoder.interface import Proposer, TokenModel
from simulate.decoder.sampling import Decoding


def position_curve(runs: Sequence[np.ndarray], max_position: int) -> np.ndarray:
    """Conditional acceptance by draft position from per-position acceptances ``a_t`` of each
    sequence (see the module docstring); NaN where no start reaches the position."""
    num = np.zeros(max_position)
    den = np.zeros(max_position)
    for a in runs:
        a = np.asarray(a, dtype=float)
        T = a.size
        prod = np.ones(T)  # Π_{s<i-1} a_{t+s} for the current i, per start t
        for i in range(1, max_position + 1):
            starts = T - i + 1
            if starts <= 0:
                break
            den[i - 1] += prod[:starts].sum()
            prod = prod[:starts] * a[i - 1 : i - 1 + starts]
            num[i - 1] += prod.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


class _RowKeeper:
    """The target as its generator sees it: every score row its passes return is kept by the
    length of the prefix it follows (row ``i`` of ``logits(tokens, n)`` follows
    ``tokens[:len(tokens) - n + 1 + i]``, the :class:`TokenModel` contract)."""

    def __init__(self, model: TokenModel) -> None:
        self.model, self.name, self.vocab_size = model, model.name, model.vocab_size
        self.rows: dict[int, np.ndarray] = {}

    def logits(self, tokens: Sequence[int], n: int) -> np.ndarray:
        out = self.model.logits(tokens, n)
        first = len(tokens) - n + 1
        self.rows.update({first + i: np.array(row, dtype=np.float64) for i, row in enumerate(out)})
        return out

    def verified(self, prompt: list[int], earlier: list[int]) -> list[int]:
        """The longest head of ``earlier`` (a greedy continuation of ``prompt`` decoded in
        other numerics) that this model's greedy choices repeat, from one teacher-forced pass
        over it (its rows kept): where it breaks off, a generation goes on from that head."""
        rows = self.logits(prompt + earlier, len(earlier) + 1)[: len(earlier)]
        same = np.argmax(rows, axis=-1) == np.asarray(earlier)
        return earlier if same.all() else earlier[: int(np.argmin(same))]

    def after(self, prompt_length: int, T: int) -> np.ndarray | None:
        """``(T, V)``: the rows after the prefixes of ``prompt_length .. + T − 1`` tokens (the
        scores the continuation's ``T`` tokens were drawn from); None if any is missing."""
        wanted = range(prompt_length, prompt_length + T)
        if not all(length in self.rows for length in wanted):
            return None
        return np.stack([self.rows[length] for length in wanted])


def _scores(
    models: Sequence[TokenModel | Proposer],
    prompt: list[int],
    continuation: list[int],
    target_rows: np.ndarray | None = None,
) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
    """Every neural model's teacher-forced logits on one continuation (the target's
    ``target_rows`` where given: :meth:`_RowKeeper.after`), and every model's proposal (its
    argmax; a proposer's first token) at each position."""
    T = len(continuation)
    seq = prompt + continuation
    logits: dict[int, np.ndarray] = {}
    proposals: dict[int, np.ndarray] = {}
    for i, m in enumerate(models):
        if i == 0 and target_rows is not None:
            logits[i] = target_rows
            proposals[i] = np.argmax(target_rows, axis=-1)
        elif isinstance(m, TokenModel):
            logits[i] = np.asarray(m.logits(seq, T + 1)[:T], dtype=np.float64)
            proposals[i] = np.argmax(logits[i], axis=-1)
        else:
            proposals[i] = np.array(
                [m.propose(seq[: len(prompt) + t], len(prompt), 1)[0] for t in range(T)]
            )
    return logits, proposals


def _acceptances(
    models: Sequence[TokenModel | Proposer],
    prompt: list[int],
    continuation: list[int],
    leniences: Sequence[float],
    decoding: Decoding,
    scores: tuple[dict[int, np.ndarray], dict[int, np.ndarray]] | None = None,
) -> dict[tuple[float, int, int], np.ndarray]:
    """Per-position acceptance ``a_t`` of every pair on one teacher-forced continuation
    (``scores``: :func:`_scores` of it, when already computed)."""
    T = len(continuation)
    logits, proposals = _scores(models, prompt, continuation) if scores is None else scores
    probs = {} if decoding.greedy else {i: decoding.probs(z) for i, z in logits.items()}
    rows = np.arange(T)
    out = {}
    for r, z in logits.items():
        top = z.max(axis=-1)
        for j in range(r + 1, len(models)):
            for lenience in leniences if r > 0 else (1.0,):
                if decoding.greedy:
                    a = (z[rows, proposals[j]] + math.log(lenience) >= top).astype(float)
                elif j in probs:
                    a = np.minimum(probs[j], lenience * probs[r]).sum(axis=-1)
                else:
                    a = np.minimum(1.0, lenience * probs[r][rows, proposals[j]])
                out[(float(lenience), r, j)] = a
    return out


@dataclass(frozen=True)
class Acceptance:
    """Step 1 of :func:`realrun.measure.measure`: per-position acceptances of every pair and
    lenience (``runs[(lenience, r, j)]``, one array per prompt) and the target's
    continuations."""

    runs: dict[tuple[float, int, int], list[np.ndarray]]
    contexts: list[tuple[list[int], list[int]]]  # (prompt, continuation) per prompt
    decoding: Decoding
    max_new_tokens: int
    skipped: tuple[int, ...] = ()  # prompts (indices) whose continuation was empty
    #: ``ranks[(lenience, r, j)]``: per prompt, ``(T, R)`` rows of each rank's acceptance
    ranks: dict[tuple[float, int, int], list[np.ndarray]] = field(default_factory=dict)
    #: ``present[j]``: per prompt, ``(T, R)`` rows of proposer ``j``'s candidate presence
    present: dict[int, list[np.ndarray]] = field(default_factory=dict)

    def continuation(self, index: int, max_new_tokens: int) -> list[int] | None:
        """The greedy continuation of measuring prompt ``index`` for a run of
        ``max_new_tokens`` (None: not measured greedily with that length, or skipped)."""
        if not self.decoding.greedy or self.max_new_tokens != max_new_tokens:
            return None
        if index in self.skipped:
            return None
        position = index - sum(s < index for s in self.skipped)
        return list(self.contexts[position][1]) if position < len(self.contexts) else None

    def alpha(self, n_models: int) -> dict[float, np.ndarray]:
        """``α[l][r, j]``: mean acceptance over all positions; the target row uses ``l = 1``."""
        leniences = sorted({key[0] for key in self.runs})
        alpha = {}
        for lenience in leniences:
            mat = np.full((n_models, n_models), np.nan)
            for (l_, r, j), arrs in self.runs.items():
                if l_ == lenience or (r == 0 and l_ == 1.0):
                    mat[r, j] = float(np.concatenate(arrs).mean())
            alpha[lenience] = mat
        return alpha

    def by_prompt(self) -> dict[tuple[float, int, int], np.ndarray]:
        """Per pair and lenience, one ``[Σ_t a_t, T]`` row per prompt: the evidence the
        bootstrap over prompts resamples (:mod:`ewif.predict.bootstrap`)."""
        return {
            key: np.array([[float(a.sum()), a.size] for a in arrs])
            for key, arrs in self.runs.items()
        }

    def rank_acceptance(self) -> RankAcceptance | None:
        """The rank-acceptance section (:func:`realrun.rank_measure.rank_section`); None
        when ranks were not measured."""
        return rank_section(self.ranks, self.runs, self.present) if self.ranks else None

    def traces(self) -> dict[tuple[float, int, int], tuple[np.ndarray, ...]]:
        """Per pair and lenience, the per-position acceptances of every prompt: what
        :mod:`simulate.trace_replay` replays."""
        return {
            key: tuple(np.asarray(a, dtype=float) for a in arrs) for key, arrs in self.runs.items()
        }

    def typical_context(self) -> tuple[list[int], list[int]]:
        """The ``(prompt, continuation)`` of median total length: the context the cost
        curves are timed on (attention cost grows with the context)."""
        order = sorted(self.contexts, key=lambda c: len(c[0]) + len(c[1]))
        return order[(len(order) - 1) // 2]

    def by_position(self, max_position: int) -> dict[tuple[int, int], np.ndarray]:
        """Conditional acceptance by draft position at lenience 1 (:func:`position_curve`)."""
        return {
            (r, j): np.nan_to_num(position_curve(arrs, max_position), nan=0.0)
            for (l_, r, j), arrs in self.runs.items()
            if l_ == 1.0
        }


def _continuation(
    target: _RowKeeper,
    generator: CascadeDecoder,
    prompt: list[int],
    earlier: Acceptance | None,
    index: int,
    max_new_tokens: int,
    eos_token_id: int | None,
) -> list[int]:
    """The target's continuation of prompt ``index``: generated, or with ``earlier`` greedy
    acceptances of the same prompts (same length), its continuation there verified
    (:meth:`_RowKeeper.verified`) and generated on where the target's choice differs. A pass
    over ``m`` positions and ``m`` one-position passes agree but at near-ties
    (:mod:`realrun.invariance`), so the continuation is the target's greedy text in these
    numerics up to those, as a generation's is."""
    done = earlier.continuation(index, max_new_tokens) if earlier is not None else None
    if done is None or not generator.decoding.greedy:
        return generator.generate(prompt, max_new_tokens, eos_token_id).tokens
    head = target.verified(prompt, done)
    if len(head) == len(done):
        return head
    return head + generator.generate(prompt + head, max_new_tokens - len(head), eos_token_id).tokens


def measure_acceptance(
    models: Sequence[TokenModel | Proposer],
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    leniences: Sequence[float],
    decoding: Decoding,
    eos_token_id: int | None = None,
    seed: int = 0,
    progress: bool = True,
    ranks: int = RANKS,
    earlier: Acceptance | None = None,
) -> Acceptance:
    """Teacher-forced acceptances of every pair on the target's continuations, and of the
    drafters' ``ranks`` ranked candidates (0: none; module docstring). Ctrl-C keeps the
    prompts finished so far (at least one). ``earlier``: the same prompts measured greedily in
    other numerics (another dtype): each continuation is verified by one teacher-forced pass
    of the target instead of generated anew, and generated on from where its greedy choice
    first differs (:func:`_continuation`)."""
    lens = sorted({float(x) for x in leniences} | {1.0})
    ranks = validate.count("ranks", ranks)
    target = _RowKeeper(models[0])
    generator = CascadeDecoder([target], np.zeros((0, 0), int), decoding=decoding, seed=seed)
    rng = np.random.default_rng(seed)
    runs: dict[tuple[float, int, int], list[np.ndarray]] = {}
    ranked: dict[tuple[float, int, int], list[np.ndarray]] = {}
    present: dict[int, list[np.ndarray]] = {}
    contexts: list[tuple[list[int], list[int]]] = []
    skipped: list[int] = []
    try:
        for i, p in enumerate(tqdm(prompts, desc="measure α", unit="prompt", disable=not progress)):
            target.rows.clear()
            cont = _continuation(
                target, generator, list(p), earlier, i, max_new_tokens, eos_token_id
            )
            if isinstance(models[0], CachedTokenModel):  # the timing rounds start from it
                models[0].keep_context()
            if not cont:
                skipped.append(i)
                continue
            scores = _scores(models, p, cont, target.after(len(p), len(cont)))
            found = _acceptances(models, p, cont, lens, decoding, scores)
            rows = (
                rank_rows(models, scores[0], p + cont, len(p), found, decoding, ranks, rng)
                if ranks
                else {}
            )
            for key, a in found.items():
                runs.setdefault(key, []).append(a)
            for key, r in rows.items():
                ranked.setdefault(key, []).append(r)
            if ranks:
                for j, q in presence_rows(models, p + cont, len(p), ranks).items():
                    present.setdefault(j, []).append(q)
            contexts.append((p, cont))
    except KeyboardInterrupt:
        if not contexts:
            raise
    if not contexts:
        raise ValueError("the target generated no tokens on any prompt; nothing to measure")
    return Acceptance(runs, contexts, decoding, max_new_tokens, tuple(skipped), ranked, present)
