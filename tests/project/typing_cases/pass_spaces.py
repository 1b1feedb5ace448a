"""Nested observations and actions of every space, as a strict user writes them."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from typing_extensions import assert_type

import trajkit
from trajkit.testing import ActionKind, example_rollout


def policy_inputs(r: trajkit.Rollout) -> NDArray[np.float32]:
    kind: ActionKind = "box"
    r2 = example_rollout(nested=True, action_kind=kind, action_shape=(3,))
    image = r2.obses["image"]  # nested fields are dicts/tuples at runtime, typed Any
    assert_type(r2.actions(), NDArray[np.int32] | NDArray[np.float32])
    for mb in r.minibatches(8, gamma=0.99, lam=0.95, seed=0):
        assert_type(mb, dict[str, Any])
    spec = trajkit.RolloutSpec.from_rollout(r2)
    for path, leaf in spec.leaves("obses"):
        assert_type(path, tuple[str | int, ...])
        assert_type(leaf, trajkit.OutputSpec)
    return np.asarray(image, dtype=np.float32)


policy_inputs(example_rollout())
