"""Errors that are part of trajkit's API. Every one subclasses `ValueError`."""

from __future__ import annotations

__all__ = ["RolloutFileError"]


class RolloutFileError(ValueError):
    """A recorded rollout file was refused.

    Raised by [`trajkit.load`][trajkit.load] and friends for every failure to read a file: a
    damaged or truncated zip, a missing or unexpected member, an object (pickled) member, a shape
    or dtype that disagrees with the metadata, a size over the limit, or data that fails
    `Rollout` validation. It never lets `KeyError`, `zipfile.BadZipFile`, `EOFError` or
    `MemoryError` escape.

    Attributes:
        path: The file that was refused.
        member: The member of the archive at fault, or `None` when the whole file is at fault.

    Examples:
        >>> err = RolloutFileError("truncated file", path="run.npz", member="rews.npy")
        >>> str(err)
        'run.npz: member rews.npy: truncated file'
        >>> isinstance(err, ValueError)
        True
        >>> import copy  # rebuilt by `__reduce__`, as when it crosses from a worker process
        >>> copy.copy(err).member
        'rews.npy'
    """

    def __init__(self, message: str, *, path: str, member: str | None = None) -> None:
        self.path = path
        self.member = member
        self.reason = message
        where = f"{path}: member {member}" if member is not None else path
        super().__init__(f"{where}: {message}")

    def __reduce__(self) -> tuple[object, ...]:
        # Rebuilt from its keyword arguments, so that it crosses process boundaries (a
        # process pool, Ray) intact; the default would call `RolloutFileError(str(self))`.
        return (_rebuild, (type(self), self.reason, self.path, self.member))


def _rebuild(
    cls: type[RolloutFileError], message: str, path: str, member: str | None
) -> RolloutFileError:
    return cls(message, path=path, member=member)
