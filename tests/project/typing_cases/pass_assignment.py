"""Assignments and `replace` as the docs show them: must type-check under mypy and pyright."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from typing_extensions import assert_type

import trajkit
from trajkit.testing import example_rollout

r = example_rollout(num_steps=4, num_envs=2)
T, B = r.num_steps, r.batch_size

# Whole fields accept what the constructor accepts, and read back as the validated type.
r.rews = np.ones((T, B))  # float64 in, float32 stored
r.rews = [[0.0] * B] * T
assert_type(r.rews, NDArray[np.float32])
r.dones = np.zeros((T + 1, B), bool)
r.infos = None  # empty dicts
r.infos = [[{"lives": 3}] * B] * T
assert_type(r.infos, list[list[dict[str, Any]]])
r.model_outs = {"critic": np.zeros((T + 1, B)), "actions": np.zeros((T + 1, B), int)}
r.model_outs = [{"critic": np.zeros(B)}] * (T + 1)
r.model_outs = []  # obs-tower2's run_for_rollout idiom: then append T+1 steps
assert_type(r.model_outs, trajkit.ModelOutputs)
r.obses = {"image": np.zeros((T + 1, B, 2, 2), np.uint8), "pos": np.zeros((T + 1, B, 3))}
r.truncated = None
r.final_values = None

# `replace` is checked key by key.
r2 = r.replace(rews=np.zeros((T, B)), infos=None)
assert_type(r2, trajkit.Rollout)
fields: trajkit.RolloutFields = {"dones": np.zeros((T + 1, B))}
r3 = r.replace(**fields)
