"""Token-level cascade speculative drafting, shared by synthetic and real models.

One implementation of Algorithm 1 over next-token distributions, written against the
small model interface in :mod:`simulate.decoder.interface`. ``simulate`` runs it on
seeded synthetic language models to check losslessness; ``realrun`` runs the very same
code on Hugging Face models.
"""

from simulate.decoder.cascade import CascadeDecoder, CascadeStats, GenerationResult
from simulate.decoder.interface import Proposer, TokenModel
from simulate.decoder.sampling import Decoding

__all__ = [
    "CascadeDecoder",
    "CascadeStats",
    "Decoding",
    "GenerationResult",
    "Proposer",
    "TokenModel",
]
