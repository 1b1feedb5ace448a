"""`normalize_advantages=` on the minibatch methods: off, over the rollout, or per minibatch."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import trajkit
from trajkit.testing import example_rollout

GAMMA, LAM = 0.99, 0.95


Batch = dict[str, Any]


def _pairs(mode: trajkit.AdvantageNormalization, size: int = 7) -> list[tuple[Batch, Batch]]:
    r = example_rollout(num_steps=8, num_envs=3, seed=4)
    raw = list(r.minibatches(size, gamma=GAMMA, lam=LAM, epochs=2, seed=1))
    done = list(
        r.minibatches(size, gamma=GAMMA, lam=LAM, epochs=2, seed=1, normalize_advantages=mode)
    )
    return list(zip(raw, done, strict=True))


def test_none_leaves_advantages_as_computed() -> None:
    for raw, same in _pairs(None):
        np.testing.assert_array_equal(same["advantages"], raw["advantages"])


def test_minibatch_standardizes_each_batch_with_the_unbiased_std_as_sb3_and_cleanrl() -> None:
    for raw, done in _pairs("minibatch"):
        a = np.asarray(raw["advantages"], np.float64)
        expected = (a - a.mean()) / (a.std(ddof=1) + 1e-8)
        np.testing.assert_allclose(done["advantages"], expected, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(done["returns"], raw["returns"])  # returns untouched
        np.testing.assert_array_equal(done["obses"], raw["obses"])


def test_rollout_standardizes_once_over_the_whole_rollout() -> None:
    r = example_rollout(num_steps=8, num_envs=3, seed=4)
    whole = trajkit.normalize_advantages(r.advantages(GAMMA, LAM))
    batches = list(r.minibatches(5, gamma=GAMMA, lam=LAM, seed=2, normalize_advantages="rollout"))
    t_b = list(trajkit.minibatch_indices(8, 3, 5, seed=2))
    for batch, (t, b) in zip(batches, t_b, strict=True):
        np.testing.assert_array_equal(batch["advantages"], whole[t, b])
    values = np.concatenate([np.asarray(b["advantages"]) for b in batches])
    assert abs(values.mean()) < 1e-5
    assert abs(values.std() - 1.0) < 1e-4  # population std over the rollout


def test_a_minibatch_of_one_is_left_as_is() -> None:
    for raw, done in _pairs("minibatch", size=23):  # 24 entries: the last batch has one
        if len(raw["advantages"]) == 1:
            np.testing.assert_array_equal(done["advantages"], raw["advantages"])
            break
    else:
        pytest.fail("no minibatch of one")


def test_sequence_minibatches_normalize_each_batch_too() -> None:
    r = example_rollout(num_steps=6, num_envs=4, seed=5)
    raw = r.sequence_minibatches(2, gamma=GAMMA, lam=LAM, seed=3)
    done = r.sequence_minibatches(2, gamma=GAMMA, lam=LAM, seed=3, normalize_advantages="minibatch")
    for a, b in zip(raw, done, strict=True):
        x = np.asarray(a["advantages"], np.float64)
        np.testing.assert_allclose(
            b["advantages"], (x - x.mean()) / (x.std(ddof=1) + 1e-8), rtol=1e-5, atol=1e-6
        )


def test_an_unknown_mode_is_refused_at_the_first_batch() -> None:
    r = example_rollout()
    message = r"normalize_advantages must be None, 'rollout' or 'minibatch', got 'batch'"
    bad: Any = "batch"
    with pytest.raises(ValueError, match=message):
        next(r.minibatches(4, gamma=GAMMA, lam=LAM, normalize_advantages=bad))
    with pytest.raises(ValueError, match="normalize_advantages must be"):
        next(r.sequence_minibatches(2, gamma=GAMMA, lam=LAM, normalize_advantages=bad))


def test_core_ddof_is_checked() -> None:
    with pytest.raises(
        ValueError, match=r"ddof must be 0 \(population std\) or 1 \(unbiased std\), got 2"
    ):
        trajkit.normalize_advantages([1.0, 2.0], ddof=2)
    np.testing.assert_array_equal(trajkit.normalize_advantages([3.0], ddof=1), [3.0])
