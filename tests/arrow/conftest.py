"""Fixtures of the `trajkit.arrow` tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module", params=["read ahead", "read in turn"])
def read_ahead(request: pytest.FixtureRequest) -> Iterator[str]:
    """A module's tests twice: rollouts' plain pages read by a thread while their plans are
    made (`Prefetch`, for every rollout), then as each rollout is built (for none)."""
    import trajkit.arrow._import as reader

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reader, "PREFETCH_BYTES", 0 if request.param == "read ahead" else 1 << 62)
        yield request.param
