"""The time limit against the episodes (TK101, TK105, TK113), on episodes joined across files.

The time limit L is the recording's `max_episode_steps` (the env's `TimeLimit`), else the
`max_episode_steps` option. Gymnasium's `TimeLimit` truncates an episode on exactly its L-th
step; so, for an episode whose start is in the data (in its file, or joined across the files
of one recording by `trajkit.lint.join`):

- TK105 (exact): an episode that runs past L steps with no end is reported at its step L.
- TK113 (exact): an episode flagged as truncated before its L-th step contradicts the limit
  (a termination recorded as a truncation, a file boundary recorded as a cut).
- TK101 (inferred): an episode of exactly L steps that ends with `truncated = 0` is either a
  time-limit cut recorded as a termination, or an env that terminated on the very step its
  time limit cut (Gymnasium then sets both flags, and a termination is right). The evidence
  is counted over a whole recording, in the envs that flag no end at L as a truncation: n
  distinct episodes (their first and last observations differ) ending unflagged at exactly
  L, against the rate h at which an episode that reaches step L terminates on it: the
  larger of the recording's rate per step and its rate of termination at L-1 and L, counted
  over the episodes that reached L-1 (did they end there?) and, in the envs that flag an end
  at L as a truncation, those that reached L (flagged: cut; unflagged: terminated on the
  step the limit cut). Terminations that the state brings about cluster at some lengths:
  the rate is the one just before L, and at L where the recording shows it. Each is an upper
  bound from its counts (`trajkit.lint.evidence.rate_bound`). Reported when h^n, the chance
  that n episodes which reached L all terminated on that very step, is at most
  `trajkit.lint.evidence.CHANCE`. The envs of a recording are copies of one env under one
  policy: where some flag their cuts at L, the others' unflagged ends at L are weighed
  against those.

Without a time limit, nothing here runs: an env whose episodes all end at one length cannot
be told from a time limit that is not recorded (set `max-episode-steps`).
"""

from __future__ import annotations

from trajkit.lint.evidence import rate_bound
from trajkit.lint.registry import Finding

__all__ = [
    "cut_rate",
    "window",
    "early_cut_finding",
    "over_limit_finding",
    "truncation_finding",
]


def window(limit: int) -> int:
    """TK101: how many steps before the limit L its rate of termination is counted over.

    The last quarter of the limit (one step at least): terminations that the state brings
    about cluster at some lengths, so the rate is the one just before L, where each episode
    that reached L gives a chance per step.

    Examples:
        >>> window(2), window(8), window(100)
        (1, 2, 25)
    """
    return max(1, limit // 4)


def cut_rate(terminations: int, steps: int, before: int, reached: int) -> float:
    """TK101's rate h at which an episode that reaches step L terminates on it.

    `terminations` of a recording's `steps` ended an episode untruncated (but at L); of
    `reached` chances to terminate at L-1 and, where an env flags cuts at L, at L itself,
    `before` were taken. The larger of the two bounds (`rate_bound`): n distinct episodes
    ending unflagged at L are reported when h^n is at most `CHANCE`.

    Examples:
        >>> cut_rate(0, 3000, 0, 3000) ** 2 < 1e-5, cut_rate(0, 3000, 0, 2)
        (True, 0.6)
    """
    return max(rate_bound(terminations, steps), rate_bound(before, reached))


def truncation_finding(
    count: int, files: int, limit: int, rate: float, path: str | None, first: tuple[int, int]
) -> Finding:
    """TK101's finding: `count` episodes cut at `limit`, unflagged, in `files` files.

    Examples:
        >>> truncation_finding(3, 2, 10, 0.05, "a.npz", (9, 0)).message  # doctest: +ELLIPSIS
        '3 distinct episodes in 2 files end at exactly the time limit of 10 steps with ...'
    """
    return Finding(
        "TK101",
        f"{count} distinct episodes in {files} file{'s' * (files != 1)} end at exactly the "
        f"time limit of {limit} steps with truncated = 0, in envs that flag no such end as a "
        f"truncation, where a step terminates an episode {rate:.2g} of the time: record them "
        "as truncations (truncated = 1 and their final_values)",
        path,
        first[1],
        first[0],
    )


def over_limit_finding(
    count: int, limit: int, path: str | None, first: tuple[int, int], begun: str
) -> Finding:
    """TK105's finding: `count` episodes pass `limit`, the first at `first` (step, env).

    Examples:
        >>> over_limit_finding(1, 10, "a.npz", (12, 1), "starts at row 2").format()
        ... # doctest: +NORMALIZE_WHITESPACE
        'a.npz: env 1, step 12: TK105 [error] 1 episode(s) run past the time limit of 10
         steps with no episode end or truncation (this one starts at row 2)'
    """
    return Finding(
        "TK105",
        f"{count} episode(s) run past the time limit of {limit} steps with no episode end "
        f"or truncation (this one {begun})",
        path,
        first[1],
        first[0],
    )


def early_cut_finding(
    count: int, limit: int, path: str | None, first: tuple[int, int], length: int
) -> Finding:
    """TK113's finding: `count` truncations before `limit`, the first after `length` steps.

    Examples:
        >>> print(early_cut_finding(2, 10, "a.npz", (3, 0), 4).message)  # doctest: +ELLIPSIS
        2 episode(s) are flagged as truncated before the time limit of 10 steps (this one ...
    """
    return Finding(
        "TK113",
        f"{count} episode(s) are flagged as truncated before the time limit of {limit} steps "
        f"(this one after {length}): terminations recorded as truncations, or a file's end "
        "recorded as a cut?",
        path,
        first[1],
        first[0],
    )
