"""The `trajkit` command line: validate, lint, report, info, plot, export, import and schema.

Exit codes: 0 success (every file valid), 1 a file is invalid, missing or unreadable (or an
output cannot be written), 2 a usage error (bad options, unreadable `--spec` file, an `--out`
that is one of the inputs or the wrong kind of file), 130 interrupted. Every failure is one
line on stderr, never a traceback. stdlib argparse only.

One module per command group beside this one: `parser` (every command's options),
`validate`, `info` (`info` and `schema`), `plot`, `interchange` (`export` and `import`),
`lint` and `report`; `common` holds what they share (safe printing, one-line errors, option
types, outputs).

The command line starts at once: `--help`, `--version` and a usage error import the parser
and the standard library only, and a command imports its module (and so NumPy, pydantic or
an extra) when it runs (`COMMANDS`).
"""

from __future__ import annotations

import gc
import importlib
import io
import os
import sys
from collections.abc import Sequence

from trajkit._cli.common import (
    DPI_RANGE,
    MAX_JOBS,
    PROGRESS_THRESHOLD,
    OutputError,
    UsageError,
    one_line,
    printable,
    verbose,
)
from trajkit._cli.parser import build_parser
from trajkit._io.defaults import SUFFIX

__all__ = [
    "COMMANDS",
    "DPI_RANGE",
    "MAX_JOBS",
    "PLUGINS_VARIABLE",
    "PROGRESS_THRESHOLD",
    "SUFFIX",
    "console_main",
    "main",
]

PLUGINS_VARIABLE = "PYDANTIC_DISABLE_PLUGINS"
"""pydantic's switch for its plugins, which the `trajkit` command turns off (`console_main`)."""

COMMANDS = {
    "validate": ("trajkit._cli.validate", "validate_command"),
    "info": ("trajkit._cli.info", "info_command"),
    "plot": ("trajkit._cli.plot", "plot_command"),
    "export": ("trajkit._cli.interchange", "export_command"),
    "import": ("trajkit._cli.interchange", "import_command"),
    "lint": ("trajkit._cli.lint", "lint_command"),
    "report": ("trajkit._cli.report", "report_command"),
    "schema": ("trajkit._cli.info", "schema_command"),
}
"""Each command's handler, `(module, function)`: the module is imported when the command runs."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `trajkit` command line and return its exit code.

    Commands: `validate PATH... [--spec SPEC.json] [--json] [--quick] [--max-bytes SIZE]
    [--progress]`, `info PATH [--gamma G] [--lam L]`, `plot PATH... --out DIR`,
    `export PATH... --out FILE.parquet`, `import FILE.parquet --out DIR`,
    `schema [--metadata]`, `lint PATH... [--select CODES] [--ignore CODES] [--json]
    [--replay]` (exit 1 on an error or warning; see [Lint](../lint.md)),
    `report PATH... -o FILE.html` (one HTML page of the files; see
    [Dataset reports](../report.md)). The
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
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help/--version (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    if getattr(args, "verbose", False):
        verbose()
    module, function = COMMANDS[args.command]
    handler = getattr(importlib.import_module(module), function)
    try:
        code: int = handler(args)
        return code
    except (UsageError, ImportError) as exc:  # a missing extra is a usage error too
        print(printable(f"trajkit {args.command}: error: {one_line(str(exc))}"), file=sys.stderr)
        return 2
    except OutputError as exc:
        message = str(exc)
        if not message.startswith("trajkit "):
            message = f"trajkit {args.command}: error: {message}"
        print(printable(one_line(message)), file=sys.stderr)
        return 1


def console_main() -> None:
    """The `trajkit` console script: `sys.exit(main())`.

    The command's process loads no pydantic plugins (`PYDANTIC_DISABLE_PLUGINS` is set to
    `__all__` unless it is set already): finding them reads the metadata of every installed
    package (about 9 ms of a 250 ms `trajkit validate` with 160 packages), and what they observe
    here is trajkit's own models. Set the variable (to `""` for every plugin) to keep them.

    The objects the command made are frozen (`gc.freeze`) before it exits: the interpreter's
    last garbage collections, at its shutdown, then skip them (20-30 ms of a `trajkit
    validate`, whose pydantic validators and NumPy are torn down anyway). The exit functions
    (`atexit`) and the modules' teardown run as usual.

    Examples:
        >>> import sys
        >>> from unittest import mock
        >>> import os
        >>> argv = ["trajkit", "--version"]
        >>> with mock.patch.object(sys, "argv", argv), mock.patch.dict(os.environ):
        ...     console_main()
        Traceback (most recent call last):
        ...
        SystemExit: 0
    """
    for stream in (sys.stdout, sys.stderr):  # a terminal that cannot show a character
        if isinstance(stream, io.TextIOWrapper):  # gets an escape, never a traceback
            stream.reconfigure(errors="backslashreplace")
    os.environ.setdefault(PLUGINS_VARIABLE, "__all__")
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. `trajkit schema | head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = 1
    gc.freeze()  # the interpreter's last collections then skip what the command built
    sys.exit(code)
