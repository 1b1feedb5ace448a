"""Benchmark Parquet export and import of image and vector rollouts: time and peak memory.

Run `python benchmarks/bench_arrow.py` (or `make bench`); `TRAJKIT_BENCH_ARROW_MB` sets the
size (default 100; the issue's case is 1000). For an
image rollout (uint8 84x84, int32 actions, float32 critic) and a vector rollout (17 float32
observations, 6 float32 actions, critic), each of about MB megabytes, it measures in a fresh
child process per operation (so that its peak resident memory, `ru_maxrss`, is its own):

* `native`: `trajkit.save` / `trajkit.load` (the baseline of the compact layout);
* `compact`, `readable`: `trajkit.arrow.write_parquet(..., layout=...)` / `read_parquet`
  (read validates the whole rollout);
* `pyarrow list`, `pyarrow bytes`: pyarrow writing and reading the same arrays by hand, one
  column per array, tensors as fixed-size lists or as fixed-size binary, with
  `pq.write_table` / `pq.read_table` and `to_numpy`;
* `pyarrow table`: pyarrow writing the readable layout's own table (built before the
  timing) and reading it back with `to_numpy` of each column: pyarrow's own cost for the
  readable layout's types, its baseline.

Time is the minimum of ROUNDS children; memory is the child's peak minus its resident size
just before the operation (the rollout it writes, already in memory, is not counted), as a
multiple of the payload. Imports, and the pandas import of pyarrow's first conversion, come
before the timing. Uncompressed, so that the ratios show the layouts' own cost. Goals:
compact within 2x native time and peak memory at most 2x the payload; readable at most 1.2x
`pyarrow list`. Reported, never asserted.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

ROUNDS = 3


def rollout(case: str, mb: float) -> Any:
    import trajkit

    rng = np.random.default_rng(0)
    B = 64
    if case == "image":
        cell: tuple[int, ...] = (84, 84)
        T = max(1, int(mb * 1e6 / (B * 84 * 84)))
        obs = rng.integers(0, 256, size=(T + 1, B, *cell), dtype=np.uint8)
        actions = rng.integers(0, 18, size=(T + 1, B)).astype(np.int32)
    else:
        T = max(1, int(mb * 1e6 / (B * (17 + 6 + 1 + 2) * 4)))
        obs = rng.normal(size=(T + 1, B, 17)).astype(np.float32)
        actions = rng.normal(size=(T + 1, B, 6)).astype(np.float32)
    return trajkit.Rollout(
        states=np.zeros((T + 1, B, 0), np.float32),
        obses=obs,
        rews=rng.normal(size=(T, B)).astype(np.float32),
        dones=rng.random((T + 1, B)) < 0.01,
        infos=None,
        model_outs={"critic": rng.normal(size=(T + 1, B)).astype(np.float32), "actions": actions},
        copy=False,
    )


def payload(r: Any) -> int:
    arrays = [r.obses, r.rews, r.dones, *r.model_outs.arrays.values()]
    return sum(int(a.nbytes) for a in arrays)


def by_hand(r: Any, binary: bool) -> Any:
    import pyarrow as pa

    def column(a: Any) -> Any:
        rows = a.shape[0] * a.shape[1]
        if a.ndim == 2:
            return pa.array(a.reshape(rows))
        width = int(np.prod(a.shape[2:]))
        if binary:
            data = pa.py_buffer(np.ascontiguousarray(a).reshape(-1).view(np.uint8))
            size = a.dtype.itemsize * width
            return pa.FixedSizeBinaryArray.from_buffers(pa.binary(size), rows, [None, data])
        return pa.FixedSizeListArray.from_arrays(pa.array(a.reshape(-1)), width)

    T, B = r.num_steps, r.batch_size
    rews = np.zeros((T + 1, B), np.float32)
    rews[:T] = r.rews
    arrays = {"obs": r.obses, "reward": rews, "done": r.dones, **r.model_outs.arrays}
    return pa.table({k: column(v) for k, v in arrays.items()})


def child(op: str, method: str, case: str, mb: float, path: str) -> None:
    """One operation, timed, in this fresh process; prints seconds and peak extra bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import trajkit
    import trajkit.arrow

    pa.array(np.zeros(1))  # pyarrow imports pandas on its first conversion: not timed
    r: Any = rollout(case, mb) if op == "write" else None
    layout: Any = method
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    start = time.perf_counter()
    back: Any = None
    if op == "write":
        if method == "native":
            trajkit.save(r, path)
        elif method in ("compact", "readable"):
            trajkit.arrow.write_parquet(r, path, layout=layout, compression="none")
        elif method == "pyarrow table":
            table = trajkit.arrow.to_arrow(r, layout="readable")
            start = time.perf_counter()  # pyarrow's own cost of the readable layout's table
            pq.write_table(table, path, compression="none", use_dictionary=False)
        else:
            table = by_hand(r, method == "pyarrow bytes")
            pq.write_table(table, path, compression="none", use_dictionary=False)
    elif method == "native":
        back = trajkit.load(path)
    elif method in ("compact", "readable"):
        back = trajkit.arrow.read_parquet(path, max_rows=None)
    else:
        table = pq.read_table(path)
        columns: list[Any] = []
        for column in table.columns:
            array = column.combine_chunks()
            if pa.types.is_fixed_size_list(array.type):
                array = array.flatten()
            elif pa.types.is_fixed_size_binary(array.type):
                array = np.frombuffer(array.buffers()[1], np.uint8)
            if not isinstance(array, np.ndarray):
                array = array.to_numpy(zero_copy_only=False)
            columns.append(array)
        del table
    seconds = time.perf_counter() - start
    del back
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"s": seconds, "extra": max(0, peak - before)}))


def run(op: str, method: str, case: str, mb: float, path: str) -> tuple[float, int]:
    best, extra = float("inf"), 0
    for _ in range(ROUNDS):
        done = subprocess.run(
            [sys.executable, __file__, "--child", op, method, case, str(mb), path],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        got = json.loads(done.stdout)
        best, extra = min(best, got["s"]), max(extra, got["extra"])
    return best, extra


METHODS = ("native", "compact", "readable", "pyarrow bytes", "pyarrow list", "pyarrow table")


def methods() -> tuple[str, ...]:
    """`METHODS`, or the comma-separated subset in TRAJKIT_BENCH_ARROW_METHODS (1 GB: the
    list layouts need 5-30x the payload)."""
    chosen = os.environ.get("TRAJKIT_BENCH_ARROW_METHODS")
    return tuple(chosen.split(",")) if chosen else METHODS


def main(mb: float) -> None:
    print("| rollout | MB | method | write s | read s | write peak | read peak |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for case in ("image", "vector"):
            size = payload(rollout(case, mb)) / 1e6
            results = {}
            for method in methods():
                path = os.path.join(tmp, method.replace(" ", "-") + ".file")
                w, wx = run("write", method, case, mb, path)
                r, rx = run("read", method, case, mb, path)
                os.unlink(path)
                results[method] = (w, r)
                print(
                    f"| {case} | {size:.0f} | {method} | {w:.2f} | {r:.2f} | "
                    f"{wx / 1e6 / size:.2f}x | {rx / 1e6 / size:.2f}x |",
                    flush=True,
                )
            if not {"native", "compact", "readable", "pyarrow table"} <= set(results):
                continue
            nw, nr = results["native"]
            cw, cr = results["compact"]
            lw, lr = results["pyarrow table"]
            rw, rr = results["readable"]
            print(
                f"| {case} | | ratios | compact/native {cw / nw:.2f}x / {cr / nr:.2f}x; "
                f"readable/pyarrow table {rw / lw:.2f}x / {rr / lr:.2f}x | | | |",
                flush=True,
            )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        op, method, case, mb, path = sys.argv[2:7]
        child(op, method, case, float(mb), path)
    else:
        main(float(os.environ.get("TRAJKIT_BENCH_ARROW_MB", "100")))
