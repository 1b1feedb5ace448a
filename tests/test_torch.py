"""trajkit.torch: tensors out of minibatches, dtypes and devices, zero-copy on the CPU."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn_functional = pytest.importorskip("torch.nn.functional")

import trajkit.torch as tt  # noqa: E402
from trajkit.testing import example_rollout  # noqa: E402


def test_minibatches_equal_the_numpy_ones_as_tensors() -> None:
    r = example_rollout(num_steps=6, num_envs=3)
    ours = list(tt.minibatches(r, 5, gamma=0.9, lam=0.8, epochs=2, seed=3))
    theirs = list(r.minibatches(5, gamma=0.9, lam=0.8, epochs=2, seed=3))
    assert len(ours) == len(theirs) == 8
    for got, want in zip(ours, theirs, strict=True):
        assert set(got) == set(want)
        for key, array in want.items():
            np.testing.assert_array_equal(got[key].numpy(), array, err_msg=key)


def test_dtypes_follow_the_training_conventions() -> None:
    r = example_rollout(num_steps=4, num_envs=2)
    mb = next(tt.minibatches(r, 8, gamma=0.9, lam=0.9, seed=0))
    assert mb["actions"].dtype == torch.int64
    for key in ("obses", "advantages", "returns", "critic", "log_probs", "actor", "rews"):
        assert mb[key].dtype == torch.float32, key
    # The reason for int64: cross_entropy and one_hot index with it.
    loss = nn_functional.cross_entropy(mb["actor"], mb["actions"])
    assert torch.isfinite(loss)
    assert nn_functional.one_hot(mb["actions"], 3).shape == (8, 3)


def test_uint8_images_stay_uint8_and_box_actions_float32() -> None:
    r = example_rollout(num_steps=4, num_envs=2, nested=True, action_kind="box", action_shape=(2,))
    mb = next(tt.minibatches(r, 4, gamma=0.9, lam=0.9, seed=0))
    assert mb["obses"]["image"].dtype == torch.uint8
    assert isinstance(mb["obses"]["proprio"], tuple)
    assert mb["obses"]["proprio"][1]["goal"].shape == (4, 2)
    assert mb["actions"].dtype == torch.float32
    assert mb["actions"].shape == (4, 2)


def test_cpu_tensors_share_memory_with_the_arrays() -> None:
    a = np.zeros(4, np.float32)
    t = tt.to_tensor(a)
    t += 1
    np.testing.assert_array_equal(a, 1)
    read_only = np.zeros(3, np.float32)
    read_only.flags.writeable = False
    assert tt.to_tensor(read_only).sum() == 0  # copied, so no warning about writability
    doubles = np.zeros(3)
    assert tt.to_tensor(doubles).dtype == torch.float32


def test_an_unknown_device_is_refused() -> None:
    with pytest.raises(RuntimeError, match="Expected one of"):
        tt.to_tensor(np.zeros(2, np.float32), "gpu")


def test_per_minibatch_normalization_matches_cleanrl_on_tensors() -> None:
    r = example_rollout(num_steps=8, num_envs=4, seed=3)
    raw = tt.minibatches(r, 10, gamma=0.99, lam=0.95, seed=0)
    done = tt.minibatches(r, 10, gamma=0.99, lam=0.95, seed=0, normalize_advantages="minibatch")
    for a, b in zip(raw, done, strict=True):
        adv = a["advantages"]
        expected = (adv - adv.mean()) / (adv.std() + 1e-8)  # CleanRL's line; torch std is unbiased
        torch.testing.assert_close(b["advantages"], expected, rtol=1e-5, atol=1e-5)
