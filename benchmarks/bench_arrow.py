"""Benchmark `trajkit.arrow` export and import against pyarrow on the same arrays.

Run `python benchmarks/bench_arrow.py` (or `make bench`). For a MuJoCo-like rollout (17 float32
observations, 6 float32 actions) and an image rollout (64x64x3 uint8), it times, in one
process, alternating, minimum of several runs:

* export: `write_parquet(rollout, path)` against `pyarrow.parquet.write_table` of a table of
  the same arrays built directly (one column per array, tensors as fixed-size lists);
* import: `read_parquet(path)` (which validates the rollout) against `read_table` plus
  `to_numpy` of every column (the flat values of tensor columns).

Both write uncompressed Parquet, so that the ratio shows trajkit's own cost. Target: within
1.5x. Reported, never asserted.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from _timing import interleaved

import trajkit
import trajkit.arrow

ROUNDS = 7
TARGET = 1.5


def rollout(T: int, B: int, obs_shape: tuple[int, ...], dtype: Any) -> trajkit.Rollout:
    rng = np.random.default_rng(0)
    obs = rng.integers(0, 255, size=(T + 1, B, *obs_shape)).astype(dtype)
    return trajkit.Rollout(
        states=np.zeros((T + 1, B, 0), np.float32),
        obses=obs,
        rews=rng.normal(size=(T, B)),
        dones=rng.random((T + 1, B)) < 0.01,
        infos=None,
        model_outs={
            "critic": rng.normal(size=(T + 1, B)),
            "actions": rng.normal(size=(T + 1, B, 6)),
        },
    )


def plain_table(r: trajkit.Rollout) -> pa.Table:
    def column(a: np.ndarray[Any, Any]) -> pa.Array:
        rows = a.shape[0] * a.shape[1]
        if a.ndim == 2:
            return pa.array(a.reshape(rows))
        width = int(np.prod(a.shape[2:]))
        return pa.FixedSizeListArray.from_arrays(pa.array(a.reshape(-1)), width)

    T, B = r.num_steps, r.batch_size
    rews = np.zeros((T + 1, B), np.float32)
    rews[:T] = r.rews
    return pa.table(
        {
            "obs": column(r.obses),
            "reward": column(rews),
            "done": column(r.dones),
            **{k: column(v) for k, v in r.model_outs.arrays.items()},
        }
    )


def main() -> None:
    print("| rollout | MB | direction | pyarrow ms | trajkit ms | ratio | target | met |")
    print("|---|---|---|---|---|---|---|---|")
    cases = {
        "MuJoCo-like, T=16384 B=8": rollout(16384, 8, (17,), np.float32),
        "images 64x64x3 uint8, T=256 B=8": rollout(256, 8, (64, 64, 3), np.uint8),
    }
    with tempfile.TemporaryDirectory() as tmp:
        ours, theirs = os.path.join(tmp, "ours.parquet"), os.path.join(tmp, "theirs.parquet")
        for name, r in cases.items():
            mb = r.obses.nbytes / 1e6

            def plain_write(r: trajkit.Rollout = r) -> None:
                pq.write_table(plain_table(r), theirs, compression="none")

            def ours_write(r: trajkit.Rollout = r) -> None:
                trajkit.arrow.write_parquet(r, ours, compression="none")

            def plain_read() -> None:
                table = pq.read_table(theirs)
                for column in table.columns:
                    array = column.combine_chunks()
                    if pa.types.is_fixed_size_list(array.type):
                        array = array.flatten()  # the values, without a per-row object
                    array.to_numpy(zero_copy_only=False)

            def ours_read() -> None:
                trajkit.arrow.read_parquet(ours)

            t_plain_w, t_ours_w = interleaved(plain_write, ours_write, rounds=ROUNDS)
            t_plain_r, t_ours_r = interleaved(plain_read, ours_read, rounds=ROUNDS)
            for direction, base, mine in (
                ("export", t_plain_w, t_ours_w),
                ("import", t_plain_r, t_ours_r),
            ):
                ratio = mine / base
                print(
                    f"| {name} | {mb:.0f} | {direction} | {base * 1e3:.1f} | {mine * 1e3:.1f} "
                    f"| {ratio:.2f}x | <= {TARGET}x | {'yes' if ratio <= TARGET else 'NO'} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
