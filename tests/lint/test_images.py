"""TK201 on generated image datasets: silent on constant borders, finds a frozen channel."""

from __future__ import annotations

import numpy as np
import pytest

from tests.lint.images import image_set, rates, tk201
from tests.lint.measure import PUBLISHED_SEED

SETS = 6  # make test; benchmarks/bench_lint_corpus.py measures more


@pytest.mark.slow
def test_no_false_alarm_on_image_sets_and_every_frozen_channel_found() -> None:
    assert rates(range(PUBLISHED_SEED, PUBLISHED_SEED + SETS)) == (SETS, 0, SETS)


def test_most_clean_image_sets_have_pixels_that_never_change() -> None:
    """What judging pixel by pixel reported: the sets are a test of TK201 on images."""
    constant = 0
    for seed in range(PUBLISHED_SEED, PUBLISHED_SEED + SETS):
        frames = np.concatenate([r.obses.reshape(-1, *r.obses.shape[2:]) for r in image_set(seed)])
        assert len(frames) >= 10_000
        constant += bool((frames.min(axis=0) == frames.max(axis=0)).any())
    assert constant >= SETS // 2


def test_the_frozen_channel_is_the_finding() -> None:
    [found] = tk201(image_set(PUBLISHED_SEED, frozen=True))
    assert found.code == "TK201"
    assert found.message.startswith("1 of ")
    assert "channel(s) of obses (an image, " in found.message
