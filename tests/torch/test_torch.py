"""trajkit.torch: tensors out of minibatches, dtypes and devices, zero-copy on the CPU."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn_functional = pytest.importorskip("torch.nn.functional")

import trajkit  # noqa: E402
import trajkit.torch as tt  # noqa: E402
import trajkit.torch._convert as convert  # noqa: E402
from trajkit._core import tree  # noqa: E402
from trajkit.testing import example_rollout  # noqa: E402

needs_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device: the on-device path is not exercised"
)


def assert_same_batch(got: Any, want: Any, keys: Any = None) -> None:
    """`got` (tensors) holds exactly `want`'s arrays (restricted to `keys`), leaf by leaf."""
    names = set(want) if keys is None else set(keys)
    assert set(got) == names
    for name in names:
        got_leaves, want_leaves = tree.flatten(got[name]), tree.flatten(want[name])
        assert [p for p, _ in got_leaves] == [p for p, _ in want_leaves], name
        for (_, tensor), (_, array) in zip(got_leaves, want_leaves, strict=True):
            assert tensor.device.type == "cpu"
            np.testing.assert_array_equal(tensor.numpy(), array, err_msg=name)


# ------------------------------------------------------------------ same data as the NumPy path


@pytest.mark.parametrize(
    ("kwargs", "size", "epochs", "drop_last"),
    [
        ({}, 5, 2, False),
        ({"num_envs": 4}, 4, 3, True),  # B a power of 2, minibatches that divide T*B
        ({"nested": True}, 3, 2, False),
        ({"truncation": True, "num_envs": 5}, 7, 2, True),
        ({"action_kind": "box", "action_shape": (2,)}, 64, 1, False),  # one minibatch of all
    ],
)
def test_minibatches_equal_the_numpy_ones_for_the_same_seed(
    kwargs: dict[str, Any], size: int, epochs: int, drop_last: bool
) -> None:
    r = example_rollout(**{"num_steps": 6, "num_envs": 3, **kwargs})
    args: dict[str, Any] = {"gamma": 0.9, "lam": 0.8, "epochs": epochs, "drop_last": drop_last}
    for keys in ("all", None):
        ours = list(tt.minibatches(r, size, seed=3, keys=keys, **args))
        theirs = list(r.minibatches(size, seed=3, **args))
        assert len(ours) == len(theirs) > 0
        for got, want in zip(ours, theirs, strict=True):
            assert_same_batch(got, want, tt.PPO_KEYS if keys is None else None)


def test_a_generator_seed_advances_as_in_the_numpy_path() -> None:
    r = example_rollout(num_steps=5, num_envs=3)
    ours_rng, theirs_rng = np.random.default_rng(7), np.random.default_rng(7)
    for _ in range(2):  # the second call continues where the first left the generator
        ours = list(tt.minibatches(r, 4, gamma=0.9, lam=0.9, seed=ours_rng))
        theirs = list(r.minibatches(4, gamma=0.9, lam=0.9, seed=theirs_rng))
        for got, want in zip(ours, theirs, strict=True):
            assert_same_batch(got, want, tt.PPO_KEYS)


def test_rollout_normalization_is_exact_and_minibatch_normalization_matches() -> None:
    r = example_rollout(num_steps=8, num_envs=4, seed=3)
    for mode in ("rollout", "minibatch"):
        ours = tt.minibatches(r, 10, gamma=0.99, lam=0.95, seed=0, normalize_advantages=mode)
        theirs = r.minibatches(10, gamma=0.99, lam=0.95, seed=0, normalize_advantages=mode)
        for got, want in zip(ours, theirs, strict=True):
            if mode == "rollout":
                assert_same_batch(got, want, tt.PPO_KEYS)
            else:
                np.testing.assert_allclose(
                    got["advantages"].numpy(), want["advantages"], rtol=1e-6, atol=1e-6
                )


def test_per_minibatch_normalization_matches_cleanrl_on_tensors() -> None:
    r = example_rollout(num_steps=8, num_envs=4, seed=3)
    raw = tt.minibatches(r, 10, gamma=0.99, lam=0.95, seed=0)
    done = tt.minibatches(r, 10, gamma=0.99, lam=0.95, seed=0, normalize_advantages="minibatch")
    for a, b in zip(raw, done, strict=True):
        adv = a["advantages"]
        expected = (adv - adv.mean()) / (adv.std() + 1e-8)  # CleanRL's line; torch std is unbiased
        torch.testing.assert_close(b["advantages"], expected, rtol=1e-5, atol=1e-5)
        assert b["advantages"].dtype == torch.float32


# ------------------------------------------------------------------------------------ dtypes


def test_dtypes_follow_the_training_conventions() -> None:
    r = example_rollout(num_steps=4, num_envs=2)
    mb = next(tt.minibatches(r, 8, gamma=0.9, lam=0.9, seed=0, keys="all"))
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


# ---------------------------------------------------------------------- converted once, no copy


def test_training_tensors_share_memory_with_the_rollout() -> None:
    r = example_rollout(num_steps=6, num_envs=3, action_kind="box", action_shape=(2,))
    t: dict[str, Any] = dict(tt.training_tensors(r, gamma=0.9, lam=0.9))
    for name, array in (
        ("obses", r.obses),
        ("actions", r.model_outs.arrays["actions"]),
        ("log_probs", r.model_outs.arrays["log_probs"]),
        ("critic", r.model_outs.arrays["critic"]),
    ):
        assert t[name].data_ptr() == array.ctypes.data, name  # rows 0..T-1 start at row 0
        assert t[name].shape == (18, *array.shape[2:]), name
    np.testing.assert_array_equal(t["advantages"].numpy(), r.advantages(0.9, 0.9).reshape(-1))
    np.testing.assert_array_equal(t["returns"].numpy(), r.returns(0.9, 0.9).reshape(-1))


def test_nested_observations_share_memory_leaf_by_leaf() -> None:
    r = example_rollout(num_steps=4, num_envs=2, nested=True)
    t = tt.training_tensors(r, gamma=0.9, lam=0.9, keys=["obses"])
    assert t["obses"]["image"].data_ptr() == r.obses["image"].ctypes.data
    assert t["obses"]["image"].dtype == torch.uint8


def test_only_a_dtype_change_or_a_read_only_array_is_copied() -> None:
    r = example_rollout(num_steps=4, num_envs=2)  # int32 discrete actions
    t = tt.training_tensors(r, gamma=0.9, lam=0.9)
    assert t["actions"].dtype == torch.int64
    np.testing.assert_array_equal(
        t["actions"].numpy(), r.model_outs.arrays["actions"][:4].reshape(-1)
    )
    assert t["obses"].data_ptr() == r.obses.ctypes.data


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


def test_torch_is_imported_once_not_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    tt.to_tensor(np.zeros(1, np.float32))  # torch is now cached

    def no_import(*args: object) -> None:
        raise AssertionError("torch must not be imported again")

    monkeypatch.setattr(convert, "require", no_import)
    r = example_rollout(num_steps=4, num_envs=2)
    assert len(list(tt.minibatches(r, 3, gamma=0.9, lam=0.9, seed=0))) == 3
    assert tt.to_tensor(np.zeros(2, np.float32), "cpu").shape == (2,)


def test_an_unknown_device_is_refused() -> None:
    with pytest.raises(RuntimeError, match="Expected one of"):
        tt.to_tensor(np.zeros(2, np.float32), "gpu")
    with pytest.raises(RuntimeError, match="Expected one of"):
        tt.minibatches(example_rollout(), 2, gamma=0.9, lam=0.9, device="gpu")


# -------------------------------------------------------------------------------- keys=


def test_the_default_keys_are_what_ppo_reads() -> None:
    r = example_rollout(num_steps=4, num_envs=2)
    mb = next(tt.minibatches(r, 8, gamma=0.9, lam=0.9, seed=0))
    assert list(mb) == list(tt.PPO_KEYS)
    assert set(tt.training_tensors(r, gamma=0.9, lam=0.9)) == set(tt.PPO_KEYS)


def test_keys_choose_the_arrays_and_all_gives_every_training_array() -> None:
    r = example_rollout(num_steps=4, num_envs=2)
    mb = next(tt.minibatches(r, 8, gamma=0.9, lam=0.9, seed=0, keys=("rews", "actor")))
    assert list(mb) == ["rews", "actor"]
    everything = next(tt.minibatches(r, 8, gamma=0.9, lam=0.9, seed=0, keys="all"))
    assert set(everything) == set(r.training_arrays(0.9, 0.9))


def test_a_key_not_asked_for_says_how_to_ask() -> None:
    mb = next(tt.minibatches(example_rollout(), 8, gamma=0.9, lam=0.9, seed=0))
    with pytest.raises(KeyError, match=r"'actor' is not in this minibatch.*pass keys="):
        mb["actor"]  # type: ignore[typeddict-item]
    assert mb.get("actor") is None


def test_unknown_keys_are_refused_naming_the_key() -> None:
    r = example_rollout()
    with pytest.raises(ValueError, match=r"^keys names 'values', which this rollout's training"):
        tt.minibatches(r, 2, gamma=0.9, lam=0.9, keys=["obses", "values"])
    with pytest.raises(ValueError, match=r"^keys must be a collection .* got 'obses': write keys"):
        tt.minibatches(r, 2, gamma=0.9, lam=0.9, keys="obses")
    with pytest.raises(ValueError, match=r"^keys must be a collection of array names or 'all', "):
        tt.training_tensors(r, gamma=0.9, lam=0.9, keys=3)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match=r"^keys must name at least one array"):
        tt.minibatches(r, 2, gamma=0.9, lam=0.9, keys=[])


def test_a_rollout_without_log_probs_needs_keys() -> None:
    r = example_rollout(keys=("critic", "actions"))
    with pytest.raises(ValueError, match=r"^minibatches\(\) carries the arrays PPO reads .*no \["):
        tt.minibatches(r, 2, gamma=0.9, lam=0.9)
    mb = next(tt.minibatches(r, 2, gamma=0.9, lam=0.9, seed=0, keys=["obses", "advantages"]))
    assert list(mb) == ["obses", "advantages"]


def test_errors_are_raised_at_the_call_not_at_the_first_minibatch() -> None:
    r = example_rollout()
    with pytest.raises(ValueError, match="minibatch_size must be >= 1"):
        tt.minibatches(r, 0, gamma=0.9, lam=0.9)
    critic = (
        "{}() needs model_outs['critic'] to compute advantages and returns, but this rollout "
        "has keys ['actions']: record the critic's values"
    )
    bare = example_rollout(keys=("actions",))
    with pytest.raises(
        trajkit.MissingModelOutputError, match=re.escape(critic.format("minibatches"))
    ):
        tt.minibatches(bare, 2, gamma=0.9, lam=0.9)
    with pytest.raises(
        trajkit.MissingModelOutputError, match=re.escape(critic.format("training_tensors"))
    ):
        tt.training_tensors(bare, gamma=0.9, lam=0.9)
    with pytest.raises(TypeError, match="seed must be an int"):
        tt.minibatches(r, 2, gamma=0.9, lam=0.9, seed=1.5)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="normalize_advantages must be None or 'rollout'"):
        tt.training_tensors(r, gamma=0.9, lam=0.9, normalize_advantages="minibatch")  # type: ignore[call-overload]


def test_an_empty_rollout_yields_nothing() -> None:
    r = example_rollout(num_steps=0, num_envs=2)
    assert list(tt.minibatches(r, 4, gamma=0.9, lam=0.9, seed=0)) == []
    assert tt.training_tensors(r, gamma=0.9, lam=0.9)["obses"].shape == (0, 4)


# ------------------------------------------------------------------------------------ CUDA


@needs_cuda
def test_cuda_minibatches_live_on_the_device_and_equal_the_cpu_ones() -> None:
    r = example_rollout(num_steps=16, num_envs=8, nested=True)
    on_gpu = list(tt.minibatches(r, 32, gamma=0.9, lam=0.9, epochs=2, seed=1, device="cuda"))
    on_cpu = list(tt.minibatches(r, 32, gamma=0.9, lam=0.9, epochs=2, seed=1))
    assert len(on_gpu) == len(on_cpu) == 8
    for got, want in zip(on_gpu, on_cpu, strict=True):
        for (_, g), (_, w) in zip(tree.flatten(dict(got)), tree.flatten(dict(want)), strict=True):
            assert g.device.type == "cuda"
            torch.testing.assert_close(g.cpu(), w, rtol=0, atol=0)
    whole = tt.training_tensors(r, gamma=0.9, lam=0.9, device=torch.device("cuda"))
    assert whole["advantages"].device.type == "cuda"
    assert tt.to_tensor(np.zeros(3, np.float32), "cuda").device.type == "cuda"


# ------------------------------------------------------------------- transitions, action dtype


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.int8, np.int32, np.int64])
def test_integer_actions_of_any_width_or_sign_become_int64(dtype: type[np.generic]) -> None:
    r = example_rollout(num_steps=4, num_envs=2)
    r = r.replace(model_outs={**r.model_outs.arrays, "actions": r.actions().astype(dtype)})
    assert tt.to_tensor(r.actions().astype(dtype), key="actions").dtype == torch.int64
    mb = next(tt.minibatches(r, 8, gamma=0.9, lam=0.9, seed=0))
    assert mb["actions"].dtype == torch.int64
    tr = tt.to_tensors(next(trajkit.transition_minibatches(r, 8, seed=0)))
    assert tr["action"].dtype == torch.int64
    assert torch.isfinite(nn_functional.cross_entropy(torch.zeros(8, 3), tr["action"]))


def test_transition_tensors_keep_the_conversion_rules() -> None:
    box = example_rollout(4, 2, action_kind="box", action_shape=(2,))
    first = tt.to_tensors(next(trajkit.transition_minibatches(box, 8, gamma=0.5, seed=0)))
    assert first["action"].dtype == first["n_step_return"].dtype == torch.float32
    assert first["terminated"].dtype == torch.bool
    assert first["episode"].dtype == torch.int64


def test_the_deprecated_transition_minibatches_pass_every_argument_on() -> None:
    rs = [example_rollout(6, 2, seed=s, nested=True, final_obs=True) for s in range(3)]
    args: dict[str, Any] = {"gamma": 0.9, "n_step": 3, "epochs": 2, "seed": 4}
    args |= {"drop_last": True, "shuffle": True}
    with pytest.warns(DeprecationWarning, match=r"trajkit\.torch\.transition_minibatches is dep"):
        got = list(tt.transition_minibatches(rs, 5, device="cpu", **args))
    want = list(trajkit.transition_minibatches(rs, 5, **args))
    assert len(got) == len(want) == 14  # 2 epochs of 36 transitions, drop_last
    for g, w in zip(got, want, strict=True):
        assert_same_batch(g, w)
    with (
        pytest.warns(DeprecationWarning, match="transition_minibatches"),
        pytest.raises(ValueError, match="n_step must be an integer of at least 1, got 0"),
    ):
        tt.transition_minibatches(example_rollout(), 4, gamma=0.9, n_step=0)


@needs_cuda
def test_cuda_transition_minibatches_live_on_the_device_and_equal_the_cpu_ones() -> None:
    r = example_rollout(6, 2, seed=1, nested=True, final_obs=True)
    cpu = list(trajkit.transition_minibatches(r, 5, gamma=0.9, n_step=2, seed=0))
    with pytest.warns(DeprecationWarning, match="transition_minibatches"):
        gpu = list(tt.transition_minibatches(r, 5, gamma=0.9, n_step=2, seed=0, device="cuda"))
    for c, g in zip(cpu, gpu, strict=True):
        for name in c:
            for (_, want), (_, got) in zip(
                tree.flatten(c[name]), tree.flatten(g[name]), strict=True
            ):
                assert got.device.type == "cuda"
                torch.testing.assert_close(got.cpu(), tt.to_tensor(want, key=name))
