"""What every command shares: safe printing, one-line errors, option types and outputs.

The parser and `main` import this module for every command, `--help` included, so it
imports the standard library only; the helpers that read or write files import the file
layer when they are called.
"""

from __future__ import annotations

import argparse
import os
import re
import struct
import sys
from collections.abc import Sequence

from trajkit._io.defaults import DEFAULT_MAX_BYTES

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing at start-up
if TYPE_CHECKING:
    from typing import Any, NoReturn

    from trajkit._base.errors import RolloutFileError
    from trajkit._models.rollout import Rollout

PROGRESS_THRESHOLD = 20
"""`validate` shows a progress line on a terminal when it checks more files than this."""

MAX_JOBS = 4096
"""The most worker processes (or Ray tasks) that `--jobs` accepts."""

DPI_RANGE = (10, 1000)
"""The resolutions `plot --dpi` accepts, inclusive: below 10 the text cannot be drawn, and
1000 already makes PNGs of about 8000 x 5500 pixels."""

MAX_SHOWN = 3  # problems shown per file on the text output
_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]i?b?|b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


# Characters that would act on a terminal instead of showing: C0 and C1 controls, DEL, the
# line and paragraph separators and the bidirectional controls (which reorder what follows).
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


# Surrogates that are not undecodable bytes of a file name (those are U+DC80 to U+DCFF).
_LONE_SURROGATES = re.compile("[\ud800-\udc7f\udd00-\udfff]")


def printable(text: str) -> str:
    r"""`text` made safe to print on any terminal: one line, printable, encodable.

    File names that are not valid UTF-8 (whose bytes Python holds as lone surrogates) show
    their bytes as `\xff`; other lone surrogates as `\udfff`; control characters (from a
    file's keys, metadata or name) as escapes such as `\x1b` or `\n`.

    Examples:
        >>> print(printable("run\udcff.npz: key '\x1b[31m'"))
        run\xff.npz: key '\x1b[31m'
    """
    text = _LONE_SURROGATES.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
    return _CONTROLS.sub(
        lambda match: match.group().encode("unicode_escape").decode("ascii"),
        text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"),
    )


class UsageError(Exception):
    """A bad option value found after parsing: reported like an argparse error (exit 2)."""


def max_bytes_option(text: str) -> int | None:
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


def jobs_option(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number of jobs {text!r}") from None
    if not 1 <= value <= MAX_JOBS:
        raise argparse.ArgumentTypeError(f"{text} jobs: use 1 to {MAX_JOBS}")
    return value


def dpi_option(text: str) -> int:
    low, high = DPI_RANGE
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid resolution {text!r}: use an integer") from None
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"resolution {text} dpi: use {low} to {high}")
    return value


def unit_interval_option(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not in [0, 1]")
    return value


def add_max_bytes(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--max-bytes",
        type=max_bytes_option,
        default=DEFAULT_MAX_BYTES,
        metavar="SIZE",
        help=(
            "refuse files whose declared contents exceed SIZE (bytes, or e.g. 512MiB, 8GiB; "
            "'none' for no limit; default 4GiB)"
        ),
    )


def add_verbose(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="say on stderr how the files are shared out (in this process, or in how many "
        "worker processes)",
    )


def verbose() -> None:
    """Show what the `trajkit` logger says (how the work runs), on stderr: `-v`."""
    import logging  # imported here: without -v nothing is logged

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("trajkit: %(message)s"))
    logger = logging.getLogger("trajkit")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def one_line(problem: str) -> str:
    return "; ".join(part.strip() for part in problem.splitlines() if part.strip())


PYTHON_LIMIT = re.compile(r"(?<![-\w])max_bytes\b")
NOT_A_ZIP = "damaged or not a ZIP archive"
_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, ..., name length, extra length


def problem_line(path: str, problem: str) -> str:
    """A file's problem in the command line's words.

    The limit is the `--max-bytes` option here, not `load`'s `max_bytes` argument; a file
    that starts as a ZIP archive (a whole first local header, with a readable name) but has
    lost its end (the central directory, which a reader looks for first) is said to be
    truncated rather than "not a ZIP archive".
    """
    problem = PYTHON_LIMIT.sub("--max-bytes", problem)
    if problem.startswith(NOT_A_ZIP) and starts_as_zip(path):
        return (
            "truncated: the file starts as a ZIP archive but its end (the central directory) "
            "is missing"
        )
    return problem


def starts_as_zip(path: str) -> bool:
    from trajkit._io.remote import is_url

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


def refused(path: str, exc: RolloutFileError) -> str:
    """`PATH: invalid: PROBLEM`, one line, for a file that `load` refused."""
    from trajkit._io.filecheck import file_error

    return printable(f"{path}: invalid: {one_line(problem_line(path, file_error(exc)))}")


def check_folder(out: str) -> None:
    """Refuse an `--out DIR` that exists but is not a folder (a usage error)."""
    if os.path.lexists(out) and not os.path.isdir(out):
        raise UsageError(f"--out {out} is not a folder: name a folder (made if needed)")


def check_outputs(targets: Sequence[str], inputs: Sequence[str]) -> None:
    """Refuse, before anything is read or written, an output that is one of the inputs."""
    from trajkit._io.atomic import same_file

    for target in targets:
        for source in inputs:
            if same_file(target, source):
                shown = "" if target == source else f" ({source})"
                raise UsageError(f"{target} is one of the inputs{shown}: write to another path")


def make_folder(out: str) -> None:
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as exc:
        fail(f"cannot make the folder {out}: {exc.strerror or exc}")


def write_output(target: str, write: Any, inputs: Sequence[str]) -> None:
    """Write one output atomically; a failure is one line and exit 1."""
    from trajkit._io.atomic import atomic_write

    try:
        atomic_write(target, write, inputs=inputs, verb="write", by="trajkit")
    except ValueError as exc:  # became one of the inputs since it was checked
        raise UsageError(one_line(str(exc))) from None
    except OSError as exc:  # named by the output, not the temporary file beside it
        fail(f"cannot write {target}: {exc.strerror or exc}")


class OutputError(Exception):
    """A failure already described by its message: printed as it is, exit 1."""


def fail(message: str) -> NoReturn:
    raise OutputError(message)


def load_all(paths: Sequence[str], max_bytes: int | None) -> list[Rollout] | None:
    """Memory-map every file, in order; `None` (having said which) if one is refused."""
    from trajkit._base.errors import RolloutFileError
    from trajkit._io.files import load

    rollouts: list[Rollout] = []
    for path in paths:
        try:
            rollouts.append(load(path, mmap=True, max_bytes=max_bytes))
        except RolloutFileError as exc:
            print(refused(path, exc), file=sys.stderr)
            return None
    return rollouts
