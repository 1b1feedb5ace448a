"""Shared test configuration (tests and doctests in src): Hypothesis profiles, test order.

CI sets `CI`; its profile is derandomized and has no deadline, so shared, noisy machines cannot
make a property test flake.

`pytest --reverse-order` runs the tests in the reverse of their usual order (`make pytest`
does, so CI checks that no test passes only because another ran before it; a run in the usual
order is what everyone gets locally). Deterministic: an order problem fails every run, not one
in a hundred.
"""

from __future__ import annotations

import os

import pytest
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

# The typing snippets are checked by mypy in tests/project/test_typing.py; some are wrong on
# purpose, so they must not be imported by pytest's doctest collection.
collect_ignore_glob = ["tests/project/typing_cases/*"]


def pytest_addoption(parser: pytest.Parser) -> None:
    """`--reverse-order`."""
    parser.addoption(
        "--reverse-order",
        action="store_true",
        help="run the tests in the reverse of their usual order (checks order independence)",
    )


@pytest.hookimpl(trylast=True)  # after pytest has grouped the tests by their fixtures
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Reverse the tests' order under `--reverse-order`."""
    if config.getoption("--reverse-order"):
        items.reverse()


@pytest.fixture(autouse=True)
def _cores_free() -> None:
    """Every core looks free to the engine, which then starts its workers on a busy machine too.

    tests/io/test_engine_load.py tests the engine under load. (Set before each test, not
    through `monkeypatch`, so that a test's own `monkeypatch` is still undone before its
    other fixtures end.)
    """
    from trajkit._io import engine

    engine.LOADAVG = os.devnull
