"""Nested observations vs flat ones of the same bytes: construction and minibatch gathers.

A Gymnasium `Dict` observation is stored leaf by leaf; the target is that this costs within 10 %
of a flat observation array holding the same number of bytes (so time per byte within 10 %).
Both rollouts below have identical bytes in `obses`; everything else is shared.

Two observation sizes, T=128 steps of B=8 envs:

- **image**: flat uint8 `[T+1, B, 84, 84, 4]` vs `{"rgb": [.., 84, 84, 3], "depth": [.., 84, 84,
  1]}` (29 MB);
- **vector**: flat float32 `[T+1, B, 64]` vs a dict of four `[T+1, B, 16]` leaves, one of them
  inside a tuple (264 kB): small arrays, where the fixed cost per leaf weighs most.

Measured: `Rollout(...)` construction (copying, as by default), one epoch of
`Rollout.minibatches(256)` (advantages, returns and every gather), and `trajkit.save` /
`trajkit.load` (format version 1 for the flat rollout, version 2 with a member per leaf for the
nested one), each the minimum of several back-to-back runs.

Run: `python benchmarks/bench_spaces.py` (or `python benchmarks/run.py spaces`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np
from _timing import best_of

import trajkit
from trajkit import Rollout

T, B = 128, 8
TARGET = 1.10


def make_kwargs(obses: Any, rng: np.random.Generator) -> dict[str, Any]:
    return {
        "states": np.zeros((T + 1, B, 0), np.float32),
        "obses": obses,
        "rews": rng.normal(size=(T, B)).astype(np.float32),
        "dones": rng.random((T + 1, B)) < 0.02,
        "infos": None,
        "model_outs": {
            "critic": rng.normal(size=(T + 1, B)).astype(np.float32),
            "actions": rng.integers(0, 6, size=(T + 1, B)).astype(np.int32),
            "log_probs": -rng.random((T + 1, B)).astype(np.float32),
        },
    }


def cases(rng: np.random.Generator) -> dict[str, tuple[Any, Any]]:
    image = rng.integers(0, 256, size=(T + 1, B, 84, 84, 4), dtype=np.uint8)
    vector = rng.normal(size=(T + 1, B, 64)).astype(np.float32)
    return {
        "image": (
            image,
            {"rgb": np.ascontiguousarray(image[..., :3]), "depth": image[..., 3:].copy()},
        ),
        "vector": (
            vector,
            {
                "pos": vector[..., :16].copy(),
                "vel": vector[..., 16:32].copy(),
                "goal": (vector[..., 32:48].copy(), {"mask": vector[..., 48:].copy()}),
            },
        ),
    }


def epoch(r: Rollout) -> None:
    for _ in r.minibatches(256, gamma=0.99, lam=0.95, seed=0):
        pass


def measure(fn_flat: Callable[[], object], fn_nested: Callable[[], object], repeats: int) -> str:
    # Interleave the two, so that a noisy moment hurts both alike.
    flat = nested = float("inf")
    for _ in range(3):
        flat = min(flat, best_of(fn_flat, repeats))
        nested = min(nested, best_of(fn_nested, repeats))
    ratio = nested / flat
    met = "yes" if ratio <= TARGET else "NO"
    return f"{flat * 1e3:.3f} ms | {nested * 1e3:.3f} ms | {ratio:.2f} | {met}"


def bench_case(name: str, flat_obs: Any, nested_obs: Any, rng: np.random.Generator) -> None:
    kw_flat = make_kwargs(flat_obs, rng)
    kw_nested = {**kw_flat, "obses": nested_obs}
    nbytes = flat_obs.nbytes
    size = f"{nbytes / 1e6:.1f} MB" if nbytes > 1e6 else f"{nbytes / 1e3:.0f} kB"
    repeats = 5 if name == "image" else 50
    row = measure(lambda: Rollout(**kw_flat), lambda: Rollout(**kw_nested), repeats)
    print(f"| {name} | {size} | construction | {row} |", flush=True)
    r_flat, r_nested = Rollout(**kw_flat), Rollout(**kw_nested)
    row = measure(lambda: epoch(r_flat), lambda: epoch(r_nested), max(1, repeats // 2))
    print(f"| {name} | {size} | minibatches, one epoch | {row} |", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        flat_path, nested_path = os.path.join(tmp, "f.npz"), os.path.join(tmp, "n.npz")
        row = measure(
            lambda: trajkit.save(r_flat, flat_path),
            lambda: trajkit.save(r_nested, nested_path),
            max(1, repeats // 2),
        )
        print(f"| {name} | {size} | save (format v1 vs v2) | {row} |", flush=True)
        row = measure(lambda: trajkit.load(flat_path), lambda: trajkit.load(nested_path), repeats)
        print(f"| {name} | {size} | load | {row} |", flush=True)


def main() -> None:
    rng = np.random.default_rng(0)
    print("| obses | bytes | operation | flat | nested | nested/flat (per byte) | <= 1.10 |")
    print("|---|---|---|---|---|---|---|")
    for name, (flat_obs, nested_obs) in cases(rng).items():
        bench_case(name, flat_obs, nested_obs, rng)


if __name__ == "__main__":
    main()
