"""The `trajkit` command line: `validate`, `lint`, `info`, `plot`, `export`, `import`, `schema`.

Exit codes: 0 success (every file valid), 1 a file is invalid, missing or unreadable (or an
output cannot be written), 2 a usage error (bad options, unreadable `--spec` file, an `--out`
that is one of the inputs or the wrong kind of file), 130 interrupted. Every failure is one
line on stderr, never a traceback. stdlib argparse only.
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import os
import re
import struct
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import IO, Any, NoReturn, TextIO

import numpy as np

from trajkit._base.errors import RolloutFileError
from trajkit._base.version import __version__
from trajkit._core import tree as _tree
from trajkit._io.atomic import atomic_write, same_file
from trajkit._io.discovery import SUFFIX, count_files
from trajkit._io.filecheck import FileCheck, file_error
from trajkit._io.files import DEFAULT_MAX_BYTES, load, read_metadata, save
from trajkit._io.metadata import RolloutFileMetadata
from trajkit._io.remote import is_url
from trajkit._models.model_outputs import discrete_actions
from trajkit._models.rollout import Rollout
from trajkit._models.spec import RolloutSpec
from trajkit.dataset import read_spec_file, validate_files

__all__ = ["DPI_RANGE", "MAX_JOBS", "PROGRESS_THRESHOLD", "SUFFIX", "console_main", "main"]

PROGRESS_THRESHOLD = 20
"""`validate` shows a progress line on a terminal when it checks more files than this."""

MAX_JOBS = 4096
"""The most worker processes (or Ray tasks) that `--jobs` accepts."""

DPI_RANGE = (10, 1000)
"""The resolutions `plot --dpi` accepts, inclusive: below 10 the text cannot be drawn, and
1000 already makes PNGs of about 8000 x 5500 pixels."""

_MAX_SHOWN = 3  # problems shown per file on the text output
_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]i?b?|b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


# Characters that would act on a terminal instead of showing: C0 and C1 controls, DEL, the
# line and paragraph separators and the bidirectional controls (which reorder what follows).
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


# Surrogates that are not undecodable bytes of a file name (those are U+DC80 to U+DCFF).
_LONE_SURROGATES = re.compile("[\ud800-\udc7f\udd00-\udfff]")


def _shown(text: str) -> str:
    r"""`text` made safe to print on any terminal: one line, printable, encodable.

    File names that are not valid UTF-8 (whose bytes Python holds as lone surrogates) show
    their bytes as `\xff`; other lone surrogates as `\udfff`; control characters (from a
    file's keys, metadata or name) as escapes such as `\x1b` or `\n`.

    Examples:
        >>> print(_shown("run\udcff.npz: key '\x1b[31m'"))
        run\xff.npz: key '\x1b[31m'
    """
    text = _LONE_SURROGATES.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
    return _CONTROLS.sub(
        lambda match: match.group().encode("unicode_escape").decode("ascii"),
        text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"),
    )


class _UsageError(Exception):
    """A bad option value found after parsing: reported like an argparse error (exit 2)."""


def _max_bytes(text: str) -> int | None:
    """Parse `--max-bytes`: bytes, or with a binary suffix (`512MiB`, `8G`), or `none`."""
    if text.strip().lower() == "none":
        return None
    match = _SIZE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(
            f"invalid size {text!r}: use bytes, a suffix such as 512MiB or 8GiB, or 'none'"
        )
    unit = (match.group(2) or "").lower()[:1]
    return int(match.group(1)) * _UNITS[unit]


def _jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number of jobs {text!r}") from None
    if not 1 <= value <= MAX_JOBS:
        raise argparse.ArgumentTypeError(f"{text} jobs: use 1 to {MAX_JOBS}")
    return value


def _dpi(text: str) -> int:
    low, high = DPI_RANGE
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid resolution {text!r}: use an integer") from None
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"resolution {text} dpi: use {low} to {high}")
    return value


def _unit_interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not in [0, 1]")
    return value


def _add_max_bytes(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--max-bytes",
        type=_max_bytes,
        default=DEFAULT_MAX_BYTES,
        metavar="SIZE",
        help=(
            "refuse files whose declared contents exceed SIZE (bytes, or e.g. 512MiB, 8GiB; "
            "'none' for no limit; default 4GiB)"
        ),
    )


class _Parser(argparse.ArgumentParser):
    """An argument parser that reports a command's stray arguments with that command's usage.

    argparse hands the arguments a command does not know to the top-level parser, which
    would print the top-level usage (`trajkit info a.npz b.npz`); here the command's own
    parser reports them.
    """

    commands: Mapping[str, argparse.ArgumentParser]

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: None = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = getattr(self, "commands", {}).get(getattr(parsed, "command", None), self)
            command.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="trajkit",
        description="Check and inspect recorded rollout files (the trajkit .npz format).",
        epilog="Exit codes: 0 ok, 1 invalid or missing file, 2 usage error.",
    )
    parser.add_argument("--version", action="version", version=f"trajkit {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parser.commands = commands.choices

    validate = commands.add_parser(
        "validate",
        help="check rollout files (folders are searched for *.npz)",
        description=(
            "Check rollout files: everything trajkit.load checks, and conformance to a spec. "
            f"Folders are searched recursively for files ending in {SUFFIX} (hidden files and "
            "folders are skipped); files named explicitly are checked whatever their suffix. "
            "Paths may be fsspec URLs (s3://, gs://, file://, ...; needs trajkit[cloud]). "
            "Files are checked on every core; prints one line per file, in order, and a "
            "summary on stderr. Exit 0 when all are valid, 1 when any is invalid or missing, "
            "2 on a usage error, 130 when interrupted."
        ),
    )
    validate.add_argument("paths", nargs="+", metavar="PATH", help="files or folders")
    validate.add_argument(
        "--spec", metavar="SPEC.json", help="also require every file to conform to this spec"
    )
    validate.add_argument(
        "--json",
        action="store_true",
        help="print JSON Lines: one object {path, ok, problems} per line, as each file is checked",
    )
    validate.add_argument(
        "--quick",
        action="store_true",
        help="check only the metadata and ZIP directory, not the arrays (much faster)",
    )
    validate.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"show a progress line on stderr (default: when stderr is a terminal and there "
        f"are more than {PROGRESS_THRESHOLD} files)",
    )
    _add_max_bytes(validate)
    validate.add_argument(
        "-j",
        "--jobs",
        type=_jobs,
        default=None,
        metavar="N",
        help=f"check files in N processes (default: one per core), or with --engine ray in at "
        f"most N Ray tasks at once, N from 1 to {MAX_JOBS}; the output is the same as with 1",
    )
    validate.add_argument(
        "--engine",
        choices=("local", "ray"),
        default="local",
        help="run the checks in local processes (default) or as Ray tasks (needs trajkit[ray])",
    )
    validate.add_argument(
        "--address",
        metavar="ADDR",
        help="with --engine ray: the Ray cluster to connect to, e.g. 10.0.0.1:6379 "
        "(default: RAY_ADDRESS, or a Ray started for this command)",
    )

    info = commands.add_parser(
        "info",
        help="summarise a rollout file",
        description=(
            "Print T, B, episodes, model-output keys, the dtype and shape of every array, "
            "reward statistics and (when there is a critic) advantage statistics."
        ),
    )
    info.add_argument("path", metavar="PATH", help="a rollout file")
    info.add_argument("--gamma", type=_unit_interval, default=0.99, help="discount (0.99)")
    info.add_argument("--lam", type=_unit_interval, default=0.95, help="GAE lambda (0.95)")
    _add_max_bytes(info)

    plot = commands.add_parser(
        "plot",
        help="draw PNG figures of rollout files (needs trajkit[plot])",
        description=(
            "Write episodes.png (episode returns and lengths over time), distributions.png "
            "(reward and advantage histograms) and timeline.png (episode ends and truncations "
            "per env) for one or more rollout files, taken as consecutive rollouts in the "
            "order given. The folder is made if needed; PNG files already there are "
            "replaced, each atomically. An output that is one of the inputs is refused."
        ),
    )
    plot.add_argument("paths", nargs="+", metavar="PATH", help="rollout files, in order")
    plot.add_argument("--out", required=True, metavar="DIR", help="folder for the PNG files")
    plot.add_argument("--gamma", type=_unit_interval, default=0.99, help="discount (0.99)")
    plot.add_argument("--lam", type=_unit_interval, default=0.95, help="GAE lambda (0.95)")
    plot.add_argument(
        "--dpi",
        type=_dpi,
        default=100,
        help=f"resolution of the PNGs, {DPI_RANGE[0]} to {DPI_RANGE[1]} (100)",
    )
    _add_max_bytes(plot)

    export = commands.add_parser(
        "export",
        help="write rollout files to a Parquet file (needs trajkit[arrow])",
        description=(
            "Write rollout files, taken in the order given, to one Parquet file in trajkit's "
            "columnar layout: one row per step and env, readable as-is by pyarrow, polars, "
            "DuckDB and HF datasets. The rollouts must share their structure. An existing "
            "FILE is replaced atomically (whole or not at all); a FILE that is one of the "
            "inputs, by any name, is refused."
        ),
    )
    export.add_argument("paths", nargs="+", metavar="PATH", help="rollout files, in order")
    export.add_argument(
        "--out", required=True, metavar="FILE", help="the Parquet file to write (or replace)"
    )
    export.add_argument(
        "--compression",
        default="zstd",
        choices=("zstd", "snappy", "gzip", "none"),
        help="Parquet compression (zstd)",
    )
    _add_max_bytes(export)

    import_ = commands.add_parser(
        "import",
        help="turn a Parquet file back into rollout files (needs trajkit[arrow])",
        description=(
            "Read a Parquet file in trajkit's columnar layout (written by trajkit export or "
            "trajkit.arrow.write_parquet), validate each rollout, and save them as "
            "DIR/rollout-00000.npz, DIR/rollout-00001.npz, ... The folder is made if needed; "
            "files of those names already there are replaced, each atomically. An output "
            "that is the input, by any name, is refused."
        ),
    )
    import_.add_argument("path", metavar="FILE", help="the Parquet file")
    import_.add_argument("--out", required=True, metavar="DIR", help="folder for the files")

    lint = commands.add_parser(
        "lint",
        help="find semantic bugs in rollout files (truncations, off-by-ones, duplicates, ...)",
        description=(
            "Check what validation cannot: truncations recorded as terminations, rewards one "
            "step late, actions on the wrong row, phantom autoreset steps, episodes past the "
            "time limit, actions outside the space, constant features, reward scales that "
            "jump between files, rollouts saved twice, and with --replay whether the env "
            "reproduces the recording. Files are found as validate finds them and linted on "
            "every core. Settings are read from [tool.trajkit.lint] of the closest "
            "pyproject.toml. Exit 0 when no error or warning is found (notes do not fail), 1 "
            "when one is, 2 on a usage error."
        ),
    )
    lint.add_argument("paths", nargs="*", metavar="PATH", help="files or folders")
    lint.add_argument(
        "--select", metavar="CODES", help="run only these codes or prefixes, e.g. TK1,TK203"
    )
    lint.add_argument("--ignore", metavar="CODES", help="do not run these codes or prefixes")
    lint.add_argument(
        "--json", action="store_true", help="print JSON Lines: one object per finding"
    )
    lint.add_argument(
        "--replay",
        action="store_true",
        help="also replay recordings in their Gymnasium env (TK3xx; needs trajkit[gym])",
    )
    lint.add_argument(
        "--max-episode-steps",
        type=int,
        metavar="N",
        help="the env's time limit, for files whose recording names none",
    )
    lint.add_argument("--no-config", action="store_true", help="do not read pyproject.toml")
    lint.add_argument("--list", action="store_true", help="list the checks and exit")
    lint.add_argument(
        "-j",
        "--jobs",
        type=_jobs,
        default=None,
        metavar="N",
        help=f"lint files in N processes (default: one per core), 1 to {MAX_JOBS}",
    )
    _add_max_bytes(lint)

    schema = commands.add_parser(
        "schema",
        help="print a JSON Schema",
        description="Print the JSON Schema of RolloutSpec (default) or of the file metadata.",
    )
    schema.add_argument(
        "--metadata", action="store_true", help="the schema of metadata.json instead"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `trajkit` command line and return its exit code.

    Commands: `validate PATH... [--spec SPEC.json] [--json] [--quick] [--max-bytes SIZE]
    [--progress]`, `info PATH [--gamma G] [--lam L]`, `plot PATH... --out DIR`,
    `export PATH... --out FILE.parquet`, `import FILE.parquet --out DIR`,
    `schema [--metadata]`, `lint PATH... [--select CODES] [--ignore CODES] [--json]
    [--replay]` (exit 1 on an error or warning; see [Lint](../lint.md)). The
    [CLI reference](cli.md) lists every option, and
    [Recorded trajectories](../file-format.md#command-line) the output of each command.

    Args:
        argv: The arguments, without the program name; `None` reads `sys.argv[1:]`.

    Returns:
        0 on success (all files valid), 1 when a file is invalid, missing or unreadable or an
        output cannot be written, 2 on a usage error, 130 when interrupted (Ctrl-C).
        `--help` and `--version` return 0.

    Examples:
        >>> import os, tempfile
        >>> import trajkit
        >>> from trajkit.testing import example_rollout
        >>> cwd = os.getcwd()
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     os.chdir(tmp)
        ...     trajkit.save(example_rollout(), "run.npz")
        ...     code = main(["validate", "run.npz", "missing.npz"])
        ...     os.chdir(cwd)
        run.npz: ok
        missing.npz: invalid: no such file or directory
        >>> code
        1
    """
    try:
        return _main(sys.argv[1:] if argv is None else list(argv))
    except KeyboardInterrupt:
        print("trajkit: interrupted", file=sys.stderr)
        return 130


def _main(argv: list[str]) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help/--version (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    try:
        if args.command == "validate":
            return _validate(args)
        if args.command == "info":
            return _info(args)
        if args.command == "plot":
            return _plot(args)
        if args.command == "export":
            return _export(args)
        if args.command == "import":
            return _import(args)
        if args.command == "lint":
            return _lint(args)
        return _schema(args)
    except (_UsageError, ImportError) as exc:  # a missing extra is a usage error too
        print(_shown(f"trajkit {args.command}: error: {_one_line(str(exc))}"), file=sys.stderr)
        return 2
    except _OutputError as exc:
        message = str(exc)
        if not message.startswith("trajkit "):
            message = f"trajkit {args.command}: error: {message}"
        print(_shown(_one_line(message)), file=sys.stderr)
        return 1


def console_main() -> None:
    """The `trajkit` console script: `sys.exit(main())`.

    Examples:
        >>> import sys
        >>> from unittest import mock
        >>> with mock.patch.object(sys, "argv", ["trajkit", "--version"]):
        ...     console_main()
        Traceback (most recent call last):
        ...
        SystemExit: 0
    """
    for stream in (sys.stdout, sys.stderr):  # a terminal that cannot show a character
        if isinstance(stream, io.TextIOWrapper):  # gets an escape, never a traceback
            stream.reconfigure(errors="backslashreplace")
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. `trajkit schema | head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = 1
    sys.exit(code)


# -------------------------------------------------------------------------------- validate


def _read_spec(path: str) -> RolloutSpec:
    """The `--spec` file, read as `Dataset.open` reads `spec.json`; a usage error if refused."""
    try:
        return read_spec_file(path)
    except OSError as exc:  # missing, unreadable
        raise _UsageError(f"cannot read the spec {path}: {exc.strerror or exc}") from None
    except RolloutFileError as exc:  # not a regular file, too large, not JSON, not a spec
        verb = "cannot read the spec" if "regular file" in exc.reason else "invalid spec"
        raise _UsageError(f"{verb} {path}: {exc.reason}") from None


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
        text = _shown(f"[{count}] checking {shown}")
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


def _one_line(problem: str) -> str:
    return "; ".join(part.strip() for part in problem.splitlines() if part.strip())


_PYTHON_LIMIT = re.compile(r"(?<![-\w])max_bytes\b")
_NOT_A_ZIP = "damaged or not a ZIP archive"
_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, ..., name length, extra length


def _problem(path: str, problem: str) -> str:
    """A file's problem in the command line's words.

    The limit is the `--max-bytes` option here, not `load`'s `max_bytes` argument; a file
    that starts as a ZIP archive (a whole first local header, with a readable name) but has
    lost its end (the central directory, which a reader looks for first) is said to be
    truncated rather than "not a ZIP archive".
    """
    problem = _PYTHON_LIMIT.sub("--max-bytes", problem)
    if problem.startswith(_NOT_A_ZIP) and _starts_as_zip(path):
        return (
            "truncated: the file starts as a ZIP archive but its end (the central directory) "
            "is missing"
        )
    return problem


def _starts_as_zip(path: str) -> bool:
    if is_url(path):
        return False
    try:
        with open(path, "rb") as file:
            head = file.read(_LOCAL_HEADER.size)
            if len(head) < _LOCAL_HEADER.size:
                return False
            signature, name_length, _ = _LOCAL_HEADER.unpack(head)
            name = file.read(name_length)
    except OSError:
        return False
    if signature != b"PK\x03\x04" or not 0 < len(name) == name_length:
        return False
    try:
        return name.decode("utf-8").isprintable()
    except UnicodeDecodeError:
        return False


def _refused(path: str, exc: RolloutFileError) -> str:
    """`PATH: invalid: PROBLEM`, one line, for a file that `load` refused."""
    return _shown(f"{path}: invalid: {_one_line(_problem(path, file_error(exc)))}")


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
        raise _UsageError(str(exc)) from None
    except Exception as exc:  # Ray could not start, or not reach the cluster
        raise _UsageError(f"cannot use Ray: {type(exc).__name__}: {exc}") from None


def _validate(args: argparse.Namespace) -> int:
    spec = _read_spec(args.spec) if args.spec is not None else None
    if args.address is not None and args.engine != "ray":
        raise _UsageError("--address needs --engine ray")
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
            problems = [_problem(check.path, p) for p in check.problems]
            if args.json:  # JSON Lines: one object per file, written as soon as it is known
                progress.write(json.dumps({**check.to_json(), "problems": problems}))
                out.flush()
            elif check.ok:
                progress.write(_shown(f"{check.path}: ok"))
            else:
                shown = "; ".join(_one_line(p) for p in problems[:_MAX_SHOWN])
                more = len(problems) - _MAX_SHOWN
                extra = f" (+{more} more)" if more > 0 else ""
                progress.write(_shown(f"{check.path}: invalid: {shown}{extra}"))
    except BrokenProcessPool:
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


# ------------------------------------------------------------------------------------ info


def _stats(values: np.ndarray[Any, Any]) -> str:
    v = values.astype(np.float64)
    return f"mean {v.mean():.6g}, std {v.std():.6g}, min {v.min():.6g}, max {v.max():.6g}"


def _episode_lines(r: Rollout) -> Iterator[str]:
    stats = r.episode_stats()
    line = f"episode ends:      {stats.episodes} within the steps (dones[1:] == 1)"
    if r.truncated is not None:
        line += f", {stats.truncations} of them truncated"
    yield line
    starts, first = int((r.dones == 1).sum()), int((r.dones[0] == 1).sum())
    yield f"episode starts:    {starts} (dones == 1), {first} at t=0"
    complete = f"complete episodes: {len(stats.returns)} (start and end inside the rollout)"
    if len(stats.returns):
        complete += f", mean return {stats.mean_return:.6g}, mean length {stats.lengths.mean():.6g}"
    yield complete


def _info(args: argparse.Namespace) -> int:
    path: str = args.path
    try:
        meta = read_metadata(path, max_bytes=args.max_bytes)
        r = load(path, mmap=True, max_bytes=args.max_bytes)
    except RolloutFileError as exc:
        print(_refused(path, exc), file=sys.stderr)
        return 1
    size = os.path.getsize(path)
    lines = [
        f"file:              {path} ({size} bytes; format {meta.format} v{meta.format_version}, "
        f"written by trajkit {meta.trajkit_version})",
        f"steps (T):         {r.num_steps}",
        f"envs (B):          {r.batch_size}",
        *_episode_lines(r),
        f"model outputs:     {', '.join(r.model_outs.keys()) or '(none)'}",
        f"actions:           {_action_kind(r.model_outs.arrays)}",
        "arrays:",
    ]
    arrays: list[tuple[str, np.ndarray[Any, Any] | None]] = [
        (_tree.format_path(name, path), leaf)
        for name in ("states", "obses")
        for path, leaf in _tree.flatten(getattr(r, name))
    ]
    arrays += [
        ("rews", r.rews),
        ("dones", r.dones),
        ("truncated", r.truncated),
        ("final_values", r.final_values),
    ]
    arrays += [(f"model_outs[{k!r}]", a) for k, a in r.model_outs.arrays.items()]
    width = max(len(name) for name, _ in arrays)
    for name, array in arrays:
        if array is not None:
            lines.append(f"  {name.ljust(width)}  {str(array.dtype).ljust(8)} {array.shape}")
    keys = sorted({key for row in r.infos for item in row for key in item})
    lines.append(
        f"infos:             {r.num_steps} x {r.batch_size} dicts; keys: "
        f"{', '.join(keys) or '(none)'}"
    )
    if r.num_steps == 0:
        lines.append("rewards:           (no steps)")
    else:
        rews = np.asarray(r.rews, np.float64)
        lines.append(f"rewards:           sum {rews.sum():.6g}, {_stats(rews)}")
        if "critic" in r.model_outs.arrays:
            adv = r.advantages(args.gamma, args.lam)
            lines.append(f"advantages:        {_stats(adv)} (gamma={args.gamma}, lam={args.lam})")
    print("\n".join(map(_shown, lines)))
    return 0


def _action_kind(outs: Mapping[str, np.ndarray[Any, Any]]) -> str:
    """The kind of action space the stored actions come from, as far as the arrays tell."""
    actions = outs.get("actions")
    if actions is None:
        return "(none)"
    shape = f"per step {tuple(actions.shape[2:])}"
    if actions.dtype.kind == "f":
        return f"continuous (Box), float, {shape}"
    if discrete_actions(outs):
        return f"discrete, integer in [0, {outs['actor'].shape[-1]}) (A from model_outs['actor'])"
    if actions.ndim == 2:
        return "discrete, integer"
    return f"multi-discrete or multi-binary, integer, {shape}"


# ------------------------------------------------------------------------------------ plot


def _plot(args: argparse.Namespace) -> int:
    import trajkit.plot as plot  # matplotlib is imported only when a figure is drawn

    out = args.out
    _check_folder(out)
    targets = {name: os.path.join(out, name) for name in _PLOTS}
    _check_outputs(list(targets.values()), args.paths)
    rollouts = _load_all(args.paths, args.max_bytes)
    if rollouts is None:
        return 1
    _make_folder(out)
    for name, target in targets.items():
        if name == "episodes.png":
            figure = plot.plot_episodes(rollouts)
        elif name == "distributions.png":
            figure = plot.plot_distributions(rollouts, gamma=args.gamma, lam=args.lam)
        else:
            figure = plot.plot_timeline(rollouts)

        def write(file: IO[bytes], figure: Any = figure) -> None:
            figure.savefig(file, format="png", dpi=args.dpi)

        _write_output(target, write, args.paths)
        print(_shown(target))
    return 0


_PLOTS = ("episodes.png", "distributions.png", "timeline.png")


# ------------------------------------------------------------------------ export, import


def _export(args: argparse.Namespace) -> int:
    import trajkit.arrow as arrow  # pyarrow is imported only when a table is made

    if os.path.isdir(args.out):
        raise _UsageError(f"--out {args.out} is a folder: name the Parquet file to write")
    _check_outputs([args.out], args.paths)
    rollouts = _load_all(args.paths, args.max_bytes)
    if rollouts is None:
        return 1
    compression = None if args.compression == "none" else args.compression
    try:
        arrow.write_parquet(rollouts, args.out, compression=compression)
    except (ValueError, OSError) as exc:
        _fail(f"trajkit export: error: {_one_line(str(exc))}")
    steps = sum(r.num_steps * r.batch_size for r in rollouts)  # one row per transition
    print(_shown(f"{args.out}: {len(rollouts)} rollout(s), {steps} rows"))
    return 0


def _import(args: argparse.Namespace) -> int:
    import trajkit.arrow as arrow

    _check_folder(args.out)
    try:
        rollouts = arrow.read_parquet(args.path)
    except (ValueError, OSError) as exc:
        print(_shown(f"{args.path}: invalid: {_one_line(str(exc))}"), file=sys.stderr)
        return 1
    targets = [os.path.join(args.out, f"rollout-{i:05d}{SUFFIX}") for i in range(len(rollouts))]
    _check_outputs(targets, [args.path])
    _make_folder(args.out)
    for rollout, target in zip(rollouts, targets, strict=True):
        try:
            save(rollout, target)
        except (ValueError, OSError) as exc:
            _fail(f"trajkit import: error: {_one_line(str(exc))}")
        print(_shown(target))
    return 0


def _check_folder(out: str) -> None:
    """Refuse an `--out DIR` that exists but is not a folder (a usage error)."""
    if os.path.lexists(out) and not os.path.isdir(out):
        raise _UsageError(f"--out {out} is not a folder: name a folder (made if needed)")


def _check_outputs(targets: Sequence[str], inputs: Sequence[str]) -> None:
    """Refuse, before anything is read or written, an output that is one of the inputs."""
    for target in targets:
        for source in inputs:
            if same_file(target, source):
                shown = "" if target == source else f" ({source})"
                raise _UsageError(f"{target} is one of the inputs{shown}: write to another path")


def _make_folder(out: str) -> None:
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as exc:
        _fail(f"cannot make the folder {out}: {exc.strerror or exc}")


def _write_output(target: str, write: Any, inputs: Sequence[str]) -> None:
    """Write one output atomically; a failure is one line and exit 1."""
    try:
        atomic_write(target, write, inputs=inputs, verb="write", by="trajkit")
    except ValueError as exc:  # became one of the inputs since it was checked
        raise _UsageError(_one_line(str(exc))) from None
    except OSError as exc:
        where = exc.filename if exc.filename is not None else target
        _fail(f"cannot write {where}: {exc.strerror or exc}")


class _OutputError(Exception):
    """A failure already described by its message: printed as it is, exit 1."""


def _fail(message: str) -> NoReturn:
    raise _OutputError(message)


def _load_all(paths: Sequence[str], max_bytes: int | None) -> list[Rollout] | None:
    """Memory-map every file, in order; `None` (having said which) if one is refused."""
    rollouts: list[Rollout] = []
    for path in paths:
        try:
            rollouts.append(load(path, mmap=True, max_bytes=max_bytes))
        except RolloutFileError as exc:
            print(_refused(path, exc), file=sys.stderr)
            return None
    return rollouts


# ------------------------------------------------------------------------------------ lint


def _lint(args: argparse.Namespace) -> int:
    from trajkit.lint import engine, report  # the lint package is imported for this command

    if args.list:
        print("\n".join(report.check_table()))
        return 0
    if not args.paths:
        raise _UsageError("name the files or folders to lint (or --list)")
    if args.max_episode_steps is not None and args.max_episode_steps < 1:
        raise _UsageError(f"--max-episode-steps must be >= 1, got {args.max_episode_steps}")
    try:
        options, _ = report.options_from(
            select=None if args.select is None else report.split_codes(args.select),
            ignore=None if args.ignore is None else report.split_codes(args.ignore),
            max_episode_steps=args.max_episode_steps,
            use_config=not args.no_config,
        )
    except ValueError as exc:
        raise _UsageError(str(exc)) from None
    run = engine.LintRun(
        args.paths, options, replay=args.replay, jobs=args.jobs, max_bytes=args.max_bytes
    )
    tally = report.Tally()
    try:
        for finding in run:
            tally.add(finding)
            print(json.dumps(finding.to_json()) if args.json else _shown(finding.format()))
            sys.stdout.flush()
    except BrokenProcessPool:
        print(
            "trajkit lint: error: a worker process stopped unexpectedly (out of memory?); "
            "run again with --jobs 1 to lint the files in this process",
            file=sys.stderr,
        )
        return 1
    finally:
        run.close()
    print(tally.summary(run.files), file=sys.stderr)
    return tally.exit_code


# ---------------------------------------------------------------------------------- schema


def _schema(args: argparse.Namespace) -> int:
    model = RolloutFileMetadata if args.metadata else RolloutSpec
    print(json.dumps(model.model_json_schema(), indent=2))
    return 0
