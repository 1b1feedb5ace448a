"""The datasets the report is tested (and its screenshots taken) on.

Recorded by `trajkit.gym.RolloutRecorder` from Gymnasium's CartPole: its vector
observations, its rendered frames (image observations; rendering needs pygame), and a
recording with bugs that validation and lint find.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

import trajkit

# CartPole renders 400 x 600, the cart and pole in rows 140 to 340: those, every 2nd pixel.
CROP = slice(140, 340, 2), slice(0, 600, 2)


def _policy(seed: int, noise: float) -> Any:
    """A balancing policy (push towards the pole's lean) with random pushes."""
    rng = np.random.default_rng(seed)

    def policy(obs: Any) -> dict[str, Any]:
        state = obs["state"] if isinstance(obs, dict) else obs
        actions = (state[:, 2] + 0.5 * state[:, 3] > 0).astype(np.int64)
        flip = rng.random(len(actions)) < noise
        actions[flip] = 1 - actions[flip]
        return {"actions": actions, "critic": np.zeros(len(actions), np.float32)}

    return policy


def _record(folder: Path, env: Any, files: int, steps: int, seed: int, noise: float) -> list[Path]:
    from trajkit.gym import RolloutRecorder

    folder.mkdir(parents=True, exist_ok=True)
    recorder = RolloutRecorder(env, _policy(seed, noise), seed=seed)
    paths = []
    for index in range(files):
        path = folder / f"rollout-{index:03d}.npz"
        trajkit.save(recorder.record(steps), path, recording=recorder.recording)
        paths.append(path)
    env.close()
    return paths


def cartpole(
    folder: Path, *, files: int = 4, steps: int = 512, envs: int = 4, seed: int = 0
) -> Path:
    """CartPole-v1 with vector observations."""
    import gymnasium as gym

    env = gym.make_vec("CartPole-v1", num_envs=envs, vectorization_mode="sync")
    _record(folder, env, files, steps, seed, noise=0.25)
    return folder


def cartpole_pixels(
    folder: Path, *, files: int = 2, steps: int = 128, envs: int = 2, seed: int = 0
) -> Path:
    """CartPole-v1 seen as rendered frames, uint8 `(100, 300, 3)`, and its state vector.

    Observations are a Dict of the image and the state: the page shows frames and traces.
    """
    import gymnasium as gym
    from gymnasium import spaces
    from gymnasium.wrappers import AddRenderObservation, TransformObservation

    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    height, width = 100, 300

    def pixels(env: Any) -> Any:
        env = AddRenderObservation(env, render_only=False, render_key="image", obs_key="state")
        image = spaces.Box(0, 255, (height, width, 3), np.uint8)
        space = spaces.Dict({"image": image, "state": env.observation_space["state"]})
        return TransformObservation(
            env,
            lambda obs: {
                "image": np.ascontiguousarray(obs["image"][CROP]),
                "state": obs["state"],
            },
            space,
        )

    env = gym.make_vec(
        "CartPole-v1",
        num_envs=envs,
        vectorization_mode="sync",
        render_mode="rgb_array",
        wrappers=[pixels],
    )
    _record(folder, env, files, steps, seed, noise=0.4)
    return folder


def flawed(folder: Path, *, seed: int = 0) -> Path:
    """A CartPole recording with bugs: what validate and lint find, each at a known place.

    - `rollout-000.npz`: episodes cut by the time limit (30 steps) recorded as
      terminations (TK101, one finding for the dataset: lint weighs the distinct episodes
      of every file, and names the file where the evidence became enough);
    - `rollout-001.npz`: an action outside Discrete(2) at env 1, step 7 (TK106);
    - `rollout-002.npz`: a copy of `rollout-000.npz` (TK203);
    - `rollout-003.npz`: damaged (its end cut off): invalid, and TK001.
    """
    import gymnasium as gym

    from trajkit.gym import RolloutRecorder

    folder.mkdir(parents=True, exist_ok=True)
    env = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync", max_episode_steps=30)
    recorder = RolloutRecorder(env, _policy(seed, noise=0.0), seed=seed)
    first = recorder.record(128)
    assert first.truncated is not None
    cut = first.replace(
        truncated=np.zeros_like(first.truncated), final_values=np.zeros_like(first.truncated)
    )
    trajkit.save(cut, folder / "rollout-000.npz", recording=recorder.recording)
    second = recorder.record(128)
    actions = np.array(second.model_outs.arrays["actions"])
    actions[7, 1] = 5
    outs = {key: np.array(value) for key, value in second.model_outs.arrays.items()}
    outs["actions"] = actions
    trajkit.save(
        second.replace(model_outs=outs), folder / "rollout-001.npz", recording=recorder.recording
    )
    (folder / "rollout-002.npz").write_bytes((folder / "rollout-000.npz").read_bytes())
    third = recorder.record(128)
    trajkit.save(third, folder / "rollout-003.npz", recording=recorder.recording)
    damaged = folder / "rollout-003.npz"
    damaged.write_bytes(damaged.read_bytes()[:-200])
    env.close()
    return folder
