"""Places in one rollout, and the digests of its rows: the vocabulary the data checks share.

Row t holds `obses[t]`, `dones[t]` and the model outputs the policy computed from `obses[t]`;
step t is the move from row t to row t+1, with `rews[t]` and `truncated[t]`. Step t *ends*
an episode when `dones[t+1] = 1`. An episode *starts* at a row with `dones = 1`; its
*length* is its number of steps. A *place* is an (step or row, env) pair; a check reports
at the first place where it applies, by time then env, and counts the others.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from trajkit._base.types import BoolArray
from trajkit._core import tree as _tree
from trajkit._models.rollout import Rollout

__all__ = ["changes_observations", "count_places", "first_place", "float_leaves", "row_digest"]


def first_place(mask: BoolArray) -> tuple[int, int]:
    """(t, b) of the first True of a `[T, B]` mask, by time then env.

    Examples:
        >>> import numpy as np
        >>> first_place(np.array([[False, False], [False, True], [True, True]]))
        (1, 1)
    """
    t, b = np.argwhere(mask)[0]
    return int(t), int(b)


def count_places(mask: BoolArray, unit: str = "step") -> str:
    """`3 steps in 2 envs` for a `[T, B]` mask.

    Examples:
        >>> import numpy as np
        >>> count_places(np.array([[True, False], [True, True]]), "row")
        '3 rows in 2 envs'
    """
    n, envs = int(mask.sum()), int(mask.any(axis=0).sum())
    return f"{n} {unit}{'s' * (n != 1)} in {envs} env{'s' * (envs != 1)}"


def float_leaves(rollout: Rollout) -> bool:
    """Whether any leaf of `obses` holds floats (a continuous observation).

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> float_leaves(example_rollout())
        True
    """
    return any(leaf.dtype.kind == "f" for _, leaf in _tree.flatten(rollout.obses))


def row_digest(rollout: Rollout, row: int, env: int | None = None) -> str:
    """A hash of the observation of `row` (of one env, or of every env with their `dones`).

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=2, num_envs=1)
        >>> row_digest(r, 0, 0) == row_digest(r.copy(), 0, 0)
        True
    """
    digest = hashlib.blake2b(digest_size=16)
    for _, leaf in _tree.flatten(rollout.obses):
        value = leaf[row] if env is None else leaf[row, env]
        digest.update(np.ascontiguousarray(value).view(np.uint8).reshape(-1).data)
    if env is None:
        digest.update(np.ascontiguousarray(rollout.dones[row], dtype=np.float64).data)
    return digest.hexdigest()


def changes_observations(recording: Mapping[str, Any]) -> bool:
    """Whether a recording names a vector wrapper that changes observations.

    A normaliser (`NormalizeObservation`) changes every observation as its running
    statistics move: observations equal before it stay equal, and move together.

    Examples:
        >>> changes_observations({"wrappers": ["NormalizeObservation"]})
        True
        >>> changes_observations({"wrappers": ["RecordEpisodeStatistics"]})
        False
    """
    return any("Observation" in str(w) for w in recording.get("wrappers") or ())
