"""The guards of model outputs: writes into a step's row and into the stacked arrays.

`rollout.model_outs[t]['actions'][b] = 3` and `model_outs[t]['critic'] += 1` go through the
row's guard to `ModelOutputs`' row write, checked as a step is checked (messages name the
step: `model_outs[1]['critic'][0] must be finite`). A write into a stacked array
(`model_outs.arrays['critic'][t, b] = v`) is tried on a copy of the whole array, which must
pass the constructor's check of the key and the rules across fields that read it (messages
name the position: `model_outs['critic'] must be finite, got inf at (t=2, b=1)`).
"""

from __future__ import annotations

import weakref
from typing import Any, Protocol

import numpy as np

from trajkit._base.types import AnyArray
from trajkit._models.arrays import as_numeric
from trajkit._models.checked import CheckedArray, Guard, positions_in
from trajkit._models.guards import applicable_rules
from trajkit._models.model_outputs_build import coerce_key
from trajkit._models.rules import FieldValues, lossless, output_name

__all__ = ["OutputStore", "RowGuard", "StorageGuard"]


class OutputStore(Protocol):
    """What the guards of model outputs write into (`ModelOutputs`)."""

    _arrays: dict[str, AnyArray]
    _unset: dict[str, AnyArray]

    def _write(self, key: str, t: int, index: Any, value: Any) -> None:
        """Check `value` for step t's row of `key` at `index`, then store it."""

    def _rule_values(self) -> FieldValues:
        """The values the rules across fields read."""


class RowGuard(Guard):
    """The guard of one timestep's row of one output: writes go through the row write.

    Args:
        outs: The model outputs.
        key: The output's key.
        t: The timestep.
        row: The row (a view of the storage).
    """

    __slots__ = ("key", "outs", "t")

    def __init__(self, outs: OutputStore, key: str, t: int, row: AnyArray) -> None:
        super().__init__(row, f"model_outs[{t}][{key!r}]")
        self.outs, self.key, self.t = outs, key, t

    def write(self, target: CheckedArray, index: Any, value: Any) -> None:
        """Write `value` at `target[index]` of the row (or of a view of it), checked."""
        row = self.owner
        if target.base is row:
            self.outs._write(self.key, self.t, index, value)
            return
        self.writable(target)  # a view of another dtype, or read-only memory, is refused
        ids = positions_in(row, target, index)  # a view of the row: where it writes
        if ids is None:
            raise ValueError(
                f"{self.name}: this view cannot be written; write {self.name}[index] instead"
            )
        array = np.broadcast_to(np.asarray(value), ids.shape).reshape(-1)
        if not row.ndim:
            self.outs._write(self.key, self.t, ..., array.reshape(()))
        elif ids.size == 1:  # one element: named by its index, `[1][2]`
            where = tuple(int(i) for i in np.unravel_index(int(ids.reshape(-1)[0]), row.shape))
            self.outs._write(self.key, self.t, where, array.reshape(()))
        else:
            where_all = np.unravel_index(ids.reshape(-1), row.shape)
            self.outs._write(self.key, self.t, where_all, array)


class StorageGuard(Guard):
    """The guard of one key's stacked array, as `ModelOutputs.arrays` hands it out.

    A write is tried on a copy of the whole array, which must then pass the constructor's
    check of the key and the rules across fields that read it; only then is it stored. That
    costs a copy of the array per write: per-step writes (`outs[t][key] = ...`) are the cheap
    way.

    The guard holds the model outputs weakly: they cache the arrays they hand out, so a
    strong reference would make a cycle, and a rollout loaded from a memory-mapped file would
    stay mapped until the cycle collector ran. Once the model outputs are gone (an array kept
    after its rollout), a write is checked against the key's own rule alone: no other field
    is left to contradict.

    Args:
        outs: The model outputs.
        key: The output's key.
        storage: Its stacked array (the first T+1 rows of the storage).
    """

    __slots__ = ("_outs", "key")

    def __init__(self, outs: OutputStore, key: str, storage: AnyArray) -> None:
        super().__init__(storage, output_name(key))
        self._outs, self.key = weakref.ref(outs), key

    def write(self, target: CheckedArray, index: Any, value: Any) -> None:
        """Write `value` at `target[index]`, checked as the whole array it makes."""
        key, storage, name = self.key, self.owner, self.name
        handle = self.writable(target)
        array = as_numeric(value, name, copy=False, min_ndim=0)
        ids = positions_in(storage, target, index)
        if ids is None:
            raise ValueError(
                f"model_outs.arrays[{key!r}]: this view cannot be written; write "
                f"model_outs[t][{key!r}] instead"
            )
        try:
            values = np.broadcast_to(array, ids.shape).reshape(-1)
        except ValueError:
            raise ValueError(
                f"{name} write has shape {array.shape}, expected {ids.shape}"
            ) from None
        flat_ids = ids.reshape(-1)
        scratch = storage.astype(np.result_type(storage.dtype, array.dtype), order="C")
        scratch.reshape(-1)[flat_ids] = values
        outs = self._outs()
        actor = None if outs is None else outs._arrays.get("actor")
        with_actor = None if actor is None or key != "actions" else actor[: len(storage)]
        stored = lossless(coerce_key(key, scratch, with_actor, name), storage.dtype, name)
        rules, current = applicable_rules(name, None if outs is None else outs._rule_values)
        for rule in rules:
            rule.check({**(current or {}), name: stored})
        handle[index] = stored.reshape(-1)[ids]
        mask = None if outs is None else outs._unset.get(key)
        if mask is not None and mask.shape == storage.shape:  # (rows of None: [T+1, B])
            mask.reshape(-1)[flat_ids] = False
