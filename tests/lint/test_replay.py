"""Replay: recordings made by RolloutRecorder replay exactly; a tampered step is pinpointed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trajkit
from trajkit.lint import CHECKS, lint
from trajkit.lint.config import LintOptions
from trajkit.lint.run import LintRun

gym = pytest.importorskip("gymnasium")
from trajkit.gym import RolloutRecorder  # noqa: E402

SAME_STEP = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}
DISABLED = {"autoreset_mode": gym.vector.AutoresetMode.DISABLED}


def _cartpole(obs: Any) -> dict[str, Any]:
    return {"actions": (obs[:, 2] + 0.3 * obs[:, 3] > 0).astype(np.int64)}


def _pendulum(obs: Any) -> dict[str, Any]:
    return {"actions": np.clip(-2.0 * obs[:, 2:3], -2.0, 2.0).astype(np.float32)}


def _record(
    folder: Path,
    env_id: str,
    policy: Any,
    *,
    files: int = 3,
    steps: int = 24,
    seed: int | None = 7,
    **make: Any,
) -> list[Path]:
    folder.mkdir(exist_ok=True)
    env = gym.make_vec(env_id, num_envs=2, vectorization_mode="sync", **make)
    recorder = RolloutRecorder(env, policy, seed=seed)
    paths = []
    for i in range(files):
        rollout = recorder.record(steps)
        path = folder / f"{env_id}-{i}.npz"
        trajkit.save(rollout, path, recording=recorder.recording)
        paths.append(path)
    env.close()
    return paths


def _replay(paths: Any) -> list[Any]:
    return lint(paths, select=["TK3"], replay=True, jobs=1)


@pytest.mark.parametrize(
    ("env_id", "policy", "make"),
    [
        ("CartPole-v1", _cartpole, {"max_episode_steps": 15}),  # many resets
        ("Pendulum-v1", _pendulum, {}),
        ("CartPole-v1", _cartpole, {"max_episode_steps": 9, "vector_kwargs": SAME_STEP}),
        ("CartPole-v1", _cartpole, {"max_episode_steps": 9, "vector_kwargs": DISABLED}),
    ],
    ids=["CartPole-NEXT_STEP", "Pendulum", "CartPole-SAME_STEP", "CartPole-DISABLED"],
)
def test_recorder_recordings_replay_exactly(
    tmp_path: Path, env_id: str, policy: Any, make: dict[str, Any]
) -> None:
    paths = _record(tmp_path, env_id, policy, **make)
    meta = trajkit.read_metadata(paths[2])
    assert meta.format_version == 5  # a recording (4) with final_obses (5)
    assert meta.recording is not None
    assert (meta.recording.env_id, meta.recording.index, meta.recording.seed) == (env_id, 2, 7)
    assert _replay(tmp_path) == []
    assert lint(tmp_path, jobs=1) == []  # and the data checks agree with the recorder


def test_a_tampered_observation_is_pinpointed(tmp_path: Path) -> None:
    paths = _record(tmp_path, "CartPole-v1", _cartpole, max_episode_steps=15)
    r = trajkit.load(paths[1])
    r.obses[9, 1, 2] += 0.001
    trajkit.save(r, paths[1], recording=trajkit.read_metadata(paths[1]).recording)
    [found] = _replay(tmp_path)
    assert (found.code, found.path, found.env, found.step) == ("TK301", str(paths[1]), 1, 9)
    assert found.message.startswith("replay gives another observation at row 9: obses[..., 2] is")


def test_a_tampered_reward_and_episode_end(tmp_path: Path) -> None:
    paths = _record(tmp_path, "Pendulum-v1", _pendulum, files=1, max_episode_steps=10)
    r = trajkit.load(paths[0])
    recording = trajkit.read_metadata(paths[0]).recording
    r.rews[4, 0] *= 2
    assert r.truncated is not None
    r.truncated[9, 1] = 0  # the time limit cut it: recorded as a termination
    trajkit.save(r, paths[0], recording=recording)
    found = _replay(paths)
    assert [(f.code, f.env, f.step) for f in found] == [("TK302", 0, 4), ("TK303", 1, 9)]
    assert found[1].message == (
        "replay truncates the episode at step 9, the file holds an episode end (dones[10] = 1)"
    )


def test_what_cannot_be_replayed_is_a_note(tmp_path: Path) -> None:
    unseeded = _record(tmp_path / "a", "CartPole-v1", _cartpole, files=1, seed=None)
    later = _record(tmp_path / "b", "CartPole-v1", _cartpole, files=3)
    later[0].unlink()
    found = _replay([*unseeded, *later[1:]])
    assert [(f.code, f.severity, Path(f.path or "").name) for f in found] == [
        ("TK300", "note", "CartPole-v1-0.npz"),
        ("TK300", "note", "CartPole-v1-1.npz"),
        ("TK300", "note", "CartPole-v1-2.npz"),
    ]
    assert found[0].message == (
        "cannot replay: the first reset was not seeded (RolloutRecorder(seed=...))"
    )
    assert "index 0, which is not among the files (this is index 1)" in found[1].message
    gap = _record(tmp_path / "c", "CartPole-v1", _cartpole, files=3)
    gap[1].unlink()
    [note] = _replay(tmp_path / "c")
    assert note.path == str(gap[2])
    assert "index 1 of the recording is not among the files" in note.message


def test_no_env_id_or_unregistered(tmp_path: Path) -> None:
    path = _record(tmp_path, "CartPole-v1", _cartpole, files=1)[0]
    r, recording = trajkit.load(path), trajkit.read_metadata(path).recording
    assert recording is not None
    trajkit.save(r, path, recording=recording.model_copy(update={"env_id": "NoSuchEnv-v0"}))
    [note] = _replay(path)
    assert note.message.startswith("cannot replay: env id 'NoSuchEnv-v0' is not registered")
    trajkit.save(r, path, recording=recording.model_copy(update={"env_id": None}))
    assert _replay(path)[0].message == "cannot replay: the recording names no env id"


# ------------------------------------------------------------- replay accounts for every file


def test_a_recording_reused_for_every_file_is_reported_not_skipped(tmp_path: Path) -> None:
    """A recording dict captured once and saved with every file: only the first is placed."""
    paths = _record(tmp_path, "CartPole-v1", _cartpole, max_episode_steps=15)
    first = trajkit.read_metadata(paths[0]).recording
    for path in paths[1:]:
        r = trajkit.load(path)
        if path == paths[2]:
            r.obses[5, 0, 1] += 0.5  # an edited observation replay cannot place
        trajkit.save(r, path, recording=first)
    run = LintRun([str(tmp_path)], LintOptions(frozenset(CHECKS)), replay=True, jobs=1)
    found = list(run)
    assert run.replayed == [str(paths[0])]
    assert [(f.code, Path(f.path or "").name) for f in found if f.code in ("TK204", "TK300")] == [
        ("TK204", paths[1].name),
        ("TK204", paths[2].name),
        ("TK300", paths[1].name),
        ("TK300", paths[2].name),
    ]
    note = next(f for f in found if f.code == "TK300")
    assert note.message == (
        f"cannot replay: {paths[0]} holds index 0 of this recording too, and is replayed"
    )


def test_files_without_a_recording_are_named(tmp_path: Path) -> None:
    path = _record(tmp_path, "CartPole-v1", _cartpole, files=1)[0]
    trajkit.save(trajkit.load(path), tmp_path / "plain.npz")
    found = _replay(tmp_path)
    assert [(f.code, Path(f.path or "").name, f.message) for f in found] == [
        (
            "TK300",
            "plain.npz",
            "cannot replay: the file has no recording (trajkit.save(..., recording=...))",
        )
    ]


def test_files_after_every_env_stopped_are_named(tmp_path: Path) -> None:
    paths = _record(tmp_path, "CartPole-v1", _cartpole, max_episode_steps=15)
    r = trajkit.load(paths[0])
    recording = trajkit.read_metadata(paths[0]).recording
    dones = r.dones.copy()
    dones[4, :] = 1  # both envs "end" where the env does not: their replays stop
    trajkit.save(r.replace(dones=dones, final_obses=None), paths[0], recording=recording)
    notes = [f for f in _replay(tmp_path) if f.code == "TK300"]
    assert [Path(f.path or "").name for f in notes] == [p.name for p in paths[1:]]
    assert notes[0].message == (
        f"cannot replay: the replay of every env stopped in {paths[0]} or before"
    )


def test_the_command_says_how_many_files_it_replayed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from trajkit.cli import main

    _record(tmp_path, "CartPole-v1", _cartpole, max_episode_steps=15)
    trajkit.save(trajkit.load(tmp_path / "CartPole-v1-0.npz"), tmp_path / "plain.npz")
    assert (
        main(["lint", "--replay", "--no-config", "-j", "1", "--select", "TK3", str(tmp_path)]) == 0
    )
    err = capsys.readouterr().err
    assert err.endswith("Found 1 finding (1 note) in 4 files.\nReplayed 3 of 4 files.\n")


def test_a_tampered_final_observation_is_pinpointed(tmp_path: Path) -> None:
    paths = _record(tmp_path, "CartPole-v1", _cartpole, files=1, max_episode_steps=15)
    r = trajkit.load(paths[0])
    assert r.final_obses is not None
    t, b = (int(x) for x in np.argwhere(r.dones[1:] == 1)[0])
    finals = r.final_obses.copy()
    finals[0, 3] += 0.5
    trajkit.save(
        r.replace(final_obses=finals), paths[0], recording=trajkit.read_metadata(paths[0]).recording
    )
    [found] = _replay(paths)
    assert (found.code, found.env, found.step) == ("TK301", b, t)
    assert found.message.startswith(
        f"replay gives another final observation at step {t}: final_obses[..., 3] is"
    )
