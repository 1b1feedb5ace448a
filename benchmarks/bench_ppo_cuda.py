"""The PPO data path of `bench_ppo_path.py` on a CUDA device: trajkit vs CleanRL's idiom.

Both keep the rollout on the device and gather minibatches there. `trajkit`: preallocated NumPy
arrays filled per step, `Rollout(..., copy=False)`, `trajkit.torch.minibatches(...,
device="cuda")` (one transfer per array per rollout, one index transfer per epoch). `cleanrl`:
CleanRL's on-device idiom restated: float32 torch buffers on the device filled per step from
host arrays, the GAE loop in torch on the device, a `torch.randperm` on the device per epoch and
tensor indexing per minibatch. Every run ends with `torch.cuda.synchronize()`.

Timing as in `bench_ppo_path.py`: three interleaved blocks, the median and range of per-block
ratios to CleanRL's time. Without a CUDA device it prints "no CUDA device: skipped" and exits 0.

Run: `python benchmarks/bench_ppo_cuda.py` (or `python benchmarks/run.py ppo_cuda`).
"""

from __future__ import annotations

import functools
import statistics
import sys

import numpy as np
import torch
from bench_ppo_path import (
    BLOCKS,
    EPOCHS,
    GAMMA,
    LAM,
    MINIBATCH,
    Shape,
    best_time,
    cleanrl_gae,
    filled_rollout,
    fmt_ratio,
    make_shape,
)

import trajkit
import trajkit.torch


def trajkit_cuda(s: Shape, device: torch.device, check: bool = False) -> np.ndarray | None:
    rollout = filled_rollout(s, copy=False)
    for batch in trajkit.torch.minibatches(
        rollout, MINIBATCH, gamma=GAMMA, lam=LAM, epochs=EPOCHS, seed=0, device=device
    ):
        del batch
    torch.cuda.synchronize(device)
    return rollout.advantages(GAMMA, LAM) if check else None


def cleanrl_cuda(s: Shape, device: torch.device, check: bool = False) -> np.ndarray | None:
    src, T, B = s.src, s.T, s.B
    act_shape = (s.action_dim,) if s.action_dim else ()
    obs = torch.zeros((T, B, *s.obs_shape), device=device)
    actions = torch.zeros((T, B, *act_shape), device=device)
    logprobs = torch.zeros((T, B), device=device)
    rewards = torch.zeros((T, B), device=device)
    dones = torch.zeros((T, B), device=device)
    values = torch.zeros((T, B), device=device)
    # The policy runs on the device: its outputs are device tensors.
    policy_actions = torch.from_numpy(src["actions"]).to(device)
    policy_logp = torch.from_numpy(src["log_probs"]).to(device)
    policy_values = torch.from_numpy(src["values"]).to(device)
    next_obs = torch.Tensor(src["obs"][0]).to(device)
    next_done = torch.Tensor(src["starts"][0]).to(device)
    for t in range(T):
        obs[t] = next_obs
        dones[t] = next_done
        actions[t] = policy_actions[t]
        logprobs[t] = policy_logp[t]
        values[t] = policy_values[t].flatten()
        rewards[t] = torch.tensor(src["rewards"][t]).to(device).view(-1)
        next_obs = torch.Tensor(src["obs"][t + 1]).to(device)
        next_done = torch.Tensor(src["starts"][t + 1]).to(device)
    with torch.no_grad():
        next_value = policy_values[T].reshape(1, -1)
        advantages = cleanrl_gae(rewards, values, dones, next_value, next_done)
        returns = advantages + values
    n = T * B
    flat = (
        obs.reshape((-1, *s.obs_shape)),
        actions.reshape((-1, *act_shape)),
        logprobs.reshape(-1),
        advantages.reshape(-1),
        returns.reshape(-1),
        values.reshape(-1),
    )
    generator = torch.Generator(device=device).manual_seed(0)
    for _ in range(EPOCHS):
        b_inds = torch.randperm(n, device=device, generator=generator)
        for start in range(0, n, MINIBATCH):
            mb_inds = b_inds[start : start + MINIBATCH]
            batch = [array[mb_inds] for array in flat]
            if not s.action_dim:
                batch[1] = batch[1].long()
            del batch
    torch.cuda.synchronize(device)
    return advantages.cpu().numpy() if check else None


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device: skipped")
        return 0
    device = torch.device("cuda")
    print(f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}")
    print(f"{BLOCKS} interleaved blocks, median (range) of per-block ratios to CleanRL\n")
    shapes = [
        make_shape("T=2048 B=1 obs f32[17] Box(6)", 2048, 1, (17,), np.float32, action_dim=6,
                   repeats=5),
        make_shape("T=128 B=8 obs u8[4,84,84] Discrete(6)", 128, 8, (4, 84, 84), np.uint8,
                   num_actions=6, repeats=5),
        make_shape("T=64 B=4096 obs f32[48] Box(12)", 64, 4096, (48,), np.float32,
                   action_dim=12, repeats=3),
    ]  # fmt: skip
    print("| shape | trajkit (ms) | cleanrl (ms) | trajkit / cleanrl | advantages agree to |")
    print("|---|---|---|---|---|")
    for s in shapes:
        ours = trajkit_cuda(s, device, check=True)
        theirs = cleanrl_cuda(s, device, check=True)
        agree = float(np.max(np.abs(np.asarray(ours) - np.asarray(theirs))))
        times: dict[str, list[float]] = {"trajkit": [], "cleanrl": []}
        for _ in range(BLOCKS):
            ours_fn = functools.partial(trajkit_cuda, s, device)
            theirs_fn = functools.partial(cleanrl_cuda, s, device)
            times["trajkit"].append(best_time(ours_fn, s.repeats))
            times["cleanrl"].append(best_time(theirs_fn, s.repeats))
        ratios = [a / b for a, b in zip(times["trajkit"], times["cleanrl"], strict=True)]
        print(
            f"| {s.name} | {statistics.median(times['trajkit']) * 1e3:.1f} "
            f"| {statistics.median(times['cleanrl']) * 1e3:.1f} | {fmt_ratio(ratios)} "
            f"| {agree:.1e} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
