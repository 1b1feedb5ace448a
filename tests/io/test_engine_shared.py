"""The engine's own process works too: order kept, `jobs` processes in all, this one among them."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from trajkit._io import engine
from trajkit._io.discovery import discover


def _where(items: Sequence[engine.Item]) -> list[tuple[str, int]]:
    """Each file with the process that saw it (module level: workers unpickle it)."""
    return [(item.path, os.getpid()) for item in items]


@pytest.mark.parametrize("jobs", [2, 3])
def test_results_in_order_from_at_most_jobs_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    monkeypatch.setattr(engine, "CHUNK_FILES", 1)
    monkeypatch.setattr(engine, "IN_PROCESS_FILES", 0)  # a pool, however few the files
    names = [f"r{i}.npz" for i in range(40)]
    for name in names:
        (tmp_path / name).touch()
    seen = list(engine.run_ordered(_where, discover(str(tmp_path)), jobs=jobs))
    assert [Path(path).name for path, _ in seen] == names
    processes = {pid for _, pid in seen}
    assert os.getpid() in processes  # this process took chunks while the workers started
    assert len(processes) <= jobs
