"""A dataset report: one self-contained HTML page of what recorded rollouts hold.

[`report`][trajkit.report.report] (and `trajkit report PATH... -o report.html`) reads rollout
files and folders, a [`Dataset`][trajkit.dataset.Dataset], Parquet files or Minari datasets
and writes one static HTML page that opens from disk, offline: inline styles, figures as PNG
`data:` URIs, no script, nothing fetched. The page shows

- the **schema**: every field and leaf with its dtype and shape, the spaces, the recording
  metadata, and the files whose schema differs;
- the **counts**: files, rollouts, steps, episode ends (terminations and truncations),
  complete episodes;
- the **verdicts** of `trajkit validate` and the **findings** of `trajkit lint`, grouped by
  code, each with its file, env and step;
- **distributions**: episode returns and lengths, rewards, actions per value or per
  dimension, and each observation leaf's range per feature;
- **episodes**: the best, median and worst (by return), as frames of image observations or
  traces of vector observations with their rewards and ends.

It streams: files are read one at a time (in parallel, on the engine behind `trajkit
validate`), each summarised by counts, running statistics and uniform samples, so memory stays
bounded however many files there are. A Parquet file or a Minari dataset is read one rollout
at a time, each written as a temporary rollout file and let go before the next is read. Large
observations such as images are sampled (256 rows per file), never all decoded, and only the
files of the episodes shown are opened again. The
lint findings come from `trajkit lint`'s checks, run on each file where it is loaded, so that
a file is read once. Figures are drawn with
matplotlib (`trajkit[plot]`), imported when the page is made; the page itself is written with
the standard library.

Examples:
    >>> import tempfile
    >>> from pathlib import Path
    >>> import trajkit
    >>> from trajkit.report import report
    >>> from trajkit.testing import example_rollout
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     trajkit.save(example_rollout(num_steps=64, num_envs=2), Path(tmp, "a.npz"))
    ...     page = report(tmp, Path(tmp, "report.html"), jobs=1)
    ...     written = Path(tmp, "report.html").read_text(encoding="utf-8")
    >>> page == written, page.count("<h1>"), "Validation and lint" in page
    (True, 1, True)
"""

from __future__ import annotations

import datetime
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import IO, Any

from trajkit._base.optional import require
from trajkit._io.atomic import atomic_write, output_target, same_file
from trajkit._io.files import DEFAULT_MAX_BYTES
from trajkit.dataset import Dataset
from trajkit.lint.config import LintOptions, checked_limit
from trajkit.lint.report import options_from
from trajkit.report._collect import Collection, collect
from trajkit.report._lint import Findings
from trajkit.report._page import Page, render
from trajkit.report._sources import named_files, open_inputs, sources
from trajkit.report._views import episode_views, picks

__all__ = ["report"]


@dataclass(frozen=True)
class Built:
    """A report made: its HTML, and what the command line's exit code and summary need.

    Attributes:
        html: The page.
        collection: The files' profiles, folded.
        findings: Lint's findings.
    """

    html: str
    collection: Collection
    findings: Findings

    @property
    def exit_code(self) -> int:
        """The command's exit code: 3, 1 or 0.

        3 when a lint check failed on a file (a bug in trajkit lint: `trajkit lint` exits 3
        too); else 1 when a file is invalid or lint found an error or a warning; else 0.
        """
        findings = self.findings
        if findings.failed:
            return 3
        return 1 if self.collection.invalid or findings.tally.exit_code else 0


def build(
    source: Dataset | list[Any],
    *,
    options: LintOptions,
    folder: str | None = None,
    title: str | None = None,
    jobs: int | None = None,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> Built:
    """Read `source` (each file profiled and linted), pick the episodes, render the page.

    Args:
        source: What to read (see `report`), as `sources` lists it.
        options: The lint checks to run and their settings.
        folder: Where the page goes (links to the files are made relative to it).
        title: The page's title.
        jobs: Processes, this one included; `None` for every core.
        max_bytes: The size limit per file, as for `trajkit.load`.
        seed: Seeds the samples.
        progress: Called with each file's path once it is read.
    """
    require("matplotlib", "plot", "trajkit.report")  # refused now, not after the reading
    with tempfile.TemporaryDirectory(prefix="trajkit-report-") as scratch:
        inputs = open_inputs(source, scratch)
        collection, findings = collect(
            inputs, options, jobs=jobs, max_bytes=max_bytes, seed=seed, progress=progress
        )
        views = episode_views(picks(collection), max_bytes=max_bytes)
        named = ", ".join(inputs.described[:3]) + (" ..." if len(inputs.described) > 3 else "")
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        page = Page(
            title or f"Dataset report: {named or 'no files'}",
            inputs,
            collection,
            findings,
            views,
            now,
            folder,
        )
        return Built(render(page), collection, findings)


def report(
    source: str | os.PathLike[str] | Dataset | Iterable[str | os.PathLike[str]],
    out: str | os.PathLike[str] | None = None,
    *,
    title: str | None = None,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    max_episode_steps: int | None = None,
    jobs: int | None = None,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> str:
    r"""Make the HTML report of recorded rollouts; write it to `out` (atomically) if given.

    Args:
        source: A file or folder (a path or an fsspec URL; folders are searched for `*.npz`
            as `trajkit validate` searches them), a Parquet file (`*.parquet`, in trajkit's
            layout), `"minari:ID"` for a local Minari dataset, or an iterable of these; or a
            [`Dataset`][trajkit.dataset.Dataset] (its files are also checked against its
            spec), or a `minari.MinariDataset`.
        out: The HTML file to write (replaced whole, or left as it was on failure); `None`
            to only return the page.
        title: The page's title (default: "Dataset report: " and the sources).
        select: The lint checks to run, codes or prefixes (default: all but replay).
        ignore: Lint checks not to run.
        max_episode_steps: The env's time limit, for lint, for files whose recording names none.
        jobs: Processes, this one included; `None` for every core, 1 for this process only.
        max_bytes: The size limit per file, as for `trajkit.load`; `None` for none.
        seed: Seeds the uniform samples (rewards, episodes, actions, image rows), so that
            the same files give the same page.
        progress: Called with each file's path once it has been read (and linted), e.g. to
            advance a progress bar.

    Returns:
        The page, a complete HTML document.

    Raises:
        ValueError: For a lint selector that matches no check, or a bad `max_episode_steps`;
            or if `out` is one of the files read.
        OSError: If `out` cannot be written.
        ImportError: If matplotlib is not installed (`pip install 'trajkit[plot]'`), or a
            Parquet file or a Minari dataset is named without its extra.

    Examples:
        >>> import os, tempfile
        >>> import trajkit
        >>> from trajkit.report import report
        >>> from trajkit.testing import example_rollout
        >>> seen = []
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     for i in range(2):
        ...         r = example_rollout(num_steps=32, seed=i)
        ...         trajkit.save(r, os.path.join(tmp, f"run-{i}.npz"))
        ...     page = report(tmp, jobs=1, select=["TK2"], progress=seen.append)
        >>> len(seen), '<h2 id="episodes-h">Episodes</h2>' in page
        (2, True)
    """
    limit = (
        None if max_episode_steps is None else checked_limit(max_episode_steps, "max_episode_steps")
    )
    options, _ = options_from(
        select=None if select is None else list(select),
        ignore=None if ignore is None else list(ignore),
        max_episode_steps=limit,
        use_config=False,
    )
    chosen = sources(source)
    target = None if out is None else os.fspath(out)
    if target is not None:
        check_target(target, named_files(chosen))
    built = build(
        chosen,
        options=options,
        folder=None if target is None else os.path.dirname(os.path.abspath(target)),
        title=title,
        jobs=jobs,
        max_bytes=max_bytes,
        seed=seed,
        progress=progress,
    )
    if target is not None:
        write_page(target, built.html, inputs=named_files(chosen))
    return built.html


def check_target(target: str, inputs: Iterable[str]) -> None:
    """Refuse, before anything is read, a target that is one of the inputs or not a file.

    Raises:
        ValueError: If `target` is one of `inputs`.
        OSError: If it is a folder or another file that cannot be replaced.
    """
    resolved = output_target(target, verb="write", by="trajkit report")
    for source in inputs:
        if same_file(resolved, source):
            shown = "" if source == target else f" ({source})"
            raise ValueError(f"{target} is one of the inputs{shown}: write to another path")


def write_page(target: str, html: str, *, inputs: Iterable[str] = ()) -> None:
    """Write the page to `target` atomically, refusing one of `inputs` as the target."""
    data = html.encode("utf-8")

    def write(file: IO[bytes]) -> None:
        file.write(data)

    atomic_write(target, write, inputs=list(inputs), verb="write", by="trajkit report")
