"""Helpers every part of ewif may use: argument checks, work limits, arithmetic, text tables.

Imports nothing of ewif outside ``ewif.base``."""
