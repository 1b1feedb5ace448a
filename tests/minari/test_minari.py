"""trajkit.minari against the real minari package, on datasets made in a temporary folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("minari")

import trajkit
import trajkit.minari as tm
from trajkit._core import tree
from trajkit.testing import example_rollout


def _rows(r: trajkit.Rollout, start: int, stop: int) -> trajkit.Rollout:
    """Rows start..stop of a rollout (stop included): a consecutive piece of it."""

    def cut(x: Any, rows: int) -> Any:
        return tree.map_leaves(lambda leaf: leaf[start : start + rows], x)

    n = stop - start
    return trajkit.Rollout(
        states=cut(r.states, n + 1),
        obses=cut(r.obses, n + 1),
        rews=r.rews[start:stop],
        dones=r.dones[start : stop + 1],
        infos=None,
        model_outs={k: v[start : stop + 1] for k, v in r.model_outs.arrays.items()},
        truncated=None if r.truncated is None else r.truncated[start:stop],
        final_values=None if r.final_values is None else r.final_values[start:stop],
    )


def _summary(dataset: Any) -> list[tuple[int, float, bool, bool]]:
    return [
        (
            len(ep.rewards),
            float(np.sum(ep.rewards)),
            bool(ep.terminations[-1]),
            bool(ep.truncations[-1]),
        )
        for ep in dataset.iterate_episodes()
    ]


def test_episodes_are_cut_at_episode_ends_with_terminations_and_truncations_apart() -> None:
    r = example_rollout(num_steps=12, num_envs=3, truncation=True, done_prob=0.3, seed=4)
    dataset = tm.to_minari(r, "trajkit/cut-v0")
    assert dataset.total_steps == 12 * 3
    ended = int((r.dones[1:] == 1).sum())
    assert dataset.total_episodes == ended + 3  # plus each env's still-running episode
    episodes = list(dataset.iterate_episodes())
    truncations = sum(bool(ep.truncations[-1]) for ep in episodes)
    terminations = sum(bool(ep.terminations[-1]) for ep in episodes)
    assert r.truncated is not None
    assert truncations == int(r.truncated.sum())
    assert terminations == ended - truncations
    assert sum(float(np.sum(ep.rewards)) for ep in episodes) == pytest.approx(float(r.rews.sum()))
    for ep in episodes:
        assert len(ep.observations) == len(ep.rewards) + 1


def test_an_episode_spanning_consecutive_rollouts_is_exported_whole() -> None:
    whole = example_rollout(num_steps=10, num_envs=2, done_prob=0.15, seed=7)
    parts = [_rows(whole, 0, 4), _rows(whole, 4, 10)]
    assert _summary(tm.to_minari(parts, "trajkit/parts-v0")) == _summary(
        tm.to_minari(whole, "trajkit/whole-v0")
    )


def test_rollouts_that_do_not_join_up_end_the_running_episodes_where_the_next_starts() -> None:
    # Two rollouts whose envs are still in an episode at the end of the first while the
    # second starts a new one (dones[0] = 1): each running episode ends with the first
    # rollout, terminated, its last observation repeated; none runs on into the second.
    first = example_rollout(num_steps=4, num_envs=2, seed=0)
    assert first.dones.astype(int).tolist() == [[0, 0], [1, 1], [0, 0], [0, 0], [0, 0]]
    second = example_rollout(num_steps=4, num_envs=2, seed=0)
    dones = second.dones.copy()
    dones[0] = 1
    second = trajkit.Rollout(
        states=second.states,
        obses=second.obses,
        rews=second.rews,
        dones=dones,
        infos=None,
        model_outs=second.model_outs.arrays,
    )
    dataset = tm.to_minari([first, second], "trajkit/apart-v0")
    rews = first.rews.astype(np.float64)  # as Minari stores them
    closed = [(3, float(np.sum(rews[1:4, b])), True, False) for b in range(2)]
    assert _summary(dataset) == [
        (1, float(rews[0, 0]), True, False),
        (1, float(rews[0, 1]), True, False),
        closed[0],
        (1, float(rews[0, 0]), True, False),
        closed[1],
        (1, float(rews[0, 1]), True, False),
        (3, float(np.sum(rews[1:4, 0])), False, False),
        (3, float(np.sum(rews[1:4, 1])), False, False),
    ]
    episode = list(dataset.iterate_episodes())[2]
    np.testing.assert_array_equal(episode.observations[:3], first.obses[1:4, 0])
    np.testing.assert_array_equal(episode.observations[3], first.obses[3, 0])


def test_import_gives_one_validated_rollout_per_episode() -> None:
    r = example_rollout(num_steps=9, num_envs=2, truncation=True, done_prob=0.3, seed=2)
    dataset = tm.to_minari(r, "trajkit/back-v0")
    rollouts = tm.from_minari("trajkit/back-v0")
    assert len(rollouts) == dataset.total_episodes
    for back, ep in zip(rollouts, dataset.iterate_episodes(), strict=True):
        assert back.batch_size == 1
        assert back.num_steps == len(ep.rewards)
        np.testing.assert_array_equal(back.obses[:, 0], ep.observations)
        np.testing.assert_array_equal(back.rews[:, 0], ep.rewards.astype(np.float32))
        assert back.dones[0, 0] == 1
        ended = bool(ep.terminations[-1] or ep.truncations[-1])
        assert back.dones[-1, 0] == (1 if ended else 0) or back.num_steps == 0
        if ep.truncations[-1]:
            assert back.truncated is not None
            assert back.truncated[-1, 0] == 1
            assert back.final_values is not None
            assert back.final_values[-1, 0] == 0
        else:  # zeros, as the recorder gives them
            assert back.truncated is not None
            assert not back.truncated.any()
        np.testing.assert_array_equal(back.actions()[:-1, 0], ep.actions)


def test_nested_observations_and_box_actions() -> None:
    r = example_rollout(num_steps=6, num_envs=2, nested=True, action_kind="box", seed=3)
    dataset = tm.to_minari(r, "trajkit/nested-v0")
    (first, *_) = tm.from_minari(dataset)
    assert isinstance(first.obses, dict)
    assert tree.paths(first.obses) == tree.paths(r.obses)
    assert first.actions().dtype == np.float32


def test_refusals() -> None:
    r = example_rollout(num_steps=3, num_envs=2)
    with pytest.raises(ValueError, match="to_minari needs at least one rollout"):
        tm.to_minari([], "trajkit/none-v0")
    with pytest.raises(ValueError, match="the same number of envs, got B=2 and B=3"):
        tm.to_minari([r, example_rollout(num_steps=3, num_envs=3)], "trajkit/b-v0")
    with pytest.raises(ValueError, match=r"to_minari needs model_outs\['actions'\]"):
        tm.to_minari(example_rollout(keys={"critic"}), "trajkit/noact-v0")


# ------------------------------------------------------------------------------------ spaces


def test_the_envs_spaces_are_exported_with_their_bounds() -> None:
    from gymnasium import spaces

    r = example_rollout(num_steps=5, num_envs=2, action_kind="discrete", seed=1)
    box = spaces.Box(-10.0, 10.0, (4,), np.float32)
    actions = spaces.Discrete(3)
    dataset = tm.to_minari(r, "trajkit/spaces-v0", observation_space=box, action_space=actions)
    assert dataset.observation_space == box
    assert dataset.action_space == actions
    inferred = tm.to_minari(r, "trajkit/inferred-v0")  # as documented: unbounded floats
    assert inferred.observation_space == spaces.Box(-np.inf, np.inf, (4,), np.float32)


def test_the_envs_spaces_come_from_env_when_given() -> None:
    import gymnasium

    env = gymnasium.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    r = example_rollout(num_steps=3, num_envs=1, keys={"actions"}, done_prob=0.0)
    obses = np.broadcast_to(obs, r.obses.shape).copy()
    r = r.replace(obses=obses, model_outs={"actions": np.zeros((4, 1), np.int32)})
    dataset = tm.to_minari(r, "trajkit/cartpole-v0", env=env)
    assert dataset.observation_space == env.observation_space  # real bounds, not inf
    assert dataset.action_space == env.action_space


def test_data_outside_the_given_spaces_is_refused_by_name() -> None:
    from gymnasium import spaces

    r = example_rollout(num_steps=4, num_envs=2, action_kind="discrete", seed=2)
    obses = r.obses.copy()
    obses[3, 1, 2] = 5.0
    tight = spaces.Box(-4.0, 4.0, (4,), np.float32)
    with pytest.raises(
        ValueError,
        match=r"^observations hold 5\.0 \[2\] at \(t=3, b=1\), outside the space's bounds "
        r"\[-4\.0, 4\.0\]",
    ):
        tm.to_minari(r.replace(obses=obses), "trajkit/out-v0", observation_space=tight)
    with pytest.raises(ValueError, match=r"^observations have shape \(4,\) per step and env, the"):
        tm.to_minari(r, "trajkit/shape-v0", observation_space=spaces.Box(-1, 1, (3,)))
    with pytest.raises(ValueError, match=r"^actions hold \d at \(t=\d, b=\d\), outside the space"):
        tm.to_minari(
            r.replace(obses=np.clip(r.obses, -1, 1)),
            "trajkit/act-v0",
            observation_space=spaces.Box(-1, 1, (4,), np.float32),
            action_space=spaces.Discrete(1),
        )
    nested = example_rollout(num_steps=2, num_envs=1, nested=True)
    with pytest.raises(ValueError, match=r"^observations are nested, but the space is Box"):
        tm.to_minari(nested, "trajkit/nested-v0", observation_space=tight)
    assert not list(Path(os.environ["MINARI_DATASETS_PATH"]).iterdir())  # nothing written


SPACE_MISMATCHES = [
    ("dict", r"^observations have keys \w+, the space \['a'\]$"),
    ("tuple", r"^observations have \w+; the space is a Tuple of 2$"),
    ("text", r"^observations: the space Text\(.*\) is not one trajkit stores \(Box, Discrete, "),
    ("keys", r"^observations have keys \['a', 'b'\], the space \['a'\]$"),
    ("items", r"^observations have 3 items; the space is a Tuple of 2$"),
]


@pytest.mark.parametrize(
    ("kind", "message"), SPACE_MISMATCHES, ids=[k for k, _ in SPACE_MISMATCHES]
)
def test_data_of_another_structure_than_the_space_is_refused(kind: str, message: str) -> None:
    from gymnasium import spaces

    box = spaces.Box(-10.0, 10.0, (4,), np.float32)
    r = example_rollout(num_steps=2, num_envs=1, keys={"actions"})
    space: Any = {
        "dict": spaces.Dict({"a": box}),
        "tuple": spaces.Tuple([box, box]),
        "text": spaces.Text(5),
        "keys": spaces.Dict({"a": box}),
        "items": spaces.Tuple([box, box]),
    }[kind]
    if kind == "keys":
        r = r.replace(obses={"a": r.obses, "b": r.obses})
    if kind == "items":
        r = r.replace(obses=(r.obses, r.obses, r.obses))
    with pytest.raises(ValueError, match=message):
        tm.to_minari(r, "trajkit/mismatch-v0", observation_space=space)


# ----------------------------------------------------------------------------- atomic export


def test_an_existing_dataset_is_refused_and_kept() -> None:
    r = example_rollout(num_steps=3, num_envs=1)
    tm.to_minari(r, "trajkit/kept-v0")
    with pytest.raises(ValueError, match=r"^a Minari dataset with id 'trajkit/kept-v0' exists"):
        tm.to_minari(r, "trajkit/kept-v0")
    assert tm.from_minari("trajkit/kept-v0")  # still readable


_WRITER = """
import os, sys
from minari.dataset._storages.arrow_storage import ArrowStorage
import trajkit.minari
from trajkit.testing import example_rollout

ready = int(sys.argv[1])
real = ArrowStorage.update_episodes  # the storage of data_format="arrow"

def midway(self, episodes):
    episodes = list(episodes)
    real(self, episodes[: len(episodes) // 2])  # half the episodes are on disk
    os.write(ready, b"1")
    os.read(0, 1)  # wait to be killed

ArrowStorage.update_episodes = midway
rollout = example_rollout(num_steps=64, num_envs=4, done_prob=0.1, seed=3)
trajkit.minari.to_minari(rollout, "trajkit/killed-v0")
"""


def test_a_killed_export_leaves_no_dataset(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    import minari

    read, write = os.pipe()
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(write)],
        pass_fds=(write,),
        stdin=subprocess.PIPE,
        env={**os.environ, "MINARI_DATASETS_PATH": str(tmp_path)},
    )
    os.close(write)
    try:
        assert os.read(read, 1) == b"1"  # the writer is midway
        staged = [p for p in tmp_path.iterdir() if p.name.startswith(".trajkit-")]
        assert staged  # the data so far is in the hidden folder
        child.send_signal(signal.SIGKILL)
        child.wait()
    finally:
        os.close(read)
        if child.poll() is None:  # pragma: no cover - only if an assertion failed above
            child.kill()
            child.wait()
        assert child.stdin is not None
        child.stdin.close()
    assert child.returncode == -signal.SIGKILL
    assert not (tmp_path / "trajkit" / "killed-v0").exists()
    assert minari.list_local_datasets() == {}  # the hidden folder is not listed
    r = example_rollout(num_steps=8, num_envs=2, seed=4)
    assert tm.to_minari(r, "trajkit/killed-v0").total_steps == 16  # the id is free
