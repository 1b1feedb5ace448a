"""What the recorder tests share: the environments a test makes, closed after it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def envs() -> Iterator[list[Any]]:
    """A list the test appends each environment it makes to; each is closed after the test."""
    made: list[Any] = []
    yield made
    for env in made:
        env.close()
