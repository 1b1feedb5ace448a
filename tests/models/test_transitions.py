"""Transitions and n-step targets: golden arrays, a slow hand loop, identities, refusals."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

import trajkit
from trajkit import Rollout, episode_ids, n_step_returns, transition_minibatches, transitions
from trajkit._core import tree
from trajkit.testing import example_rollout, rollouts


def hand_n_step(
    rews: NDArray[Any],
    dones: NDArray[Any],
    truncated: NDArray[Any] | None,
    gamma: float,
    n: int,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64]]:
    """The n-step return, bootstrap discount and bootstrap step, one (t, b) at a time."""
    T, B = rews.shape
    G = np.zeros((T, B))
    d = np.zeros((T, B))
    last = np.zeros((T, B), np.int64)
    for b in range(B):
        for t in range(T):
            total, s = 0.0, t
            for k in range(n):
                s = t + k
                if s >= T:
                    s -= 1
                    break
                total += gamma**k * float(rews[s, b])
                if dones[s + 1, b] == 1:
                    break
            terminated = dones[s + 1, b] == 1 and (truncated is None or truncated[s, b] == 0)
            G[t, b] = total
            d[t, b] = 0.0 if terminated else gamma ** (s - t + 1)
            last[t, b] = s
    return G, d, last


def hand_episode_ids(dones: NDArray[Any]) -> NDArray[np.int64]:
    T, B = dones.shape[0] - 1, dones.shape[1]
    ids = np.zeros((T, B), np.int64)
    next_id = 0
    for b in range(B):
        for t in range(T):
            if t == 0 or dones[t, b] == 1:
                next_id += 1
            ids[t, b] = next_id - 1
    return ids


# ------------------------------------------------------------------ golden arrays by hand


def test_n_step_golden_arrays() -> None:
    # One env, five steps; step 1 terminates, step 3 is truncated by a time limit.
    rews = np.array([[1.0], [2.0], [4.0], [8.0], [16.0]])
    dones = np.array([[0], [0], [1], [0], [1], [0]])
    truncated = np.array([[0], [0], [0], [1], [0]])
    G, d, last = n_step_returns(rews, dones, 0.5, 3, truncated=truncated)
    assert G[:, 0].tolist() == [1 + 0.5 * 2, 2, 4 + 0.5 * 8, 8, 16]
    assert d[:, 0].tolist() == [0.0, 0.0, 0.25, 0.5, 0.5]
    assert last[:, 0].tolist() == [1, 1, 3, 3, 4]
    assert G.dtype == d.dtype == np.float32
    assert last.dtype == np.int64


def test_episode_ids_golden() -> None:
    dones = np.array([[1, 0], [0, 0], [1, 1], [0, 0]])
    assert episode_ids(dones).T.tolist() == [[0, 0, 1], [2, 2, 3]]
    assert episode_ids(dones, source=3)[0, 0] == 3 * 2**32


def test_transitions_golden_with_final_obs_and_truncation() -> None:
    r = Rollout(
        states=np.zeros((5, 1, 0)),
        obses=np.array([[[0]], [[1]], [[10]], [[11]], [[20]]], np.uint8),
        rews=np.array([[1.0], [2.0], [3.0], [4.0]]),
        dones=np.array([[0], [0], [1], [0], [1]]),
        infos=None,
        model_outs={"actions": np.array([[0], [1], [2], [0], [1]], np.uint8)},
        truncated=np.array([[0], [1], [0], [0]]),
        final_values=np.zeros((4, 1)),
        final_obses=np.array([[2], [12]], np.uint8),
    )
    t = transitions(r, gamma=0.5, n_step=2)
    assert t["obs"][:, 0].tolist() == [0, 1, 10, 11]
    assert t["next_obs"][:, 0].tolist() == [1, 2, 11, 12]
    assert t["n_step_obs"][:, 0].tolist() == [2, 2, 12, 12]
    assert t["n_step_return"].tolist() == [2.0, 2.0, 5.0, 4.0]
    assert t["n_step_discount"].tolist() == [0.25, 0.5, 0.0, 0.0]
    assert t["terminated"].tolist() == [False, False, False, True]
    assert t["truncated"].tolist() == [False, True, False, False]
    assert t["episode"].tolist() == [0, 0, 1, 1]
    assert t["action"].dtype == np.int64
    assert t["obs"].dtype == np.uint8


# --------------------------------------------------------------- against the hand loop


@settings(max_examples=60, deadline=None)
@given(
    r=rollouts(min_steps=0, max_steps=9, truncation=None, final_obs=None),
    gamma=st.sampled_from([0.0, 0.5, 0.9, 1.0]),
    n=st.integers(1, 6),
)
def test_n_step_matches_the_hand_loop(r: Rollout, gamma: float, n: int) -> None:
    G, d, last = n_step_returns(r.rews, r.dones, gamma, n, truncated=r.truncated)
    want_G, want_d, want_last = hand_n_step(r.rews, r.dones, r.truncated, gamma, n)
    np.testing.assert_allclose(G, want_G, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(d, want_d, rtol=1e-6)
    np.testing.assert_array_equal(last, want_last)
    np.testing.assert_array_equal(episode_ids(r.dones), hand_episode_ids(r.dones))


@settings(max_examples=40, deadline=None)
@given(
    r=rollouts(
        min_steps=1, max_steps=8, truncation=None, final_obs=None, nested=None, keys={"actions"}
    ),
    n=st.integers(1, 4),
)
def test_transition_rows_follow_the_rollout(r: Rollout, n: int) -> None:
    t = transitions(r, gamma=0.9, n_step=n)
    T, B = r.num_steps, r.batch_size
    _, _, last = hand_n_step(r.rews, r.dones, r.truncated, 0.9, n)
    after = r.next_obses()
    for path, leaf in tree.flatten(r.obses):
        got = tree.get_leaf(t["obs"], path)
        np.testing.assert_array_equal(got, np.swapaxes(leaf[:T], 0, 1).reshape(got.shape))
        nxt = tree.get_leaf(after, path)
        np.testing.assert_array_equal(
            tree.get_leaf(t["next_obs"], path), np.swapaxes(nxt, 0, 1).reshape(got.shape)
        )
        boot = nxt[last, np.arange(B)[None, :]]
        np.testing.assert_array_equal(
            tree.get_leaf(t["n_step_obs"], path), np.swapaxes(boot, 0, 1).reshape(got.shape)
        )
    np.testing.assert_array_equal(t["reward"], r.rews.T.ravel())


# ------------------------------------------------------------------------------ identities


@settings(max_examples=40, deadline=None)
@given(r=rollouts(min_steps=0, max_steps=8, truncation=None), gamma=st.floats(0, 1))
def test_one_step_is_the_td_target(r: Rollout, gamma: float) -> None:
    G, d, last = n_step_returns(r.rews, r.dones, gamma, 1, truncated=r.truncated)
    terminated = (r.dones[1:] == 1) & (r.truncated != 1 if r.truncated is not None else True)
    np.testing.assert_array_equal(G, r.rews)
    np.testing.assert_allclose(d, np.float32(gamma) * (1 - terminated), rtol=1e-6)
    np.testing.assert_array_equal(last, np.broadcast_to(np.arange(r.num_steps)[:, None], G.shape))


def test_n_past_every_episode_is_the_discounted_return_to_the_end() -> None:
    r = example_rollout(num_steps=12, num_envs=3, seed=4)
    G, d, _ = n_step_returns(r.rews, r.dones, 0.9, 100)
    want, _, _ = hand_n_step(r.rews, r.dones, None, 0.9, 100)
    np.testing.assert_allclose(G, want, rtol=1e-5)
    assert set(np.unique(d[r.dones[1:] == 1])) == {0.0}


def test_splitting_envs_gives_the_same_columns() -> None:
    r = example_rollout(num_steps=10, num_envs=4, seed=1, truncation=True)
    assert r.truncated is not None
    whole = n_step_returns(r.rews, r.dones, 0.8, 3, truncated=r.truncated)
    for b in range(4):
        part = n_step_returns(
            r.rews[:, [b]], r.dones[:, [b]], 0.8, 3, truncated=r.truncated[:, [b]]
        )
        for i in range(3):
            np.testing.assert_array_equal(part[i][:, 0], whole[i][:, b])


# ------------------------------------------------------------------------------ minibatches


def test_minibatches_cover_every_transition_once_per_epoch() -> None:
    rs = [example_rollout(num_steps=7, num_envs=2, seed=s, nested=True) for s in range(3)]
    batches = list(transition_minibatches(rs, 5, gamma=0.9, n_step=3, epochs=2, seed=1))
    assert [len(b["reward"]) for b in batches] == [5] * 8 + [2] + [5] * 8 + [2]
    epoch = batches[:9]
    ids = np.concatenate([b["episode"] for b in epoch])
    want_ids = np.concatenate([transitions(r, source=i)["episode"] for i, r in enumerate(rs)])
    np.testing.assert_array_equal(np.sort(ids), np.sort(want_ids))
    assert (ids >> 32).tolist().count(2) == 14
    assert set(batches[0]) == {
        *trajkit.TRANSITION_KEYS,
        "n_step_return",
        "n_step_discount",
        "n_step_obs",
    }
    assert set(batches[0]["obs"]) == {"image", "proprio"}


def test_minibatches_are_seeded_and_drop_last() -> None:
    r = example_rollout(num_steps=9, num_envs=2)
    a = [b["episode"].tolist() for b in transition_minibatches(r, 4, seed=3, drop_last=True)]
    b = [b["episode"].tolist() for b in transition_minibatches(r, 4, seed=3, drop_last=True)]
    assert a == b
    assert [len(x) for x in a] == [4, 4, 4, 4]
    g = np.random.default_rng(0)
    assert next(transition_minibatches(r, 4, seed=g))["reward"].shape == (4,)


def test_minibatch_rows_match_the_full_table() -> None:
    r = example_rollout(num_steps=6, num_envs=3, seed=2, final_obs=True, truncation=True)
    r = r.replace(obses=np.arange(7 * 3 * 4, dtype=np.float32).reshape(7, 3, 4))  # unique rows
    full = transitions(r, gamma=0.7, n_step=2)
    row_of = {float(obs[0]): i for i, obs in enumerate(full["obs"])}
    seen = []
    for batch in transition_minibatches(r, 4, gamma=0.7, n_step=2, seed=0):
        rows = [row_of[float(obs[0])] for obs in batch["obs"]]
        seen += rows
        for name in full:
            np.testing.assert_array_equal(batch[name], full[name][rows])
    assert sorted(seen) == list(range(18))


BAD: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"minibatch_size": 0}, ValueError, "minibatch_size"),
    ({"n_step": 0}, ValueError, "n_step must be an integer of at least 1, got 0"),
    ({"n_step": True}, ValueError, "n_step must be an integer of at least 1, got True"),
    ({"gamma": 1.5}, ValueError, r"gamma must be a finite number in \[0, 1\], got 1.5"),
    ({"files_per_buffer": 0}, ValueError, "files_per_buffer must be >= 1, got 0"),
    ({"minibatch_size": 7, "drop_last": True}, ValueError, r"\(N=6\), so drop_last=True would"),
    ({"seed": 1.5}, TypeError, "seed must be"),
]


@pytest.mark.parametrize(("kwargs", "error", "message"), BAD)
def test_bad_arguments_are_refused_at_the_call(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    args: dict[str, Any] = {"minibatch_size": 4, **kwargs}
    with pytest.raises(error, match=message):
        transition_minibatches(example_rollout(num_steps=3, num_envs=2), **args)


def test_a_rollout_without_actions_is_refused() -> None:
    r = example_rollout(keys={"critic"})
    with pytest.raises(trajkit.MissingModelOutputError, match=r"transitions\(\) needs model_outs"):
        transitions(r)
    with pytest.raises(trajkit.MissingModelOutputError, match="transition_minibatches"):
        transition_minibatches([example_rollout(), r], 4)


def test_a_source_of_another_type_is_refused() -> None:
    with pytest.raises(TypeError, match=r"source\[1\] is a int, expected a Rollout"):
        transition_minibatches([example_rollout(), 3], 4)  # type: ignore[list-item]
    with pytest.raises(TypeError, match="source must be a Rollout"):
        transition_minibatches("runs/", 4)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: n_step_returns(np.zeros((2, 1)), np.zeros((3,)), 0.9, 1), "dones must have 2-D"),
        (lambda: n_step_returns(np.zeros((2, 1)), np.full((3, 1), 2), 0.9, 1), "only 0 and 1"),
        (
            lambda: n_step_returns(np.zeros((3, 1)), np.zeros((3, 1)), 0.9, 1),
            r"rews must have shape \(T, B\) = \(2, 1\) \(from dones\), got \(3, 1\)",
        ),
        (
            lambda: n_step_returns(
                np.zeros((2, 1)), np.zeros((3, 1)), 0.9, 1, truncated=np.ones((2, 1))
            ),
            r"truncated\[0, 0\] is 1 but dones\[1, 0\] is 0",
        ),
        (
            lambda: n_step_returns(
                np.zeros((2, 1)), np.zeros((3, 1)), 0.9, 1, truncated=np.ones((3, 1))
            ),
            r"truncated must have shape \(2, 1\)",
        ),
        (lambda: episode_ids(np.zeros((3, 1)), source=-1), r"source must be an integer in \[0, "),
        (lambda: episode_ids(np.zeros((3, 1)), source=True), r"source must be an integer in \[0, "),
    ],
)
def test_bad_core_inputs_are_refused(call: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_the_last_source_below_two_to_the_31_gets_the_last_ids_int64_holds() -> None:
    dones = np.array([[0], [1], [0]])  # two episodes
    last = episode_ids(dones, source=2**31 - 1)
    assert last.tolist() == [[(2**31 - 1) * 2**32], [(2**31 - 1) * 2**32 + 1]]
    assert int(last.max()) <= np.iinfo(np.int64).max
    r = example_rollout(num_steps=2, num_envs=1)
    assert transitions(r, source=2**31 - 1)["episode"][0] == (2**31 - 1) * 2**32


@pytest.mark.parametrize("source", [2**31, 2**32, 2**40, np.int64(2**31)])
def test_a_source_whose_ids_overflow_int64_is_refused(source: int) -> None:
    # Before, source=2**31 wrapped around to negative ids, silently.
    message = (
        rf"source must be an integer in \[0, 2\*\*31\), got {re.escape(repr(source))}: "
        r"episode ids start at "
        r"source \* 2\*\*32 and are int64"
    )
    with pytest.raises(ValueError, match=message):
        episode_ids(np.zeros((3, 1)), source=source)
    with pytest.raises(ValueError, match=message):
        transitions(example_rollout(num_steps=2, num_envs=1), source=source)
