"""What the checks across a rollout's fields read of it, and the types of its `infos`.

A leaf of the model layer: `rollout_checks` reads a rollout through `RolloutLike`, so that it
needs no import of `rollout` (which imports it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeVar

from trajkit._base.types import ArrayTree, Float32Array
from trajkit._models.model_outputs import ModelOutputs

__all__ = ["InfoRow", "InfoRows", "InfoTable", "RolloutLike"]

InfoRows = list[list[dict[str, Any]]]
"""A rollout's `infos`: T rows of B dicts (an `InfoTable` of `InfoRow`s)."""

_T = TypeVar("_T")


class _Fixed(list[_T]):
    """A list of fixed length: entries may be replaced (checked), not added or removed."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(
            "a rollout's infos have T rows of B entries, fixed: replace an entry "
            "(rollout.infos[t][b] = {...}), change a dict in place, or pass new rows to "
            "rollout.replace(infos=rows)"
        )

    if not TYPE_CHECKING:  # (typed as list's own)
        __delitem__ = __iadd__ = __imul__ = _refuse
        append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def _index(self, index: Any) -> int:
        if isinstance(index, slice):
            self._refuse()
        return int(range(len(self))[index])  # (IndexError as a list raises it)

    def copy(self) -> list[_T]:
        """A plain, mutable copy of the list."""
        return list(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (list(self),)


class InfoRow(_Fixed[dict[str, Any]]):
    """Row t of a rollout's `infos`: B dicts; an entry replaced must be a mapping.

    Examples:
        >>> row = InfoRow([{}, {}])
        >>> row[1] = {"lives": 3}
        >>> row[0] = 5
        Traceback (most recent call last):
        ...
        ValueError: infos[t][0] must be a mapping, got int
        >>> row.append({})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        TypeError: a rollout's infos have T rows of B entries, fixed: ...
    """

    __slots__ = ()

    def __setitem__(self, index: Any, value: Any) -> None:
        b = self._index(index)
        if not isinstance(value, Mapping):
            raise ValueError(f"infos[t][{b}] must be a mapping, got {type(value).__name__}")
        list.__setitem__(self, b, value if isinstance(value, dict) else dict(value))


class InfoTable(_Fixed[list[dict[str, Any]]]):
    """A rollout's `infos`: T `InfoRow`s; a row replaced must be B mappings.

    Examples:
        >>> infos = InfoTable([InfoRow([{}, {}])])
        >>> infos[0] = [{"a": 1}, {}]
        >>> type(infos[0]).__name__, infos == [[{"a": 1}, {}]]
        ('InfoRow', True)
        >>> infos[0] = [{}]
        Traceback (most recent call last):
        ...
        ValueError: infos[0] has 1 entries, expected B=2
    """

    __slots__ = ()

    def __setitem__(self, index: Any, value: Any) -> None:
        t = self._index(index)
        if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
            raise ValueError(f"infos[{t}] must be a list of B mappings, got {type(value).__name__}")
        if len(value) != len(self[t]):
            raise ValueError(f"infos[{t}] has {len(value)} entries, expected B={len(self[t])}")
        row = InfoRow({} for _ in value)
        for b, item in enumerate(value):
            row[b] = item
        list.__setitem__(self, t, row)


class RolloutLike(Protocol):
    """What the checks across fields read of a rollout (a `trajkit.Rollout`)."""

    __dict__: dict[str, Any]

    @property
    def states(self) -> ArrayTree: ...
    @property
    def obses(self) -> ArrayTree: ...
    @property
    def rews(self) -> Float32Array: ...
    @property
    def dones(self) -> Float32Array: ...
    @property
    def model_outs(self) -> ModelOutputs: ...
    @property
    def truncated(self) -> Float32Array | None: ...
    @property
    def final_values(self) -> Float32Array | None: ...
    @property
    def final_obses(self) -> ArrayTree | None: ...
