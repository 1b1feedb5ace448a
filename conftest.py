"""Shared test configuration (tests and doctests in src): Hypothesis profiles.

CI sets `CI`; its profile is derandomized and has no deadline, so shared, noisy machines cannot
make a property test flake.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile("dev", deadline=None, max_examples=60)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

# The typing snippets are checked by mypy in tests/test_typing.py; some are wrong on purpose,
# so they must not be imported by pytest's doctest collection.
collect_ignore_glob = ["tests/typing_cases/*"]
