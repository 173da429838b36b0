"""Figures of the analytic layer (matplotlib imported lazily, Agg canvas, greyscale-readable)."""
