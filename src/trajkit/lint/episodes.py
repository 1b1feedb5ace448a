"""Episodes and places in one rollout: the vocabulary every data check shares.

Row t holds `obses[t]`, `dones[t]` and the model outputs the policy computed from `obses[t]`;
step t is the move from row t to row t+1, with `rews[t]` and `truncated[t]`. Step t *ends*
an episode when `dones[t+1] = 1`. An episode *starts* at a row with `dones = 1`; its
*length* is its number of steps. A *place* is an (step or row, env) pair; a check reports
at the first place where it applies, by time then env, and counts the others.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from trajkit._base.types import BoolArray
from trajkit._core import tree as _tree
from trajkit._models.rollout import Rollout

__all__ = ["Episode", "count_places", "episodes", "first_place", "float_leaves", "row_digest"]


@dataclass(frozen=True)
class Episode:
    """An episode whose start is inside the rollout.

    Attributes:
        env: Its column b.
        start: The row where it starts (`dones[start, env] = 1`).
        end: The step that ends it, or `None` when it runs past the last step.
        truncated: Whether that end is flagged as a truncation.

    Examples:
        >>> Episode(0, 2, 5, False).length
        4
    """

    env: int
    start: int
    end: int | None
    truncated: bool

    @property
    def length(self) -> int | None:
        """Its number of steps (`end - start + 1`), or `None` when it is not complete.

        Examples:
            >>> Episode(1, 0, None, False).length is None
            True
        """
        return None if self.end is None else self.end - self.start + 1


def episodes(rollout: Rollout) -> Iterator[Episode]:
    """The episodes that start inside `rollout`, env by env, in time order.

    Examples:
        >>> import numpy as np
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=4, num_envs=1)
        >>> r = r.replace(dones=np.array([[1], [0], [1], [0], [0]]))
        >>> [(e.start, e.end) for e in episodes(r)]
        [(0, 1), (2, None)]
    """
    T = rollout.num_steps
    ends = rollout.dones[1:] == 1
    trunc = rollout.truncated
    for b in range(rollout.batch_size):
        end_steps = np.flatnonzero(ends[:, b])
        for start in np.flatnonzero(rollout.dones[:T, b] == 1).tolist():
            i = int(np.searchsorted(end_steps, start))
            end = int(end_steps[i]) if i < len(end_steps) else None
            flagged = end is not None and trunc is not None and bool(trunc[end, b] == 1)
            yield Episode(b, start, end, flagged)


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
