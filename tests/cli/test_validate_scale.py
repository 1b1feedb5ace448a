"""`trajkit validate` at scale: worker processes, streamed JSON, the summary, URLs."""

from __future__ import annotations

import io
import json
import shutil
import sys
from collections.abc import Iterator
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import pytest

import trajkit
from tests.cli.helpers import run
from trajkit._cli import validate as cli_validate
from trajkit._io import engine, raytasks
from trajkit._io.remote import load_any
from trajkit.cli import main
from trajkit.dataset import FileCheck, check_file, validate_files
from trajkit.testing import example_rollout

fsspec = pytest.importorskip("fsspec", reason="URLs need fsspec (trajkit[cloud])")


def damage(path: Path) -> None:
    """Flip a byte of the observations: the CRC-32 check fails."""
    r = trajkit.load(path)
    data = bytearray(path.read_bytes())
    data[data.find(r.obses.tobytes()) + 3] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    """14 files in two folders: valid ones, damaged ones, a non-ZIP, one of another layout."""
    root = tmp_path / "mixed"
    (root / "b").mkdir(parents=True)
    trajkit.save(example_rollout(num_steps=3), root / "a00.npz")
    for i in range(1, 12):
        folder = root / "b" if i % 2 else root
        shutil.copyfile(root / "a00.npz", folder / f"a{i:02d}.npz")
    damage(root / "a04.npz")
    damage(root / "b" / "a09.npz")
    (root / "b" / "junk.npz").write_bytes(b"PK\x03\x04 not a zip")
    trajkit.save(example_rollout(obs_shape=(2,)), root / "b" / "other.npz")
    return root


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three files per chunk, so that a few files make several chunks for the workers."""
    monkeypatch.setattr(engine, "CHUNK_FILES", 3)
    monkeypatch.setattr(engine, "IN_PROCESS_FILES", 0)  # workers, however few the files


@pytest.mark.usefixtures("small_chunks")
def test_jobs_give_the_same_verdicts_in_the_same_order(
    capsys: pytest.CaptureFixture[str], mixed: Path, tmp_path: Path
) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(trajkit.RolloutSpec.from_rollout(example_rollout()).model_dump_json())
    outputs = {}
    for jobs in ("1", "2"):
        code, out, err = run(capsys, "validate", "--jobs", jobs, "--spec", str(spec), str(mixed))
        assert code == 1
        outputs[jobs] = out
        assert "14 files: 10 ok, 4 invalid" in err
        code, out, _ = run(capsys, "validate", "-j", jobs, "--json", str(mixed))
        outputs[f"json{jobs}"] = out
    assert outputs["1"] == outputs["2"]
    assert outputs["json1"] == outputs["json2"]
    lines = outputs["1"].splitlines()
    names = [line.split(": ")[0].removeprefix(f"{mixed}/") for line in lines]
    assert names[:6] == ["a00.npz", "a02.npz", "a04.npz", "a06.npz", "a08.npz", "a10.npz"]
    assert names[6:] == [f"b/a{i:02d}.npz" for i in range(1, 12, 2)] + ["b/junk.npz", "b/other.npz"]
    assert "a04.npz: invalid: member obses.npy: CRC-32 mismatch" in outputs["1"]
    other = "other.npz: invalid: obses: per-step shape (2,), but the spec says obs_shape (4,)"
    assert other in outputs["1"]


def test_json_lines_one_object_per_file(
    capsys: pytest.CaptureFixture[str], mixed: Path, tmp_path: Path
) -> None:
    """Issue 29: the help said one object per line, and a JSON array came out."""
    code, out, _ = run(capsys, "validate", "--json", str(mixed), str(tmp_path / "missing.npz"))
    assert code == 1
    objects = [json.loads(line) for line in out.splitlines()]
    assert len(objects) == 15
    assert all(set(o) == {"path", "ok", "problems"} for o in objects)
    assert objects[-1] == {
        "path": str(tmp_path / "missing.npz"),
        "ok": False,
        "problems": ["no such file or directory"],
    }
    code, out, _ = run(capsys, "validate", "--json", str(tmp_path / "missing.npz"))
    assert out.count("\n") == 1
    assert json.loads(out)["ok"] is False


class _Stdout(io.StringIO):
    """A stdout that keeps what had been flushed each time it is asked."""

    def __init__(self) -> None:
        super().__init__()
        self.flushed = ""

    def flush(self) -> None:
        self.flushed = self.getvalue()


def test_json_lines_are_written_as_each_file_is_checked(
    monkeypatch: pytest.MonkeyPatch, mixed: Path
) -> None:
    stdout = _Stdout()
    monkeypatch.setattr(sys, "stdout", stdout)
    checks = list(validate_files([str(mixed)], jobs=1))
    seen: list[int] = []

    def one_at_a_time(*args: object, **kwargs: object) -> Iterator[FileCheck]:
        for check in checks:
            seen.append(stdout.flushed.count("\n"))  # lines out before this check is given
            yield check

    monkeypatch.setattr(cli_validate, "validate_files", one_at_a_time)
    assert main(["validate", "--json", "--no-progress", str(mixed)]) == 1
    assert seen == list(range(len(checks)))
    assert stdout.flushed.count("\n") == len(checks)


def test_summary_line(capsys: pytest.CaptureFixture[str], mixed: Path) -> None:
    code, _, err = run(capsys, "validate", "--quick", str(mixed))
    assert code == 1
    total = sum(p.stat().st_size for p in mixed.rglob("*.npz"))
    summary = err.strip().splitlines()[-1]
    assert summary.startswith("14 files: 13 ok, 1 invalid; ")
    assert f"{total / 1024:,.1f} KiB in " in summary
    assert "files/s, " in summary
    assert summary.endswith("/s)")
    code, _, err = run(capsys, "validate", str(mixed / "a00.npz"))
    assert err == ""  # one file: its line says it all


def test_two_thousand_tiny_files(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    root = tmp_path / "many"
    root.mkdir()
    data_path = tmp_path / "one.npz"
    trajkit.save(example_rollout(num_steps=1, num_envs=1, keys=()), data_path)
    data = data_path.read_bytes()
    for i in range(2000):
        (root / f"r{i:04d}.npz").write_bytes(data)
    code, out, err = run(capsys, "validate", "--quick", "--jobs", "2", str(root))
    assert code == 0
    assert out.count(": ok\n") == 2000
    assert out.splitlines()[-1] == f"{root / 'r1999.npz'}: ok"
    assert "2000 files: 2000 ok, 0 invalid" in err


def test_python_api_streams_in_order(mixed: Path) -> None:
    checks = validate_files([str(mixed)], jobs=1)
    first = next(checks)
    assert first == FileCheck(str(mixed / "a00.npz"), (), (mixed / "a00.npz").stat().st_size)
    assert sum(not c.ok for c in checks) == 3
    with pytest.raises(ValueError, match="jobs must be None or an integer >= 1, got 0"):
        validate_files([str(mixed)], jobs=0)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--jobs", "0"], "0 jobs: use 1 to 4096"),
        (["--jobs", "4097"], "4097 jobs: use 1 to 4096"),
        (["--jobs", "99999999999999999999"], "99999999999999999999 jobs: use 1 to 4096"),
        (["--jobs", "two"], "invalid number of jobs 'two'"),
        (["--engine", "dask"], "invalid choice: 'dask'"),
    ],
)
def test_bad_jobs_and_engine(
    capsys: pytest.CaptureFixture[str], mixed: Path, argv: list[str], message: str
) -> None:
    code, _, err = run(capsys, "validate", *argv, str(mixed))
    assert code == 2
    assert message in err


def test_address_needs_the_ray_engine(capsys: pytest.CaptureFixture[str], mixed: Path) -> None:
    code, _, err = run(capsys, "validate", "--address", "auto", str(mixed))
    assert code == 2
    assert "trajkit validate: error: --address needs --engine ray" in err


def test_ray_missing_or_unreachable(
    capsys: pytest.CaptureFixture[str], mixed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "ray", None)
        code, _, err = run(capsys, "validate", "--engine", "ray", str(mixed))
    assert code == 2
    assert "trajkit.ray needs Ray; install it with: pip install 'trajkit[ray]'" in err

    def unreachable(address: str | None) -> object:
        raise ConnectionError(f"no Ray cluster at {address}:6379")

    monkeypatch.setattr(raytasks, "connect", unreachable)
    code, _, err = run(capsys, "validate", "--engine", "ray", "--address", "10.0.0.1", str(mixed))
    assert code == 2
    assert "cannot use Ray: ConnectionError: no Ray cluster at 10.0.0.1:6379" in err


def test_a_worker_that_dies_is_reported(
    capsys: pytest.CaptureFixture[str], mixed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def dying(*args: object, **kwargs: object) -> Iterator[FileCheck]:
        yield FileCheck("first.npz")
        raise BrokenProcessPool("A process in the process pool was terminated abruptly")

    monkeypatch.setattr(cli_validate, "validate_files", dying)
    code, out, err = run(capsys, "validate", str(mixed))
    assert code == 1
    assert out == "first.npz: ok\n"
    assert "a worker process stopped unexpectedly (out of memory?); run again with --jobs 1" in err


# ------------------------------------------------------------------------------------ URLs


@pytest.fixture
def memory_fs(mixed: Path) -> Iterator[str]:
    """The `mixed` files copied into fsspec's in-memory file system, under memory://mixed."""
    fs = fsspec.filesystem("memory")
    for path in mixed.rglob("*.npz"):
        fs.pipe_file(f"/mixed/{path.relative_to(mixed).as_posix()}", path.read_bytes())
    fs.pipe_file("/mixed/.hidden/x.npz", b"junk")
    yield "memory://mixed"
    fs.rm("/mixed", recursive=True)


@pytest.mark.usefixtures("small_chunks")
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_memory_urls_give_the_verdicts_of_local_paths(
    capsys: pytest.CaptureFixture[str], mixed: Path, memory_fs: str, jobs: str
) -> None:
    _, local, _ = run(capsys, "validate", "--jobs", "1", str(mixed))
    code, remote, err = run(capsys, "validate", "--jobs", jobs, memory_fs)
    assert code == 1
    assert remote == local.replace(str(mixed), memory_fs)
    assert "14 files: 11 ok, 3 invalid" in err


@pytest.mark.usefixtures("small_chunks")
def test_file_urls_in_worker_processes(capsys: pytest.CaptureFixture[str], mixed: Path) -> None:
    _, local, _ = run(capsys, "validate", "--jobs", "1", str(mixed))
    url = f"file://{mixed}"
    code, remote, _ = run(capsys, "validate", "--jobs", "2", url)
    assert code == 1
    assert remote == local.replace(str(mixed), url)


def test_url_problems(
    capsys: pytest.CaptureFixture[str], memory_fs: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _ = run(capsys, "validate", f"{memory_fs}/nope.npz", "memory://empty-folder/")
    assert code == 1
    assert out.splitlines()[0] == f"{memory_fs}/nope.npz: invalid: no such file or directory"
    size = fsspec.filesystem("memory").size("/mixed/a00.npz")
    code, out, _ = run(capsys, "validate", "--max-bytes", "1KiB", f"{memory_fs}/a00.npz")
    assert code == 1
    assert f"invalid: the file is {size} bytes, over the limit of 1024 bytes" in out
    for reported in (10, None):  # a size that lies, or none at all
        with monkeypatch.context() as patch:
            patch.setattr(type(fsspec.filesystem("memory")), "size", lambda self, p: reported)  # noqa: B023
            code, out, _ = run(capsys, "validate", "--max-bytes", "1KiB", f"{memory_fs}/a00.npz")
        assert "invalid: the file grew past the limit of 1024 bytes while it was read" in out
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "fsspec", None)
        code, out, _ = run(capsys, "validate", memory_fs)
    assert code == 1
    assert "invalid: reading URLs needs fsspec; install it with: pip install 'trajkit[cloud]'" in (
        out
    )

    def denied(self: object, path: str) -> bool:
        raise PermissionError("access denied")

    monkeypatch.setattr(type(fsspec.filesystem("memory")), "isdir", denied)
    code, out, _ = run(capsys, "validate", memory_fs)
    assert out == f"{memory_fs}: invalid: cannot read folder: access denied\n"


def test_check_file_names_the_url_never_the_copy(memory_fs: str) -> None:
    check = check_file(f"{memory_fs}/gone.npz")
    assert check.problems == ("cannot open: no such file or directory",)
    with pytest.raises(trajkit.RolloutFileError, match=r"^memory://mixed/a04.npz: member obses"):
        load_any(f"{memory_fs}/a04.npz")


@pytest.mark.usefixtures("small_chunks")
def test_quick_urls_give_the_verdicts_of_local_paths(
    capsys: pytest.CaptureFixture[str], mixed: Path, memory_fs: str
) -> None:
    _, local, _ = run(capsys, "validate", "--quick", "--jobs", "1", str(mixed))
    code, remote, _ = run(capsys, "validate", "--quick", "--jobs", "1", memory_fs)
    assert remote == local.replace(str(mixed), memory_fs)
    size = fsspec.filesystem("memory").size("/mixed/a00.npz")
    code, out, _ = run(capsys, "validate", "--quick", "--max-bytes", "1KiB", f"{memory_fs}/a00.npz")
    assert code == 1
    assert f"invalid: the file is {size} bytes, over the limit of 1024 bytes" in out
    check = check_file(f"{memory_fs}/gone.npz", quick=True)
    assert check.problems == ("cannot open: no such file or directory",)


def test_quick_reads_a_url_in_place_not_all_of_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    MemoryFile = pytest.importorskip("fsspec.implementations.memory").MemoryFile

    path = tmp_path / "big.npz"
    trajkit.save(example_rollout(num_steps=2048, num_envs=64), path)
    fs = fsspec.filesystem("memory")
    fs.pipe_file("/big/run.npz", path.read_bytes())
    read: list[int] = []  # bytes handed out by the file system, by `read` or `readinto`
    readinto, read_bytes = MemoryFile.readinto, MemoryFile.read

    def counted_into(self: Any, buffer: Any) -> int:
        read.append(readinto(self, buffer))
        return read[-1]

    def counted_read(self: Any, size: int | None = -1) -> bytes:
        data: bytes = read_bytes(self, size)
        read.append(len(data))
        return data

    monkeypatch.setattr(MemoryFile, "readinto", counted_into)
    monkeypatch.setattr(MemoryFile, "read", counted_read)
    try:
        code, out, _ = run(capsys, "validate", "--quick", "memory://big/run.npz")
        check = check_file("memory://big/run.npz", quick=True)
    finally:
        fs.rm("/big", recursive=True)
    assert (code, out) == (0, "memory://big/run.npz: ok\n")
    assert check.nbytes == path.stat().st_size > 4_000_000
    assert 0 < sum(read) <= 2 * 3 * (1 << 16)  # a few 64 KiB ranges, twice
