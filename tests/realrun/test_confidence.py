"""realrun.confidence: the drafter's top probability along the target's text."""

from __future__ import annotations

import numpy as np

from realrun.confidence import draft_confidence


def test_draft_confidence_is_the_drafters_top_probability_on_the_text(tiny_models):
    from realrun.hf_model import HFTokenModel

    drafter = HFTokenModel(tiny_models["draft"].model, "draft")
    prompt, continuation = [1, 5, 6, 7], [8, 9, 10]
    (q,) = draft_confidence(drafter, [(prompt, continuation)])
    z = np.asarray(drafter.logits(prompt + continuation, 4)[:3], dtype=np.float64)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    # Two float32 passes over different row counts may sum in a different order (an Intel
    # Xeon's kernels do: 6e-7 apart), so the tolerance is float32's, not float64's.
    np.testing.assert_allclose(q, (p / p.sum(axis=1, keepdims=True)).max(axis=1), rtol=1e-5)
    assert draft_confidence(drafter, [(prompt, [])])[0].size == 0
