"""Slow reference implementations, written from the spec, that trajkit is tested against.

They follow the obs-tower2 seed's semantics element by element, with plain Python loops.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from trajkit import Rollout

F32 = NDArray[np.float32]


def as_seed_model_outs(r: Rollout) -> list[dict[str, NDArray[Any]]]:
    """The seed's representation: a list of T+1 dicts of per-step arrays (copies)."""
    return [{k: np.array(v) for k, v in step.items()} for step in r.model_outs]


def stack_key(model_outs: Sequence[Mapping[str, Any]], key: str, dtype: Any) -> NDArray[Any]:
    """The seed's accessor: rebuild the [T+1, B, ...] array one timestep at a time."""
    return np.array([m[key] for m in model_outs], dtype=dtype)


def gae_loop(
    rews: F32,
    values: F32,
    dones: F32,
    gamma: float,
    lam: float,
    truncated: F32 | None = None,
    final_values: F32 | None = None,
) -> NDArray[np.float64]:
    """GAE with one scalar at a time, in float64."""
    T, B = rews.shape
    out = np.zeros((T, B), np.float64)
    for b in range(B):
        running = 0.0
        for t in reversed(range(T)):
            nonterminal = 1.0 - float(dones[t + 1, b])
            delta = float(rews[t, b]) + gamma * nonterminal * float(values[t + 1, b])
            if truncated is not None and final_values is not None and truncated[t, b]:
                delta += gamma * float(final_values[t, b])
            delta -= float(values[t, b])
            running = delta + gamma * lam * nonterminal * running
            out[t, b] = running
    return out


def seed_entries(num_steps: int, num_envs: int, rng: random.Random) -> Iterator[tuple[int, int]]:
    """The seed's entries(), with an explicit Random instead of global state."""
    entries = [(t, b) for t in range(num_steps) for b in range(num_envs)]
    while True:
        rng.shuffle(entries)
        yield from entries
