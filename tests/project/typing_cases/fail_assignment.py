"""Assignments and `replace` calls that type checkers must reject."""

import numpy as np

import trajkit
from trajkit.testing import example_rollout

r = example_rollout()
r.infos = 3  # expect-error: assignment
r.model_outs = "actions"  # expect-error: assignment
r.truncated = {"a": 1}  # expect-error: assignment
r.replace(reward=np.ones(3))  # expect-error: call-arg
r.replace(infos=[1, 2])  # expect-error: list-item
fields: trajkit.RolloutFields = {"rewards": np.ones(3)}  # expect-error: typeddict-unknown-key
