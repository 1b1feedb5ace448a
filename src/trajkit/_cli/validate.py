"""`trajkit validate`: check files, with progress, text or JSON Lines, and a summary."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TextIO

from trajkit._base.errors import RolloutFileError
from trajkit._cli.common import (
    MAX_SHOWN,
    PROGRESS_THRESHOLD,
    UsageError,
    one_line,
    printable,
    problem_line,
)
from trajkit._io.discovery import count_files
from trajkit._io.engine import pool_broke
from trajkit._io.items import FileCheck
from trajkit._io.validate import validate_files

if TYPE_CHECKING:
    from trajkit._models.spec import RolloutSpec


def _read_spec(path: str) -> RolloutSpec:
    """The `--spec` file, read as `Dataset.open` reads `spec.json`; a usage error if refused."""
    from trajkit.dataset import read_spec_file  # the dataset package, only for --spec

    try:
        return read_spec_file(path)
    except OSError as exc:  # missing, unreadable
        raise UsageError(f"cannot read the spec {path}: {exc.strerror or exc}") from None
    except RolloutFileError as exc:  # not a regular file, too large, not JSON, not a spec
        verb = "cannot read the spec" if "regular file" in exc.reason else "invalid spec"
        raise UsageError(f"{verb} {path}: {exc.reason}") from None


class _Progress:
    """Where the per-file lines go, with or without a progress display on stderr."""

    def advance(self, path: str) -> None:
        """One more file has been checked."""

    def write(self, line: str) -> None:
        print(line)

    def close(self) -> None:
        """Remove the display."""


class _ProgressLine(_Progress):
    """`[12/340] checking PATH` on one line, rewritten in place (when tqdm is missing)."""

    def __init__(self, total: int | None, stream: TextIO) -> None:
        self.total = total
        self.stream = stream
        self._index = 0
        self._width = 0

    def advance(self, path: str) -> None:
        self._index += 1
        shown = path if len(path) <= 60 else "..." + path[-57:]
        count = f"{self._index}/{self.total}" if self.total is not None else f"{self._index}"
        text = printable(f"[{count}] checking {shown}")
        self.stream.write("\r" + text.ljust(self._width))
        self.stream.flush()
        self._width = len(text)

    def write(self, line: str) -> None:
        self.close()
        print(line)

    def close(self) -> None:
        if self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0


class _ProgressBar(_Progress):
    """A tqdm progress bar on stderr (`trajkit[progress]`)."""

    def __init__(self, tqdm: Any, total: int | None, stream: TextIO) -> None:
        # No monitor thread: while another thread runs, the engine cannot fork its workers.
        tqdm.monitor_interval = 0
        self._tqdm = tqdm
        self._bar = tqdm(total=total, file=stream, unit="file", dynamic_ncols=True, leave=False)

    def advance(self, path: str) -> None:
        self._bar.update(1)

    def write(self, line: str) -> None:
        self._tqdm.write(line, file=sys.stdout)

    def close(self) -> None:
        self._bar.close()


def _progress(enabled: bool | None, total: int | None) -> _Progress:
    if enabled is None:  # by default (on a terminal): for more than a few files
        enabled = total is None or total > PROGRESS_THRESHOLD
    if not enabled:
        return _Progress()
    try:
        tqdm = importlib.import_module("tqdm").tqdm  # trajkit[progress]
    except ImportError:
        return _ProgressLine(total, sys.stderr)
    return _ProgressBar(tqdm, total, sys.stderr)


def _checks(args: argparse.Namespace, spec: RolloutSpec | None) -> Iterator[FileCheck]:
    def checks() -> Iterator[FileCheck]:
        return validate_files(
            args.paths,
            spec=spec,
            quick=args.quick,
            max_bytes=args.max_bytes,
            jobs=args.jobs,
            engine=args.engine,
            address=args.address,
        )

    if args.engine != "ray":
        return checks()
    try:
        return checks()  # connects to Ray (imported only for this engine)
    except ImportError as exc:
        raise UsageError(str(exc)) from None
    except Exception as exc:  # Ray could not start, or not reach the cluster
        raise UsageError(f"cannot use Ray: {type(exc).__name__}: {exc}") from None


def validate_command(args: argparse.Namespace) -> int:
    spec = _read_spec(args.spec) if args.spec is not None else None
    if args.address is not None and args.engine != "ray":
        raise UsageError("--address needs --engine ray")
    start = time.perf_counter()
    show = args.progress
    if show is None and not sys.stderr.isatty():
        show = False
    total = None if show is False else count_files(args.paths)  # a second, cheap listing
    checks = _checks(args, spec)
    progress = _progress(show, total)
    files = invalid = nbytes = 0
    out = sys.stdout
    try:
        for check in checks:
            progress.advance(check.path)
            files += 1
            invalid += not check.ok
            nbytes += check.nbytes
            problems = [problem_line(check.path, p) for p in check.problems]
            if args.json:  # JSON Lines: one object per file, written as soon as it is known
                progress.write(json.dumps({**check.to_json(), "problems": problems}))
                out.flush()
            elif check.ok:
                progress.write(printable(f"{check.path}: ok"))
            else:
                shown = "; ".join(one_line(p) for p in problems[:MAX_SHOWN])
                more = len(problems) - MAX_SHOWN
                extra = f" (+{more} more)" if more > 0 else ""
                progress.write(printable(f"{check.path}: invalid: {shown}{extra}"))
    except Exception as exc:
        if not pool_broke(exc):
            raise
        progress.close()
        out.flush()
        print(
            "trajkit validate: error: a worker process stopped unexpectedly (out of memory?); "
            "run again with --jobs 1 to check the files in this process",
            file=sys.stderr,
        )
        return 1
    finally:
        progress.close()
        close = getattr(checks, "close", None)
        if close is not None:  # stop the workers now (Ctrl-C), not when the pool is collected
            close()
    out.flush()
    if files > 1:
        elapsed = time.perf_counter() - start
        print(_summary(files, invalid, nbytes, elapsed), file=sys.stderr)
    return 1 if invalid else 0


def _summary(files: int, invalid: int, nbytes: int, elapsed: float) -> str:
    """`3 files: 2 ok, 1 invalid; 1.2 MiB in 0.05 s (60 files/s, 24.0 MiB/s)`."""
    seconds = max(elapsed, 1e-9)
    return (
        f"{files} files: {files - invalid} ok, {invalid} invalid; {_bytes(nbytes)} in "
        f"{elapsed:.2f} s ({files / seconds:,.0f} files/s, {_bytes(nbytes / seconds)}/s)"
    )


def _bytes(count: float) -> str:
    """`512 B`, `1.5 KiB`, `3.2 MiB`, `1.1 GiB`, ..."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    power = 0
    while count >= 1024 and power < len(units) - 1:
        count /= 1024
        power += 1
    return f"{count:.0f} B" if power == 0 else f"{count:,.1f} {units[power]}"
