"""A PPO update's data path, env and policy replaced by precomputed arrays, four ways.

One run of the path: fill T steps of B envs (observations, actions, log-probs, values, rewards,
episode starts) into fresh buffers, as a collection loop would, step by step; compute GAE
advantages and lambda-returns (gamma 0.99, lambda 0.95); then 4 epochs of shuffled minibatches
of 256 as torch CPU tensors of what PPO reads (observations, actions, old log-probs,
advantages, returns, old values). Every minibatch is materialized; nothing is trained.

Candidates, in one process:

* `floor`: a hand-written NumPy loop, the reference every ratio is against: preallocated
  arrays, a reverse GAE loop over time vectorized over envs, `rng.permutation`, fancy indexing
  of the flattened arrays, `torch.from_numpy` per minibatch array.
* `trajkit`: as the docs say: preallocated arrays, `trajkit.Rollout(...)` (default: it copies
  its inputs), `trajkit.torch.minibatches` (default keys: the six arrays PPO reads).
* `trajkit copy=False`: the same with `Rollout(..., copy=False)`, which keeps the arrays.
* `sb3`: stable-baselines3's `RolloutBuffer` (`add` per step, `compute_returns_and_advantage`,
  `get(256)` per epoch); skipped with a printed reason when it is not installed.
* `cleanrl`: CleanRL's torch idiom restated: float32 torch buffers filled per step (CleanRL
  allocates them with `torch.zeros`, so uint8 frames are stored as float32), the GAE loop in
  torch, a NumPy-shuffled index array and tensor indexing per minibatch (discrete actions are
  cast to int64 after the gather, not the whole buffer per minibatch as CleanRL's scripts do).

Timing: three interleaved blocks; in each, every candidate runs `repeats` times and keeps its
best; ratios are taken within a block against the floor of the same block, and the median and
range over blocks are printed. Peak memory: the rise of the process's peak RSS (VmHWM, reset
through /proc/self/clear_refs) over its RSS before one run, against the bytes of one rollout's
raw data.

Run: `python benchmarks/bench_ppo_path.py [--quick]` (or `python benchmarks/run.py ppo_path`).
"""

from __future__ import annotations

import ctypes
import functools
import gc
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

import trajkit
import trajkit.torch

GAMMA, LAM = 0.99, 0.95
EPOCHS, MINIBATCH = 4, 256
BLOCKS = 3


@dataclass
class Shape:
    """One benchmark shape and its precomputed env and policy outputs."""

    name: str
    T: int
    B: int
    obs_shape: tuple[int, ...]
    obs_dtype: type
    num_actions: int  # Discrete(n) when action_dim == 0
    action_dim: int  # Box(action_dim) when > 0
    repeats: int
    src: dict[str, np.ndarray]

    @property
    def raw_bytes(self) -> int:
        return sum(a.nbytes for a in self.src.values())


def make_shape(
    name: str,
    T: int,
    B: int,
    obs_shape: tuple[int, ...],
    obs_dtype: type,
    *,
    num_actions: int = 0,
    action_dim: int = 0,
    repeats: int = 1,
) -> Shape:
    rng = np.random.default_rng(0)
    obs: np.ndarray[Any, Any]
    actions: np.ndarray[Any, Any]
    if obs_dtype is np.uint8:
        obs = rng.integers(0, 256, size=(T + 1, B, *obs_shape), dtype=np.uint8)
    else:
        obs = rng.standard_normal((T + 1, B, *obs_shape), dtype=np.float32)
    if action_dim:
        actions = rng.standard_normal((T + 1, B, action_dim), dtype=np.float32)
    else:
        actions = rng.integers(0, num_actions, size=(T + 1, B), dtype=np.int64)
    src: dict[str, np.ndarray[Any, Any]] = {
        "obs": obs,
        "actions": actions,
        "log_probs": rng.standard_normal((T + 1, B), dtype=np.float32),
        "values": rng.standard_normal((T + 1, B), dtype=np.float32),
        "rewards": rng.standard_normal((T, B), dtype=np.float32),
        "starts": (rng.random((T + 1, B)) < 0.01).astype(np.float32),
    }
    return Shape(name, T, B, obs_shape, obs_dtype, num_actions, action_dim, repeats, src)


# --------------------------------------------------------------------------------------------
# Candidates: each runs the whole path once and returns the advantages [T, B]
# --------------------------------------------------------------------------------------------


def fill_numpy(s: Shape) -> dict[str, np.ndarray]:
    """Fresh preallocated arrays filled step by step, as a NumPy collection loop does."""
    src, T, B = s.src, s.T, s.B
    buf = {
        "obs": np.empty((T + 1, B, *s.obs_shape), s.obs_dtype),
        "actions": np.empty(src["actions"].shape, src["actions"].dtype),
        "log_probs": np.empty((T + 1, B), np.float32),
        "values": np.empty((T + 1, B), np.float32),
        "rewards": np.empty((T, B), np.float32),
        "starts": np.empty((T + 1, B), np.float32),
    }
    for t in range(T + 1):  # row T: the last observation, its value (the bootstrap)
        buf["obs"][t] = src["obs"][t]
        buf["starts"][t] = src["starts"][t]
        buf["actions"][t] = src["actions"][t]
        buf["log_probs"][t] = src["log_probs"][t]
        buf["values"][t] = src["values"][t]
        if t < T:
            buf["rewards"][t] = src["rewards"][t]
    return buf


def floor(s: Shape, seed: int = 0) -> np.ndarray:
    buf = fill_numpy(s)
    T, B = s.T, s.B
    values, starts, rewards = buf["values"], buf["starts"], buf["rewards"]
    adv = np.empty((T, B), np.float32)
    last = np.zeros(B, np.float32)
    for t in range(T - 1, -1, -1):
        not_done = 1.0 - starts[t + 1]
        delta = rewards[t] + GAMMA * values[t + 1] * not_done - values[t]
        last = delta + GAMMA * LAM * not_done * last
        adv[t] = last
    returns = adv + values[:T]
    n = T * B
    flat = {
        "obs": buf["obs"][:T].reshape(n, *s.obs_shape),
        "actions": buf["actions"][:T].reshape(n, *buf["actions"].shape[2:]),
        "log_probs": buf["log_probs"][:T].reshape(n),
        "advantages": adv.reshape(n),
        "returns": returns.reshape(n),
        "values": values[:T].reshape(n),
    }
    rng = np.random.default_rng(seed)
    for _ in range(EPOCHS):
        perm = rng.permutation(n)
        for start in range(0, n, MINIBATCH):
            idx = perm[start : start + MINIBATCH]
            batch = {key: torch.from_numpy(array[idx]) for key, array in flat.items()}
            del batch
    return adv


def filled_rollout(s: Shape, copy: bool) -> trajkit.Rollout:
    """The collection loop's buffers, filled step by step, as a `Rollout` (as the docs say)."""
    buf = fill_numpy(s)
    T, B = s.T, s.B
    return trajkit.Rollout(
        states=np.zeros((T + 1, B, 0), np.float32),
        obses=buf["obs"],
        rews=buf["rewards"],
        dones=buf["starts"],
        infos=None,
        model_outs={
            "actions": buf["actions"],
            "log_probs": buf["log_probs"],
            "critic": buf["values"],
        },
        copy=copy,
    )


def trajkit_path(s: Shape, copy: bool, seed: int = 0, check: bool = False) -> np.ndarray | None:
    rollout = filled_rollout(s, copy)
    for batch in trajkit.torch.minibatches(
        rollout, MINIBATCH, gamma=GAMMA, lam=LAM, epochs=EPOCHS, seed=seed
    ):
        del batch
    return rollout.advantages(GAMMA, LAM) if check else None  # not timed: a second GAE


def sb3_available() -> str | None:
    """None when stable-baselines3 can be used, else why not."""
    try:
        import stable_baselines3  # noqa: F401
    except ImportError as exc:
        return f"stable-baselines3 is not installed ({exc}): pip install stable-baselines3"
    return None


def sb3(s: Shape, seed: int = 0) -> np.ndarray:
    from gymnasium import spaces
    from stable_baselines3.common.buffers import RolloutBuffer

    src, T, B = s.src, s.T, s.B
    if s.obs_dtype is np.uint8:
        obs_space: Any = spaces.Box(0, 255, s.obs_shape, np.uint8)
    else:
        obs_space = spaces.Box(-np.inf, np.inf, s.obs_shape, np.float32)
    if s.action_dim:
        act_space: Any = spaces.Box(-1.0, 1.0, (s.action_dim,), np.float32)
    else:
        act_space = spaces.Discrete(s.num_actions)
    buffer = RolloutBuffer(
        T, obs_space, act_space, device="cpu", gae_lambda=LAM, gamma=GAMMA, n_envs=B
    )
    values_t = torch.from_numpy(src["values"])  # the policy hands over tensors
    logp_t = torch.from_numpy(src["log_probs"])
    for t in range(T):
        buffer.add(
            src["obs"][t],
            src["actions"][t],
            src["rewards"][t],
            src["starts"][t],
            values_t[t],
            logp_t[t],
        )
    buffer.compute_returns_and_advantage(values_t[T], src["starts"][T])
    np.random.seed(seed)  # noqa: NPY002 (get() shuffles with NumPy's global generator)
    for _ in range(EPOCHS):
        for batch in buffer.get(MINIBATCH):
            del batch
    # get() flattened the buffer env-major: [B * T, 1]
    return buffer.advantages.reshape(B, T).T.astype(np.float32)


def cleanrl_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    next_value: torch.Tensor,
    next_done: torch.Tensor,
) -> torch.Tensor:
    """CleanRL's GAE loop over time, in torch, where the tensors live (restated)."""
    T = rewards.shape[0]
    advantages = torch.zeros_like(rewards)
    lastgaelam: Any = 0
    for t in reversed(range(T)):
        if t == T - 1:
            nextnonterminal = 1.0 - next_done
            nextvalues = next_value
        else:
            nextnonterminal = 1.0 - dones[t + 1]
            nextvalues = values[t + 1]
        delta = rewards[t] + GAMMA * nextvalues * nextnonterminal - values[t]
        lastgaelam = delta + GAMMA * LAM * nextnonterminal * lastgaelam
        advantages[t] = lastgaelam
    return advantages


def cleanrl(s: Shape, seed: int = 0) -> np.ndarray:
    src, T, B = s.src, s.T, s.B
    act_shape = (s.action_dim,) if s.action_dim else ()
    obs = torch.zeros((T, B, *s.obs_shape))  # float32, as CleanRL allocates its buffers
    actions = torch.zeros((T, B, *act_shape))
    logprobs = torch.zeros((T, B))
    rewards = torch.zeros((T, B))
    dones = torch.zeros((T, B))
    values = torch.zeros((T, B))
    # What the env and the policy hand over at each step: arrays from the env, tensors from
    # the policy.
    policy_actions = torch.from_numpy(src["actions"])
    policy_logp = torch.from_numpy(src["log_probs"])
    policy_values = torch.from_numpy(src["values"])
    next_obs = torch.Tensor(src["obs"][0])
    next_done = torch.Tensor(src["starts"][0])
    for t in range(T):
        obs[t] = next_obs
        dones[t] = next_done
        actions[t] = policy_actions[t]
        logprobs[t] = policy_logp[t]
        values[t] = policy_values[t].flatten()
        rewards[t] = torch.tensor(src["rewards"][t]).view(-1)
        next_obs, next_done = torch.Tensor(src["obs"][t + 1]), torch.Tensor(src["starts"][t + 1])
    with torch.no_grad():
        next_value = policy_values[T].reshape(1, -1)
        advantages = cleanrl_gae(rewards, values, dones, next_value, next_done)
        returns = advantages + values
    n = T * B
    b_obs = obs.reshape((-1, *s.obs_shape))
    b_logprobs = logprobs.reshape(-1)
    b_actions = actions.reshape((-1, *act_shape))
    b_advantages = advantages.reshape(-1)
    b_returns = returns.reshape(-1)
    b_values = values.reshape(-1)
    b_inds = np.arange(n)
    rng = np.random.default_rng(seed)
    for _ in range(EPOCHS):
        rng.shuffle(b_inds)
        for start in range(0, n, MINIBATCH):
            mb_inds = b_inds[start : start + MINIBATCH]
            mb_actions = b_actions[mb_inds]
            batch = (
                b_obs[mb_inds],
                mb_actions if s.action_dim else mb_actions.long(),
                b_logprobs[mb_inds],
                b_advantages[mb_inds],
                b_returns[mb_inds],
                b_values[mb_inds],
            )
            del batch
    return advantages.numpy()


# --------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------


def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def measure_memory(
    s: Shape, candidates: Mapping[str, Callable[[Shape], object]]
) -> dict[str, int | None]:
    """Each candidate's peak RSS rise over one run, with glibc returning large blocks at once.

    By default glibc raises its mmap threshold as large blocks are freed, and later ones come
    from a heap that keeps its pages: a candidate's peak would hide in pages an earlier one
    left behind. Fixing the threshold at 128 KiB (and trimming the heap before each run) makes
    every large block an mmap that is unmapped when freed. This changes allocation costs, so it
    is done only here, after the timing. Without glibc the rises may read too low.
    """
    try:
        libc: Any = ctypes.CDLL(None)
        libc.mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        trim = None
    out: dict[str, int | None] = {}
    for name, fn in candidates.items():
        gc.collect()
        if trim is not None:
            trim(0)
        out[name] = peak_rss_rise(functools.partial(fn, s))
    return out


def peak_rss_rise(fn: Callable[[], object]) -> int | None:
    """Bytes by which one call of `fn` raises the peak RSS over the RSS before it (Linux)."""
    gc.collect()
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    except OSError:
        return None
    before = _status_kib("VmRSS")
    fn()
    peak = _status_kib("VmHWM")
    if before is None or peak is None:
        return None
    return (peak - before) * 1024


def best_time(fn: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def fmt_ratio(values: list[float]) -> str:
    med = statistics.median(values)
    lo, hi = min(values), max(values)
    return f"{med:.2f} ({lo:.2f}-{hi:.2f})"


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    torch.set_num_threads(1)  # one core per candidate, as the NumPy floor uses
    shapes = [
        make_shape("T=2048 B=1 obs f32[17] Box(6)", 2048, 1, (17,), np.float32, action_dim=6,
                   repeats=5),
        make_shape("T=128 B=8 obs u8[4,84,84] Discrete(6)", 128, 8, (4, 84, 84), np.uint8,
                   num_actions=6, repeats=4),
        make_shape("T=64 B=4096 obs f32[48] Box(12)", 64, 4096, (48,), np.float32,
                   action_dim=12, repeats=2),
    ]  # fmt: skip
    candidates: dict[str, Callable[[Shape], np.ndarray | None]] = {
        "floor": floor,
        "trajkit": lambda s: trajkit_path(s, copy=True),
        "trajkit copy=False": lambda s: trajkit_path(s, copy=False),
        "cleanrl": cleanrl,
    }
    reason = sb3_available()
    if reason is None:
        candidates["sb3"] = sb3
    else:
        print(f"sb3: skipped: {reason}")
    print(
        f"torch {torch.__version__} (1 thread), numpy {np.__version__}, trajkit "
        f"{trajkit.__version__}; {BLOCKS} interleaved blocks, median (range) of per-block "
        "ratios to the floor; lower is faster\n"
    )
    for s in shapes:
        repeats = 1 if quick else s.repeats
        advantages = {name: fn(s) for name, fn in candidates.items()}  # also warms up
        advantages["trajkit"] = trajkit_path(s, copy=True, check=True)
        ref = advantages["floor"]
        agree = max(float(np.max(np.abs(a - ref))) for a in advantages.values() if a is not None)
        times: dict[str, list[float]] = {name: [] for name in candidates}
        for _ in range(BLOCKS):
            for name, fn in candidates.items():
                times[name].append(best_time(functools.partial(fn, s), repeats))
        memory = measure_memory(s, candidates)
        floor_times = times["floor"]
        print(f"### {s.name}\n")
        print(f"raw data {s.raw_bytes / 2**20:.1f} MiB; advantages agree to {agree:.1e}\n")
        print("| candidate | time (ms, median) | / floor | peak RSS rise / raw data | / floor |")
        print("|---|---|---|---|---|")
        floor_mem = memory["floor"]
        for name in candidates:
            ratios = [t / f for t, f in zip(times[name], floor_times, strict=True)]
            mem = memory[name]
            mem_text = "n/a" if mem is None else f"{mem / s.raw_bytes:.2f}"
            mem_ratio = "n/a" if mem is None or not floor_mem else f"{mem / floor_mem:.2f}"
            print(
                f"| {name} | {statistics.median(times[name]) * 1e3:.1f} | {fmt_ratio(ratios)} "
                f"| {mem_text} | {mem_ratio} |"
            )
        print(flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
