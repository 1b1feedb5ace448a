"""Sampling transition minibatches for offline RL: trajkit vs SB3's and TorchRL's replay buffers.

The job: draw 256-transition minibatches (observation, action, reward, next observation,
done flags) from a recording, as an offline learner (behaviour cloning, DQN, IQL) does each
update. The recording is one trajkit file of B=8 envs, memory-mapped. The contenders:

* `trajkit numpy` / `trajkit torch`: `trajkit.transition_minibatches` over the
  memory-mapped rollout, and `trajkit.torch.to_tensors` of each of its minibatches (each
  epoch a permutation of every transition: sampling without replacement; the true final
  observation at episode ends);
* `sb3`: stable-baselines3's `ReplayBuffer.sample(256)` (with replacement), the buffer filled
  from the same data (its arrays assigned whole, not `add`ed step by step), on the CPU. With
  image observations it is built with `optimize_memory_usage=True` (next observations read
  from the following row, SB3's choice for Atari), without: `obs` and `next_obs` both held;
* `torchrl`: TorchRL's `ReplayBuffer` over `LazyMemmapStorage` (memory-mapped files in a
  temporary folder, `next` observations stored), `sample()` with its default random sampler.

Each contender runs in its own fresh process (so its peak memory is its own): it builds its
buffer (not timed), takes a few minibatches to warm up, then times `--batches` minibatches five
times and keeps the best. The processes run in turn, then again in reverse order
(`--rounds 2`), and each contender's best time is kept. Printed: the time per minibatch, its
ratio to trajkit's (above 1: trajkit is faster), and the process's peak resident memory
(`ru_maxrss`, the larger of the rounds; file pages of a memory map count in it once read).

Sizes: `--size full` is 1M vector transitions (17 float32, a Box action of 6) and 100k image
transitions (84x84 uint8, Discrete(6)); `--size small` (the default, for development) is a
tenth of each. 1M image transitions are 7 GB per copy of the observations: more than this
machine's share of memory.

Run: `python benchmarks/bench_replay.py [--size full]` (or `python benchmarks/run.py replay`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

import trajkit

NUM_ENVS = 8
BATCH = 256
SCENARIOS = {
    # name: (transitions at --size full, observation shape, dtype, action kind)
    "vector": (1_000_000, (17,), "float32", "box"),
    "image": (100_000, (84, 84), "uint8", "discrete"),
}
CONTENDERS = ("trajkit numpy", "trajkit torch", "sb3", "torchrl")


def make_file(path: str, n: int, shape: tuple[int, ...], dtype: str, action: str) -> None:
    """A recording of `n` transitions (B=8), episodes of about 200 steps, saved to `path`."""
    rng = np.random.default_rng(0)
    T = n // NUM_ENVS
    obses: NDArray[Any]
    if dtype == "uint8":
        obses = rng.integers(0, 255, (T + 1, NUM_ENVS, *shape), dtype=np.uint8)
    else:
        obses = rng.standard_normal((T + 1, NUM_ENVS, *shape), dtype=np.float32)
    dones = (rng.random((T + 1, NUM_ENVS)) < 1 / 200).astype(np.float32)
    ends = int(dones[1:].sum())
    finals = obses[1 : ends + 1, 0].copy()  # any observations of the right layout
    if action == "box":
        actions: Any = rng.uniform(-1, 1, (T + 1, NUM_ENVS, 6)).astype(np.float32)
    else:
        actions = rng.integers(0, 6, (T + 1, NUM_ENVS), dtype=np.int32)
    rollout = trajkit.Rollout(
        states=np.zeros((T + 1, NUM_ENVS, 0), np.float32),
        obses=obses,
        rews=rng.standard_normal((T, NUM_ENVS), dtype=np.float32),
        dones=dones,
        infos=None,
        model_outs={"actions": actions},
        final_obses=finals,
        copy=False,
    )
    trajkit.save(rollout, path)


# ------------------------------------------------------------------ contenders (child side)


def _trajkit(path: str, torch_out: bool) -> Callable[[], object]:
    rollout = trajkit.load(path, mmap=True)
    batches = trajkit.transition_minibatches(rollout, BATCH, epochs=10**6, seed=0)
    if torch_out:
        import trajkit.torch as tt

        return lambda: tt.to_tensors(next(batches))
    return lambda: next(batches)


def _sb3(path: str) -> Callable[[], object]:
    from gymnasium import spaces
    from stable_baselines3.common.buffers import ReplayBuffer

    r = trajkit.load(path, mmap=True)
    T, B = r.num_steps, r.batch_size
    obs = np.asarray(r.obses)
    low, high = (0, 255) if obs.dtype == np.uint8 else (-np.inf, np.inf)
    obs_space = spaces.Box(low, high, obs.shape[2:], obs.dtype)
    actions = r.model_outs.arrays["actions"]
    if actions.dtype.kind == "f":
        act_space: Any = spaces.Box(-1, 1, actions.shape[2:], np.float32)
    else:
        act_space = spaces.Discrete(6)
    optimize = obs.dtype == np.uint8
    buffer = ReplayBuffer(
        T * B,  # SB3's buffer_size counts transitions of all envs
        obs_space,
        act_space,
        device="cpu",
        n_envs=B,
        optimize_memory_usage=optimize,
        handle_timeout_termination=False,  # SB3 refuses it with optimize_memory_usage
    )
    buffer.observations[:] = obs[:T]
    if not optimize:
        buffer.next_observations[:] = r.next_obses()
    buffer.actions[:] = actions[:T].reshape(buffer.actions.shape)
    buffer.rewards[:] = r.rews
    buffer.dones[:] = r.dones[1:]
    buffer.full, buffer.pos = True, 0
    return lambda: buffer.sample(BATCH)


def _torchrl(path: str, scratch: str) -> Callable[[], object]:
    import torch
    from tensordict import TensorDict  # type: ignore[import-untyped]
    from torchrl.data import LazyMemmapStorage, ReplayBuffer  # type: ignore[import-untyped]

    r = trajkit.load(path, mmap=True)
    T, B = r.num_steps, r.batch_size
    n = T * B
    buffer = ReplayBuffer(storage=LazyMemmapStorage(n, scratch_dir=scratch), batch_size=BATCH)
    obs, after = np.asarray(r.obses), None
    actions = r.model_outs.arrays["actions"]
    ends = r.dones[1:] == 1
    chunk = max(1, 50_000 // B)  # steps per extend: bounded memory while filling
    for start in range(0, T, chunk):
        stop = min(T, start + chunk)
        rows = slice(start, stop)
        after = obs[start + 1 : stop + 1]  # next observations (true finals are not the point)
        m = (stop - start) * B

        def flat(a: Any, m: int = m) -> Any:
            return torch.from_numpy(np.ascontiguousarray(a).reshape(m, *a.shape[2:]))

        buffer.extend(
            TensorDict(
                {
                    "observation": flat(obs[rows]),
                    "action": flat(actions[rows]),
                    "next": {
                        "observation": flat(after),
                        "reward": flat(r.rews[rows]),
                        "done": flat(ends[rows]),
                    },
                },
                batch_size=[m],
            )
        )
    return lambda: buffer.sample()


def child(name: str, path: str, batches: int) -> dict[str, float]:
    """Build contender `name`'s buffer, then time `batches` minibatches (best of 5)."""
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as scratch:
        if name.startswith("trajkit"):
            draw = _trajkit(path, torch_out=name.endswith("torch"))
        elif name == "sb3":
            draw = _sb3(path)
        else:
            draw = _torchrl(path, scratch)
        for _ in range(20):
            draw()
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(batches):
                draw()
            best = min(best, (time.perf_counter() - start) / batches)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {"seconds": best, "peak_mib": peak}


# --------------------------------------------------------------------------- parent side


def run(size: str, batches: int, only: list[str], rounds: int) -> None:
    scale = 1 if size == "full" else 10
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp:
        for scenario, (n_full, shape, dtype, action) in SCENARIOS.items():
            n = n_full // scale
            path = os.path.join(tmp, f"{scenario}.npz")
            make_file(path, n, shape, dtype, action)
            file_mib = os.path.getsize(path) / 2**20
            results: dict[str, dict[str, float]] = {}
            for round_ in range(rounds):  # in turn, then in reverse: noise spreads alike
                for name in only if round_ % 2 == 0 else only[::-1]:
                    done = subprocess.run(
                        [
                            sys.executable,
                            __file__,
                            "--child",
                            name,
                            path,
                            "--batches",
                            str(batches),
                        ],
                        capture_output=True,
                        text=True,
                        check=False,
                    )
                    if done.returncode != 0:
                        print(f"{scenario} {name}: failed\n{done.stderr[-2000:]}", file=sys.stderr)
                        continue
                    got = json.loads(done.stdout.strip().splitlines()[-1])
                    if name not in results or got["seconds"] < results[name]["seconds"]:
                        results[name] = {
                            **got,
                            "peak_mib": max(
                                got["peak_mib"], results.get(name, {}).get("peak_mib", 0)
                            ),
                        }
            os.unlink(path)
            base = results.get("trajkit torch", results.get("trajkit numpy"))
            for name, got in results.items():
                ratio = got["seconds"] / base["seconds"] if base else float("nan")
                rows.append((scenario, n, file_mib, name, got, ratio))
    print(
        f"{BATCH}-transition minibatches, B={NUM_ENVS}; ratio = contender's time / trajkit "
        "torch's (above 1: trajkit is faster); peak RSS of the contender's own process\n"
    )
    print("| obs | transitions | file | contender | per minibatch | ratio | peak RSS |")
    print("|---|---|---|---|---|---|---|")
    for scenario, n, file_mib, name, got, ratio in rows:
        print(
            f"| {scenario} | {n:,} | {file_mib:.0f} MiB | {name} | "
            f"{got['seconds'] * 1e6:.0f} µs | {ratio:.2f} | {got['peak_mib']:.0f} MiB |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=["small", "full"], default="small")
    parser.add_argument("--batches", type=int, default=500)
    parser.add_argument("--only", nargs="*", default=list(CONTENDERS))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", nargs=2, metavar=("NAME", "PATH"))
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.batches)))
        return 0
    run(args.size, args.batches, args.only, args.rounds)
    return 0


if __name__ == "__main__":
    # Run directly, read the command line; run by `benchmarks/run.py`, use the defaults.
    direct = os.path.abspath(sys.argv[0]) == os.path.abspath(__file__)
    sys.exit(main(sys.argv[1:] if direct else []))
