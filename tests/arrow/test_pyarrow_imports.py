"""`trajkit.arrow` and `trajkit export`/`import` as users run them: each in a fresh interpreter.

In one pytest process another test may have imported `pyarrow.compute` or `pyarrow.parquet`
first; a fresh interpreter has imported nothing, so a submodule reached as an attribute of
`pyarrow` (`pa.compute`) fails there, and only there.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyarrow", reason="trajkit.arrow needs pyarrow (trajkit[arrow])")

import trajkit
from trajkit.testing import example_rollout


def _python(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=300, check=False, cwd=cwd
    )


@pytest.mark.parametrize("layout", ["readable", "compact"])
def test_write_and_read_parquet_in_fresh_interpreters(tmp_path: Path, layout: str) -> None:
    path = tmp_path / "run.parquet"
    write = (
        "import trajkit.arrow\n"
        "from trajkit.testing import example_rollout\n"
        "r = example_rollout(num_steps=5, num_envs=3, nested=True, truncation=True)\n"
        f"trajkit.arrow.write_parquet(r, {str(path)!r}, layout={layout!r})\n"
    )
    done = _python("-c", write, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    read = (
        "import trajkit.arrow\n"
        "from trajkit.testing import example_rollout\n"
        "r = example_rollout(num_steps=5, num_envs=3, nested=True, truncation=True)\n"
        f"(back,) = trajkit.arrow.read_parquet({str(path)!r})\n"
        "print(back == r)\n"
    )
    done = _python("-c", read, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


@pytest.mark.parametrize("layout", ["readable", "compact"])
def test_export_then_import_commands_in_fresh_interpreters(tmp_path: Path, layout: str) -> None:
    rollout = example_rollout(num_steps=4, num_envs=2, nested=True)
    trajkit.save(rollout, tmp_path / "in.npz")
    out = tmp_path / "run.parquet"
    export = ("-m", "trajkit", "export", "in.npz", "--out", str(out), "--layout", layout)
    done = _python(*export, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    done = _python("-m", "trajkit", "import", str(out), "--out", "back", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert trajkit.load(tmp_path / "back" / "rollout-00000.npz") == rollout


def test_read_parquet_imports_no_pandas_whatever_the_row_order(tmp_path: Path) -> None:
    """pyarrow imports pandas (about a second) on its first `pa.array(ndarray)`: none here."""
    import numpy as np
    import pyarrow.parquet as pq

    import trajkit.arrow
    from tests.arrow.helpers import image_rollout

    trajkit.arrow.write_parquet(image_rollout(), tmp_path / "run.parquet")  # compact, finals
    table = pq.read_table(tmp_path / "run.parquet")
    order = np.random.default_rng(0).permutation(table.num_rows)
    pq.write_table(table.take(order), tmp_path / "shuffled.parquet")
    read = (
        "import sys, trajkit.arrow\n"
        "a = trajkit.arrow.read_parquet('run.parquet')\n"
        "b = trajkit.arrow.read_parquet('shuffled.parquet')\n"
        "print(a == b, 'pandas' in sys.modules)\n"
    )
    done = _python("-c", read, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False"]
