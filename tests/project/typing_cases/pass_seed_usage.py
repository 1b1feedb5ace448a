"""Code written as a seed user would: must type-check under mypy --strict."""

from __future__ import annotations

from itertools import islice
from typing import Any

import numpy as np
from numpy.typing import NDArray
from typing_extensions import assert_type

import trajkit
from trajkit.testing import example_rollout


def train_step(r: trajkit.Rollout, scale: float) -> float:
    assert_type(r.num_steps, int)
    assert_type(r.batch_size, int)
    assert_type(r.advantages(0.99, 0.95), NDArray[np.float32])
    assert_type(r.value_predictions(), NDArray[np.float32])
    assert_type(r.log_probs(), NDArray[np.float32])
    assert_type(r.logits(), NDArray[np.float32])
    # int32 for integer (Discrete, MultiDiscrete, MultiBinary) actions, float32 for Box ones.
    assert_type(r.actions(), NDArray[np.int32] | NDArray[np.float32])
    targets = r.advantages(0.99, 0.95) + r.value_predictions()[:-1]
    r2 = r.copy()
    r2.rews = r2.rews * scale
    r2.rews[0] -= 0.5
    for batch in r.batches(32, 4, seed=0):
        assert_type(batch, list[tuple[int, int]])
        gathered = np.array([targets[t, b] for t, b in batch])
        del gathered
    first: tuple[int, int] = next(r.entries(seed=np.random.default_rng(1)))
    del first
    for t, b in islice(r.entries(), 3):
        _ = r.model_outs[t]["critic"][b]
    for mb in r.minibatches(64, gamma=0.99, lam=0.95, epochs=2, seed=3):
        # Any: nested observations come out as dicts/tuples of arrays.
        assert_type(mb, dict[str, Any])
    return float(targets.mean())


train_step(example_rollout(), 0.5)
