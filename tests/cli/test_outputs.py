"""Outputs (issue 26, items 2, 3 and 7; issue 29): never over an input, atomic, one-line errors.

`export`, `plot` and `import` refuse an output that is one of their inputs, by identity (a
hard link or a symlink is the same file), write each output atomically (a `kill -9` midway
leaves the old file whole), and every failure is one line on stderr with exit 1 or 2.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
from functools import partial
from pathlib import Path

import numpy as np
import pytest

import trajkit
from tests.cli.helpers import run
from trajkit._io import engine
from trajkit._io.discovery import Found
from trajkit._io.engine import run_ordered
from trajkit.testing import example_rollout

pa = pytest.importorskip("pyarrow", reason="exports need pyarrow (trajkit[arrow])")
arrow = pytest.importorskip("trajkit.arrow")


def last_line(err: str) -> str:
    """The error line (argparse puts its usage before it)."""
    return err.strip().splitlines()[-1]


@pytest.fixture
def run_npz(tmp_path: Path) -> Path:
    path = tmp_path / "run.npz"
    trajkit.save(example_rollout(num_steps=16, num_envs=2), path)
    return path


def leftovers(folder: Path) -> list[str]:
    """Names that a reader would take: everything but the hidden temporary files of a write."""
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))


# ------------------------------------------------------------------- an output is an input


@pytest.mark.parametrize("kind", ["same name", "hard link", "symlink", "another spelling"])
def test_export_refuses_to_write_over_its_input(
    capsys: pytest.CaptureFixture[str], run_npz: Path, tmp_path: Path, kind: str
) -> None:
    """Issue 26: `trajkit export run.npz --out run.npz` died of SIGBUS and destroyed run.npz."""
    before = run_npz.read_bytes()
    out = {
        "same name": run_npz,
        "hard link": tmp_path / "link.parquet",
        "symlink": tmp_path / "sym.parquet",
        "another spelling": tmp_path / "." / "run.npz",
    }[kind]
    if kind == "hard link":
        os.link(run_npz, out)
    elif kind == "symlink":
        out.symlink_to(run_npz)
    code, stdout, err = run(capsys, "export", str(run_npz), "--out", str(out))
    assert code == 2
    assert stdout == ""
    shown = "" if str(out) == str(run_npz) else f" ({run_npz})"
    assert (
        err == f"trajkit export: error: {out} is one of the inputs{shown}: write to another path\n"
    )
    assert run_npz.read_bytes() == before


def test_plot_and_import_refuse_to_write_over_their_input(
    capsys: pytest.CaptureFixture[str], run_npz: Path, tmp_path: Path
) -> None:
    figures = tmp_path / "figures"
    figures.mkdir()
    os.link(run_npz, figures / "timeline.png")
    code, _, err = run(capsys, "plot", str(run_npz), "--out", str(figures))
    assert code == 2
    assert err == (
        f"trajkit plot: error: {figures / 'timeline.png'} is one of the inputs ({run_npz}): "
        "write to another path\n"
    )
    assert not (figures / "episodes.png").exists()  # refused before anything is written
    parquet = tmp_path / "runs.parquet"
    assert run(capsys, "export", str(run_npz), "--out", str(parquet))[0] == 0
    back = tmp_path / "back"
    back.mkdir()
    os.link(parquet, back / "rollout-00000.npz")
    code, _, err = run(capsys, "import", str(parquet), "--out", str(back))
    assert code == 2
    assert err == (
        f"trajkit import: error: {back / 'rollout-00000.npz'} is one of the inputs "
        f"({parquet}): write to another path\n"
    )
    assert arrow.read_parquet(parquet) == [trajkit.load(run_npz)]


def test_write_output_passes_its_inputs_and_its_words_on(tmp_path: Path) -> None:
    # The commands check their inputs first; write_output checks again as it writes (the
    # output may have become an input since), and names the operation and its writer.
    from trajkit._cli.common import OutputError, UsageError, write_output

    path = tmp_path / "out.txt"
    path.write_bytes(b"old")
    with pytest.raises(
        UsageError,
        match=rf"^cannot write to {re.escape(str(path))}: it is also an input "
        rf"\({re.escape(str(path))}\); write to another path$",
    ):
        write_output(str(path), lambda file: file.write(b"new"), [str(path)])
    assert path.read_bytes() == b"old"
    with pytest.raises(
        OutputError,
        match=rf"^cannot write {re.escape(str(tmp_path))}: cannot write over a folder "
        r"\(trajkit replaces only regular files\)$",
    ):
        write_output(str(tmp_path), lambda file: file.write(b"new"), [])
    missing = tmp_path / "no" / "out.txt"  # named, not the temporary file beside it
    with pytest.raises(
        OutputError, match=rf"^cannot write {re.escape(str(missing))}: No such file or directory$"
    ):
        write_output(str(missing), lambda file: file.write(b"new"), [])
    write_output(str(path), lambda file: file.write(b"new"), [str(tmp_path / "other")])
    assert path.read_bytes() == b"new"


def test_load_all_maps_every_file_within_the_limit_or_names_the_one_refused(
    capsys: pytest.CaptureFixture[str], run_npz: Path
) -> None:
    from trajkit._cli.common import load_all

    loaded = load_all([str(run_npz), str(run_npz)], None)
    assert loaded is not None
    assert len(loaded) == 2
    base = loaded[0].rews.base
    while base is not None and not isinstance(base, np.memmap):
        base = base.base
    assert isinstance(base, np.memmap)  # mapped, not read
    assert load_all([str(run_npz)], 100) is None
    assert capsys.readouterr().err == (
        f"{run_npz}: invalid: the metadata declares 1896 bytes of array data (T=16, B=2), over "
        "the limit of 100 bytes; pass a larger --max-bytes to load it\n"
    )


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="maps are listed on Linux")
def test_write_parquet_refuses_a_file_its_rollouts_are_mapped_from(
    run_npz: Path, tmp_path: Path
) -> None:
    mapped = trajkit.load(run_npz, mmap=True)
    os.link(run_npz, tmp_path / "link.npz")
    (tmp_path / "sym.npz").symlink_to(run_npz)
    before = run_npz.read_bytes()
    for target in (run_npz, tmp_path / "link.npz", tmp_path / "sym.npz"):
        with pytest.raises(ValueError, match=r"cannot write to .*: it is also an input \("):
            arrow.write_parquet(mapped, target)
    assert run_npz.read_bytes() == before
    arrow.write_parquet(trajkit.load(run_npz), run_npz)  # read into memory: not an input
    assert arrow.read_parquet(run_npz) == [mapped]


# --------------------------------------------------------------------- --out of each kind


def test_out_of_the_wrong_kind_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], run_npz: Path, tmp_path: Path
) -> None:
    """Issue 26: `plot --out FILE` and `import --out FILE` ended in a FileExistsError."""
    file = tmp_path / "notes.txt"
    file.write_text("keep me")
    for command, source in (("plot", run_npz), ("import", tmp_path / "x.parquet")):
        code, _, err = run(capsys, command, str(source), "--out", str(file))
        assert code == 2
        assert err == (
            f"trajkit {command}: error: --out {file} is not a folder: name a folder "
            "(made if needed)\n"
        )
    code, _, err = run(capsys, "export", str(run_npz), "--out", str(tmp_path))
    assert code == 2
    assert (
        err
        == f"trajkit export: error: --out {tmp_path} is a folder: name the Parquet file to write\n"
    )
    code, _, err = run(capsys, "plot", str(run_npz), "--out", str(file / "sub"))
    assert code == 1
    assert err == f"trajkit plot: error: cannot make the folder {file / 'sub'}: Not a directory\n"
    assert file.read_text() == "keep me"


def test_existing_outputs_are_replaced_whole(
    capsys: pytest.CaptureFixture[str], run_npz: Path, tmp_path: Path
) -> None:
    """`export`, `plot` and `import` all replace what is there, atomically (documented)."""
    parquet = tmp_path / "runs.parquet"
    parquet.write_bytes(b"old")
    parquet.chmod(0o640)
    figures = tmp_path / "figures"
    figures.mkdir()
    (figures / "episodes.png").write_bytes(b"old")
    assert run(capsys, "export", str(run_npz), "--out", str(parquet))[0] == 0
    assert arrow.read_parquet(parquet) == [trajkit.load(run_npz)]
    assert parquet.stat().st_mode & 0o777 == 0o640  # a replaced file keeps its permissions
    assert run(capsys, "plot", str(run_npz), "--out", str(figures), "--dpi", "20")[0] == 0
    assert (figures / "episodes.png").read_bytes().startswith(b"\x89PNG")
    back = tmp_path / "back"
    back.mkdir()
    (back / "rollout-00000.npz").write_bytes(b"old")
    assert run(capsys, "import", str(parquet), "--out", str(back))[0] == 0
    assert trajkit.load(back / "rollout-00000.npz") == trajkit.load(run_npz)
    for folder in (tmp_path, figures, back):
        assert not [p for p in os.listdir(folder) if p.startswith(".trajkit-")]


# -------------------------------------------------------------------------- kill -9 midway

_KILLED_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    import trajkit.arrow
    from trajkit.testing import example_rollout

    target, ready = sys.argv[1], int(sys.argv[2])
    real = trajkit.arrow.atomic_write

    class Stalling:
        # The temporary file, stalled at its first write: the parent kills us there.
        def __init__(self, file):
            self._file = file

        def write(self, data):
            written = self._file.write(data)
            self._file.flush()
            os.write(ready, b"1")
            signal.pause()
            return written

        def __getattr__(self, name):
            return getattr(self._file, name)

    def stalling(path, write, **options):
        real(path, lambda file: write(Stalling(file)), **options)

    trajkit.arrow.atomic_write = stalling
    trajkit.arrow.write_parquet(example_rollout(num_steps=4096, num_envs=16), target)
    """
)


def test_a_parquet_export_killed_midway_leaves_the_old_file(tmp_path: Path) -> None:
    """Issue 26: `kill -9` during an export left an unreadable file and the old one gone."""
    target = tmp_path / "runs.parquet"
    old = example_rollout(num_steps=8, num_envs=2, seed=7)
    arrow.write_parquet(old, target)
    before = target.read_bytes()
    ready_r, ready_w = os.pipe()
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, str(target), str(ready_w)],
        pass_fds=(ready_w,),
        stderr=subprocess.PIPE,
    )
    os.close(ready_w)
    try:
        signalled = os.read(ready_r, 1)  # the child is inside the write: kill it there
    finally:
        os.close(ready_r)
        child.kill()
        _, err = child.communicate(timeout=120)
    assert signalled == b"1", err.decode()
    assert child.returncode == -signal.SIGKILL
    assert target.read_bytes() == before
    assert arrow.read_parquet(target) == [old]
    temporary = [p for p in os.listdir(tmp_path) if p != target.name]
    assert len(temporary) == 1  # the killed write's file: hidden, and not *.parquet
    assert temporary[0].startswith(".trajkit-")
    assert temporary[0].endswith(".tmp")
    assert leftovers(tmp_path) == [target.name]


# --------------------------------------------------------------------------- option values


@pytest.mark.parametrize(
    ("dpi", "message"),
    [
        ("0", "argument --dpi: resolution 0 dpi: use 10 to 1000"),
        ("-5", "argument --dpi: resolution -5 dpi: use 10 to 1000"),
        ("20000", "argument --dpi: resolution 20000 dpi: use 10 to 1000"),
        ("9", "argument --dpi: resolution 9 dpi: use 10 to 1000"),
        ("high", "argument --dpi: invalid resolution 'high': use an integer"),
    ],
)
def test_plot_dpi_is_checked_when_parsed(
    capsys: pytest.CaptureFixture[str], run_npz: Path, tmp_path: Path, dpi: str, message: str
) -> None:
    """Issue 26: `plot --dpi 0`, `-5` and `20000` ended in tracebacks (ValueError, bad_alloc)."""
    code, _, err = run(capsys, "plot", str(run_npz), "--out", str(tmp_path / "p"), f"--dpi={dpi}")
    assert code == 2
    assert last_line(err) == f"trajkit plot: error: {message}"
    assert not (tmp_path / "p").exists()


def test_too_many_jobs_is_a_usage_error(capsys: pytest.CaptureFixture[str], run_npz: Path) -> None:
    """Issue 26: `--jobs 99999999999999999999` ended in an OverflowError traceback."""
    code, _, err = run(capsys, "validate", "--jobs", "99999999999999999999", str(run_npz))
    assert code == 2
    assert last_line(err) == (
        "trajkit validate: error: argument -j/--jobs: 99999999999999999999 jobs: use 1 to 4096"
    )


def test_a_command_reports_its_own_stray_arguments(
    capsys: pytest.CaptureFixture[str], run_npz: Path
) -> None:
    """Issue 29: `trajkit info a.npz b.npz` printed the top-level usage."""
    code, _, err = run(capsys, "info", str(run_npz), str(run_npz))
    assert code == 2
    assert err.startswith("usage: trajkit info ")
    assert last_line(err) == f"trajkit info: error: unrecognized arguments: {run_npz}"


def test_the_size_limit_is_named_as_the_option(
    capsys: pytest.CaptureFixture[str], run_npz: Path
) -> None:
    """Issue 29: `--max-bytes 10` advised to "pass a larger max_bytes" (the Python name)."""
    code, out, _ = run(capsys, "validate", "--max-bytes", "10", str(run_npz))
    assert code == 1
    assert out.startswith(f"{run_npz}: invalid: ")
    assert out.endswith("over the limit of 10 bytes; pass a larger --max-bytes to load it\n")
    code, _, err = run(capsys, "info", "--max-bytes", "10", str(run_npz))
    assert code == 1
    assert err.endswith("pass a larger --max-bytes to load it\n")


def test_a_truncated_file_is_called_truncated(
    capsys: pytest.CaptureFixture[str], run_npz: Path, tmp_path: Path
) -> None:
    """Issue 29: a file cut short was reported as "not a ZIP archive"."""
    data = run_npz.read_bytes()
    cut = tmp_path / "cut.npz"
    cut.write_bytes(data[: len(data) // 2])
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"PK\x03\x04 not really a zip")
    code, out, _ = run(capsys, "validate", str(cut), str(junk))
    assert code == 1
    assert out.splitlines() == [
        f"{cut}: invalid: truncated: the file starts as a ZIP archive but its end (the central "
        "directory) is missing",
        f"{junk}: invalid: damaged or not a ZIP archive: File is not a zip file",
    ]
    code, _, err = run(capsys, "export", str(cut), "--out", str(tmp_path / "x.parquet"))
    assert code == 1
    assert err == (
        f"{cut}: invalid: truncated: the file starts as a ZIP archive but its end (the "
        "central directory) is missing\n"
    )


# ---------------------------------------------------------------------------------- Ctrl-C


def _sigint_handler(items: list[Found]) -> list[tuple[int, object]]:
    return [(os.getpid(), signal.getsignal(signal.SIGINT)) for _ in items]


def test_pool_workers_leave_ctrl_c_to_the_parent(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 26: Ctrl-C during `validate --jobs 2` printed the workers' tracebacks."""
    monkeypatch.setattr(engine, "CHUNK_FILES", 1)
    monkeypatch.setattr(engine, "IN_PROCESS_FILES", 0)  # workers, however few the files
    items = [Found(str(tmp_path / f"{i}.npz"), 0) for i in range(64)]
    # Python's own handler in the parent, whatever disposition pytest inherited (a job started
    # with SIGINT ignored, as `nohup` or `trap '' INT` do, keeps SIG_IGN).
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        handlers = list(run_ordered(partial(_sigint_handler), items, jobs=2))
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the parent's own
    finally:
        signal.signal(signal.SIGINT, inherited)
    parent = os.getpid()  # it works through chunks too, with its own handler
    assert {h for pid, h in handlers if pid != parent} <= {signal.SIG_IGN}
    assert {h for pid, h in handlers if pid == parent} <= {signal.default_int_handler}


# `python -m trajkit` as a terminal starts it, whatever SIGINT disposition pytest inherited: a
# process started with SIGINT ignored (`nohup`, `trap '' INT`) keeps SIG_IGN, and Python then
# installs no KeyboardInterrupt handler. (No `preexec_fn`: it is unsafe with threads.)
# Every core counts as free, so that `--jobs 2` starts its worker on a busy machine too.
_AS_FROM_A_TERMINAL = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "import trajkit._io.engine as engine; engine.LOADAVG = '/dev/null'; "
    "sys.argv[0] = 'trajkit'; runpy.run_module('trajkit', run_name='__main__', alter_sys=True)"
)


@pytest.mark.skipif(sys.platform == "win32", reason="process groups and SIGINT are POSIX")
def test_ctrl_c_during_validate_is_quiet(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    r = example_rollout(num_steps=64, num_envs=2)
    for i in range(300):
        trajkit.save(r, folder / f"{i:03d}.npz")
    child = subprocess.Popen(
        [sys.executable, "-c", _AS_FROM_A_TERMINAL, "validate", "--jobs", "2", *[str(folder)] * 10],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    assert child.stdout is not None
    try:
        first = child.stdout.readline()  # a verdict: the workers are at work
        os.killpg(child.pid, signal.SIGINT)  # what Ctrl-C does: every process of the job
        _, err = child.communicate(timeout=120)
    finally:
        child.kill()
    assert first.endswith(b": ok\n")
    assert child.returncode == 130
    assert err == b"trajkit: interrupted\n"


@pytest.mark.parametrize(
    "entry", [["-m", "trajkit"], ["-c", "from trajkit.cli import console_main; console_main()"]]
)
def test_a_reader_that_stops_early_gets_no_traceback(entry: list[str]) -> None:
    """`python -m trajkit schema | head -c 10`: the pipe closes before the write; no traceback."""
    child = subprocess.Popen(
        [sys.executable, *entry, "schema", "--metadata"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None
    assert child.stderr is not None
    child.stdout.close()  # long before the child has imported trajkit and written anything
    err = child.stderr.read().decode()
    child.stderr.close()
    assert child.wait(timeout=60) == 1
    assert "Traceback" not in err, err
