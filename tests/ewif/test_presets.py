"""Embedded presets: loadable, sourced, and honest about assumptions."""

from __future__ import annotations

import pytest

from ewif.files import presets


@pytest.mark.parametrize("name", presets.names())
def test_every_preset_loads_with_sources(name):
    ms = presets.load_preset(name)
    assert ms.metadata["source"] and ms.metadata["citation"] and ms.metadata["name"] == name
    assert ms.cost[0] == 1.0


def test_required_presets_and_their_values():
    assert {"flan-t5-ms", "t5-cnndm-ms", "t5-ende-ms"} <= set(presets.names())
    flan = presets.load_preset("flan-t5-ms")
    assert "ASSUMPTIONS" in flan.metadata["assumptions"]
    assert flan.cost.tolist() == [1.0, 250 / 11000, 77 / 11000, 0.0]
    assert flan.leniences == (1.0, 3.0, 5.0)
    cnn = presets.load_preset("t5-cnndm-ms")
    assert cnn.alpha[1.0][0, 1:].tolist() == [0.74, 0.73, 0.65]
    ende = presets.load_preset("t5-ende-ms")
    assert ende.alpha[1.0][0, 1:].tolist() == [0.82, 0.80, 0.75]
    assert "Leviathan" in cnn.metadata["citation"]
    assert flan.to_cascade().ewif() > 1


def test_unknown_preset():
    with pytest.raises(ValueError, match="unknown preset 'nope'; choose from"):
        presets.load_preset("nope")
