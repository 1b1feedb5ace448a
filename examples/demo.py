"""`make demo`: record CartPole-v1 rollouts with trajkit.gym, save them, validate the file.

Eight CartPole-v1 environments with a 60-step time limit (so that episodes both terminate and
get truncated) are driven by a small NumPy softmax policy with a fixed linear critic, through
`trajkit.gym.RolloutRecorder`, for 256 steps. The rollout is saved with `trajkit.save` into
`demo-output/` (ignored by git), checked with `trajkit validate`, drawn with `trajkit plot`
(episodes, reward and advantage histograms, a timeline of episode ends) and summarised:
episodes, terminations versus truncations, and advantage and return statistics. Needs only
`pip install -e '.[gym,plot]'` and no network; exits non-zero if the file fails validation.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.wrappers.vector import RecordEpisodeStatistics
from numpy.typing import NDArray

import trajkit
from trajkit.cli import main as trajkit_cli
from trajkit.gym import RolloutRecorder

ROOT = Path(__file__).resolve().parents[1]
# Ignored by git; kept for `trajkit info` and friends. The tests point it elsewhere.
OUTPUT = Path(os.environ.get("TRAJKIT_DEMO_OUTPUT", ROOT / "demo-output")).resolve()
NUM_ENVS = 8
NUM_STEPS = 256
TIME_LIMIT = 60
GAMMA, LAM = 0.99, 0.95
SEED = 0

# Softmax policy: logits = obs @ ACTOR (push the cart towards where the pole leans, weakly).
ACTOR = np.array([[0.0, 0.0], [0.0, 0.0], [-1.5, 1.5], [-0.45, 0.45]], np.float32)
# Critic: a fixed linear value function of the features [1, x^2, x_dot^2, theta^2, theta_dot^2].
CRITIC = np.array([25.0, -2.0, -1.0, -200.0, -2.0], np.float32)


class SoftmaxPolicy:
    """Samples actions from softmax(obs @ ACTOR); values from the linear critic."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def __call__(self, obs: NDArray[Any]) -> dict[str, NDArray[Any]]:
        logits = (obs @ ACTOR).astype(np.float32)
        shifted = logits - logits.max(axis=1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        actions = (self.rng.random(len(obs)) < np.exp(log_probs[:, 1])).astype(np.int64)
        features = np.concatenate([np.ones((len(obs), 1), np.float32), obs**2], axis=1)
        return {
            "actions": actions,
            "log_probs": log_probs[np.arange(len(obs)), actions],
            "actor": logits,
            "critic": features @ CRITIC,
        }


def stats(values: NDArray[Any]) -> str:
    v = np.asarray(values, np.float64)
    return f"mean {v.mean():+8.3f}  std {v.std():7.3f}  min {v.min():+8.3f}  max {v.max():+8.3f}"


def main() -> int:
    start = time.perf_counter()
    env = RecordEpisodeStatistics(
        gym.make_vec(
            "CartPole-v1",
            num_envs=NUM_ENVS,
            vectorization_mode="sync",
            max_episode_steps=TIME_LIMIT,
        )
    )
    recorder = RolloutRecorder(env, SoftmaxPolicy(SEED), seed=SEED, info_keys=["episode"])
    print(
        f"trajkit demo: CartPole-v1, {NUM_ENVS} envs, time limit {TIME_LIMIT} steps, autoreset "
        f"mode {recorder.autoreset_mode.name}; NumPy softmax policy, linear critic"
    )
    began = time.perf_counter()
    rollout = recorder.record(NUM_STEPS)
    recorded_in = time.perf_counter() - began
    env.close()
    print(
        f"recorded T={rollout.num_steps} steps x B={rollout.batch_size} envs "
        f"in {recorded_in:.2f} s: {rollout}"
    )

    episodes = rollout.episode_stats()
    reported = [info["episode"]["r"] for row in rollout.infos for info in row if "episode" in info]
    agree = sorted(episodes.returns.tolist()) == sorted(reported)
    print(
        f"episodes finished: {episodes.episodes}, mean return {episodes.mean_return:.2f} "
        f"(min {episodes.returns.min():.0f}, max {episodes.returns.max():.0f})"
    )
    print(f"  terminations: {episodes.terminations} (pole fell or cart left: no bootstrap)")
    print(
        f"  truncations:  {episodes.truncations} (time limit: bootstrapped from the critic's "
        "value of the final observation)"
    )
    print(
        f"  gymnasium's RecordEpisodeStatistics reports {len(reported)} returns: "
        f"{'the same' if agree else 'DIFFERENT'}"
    )

    advantages = rollout.advantages(GAMMA, LAM)
    returns = rollout.returns(GAMMA, LAM)
    print(f"advantages (gamma={GAMMA}, lambda={LAM}): {stats(advantages)}")
    print(f"returns    (gamma={GAMMA}, lambda={LAM}): {stats(returns)}")

    OUTPUT.mkdir(parents=True, exist_ok=True)
    path = OUTPUT / "cartpole.npz"
    trajkit.save(rollout, path)
    shown = Path(os.path.relpath(path, ROOT))
    folder = Path(os.path.relpath(OUTPUT, ROOT))
    print(f"saved with trajkit.save: {shown} ({path.stat().st_size / 1024:.1f} KiB)")
    code = run_cli(["validate", str(shown)])
    same = trajkit.load(path) == rollout
    print(f"trajkit validate: exit code {code}; loaded back equal: {same}")
    plotted = run_cli(["plot", str(shown), "--out", str(folder)])
    print(f"done in {time.perf_counter() - start:.2f} s (after imports)")
    print(
        f"\nThe recording and its figures are in {folder}/. Next, try:\n"
        f"  .venv/bin/trajkit info {shown}\n"
        f"  .venv/bin/trajkit validate {folder}/\n"
        f"  .venv/bin/trajkit plot {shown} --out {folder}\n"
        "  .venv/bin/python examples/ppo.py   # PPO with PyTorch (make test installs torch)"
    )
    return 0 if code == 0 and plotted == 0 and same and agree else 1


def run_cli(argv: list[str]) -> int:
    """Run a `trajkit` command from the repository root, echoing it and its output."""
    print(f"$ trajkit {' '.join(argv)}")
    output = io.StringIO()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
            code = trajkit_cli(argv)
    finally:
        os.chdir(cwd)
    for line in output.getvalue().strip().splitlines():
        print(f"  {line}")
    return code


if __name__ == "__main__":
    sys.exit(main())
