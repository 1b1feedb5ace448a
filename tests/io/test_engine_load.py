"""`--jobs` on a busy machine: the engine starts workers only on cores no other process holds."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

import trajkit
from trajkit._io import engine
from trajkit._io.discovery import discover
from trajkit.testing import example_rollout


def _loadavg(tmp_path: Path, running: int) -> str:
    path = tmp_path / "loadavg"
    path.write_text(f"0.52 0.58 0.59 {running}/467 12345\n", encoding="ascii")
    return str(path)


@pytest.mark.parametrize(("running", "others"), [(1, 0), (2, 1), (5, 4), (0, 0)])
def test_others_running_are_the_running_count_less_this_process(
    tmp_path: Path, running: int, others: int
) -> None:
    assert engine.others_running(_loadavg(tmp_path, running)) == others


@pytest.mark.parametrize("text", ["", "0.1 0.1 0.1\n", "0.1 0.1 0.1 x/9 1\n"])
def test_others_running_are_unknown_where_nothing_says(tmp_path: Path, text: str) -> None:
    path = tmp_path / "loadavg"
    path.write_text(text, encoding="ascii")
    assert engine.others_running(str(path)) is None
    assert engine.others_running(str(tmp_path / "missing")) is None


@pytest.mark.skipif(not os.path.exists("/proc/loadavg"), reason="no /proc/loadavg here")
def test_others_running_read_linux_by_default() -> None:
    code = "from trajkit._io import engine; print(engine.others_running())"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert int(done.stdout) >= 0


@pytest.mark.parametrize(
    ("wanted", "others", "cores", "free"),
    [
        (1, 0, 2, 1),
        (1, 1, 2, 0),  # the other core held: none
        (3, 0, 4, 3),
        (3, 1, 4, 2),
        (3, 2, 4, 1),
        (3, 3, 4, 0),
        (3, 9, 4, 0),
        (2, 0, 8, 2),  # never more than asked for
        (7, 0, 2, 7),  # nothing else running: as many as asked for, more than the cores too
        (7, 1, 4, 2),
        (2, None, 2, 2),  # unknown: as asked
    ],
)
def test_free_workers_on_the_cores_no_other_process_holds(
    wanted: int, others: int | None, cores: int, free: int
) -> None:
    assert engine.free_workers(wanted, others, cores=cores) == free


def test_free_workers_count_the_machines_cores_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    assert engine.free_workers(2, 1) == 1
    assert engine.free_workers(2, 0) == 2


def test_free_workers_say_why_they_are_fewer(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="trajkit"):
        engine.free_workers(3, 0, cores=4)
        assert caplog.messages == []
        engine.free_workers(3, 2, cores=4)
        engine.free_workers(1, 1, cores=2)
    assert caplog.messages == [
        "3 worker process(es) asked for; 2 other process(es) running on 4 cores: 1 started",
        "1 worker process(es) asked for; 1 other process(es) running on 2 cores: "
        "worked through in this process",
    ]


def test_fewest_of_the_known_counts() -> None:
    assert engine._fewest(2, 1) == 1
    assert engine._fewest(None, 3) == 3
    assert engine._fewest(None, None) is None


def _pid(items: Sequence[engine.Item]) -> list[int]:
    return [os.getpid() for _ in items]


def _pids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, running: int) -> set[int]:
    monkeypatch.setattr(engine, "CHUNK_FILES", 1)
    monkeypatch.setattr(engine, "IN_PROCESS_FILES", 0)  # a pool, however few the files
    monkeypatch.setattr(engine, "LOADAVG", _loadavg(tmp_path, running))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    folder = tmp_path / "runs"
    folder.mkdir()
    for i in range(40):
        (folder / f"r{i:02d}.npz").touch()
    return set(engine.run_ordered(_pid, discover(str(folder)), jobs=2))


def test_a_busy_machine_works_in_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="trajkit"):
        assert _pids(tmp_path, monkeypatch, running=2) == {os.getpid()}
    assert caplog.messages == [
        "1 worker process(es) asked for; 1 other process(es) running on 2 cores: "
        "worked through in this process"
    ]


def test_an_idle_machine_starts_the_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pids = _pids(tmp_path, monkeypatch, running=1)
    assert os.getpid() in pids
    assert len(pids) <= 2  # the worker joins when it starts in time; it is started


def test_validate_v_says_so_when_run_as_users_run_it(tmp_path: Path) -> None:
    for i in range(engine.IN_PROCESS_FILES + 1):
        trajkit.save(example_rollout(num_steps=2, num_envs=1, seed=i), tmp_path / f"r{i:03d}.npz")
    busy = _loadavg(tmp_path, running=1 + (os.cpu_count() or 1))  # every core held
    code = (
        f"import sys, trajkit._io.engine as engine; engine.LOADAVG = {busy!r}; "
        "from trajkit.cli import console_main; sys.argv[0] = 'trajkit'; console_main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "validate", "-v", "-j", "2", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(
        f"trajkit: 1 worker process(es) asked for; {os.cpu_count()} other process(es) running "
        f"on {os.cpu_count()} cores: worked through in this process\n49 files: 49 ok"
    )


def test_the_pool_gets_the_free_workers_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    sizes: list[int] = []
    real = engine._pool

    def pool(work: engine.Work[int], workers: int, method: str) -> object:
        sizes.append(workers)
        return real(work, workers, method)

    monkeypatch.setattr(engine, "_pool", pool)
    monkeypatch.setattr(engine, "CHUNK_FILES", 1)
    monkeypatch.setattr(engine, "IN_PROCESS_FILES", 0)
    monkeypatch.setattr(engine, "LOADAVG", _loadavg(tmp_path, running=2))  # one other
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    folder = tmp_path / "runs"
    folder.mkdir()
    for i in range(12):
        (folder / f"r{i:02d}.npz").touch()
    with caplog.at_level(logging.INFO, logger="trajkit"):
        assert len(list(engine.run_ordered(_pid, discover(str(folder)), jobs=4))) == 12
    assert sizes == [2]  # 3 asked for, 4 cores, one held by another program
    assert "4 jobs: this process and 2 worker process(es)" in caplog.text
