"""Test-suite settings: hypothesis runs derandomized (fixed seeds) with no deadline,
so CI results are reproducible on a noisy 2-core machine."""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "csd",
    derandomize=True,
    deadline=None,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("csd")
