"""Replay, in process: every refusal's words, every difference's place, every argument's arrival.

`tests/lint/test_replay_robust.py` runs the command in a fresh interpreter, as users run it;
these tests call `replay_recordings` in the test's own process (where mutation testing sees
them) on a tiny registered env, `Counter`, whose every value is known: its observation is
`[[0.1, t], [start, action]]` (`start`: the seed of its last seeded reset, so env b shows
`seed + b`), its reward `action + 0.5 + bonus`, and its episodes end (terminate) after 4 steps.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trajkit
from trajkit._io.files import load
from trajkit.lint.config import LintOptions
from trajkit.lint.registry import CHECKS, Finding

pytest.importorskip("gymnasium")
import gymnasium as gym

from trajkit.gym import RolloutRecorder
from trajkit.lint import replay as replay_module
from trajkit.lint.replay import env_arguments, replay_recordings

COUNTER = "trajkit_wiring/Counter-v0"
SCALAR = "trajkit_wiring/Scalar-v0"  # its observation is the 0-d `t + start`
OPEN = "trajkit_wiring/Open-v0"  # registered with `bonus`, which its constructor does not name
MISSING = "trajkit_wiring/Missing-v0"  # its module does not exist
TK3 = frozenset(code for code in CHECKS if code.startswith("TK3"))

File = tuple[str, dict[str, Any]]


class Counter(gym.Env[Any, Any]):
    """Observations, rewards and episode ends a test can write down (see the module's words)."""

    made = 0  # how many were constructed

    def __init__(
        self,
        scalar: bool = False,
        fail: str | None = None,
        reset_fails: bool = False,
        close_fails: bool = False,
        **extra: float,
    ) -> None:
        if fail is not None:
            raise RuntimeError(fail)
        type(self).made += 1
        self.observation_space = gym.spaces.Box(-1e6, 1e6, () if scalar else (2, 2), np.float32)
        self.action_space = gym.spaces.Discrete(3)
        self.bonus = float(extra.get("bonus", 0.0))
        self.reset_fails, self.close_fails = reset_fails, close_fails
        self.start = self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        if self.reset_fails:
            raise RuntimeError("no reset today")
        super().reset(seed=seed)
        if seed is not None:
            self.start = seed
        self.t = 0
        return self._obs(0), {}

    def _obs(self, action: int) -> Any:
        if self.observation_space.shape == ():
            return np.array(self.t + self.start, np.float32)
        return np.array([[0.1, self.t], [self.start, action]], np.float32)

    def step(self, action: Any) -> Any:
        if action not in range(3):
            raise ValueError(f"no action {action}")
        self.t += 1
        return self._obs(action), action + 0.5 + self.bonus, self.t >= 4, False, {}

    def close(self) -> None:
        if self.close_fails:
            raise RuntimeError("no close today")


@pytest.fixture(autouse=True, scope="module")
def _registered() -> Iterator[None]:
    registered = {
        COUNTER: ({}, Counter),
        SCALAR: ({"scalar": True}, Counter),
        OPEN: ({"bonus": 1.0}, Counter),
        MISSING: ({}, "trajkit_no_such_module:Env"),
    }
    for env_id, (kwargs, entry) in registered.items():
        gym.register(env_id, entry_point=entry, kwargs=kwargs)  # type: ignore[arg-type]
    yield
    for env_id in registered:
        del gym.registry[env_id]


def _policy(obs: Any) -> dict[str, Any]:
    return {"actions": np.array([1, 2])}  # env 0 takes 1, env 1 takes 2: rewards 1.5 and 2.5


def record(
    folder: Path, env_id: str = COUNTER, *, files: int = 2, seed: int = 5, **make: Any
) -> list[File]:
    """`files` recorded files of 6 steps of 2 envs: `(path, recording)`, as lint reads them."""
    folder.mkdir(exist_ok=True)
    env = gym.make_vec(env_id, num_envs=2, vectorization_mode="sync", **make)
    recorder = RolloutRecorder(env, _policy, seed=seed)
    recorded = []
    for i in range(files):
        rollout = recorder.record(6)
        path = str(folder / f"f{i}.npz")
        trajkit.save(rollout, path, recording=recorder.recording)
        recorded.append((path, recorder.recording))
    env.close()
    return recorded


def edit(file: File, **fields: Any) -> None:
    """Save the file's rollout again with `fields` replaced (its recording kept)."""
    path, recording = file
    trajkit.save(trajkit.load(path).replace(**fields), path, recording=recording)


def with_recording(files: list[File], **update: Any) -> list[File]:
    """The files with their recordings updated as a hostile or a stale file would hold them."""
    return [(path, {**recording, **update}) for path, recording in files]


def replay(files: list[File], *, trust: bool = False, **kwargs: Any) -> list[Finding]:
    return list(replay_recordings(files, LintOptions(TK3, trust_env_args=trust), **kwargs))


def notes(files: list[File], reason: str) -> list[Finding]:
    """One TK300 note per file, `cannot replay: reason`."""
    return [Finding("TK300", f"cannot replay: {reason}", path) for path, _ in files]


# ------------------------------------------------------------------- what is replayed, once


def test_a_clean_recording_replays_and_its_files_are_listed(tmp_path: Path) -> None:
    files = record(tmp_path, files=3)
    made = Counter.made
    done: list[str] = []
    assert replay(files, replayed=done) == []
    assert done == [path for path, _ in files]
    assert Counter.made == made + 2  # each env made once for the whole recording
    assert replay(files) == []  # without a list to fill


def test_seed_zero_and_the_async_mode_are_replayed(tmp_path: Path) -> None:
    files = record(tmp_path, seed=0)
    assert replay(files) == []
    assert replay(with_recording(files, vectorization_mode="async")) == []


def test_the_byte_limit_and_the_memory_map_reach_the_loader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = record(tmp_path)
    assert replay(files, max_bytes=100) == notes(
        files,
        f"cannot load {files[0][0]}: the metadata declares 512 bytes of array data (T=6, B=2), "
        "over the limit of 100 bytes; pass a larger max_bytes to load it",
    )
    calls: list[dict[str, Any]] = []

    def spy(path: str, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return load(path, **kwargs)

    monkeypatch.setattr(replay_module, "load", spy)
    assert replay(files, max_bytes=10_000) == []
    assert calls == [{"mmap": True, "max_bytes": 10_000}] * 2


def test_a_file_without_actions_is_a_note_for_it_and_what_follows(tmp_path: Path) -> None:
    files = record(tmp_path, files=3)
    edit(files[1], model_outs={})
    done: list[str] = []
    assert replay(files, replayed=done) == notes(files[1:], f"{files[1][0]} has no actions")
    assert done == [files[0][0]]


def test_a_gap_in_the_indices_stops_the_replay_there(tmp_path: Path) -> None:
    files = record(tmp_path, files=4)
    del files[2]  # indices 0, 1, 3
    done: list[str] = []
    assert replay(files, replayed=done) == notes(
        files[2:],
        "index 2 of the recording is not among the files, so what follows it cannot be replayed",
    )
    assert done == [path for path, _ in files[:2]]


# ------------------------------------------------------------------- refusals, word for word


@pytest.mark.parametrize(
    ("update", "reason"),
    [
        ({"seed": -1}, "the seed -1 is negative (Gymnasium seeds are integers >= 0)"),
        (
            {"unrecorded_kwargs": ["render_fps", "spec_stack"]},
            "make_vec's arguments render_fps, spec_stack were not recorded (not JSON)",
        ),
        (
            {"wrappers": ["RecordEpisodeStatistics", "NormalizeReward"]},
            "the vector wrappers RecordEpisodeStatistics, NormalizeReward are not re-created",
        ),
        (
            {"vectorization_mode": "vector_entry_point"},
            "vectorization mode 'vector_entry_point' is not replayed",
        ),
        ({"env_id": "NoSuchEnv-v0"}, "env id 'NoSuchEnv-v0' is not registered (NameNotFound)"),
        (
            {"env_kwargs": {"vectorization_mode": "sync", "num_envs": 2}},
            "env_kwargs holds num_envs, vectorization_mode, which trajkit's recorder keeps apart",
        ),
        (
            {"env_kwargs": {"wrappers": ["RecordEpisodeStatistics"]}},
            "env_kwargs holds wrappers, which are not re-created",
        ),
        (
            {"env_kwargs": {"zeta": 1, "bonus": 1.0}},
            f"env_kwargs bonus, zeta are not arguments of {COUNTER}'s registration or "
            "constructor (replay them with --replay-trust-env-args, or trust_env_args=True, "
            "if you trust this file)",
        ),
        (
            {"env_kwargs": {"max_episode_steps": 0}},
            "env_kwargs max_episode_steps must be an integer >= 1, got 0",
        ),
        (
            {"env_kwargs": {"disable_env_checker": "yes"}},
            "env_kwargs disable_env_checker must be a bool, got 'yes'",
        ),
    ],
    ids=[
        "negative-seed",
        "unrecorded",
        "wrappers",
        "mode",
        "unregistered",
        "reserved",
        "wrappers-kwarg",
        "unnamed",
        "limit",
        "checker",
    ],
)
def test_a_refused_recording_is_a_note_for_each_file(
    tmp_path: Path, update: dict[str, Any], reason: str
) -> None:
    files = with_recording(record(tmp_path), **update)
    done: list[str] = []
    assert replay(files, replayed=done) == notes(files, reason)
    assert done == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_episode_steps": 0}, "max_episode_steps must be an integer >= 1, got 0"),
        ({"max_episode_steps": True}, "max_episode_steps must be an integer >= 1, got True"),
        ({"max_episode_steps": 2.5}, "max_episode_steps must be an integer >= 1, got 2.5"),
        ({"max_episode_steps": "9"}, "max_episode_steps must be an integer >= 1, got '9'"),
        ({"disable_env_checker": 1}, "disable_env_checker must be a bool, got 1"),
        ({"disable_env_checker": "yes"}, "disable_env_checker must be a bool, got 'yes'"),
        (
            {"gravity": 2.0},
            "gravity are not arguments of CartPole-v1's registration or constructor (replay "
            "them with --replay-trust-env-args, or trust_env_args=True, if you trust this file)",
        ),
    ],
)
def test_env_arguments_refuses_what_the_recorder_does_not_write(
    kwargs: dict[str, Any], message: str
) -> None:
    spec = gym.spec("CartPole-v1")
    with pytest.raises(ValueError, match=r"^env_kwargs ") as raised:
        env_arguments({"env_kwargs": kwargs}, spec)
    assert str(raised.value) == f"env_kwargs {message}"
    assert env_arguments({"env_kwargs": kwargs}, spec, trust=True) == kwargs  # trusted: as is


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_episode_steps": 1},
        {"max_episode_steps": None, "disable_env_checker": None},
        {"disable_env_checker": True},
        {"disable_env_checker": False},
        {"sutton_barto_reward": False},  # named by CartPoleEnv's constructor
    ],
)
def test_env_arguments_passes_what_the_recorder_writes(kwargs: dict[str, Any]) -> None:
    assert env_arguments({"env_kwargs": kwargs}, gym.spec("CartPole-v1")) == kwargs


def test_arguments_named_by_the_registration_or_constructor_arrive(tmp_path: Path) -> None:
    """`bonus` is in Open's registration, not its constructor: it arrives (the rewards agree)."""
    opened = record(tmp_path / "open", OPEN)
    assert opened[0][1]["env_kwargs"] == {"bonus": 1.0}
    assert replay(opened) == []
    files = record(tmp_path)
    assert replay(with_recording(files, env_kwargs={"reset_fails": False})) == []


def test_trust_passes_an_unnamed_argument_and_it_arrives(tmp_path: Path) -> None:
    files = record(tmp_path, bonus=2.0)  # make_vec(..., bonus=2.0): rewards 3.5 and 4.5
    assert files[0][1]["env_kwargs"] == {"bonus": 2.0}
    assert replay(files) == notes(
        files,
        f"env_kwargs bonus are not arguments of {COUNTER}'s registration or constructor "
        "(replay them with --replay-trust-env-args, or trust_env_args=True, if you trust this "
        "file)",
    )
    assert replay(files, trust=True) == []
    assert replay(with_recording(files, env_kwargs={"bonus": 1.0}), trust=True) == [
        Finding("TK302", f"replay gives reward {got} at step 0, the file holds {held}", path, b, 0)
        for path, _ in files[:1]
        for b, (got, held) in enumerate([(2.5, 3.5), (3.5, 4.5)])
    ]


# --------------------------------------------------------------- envs that cannot be made


def test_an_env_that_cannot_be_made_is_a_note_with_its_arguments(tmp_path: Path) -> None:
    files = record(tmp_path)
    update = {"env_kwargs": {"max_episode_steps": 6, "fail": "no  env\n today"}}
    done: list[str] = []
    assert replay(with_recording(files, **update), replayed=done) == notes(
        files,
        f"cannot make env {COUNTER!r}(max_episode_steps=6, fail='no  env\\n today'): "
        "RuntimeError: no env today",
    )
    assert done == []


@pytest.mark.parametrize(("size", "cut"), [(300, False), (301, True)])
def test_the_env_s_error_is_cut_at_300_characters(tmp_path: Path, size: int, cut: bool) -> None:
    files = record(tmp_path, files=1)
    error = "RuntimeError: " + "x" * (size - len("RuntimeError: "))
    [note] = replay(with_recording(files, env_kwargs={"fail": error[14:]}))
    reason = note.message.rpartition(": RuntimeError")[2]
    shown = error[:297] + "..." if cut else error
    assert "RuntimeError" + reason == shown
    assert len(shown) == 300


def test_an_env_whose_module_is_missing_is_a_note(tmp_path: Path) -> None:
    files = record(tmp_path)
    missing = "ModuleNotFoundError: No module named 'trajkit_no_such_module'"
    for env_kwargs in [{}, {"depth": 3}]:  # made, or its constructor read for `depth`
        found = replay(with_recording(files, env_id=MISSING, env_kwargs=env_kwargs))
        assert found == notes(files, f"cannot make env {MISSING!r}: {missing}")


def test_an_env_that_cannot_be_reset_is_a_note_per_env(tmp_path: Path) -> None:
    files = record(tmp_path)
    found = replay(with_recording(files, env_kwargs={"reset_fails": True}))
    path = files[0][0]
    assert found == [
        *(
            Finding(
                "TK300",
                f"cannot replay env {b} past its reset: the env raised RuntimeError: no reset "
                "today",
                path,
                b,
            )
            for b in (0, 1)
        ),
        *notes(files[1:], f"the replay of every env stopped in {path} or before"),
    ]


def test_an_env_that_raises_while_stepped_stops_that_env_only(tmp_path: Path) -> None:
    files = record(tmp_path)
    actions = trajkit.load(files[0][0]).model_outs.arrays["actions"].copy()
    actions[4, 1] = 7  # Counter has no action 7: its step raises
    edit(files[0], model_outs={"actions": actions})
    rews = trajkit.load(files[1][0]).rews.copy()
    rews[2, :] = 9.0
    edit(files[1], rews=rews)
    done: list[str] = []
    assert replay(files, replayed=done) == [
        Finding(
            "TK300",
            "cannot replay env 1 past step 4: the env raised ValueError: no action 7",
            files[0][0],
            1,
            4,
        ),
        Finding(
            "TK302", "replay gives reward 1.5 at step 2, the file holds 9.0", files[1][0], 0, 2
        ),
    ]
    assert done == [path for path, _ in files]


def test_a_later_file_with_another_number_of_envs_is_not_replayed(tmp_path: Path) -> None:
    """A later file of another recording under the same id (num_envs 1): the file is named."""
    files = record(tmp_path)
    path, recording = files[1]
    r = trajkit.load(path)
    narrow = r.replace(
        states=r.states[:, :1],
        obses=r.obses[:, :1],
        rews=r.rews[:, :1],
        dones=r.dones[:, :1],
        truncated=None if r.truncated is None else r.truncated[:, :1],
        final_values=None if r.final_values is None else r.final_values[:, :1],
        final_obses=None,
        model_outs={"actions": r.model_outs.arrays["actions"][:, :1]},
    )
    files[1] = (path, {**recording, "num_envs": 1})
    trajkit.save(narrow, path, recording=files[1][1])
    done: list[str] = []
    [found] = replay(files, replayed=done)
    assert (found.code, found.path, found.env, found.step) == ("TK300", path, None, None)
    rid = files[0][1]["id"]
    assert found.message == (
        f"cannot replay: {path} holds 1 env(s), but recording {rid} has num_envs = 2"
    )
    assert done == [files[0][0]]  # the first file only


def test_an_env_whose_close_raises_changes_no_finding(tmp_path: Path) -> None:
    files = record(tmp_path)
    assert replay(with_recording(files, env_kwargs={"close_fails": True})) == []


# ------------------------------------------------------------- differences, where and what


def test_the_first_difference_of_each_kind_in_each_env_is_reported(tmp_path: Path) -> None:
    files = record(tmp_path)
    r = trajkit.load(files[0][0])
    obses, rews = r.obses.copy(), r.rews.copy()
    obses[0, 1, 1, 1] = 7.0  # env 1's reset observation: its action cell
    obses[5, 1, 1, 0] = 8.0
    rews[1, 0], rews[3, 0] = 4.0, 5.0
    edit(files[0], obses=obses, rews=rews)
    rews = trajkit.load(files[1][0]).rews.copy()
    rews[0, 0] = 6.0  # env 0 has its TK302 already
    edit(files[1], rews=rews)
    path = files[0][0]
    assert replay(files) == [
        Finding("TK302", "replay gives reward 1.5 at step 1, the file holds 4.0", path, 0, 1),
        Finding(
            "TK301",
            "replay gives another observation at row 0: obses[..., 1, 1] is 0.0 in the env, "
            "7.0 in the file",
            path,
            1,
            0,
        ),
    ]


@pytest.mark.parametrize(
    ("row", "truncation", "message"),
    [
        (4, 0, "replay terminates the episode at step 3, the file holds no end (dones[4] = 0)"),
        (
            2,
            0,
            "replay does not end the episode at step 1, the file holds an episode end "
            "(dones[2] = 1)",
        ),
        (
            4,
            1,
            "replay terminates the episode at step 3, the file holds a truncation (dones[4] = 1)",
        ),
    ],
    ids=["no-end", "end", "truncation"],
)
def test_an_episode_end_that_differs_is_placed(
    tmp_path: Path, row: int, truncation: int, message: str
) -> None:
    """Where one ends and the other does not, that env's replay stops; not for the kind."""
    files = record(tmp_path)
    r = trajkit.load(files[0][0])
    dones = r.dones.copy()
    dones[row, 0] = 1 - dones[row, 0] if not truncation else 1
    assert r.truncated is not None
    truncated = r.truncated.copy()
    truncated[row - 1, 0] = truncation
    edit(files[0], dones=dones, truncated=truncated, final_obses=None)
    rews = trajkit.load(files[1][0]).rews.copy()
    rews[0, :] = 9.0
    edit(files[1], rews=rews)
    replayed = [(0, 1.5), (1, 2.5)] if truncation else [(1, 2.5)]
    assert replay(files) == [
        Finding("TK303", message, files[0][0], 0, row - 1),
        *(
            Finding("TK302", f"replay gives reward {got} at step 0, the file holds 9.0", path, b, 0)
            for path, _ in files[1:]
            for b, got in replayed
        ),
    ]


def test_a_final_observation_that_differs_is_placed(tmp_path: Path) -> None:
    files = record(tmp_path)
    r = trajkit.load(files[0][0])
    assert r.final_obses is not None
    finals = r.final_obses.copy()
    finals[1, 1, 0] = 2.0  # the second episode end: env 1's, at step 3 (start 6)
    edit(files[0], final_obses=finals)
    assert replay(files) == [
        Finding(
            "TK301",
            "replay gives another final observation at step 3: final_obses[..., 1, 0] is 6.0 "
            "in the env, 2.0 in the file",
            files[0][0],
            1,
            3,
        )
    ]


def test_observations_of_another_shape_are_shown_whole(tmp_path: Path) -> None:
    files = record(tmp_path, files=1)
    r = trajkit.load(files[0][0])
    edit(files[0], obses=r.obses[..., 0], final_obses=None)  # [T+1, B, 2]: a column of each
    found = replay(files)
    assert found == [
        Finding(
            "TK301",
            f"replay gives another observation at row 0: obses is {env} in the env, "
            f"{held} in the file",
            files[0][0],
            b,
            0,
        )
        for b, (env, held) in enumerate(
            [
                ("[[0.1, 0. ],\n [5. , 0. ]]", "[0.1, 5. ]"),
                ("[[0.1, 0. ],\n [6. , 0. ]]", "[0.1, 6. ]"),
            ]
        )
    ]


def test_a_scalar_observation_is_shown_as_a_number(tmp_path: Path) -> None:
    files = record(tmp_path, SCALAR, files=1)
    r = trajkit.load(files[0][0])
    obses = r.obses.copy()
    obses[3, 0] = 7.5
    edit(files[0], obses=obses)
    assert replay(files) == [
        Finding(
            "TK301",
            "replay gives another observation at row 3: obses is 8.0 in the env, 7.5 in the file",
            files[0][0],
            0,
            3,
        )
    ]


def test_observations_kept_in_a_narrower_dtype_compare_in_it(tmp_path: Path) -> None:
    """The file keeps float16 observations: the env's 0.1 is compared as float16's 0.1."""
    files = record(tmp_path, files=1)
    r = trajkit.load(files[0][0])
    obses = r.obses.astype(np.float16)
    obses[2, 0, 1, 0] = 9.0  # after the 0.1, which float16 does not hold
    edit(files[0], obses=obses, final_obses=None)
    assert replay(files) == [
        Finding(
            "TK301",
            "replay gives another observation at row 2: obses[..., 1, 0] is 5.0 in the env, "
            "9.0 in the file",
            files[0][0],
            0,
            2,
        )
    ]


def test_a_leaf_the_env_does_not_give_is_named(tmp_path: Path) -> None:
    files = record(tmp_path, files=1)
    r = trajkit.load(files[0][0])
    edit(files[0], obses={"grid": r.obses}, final_obses=None)
    assert replay(files) == [
        Finding("TK301", "replay gives no obses['grid']", files[0][0], b, 0) for b in (0, 1)
    ]
