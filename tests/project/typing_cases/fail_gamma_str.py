"""Misuse that mypy --strict must reject."""

from trajkit.testing import example_rollout

r = example_rollout()
r.advantages("0.99", 0.95)  # expect-error: arg-type
r.batches(32.0, 4)  # expect-error: arg-type
