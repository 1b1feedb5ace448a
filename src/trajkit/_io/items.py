"""What the search for rollout files yields and the engine carries: `Found` and `FileCheck`.

A leaf module (the standard library only), so that `discovery` (which finds files and
reaches verdicts while looking), `filecheck` (which checks a file) and the engine share these
names without importing one another or the file reader.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FileCheck", "Found"]


@dataclass(frozen=True)
class Found:
    """A file to check, with its size (to balance the chunks) when known."""

    path: str
    nbytes: int = 0


@dataclass(frozen=True)
class FileCheck:
    """The verdict on one rollout file: its path, the problems found (none if valid), its size.

    Attributes:
        path: The path or URL, as given or as found in a folder.
        problems: One sentence per problem; empty when the file is valid.
        nbytes: The size of the file in bytes (0 when it could not be read).

    Examples:
        >>> check = FileCheck("runs/a.npz", ("member rews.npy: CRC-32 mismatch",), 1024)
        >>> check.ok, check.to_json()["problems"]
        (False, ['member rews.npy: CRC-32 mismatch'])
    """

    path: str
    problems: tuple[str, ...] = ()
    nbytes: int = 0

    @property
    def ok(self) -> bool:
        """Whether the file is valid (no problems).

        Examples:
            >>> FileCheck("a.npz").ok
            True
        """
        return not self.problems

    def to_json(self) -> dict[str, object]:
        """The JSON object `trajkit validate --json` prints: `{path, ok, problems}`.

        Examples:
            >>> FileCheck("a.npz", nbytes=10).to_json()
            {'path': 'a.npz', 'ok': True, 'problems': []}
        """
        return {"path": self.path, "ok": self.ok, "problems": list(self.problems)}
