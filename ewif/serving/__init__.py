"""Configurations out to the serving engines people run, priced exactly (``csd recommend --emit``).

:mod:`ewif.serving.engines` holds each engine's option names, read from the engine's own
source and cited there; :mod:`ewif.serving.emit` chooses the best plain-drafting method an
engine can express (engines run one drafter per step, not cascades) and renders it.
"""
