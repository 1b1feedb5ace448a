"""What the recorder tests share: a deterministic action per observation, CartPole split in two."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("gymnasium")

import gymnasium as gym

from trajkit._base.types import AnyArray


def choose(obs: AnyArray) -> AnyArray:
    """A deterministic, pseudo-random action per observation (a hash of its digits)."""
    actions: AnyArray = np.floor(np.abs(obs).sum(axis=1) * 1e4).astype(np.int64) % 2
    return actions


def split(obs: AnyArray) -> dict[str, AnyArray]:
    return {"position": obs[:2], "velocity": obs[2:]}


DICT_SPACE = gym.spaces.Dict(
    {
        "position": gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
        "velocity": gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
    }
)
