"""One type for a chosen configuration (ewif.base.configuration): a model set's cascade
section, the optimizer's rows and realrun's methods carry it, ModelSet.to_cascade takes it."""

from __future__ import annotations

import numpy as np
import pytest

import ewif
from ewif.base.configuration import Configuration, EvaluatedConfiguration
from ewif.files.presets import load_preset
from ewif.search.optimizer import optimize


def test_a_configuration_is_what_to_run_and_equal_by_value():
    a = Configuration(["t", "d"], [[3]], 2.0)
    assert a.models == ("t", "d") and a.K.tolist() == [[3]] and a.lenience == 2.0
    assert a == Configuration(("t", "d"), np.array([[3]]), 2.0)
    assert a != Configuration(("t", "d"), np.array([[4]]), 2.0)
    assert a != Configuration(("t", "d"), np.array([[3]]))
    assert a.describe() == "t > d  K=[[3]]  l=2"
    assert ewif.Configuration is Configuration
    with pytest.raises(TypeError):
        hash(a)


def test_the_optimizers_rows_are_evaluated_configurations():
    ms = load_preset("flan-t5-ms")
    res = optimize(ms, candidates=ms.models[:2], bounds=(1, 6), subsets=False, top=3)
    best = res.best
    assert isinstance(best, EvaluatedConfiguration) and isinstance(best, Configuration)
    assert ms.to_cascade(best).ewif() == best.ewif
    assert res.cascade().ewif() == best.ewif
    plain = Configuration(best.models, best.K, best.lenience)
    assert plain != best  # an evaluated configuration carries its EWIF too
    assert ms.to_cascade(plain).ewif() == best.ewif


def test_a_model_sets_cascade_section_is_a_configuration():
    ms = load_preset("flan-t5-ms")
    assert isinstance(ms.cascade, Configuration)
    assert ms.to_cascade().ewif() == ms.to_cascade(ms.cascade).ewif()
    with pytest.raises(TypeError, match="not both"):
        ms.to_cascade(ms.cascade, K=[[1]])
