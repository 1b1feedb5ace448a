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


_CALLS: list[list[str]] = []


def _logged(items: Sequence[engine.Item]) -> list[tuple[str, int]]:
    """`_where`, each call's files logged (in this process: the pool below is threads)."""
    _CALLS.append([Path(item.path).name for item in items])
    return _where(items)


@pytest.mark.parametrize(
    "first_bytes", [engine.WARM_BYTES, engine.WARM_BYTES + 1], ids=["small", "large"]
)
def test_before_forking_the_first_small_file_alone_is_worked_through_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first_bytes: int
) -> None:
    # What a small first file builds (pydantic's validators) the forked workers inherit;
    # its result is dropped and its chunk shared out as any other. A large first file is
    # not worked twice: its whole chunk is worked through here first, as before.
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(engine, "CHUNK_FILES", 4)
    names = [f"r{i}.npz" for i in range(10)]
    for i, name in enumerate(names):
        (tmp_path / name).write_bytes(b"\0" * (first_bytes if i == 0 else 10))
    groups = engine.chunks(discover(str(tmp_path)))
    _CALLS.clear()
    with ThreadPoolExecutor(1) as pool:
        seen = list(engine._shared(_logged, groups, pool, 1, 4, forked=True))  # type: ignore[arg-type]
    assert [Path(path).name for path, _ in seen] == names  # each once, in order
    chunks = [names[:4], names[4:8], names[8:]]
    if first_bytes <= engine.WARM_BYTES:
        assert _CALLS[0] == ["r0.npz"]  # alone, before the fork
        assert sorted(_CALLS[1:]) == chunks  # (the first chunk's, by whichever process)
    else:
        assert _CALLS[0] == chunks[0]  # here, before the fork
        assert sorted(_CALLS[1:]) == chunks[1:]
