"""Minari export and import: `trajkit.minari` against Minari's own API on the same episodes.

1. `to_minari` of an Atari-like rollout (uint8 observations [257, 8, 84, 84, 4], 55 MiB,
   episodes of 50 steps) against `minari.create_dataset_from_buffers` given the same episodes
   already cut into `EpisodeBuffer`s (what any export must at least do: Minari's encoding and
   writing). `to_minari` also cuts the episodes, checks the data against the spaces and
   writes atomically (a hidden folder, fsynced, renamed).
2. `from_minari` against `list(dataset.iterate_episodes())` (Minari's decoding alone);
   `from_minari` also checks every episode and builds validated rollouts.
3. The peak memory of `to_minari` in a fresh interpreter, as a ratio to the payload
   (issue 38: at most 2x), as `tests/minari/test_memory.py` measures it.

Run: `python benchmarks/bench_minari.py` (or `python benchmarks/run.py minari`).
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from _timing import interleaved

import trajkit
import trajkit.minari as tm

T, B, EPISODE = 256, 8, 50


def rollout() -> trajkit.Rollout:
    rng = np.random.default_rng(0)
    dones = np.zeros((T + 1, B), np.float32)
    dones[::EPISODE] = 1
    return trajkit.Rollout(
        states=np.zeros((T + 1, B, 0), np.float32),
        obses=rng.integers(0, 255, (T + 1, B, 84, 84, 4), np.uint8),
        rews=rng.standard_normal((T, B), dtype=np.float32),
        dones=dones,
        infos=None,
        model_outs={"actions": rng.integers(0, 4, (T + 1, B))},
        copy=False,
    )


def buffers(r: trajkit.Rollout) -> list[Any]:
    """The episodes of `r` as Minari buffers, cut by hand (the observation before an end is
    repeated as the final one, as `to_minari` does without `final_obses`)."""
    from minari.data_collector import EpisodeBuffer

    out: list[Any] = []
    actions = r.model_outs.arrays["actions"]
    for b in range(B):
        starts = [0, *(t for t in range(1, T) if r.dones[t, b] == 1), T]
        for start, stop in itertools.pairwise(starts):
            ended = stop < T
            obs = r.obses[start : stop + 1, b] if not ended else r.obses[start:stop, b]
            if ended:
                obs = np.concatenate([obs, obs[-1:]])
            flags = np.zeros(stop - start, bool)
            flags[-1] = ended
            out.append(
                EpisodeBuffer(
                    id=len(out),
                    observations=obs,
                    actions=actions[start:stop, b],
                    rewards=r.rews[start:stop, b].astype(np.float64),
                    terminations=flags,
                    truncations=np.zeros(stop - start, bool),
                    infos={},
                )
            )
    return out


def main() -> None:
    import minari
    from gymnasium import spaces

    r = rollout()
    episodes = buffers(r)
    space = spaces.Box(0, 255, (84, 84, 4), np.uint8)
    action_space = spaces.Discrete(4)
    counter = iter(range(1_000_000))
    with tempfile.TemporaryDirectory(prefix="trajkit-bench-") as root:
        os.environ["MINARI_DATASETS_PATH"] = root

        def ours() -> None:
            tm.to_minari(
                r,
                f"bench/ours{next(counter)}-v0",
                observation_space=space,
                action_space=action_space,
            )

        def theirs() -> None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                minari.create_dataset_from_buffers(
                    f"bench/base{next(counter)}-v0",
                    episodes,
                    observation_space=space,
                    action_space=action_space,
                    data_format="arrow",
                    jpeg_encoding=False,  # lossless, as to_minari writes
                )

        t_base, t_ours = interleaved(theirs, ours, rounds=3)
        dataset_id = "bench/read-v0"
        tm.to_minari(r, dataset_id, observation_space=space, action_space=action_space)
        dataset = minari.load_dataset(dataset_id)
        t_iter, t_read = interleaved(
            lambda: list(dataset.iterate_episodes()), lambda: tm.from_minari(dataset), rounds=3
        )
        child = Path(__file__).parents[1] / "tests" / "minari" / "test_memory.py"
        script = child.read_text().split('CHILD = """', 1)[1].split('"""', 1)[0]
        done = subprocess.run(
            [sys.executable, "-W", "ignore", "-c", script],
            capture_output=True,
            text=True,
            env={**os.environ, "MINARI_DATASETS_PATH": str(Path(root) / "memory")},
            check=True,
        )
        grown, payload = map(int, done.stdout.split())
    mib = r.obses.nbytes / 2**20
    print("| case | baseline | trajkit | ratio |")
    print("|---|---|---|---|")
    print(
        f"| export, {mib:.0f} MiB of images, {len(episodes)} episodes | "
        f"`create_dataset_from_buffers`: {t_base * 1e3:.0f} ms | {t_ours * 1e3:.0f} ms | "
        f"{t_ours / t_base:.2f}x |"
    )
    print(
        f"| import, same dataset | `iterate_episodes`: {t_iter * 1e3:.0f} ms | "
        f"{t_read * 1e3:.0f} ms | {t_read / t_iter:.2f}x |"
    )
    print(
        f"| export peak memory (fresh interpreter) | payload: {payload / 2**20:.0f} MiB | "
        f"{grown / 2**20:.0f} MiB | {grown / payload:.2f}x (issue 38: <= 2x) |"
    )


if __name__ == "__main__":
    main()
