"""What the Minari import tests share: a one-episode dataset made with Minari's API, edited."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

pytest.importorskip("minari")

import gymnasium.spaces as spaces
import minari
from minari.data_collector import EpisodeBuffer

STEPS = 8


def make(
    dataset_id: str = "test/made-v0",
    *,
    space: Any = None,
    observations: Any = None,
    terminated: bool = True,
    truncated: bool = False,
) -> Any:
    """A one-episode dataset of `STEPS` steps, made with Minari's API."""
    space = space or spaces.Box(-10, 10, (3,), np.float32)
    if observations is None:
        observations = np.arange((STEPS + 1) * 3, dtype=np.float32).reshape(STEPS + 1, 3) / 10
    terminations = np.zeros(STEPS, bool)
    truncations = np.zeros(STEPS, bool)
    terminations[-1], truncations[-1] = terminated, truncated
    episode = EpisodeBuffer(
        id=0,
        observations=observations,
        actions=np.arange(STEPS, dtype=np.int64) % 2,
        rewards=np.linspace(0, 1, STEPS),
        terminations=terminations,
        truncations=truncations,
        infos={},
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return minari.create_dataset_from_buffers(
            dataset_id,
            [episode],
            observation_space=space,
            action_space=spaces.Discrete(2),
            data_format="arrow",
        )


def edited(dataset: Any, monkeypatch: pytest.MonkeyPatch, **fields: Any) -> Any:
    """`dataset`, whose storage hands back episodes with `fields` replaced."""
    storage = dataset.storage
    get = storage.get_episodes

    def edited(indices: Any) -> Any:
        for episode in get(indices):
            yield {**episode, **fields}

    monkeypatch.setattr(storage, "get_episodes", edited)
    return dataset
