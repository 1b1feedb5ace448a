"""Benchmark `trajkit.sb3.TrajkitCallback`: what checking every rollout adds to SB3's `learn()`.

Run `python benchmarks/bench_sb3.py [timesteps]` (or `make bench`). PPO on CartPole-v1 with
the RL Zoo's hyperparameters for it (8 envs, `n_steps=32`, `batch_size=256`, 20 epochs,
`gae_lambda=0.8`, `gamma=0.98`), on the CPU with one torch thread, times `learn(timesteps)`

* plain: no callback (the baseline);
* validate: with `TrajkitCallback()`: every rollout converted and validated;
* save + lint (for information): `TrajkitCallback(folder, lint=True)`: each rollout also
  saved with its recording and linted.

Each run builds its model with the same seed (not timed), so all do the same work; the
variants alternate, `ROUNDS` times, and the minimum of each is kept (noise only adds time).
Times are the process's CPU time (`time.process_time`; one torch thread, so it is the work
done), which other processes on a shared machine disturb far less than wall time. Since two
whole `learn()` runs still differ by a few percent from run to run, the callback's own time
is also measured inside it (every hook it runs, timed around the call) and reported as a
share of plain `learn()`: the overhead itself, free of that noise.
Target: validate within 3 % of plain. Reported, never asserted.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable

import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

from trajkit.sb3 import TrajkitCallback

ROUNDS = 3
TARGET = 1.03
ZOO = {"n_steps": 32, "batch_size": 256, "n_epochs": 20, "gae_lambda": 0.8, "gamma": 0.98}


class TimedCallback(TrajkitCallback):
    """`TrajkitCallback`, adding up the CPU time of its own hooks in `spent`."""

    spent = 0.0

    def _timed(self, hook: Callable[[], object]) -> object:
        start = time.process_time()
        try:
            return hook()
        finally:
            self.spent += time.process_time() - start

    def _on_training_start(self) -> None:
        self._timed(super()._on_training_start)

    def _on_rollout_start(self) -> None:
        self._timed(super()._on_rollout_start)

    def _on_step(self) -> bool:
        return bool(self._timed(super()._on_step))

    def _on_rollout_end(self) -> None:
        self._timed(super()._on_rollout_end)


def _learn(
    timesteps: int, make_callback: Callable[[str], BaseCallback | None]
) -> tuple[float, float]:
    """CPU seconds of `learn(timesteps)`, and of the callback's own hooks in it."""
    env = make_vec_env("CartPole-v1", n_envs=8, seed=0)
    model = PPO("MlpPolicy", env, ent_coef=0.0, seed=0, device="cpu", **ZOO)  # type: ignore[arg-type]
    with tempfile.TemporaryDirectory() as folder:
        callback = make_callback(folder)
        start = time.process_time()
        model.learn(timesteps, callback=callback)
        elapsed = time.process_time() - start
    env.close()
    return elapsed, callback.spent if isinstance(callback, TimedCallback) else 0.0


def main() -> None:
    timesteps = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    torch.set_num_threads(1)
    variants: dict[str, Callable[[str], BaseCallback | None]] = {
        "plain": lambda _: None,
        "validate": lambda _: TimedCallback(),
        "save + lint": lambda folder: TimedCallback(folder, lint=True),
    }
    best = dict.fromkeys(variants, float("inf"))
    spent = dict.fromkeys(variants, float("inf"))
    for _ in range(ROUNDS):
        for name, make in variants.items():
            seconds, inside = _learn(timesteps, make)
            best[name], spent[name] = min(best[name], seconds), min(spent[name], inside)
    rollouts = timesteps // (ZOO["n_steps"] * 8)
    print(
        f"PPO CartPole-v1 (RL Zoo hyperparameters, 8 envs, {rollouts} rollouts of 256 steps), "
        f"learn({timesteps}); min of {ROUNDS} alternating runs.\n"
    )
    print(
        "| variant | learn() CPU s | ms per rollout | / plain | in the callback, ms per "
        "rollout | in the callback / plain learn() | target | met |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, seconds in best.items():
        ratio = seconds / best["plain"]
        share = spent[name] / best["plain"]
        target = f"<= {TARGET - 1:.0%}" if name == "validate" else ""
        met = ("yes" if share <= TARGET - 1 else "no") if name == "validate" else ""
        print(
            f"| {name} | {seconds:.2f} | {1000 * seconds / rollouts:.1f} | {ratio:.3f} "
            f"| {1000 * spent[name] / rollouts:.2f} | {share:.2%} | {target} | {met} |"
        )


if __name__ == "__main__":
    main()
