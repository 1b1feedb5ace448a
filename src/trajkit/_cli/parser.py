"""The argument parser of every command (the CLI reference page is written from it)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence

from trajkit._base.version import __version__
from trajkit._cli.common import (
    DPI_RANGE,
    MAX_JOBS,
    PROGRESS_THRESHOLD,
    add_max_bytes,
    add_verbose,
    dpi_option,
    jobs_option,
    unit_interval_option,
)
from trajkit._io.defaults import SUFFIX


class Parser(argparse.ArgumentParser):
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


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
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
    add_max_bytes(validate)
    validate.add_argument(
        "-j",
        "--jobs",
        type=jobs_option,
        default=None,
        metavar="N",
        help=f"check files in up to N processes, on cores no other program is using (default: "
        f"one per core), or with --engine ray in at most N Ray tasks at once, N from 1 to "
        f"{MAX_JOBS}; the output is the same as with 1",
    )
    add_verbose(validate)
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
    info.add_argument("--gamma", type=unit_interval_option, default=0.99, help="discount (0.99)")
    info.add_argument("--lam", type=unit_interval_option, default=0.95, help="GAE lambda (0.95)")
    add_max_bytes(info)

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
    plot.add_argument("--gamma", type=unit_interval_option, default=0.99, help="discount (0.99)")
    plot.add_argument("--lam", type=unit_interval_option, default=0.95, help="GAE lambda (0.95)")
    plot.add_argument(
        "--dpi",
        type=dpi_option,
        default=100,
        help=f"resolution of the PNGs, {DPI_RANGE[0]} to {DPI_RANGE[1]} (100)",
    )
    add_max_bytes(plot)

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
        help="Parquet compression (zstd); none reads back fastest (compact leaves' pages "
        "are read straight into the rollout)",
    )
    export.add_argument(
        "--layout",
        default="auto",
        choices=("auto", "readable", "compact"),
        help=(
            "readable (every value a number), compact (leaves with a shape, images and "
            "vectors, as bytes; next_ values stored once), or auto: compact when a leaf has "
            "1024 bytes or more per step (auto)"
        ),
    )
    add_max_bytes(export)

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
            "when one is, 2 on a usage error, 3 when a check failed (a bug in trajkit lint: "
            "the error is printed, the other files are linted)."
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
        "--replay-trust-env-args",
        action="store_true",
        help=(
            "let replay pass a recording's env arguments as the file holds them (by default "
            "only those trajkit's recorder writes reach the env's constructor)"
        ),
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
        type=jobs_option,
        default=None,
        metavar="N",
        help=f"lint files in up to N processes, on cores no other program is using (default: "
        f"one per core), 1 to {MAX_JOBS}",
    )
    add_verbose(lint)
    add_max_bytes(lint)

    report = commands.add_parser(
        "report",
        help="write one HTML page of what rollout files hold (needs trajkit[plot])",
        description=(
            "Write one self-contained HTML page (inline styles and figures, no script, "
            "nothing fetched: it opens from disk, offline) of rollout files: their schema, "
            "spaces and recording; the counts of files, steps, episodes, terminations and "
            "truncations; validate's verdicts and lint's findings, grouped by code, each "
            "with its file, env and step; the distributions of episode returns and lengths, "
            "rewards, actions and each observation leaf; and the best, median and worst "
            "episodes (frames of image observations, traces of vector ones). Folders are "
            "searched as validate searches them; a PATH may also be a Parquet file "
            "(*.parquet, needs trajkit[arrow]) or minari:ID, a local Minari dataset (needs "
            "trajkit[minari]). Files are read one at a time, on every core, with bounded "
            "memory; large observations are sampled. Lint settings are read from "
            "[tool.trajkit.lint] of the closest pyproject.toml. Exit 0 when every file is "
            "valid and lint finds no error or warning, 1 when one is invalid or lint finds "
            "one (the page is written all the same) or the page cannot be written, 2 on a "
            "usage error, 3 when a lint check failed (a bug in trajkit lint: please report "
            "it)."
        ),
    )
    report.add_argument(
        "paths", nargs="+", metavar="PATH", help="files or folders, *.parquet, minari:ID"
    )
    report.add_argument(
        "-o", "--out", required=True, metavar="FILE", help="the HTML file to write (or replace)"
    )
    report.add_argument("--title", metavar="TEXT", help="the page's title")
    report.add_argument(
        "--select", metavar="CODES", help="run only these lint codes or prefixes, e.g. TK1,TK203"
    )
    report.add_argument("--ignore", metavar="CODES", help="do not run these lint codes")
    report.add_argument(
        "--max-episode-steps",
        type=int,
        metavar="N",
        help="the env's time limit, for lint, for files whose recording names none",
    )
    report.add_argument("--no-config", action="store_true", help="do not read pyproject.toml")
    report.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="N",
        help="seed of the samples drawn (rewards, episodes, image rows), 0 by default",
    )
    report.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"show a progress line on stderr (default: when stderr is a terminal and there "
        f"are more than {PROGRESS_THRESHOLD} files)",
    )
    report.add_argument(
        "-j",
        "--jobs",
        type=jobs_option,
        default=None,
        metavar="N",
        help=f"read and lint files in up to N processes, on cores no other program is using "
        f"(default: one per core), 1 to {MAX_JOBS}",
    )
    add_max_bytes(report)

    schema = commands.add_parser(
        "schema",
        help="print a JSON Schema",
        description="Print the JSON Schema of RolloutSpec (default) or of the file metadata.",
    )
    schema.add_argument(
        "--metadata", action="store_true", help="the schema of metadata.json instead"
    )
    return parser
