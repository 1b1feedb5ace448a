"""A rollout of 10^8 steps on one machine: construct, advantages, save and load.

Run `python benchmarks/huge_rollout.py [STEPS]` (not part of `make bench`: it needs about
3.3 GB of arrays, a few times that in memory, and as much disk). B = 8 envs, T = STEPS / 8;
per step: 3 float32 observations, reward, done, critic, log-prob and an int32 action (about
33 bytes). Prints the time of each stage and the peak resident memory.
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import trajkit


def peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: kB


def main(steps: int) -> None:
    B = 8
    T = steps // B
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    fields: dict[str, Any] = {
        "states": np.zeros((T + 1, B, 0), np.float32),
        "obses": rng.standard_normal((T + 1, B, 3), dtype=np.float32),
        "rews": rng.standard_normal((T, B), dtype=np.float32),
        "dones": (rng.random((T + 1, B), dtype=np.float32) < 1e-3).astype(np.float32),
        "infos": None,
        "model_outs": {
            "critic": rng.standard_normal((T + 1, B), dtype=np.float32),
            "log_probs": rng.standard_normal((T + 1, B), dtype=np.float32),
            "actions": rng.integers(0, 4, (T + 1, B), dtype=np.int32),
        },
    }
    nbytes = sum(
        a.nbytes
        for a in [*fields["model_outs"].values()] + [fields[k] for k in ("obses", "rews", "dones")]
    )
    print(
        f"T={T} B={B}: {T * B:,} steps, {nbytes / 1e9:.2f} GB of arrays "
        f"(made in {time.perf_counter() - start:.1f} s)",
        flush=True,
    )

    def stage(name: str, fn: Callable[[], Any]) -> Any:
        begin = time.perf_counter()
        result = fn()
        print(
            f"{name}: {time.perf_counter() - begin:.1f} s, peak RSS {peak_gb():.1f} GB", flush=True
        )
        return result

    rollout = stage("construct (copy=False)", lambda: trajkit.Rollout(**fields, copy=False))
    adv = stage("advantages", lambda: rollout.advantages(0.99, 0.95))
    del adv
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        path = os.path.join(tmp, "huge.npz")
        stage("save", lambda: trajkit.save(rollout, path, max_bytes=None))
        print(f"file: {os.path.getsize(path) / 1e9:.2f} GB")
        loaded = stage("load", lambda: trajkit.load(path, max_bytes=None))
        same = stage("load == original", lambda: loaded == rollout)
        print(f"equal: {same}")


if __name__ == "__main__":
    main(int(float(sys.argv[1])) if len(sys.argv) > 1 else 10**8)
