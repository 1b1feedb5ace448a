"""What the GAE tests share: slow reference loops, Hypothesis cases, golden values by hand."""

from __future__ import annotations

from dataclasses import dataclass

import hypothesis.extra.numpy as hnp
import numpy as np
from hypothesis import strategies as st

from trajkit._base.types import Float32Array, Float64Array
from trajkit._core.gae import gae


def reference_gae64(
    rewards: Float32Array,
    values: Float32Array,
    dones: Float32Array,
    gamma: float,
    lam: float,
    truncated: Float32Array | None = None,
    final_values: Float32Array | None = None,
) -> Float64Array:
    """The slow reverse loop of the spec, in float64."""
    r = rewards.astype(np.float64)
    v = values.astype(np.float64)
    d = dones.astype(np.float64)
    n_steps, n_envs = r.shape
    result = np.zeros((n_steps, n_envs), dtype=np.float64)
    current = np.zeros(n_envs, dtype=np.float64)
    for t in range(n_steps - 1, -1, -1):
        delta = r[t] - v[t] + (1.0 - d[t + 1]) * gamma * v[t + 1]
        if truncated is not None and final_values is not None:
            delta += gamma * np.where(truncated[t] != 0, final_values[t].astype(np.float64), 0.0)
        current = current * (gamma * lam) + delta
        result[t] = current
        current = current * (1.0 - d[t])
    return result


def reference_gae32(
    rewards: Float32Array,
    values: Float32Array,
    dones: Float32Array,
    gamma: float,
    lam: float,
) -> Float32Array:
    """The seed `Rollout`'s loop, verbatim, in float32."""
    n_steps, n_envs = rewards.shape
    result = np.zeros([n_steps, n_envs], dtype=np.float32)
    current = np.zeros([n_envs], dtype=np.float32)
    for t in range(n_steps - 1, -1, -1):
        delta = rewards[t] - values[t]
        delta += (1 - dones[t + 1]) * gamma * values[t + 1]
        current *= gamma * lam
        current += delta
        result[t] = current
        current *= 1 - dones[t]
    return result


MAX_T = 40
MAX_B = 5
unit_floats = st.sampled_from([0.0, 1.0]) | st.floats(0.0, 1.0)
elements = st.floats(-10.0, 10.0, width=32)
binary = st.sampled_from([0.0, 1.0])


@dataclass(frozen=True)
class Case:
    rewards: Float32Array
    values: Float32Array
    dones: Float32Array
    gamma: float
    lam: float
    truncated: Float32Array | None = None
    final_values: Float32Array | None = None

    @property
    def scale(self) -> float:
        """An upper bound on every |A_t| (the sum over time of bounds on |delta_t|)."""
        r = np.abs(self.rewards.astype(np.float64)).sum(axis=0)
        v = np.abs(self.values.astype(np.float64)).sum(axis=0)
        fv = 0.0 if self.final_values is None else float(np.nansum(np.abs(self.final_values)))
        return 1.0 + float((r + 2.0 * v).max(initial=0.0)) + fv


@st.composite
def cases(
    draw: st.DrawFn,
    min_t: int = 0,
    max_t: int = MAX_T,
    with_truncation: bool = False,
) -> Case:
    n_steps = draw(st.integers(min_t, max_t))
    n_envs = draw(st.integers(1, MAX_B))
    rewards = draw(hnp.arrays(np.float32, (n_steps, n_envs), elements=elements))
    values = draw(hnp.arrays(np.float32, (n_steps + 1, n_envs), elements=elements))
    dones = draw(hnp.arrays(np.float32, (n_steps + 1, n_envs), elements=binary))
    truncated = final_values = None
    if with_truncation:
        flags = draw(hnp.arrays(np.float32, (n_steps, n_envs), elements=binary))
        truncated = (flags * dones[1:]).astype(np.float32)
        drawn = draw(hnp.arrays(np.float32, (n_steps, n_envs), elements=elements))
        # NaN where not truncated: final_values must only be read where truncated is set
        final_values = np.where(truncated != 0, drawn, np.float32(np.nan)).astype(np.float32)
    return Case(
        rewards, values, dones, draw(unit_floats), draw(unit_floats), truncated, final_values
    )


def run(case: Case, backend: str) -> Float32Array:
    """`gae` of the case with this backend."""
    return gae(
        case.rewards,
        case.values,
        case.dones,
        case.gamma,
        case.lam,
        truncated=case.truncated,
        final_values=case.final_values,
        backend=backend,  # type: ignore[arg-type]
    )


# T = 3, B = 2, gamma = lam = 0.5 (so gamma * lam = 0.25).
# env 0: step 1 terminates its episode (dones[2] = 1), so the recursion is cut there and step 1
#        is not bootstrapped.
#   delta_2 = 3 + 0.5*4 - 2 = 3           A_2 = 3
#   delta_1 = 2 + 0 - 0     = 2           A_1 = 2 + 0.25*0*A_2 = 2
#   delta_0 = 1 + 0.5*0 - 1 = 0           A_0 = 0 + 0.25*1*A_1 = 0.5
# env 1: step 0 is truncated by a time limit (dones[1] = 1, truncated[0] = 1) with final value 6;
#        values[1] = 8 is the reset observation's value and must not be used by step 0.
#   delta_2 = 1 + 0.5*2 - 2 = 0           A_2 = 0
#   delta_1 = 1 + 0.5*2 - 8 = -6          A_1 = -6
#   delta_0 = 1 + 0 + 0.5*6 - 2 = 2       A_0 = 2        (terminated instead: 1 - 2 = -1)
GOLDEN_REWARDS = np.array([[1.0, 1.0], [2.0, 1.0], [3.0, 1.0]], dtype=np.float32)
GOLDEN_VALUES = np.array([[1.0, 2.0], [0.0, 8.0], [2.0, 2.0], [4.0, 2.0]], dtype=np.float32)
GOLDEN_DONES = np.array([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 0.0]], dtype=np.float32)
GOLDEN_TRUNCATED = np.array([[0.0, 1.0], [0.0, 0.0], [0.0, 0.0]], dtype=np.float32)
GOLDEN_FINAL_VALUES = np.array([[np.nan, 6.0], [np.nan, np.nan], [np.nan, np.nan]], np.float32)
GOLDEN_ADVANTAGES = np.array([[0.5, 2.0], [2.0, -6.0], [3.0, 0.0]], dtype=np.float32)
GOLDEN_TERMINATED = np.array([[0.5, -1.0], [2.0, -6.0], [3.0, 0.0]], dtype=np.float32)
GOLDEN_RETURNS = np.array([[1.5, 4.0], [2.0, 2.0], [5.0, 2.0]], dtype=np.float32)
