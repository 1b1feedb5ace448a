"""A lint run over many files: the per-file work, on `trajkit validate`'s discovery and engine.

Files are found by `trajkit._io.discovery.discover` (folders searched for `*.npz`, sorted, hidden
ones skipped) and linted chunk by chunk on every core by `trajkit._io.engine.run_ordered`, the
parallel engine behind `trajkit validate`: the findings come back in file order, the same with
any number of processes. Each worker loads a file once, runs the checks that need it alone
(`trajkit.lint.checks`) and summarises it for the checks across files
(`trajkit.lint.crossfile`) and for joining episodes across files (`trajkit.lint.join`), which
the parent folds in as results arrive. Replay (TK3xx), which needs the files of a recording
in order, runs after, and accounts for every file.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from trajkit._base.errors import RolloutFileError
from trajkit._io.discovery import Found, discover
from trajkit._io.engine import checked_jobs, cpu_count, run_ordered
from trajkit._io.filecheck import FileCheck, file_error
from trajkit._io.files import DEFAULT_MAX_BYTES
from trajkit._io.metadata import RolloutFileMetadata
from trajkit._io.reader import load_with_metadata
from trajkit._io.remote import file_size, local_copy, mappable, naming
from trajkit._models.rollout import Rollout
from trajkit.lint.checks import check_rollout
from trajkit.lint.config import LintOptions
from trajkit.lint.crossfile import CrossFileChecks, FileSummary, summarize
from trajkit.lint.join import EpisodeEdges, EpisodeJoiner, episode_edges
from trajkit.lint.registry import Finding, failed

__all__ = [
    "FileResult",
    "LintFold",
    "LintRun",
    "lint_chunk",
    "lint_file",
    "lint_refused",
    "lint_rollout",
]


@dataclass(frozen=True)
class FileResult:
    """What linting one file gives back to the parent process.

    Attributes:
        path: The file.
        findings: Its findings of the checks that need it alone.
        summary: Its summary for the checks across files, when one runs.
        recording: Its metadata's `recording` (as JSON), if it has one.
        edges: Its episodes' edges, for joining them across files, when a check on joined
            episodes runs.
        readable: Whether it could be read (a file lint refused has no other finding).
        failure: The error a check raised on it (a bug in lint), as `failed` words it: its
            findings are left out, the other files are linted.

    Examples:
        >>> FileResult("a.npz", (), None, None).findings
        ()
    """

    path: str
    findings: tuple[Finding, ...]
    summary: FileSummary | None
    recording: Mapping[str, Any] | None
    edges: EpisodeEdges | None = None
    readable: bool = True
    failure: str | None = None


def lint_file(path: str, *, options: LintOptions, max_bytes: int | None) -> FileResult:
    """Lint one file (a path or an fsspec URL); never raises for a bad file.

    A file that cannot be loaded gives one TK001 finding with the reason `trajkit validate`
    gives; a check that raises on it (a bug in lint) gives its `failure`.

    Examples:
        >>> from trajkit.lint.config import LintOptions
        >>> lint_file("missing.npz", options=LintOptions(frozenset({"TK001"})),
        ...           max_bytes=None).findings[0].code
        'TK001'
    """
    try:
        with local_copy(path, max_bytes) as local, naming(path):
            rollout, meta = load_with_metadata(local, mmap=mappable(path), max_bytes=max_bytes)
            file_size(local)
    except RolloutFileError as exc:
        return lint_refused(path, file_error(exc), options)
    except Exception as exc:  # a bug must not stop the batch
        return lint_refused(
            path, f"internal error (please report it): {type(exc).__name__}: {exc}", options
        )
    try:
        return lint_rollout(rollout, path, meta, options)
    except Exception as exc:  # a bug in a check: reported, and the other files linted
        return FileResult(path, (), None, _recording(meta), failure=failed(path, exc))


def _recording(metadata: RolloutFileMetadata | None) -> dict[str, Any] | None:
    """A file's `recording` metadata as JSON, if it has one."""
    recorded = None if metadata is None else metadata.recording
    return None if recorded is None else recorded.model_dump(mode="json")


def lint_rollout(
    rollout: Rollout, path: str, metadata: RolloutFileMetadata | None, options: LintOptions
) -> FileResult:
    """Lint's per-file work on a rollout already loaded from `path` (what `lint_file` does).

    The checks that need the file alone, its summary for the checks across files and its
    episodes' edges, as `options` asks for them; `trajkit report` calls it on the rollouts
    it loads, so that it reads each file once.

    Examples:
        >>> from trajkit.lint.config import LintOptions
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=8, keys=("actions",))
        >>> r.model_outs.arrays["actions"][2, 0] = 7
        >>> options = LintOptions(frozenset({"TK106"}), action_space={"type": "Discrete", "n": 3})
        >>> [f.code for f in lint_rollout(r, "a.npz", None, options).findings]
        ['TK106']
    """
    recording = _recording(metadata)
    codes = options.codes
    findings = check_rollout(rollout, options, path=path, recording=recording)
    summary = None
    if options.runs("TK2") or codes & _ACROSS:
        summary = summarize(rollout, path, recording, options.action_space)
    edges = None
    if codes & _JOINED:
        edges = episode_edges(rollout, path, recording, options.max_episode_steps)
    return FileResult(path, tuple(findings), summary, recording, edges)


_JOINED = frozenset({"TK101", "TK105", "TK112", "TK113"})  # checks on episodes across files
_ACROSS = frozenset({"TK102", "TK103", "TK108", "TK109", "TK110", "TK112", "TK114", "TK115"})


def lint_refused(path: str, problem: str, options: LintOptions) -> FileResult:
    """What lint says of a file it cannot read: TK001 with the problem.

    Examples:
        >>> from trajkit.lint.config import LintOptions
        >>> lint_refused("a.npz", "damaged", LintOptions(frozenset({"TK001"}))).findings
        (Finding(code='TK001', message='damaged', path='a.npz', env=None, step=None),)
    """
    found = (Finding("TK001", problem, path),) if "TK001" in options.codes else ()
    return FileResult(path, found, None, None, readable=False)


def lint_chunk(
    items: Sequence[Found | FileCheck], *, options: LintOptions, max_bytes: int | None
) -> list[FileResult]:
    """`lint_file` over a chunk of discovered files; discovery's verdicts become TK001.

    Examples:
        >>> from trajkit._io.filecheck import FileCheck
        >>> from trajkit.lint.config import LintOptions
        >>> options = LintOptions(frozenset({"TK001"}))
        >>> chunk = [FileCheck("x", ("no such file",))]
        >>> lint_chunk(chunk, options=options, max_bytes=None)[0].findings
        (Finding(code='TK001', message='no such file', path='x', env=None, step=None),)
    """
    return [
        lint_refused(item.path, "; ".join(item.problems), options)
        if isinstance(item, FileCheck)
        else lint_file(item.path, options=options, max_bytes=max_bytes)
        for item in items
    ]


class LintFold:
    """Per-file results folded in file order: the findings as `LintRun` yields them.

    Per file, its own findings and those of the episodes joined across files, then those of
    the checks across files as they arise; at the end, the joined episodes' and the checks
    across files' last findings. `trajkit report` folds its own per-file results with it.

    A check that raised (a bug in lint), on a file or in the fold, is listed in `failures`
    and the others go on: the run's findings are then incomplete.

    Examples:
        >>> from trajkit.lint.config import LintOptions
        >>> fold = LintFold(LintOptions(frozenset({"TK001"})))
        >>> missing = lint_file("missing.npz", options=fold.options, max_bytes=None)
        >>> [f.code for f in fold.add(missing)], fold.finish(), fold.recordings
        (['TK001'], [], [])
    """

    def __init__(self, options: LintOptions) -> None:
        self.options = options
        self.recordings: list[tuple[str, Mapping[str, Any] | None]] = []
        """The readable files and their recordings, in file order (what replay needs)."""
        self.failures: list[str] = []
        """The errors checks raised (bugs in lint), as `failed` words them, in order."""
        self._across = CrossFileChecks(options)
        self._joiner = EpisodeJoiner(options)

    def add(self, result: FileResult | None) -> list[Finding]:
        """The findings that the next file (`None`: one lint's checks failed on) brings."""
        if result is not None and result.readable:
            self.recordings.append((result.path, result.recording))
        if result is None or result.failure is not None:
            if result is not None and result.failure is not None:
                self.failures.append(result.failure)
            self._joiner.add(None)  # its episodes join none
            return []
        try:
            own = [*result.findings, *self._joiner.add(result.edges)]
            found = sorted(own, key=lambda f: f.code)  # stable: code order, as checked
            if result.summary is not None:
                found.extend(self._across.add(result.summary))
        except Exception as exc:  # a bug in a check across files: reported, the run goes on
            self.failures.append(failed(result.path, exc))
            return []
        return found

    def finish(self) -> list[Finding]:
        """The last findings, once every file is in."""
        found: list[Finding] = []
        for stage, what in (
            (self._joiner.finish, "episodes joined across files"),
            (self._across.finish, "checks across files"),
        ):
            try:
                found.extend(stage())
            except Exception as exc:  # a bug in a check across files: reported
                self.failures.append(failed(f"the {what}", exc))
        return found


class LintRun:
    """The findings of linting `paths`, produced as they are found (iterate once).

    Per-file findings come in file order as the workers return them; then those whose
    evidence is many files'; then, with `replay`, the replay's (TK3xx). `files` counts the
    files linted, `replayed` lists those replay replayed, `failures` the errors checks
    raised (bugs in lint: the files and the checks across files are linted on).

    Examples:
        >>> from trajkit.lint.config import LintOptions
        >>> run = LintRun(["missing.npz"], LintOptions(frozenset({"TK001"})), jobs=1)
        >>> [f.code for f in run], run.files
        (['TK001'], 1)
    """

    def __init__(
        self,
        paths: Iterable[str],
        options: LintOptions,
        *,
        replay: bool = False,
        jobs: int | None = None,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
    ) -> None:
        self.paths: list[str] = list(paths)
        self.options = options
        self.replay = replay
        self.jobs: int = checked_jobs(jobs) or cpu_count()
        self.max_bytes = max_bytes
        self.files: int = 0
        self.replayed: list[str] = []
        self.failures: list[str] = []
        self._results: Iterator[FileResult] | None = None
        if replay:  # needs gymnasium: refused now (ImportError), before any file is linted
            importlib.import_module("trajkit.lint.replay")

    def __iter__(self) -> Iterator[Finding]:
        work = partial(lint_chunk, options=self.options, max_bytes=self.max_bytes)
        fold = LintFold(self.options)
        fold.failures = self.failures
        results = run_ordered(work, discover(self.paths), jobs=self.jobs)
        self._results = results
        for result in results:
            self.files += 1
            yield from fold.add(result)
        yield from fold.finish()
        if self.replay and self.options.runs("TK3"):
            from trajkit.lint.replay import replay_recordings  # imports gymnasium

            yield from replay_recordings(
                fold.recordings,
                self.options,
                max_bytes=self.max_bytes,
                replayed=self.replayed,
                failures=self.failures,
            )

    def close(self) -> None:
        """Stop the worker processes now (after Ctrl-C, or once the findings are not wanted).

        Examples:
            >>> from trajkit.lint.config import LintOptions
            >>> LintRun([], LintOptions(frozenset())).close()
        """
        close = getattr(self._results, "close", None)
        if close is not None:
            close()
