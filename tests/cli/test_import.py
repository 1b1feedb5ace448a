"""`trajkit import`: inputs that are not regular files are refused before they are opened;
the rollouts are read one at a time and written all or none."""

from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import trajkit
from trajkit.cli import main
from trajkit.testing import example_rollout


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_import_refuses_a_fifo_instead_of_blocking_on_it(tmp_path: Path) -> None:
    """Issue 34: `trajkit import FIFO` hung in `open()`; `validate` refused FIFOs already."""
    fifo = tmp_path / "runs.parquet"
    os.mkfifo(fifo)
    done = subprocess.run(  # in a fresh interpreter, so that a regression fails, not hangs
        [sys.executable, "-m", "trajkit", "import", str(fifo), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr == f"{fifo}: invalid: cannot open: not a regular file\n"
    assert not (tmp_path / "out").exists()


def test_import_refuses_a_folder(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trajkit", "import", str(tmp_path), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr == f"{tmp_path}: invalid: cannot open: a folder\n"


def _runs(path: Path, count: int, obs: int = 4) -> list[trajkit.Rollout]:
    pytest.importorskip("pyarrow", reason="trajkit import needs pyarrow (trajkit[arrow])")
    import trajkit.arrow as ta

    rollouts = [
        example_rollout(num_steps=8, num_envs=4, obs_shape=(obs,), seed=i) for i in range(count)
    ]
    ta.write_parquet(rollouts, path, compression="none")
    return rollouts


def _with_nan_reward(path: Path, rollout: int) -> None:
    """Rewrite the file with a NaN reward in one rollout's first row (rows kept in order)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    rows = np.flatnonzero(table.column("rollout").to_numpy() == rollout)
    rewards = table.column("reward").to_numpy().copy()
    rewards[rows[0]] = np.nan
    i = table.column_names.index("reward")
    pq.write_table(table.set_column(i, "reward", pa.array(rewards)), path)


def test_a_rollout_refused_midway_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "runs.parquet"
    _runs(source, 3)
    _with_nan_reward(source, 2)  # the first two rollouts are read, and staged, first
    out = tmp_path / "new"
    assert main(["import", str(source), "--out", str(out)]) == 1
    assert capsys.readouterr().err == (
        f"{source}: invalid: rews must be finite, got nan at (t=0, b=0)\n"
    )
    assert not out.exists()  # the folder it made, removed again
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "rollout-00000.npz").write_bytes(b"old")
    assert main(["import", str(source), "--out", str(kept)]) == 1
    assert sorted(p.name for p in kept.iterdir()) == ["rollout-00000.npz"]  # no temporary file
    assert (kept / "rollout-00000.npz").read_bytes() == b"old"


def test_import_holds_one_rollout_at_a_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "runs.parquet"
    rollouts = _runs(source, 6, obs=64 * 1024)  # 8.5 MB of observations each
    arrays = [[r.obses, r.rews, r.dones, *r.model_outs.arrays.values()] for r in rollouts]
    size = sum(a.nbytes for each in arrays for a in each) // 6  # one rollout's arrays
    tracemalloc.start()
    try:
        assert main(["import", str(source), "--out", str(tmp_path / "back")]) == 0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * size  # six rollouts held at once would be more than 6 * size
    printed = capsys.readouterr().out.split()
    assert printed == [str(tmp_path / "back" / f"rollout-{i:05d}.npz") for i in range(6)]
    assert [trajkit.load(path) for path in printed] == rollouts
