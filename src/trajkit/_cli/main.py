"""The `trajkit` command line: `validate`, `info` and `schema` (stdlib argparse only).

Exit codes: 0 success (every file valid), 1 a file is invalid, missing or unreadable, 2 a usage
error (bad options, unreadable `--spec` file). Bad input never prints a traceback.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import stat
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np
from pydantic import ValidationError

from trajkit._base.errors import RolloutFileError
from trajkit._base.version import __version__
from trajkit._core import tree as _tree
from trajkit._io.files import DEFAULT_MAX_BYTES, load, read_metadata, save
from trajkit._io.infos import strict_json_loads
from trajkit._io.metadata import RolloutFileMetadata
from trajkit._models.model_outputs import discrete_actions
from trajkit._models.rollout import Rollout
from trajkit._models.spec import RolloutSpec

__all__ = ["PROGRESS_THRESHOLD", "SUFFIX", "console_main", "main"]

SUFFIX = ".npz"
"""Files with this suffix are checked when `validate` recurses into a folder."""

PROGRESS_THRESHOLD = 20
"""`validate` shows a progress line on a terminal when it checks more files than this."""

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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trajkit",
        description="Check and inspect recorded rollout files (the trajkit .npz format).",
        epilog="Exit codes: 0 ok, 1 invalid or missing file, 2 usage error.",
    )
    parser.add_argument("--version", action="version", version=f"trajkit {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    validate = commands.add_parser(
        "validate",
        help="check rollout files (folders are searched for *.npz)",
        description=(
            "Check rollout files: everything trajkit.load checks, and conformance to a spec. "
            f"Folders are searched recursively for files ending in {SUFFIX} (hidden files and "
            "folders are skipped); files named explicitly are checked whatever their suffix. "
            "Prints one line per file. Exit 0 when all are valid, 1 when any is invalid or "
            "missing, 2 on a usage error."
        ),
    )
    validate.add_argument("paths", nargs="+", metavar="PATH", help="files or folders")
    validate.add_argument(
        "--spec", metavar="SPEC.json", help="also require every file to conform to this spec"
    )
    validate.add_argument(
        "--json", action="store_true", help="print a JSON list of {path, ok, problems}"
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
            "order given."
        ),
    )
    plot.add_argument("paths", nargs="+", metavar="PATH", help="rollout files, in order")
    plot.add_argument("--out", required=True, metavar="DIR", help="folder for the PNG files")
    plot.add_argument("--gamma", type=_unit_interval, default=0.99, help="discount (0.99)")
    plot.add_argument("--lam", type=_unit_interval, default=0.95, help="GAE lambda (0.95)")
    plot.add_argument("--dpi", type=int, default=100, help="resolution of the PNGs (100)")
    _add_max_bytes(plot)

    export = commands.add_parser(
        "export",
        help="write rollout files to a Parquet file (needs trajkit[arrow])",
        description=(
            "Write rollout files, taken in the order given, to one Parquet file in trajkit's "
            "columnar layout: one row per step and env, readable as-is by pyarrow, polars, "
            "DuckDB and HF datasets. The rollouts must share their structure."
        ),
    )
    export.add_argument("paths", nargs="+", metavar="PATH", help="rollout files, in order")
    export.add_argument("--out", required=True, metavar="FILE", help="the Parquet file to write")
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
            "DIR/rollout-00000.npz, DIR/rollout-00001.npz, ..."
        ),
    )
    import_.add_argument("path", metavar="FILE", help="the Parquet file")
    import_.add_argument("--out", required=True, metavar="DIR", help="folder for the files")

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
    `schema [--metadata]`. The [CLI reference](cli.md) lists every option, and
    [Recorded trajectories](../file-format.md#command-line) the output of each command.

    Args:
        argv: The arguments, without the program name; `None` reads `sys.argv[1:]`.

    Returns:
        0 on success (all files valid), 1 when a file is invalid, missing or unreadable, 2 on a
        usage error. `--help` and `--version` return 0.

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
        return _schema(args)
    except _UsageError as exc:
        print(_shown(f"trajkit {args.command}: error: {exc}"), file=sys.stderr)
        return 2


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


@dataclass
class _Result:
    path: str
    problems: list[str] = field(default_factory=list)
    checked: bool = True

    @property
    def ok(self) -> bool:
        return not self.problems


def _discover(paths: Sequence[str]) -> list[_Result]:
    """Expand folders into their `*.npz` files; missing paths become invalid results."""
    found: list[_Result] = []
    for path in paths:
        if os.path.isdir(path):
            before = len(found)
            errors: list[OSError] = []
            for root, dirs, files in os.walk(path, onerror=errors.append):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found.extend(
                    _Result(os.path.join(root, name))
                    for name in sorted(files)
                    if name.endswith(SUFFIX) and not name.startswith(".")
                )
            found.extend(
                _Result(str(err.filename or path), [f"cannot read folder: {err.strerror}"], False)
                for err in errors
            )
            if len(found) == before:
                found.append(_Result(path, [f"no *{SUFFIX} files in this folder"], False))
        elif os.path.lexists(path):
            found.append(_Result(path))
        else:
            found.append(_Result(path, ["no such file or directory"], False))
    return found


def _read_spec(path: str) -> RolloutSpec:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block the command forever
            raise _UsageError(f"cannot read the spec {path}: not a regular file")
        with open(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):  # swapped since the stat
                raise _UsageError(f"cannot read the spec {path}: not a regular file")
            data = file.read((1 << 20) + 1)
        if len(data) > 1 << 20:
            raise _UsageError(f"invalid spec {path}: larger than 1 MiB")
        strict_json_loads(data)
        return RolloutSpec.model_validate_json(data)
    except OSError as exc:
        raise _UsageError(f"cannot read the spec {path}: {exc.strerror or exc}") from None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'spec'}: {e['msg']}" for e in exc.errors()
        )
        raise _UsageError(f"invalid spec {path}: {problems}") from None
    except (ValueError, RecursionError) as exc:
        raise _UsageError(f"invalid spec {path}: not strict JSON: {exc}") from None


def _file_error(exc: RolloutFileError) -> str:
    return f"member {exc.member}: {exc.reason}" if exc.member is not None else exc.reason


def _check(result: _Result, spec: RolloutSpec | None, quick: bool, max_bytes: int | None) -> None:
    try:
        if quick:
            meta = read_metadata(result.path, max_bytes=max_bytes)
            if spec is not None:
                result.problems += spec.compare(
                    meta.spec, num_steps=meta.num_steps, num_envs=meta.batch_size
                )
            return
        rollout = load(result.path, mmap=True, verify=True, max_bytes=max_bytes)
        if spec is not None:
            result.problems += spec.check(rollout)
        del rollout
    except RolloutFileError as exc:
        result.problems.append(_file_error(exc))
    except Exception as exc:  # a bug must not stop the batch or print a traceback
        result.problems.append(f"internal error (please report it): {type(exc).__name__}: {exc}")


class _Progress:
    def __init__(self, total: int, enabled: bool, stream: TextIO) -> None:
        self.total = total
        self.enabled = enabled
        self.stream = stream
        self._width = 0

    def show(self, index: int, path: str) -> None:
        if self.enabled:
            shown = path if len(path) <= 60 else "..." + path[-57:]
            text = _shown(f"[{index}/{self.total}] checking {shown}")
            self.stream.write("\r" + text.ljust(self._width))
            self.stream.flush()
            self._width = len(text)

    def clear(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0


def _one_line(problem: str) -> str:
    return "; ".join(part.strip() for part in problem.splitlines() if part.strip())


def _validate(args: argparse.Namespace) -> int:
    spec = _read_spec(args.spec) if args.spec is not None else None
    results = _discover(args.paths)
    to_check = [r for r in results if r.checked]
    progress_on = args.progress
    if progress_on is None:
        progress_on = len(to_check) > PROGRESS_THRESHOLD and sys.stderr.isatty()
    progress = _Progress(len(to_check), bool(progress_on), sys.stderr)
    index = 0
    for result in results:
        if result.checked:
            index += 1
            progress.show(index, result.path)
            _check(result, spec, args.quick, args.max_bytes)
        if not args.json:
            progress.clear()
            if result.ok:
                print(_shown(f"{result.path}: ok"))
            else:
                shown = "; ".join(_one_line(p) for p in result.problems[:_MAX_SHOWN])
                more = len(result.problems) - _MAX_SHOWN
                extra = f" (+{more} more)" if more > 0 else ""
                print(_shown(f"{result.path}: invalid: {shown}{extra}"))
    progress.clear()
    if args.json:
        payload = [{"path": r.path, "ok": r.ok, "problems": r.problems} for r in results]
        print(json.dumps(payload, indent=2))
    invalid = sum(not r.ok for r in results)
    sys.stdout.flush()
    if len(results) > 1:
        print(
            f"{len(results)} files: {len(results) - invalid} ok, {invalid} invalid",
            file=sys.stderr,
        )
    return 1 if invalid else 0


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
        print(_shown(f"{path}: invalid: {_one_line(_file_error(exc))}"), file=sys.stderr)
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
    try:
        import trajkit.plot as plot  # matplotlib is imported only for this command
    except ImportError as exc:
        print(_shown(f"trajkit plot: error: {exc}"), file=sys.stderr)
        return 2
    rollouts = _load_all(args.paths, args.max_bytes)
    if rollouts is None:
        return 1
    out = args.out
    os.makedirs(out, exist_ok=True)
    figures = {
        "episodes.png": plot.plot_episodes(rollouts),
        "distributions.png": plot.plot_distributions(rollouts, gamma=args.gamma, lam=args.lam),
        "timeline.png": plot.plot_timeline(rollouts),
    }
    for name, figure in figures.items():
        target = os.path.join(out, name)
        figure.savefig(target, dpi=args.dpi)
        print(_shown(target))
    return 0


# ------------------------------------------------------------------------ export, import


def _arrow_module(command: str) -> Any:
    try:
        import trajkit.arrow as arrow  # pyarrow is imported only for these commands
    except ImportError as exc:  # pragma: no cover - pyarrow is installed with the dev extras
        print(_shown(f"trajkit {command}: error: {exc}"), file=sys.stderr)
        return None
    return arrow


def _export(args: argparse.Namespace) -> int:
    arrow = _arrow_module("export")
    if arrow is None:  # pragma: no cover - pyarrow is installed with the dev extras
        return 2
    rollouts = _load_all(args.paths, args.max_bytes)
    if rollouts is None:
        return 1
    compression = None if args.compression == "none" else args.compression
    try:
        arrow.write_parquet(rollouts, args.out, compression=compression)
    except (ValueError, OSError) as exc:
        print(_shown(f"trajkit export: error: {_one_line(str(exc))}"), file=sys.stderr)
        return 1
    steps = sum((r.num_steps + 1) * r.batch_size for r in rollouts)
    print(_shown(f"{args.out}: {len(rollouts)} rollout(s), {steps} rows"))
    return 0


def _import(args: argparse.Namespace) -> int:
    arrow = _arrow_module("import")
    if arrow is None:  # pragma: no cover - pyarrow is installed with the dev extras
        return 2
    try:
        rollouts = arrow.read_parquet(args.path)
    except (ValueError, OSError) as exc:
        print(_shown(f"{args.path}: invalid: {_one_line(str(exc))}"), file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    for i, rollout in enumerate(rollouts):
        target = os.path.join(args.out, f"rollout-{i:05d}{SUFFIX}")
        save(rollout, target)
        print(_shown(target))
    return 0


def _load_all(paths: Sequence[str], max_bytes: int | None) -> list[Rollout] | None:
    """Memory-map every file, in order; `None` (having said which) if one is refused."""
    rollouts: list[Rollout] = []
    for path in paths:
        try:
            rollouts.append(load(path, mmap=True, max_bytes=max_bytes))
        except RolloutFileError as exc:
            print(_shown(f"{path}: invalid: {_one_line(_file_error(exc))}"), file=sys.stderr)
            return None
    return rollouts


# ---------------------------------------------------------------------------------- schema


def _schema(args: argparse.Namespace) -> int:
    model = RolloutFileMetadata if args.metadata else RolloutSpec
    print(json.dumps(model.model_json_schema(), indent=2))
    return 0
