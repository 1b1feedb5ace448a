"""Rollout files: `trajkit.save`/`trajkit.load` vs bare `np.savez`/`np.load` of the same arrays.

Measurements with `time.perf_counter`, in one process, in a temporary folder that is removed
afterwards. trajkit and its baseline run alternately and the medians are compared, so that both
see the same page cache and dirty-page writeback; every save writes a new file (the previous one
is removed untimed), as a recorder does:

1. save and load of a ~200 MB rollout (uint8 Atari-like observations [257, 24, 84, 84, 4],
   float32 states [257, 24, 1024], the four known model outputs, infos), uncompressed, as a ratio
   to `np.savez` / `np.load` (loading every array) of the same arrays. Target: at most 1.2x.
   `trajkit.save` also checks the infos, fsyncs and renames (atomic); `trajkit.load` also checks
   every header, CRC and `Rollout` rule. `np.savez` only fills the page cache, while
   `trajkit.save` waits for the disk (fsync; a helper thread flushes pages while the writer goes
   on): the `np.savez` + fsync row compares like with like, and the row with the syncs stubbed
   out shows what the writer itself costs.
2. a hot load (the file in the page cache) against a raw read of the file's bytes into a new
   array (what any load must at least do; target 1.3x), and into a buffer already in memory;
   also with the standard zlib's CRC-32, as without `trajkit[fast]` (zlib-ng's);
3. `load(mmap=True)`, and compressed save/load (`np.savez_compressed`), for information;
4. metadata-only validation of 1,000 small files (`trajkit.read_metadata`, and
   `trajkit validate --quick`), per file, against reading `metadata.json` with bare `zipfile`.

Run: `python benchmarks/bench_files.py` (or `python benchmarks/run.py files`).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
from _timing import best_of
from numpy.typing import NDArray

import trajkit
from trajkit._io import crc
from trajkit.cli import main as cli_main
from trajkit.testing import example_rollout

T, B, H, W, C, STATE = 256, 24, 84, 84, 4, 1024
SMALL_FILES = 1000


def big_rollout() -> trajkit.Rollout:
    rng = np.random.default_rng(0)
    obses = np.zeros((T + 1, B, H, W, C), np.uint8)  # Atari-like: a flat background...
    obses[:, :, 30:54, 30:54, :] = rng.integers(0, 255, (T + 1, B, 24, 24, C), np.uint8)
    dones = rng.random((T + 1, B)) < 0.01
    return trajkit.Rollout(
        states=rng.normal(size=(T + 1, B, STATE)).astype(np.float32),
        obses=obses,
        rews=rng.normal(size=(T, B)).astype(np.float32),
        dones=dones,
        infos=[[{"t": t, "lives": 3} for _ in range(B)] for t in range(T)],
        model_outs={
            "critic": rng.normal(size=(T + 1, B)).astype(np.float32),
            "actions": rng.integers(0, 18, (T + 1, B)).astype(np.int32),
            "log_probs": -rng.random((T + 1, B)).astype(np.float32),
            "actor": rng.normal(size=(T + 1, B, 18)).astype(np.float32),
        },
        copy=False,
    )


def arrays_of(r: trajkit.Rollout) -> dict[str, NDArray[Any]]:
    arrays = {"states": r.states, "obses": r.obses, "rews": r.rews, "dones": r.dones}
    arrays.update(r.model_outs.arrays)
    return arrays


def np_load_all(path: Path) -> None:
    with np.load(path) as data:
        for name in data.files:
            data[name]


def savez_fsync(path: Path, arrays: dict[str, NDArray[Any]]) -> None:
    with open(path, "wb") as file:
        np.savez(file, **arrays)  # type: ignore[arg-type]
        file.flush()
        os.fsync(file.fileno())


def row(case: str, base_name: str, base: float, ours: float, target: str, met: bool | None) -> str:
    verdict = "-" if met is None else ("yes" if met else "NO")
    return (
        f"| {case} | {base_name}: {duration(base)} | {duration(ours)} | "
        f"{ours / base:.2f}x | {target} | {verdict} |"
    )


def duration(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.0f} µs"


def paired(
    base: Callable[[], object],
    ours: Callable[[], object],
    repeats: int,
    before: Callable[[], object] = lambda: None,
) -> tuple[float, float]:
    """Median wall times of `base` and `ours`, run alternately so both see the same machine
    state (page cache, dirty-page writeback); `before` runs untimed before each call."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for fn, out in ((base, times[0]), (ours, times[1])):
            before()
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    return float(np.median(times[0])), float(np.median(times[1]))


@contextlib.contextmanager
def zlib_crc() -> Iterator[None]:
    """Within the block, the CRC-32 of the standard zlib, as without `trajkit[fast]`."""
    with mock.patch.dict(sys.modules, {"zlib_ng": None}):
        crc._implementation.cache_clear()
        try:
            yield
        finally:
            crc._implementation.cache_clear()


def bench_big(tmp: Path) -> list[str]:
    r = big_rollout()
    arrays = arrays_of(r)
    size_mb = sum(a.nbytes for a in arrays.values()) / 1e6
    ours, base = tmp / "ours.npz", tmp / "base.npz"

    def fresh() -> None:  # every save writes a new file, as a recorder does
        ours.unlink(missing_ok=True)
        base.unlink(missing_ok=True)

    repeats = 7
    t_savez, t_save = paired(
        lambda: np.savez(base, **arrays),  # type: ignore[arg-type]
        lambda: trajkit.save(r, ours),
        repeats,
        fresh,
    )
    t_savez_fsync, t_save2 = paired(
        lambda: savez_fsync(base, arrays), lambda: trajkit.save(r, ours), 3, fresh
    )
    # What the writer costs without waiting for the disk: no fsync, no writeback thread.
    with mock.patch("os.fsync"), mock.patch("os.fdatasync"):
        t_savez_nosync, t_save_nosync = paired(
            lambda: np.savez(base, **arrays),  # type: ignore[arg-type]
            lambda: trajkit.save(r, ours),
            repeats,
            fresh,
        )
    np.savez(base, **arrays)  # type: ignore[arg-type]
    trajkit.save(r, ours)
    t_npload, t_load = paired(lambda: np_load_all(base), lambda: trajkit.load(ours), repeats)
    t_mmap = best_of(lambda: trajkit.load(ours, mmap=True), repeats)
    size = ours.stat().st_size
    buffer = bytearray(size)

    def raw_read() -> None:  # the file's bytes into a new array, from the page cache
        with open(ours, "rb") as file:
            file.readinto(np.empty(size, np.uint8).data)

    def raw_read_reused() -> None:  # the same into memory already touched: no page faults
        with open(ours, "rb") as file:
            file.readinto(buffer)

    t_raw, t_hot = paired(raw_read, lambda: trajkit.load(ours), repeats)
    t_raw2, t_hot_nv = paired(raw_read, lambda: trajkit.load(ours, verify=False), repeats)
    t_raw3, t_hot3 = paired(raw_read_reused, lambda: trajkit.load(ours), repeats)
    with zlib_crc():
        t_raw4, t_hot4 = paired(raw_read, lambda: trajkit.load(ours), repeats)
    if trajkit.load(ours) != r:
        raise RuntimeError("the loaded rollout differs")
    ours_z, base_z = tmp / "ours-z.npz", tmp / "base-z.npz"
    t_savez_z, t_save_z = paired(
        lambda: np.savez_compressed(base_z, **arrays),  # type: ignore[arg-type]
        lambda: trajkit.save(r, ours_z, compress=True),
        1,
    )
    t_npload_z, t_load_z = paired(lambda: np_load_all(base_z), lambda: trajkit.load(ours_z), 2)
    what = f"{size_mb:.0f} MB rollout"
    mb_z = ours_z.stat().st_size / 1e6
    return [
        row(f"save, {what}", "`np.savez`", t_savez, t_save, "<= 1.2x", t_save <= 1.2 * t_savez),
        row(f"save, {what}", "`np.savez` + fsync", t_savez_fsync, t_save2, "info", None),
        row(
            f"save with `os.fsync`/`os.fdatasync` stubbed out, {what}",
            "`np.savez`",
            t_savez_nosync,
            t_save_nosync,
            "info",
            None,
        ),
        row(f"load, {what}", "`np.load`", t_npload, t_load, "<= 1.2x", t_load <= 1.2 * t_npload),
        row(f"load `mmap=True`, {what}", "`np.load`", t_npload, t_mmap, "info", None),
        row(f"hot load, {what}", "raw read", t_raw, t_hot, "<= 1.3x", t_hot <= 1.3 * t_raw),
        row(f"hot load `verify=False`, {what}", "raw read", t_raw2, t_hot_nv, "info", None),
        row(f"hot load, {what}", "raw read, reused buffer", t_raw3, t_hot3, "info", None),
        row(f"hot load with zlib's CRC-32, {what}", "raw read", t_raw4, t_hot4, "info", None),
        row(
            f"save compressed ({mb_z:.0f} MB file)",
            "`np.savez_compressed`",
            t_savez_z,
            t_save_z,
            "info",
            None,
        ),
        row("load compressed", "`np.load`", t_npload_z, t_load_z, "info", None),
    ]


def read_raw_metadata(paths: list[Path]) -> None:
    for path in paths:
        with zipfile.ZipFile(path) as archive:
            json.loads(archive.read("metadata.json"))


def bench_metadata(tmp: Path) -> list[str]:
    folder = tmp / "many"
    folder.mkdir()
    first = folder / "r0000.npz"
    trajkit.save(example_rollout(num_steps=128, num_envs=8, truncation=True), first)
    paths = [first]
    for i in range(1, SMALL_FILES):
        paths.append(folder / f"r{i:04d}.npz")
        shutil.copyfile(first, paths[-1])
    t_raw = best_of(lambda: read_raw_metadata(paths), 3) / SMALL_FILES
    t_meta = best_of(lambda: [trajkit.read_metadata(p) for p in paths], 3) / SMALL_FILES

    def quick_cli() -> None:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = cli_main(["validate", "--quick", str(folder)])
        if code != 0:
            raise RuntimeError("validate --quick failed")

    t_cli = best_of(quick_cli, 3) / SMALL_FILES
    t_load = best_of(lambda: [trajkit.load(p) for p in paths[:200]], 2) / 200
    label = f"per file, {SMALL_FILES:,} files (T=128, B=8)"
    return [
        row(f"`read_metadata`, {label}", "`zipfile` + `json`", t_raw, t_meta, "info", None),
        row(
            f"`trajkit validate --quick`, {label}", "`zipfile` + `json`", t_raw, t_cli, "info", None
        ),
        row(
            f"full `load` (every check), {label}", "`zipfile` + `json`", t_raw, t_load, "info", None
        ),
    ]


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="trajkit-bench-") as name:
        tmp = Path(name)
        rows = bench_big(tmp)
        rows += bench_metadata(tmp)
    print("| case | baseline | trajkit | ratio | target | met |")
    print("|---|---|---|---|---|---|")
    for line in rows:
        print(line)


if __name__ == "__main__":
    main()
