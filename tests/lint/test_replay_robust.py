"""Replay never aborts: a recording whose env cannot be made or stepped is a TK300 note.

Each case runs `trajkit lint --replay` as users run it, in a fresh interpreter, on a real
CartPole recording whose `recording` metadata was edited the way a hostile or a stale file
would hold it; the data findings of the other files are kept.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trajkit

gym = pytest.importorskip("gymnasium")
from trajkit.gym import RolloutRecorder  # noqa: E402


def _cartpole(obs: Any) -> dict[str, Any]:
    return {"actions": (obs[:, 2] + 0.3 * obs[:, 3] > 0).astype(np.int64)}


def _recorded(folder: Path, env_id: str = "CartPole-v1", **update: Any) -> Path:
    """One recorded file, its `recording` updated with `update`; and a file with a TK001."""
    folder.mkdir(exist_ok=True)
    env = gym.make_vec(env_id, num_envs=2, vectorization_mode="sync", max_episode_steps=15)
    recorder = RolloutRecorder(env, _cartpole, seed=3)
    rollout = recorder.record(24)
    env.close()
    path = folder / "a-recorded.npz"
    trajkit.save(rollout, path, recording={**recorder.recording, **update})
    (folder / "b-other.npz").write_bytes(b"not a rollout")  # TK001, an error, in another file
    return path


def _lint(folder: Path, *extra: str, script: str | None = None) -> tuple[int, list[Any], str]:
    """`trajkit lint --replay --json folder` in a fresh interpreter: code, findings, stderr."""
    argv = ["lint", "--replay", "--json", "--no-config", "-j", "1", *extra, str(folder)]
    if script is None:
        command = [sys.executable, "-m", "trajkit", *argv]
    else:  # register envs first, as a user's package would
        run = f"{script}\nimport sys\nfrom trajkit.cli import main\nsys.exit(main(sys.argv[1:]))"
        command = [sys.executable, "-c", run, *argv]
    done = subprocess.run(command, capture_output=True, text=True, cwd=folder, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    findings = [json.loads(line) for line in done.stdout.splitlines()]
    return done.returncode, findings, done.stderr


def _notes(findings: list[Any]) -> list[Any]:
    return [f for f in findings if f["code"] == "TK300"]


def _kept(findings: list[Any]) -> None:
    """The other file's finding is reported (replay's note did not lose it)."""
    assert [(f["code"], Path(f["path"]).name) for f in findings if f["code"] == "TK001"] == [
        ("TK001", "b-other.npz")
    ]


@pytest.mark.parametrize(
    ("update", "message"),
    [
        (
            {"env_kwargs": {"num_envs": 4}},
            "cannot replay: env_kwargs holds num_envs, which trajkit's recorder keeps apart",
        ),
        (
            {"env_kwargs": {"vectorization_mode": "async"}},
            "cannot replay: env_kwargs holds vectorization_mode, which trajkit's recorder "
            "keeps apart",
        ),
        (
            {"seed": -1},
            "cannot replay: the seed -1 is negative (Gymnasium seeds are integers >= 0)",
        ),
        (
            {"env_kwargs": {"max_episode_steps": -3}},
            "cannot replay: env_kwargs max_episode_steps must be an integer >= 1, got -3",
        ),
        (
            {"env_kwargs": {"wrappers": ["RecordEpisodeStatistics"]}},
            "cannot replay: env_kwargs holds wrappers, which are not re-created",
        ),
        (
            {"env_kwargs": {"gravity": 20.0}},
            "cannot replay: env_kwargs gravity are not arguments of CartPole-v1's registration "
            "or constructor (replay them with --replay-trust-env-args",
        ),
    ],
    ids=["num_envs", "vectorization_mode", "seed", "limit", "wrappers", "unknown"],
)
def test_refused_recordings_are_notes(tmp_path: Path, update: dict[str, Any], message: str) -> None:
    path = _recorded(tmp_path / "data", **update)
    code, findings, err = _lint(tmp_path / "data")
    [note] = _notes(findings)
    assert (note["path"], note["severity"]) == (str(path), "note")
    assert message in note["message"]
    _kept(findings)
    assert code == 1
    assert "Found 2 findings (1 error, 1 note) in 2 files." in err


def test_arguments_the_env_refuses_are_a_note_and_trust_passes_them(tmp_path: Path) -> None:
    path = _recorded(tmp_path / "data", env_kwargs={"gravity": 20.0})
    _, findings, _ = _lint(tmp_path / "data", "--replay-trust-env-args")
    [note] = _notes(findings)
    assert note["path"] == str(path)
    assert note["message"].startswith(
        "cannot replay: cannot make env 'CartPole-v1'(gravity=20.0): TypeError: "
    )
    assert "unexpected keyword argument 'gravity'" in note["message"]
    _kept(findings)


def test_a_value_the_env_refuses_is_a_note(tmp_path: Path) -> None:
    """`map_name` is FrozenLake's own argument, passed by default; "9x9" is no map."""
    path = _recorded(tmp_path / "data")
    r, recording = trajkit.load(path), trajkit.read_metadata(path).recording
    assert recording is not None
    update = {"env_id": "FrozenLake-v1", "env_kwargs": {"map_name": "9x9"}}
    trajkit.save(r, path, recording=recording.model_copy(update=update))
    _, findings, _ = _lint(tmp_path / "data")
    [note] = _notes(findings)
    assert (
        note["message"]
        == "cannot replay: cannot make env 'FrozenLake-v1'(map_name='9x9'): KeyError: '9x9'"
    )
    _kept(findings)


def test_render_mode_and_vector_kwargs_are_not_passed(tmp_path: Path) -> None:
    """A file cannot open a window nor pick the vector env's worker: replay runs clean."""
    kwargs = {"max_episode_steps": 15, "render_mode": "human", "vector_kwargs": {"copy": 3}}
    _recorded(tmp_path / "data", env_kwargs=kwargs)
    _, findings, _ = _lint(tmp_path / "data", "--select", "TK3")
    assert findings == []


def test_an_env_that_raises_while_stepped_is_a_note_at_its_step(tmp_path: Path) -> None:
    path = _recorded(tmp_path / "data")
    r, recording = trajkit.load(path), trajkit.read_metadata(path).recording
    assert recording is not None
    actions = r.model_outs.arrays["actions"].copy()
    actions[4, 1] = 7  # FrozenLake has no action 7: its step raises
    update = {"env_id": "FrozenLake-v1", "env_kwargs": {"map_name": "4x4"}}
    trajkit.save(
        r.replace(model_outs={"actions": actions}),
        path,
        recording=recording.model_copy(update=update),
    )
    _, findings, _ = _lint(tmp_path / "data", "--select", "TK3")
    [note] = _notes(findings)
    assert (note["path"], note["env"], note["step"]) == (str(path), 1, 4)
    assert note["message"].startswith("cannot replay env 1 past step 4: the env raised KeyError")


_MISSING = """
import gymnasium
gymnasium.register("Missing-v0", entry_point="trajkit_no_such_module:Env")
"""

_OPEN = """
import gymnasium
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

class Open(CartPoleEnv):
    def __init__(self, **kwargs):
        super().__init__()
        if kwargs:
            raise RuntimeError(f"got {sorted(kwargs)}")

gymnasium.register("Open-v0", entry_point=Open)
"""


def test_a_missing_optional_dependency_is_a_note(tmp_path: Path) -> None:
    path = _recorded(tmp_path / "data", env_id="CartPole-v1")
    r, recording = trajkit.load(path), trajkit.read_metadata(path).recording
    assert recording is not None
    update = {"env_id": "Missing-v0", "env_kwargs": {"depth": 3}}
    trajkit.save(r, path, recording=recording.model_copy(update=update))
    _, findings, _ = _lint(tmp_path / "data", script=_MISSING)
    [note] = _notes(findings)
    assert note["message"].startswith("cannot replay: cannot make env 'Missing-v0': ")
    assert "trajkit_no_such_module" in note["message"]
    _kept(findings)


@pytest.mark.skipif(importlib.util.find_spec("Box2D") is not None, reason="Box2D is installed")
def test_a_box2d_env_without_box2d_is_a_note(tmp_path: Path) -> None:
    path = _recorded(tmp_path / "data")
    r, recording = trajkit.load(path), trajkit.read_metadata(path).recording
    assert recording is not None
    update = {"env_id": "LunarLander-v3", "env_kwargs": {}}
    trajkit.save(r, path, recording=recording.model_copy(update=update))
    _, findings, _ = _lint(tmp_path / "data")
    [note] = _notes(findings)
    assert note["message"].startswith(
        "cannot replay: cannot make env 'LunarLander-v3': DependencyNotInstalled: Box2D is not "
        "installed"
    )
    _kept(findings)


def test_arguments_behind_kwargs_need_trust(tmp_path: Path) -> None:
    """An env taking `**kwargs` gets a file's unnamed arguments only with the opt-in."""
    path = _recorded(tmp_path / "data")
    r, recording = trajkit.load(path), trajkit.read_metadata(path).recording
    assert recording is not None
    update = {"env_id": "Open-v0", "env_kwargs": {"payload": "x"}}
    trajkit.save(r, path, recording=recording.model_copy(update=update))
    _, findings, _ = _lint(tmp_path / "data", "--select", "TK3", script=_OPEN)
    [note] = findings
    assert "env_kwargs payload are not arguments of Open-v0's registration" in note["message"]
    _, findings, _ = _lint(
        tmp_path / "data", "--select", "TK3", "--replay-trust-env-args", script=_OPEN
    )
    [note] = findings
    assert note["message"] == (
        "cannot replay: cannot make env 'Open-v0'(payload='x'): RuntimeError: got ['payload']"
    )


def test_trust_needs_replay(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trajkit", "lint", "--replay-trust-env-args", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 2
    assert "--replay-trust-env-args needs --replay" in done.stderr


_BROKEN = """
import gymnasium
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

class Broken(CartPoleEnv):
    def reset(self, *, seed=None, options=None):
        raise RuntimeError("no reset today")

gymnasium.register("Broken-v0", entry_point=Broken)
"""


def test_an_env_that_cannot_be_reset_is_a_note_per_env(tmp_path: Path) -> None:
    path = _recorded(tmp_path / "data")
    r, recording = trajkit.load(path), trajkit.read_metadata(path).recording
    assert recording is not None
    update = {"env_id": "Broken-v0", "env_kwargs": {}}
    trajkit.save(r, path, recording=recording.model_copy(update=update))
    _, findings, _ = _lint(tmp_path / "data", script=_BROKEN)
    assert [(f["env"], f["step"], f["message"]) for f in _notes(findings)] == [
        (
            b,
            None,
            f"cannot replay env {b} past its reset: the env raised RuntimeError: no reset today",
        )
        for b in (0, 1)
    ]
    _kept(findings)
