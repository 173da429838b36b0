"""realrun.batched: B-row passes on both backends (the cache holds B rows of the right
lengths after a timed pass), interleaved rounds, and the conversion to ewif's BatchCosts."""

from __future__ import annotations

import random

import numpy as np
import pytest

from realrun.batched import BatchedTiming, TransformersRows, batch_costs, time_batched
from realrun.hf_model import HFTokenModel
from realrun.pass_timing import PassTiming, grid


class FakeRows:
    """Batched rows that log their passes; a pass costs ``rows·m`` fake milliseconds, plus
    0.5 per logit row asked."""

    one_output = True

    def __init__(self, name: str, rows: int, log: list, drafter: bool = False) -> None:
        self.name, self.rows, self.log, self.drafter = name, rows, log, drafter
        self.prefilled = None

    def prefill(self, contexts):
        self.prefilled = [list(c) for c in contexts]

    def timed_pass(self, m, rng, outputs):
        self.log.append((self.name, self.rows, m, outputs))
        return 0.001 * self.rows * m + 0.0005 * (self.rows * outputs or 1)


def test_rounds_time_every_model_rows_and_m_once_in_a_shuffled_order():
    log: list = []
    rows = [FakeRows(n, b, log, drafter=n == "d") for n in ("t", "d") for b in (1, 2, 4)]
    out = time_batched(rows, [[1, 2, 3]], 3, rounds=3, warmup=1, seed=2)
    assert all(r.prefilled == [[1, 2, 3]] for r in rows)
    assert set(out.passes) == {"t", "d"} and set(out.passes["t"]) == {1, 2, 4}
    assert set(out.reevaluate) == {"d"}  # a drafter: timed with one logit row in all too
    timing = out.passes["d"][4]
    assert timing.m == grid(3) and all(len(s) == 3 for s in timing.samples)
    # a drafter's passes of 1 or 2 positions ask one row per sequence, of 3 all of them
    assert timing.seconds == pytest.approx([0.004 + 0.002, 0.008 + 0.002, 0.012 + 0.006])
    assert out.reevaluate["d"][4].seconds == pytest.approx([0.0045, 0.0085, 0.0125])
    assert out.passes["t"][2].seconds == pytest.approx([0.003, 0.006, 0.009])
    per_round = len(rows) * len(grid(3)) + 3 * len(grid(3))
    rounds = [log[i : i + per_round] for i in range(0, len(log), per_round)]
    assert len(rounds) == 4 and all(sorted(r) == sorted(rounds[0]) for r in rounds)
    assert len({tuple(r) for r in rounds}) > 1  # shuffled


def test_batch_costs_in_the_model_sets_unit():
    t = {b: PassTiming.of((1, 2), [[0.1 * b], [0.15 * b]]) for b in (1, 2)}
    d = {b: PassTiming.of((1, 2), [[0.02 * b], [0.03 * b]]) for b in (1, 2)}
    again = {b: PassTiming.of((1, 2), [[0.02 * b], [0.025 * b]]) for b in (1, 2)}
    bc = batch_costs(BatchedTiming({"t": t, "d": d}, {"d": again}), ["t", "d", "mag"], 0.1)
    assert bc.at(0, 2, 2) == pytest.approx(3.0) and bc.at(1, 1, 1) == pytest.approx(0.2)
    assert bc.at(1, 2, 2, one_output=True) == pytest.approx(0.5)
    assert bc.at(0, 2, 2, one_output=True) == pytest.approx(3.0)  # the target: its own curve
    assert bc.at(2, 2, 1) == 0.0  # a proposer is priced row by row elsewhere
    with pytest.raises(ValueError, match="unit_seconds"):
        batch_costs(BatchedTiming({"t": t}, {}), ["t"], 0.0)


def test_transformers_rows_feed_b_rows_after_their_contexts(tiny_models, tiny_prompts):
    model = HFTokenModel(tiny_models["target"].model, "target")
    rows = TransformersRows(model, 3)
    rows.prefill(tiny_prompts[:2])  # 3 rows cycle through 2 contexts, cut to one length
    length = min(len(p) for p in tiny_prompts[:2])
    seconds = rows.timed_pass(4, random.Random(0), 4)
    assert seconds > 0
    assert rows._cache.get_seq_length() == length + 4
    assert rows._cache.layers[0].keys.shape[0] == 3
    rows.timed_pass(2, random.Random(1), 1)  # rolled back to the contexts first
    assert rows._cache.get_seq_length() == length + 2
    with pytest.raises(ValueError, match="contexts"):
        rows.prefill([])


def test_llamacpp_rows_roll_every_row_back_to_its_own_context(tiny_gguf):
    pytest.importorskip("llama_cpp")
    from realrun.batched import LlamaCppRows
    from realrun.llamacpp_model import LlamaCppTokenModel

    path, _ = tiny_gguf
    model = LlamaCppTokenModel(path, "tiny", n_ctx=128, n_threads=1)
    rows = LlamaCppRows(model, 3, context_tokens=12, max_m=4, drafter=True)
    contexts = [[5, 6, 7, 8], [9, 10, 11, 12, 13, 14]]
    rows.prefill(contexts)
    lib, mem = rows._lib, rows._memory
    for m, outputs in ((4, 4), (1, 1), (3, 0)):
        assert rows.timed_pass(m, random.Random(m), outputs) > 0
        ends = [lib.llama_memory_seq_pos_max(mem, s) for s in range(3)]
        assert ends == [len(contexts[s % 2]) + m - 1 for s in range(3)]
    out = time_batched([rows], contexts, 2, rounds=2, warmup=0)
    assert np.all(np.array(out.passes["tiny"][3].seconds) > 0)
    assert np.all(np.array(out.reevaluate["tiny"][3].seconds) > 0)
    rows.close()


def test_measure_batch_costs_of_a_family_with_a_proposer(tiny_models, tiny_prompts, tiny_tokenizer):
    from realrun.batched import measure_batch_costs
    from realrun.bigram import BigramTable
    from realrun.maxgram import MaxGram
    from realrun.tiny import PROMPT_TEXTS

    chain = [
        HFTokenModel(tiny_models["target"].model, "target"),
        HFTokenModel(tiny_models["draft"].model, "draft"),
        MaxGram(BigramTable.from_corpus(PROMPT_TEXTS, tiny_tokenizer)),
    ]
    costs, timed = measure_batch_costs(
        chain, tiny_prompts[:2], [2, 1, 2], max_m=3, unit_seconds=0.01, rounds=1
    )
    assert list(costs.curves) == [1, 2] and costs.n_models == 3
    assert set(timed.passes) == {"target", "draft"} and set(timed.passes["draft"]) == {1, 2}
    assert costs.at(0, 2, 3) == pytest.approx(timed.passes["target"][2].dense()[2] / 0.01)
    assert costs.reevaluate is None  # transformers: no one-row pass
    assert costs.at(2, 2, 1) == 0.0
    with pytest.raises(ValueError, match="batch size"):
        measure_batch_costs(chain, tiny_prompts[:1], [0], max_m=2, unit_seconds=0.01)
