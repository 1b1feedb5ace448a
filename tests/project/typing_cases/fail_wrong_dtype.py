"""Misuse that mypy --strict must reject: the return types are precise."""

import numpy as np
from numpy.typing import NDArray

from trajkit.testing import example_rollout

r = example_rollout()
actions: NDArray[np.float32] = r.actions()  # expect-error: assignment
batch: list[tuple[str, str]] = next(r.batches(4, 1))  # expect-error: arg-type
r.num_steps = 3  # expect-error: misc
