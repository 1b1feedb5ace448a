"""Benchmark Parquet export and import of image and vector rollouts: time and peak memory.

Run `python benchmarks/bench_arrow.py` (or `make bench`); `TRAJKIT_BENCH_ARROW_MB` sets the
size (default 100; issue 45's case is 927: T=2048 images by B=64),
`TRAJKIT_BENCH_ARROW_METHODS` the methods (below; default all),
`TRAJKIT_BENCH_ARROW_CASES` the rollouts (`image,vector`) and `TRAJKIT_BENCH_ARROW_ROUNDS`
the children per operation (`ROUNDS`, default 3: more where fresh processes vary, as on a
virtual machine whose memory is first touched). For an image rollout (uint8 84x84, int32
actions, float32 critic) and a vector rollout (17 float32 observations, 6 float32 actions,
critic), each of about MB megabytes, it measures in a fresh child process per operation
(so that its peak resident memory, `ru_maxrss`, is its own):

* `native`: `trajkit.save` / `trajkit.load` (the baseline of the compact layout);
* `compact`, `readable`: `trajkit.arrow.write_parquet(..., layout=...)` / `read_parquet`
  (read validates the whole rollout);
* `pyarrow read compact`, `pyarrow read readable`: `pyarrow.parquet.read_table` of the very
  file `write_parquet` wrote, each column's chunks combined and turned into NumPy (numbers
  and bools by `to_numpy`, bytes by a view of their buffer; strings left as they are):
  pyarrow's own cost of reading that file, the baseline of `read_parquet`;
* `pyarrow list`, `pyarrow bytes`: pyarrow writing and reading the same arrays by hand, one
  column per array, tensors as fixed-size lists or as fixed-size binary, with
  `pq.write_table` / `pq.read_table` and `to_numpy`;
* `pyarrow table`: pyarrow writing the readable layout's own table (built before the
  timing) and reading it back with `to_numpy` of each column.

Time is the minimum of ROUNDS children (the reads of one round run one after the other, so
that the machine's load falls on all of them alike); memory is the child's peak minus its
resident size just before the operation (the rollout it writes, already in memory, is not
counted), as a multiple of the payload. Imports, the pandas import of pyarrow's first
conversion and trajkit's compiled checks come before the timing. Uncompressed, so that the
ratios show the layouts' own cost. The last lines print the ratios of issue 45's goals:
`read_parquet` at most 1.2x pyarrow's read of the same file and at most 1.5x the native
load, its peak at most 1.3x the payload. Reported, never asserted.
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

ROUNDS = max(1, int(os.environ.get("TRAJKIT_BENCH_ARROW_ROUNDS", "3")))


B = 64
_CELL = {"image": (84 * 84, 4), "vector": (17 * 4, 6 * 4)}  # bytes of an observation, an action
_ROW = {case: obs + action + 4 + 4 + 4 for case, (obs, action) in _CELL.items()}
"""Bytes of one step of one env: observation, action, critic, reward, done."""


def steps(case: str, mb: float) -> int:
    """T of the rollout of about `mb` megabytes."""
    return max(1, int(mb * 1e6 / (B * _ROW[case])))


def rollout(case: str, mb: float) -> Any:
    import trajkit

    rng = np.random.default_rng(0)
    T = steps(case, mb)
    if case == "image":
        obs = rng.integers(0, 256, size=(T + 1, B, 84, 84), dtype=np.uint8)
        actions = rng.integers(0, 18, size=(T + 1, B)).astype(np.int32)
    else:
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


def payload(case: str, mb: float) -> int:
    """The bytes of `rollout(case, mb)`'s arrays, computed without making it.

    The bench's own process stays small: a child started from it (vfork, then exec) starts
    with its peak resident size as `ru_maxrss`, on Linux.
    """
    return (steps(case, mb) + 1) * B * _ROW[case] - B * 4  # rews: T rows, not T+1


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
    rollout(case, 0.2)  # trajkit's compiled checks (numba) load on the first large array
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
        back = to_numpy(pa, pq.read_table(path))
    seconds = time.perf_counter() - start
    del back
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"s": seconds, "extra": max(0, peak - before)}))


def to_numpy(pa: Any, table: Any) -> list[Any]:
    """Each column of `table` as NumPy, its chunks combined (strings left as they are)."""
    columns: list[Any] = []
    types = pa.types
    for column in table.columns:
        array = column.combine_chunks()
        while pa.types.is_fixed_size_list(array.type):
            array = array.flatten()
        if pa.types.is_fixed_size_binary(array.type):
            columns.append(np.frombuffer(array.buffers()[1], np.uint8))
        elif any(
            test(array.type) for test in (types.is_integer, types.is_floating, types.is_boolean)
        ):
            columns.append(array.to_numpy(zero_copy_only=False))
        else:
            columns.append(array)
    del table
    return columns


def run(op: str, method: str, case: str, mb: float, path: str) -> dict[str, Any]:
    """One child process of `op` by `method`: its seconds and peak extra bytes."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", op, method, case, str(mb), path],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    got: dict[str, Any] = json.loads(done.stdout)
    return got


METHODS = ("native", "compact", "readable", "pyarrow bytes", "pyarrow list", "pyarrow table")
_READ_OF = {"pyarrow read compact": "compact", "pyarrow read readable": "readable"}
"""Reads of another method's file: pyarrow's own read of what write_parquet wrote."""


def methods() -> tuple[str, ...]:
    """`METHODS`, or the comma-separated subset in TRAJKIT_BENCH_ARROW_METHODS (1 GB: the
    list layouts need 5-30x the payload)."""
    chosen = os.environ.get("TRAJKIT_BENCH_ARROW_METHODS")
    return tuple(chosen.split(",")) if chosen else METHODS


def measure(case: str, mb: float, tmp: str) -> dict[str, tuple[float, float, float, float]]:
    """Per method: best write and read seconds, largest write and read peaks (bytes)."""
    chosen = methods()
    paths = {m: os.path.join(tmp, m.replace(" ", "-") + ".file") for m in chosen}
    writes = {}
    for method in chosen:
        runs = [run("write", method, case, mb, paths[method]) for _ in range(ROUNDS)]
        writes[method] = (min(r["s"] for r in runs), max(r["extra"] for r in runs))
    readers = [*chosen, *(m for m, source in _READ_OF.items() if source in chosen)]
    reads: dict[str, list[dict[str, Any]]] = {m: [] for m in readers}
    for _ in range(ROUNDS):  # interleaved: the machine's load falls on every reader alike
        for method in readers:
            path = paths[_READ_OF.get(method, method)]
            reads[method].append(run("read", method, case, mb, path))
    for path in paths.values():
        os.unlink(path)
    nothing = (float("nan"), 0.0)
    return {
        m: (*writes.get(m, nothing)[:1], min(r["s"] for r in reads[m]), writes.get(m, nothing)[1],
            max(r["extra"] for r in reads[m]))
        for m in readers
    }  # fmt: skip


def main(mb: float) -> None:
    print("| rollout | MB | method | write s | read s | write peak | read peak |")
    print("|---|---|---|---|---|---|---|")
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in os.environ.get("TRAJKIT_BENCH_ARROW_CASES", "image,vector").split(","):
            size = payload(case, mb) / 1e6
            results = measure(case, mb, tmp)
            for method, (w, r, wx, rx) in results.items():
                print(
                    f"| {case} | {size:.0f} | {method} | {w:.2f} | {r:.2f} | "
                    f"{wx / 1e6 / size:.2f}x | {rx / 1e6 / size:.2f}x |",
                    flush=True,
                )
            ratios += list(goals(case, size, results))
    print()
    for line in ratios:
        print(line)


def goals(case: str, size: float, results: dict[str, tuple[float, float, float, float]]) -> Any:
    """Issue 45's ratios for `case`, as lines: read_parquet against its baselines."""
    for layout in ("compact", "readable"):
        pyarrow = f"pyarrow read {layout}"
        if layout not in results or pyarrow not in results:
            continue
        _, read, _, peak = results[layout]
        line = (
            f"{case} {layout}: read_parquet / pyarrow read_table+to_numpy "
            f"{read / results[pyarrow][1]:.2f}x"
        )
        if "native" in results:
            line += f", / native load {read / results['native'][1]:.2f}x"
        yield line + f"; read peak {peak / 1e6 / size:.2f}x the payload"
    if {"native", "compact"} <= set(results):
        write = results["compact"][0] / results["native"][0]
        yield f"{case} compact: write_parquet / native save {write:.2f}x"


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        op, method, case, mb, path = sys.argv[2:7]
        child(op, method, case, float(mb), path)
    else:
        main(float(os.environ.get("TRAJKIT_BENCH_ARROW_MB", "100")))
