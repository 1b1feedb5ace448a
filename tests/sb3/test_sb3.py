"""trajkit.sb3 on real stable-baselines3 runs: the converter, the callback, replay.

Every run is a real `learn()` of PPO or A2C, small enough to take about a second, on an env
whose time limit is short so that rollouts hold truncations (where SB3 folds the bootstrap
into the reward) as well as terminations.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from numpy.typing import NDArray
from stable_baselines3 import A2C, DQN, PPO
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

import trajkit
import trajkit.lint
import trajkit.sb3
import trajkit.sb3._callback
from trajkit import Rollout
from trajkit.sb3 import RolloutCheckError, TrajkitCallback, from_rollout_buffer

TOY = "trajkit-test/SB3Toy-v0"
LIMIT = 12


def _space(kind: str) -> spaces.Space[Any]:
    table: dict[str, spaces.Space[Any]] = {
        "box": spaces.Box(-1.0, 1.0, (3,), np.float32),
        "discrete": spaces.Discrete(5),
        "multidiscrete": spaces.MultiDiscrete([3, 4]),
        "multibinary": spaces.MultiBinary(3),
        "dict": spaces.Dict(
            {"cell": spaces.Discrete(4), "pos": spaces.Box(-1.0, 1.0, (2,), np.float32)}
        ),
    }
    return table[kind]


class ToyEnv(gym.Env[Any, Any]):
    """Observations drawn from the env's seeded generator; the reward depends on the action."""

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"]}  # noqa: RUF012 - Gymnasium's

    def __init__(
        self,
        obs: str = "box",
        action: str = "discrete",
        nan_after: int | None = None,
        cut_every: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        self.render_mode = render_mode
        self.observation_space = _space(obs)
        self.action_space = _space(action)
        self.nan_after = nan_after
        self.cut_every = cut_every  # the env truncates itself, before its time limit
        self.steps = 0

    def _draw(self, space: spaces.Space[Any]) -> Any:
        rng = self.np_random
        if isinstance(space, spaces.Dict):
            return {k: self._draw(s) for k, s in space.spaces.items()}
        if isinstance(space, spaces.Discrete):
            return np.int64(rng.integers(int(space.n)))
        if isinstance(space, spaces.MultiBinary):
            return rng.integers(2, size=space.shape).astype(np.int8)
        if isinstance(space, spaces.MultiDiscrete):
            return (rng.random(space.nvec.shape) * space.nvec).astype(np.int64)
        assert isinstance(space, spaces.Box)
        return rng.uniform(-1.0, 1.0, space.shape).astype(np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        return self._draw(self.observation_space), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.steps += 1
        if isinstance(self.action_space, spaces.Box):  # as Pendulum and MuJoCo envs do
            action = np.clip(action, self.action_space.low, self.action_space.high)
        reward = float(np.sum(np.asarray(action, np.float64))) * 0.5 + self.np_random.normal()
        if self.nan_after is not None and self.steps > self.nan_after:
            reward = float("nan")
        terminated = bool(self.np_random.random() < 0.05)
        cut = self.cut_every is not None and self.steps % self.cut_every == 0
        return self._draw(self.observation_space), reward, terminated, cut, {}


# The class is the entry point ("module:Class"), as users register theirs: replay passes a
# file's env arguments only where the constructor names them (a `**kwargs` factory needs trust).
gym.register(TOY, entry_point=f"{__name__}:ToyEnv", max_episode_steps=LIMIT)


class _Compare(BaseCallback):
    """After TrajkitCallback: compares its rollout with SB3's buffer, before training."""

    def __init__(self, check: TrajkitCallback) -> None:
        super().__init__()
        self.check = check
        self.rollouts: list[Rollout] = []
        self.truncations = 0

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        buffer: RolloutBuffer = self.model.rollout_buffer  # type: ignore[attr-defined]
        r = self.check.last_rollout
        assert r is not None
        gamma, lam = buffer.gamma, buffer.gae_lambda
        np.testing.assert_allclose(r.advantages(gamma, lam), buffer.advantages, atol=1e-5)
        np.testing.assert_allclose(r.returns(gamma, lam), buffer.returns, atol=1e-5)
        assert r.truncated is not None
        assert r.final_values is not None
        folded = r.rews + gamma * r.truncated * r.final_values
        np.testing.assert_allclose(folded, buffer.rewards, rtol=1e-6, atol=1e-5)
        np.testing.assert_array_equal(r.value_predictions()[:-1], buffer.values)
        self.truncations += int(r.truncated.sum())
        self.rollouts.append(r)


def _vec_env(env_id: str, n_envs: int = 2, **kwargs: Any) -> Any:
    env_kwargs = {"max_episode_steps": LIMIT} if env_id != TOY else {}
    return make_vec_env(env_id, n_envs=n_envs, seed=0, env_kwargs={**env_kwargs, **kwargs})


def _model(algo: str, env: Any, n_steps: int = 32) -> BaseAlgorithm:
    if algo == "ppo":
        return PPO(
            "MultiInputPolicy" if isinstance(env.observation_space, spaces.Dict) else "MlpPolicy",
            env,
            n_steps=n_steps,
            batch_size=n_steps * env.num_envs,
            n_epochs=1,
            seed=0,
            device="cpu",
        )
    return A2C(
        "MultiInputPolicy" if isinstance(env.observation_space, spaces.Dict) else "MlpPolicy",
        env,
        n_steps=n_steps,
        seed=0,
        device="cpu",
    )


CASES = [
    ("ppo", "CartPole-v1", {}),
    ("a2c", "CartPole-v1", {}),
    ("ppo", "Pendulum-v1", {}),
    ("a2c", "Pendulum-v1", {}),
    ("ppo", TOY, {"obs": "discrete", "action": "multidiscrete"}),
    ("ppo", TOY, {"obs": "multidiscrete", "action": "box"}),
    ("ppo", TOY, {"obs": "dict", "action": "discrete"}),
    ("a2c", TOY, {"obs": "dict", "action": "multidiscrete"}),
    ("a2c", TOY, {"obs": "multibinary", "action": "multibinary"}),
]


@pytest.mark.parametrize(
    ("algo", "env_id", "kwargs"),
    CASES,
    ids=[f"{a}-{e.split('/')[-1]}-{'-'.join(k.values())}" for a, e, k in CASES],
)
def test_advantages_and_returns_equal_sb3s_buffer(
    algo: str, env_id: str, kwargs: dict[str, Any]
) -> None:
    env = _vec_env(env_id, **kwargs)
    model = _model(algo, env)
    check = TrajkitCallback()
    compare = _Compare(check)
    model.learn(32 * 2 * 3, callback=CallbackList([check, compare]))
    assert check.rollouts == 3 == len(compare.rollouts)
    assert compare.truncations > 0  # the folded bootstrap was undone somewhere
    first, second = compare.rollouts[:2]
    for (path, last), (_, row0) in zip(
        trajkit._core.tree.flatten(first.obses),
        trajkit._core.tree.flatten(second.obses),
        strict=True,
    ):
        np.testing.assert_array_equal(last[-1], row0[0], err_msg=str(path))
    np.testing.assert_array_equal(first.dones[-1], second.dones[0])


def test_rewards_are_the_envs_and_truncations_carry_their_final_observation() -> None:
    env = _vec_env("CartPole-v1")
    check = TrajkitCallback(info_keys=None)
    compare = _Compare(check)
    _model("ppo", env).learn(32 * 2 * 3, callback=CallbackList([check, compare]))
    for r in compare.rollouts:
        np.testing.assert_array_equal(r.rews, 1.0)  # CartPole's reward, bootstrap removed
        assert r.final_obses is not None
        assert len(r.final_obses) == int(r.dones[1:].sum())
        ends = np.argwhere(r.dones[1:] == 1)
        assert r.truncated is not None
        for (t, b), info in zip(ends, (r.infos[t][b] for t, b in ends), strict=True):
            assert info["TimeLimit.truncated"] == bool(r.truncated[t, b])
            assert info["episode"]["l"] >= 1
            assert "terminal_observation" not in info


def test_pendulum_actions_are_the_policys_samples() -> None:
    env = _vec_env("Pendulum-v1")
    check = TrajkitCallback()
    compare = _Compare(check)
    _model("ppo", env).learn(64, callback=CallbackList([check, compare]))
    r = compare.rollouts[0]
    actions = r.model_outs.arrays["actions"]
    assert actions.shape == (33, 2, 1)
    assert actions.dtype == np.float32
    np.testing.assert_array_equal(actions[-1], actions[-2])  # the padded row


def test_saved_rollouts_replay_in_their_env(tmp_path: Path) -> None:
    env = _vec_env("CartPole-v1")
    check = TrajkitCallback(tmp_path, lint=True)
    _model("ppo", env).learn(32 * 2 * 3, callback=check)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["rollout-00000.npz", "rollout-00001.npz", "rollout-00002.npz"]
    meta = trajkit.read_metadata(tmp_path / files[1])
    assert meta.recording is not None
    assert (meta.recording.env_id, meta.recording.index, meta.recording.seed) == (
        "CartPole-v1",
        1,
        0,
    )
    assert meta.recording.env_kwargs == {"max_episode_steps": LIMIT, "render_mode": "rgb_array"}
    # TK3: replay. (Lint's TK101 heuristic warns here of an episode that CartPole terminated
    # at exactly the time limit, which SB3 and trajkit both count as a termination.)
    found = trajkit.lint.lint(tmp_path, replay=True, select=["TK3"], jobs=1)
    assert [f.format() for f in found] == []


@pytest.mark.parametrize(
    "kwargs", [{"obs": "dict", "action": "multidiscrete"}, {"obs": "discrete", "action": "box"}]
)
def test_a_registered_custom_env_replays(tmp_path: Path, kwargs: dict[str, Any]) -> None:
    env = _vec_env(TOY, **kwargs)
    _model("ppo", env).learn(32 * 2 * 2, callback=TrajkitCallback(tmp_path))
    found = trajkit.lint.lint(tmp_path, replay=True, select=["TK3"], jobs=1)
    assert [f.format() for f in found] == []


def test_vec_normalize_is_named_and_replay_declines(tmp_path: Path) -> None:
    env = VecNormalize(_vec_env("CartPole-v1"))
    check = TrajkitCallback(tmp_path)
    _model("ppo", env).learn(64, callback=check)
    assert check.recording is not None
    assert check.recording["wrappers"] == ["VecNormalize"]
    found = trajkit.lint.lint(tmp_path, replay=True, select=["TK3"], jobs=1)
    assert {f.code for f in found} == {"TK300"}
    assert "VecNormalize" in found[0].message


def test_an_invalid_rollout_stops_training_naming_it() -> None:
    env = _vec_env(TOY, nan_after=40)
    model = _model("ppo", env)
    with pytest.raises(
        RolloutCheckError,
        match=r"^rollout 1 of this run \(up to num_timesteps=128\) is "
        r"invalid: .*rews must be finite",
    ) as caught:
        model.learn(32 * 2 * 3, callback=TrajkitCallback())
    assert isinstance(caught.value.__cause__, trajkit.RolloutValidationError)


def test_a_lint_finding_stops_training_unless_ignored(tmp_path: Path) -> None:
    env = _vec_env(TOY, cut_every=5)  # truncations before the recorded time limit
    with pytest.raises(RolloutCheckError, match=r"^rollout 0 of this run .* fails lint: .*TK113"):
        _model("ppo", env).learn(64, callback=TrajkitCallback(lint=True))
    check = TrajkitCallback(lint=True, ignore=["TK113"])
    _model("ppo", _vec_env(TOY, cut_every=5)).learn(64, callback=check)
    assert check.rollouts == 1


def test_a_bad_lint_selector_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="TK999"):
        TrajkitCallback(lint=True, select=["TK999"])


def test_off_policy_algorithms_are_refused() -> None:
    model = DQN("MlpPolicy", "CartPole-v1", learning_starts=0, seed=0, device="cpu")
    with pytest.raises(TypeError, match=r"on-policy algorithms \(PPO, A2C\); DQN has none"):
        model.learn(8, callback=TrajkitCallback())


# ------------------------------------------------------------------------- the converter alone


def _filled_buffer(T: int = 3, B: int = 2, starts: tuple[int, ...] = (0, 0, 1)) -> RolloutBuffer:
    buffer = RolloutBuffer(
        T, spaces.Box(-1, 1, (2,)), spaces.Discrete(3), device="cpu", gamma=0.9, n_envs=B
    )
    for t in range(T):
        buffer.add(
            np.full((B, 2), t / 10, np.float32),
            np.full((B, 1), t % 3),
            np.ones(B, np.float32),
            np.full(B, starts[t], bool),
            torch.zeros(B, 1),
            torch.zeros(B),
        )
    return buffer


def _convert(buffer: RolloutBuffer, **kwargs: Any) -> Rollout:
    B = buffer.n_envs
    return from_rollout_buffer(buffer, np.zeros((B, 2)), np.zeros(B), np.zeros(B), **kwargs)


def test_the_converter_lays_out_sb3s_arrays() -> None:
    buffer = _filled_buffer()
    r = _convert(buffer)
    assert r.num_steps == 3
    assert r.batch_size == 2
    assert r.states.shape == (4, 2, 0)
    np.testing.assert_array_equal(r.model_outs.arrays["actions"][:, 0], [0, 1, 2, 2])
    np.testing.assert_array_equal(r.dones[:, 0], [0, 0, 1, 0])
    assert r.truncated is None
    assert r.final_values is None


TRUNCATED = np.array([[0, 0], [1, 0], [0, 0]], np.float32)
FINALS = np.array([[0, 0], [2.0, 0], [0, 0]], np.float32)


def _folded_buffer() -> RolloutBuffer:
    buffer = _filled_buffer()
    buffer.rewards += 0.9 * TRUNCATED * FINALS
    return buffer


def test_the_converter_undoes_the_folded_bootstrap() -> None:
    r = _convert(_folded_buffer(), truncated=TRUNCATED, final_values=FINALS)
    np.testing.assert_array_equal(r.rews, 1.0)
    r = _convert(
        _folded_buffer(), truncated=TRUNCATED, final_values=FINALS, env_rewards=np.ones((3, 2))
    )
    np.testing.assert_array_equal(r.rews, 1.0)


ARRAY = NDArray[np.float64]

BAD: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"truncated": TRUNCATED}, ValueError, "truncated and final_values must be given together"),
    (
        {"truncated": TRUNCATED[:2], "final_values": FINALS[:2]},
        ValueError,
        r"truncated has shape \(2, 2\), expected \(T, B\) = \(3, 2\)",
    ),
    (
        {"env_rewards": np.ones((3, 2))},
        ValueError,
        r"env_rewards do not match the buffer: rewards\[1, 0\] is 2\.79.* gives 1\.0 "
        r"\(env reward 1\.0, bootstrap 0\.0\): the step data is not this buffer's",
    ),
    (
        {"env_rewards": np.ones(3)},
        ValueError,
        r"env_rewards has shape \(3,\), expected \(T, B\) = \(3, 2\)",
    ),
]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    BAD,
    ids=["alone", "truncated-shape", "rewards-mismatch", "rewards-shape"],
)
def test_the_converter_refuses_inconsistent_step_data(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        _convert(_folded_buffer(), **kwargs)


def test_the_converter_refuses_a_buffer_it_cannot_read() -> None:
    buffer = _filled_buffer()
    buffer.pos, buffer.full = 2, False
    with pytest.raises(ValueError, match=r"buffer holds 2 of its 3 steps"):
        _convert(buffer)
    buffer = _filled_buffer()
    buffer.compute_returns_and_advantage(torch.zeros(2, 1), np.zeros(2))
    next(buffer.get(2))
    with pytest.raises(ValueError, match=r"already read by get\(\), which flattens"):
        _convert(buffer)
    with pytest.raises(TypeError, match=r"RolloutBuffer or DictRolloutBuffer, got dict"):
        from_rollout_buffer({}, None, [0], [0])  # type: ignore[arg-type]


def test_the_converter_checks_the_bootstrap_row() -> None:
    buffer = _filled_buffer()
    with pytest.raises(ValueError, match=r"last_obs has shape \(3, 2\), expected \(2, 2\)"):
        from_rollout_buffer(buffer, np.zeros((3, 2)), np.zeros(2), np.zeros(2))
    with pytest.raises(ValueError, match=r"last_values has shape \(3,\), expected \(2,\)"):
        from_rollout_buffer(buffer, np.zeros((2, 2)), np.zeros(2), np.zeros(3))
    with pytest.raises(trajkit.RolloutValidationError, match=r"dones"):
        from_rollout_buffer(buffer, np.zeros((2, 2)), np.full(2, 0.5), np.zeros(2))


# ------------------------------------------------------------------------- in a fresh process

_SCRIPT = """
import sys
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from trajkit.sb3 import TrajkitCallback

env = make_vec_env("CartPole-v1", n_envs=2, seed=0, env_kwargs={"max_episode_steps": 12})
model = PPO("MlpPolicy", env, n_steps=32, batch_size=64, n_epochs=1, seed=0, device="cpu")
check = TrajkitCallback(sys.argv[1], lint=True, verbose=1)
model.learn(192, callback=check)
print("rollouts", check.rollouts)
"""


def test_a_run_saves_lints_and_replays_in_fresh_processes(tmp_path: Path) -> None:
    trained = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert trained.returncode == 0, trained.stderr
    assert trained.stdout.splitlines()[-1] == "rollouts 3"
    assert "trajkit: saved rollout 2 to" in trained.stdout
    linted = subprocess.run(
        [
            sys.executable,
            "-m",
            "trajkit",
            "lint",
            "--replay",
            "--select",
            "TK3",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert linted.returncode == 0, linted.stdout + linted.stderr


def test_the_bootstrap_observation_is_not_cast_into_another_value() -> None:
    buffer = RolloutBuffer(
        2, spaces.Box(0, 255, (2,), np.uint8), spaces.Discrete(2), device="cpu", n_envs=1
    )
    for _ in range(2):
        buffer.add(
            np.zeros((1, 2)),
            np.zeros((1, 1)),
            np.zeros(1),
            np.zeros(1, bool),
            torch.zeros(1, 1),
            torch.zeros(1),
        )
    with pytest.raises(
        ValueError, match=r"last_obs must fit in uint8 \[0, 255\], got 300 at \(b=0, 1\)"
    ):
        from_rollout_buffer(buffer, np.array([[1, 300]]), np.zeros(1), np.zeros(1))
    r = from_rollout_buffer(buffer, np.array([[1, 255]]), np.zeros(1), np.zeros(1))
    assert r.obses.dtype == np.uint8


def test_a_second_learn_is_a_new_recording_without_a_seed(tmp_path: Path) -> None:
    model = _model("ppo", _vec_env("CartPole-v1"))
    check = TrajkitCallback(tmp_path)
    model.learn(64, callback=check)
    first = check.recording
    model.learn(64, callback=check, reset_num_timesteps=False)
    assert first is not None
    assert check.recording is not None
    assert check.recording["id"] != first["id"]
    assert (first["seed"], check.recording["seed"]) == (0, None)
    meta = trajkit.read_metadata(tmp_path / "rollout-00001.npz")
    assert meta.recording is not None
    assert meta.recording.index == 0  # the first rollout of the second learn()
    found = trajkit.lint.lint(tmp_path, replay=True, select=["TK3"], jobs=1)
    assert [(Path(f.path or "").name, f.code) for f in found] == [("rollout-00001.npz", "TK300")]
    assert "not seeded" in found[0].message


def test_trajkit_does_not_import_sb3_and_its_names_are_sorted() -> None:
    code = "import sys, trajkit, trajkit.cli; print('stable_baselines3' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "False"
    assert trajkit.sb3.__all__ == sorted(trajkit.sb3.__all__)


def test_per_env_wrappers_beyond_make_and_monitor_are_named() -> None:
    plain = trajkit.sb3._callback._describe_vec_env(_vec_env("CartPole-v1"))
    assert plain["wrappers"] == []
    assert (plain["vectorization_mode"], plain["autoreset_mode"]) == ("sync", "SAME_STEP")
    wrapped = make_vec_env(
        "CartPole-v1", n_envs=2, seed=0, wrapper_class=gym.wrappers.FlattenObservation
    )
    assert trajkit.sb3._callback._describe_vec_env(wrapped)["wrappers"] == ["FlattenObservation"]


# ----------------------------------------------------- what the converter stores, and names


def test_the_converter_copies_the_final_observations() -> None:
    finals = np.zeros((2, 2), np.float32)  # two episode ends: step 1 of each env
    r = _convert(_filled_buffer(), final_obses=finals)
    finals[0, 0] = np.nan  # the caller's array, written after the conversion
    assert r.final_obses is not None
    np.testing.assert_array_equal(r.final_obses, 0.0)
    r.revalidate()


@pytest.mark.parametrize("truncated", [0, 1], ids=["not-truncated", "truncated"])
def test_a_non_finite_final_value_is_named_as_one(truncated: int) -> None:
    cut = TRUNCATED.copy()
    cut[0, 1] = truncated
    finals = FINALS.copy()
    finals[0, 1] = np.nan
    # The one problem, named: not `rews` (which `gamma * truncated * final_values` made NaN).
    with pytest.raises(ValueError, match=r"^final_values must be finite, got nan at \(t=0, b=1\)$"):
        _convert(_folded_buffer(), truncated=cut, final_values=finals)


def _as_sb3_before_2_7_1(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make SB3's rollout buffers store observations and actions as float32, as 2.3-2.7.0 did."""

    def float32(reset: Any) -> Any:
        def old_reset(self: Any) -> None:
            reset(self)
            self.actions = self.actions.astype(np.float32)
            if isinstance(self.observations, dict):
                self.observations = {k: v.astype(np.float32) for k, v in self.observations.items()}
            else:
                self.observations = self.observations.astype(np.float32)

        return old_reset

    for buffer in (RolloutBuffer, DictRolloutBuffer):
        monkeypatch.setattr(buffer, "reset", float32(buffer.reset))


def test_a_float32_buffer_gives_the_spaces_dtypes(monkeypatch: pytest.MonkeyPatch) -> None:
    _as_sb3_before_2_7_1(monkeypatch)
    buffer = RolloutBuffer(
        2, spaces.Box(0, 255, (2,), np.uint8), spaces.Discrete(3), device="cpu", n_envs=1
    )
    for t in range(2):
        buffer.add(
            np.full((1, 2), 7),
            np.full((1, 1), t + 1),
            np.zeros(1),
            np.zeros(1, bool),
            torch.zeros(1, 1),
            torch.zeros(1),
        )
    assert buffer.observations.dtype == buffer.actions.dtype == np.dtype(np.float32)
    r = from_rollout_buffer(buffer, np.full((1, 2), 9), np.zeros(1), np.zeros(1))
    assert r.obses.dtype == np.uint8
    actions = r.model_outs.arrays["actions"]
    assert actions.dtype == np.int32
    np.testing.assert_array_equal(actions[:, 0], [1, 2, 2])
    buffer.actions[1, 0, 0] = 1.5
    with pytest.raises(
        ValueError, match=r"buffer.actions must be integer-valued, got 1\.5 at \(t=1, b=0\)"
    ):
        from_rollout_buffer(buffer, np.full((1, 2), 9), np.zeros(1), np.zeros(1))


def test_a_run_with_float32_buffers_records_the_spaces_dtypes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _as_sb3_before_2_7_1(monkeypatch)
    env = _vec_env(TOY, obs="dict", action="discrete")
    check = TrajkitCallback()
    compare = _Compare(check)
    _model("ppo", env).learn(32 * 2 * 2, callback=CallbackList([check, compare]))
    assert compare.model.rollout_buffer.actions.dtype == np.float32  # type: ignore[attr-defined]
    r = compare.rollouts[-1]
    assert isinstance(r.obses, dict)
    assert (r.obses["cell"].dtype, r.obses["pos"].dtype) == (np.int64, np.float32)
    assert r.model_outs.arrays["actions"].dtype == np.int32
    assert r.final_obses is not None
    assert r.final_obses["cell"].dtype == np.int64
