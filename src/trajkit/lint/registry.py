"""The check registry: every lint check's code, name, severity and one-line summary.

A check's code is stable (`TK101`): it is what `--select`, `--ignore` and `pyproject.toml`
name, and what a finding carries. Codes are grouped like ruff's by their leading digits:
`TK0xx` the file itself, `TK1xx` checks on a recording's data (one file, or episodes joined
across its files), `TK2xx` checks across a dataset's files, `TK3xx` replay in the real
environment. A selector is a prefix of codes (`TK1`
selects every data check, `TK` or `ALL` everything).
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

__all__ = [
    "CHECKS",
    "Check",
    "Finding",
    "Severity",
    "check_selectors",
    "failed",
    "selected_codes",
]

Severity = Literal["error", "warning", "note"]
"""How bad a finding is: `error` (the data is wrong), `warning` (it very likely is), `note`
(something could not be checked, or evidence that cannot tell a bug from a legitimate
case). Errors and warnings fail `trajkit lint` (exit 1); notes do not."""


@dataclass(frozen=True)
class Check:
    """One lint check.

    Attributes:
        code: Its stable code, such as `"TK101"`.
        name: A short kebab-case name, such as `"truncation-as-termination"`.
        severity: The severity of its findings.
        summary: What it finds, in one line.

    Examples:
        >>> CHECKS["TK101"].name
        'truncation-as-termination'
    """

    code: str
    name: str
    severity: Severity
    summary: str


_ALL = (
    Check("TK001", "unreadable-file", "error", "the file cannot be read as a rollout"),
    Check(
        "TK101",
        "truncation-as-termination",
        "warning",
        "episodes cut by a time limit are recorded as terminations (truncated = 0)",
    ),
    Check(
        "TK102",
        "reward-step-shifted",
        "warning",
        "terminal rewards sit one step late (the next episode's first step) or one step early",
    ),
    Check(
        "TK103",
        "action-misaligned",
        "error",
        "actions[t] fit the policy outputs of another row than t (an off-by-one)",
    ),
    Check(
        "TK104",
        "reset-observation-twice",
        "warning",
        "every episode end repeats the observation with reward 0 (the reset stored twice)",
    ),
    Check(
        "TK105",
        "episode-over-time-limit",
        "error",
        "an episode runs past the env's time limit without a truncation",
    ),
    Check("TK106", "action-outside-space", "error", "an action is not in the action space"),
    Check(
        "TK107",
        "action-outside-bounds",
        "warning",
        "a continuous action is outside the Box bounds (the env clips what it executes)",
    ),
    Check(
        "TK108",
        "phantom-autoreset-step",
        "warning",
        "NEXT_STEP's autoreset step (final to reset observation, reward 0) is kept as a step",
    ),
    Check(
        "TK109",
        "episode-start-misplaced",
        "warning",
        "dones flags the row before or after the one where the observations jump to a reset",
    ),
    Check(
        "TK110",
        "log-probs-mismatch",
        "error",
        "stored log_probs differ from what the stored policy outputs give the stored action",
    ),
    Check(
        "TK111",
        "rewards-clipped",
        "note",
        "rewards look clipped although the recording names no reward wrapper (or saturate)",
    ),
    Check(
        "TK112",
        "env-columns-copied",
        "warning",
        "env columns start from the same observations (envs seeded alike) or copy each other",
    ),
    Check(
        "TK113",
        "truncation-before-time-limit",
        "warning",
        "an episode is flagged as truncated before the time limit the recording names",
    ),
    Check(
        "TK114",
        "final-observation-is-reset",
        "warning",
        "final_obses hold the next episode's first observation, bit for bit, at every end",
    ),
    Check(
        "TK115",
        "observation-rows-aliased",
        "warning",
        "an env's observation never changes over a file (rows appended from one buffer)",
    ),
    Check(
        "TK116",
        "observation-outside-space",
        "error",
        "an observation is outside the observation space the recording names",
    ),
    Check(
        "TK201",
        "constant-observation-feature",
        "warning",
        "an observation feature never changes across the dataset",
    ),
    Check(
        "TK202",
        "reward-scale-jump",
        "warning",
        "a file's reward scale differs from the dataset's median by more than a factor",
    ),
    Check("TK203", "duplicate-rollout", "warning", "the same rollout is saved in two files"),
    Check(
        "TK204",
        "recording-index-reused",
        "error",
        "two files with other arrays claim the same index of one recording",
    ),
    Check(
        "TK300",
        "cannot-replay",
        "note",
        "a file is not replayed (no recording, env id, seed, predecessors, ...), and why",
    ),
    Check(
        "TK301",
        "replay-observation-differs",
        "error",
        "replaying the recorded actions gives another observation",
    ),
    Check(
        "TK302",
        "replay-reward-differs",
        "error",
        "replaying the recorded actions gives another reward",
    ),
    Check(
        "TK303",
        "replay-episode-end-differs",
        "error",
        "replaying the recorded actions ends an episode elsewhere",
    ),
)

CHECKS: Mapping[str, Check] = MappingProxyType({check.code: check for check in _ALL})
"""Every check, by code, in code order."""


@dataclass(frozen=True)
class Finding:
    """One problem found by `trajkit lint`: a check's code, a message and where it was found.

    Attributes:
        code: The check's code, such as `"TK101"`.
        message: One line: what was found, with the numbers behind it.
        path: The file (as found or given); `None` for a finding about the whole dataset.
        env: The env (column b) where it was found first, if it is about one.
        step: The step (row t) where it was found first, if it is about one.

    Examples:
        >>> f = Finding("TK105", "episode of 12 steps, over the limit of 10", "a.npz", 1, 10)
        >>> f.severity, f.check.name
        ('error', 'episode-over-time-limit')
        >>> f.to_json()["env"], f.format()
        (1, 'a.npz: env 1, step 10: TK105 [error] episode of 12 steps, over the limit of 10')
    """

    code: str
    message: str
    path: str | None = None
    env: int | None = None
    step: int | None = None

    @property
    def check(self) -> Check:
        """The check that found it.

        Examples:
            >>> Finding("TK203", "same arrays as a.npz", "b.npz").check.severity
            'warning'
        """
        return CHECKS[self.code]

    @property
    def severity(self) -> Severity:
        """The check's severity: `error`, `warning` or `note`.

        Examples:
            >>> Finding("TK300", "no env id", "a.npz").severity
            'note'
        """
        return CHECKS[self.code].severity

    def to_json(self) -> dict[str, object]:
        """The JSON object `trajkit lint --json` prints for it (one per line).

        Examples:
            >>> Finding("TK201", "obses[2] is constant").to_json()  # doctest: +NORMALIZE_WHITESPACE
            {'code': 'TK201', 'name': 'constant-observation-feature', 'severity': 'warning',
             'path': None, 'env': None, 'step': None, 'message': 'obses[2] is constant'}
        """
        return {
            "code": self.code,
            "name": self.check.name,
            "severity": self.severity,
            "path": self.path,
            "env": self.env,
            "step": self.step,
            "message": self.message,
        }

    def format(self) -> str:
        """The line `trajkit lint` prints: `PATH: env B, step T: CODE [severity] message`.

        Examples:
            >>> print(Finding("TK201", "obses[2] is constant").format())
            (dataset): TK201 [warning] obses[2] is constant
        """
        where = [self.path if self.path is not None else "(dataset)"]
        place = ", ".join(
            f"{name} {value}"
            for name, value in (("env", self.env), ("step", self.step))
            if value is not None
        )
        head = f"{where[0]}: {place}" if place else where[0]
        return f"{head}: {self.code} [{self.severity}] {self.message}"


def check_selectors(selectors: Iterable[str], option: str) -> tuple[str, ...]:
    """`selectors`, upper-cased and checked: each must be `ALL` or a prefix of some code.

    Raises:
        ValueError: Naming `option` and the selector, for one that selects nothing.

    Examples:
        >>> check_selectors(["tk1", "TK203"], "--select")
        ('TK1', 'TK203')
        >>> check_selectors(["TK9"], "--ignore")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: --ignore: TK9 matches no check (codes are TK001 to TK303; ...)
    """
    checked = []
    for selector in selectors:
        if not isinstance(selector, str):
            raise ValueError(f"{option}: codes must be strings, got {selector!r}")
        text = selector.strip().upper()
        if text != "ALL" and not any(code.startswith(text) for code in CHECKS):
            raise ValueError(
                f"{option}: {selector} matches no check (codes are {min(CHECKS)} to "
                f"{max(CHECKS)}; see trajkit lint --list)"
            )
        checked.append(text)
    return tuple(checked)


def selected_codes(
    select: Iterable[str] | None = None, ignore: Iterable[str] | None = None
) -> frozenset[str]:
    """The codes that `select` and `ignore` leave on, by prefix, as ruff selects rules.

    `select` defaults to every check. A code is on when a selector is a prefix of it and no
    ignored prefix is as long or longer than the longest such selector: `select=["TK1"],
    ignore=["TK101"]` turns TK101 off, `select=["TK101"], ignore=["TK1"]` keeps it.

    Raises:
        ValueError: For a selector that matches no code.

    Examples:
        >>> sorted(selected_codes(["TK10"], ["TK101", "TK107"]))
        ['TK102', 'TK103', 'TK104', 'TK105', 'TK106', 'TK108', 'TK109']
        >>> sorted(selected_codes(["TK203"], ["TK2"]))
        ['TK203']
    """
    chosen = check_selectors(["ALL"] if select is None else select, "select")
    dropped = check_selectors(() if ignore is None else ignore, "ignore")

    def longest(code: str, prefixes: tuple[str, ...]) -> int:
        lengths = [
            0 if p == "ALL" else len(p) for p in prefixes if p == "ALL" or code.startswith(p)
        ]
        return max(lengths, default=-1)

    return frozenset(
        code
        for code in CHECKS
        if longest(code, chosen) >= 0 and longest(code, chosen) > longest(code, dropped)
    )


def failed(where: str, exc: Exception) -> str:
    """A check's error (a bug in lint) in one line: where, the error, and the code that raised.

    Examples:
        >>> try:
        ...     [][0]
        ... except IndexError as exc:
        ...     failed("a.npz", exc)  # doctest: +ELLIPSIS
        'a.npz: IndexError: list index out of range (at <doctest ...>:2 in <module>)'
    """
    frames = traceback.extract_tb(exc.__traceback__)
    at = ""
    if frames:
        frame = frames[-1]
        name = frame.filename.replace("\\", "/")
        name = name[name.rfind("trajkit/") :] if "trajkit/" in name else name
        at = f" (at {name}:{frame.lineno} in {frame.name})"
    return f"{where}: {type(exc).__name__}: {exc}{at}"
