"""`Dataset.minibatches` for every kind of field a recording has, and its checks at the call."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import trajkit
from trajkit import Rollout
from trajkit._core import tree
from trajkit.dataset import Dataset
from trajkit.testing import example_rollout

GAMMA, LAM = 0.9, 0.8


def without_states(r: Rollout) -> Rollout:
    """As the recorder saves by default: no env state, states of shape (T+1, B, 0)."""
    return r.replace(states=np.zeros((r.num_steps + 1, r.batch_size, 0), np.float32))


def with_per_step_scalar(r: Rollout) -> Rollout:
    """A per-step scalar output `[T+1]`, such as obs-tower2 GAIL's `prob_pi`."""
    outs = {**r.model_outs.arrays, "prob_pi": np.linspace(0, 1, r.num_steps + 1)}
    return r.replace(model_outs=outs)


def rows(leaf: np.ndarray) -> np.ndarray:
    return leaf.reshape(leaf.shape[0] * leaf.shape[1], *leaf.shape[2:])


KINDS: dict[str, Callable[[int], Rollout]] = {
    "flat obs, discrete actions": lambda s: example_rollout(6, 2, seed=s),
    "empty states": lambda s: without_states(example_rollout(6, 2, seed=s)),
    "nested obs and states": lambda s: example_rollout(6, 2, seed=s, nested=True),
    "nested obs, empty states": lambda s: without_states(
        example_rollout(6, 2, seed=s, nested=True)
    ),
    "box actions": lambda s: example_rollout(6, 2, seed=s, action_kind="box", action_shape=(3,)),
    "per-step scalar output": lambda s: with_per_step_scalar(example_rollout(6, 2, seed=s)),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_minibatches_cover_every_entry_for_every_field_kind(kind: str, tmp_path: Path) -> None:
    rollouts = [KINDS[kind](seed) for seed in range(3)]
    ds = Dataset.write(tmp_path / "ds", rollouts)
    batches = list(ds.minibatches(5, gamma=GAMMA, lam=LAM, epochs=2, files_per_buffer=2, seed=0))
    assert [len(b["advantages"]) for b in batches] == [5] * 7 + [1] + [5] * 7 + [1]
    want = [r.training_arrays(GAMMA, LAM) for r in rollouts]
    assert sorted(batches[0]) == sorted(want[0])
    assert "prob_pi" not in batches[0]  # no entry per env: left out, as training_arrays does
    epoch = batches[:8]
    for name in want[0]:
        for path, leaf in tree.flatten(want[0][name]):
            got = np.concatenate([tree.get_leaf(b[name], path) for b in epoch])
            assert got.shape[1:] == leaf.shape[2:]
            assert got.dtype == leaf.dtype
            expected = np.concatenate([rows(tree.get_leaf(w[name], path)) for w in want])
            # Every entry once per epoch: the same rows, in another order.
            assert sorted(map(bytes, got)) == sorted(map(bytes, expected)), name


def test_minibatches_refuse_at_the_call(tmp_path: Path) -> None:
    ds = Dataset.write(tmp_path / "ds", [example_rollout(4, 2)])
    calls: list[tuple[Callable[[], object], type[Exception], str]] = [
        (
            lambda: ds.minibatches(0, gamma=GAMMA, lam=LAM),
            ValueError,
            "minibatch_size must be >= 1, got 0",
        ),
        (
            lambda: ds.minibatches(2, gamma=GAMMA, lam=LAM, files_per_buffer=0),
            ValueError,
            "files_per_buffer must be >= 1, got 0",
        ),
        (
            lambda: ds.minibatches(2, gamma=GAMMA, lam=LAM, epochs=-1),
            ValueError,
            "epochs must be >= 0, got -1",
        ),
        (
            lambda: ds.minibatches(2, gamma=2.0, lam=LAM),
            ValueError,
            "gamma must be a finite number in [0, 1], got 2.0",
        ),
        (
            lambda: ds.minibatches(2, gamma=GAMMA, lam=LAM, seed=0.5),  # type: ignore[arg-type]
            TypeError,
            "seed must be an int",
        ),
        (
            lambda: ds.minibatches(2, gamma=GAMMA, lam=LAM, normalize_advantages="x"),  # type: ignore[arg-type]
            ValueError,
            "normalize_advantages must be None, 'rollout' or 'minibatch', got 'x'",
        ),
    ]
    for call, error, message in calls:
        with pytest.raises(error, match=re.escape(message)):
            call()


def test_a_dataset_without_a_critic_is_refused_like_a_rollout(tmp_path: Path) -> None:
    ds = Dataset.write(tmp_path / "ds", [example_rollout(4, 2, keys={"actions"})])
    with pytest.raises(trajkit.MissingModelOutputError) as info:
        ds.minibatches(2, gamma=GAMMA, lam=LAM)
    assert str(info.value) == (
        "minibatches() needs model_outs['critic'] to compute advantages and returns, but the "
        "dataset's spec has keys ['actions']: record the critic's values as "
        "model_outs['critic'], or gather your own arrays with trajkit.minibatch_indices and "
        "trajkit.gather"
    )
