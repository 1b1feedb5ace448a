"""`trajkit import`: inputs that are not regular files are refused before they are opened."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


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
