"""TK111: rewards that look clipped, a note (a reward that saturates by itself looks the same)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.lint.helpers import Array, codes, dones_for, rollout
from trajkit.lint.rewards import MIN_CLIPPED, MIN_INSIDE

RAW = {"id": "r", "index": 0, "num_envs": 1, "autoreset_mode": "NEXT_STEP", "wrappers": []}


def _clipped(at: int, inside: int, total: int = 40) -> Array:
    """`at` rewards at -1, `inside` distinct magnitudes in (0, 1), the rest 0.5 (one more)."""
    rews = np.full(total, 0.5)
    rews[:at] = -1.0
    rews[at : at + inside] = -np.linspace(0.1, 0.4, inside)
    return rews


def test_tk111_is_a_note_where_the_recording_says_the_rewards_are_raw() -> None:
    r = rollout(dones_for([30], 30), rews=np.clip(-np.linspace(0.0, 8.0, 30), -1.0, 1.0))
    [found] = codes(r, "TK111", recording=RAW)
    assert (found.severity, found.env, found.step) == ("note", 0, 4)
    assert found.message.startswith("26 rewards are exactly -1 or 1, the largest magnitude")
    assert codes(r, "TK111") == []  # no recording: nothing says the rewards are raw
    assert codes(r, "TK111", recording={**RAW, "wrappers": ["NormalizeReward"]}) == []
    assert codes(r, "TK111", recording={**RAW, "unrecorded_kwargs": ["wrappers"]}) == []


@pytest.mark.parametrize(
    ("at", "inside", "total", "hit"),
    [
        (MIN_CLIPPED - 1, 5, 20, False),
        (MIN_CLIPPED, 5, 20, True),
        (4, MIN_INSIDE - 1, 20, False),  # one magnitude fewer: inside counts 0.5 too
        (4, MIN_INSIDE, 20, True),
        (4, 5, 41, False),  # 4 of 41 is under a tenth
        (4, 5, 40, True),
    ],
)
def test_tk111_thresholds(at: int, inside: int, total: int, hit: bool) -> None:
    rews = _clipped(at, inside - 1, total)  # the rest, 0.5, is one more magnitude inside
    r = rollout(dones_for([total], total), rews=rews)
    assert bool(codes(r, "TK111", recording=RAW)) is hit


def test_tk111_a_clip_below_1_and_zero_rewards_inside() -> None:
    raw = -np.linspace(0.0, 3.0, 30)
    half = rollout(dones_for([30], 30), rews=np.clip(raw, -0.5, 0.5))
    [found] = codes(half, "TK111", recording=RAW)
    assert (found.code, found.path) == ("TK111", "r0.npz")
    assert found.message == (
        "25 rewards are exactly -0.5 or 0.5, the largest magnitude, while 4 other magnitudes "
        "lie between 0 and 0.5: clipped, although the recording names no reward wrapper, or a "
        "reward that saturates by itself (replay tells)"
    )
    zeros = np.array([-1.0] * 4 + [0.0] * 10 + [-0.2, -0.4] * 3)  # 2 magnitudes inside, and 0
    assert codes(rollout(dones_for([20], 20), rews=zeros), "TK111", recording=RAW) == []
