"""`Dataset.minibatches`' shuffle buffer: rows of a few files at a time, on the minibatch engine."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

from trajkit._base.types import AnyArray, ArrayTree
from trajkit._core import minibatch as _mb
from trajkit._core import tree as _tree
from trajkit._models.rollout import (
    AdvantageNormalization,
    Rollout,
    normalized_minibatch,
    ppo_arrays,
)


def buffered_minibatches(
    load: Callable[[str], Rollout],
    files: Sequence[str],
    size: int,
    gamma: float,
    lam: float,
    epochs: int,
    per_buffer: int,
    drop_last: bool,
    rng: np.random.Generator,
    normalize: AdvantageNormalization,
    per_minibatch: bool,
) -> Iterator[dict[str, ArrayTree]]:
    """The shuffle-buffer scheme of `Dataset.minibatches` (arguments checked there).

    `load` reads one of `files` and checks it against the dataset's spec.
    """
    rebuild = _tree.fields_rebuilder({})
    for _ in range(epochs):
        order = rng.permutation(len(files))
        carry: dict[str, AnyArray] = {}
        for start in range(0, len(files), per_buffer):
            parts = [carry] if carry else []
            for index in order[start : start + per_buffer]:
                arrays = ppo_arrays(load(files[index]), "minibatches", gamma, lam, normalize)
                # Every file has the spec's structure: minibatches are rebuilt as it is.
                rebuild = _tree.fields_rebuilder(arrays)
                parts.append(_mb.as_rows(_tree.flatten_fields(arrays)))
            buffer = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
            n = len(buffer["advantages"])
            perm = rng.permutation(n)
            full = n - n % size
            for at in range(0, full, size):
                batch = _mb.take_rows(buffer, perm[at : at + size])
                yield normalized_minibatch(rebuild(batch), per_minibatch)
            carry = _mb.take_rows(buffer, perm[full:]) if full < n else {}
        if carry and not drop_last:
            yield normalized_minibatch(rebuild(carry), per_minibatch)
