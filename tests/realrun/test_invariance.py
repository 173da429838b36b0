"""realrun.invariance: the dtype's rounding step and the two eligibility rules."""

from __future__ import annotations

import pytest

from realrun.invariance import NEAR_TIE_STEPS, Disagreement, Invariance, rounding_step


def test_rounding_step_of_each_dtype():
    assert rounding_step("bfloat16", 20.0) == 0.125  # 2**4 · 2**-7
    assert rounding_step("float16", 20.0) == 2.0**-6
    assert rounding_step("float32", -20.0) == 2.0**-19
    assert rounding_step("torch.float16", 1.0) == 2.0**-10
    assert rounding_step("gguf:Q4_K - Medium", 20.0) == rounding_step("bfloat16", 20.0)
    assert rounding_step("bfloat16", 0.0) > 0
    with pytest.raises(ValueError, match="dtype must be one of"):
        rounding_step("int8", 1.0)


def test_strict_needs_agreement_near_ties_forgives_only_near_ties():
    tie = Disagreement(0.125, 20.0)  # one bfloat16 step
    far = Disagreement(0.125 * (NEAR_TIE_STEPS + 1), 20.0)
    one_tie = Invariance(4, 48, 47, 0.125, (tie,))
    assert not one_tie.eligible("strict", 0.99, "bfloat16")
    assert one_tie.eligible("near-ties", 0.99, "bfloat16")
    # the same gap is eight float16 steps: no near-tie in float16
    assert not one_tie.eligible("near-ties", 0.99, "float16")
    far_one = Invariance(4, 48, 47, far.gap, (far,))
    assert not far_one.eligible("near-ties", 0.99, "bfloat16")
    assert Invariance(4, 48, 48, None).eligible("strict", 0.99, "float32")
    assert Invariance(4, 0, 0, None).eligible("strict", 0.99, "float32")
    with pytest.raises(ValueError, match="rule must be one of strict, near-ties"):
        one_tie.eligible("loose", 0.99, "bfloat16")
    assert one_tie.describe("bfloat16") == (
        "47/48 agree; 1 disagreement at logit gap 0.125 (1 bfloat16 step)"
    )
    assert one_tie.to_dict()["disagreements"] == [{"gap": 0.125, "top_logit": 20.0}]
