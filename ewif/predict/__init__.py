"""Predictions beyond one cascade's EWIF: batch-aware serving throughput and prediction
intervals by the bootstrap over measuring prompts."""
