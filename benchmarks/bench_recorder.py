"""Benchmark `trajkit.gym.RolloutRecorder` against stepping the same env with the same policy.

Run `python benchmarks/bench_recorder.py` (or `make bench`). For CartPole-v1 with B = 8 and
B = 64 sync envs and a linear policy (actions, critic, log-probs), it times T = 128 steps of

* plain: `obs, *_ = env.step(policy(obs)["actions"])` in a loop, keeping nothing;
* recorder: `recorder.record(128)`: the same steps, plus everything a rollout needs (rows,
  rewards, episode ends, truncation bootstraps, episode returns) and the validated `Rollout`;
* hand-written (for information): the plain loop plus the writes a CleanRL-style loop does
  into preallocated `[T, B]` buffers (observations, actions, values, log-probs, rewards,
  dones), keeping only what it needs and checking nothing: the least any log costs.

The two alternate, 30 times each, and the minimum of each is kept (noise only adds time).
Target: the recorder within 1.2x of plain. Reported, never asserted.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
from _timing import interleaved

from trajkit.gym import RolloutRecorder

T = 128
ROUNDS = 30
TARGET = 1.2


def main() -> None:
    weights = np.random.default_rng(0).normal(size=4).astype(np.float32)

    def policy(obs: Any) -> dict[str, Any]:
        logits = obs @ weights
        return {
            "actions": (logits > 0).astype(np.int64),
            "critic": logits,
            "log_probs": np.zeros(len(obs), np.float32),
        }

    print(
        f"CartPole-v1, sync vector env, T={T} steps per call; min of {ROUNDS} alternating runs.\n"
    )
    print(
        "| B | plain ms | recorder ms | recorder / plain | target | met | hand-written / plain "
        "| recorder's env steps per call |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for B in (8, 64):
        # Each loop steps an env of its own: a shared env would hand the recorder states that
        # another loop left behind (stale observations, more episode ends, more phantom steps).
        envs = [gym.make_vec("CartPole-v1", num_envs=B, vectorization_mode="sync") for _ in "prh"]
        env, rec_env, hand_env = envs
        state = [env.reset(seed=0)[0]]
        hand_state = [hand_env.reset(seed=0)[0]]

        def plain(env: Any = env, state: list[Any] = state) -> None:
            for _ in range(T):
                state[0], *_ = env.step(policy(state[0])["actions"])

        buffers = {
            "obs": np.zeros((T, B, 4), np.float32),
            "actions": np.zeros((T, B), np.int64),
            "critic": np.zeros((T, B), np.float32),
            "log_probs": np.zeros((T, B), np.float32),
            "rews": np.zeros((T, B), np.float32),
            "dones": np.zeros((T, B), np.float32),
        }

        def by_hand(env: Any = hand_env, state: list[Any] = hand_state, buf: Any = buffers) -> None:
            for t in range(T):
                outs = policy(state[0])
                buf["obs"][t] = state[0]
                buf["actions"][t] = outs["actions"]
                buf["critic"][t] = outs["critic"]
                buf["log_probs"][t] = outs["log_probs"]
                state[0], rews, terms, truncs, _ = env.step(outs["actions"])
                buf["rews"][t] = rews
                buf["dones"][t] = terms | truncs

        recorder = RolloutRecorder(rec_env, policy, seed=0)
        recorder.record(T)  # warm up: the first call resets
        t_plain, t_rec, t_hand = interleaved(
            plain, partial(recorder.record, T), by_hand, rounds=ROUNDS
        )
        ratio = t_rec / t_plain
        print(
            f"| {B} | {t_plain * 1e3:.2f} | {t_rec * 1e3:.2f} | {ratio:.2f}x | <= {TARGET}x "
            f"| {'yes' if ratio <= TARGET else 'NO'} | {t_hand / t_plain:.2f}x "
            f"| {env_steps(recorder, rec_env):.0f} |",
            flush=True,
        )
        for each in envs:
            each.close()


def env_steps(recorder: RolloutRecorder, env: Any, calls: int = 10) -> float:
    """The mean number of vector steps in an (untimed) `record(T)`: T, plus the phantom steps
    of NEXT_STEP autoreset that the env with the most episode ends spends on resets."""
    count = [0]
    step = env.step

    def counted(actions: Any) -> Any:
        count[0] += 1
        return step(actions)

    env.step = counted
    try:
        for _ in range(calls):
            recorder.record(T)
    finally:
        del env.step  # the class's method again
    return count[0] / calls


if __name__ == "__main__":
    main()
