"""Model outputs stored as one stacked array per key, seen as obs-tower2's list of T+1 dicts."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar, SupportsIndex, overload

import numpy as np

from trajkit._base.types import AnyArray
from trajkit._models.arrays import arrays_equal, as_numeric, first_true, kind_name
from trajkit._models.checked import CheckedArray, checked, positions_in
from trajkit._models.rules import (
    FLOAT32_OUTPUTS,
    OUTPUT_RULES,
    check_action_range,
    conform,
    conform_into,
    lossless,
    output_rule,
)

__all__ = ["ModelOutputs", "StepOutputs", "coerce_model_outs", "discrete_actions"]

_PLACEHOLDER_DTYPES = {"actions": np.dtype(np.int32)}  # other keys' placeholders are float32


def _is_discrete(actions: AnyArray, actor: AnyArray | None, lead: int = 2) -> bool:
    return actor is not None and actions.ndim == lead and actor.ndim == lead + 1


def discrete_actions(arrays: Mapping[str, AnyArray]) -> bool:
    """Whether `arrays` hold Discrete actions: `actions` `[T+1, B]`, `actor` `[T+1, B, A]`.

    Only then are the actions indices into the logits, checked to lie in `[0, A)`.

    Examples:
        >>> import numpy as np
        >>> discrete_actions({"actions": np.zeros((3, 2)), "actor": np.zeros((3, 2, 4))})
        True
        >>> discrete_actions({"actions": np.zeros((3, 2, 6)), "actor": np.zeros((3, 2, 12))})
        False
    """
    return "actions" in arrays and _is_discrete(arrays["actions"], arrays.get("actor"))


def _coerce_key(
    key: str, array: AnyArray, actor: AnyArray | None, name: str, lead: int = 2, copy: bool = False
) -> AnyArray:
    """Convert and check one model output by its rule (`lead` leading dims: 2 stacked, 1 a step).

    `critic`, `log_probs` and `actor` become finite float32; integer and bool `actions` int32,
    float ones finite float32 (Box) unless they sit next to `actor` logits of one more
    dimension (Discrete actions written as floats, as obs-tower2 accepted: integer-valued, int32);
    other keys are kept as given (any real dtype). A value of another key with one dimension
    fewer than `lead` is a per-step scalar (`*scalar`).
    """
    axes = ("tb"[2 - lead :] if lead <= 2 else "tb") + ("a" if key == "actor" else "")
    rule = output_rule(key, array.ndim + 2 - lead)
    discrete = key == "actions" and _is_discrete(array, actor, lead)
    return conform(rule, array, name, copy=copy, axes=axes, min_ndim=0, discrete=discrete)


def _min_row_ndim(key: str) -> int:
    """The fewest dimensions of one step's row of `key`: 0 for a per-step scalar (`*scalar`)."""
    return 1 if key in OUTPUT_RULES else 0


def _is_placeholder(value: Any) -> bool:
    """Whether `value` is a row of `None`s: obs-tower2's way to allocate outputs filled later."""
    if isinstance(value, np.ndarray):
        return value.dtype.kind == "O" and value.size > 0 and all(v is None for v in value.flat)
    return isinstance(value, list | tuple) and len(value) > 0 and all(v is None for v in value)


class _RowGuard:
    """The guard of one timestep's row of one output: writes go through `ModelOutputs._write`.

    `rollout.model_outs[t]['actions'][b] = 3` and `model_outs[t]['critic'] += 1` are checked
    as construction would check them; so are writes through views of the row.
    """

    __slots__ = ("key", "outs", "row", "t", "view")

    def __init__(self, outs: ModelOutputs, key: str, t: int, row: AnyArray) -> None:
        self.outs, self.key, self.t, self.row = outs, key, t, row
        self.view: CheckedArray | None = None

    def write(self, target: CheckedArray, index: Any, value: Any) -> None:
        if target is self.view:
            self.outs._write(self.key, self.t, index, value)
            return
        ids = positions_in(self.row, target, index)  # a view of the row: where it writes
        if ids is None:
            raise ValueError(
                f"model_outs[{self.t}][{self.key!r}]: this view cannot be written; write "
                f"model_outs[{self.t}][{self.key!r}][index] instead"
            )
        array = np.broadcast_to(np.asarray(value), ids.shape).reshape(-1)
        if not self.row.ndim:
            self.outs._write(self.key, self.t, ..., array.reshape(()))
        elif ids.size == 1:  # one element: named by its index, `[1][2]`
            where = tuple(int(i) for i in np.unravel_index(int(ids.reshape(-1)[0]), self.row.shape))
            self.outs._write(self.key, self.t, where, array.reshape(()))
        else:
            where_all = np.unravel_index(ids.reshape(-1), self.row.shape)
            self.outs._write(self.key, self.t, where_all, array)


class _StorageGuard:
    """The guard of one key's stacked array, as `ModelOutputs.arrays` hands it out.

    A write is tried on a copy of the whole array, which must then pass the constructor's
    check of the key (and the action range); only then is it stored. That costs a copy of
    the array per write: per-step writes (`outs[t][key] = ...`) are the cheap way.
    """

    __slots__ = ("key", "outs", "storage")

    def __init__(self, outs: ModelOutputs, key: str, storage: AnyArray) -> None:
        self.outs, self.key, self.storage = outs, key, storage

    def write(self, target: CheckedArray, index: Any, value: Any) -> None:
        key, storage, outs = self.key, self.storage, self.outs
        name = f"model_outs[{key!r}]"
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
        actor = outs._arrays.get("actor")
        rows = len(storage)
        with_actor = None if actor is None or key != "actions" else actor[:rows]
        converted = _coerce_key(key, scratch, with_actor, name)
        stored = lossless(converted, storage.dtype, name)
        if key == "actions" and with_actor is not None and _is_discrete(stored, with_actor):
            check_action_range(stored, with_actor.shape[-1], name)
        np.ndarray.__setitem__(target, index, stored.reshape(-1)[ids])
        mask = outs._unset.get(key)
        if (
            mask is not None
            and mask.shape == storage.shape[: mask.ndim]
            and mask.size == storage.size
        ):
            mask.reshape(-1)[flat_ids] = False


class StepOutputs(Mapping[str, AnyArray]):
    """The model outputs of one timestep: `key -> [B, ...]` array, as in obs-tower2's dicts.

    Values are views into the stacked storage, so reading is free. Writes are checked as
    construction checks them, whether they replace a key's whole row (`step['critic'] = ...`)
    or some of its elements (`step['actions'][b] = 3`); a refused write changes nothing.

    Examples:
        >>> import numpy as np
        >>> outs = ModelOutputs({"critic": np.zeros((3, 2), np.float32)})
        >>> step = outs[1]
        >>> step["critic"]
        array([0., 0.], dtype=float32)
        >>> step["critic"] = [1.0, 2.0]
        >>> outs.arrays["critic"][1]
        array([1., 2.], dtype=float32)
        >>> step["critic"][0] = float("nan")
        Traceback (most recent call last):
        ...
        ValueError: model_outs[1]['critic'][0] must be finite, got nan
    """

    __slots__ = ("_outs", "_t")

    def __init__(self, outs: ModelOutputs, t: int) -> None:
        self._outs = outs
        self._t = t

    def __getitem__(self, key: str) -> AnyArray:
        row = _row(self._outs._arrays[key], self._t)
        guard = _RowGuard(self._outs, key, self._t, row)
        guard.view = checked(row, guard)
        return guard.view

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in self._outs._arrays:
            raise KeyError(
                f"model_outs has no key {key!r} (keys: {sorted(self._outs._arrays)}); "
                "use Rollout.replace(model_outs=...) to add keys"
            )
        self._outs._write(key, self._t, ..., value)

    def __iter__(self) -> Iterator[str]:
        return iter(self._outs._arrays)

    def __len__(self) -> int:
        return len(self._outs._arrays)

    def __repr__(self) -> str:
        return f"StepOutputs(t={self._t}, keys={list(self._outs._arrays)})"


class ModelOutputs(Sequence[StepOutputs]):
    """Model outputs of a rollout: T+1 timesteps, stored as one `[T+1, B, ...]` array per key.

    It behaves as obs-tower2's list of T+1 dicts (`outs[t][key]`, `len(outs)`, iteration,
    `append`), while [`arrays`][trajkit.ModelOutputs.arrays] gives the stacked arrays without
    restacking. Every write is validated as construction is: a whole step (`outs[t] = {...}`),
    one key's row (`outs[t][key] = ...`) or some elements (`outs[t][key][b] = ...`).

    Model outputs can also be built step by step, as obs-tower2's `run_for_rollout` does:
    assign an empty list to `Rollout.model_outs`, then `append` T+1 steps. Each appended step
    is checked at once against B and the keys and dtype kinds of the earlier steps, and a
    rollout refuses to compute anything from its outputs until all T+1 steps are there.
    Rows of `None` (obs-tower2's recordings allocate `{'actions': [None] * B}`) are accepted as
    entries to fill in later, element by element; they too must be filled before use.

    Args:
        arrays: Key (a str) to stacked `[T+1, B, ...]` array, validated as `Rollout` validates
            a mapping of model outputs: known keys are converted (`critic`, `log_probs`,
            `actor` to finite float32; `actions` to int32 or, for Box actions, finite float32).
            Arrays of a suitable dtype are used as given, not copied.
        num_rows: The number of timesteps (T+1); inferred from the arrays when omitted.

    Raises:
        ValueError: If a key is not a str or an array is not a real-valued array of a suitable
            dtype, naming the key.

    Examples:
        >>> import numpy as np
        >>> outs = ModelOutputs({"actions": np.array([[0, 1], [1, 1], [0, 0]])})
        >>> len(outs), outs.keys()
        (3, ('actions',))
        >>> outs[2]["actions"]
        array([0, 0], dtype=int32)
        >>> outs.arrays["actions"].shape
        (3, 2)
        >>> built = ModelOutputs([])
        >>> built.append({"critic": np.ones(2)})
        >>> len(built), built[0]["critic"].dtype
        (1, dtype('float32'))
    """

    __slots__ = ("_arrays", "_batch", "_building", "_expected", "_num_rows", "_unset", "_views")

    def __init__(
        self,
        arrays: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        num_rows: int | None = None,
    ) -> None:
        outs = coerce_model_outs(arrays, copy=False)
        if num_rows is not None and not outs._arrays:
            outs = ModelOutputs._of({}, num_rows)
        self._setup(outs._arrays, outs._num_rows, building=outs._building, unset=outs._unset)

    def _setup(
        self,
        arrays: dict[str, AnyArray],
        num_rows: int | None,
        *,
        building: bool = False,
        unset: dict[str, AnyArray] | None = None,
        batch: int | None = None,
    ) -> None:
        self._arrays = arrays
        self._views: tuple[dict[str, AnyArray], int, Mapping[str, AnyArray]] | None = None
        if num_rows is None:
            num_rows = len(next(iter(arrays.values()))) if arrays else 0
        self._num_rows = num_rows
        self._building = building
        self._expected: int | None = None if building else num_rows
        self._batch = batch
        self._unset = unset or {}

    @classmethod
    def _of(
        cls,
        arrays: dict[str, AnyArray],
        num_rows: int | None = None,
        *,
        building: bool = False,
        unset: dict[str, AnyArray] | None = None,
        batch: int | None = None,
    ) -> ModelOutputs:
        """Wrap arrays that are already checked (no validation); `batch`: a rollout's B."""
        outs = cls.__new__(cls)
        outs._setup(arrays, num_rows, building=building, unset=unset, batch=batch)
        return outs

    # ------------------------------------------------------------------ reading

    @property
    def arrays(self) -> Mapping[str, AnyArray]:
        """Read-only mapping of key to stacked `[T+1, B, ...]` array (views of the storage).

        While outputs are being appended, the arrays hold the steps appended so far. The
        arrays are [`CheckedArray`][trajkit.CheckedArray]s: a write into one
        (`outs.arrays['critic'][t, b] = v`) is checked as construction checks the whole
        array, and refused with the constructor's message.

        Examples:
            >>> import numpy as np
            >>> outs = ModelOutputs({"critic": np.zeros((3, 2), np.float32)})
            >>> outs.arrays["critic"].shape
            (3, 2)
            >>> outs.arrays["critic"] is outs.arrays["critic"]  # no restacking
            True
            >>> outs.arrays["critic"][2, 1] = np.inf
            Traceback (most recent call last):
            ...
            ValueError: model_outs['critic'] must be finite, got inf at (t=2, b=1)
        """
        cached = self._views
        if cached is not None and cached[0] is self._arrays and cached[1] == self._num_rows:
            return cached[2]
        views = MappingProxyType(
            {k: checked(a, _StorageGuard(self, k, a)) for k, a in self._plain().items()}
        )
        self._views = (self._arrays, self._num_rows, views)
        return views

    def _plain(self) -> Mapping[str, AnyArray]:
        """The stacked arrays as plain arrays, for trajkit's own reading (no views made)."""
        n = self._num_rows
        if any(len(a) != n for a in self._arrays.values()):
            return {k: a[:n] for k, a in self._arrays.items()}
        return self._arrays

    def keys(self) -> tuple[str, ...]:
        """The output keys, in the order given.

        Examples:
            >>> import numpy as np
            >>> ModelOutputs({"critic": np.zeros((3, 2)), "actions": np.zeros((3, 2))}).keys()
            ('critic', 'actions')
        """
        return tuple(self._arrays)

    def incomplete(self) -> str | None:
        """Why these outputs cannot be used yet, or `None` when they are complete.

        Outputs are incomplete while fewer than the rollout's T+1 steps have been appended,
        or while entries allocated as `None` have not been filled in.

        Returns:
            A sentence saying what is missing, or `None`.

        Examples:
            >>> import numpy as np
            >>> outs = ModelOutputs({"actions": np.zeros((2, 3), np.int32)})
            >>> outs.incomplete() is None
            True
            >>> outs = ModelOutputs([{"actions": [None] * 3}] * 2)
            >>> print(outs.incomplete())  # doctest: +NORMALIZE_WHITESPACE
            model_outs['actions'] has 6 unset (None) entries, the first at
            model_outs[0]['actions'][0]: fill them in
        """
        if self._building:
            want = "T+1" if self._expected is None else f"T+1 = {self._expected}"
            return (
                f"model_outs has {self._num_rows} of {want} steps: append the remaining "
                "steps with model_outs.append({key: [B, ...] array, ...})"
            )
        for key, mask in self._unset.items():
            count = int(mask.sum())
            if count:
                t, b = first_true(mask)
                return (
                    f"model_outs[{key!r}] has {count} unset (None) entries, the first at "
                    f"model_outs[{t}][{key!r}][{b}]: fill them in"
                )
        return None

    def __len__(self) -> int:
        return self._num_rows

    @overload
    def __getitem__(self, index: SupportsIndex) -> StepOutputs: ...

    @overload
    def __getitem__(self, index: slice) -> list[StepOutputs]: ...

    def __getitem__(self, index: SupportsIndex | slice) -> StepOutputs | list[StepOutputs]:
        if isinstance(index, str):
            raise TypeError(_by_key_hint(index, self.keys()))
        if isinstance(index, slice):
            return [StepOutputs(self, t) for t in range(self._num_rows)[index]]
        t = range(self._num_rows)[index]  # IndexError for out-of-range, handles negatives
        return StepOutputs(self, t)

    # ------------------------------------------------------------------ writing

    def __setitem__(self, index: SupportsIndex, step: Mapping[str, Any]) -> None:
        """Replace timestep `index`: `step` must have exactly the existing keys."""
        t = range(self._num_rows)[index]
        if not isinstance(step, Mapping):
            raise ValueError(
                f"model_outs[{t}] must be a mapping of key -> array, got {type(step).__name__}"
            )
        if set(step) != set(self._arrays):
            raise ValueError(
                f"model_outs[{t}] must have the keys {sorted(self._arrays)}, got "
                f"{sorted(map(str, step))}"
            )
        rows = self._check_step(step, t)
        for key, row in rows.items():
            self._arrays[key][t] = row
            if key in self._unset:
                self._unset[key][t] = False

    def append(self, step: Mapping[str, Any]) -> None:
        """Append the outputs of the next timestep, checking them at once.

        Args:
            step: Key to `[B, ...]` array. The first step sets the keys; each later step must
                have the same keys, shapes and dtype kinds.

        Raises:
            ValueError: If the step disagrees with B, the earlier steps' keys, shapes or
                dtype kinds, fails a value check, or all T+1 steps are already there.

        Examples:
            >>> import numpy as np
            >>> outs = ModelOutputs([])
            >>> outs.append({"actions": np.array([0, 2])})
            >>> outs.append({"actions": np.array([0.5, 1.0])})
            Traceback (most recent call last):
            ...
            ValueError: model_outs[1]['actions'] must be integer-valued, got 0.5 at (b=0)
            >>> outs.append({"actions": np.array([1, 2, 3])})  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            ValueError: model_outs[1]['actions'] has shape (3,), expected (2,) like ... (B=2)
        """
        t = self._num_rows
        if not self._building:
            raise ValueError(
                f"model_outs already has all T+1 = {t} steps; to rebuild them, assign an "
                "empty list first (rollout.model_outs = []) and append T+1 steps"
            )
        if not isinstance(step, Mapping):
            raise ValueError(
                f"model_outs[{t}] must be a mapping of key -> array, got {type(step).__name__}"
            )
        rows = self._first_step(step) if t == 0 else self._next_step(step, t)
        for key, row in rows.items():
            self._arrays[key][t] = row
        self._num_rows = t + 1
        if self._expected is not None and self._num_rows == self._expected:
            self._building = False

    def _first_step(self, step: Mapping[Any, Any]) -> dict[str, AnyArray]:
        """Step 0's rows, checked against B; it sets the keys and allocates the storage."""
        for key in step:
            if not isinstance(key, str):
                raise ValueError(f"model_outs keys must be strings, got {key!r}")
        rows = {key: self._coerce_row(key, step[key], 0, step) for key in step}
        if self._batch is not None:
            for key, row in rows.items():
                if row.ndim == 0 and key not in OUTPUT_RULES:
                    continue  # one value per step (`*scalar`)
                if row.ndim == 0 or row.shape[0] != self._batch:
                    raise ValueError(
                        f"model_outs[0][{key!r}] has shape {row.shape}, expected "
                        f"({self._batch}, ...) (B={self._batch})"
                    )
        capacity = self._expected or 8
        self._arrays = {
            key: np.empty((capacity, *row.shape), row.dtype) for key, row in rows.items()
        }
        return rows

    def _next_step(self, step: Mapping[Any, Any], t: int) -> dict[str, AnyArray]:
        """Step t's rows, checked against step 0's; the storage doubles when it is full."""
        if set(step) != set(self._arrays):
            raise ValueError(
                f"model_outs[{t}] has keys {sorted(map(str, step))}, expected "
                f"{sorted(self._arrays)} (the keys of model_outs[0])"
            )
        rows = self._check_step(step, t)
        if self._expected is None and t == len(next(iter(self._arrays.values()), [])):
            self._arrays = {
                key: np.concatenate([a, np.empty_like(a)]) for key, a in self._arrays.items()
            }
        return rows

    def _coerce_row(self, key: str, value: Any, t: int, step: Mapping[str, Any]) -> AnyArray:
        name = f"model_outs[{t}][{key!r}]"
        row = as_numeric(value, name, copy=False, min_ndim=_min_row_ndim(key))
        actor = step.get("actor") if key == "actions" else None
        actor_row = None if actor is None else np.asarray(actor)
        row = _coerce_key(key, row, actor_row, name, lead=1)
        if key == "actions" and actor_row is not None and _is_discrete(row, actor_row, 1):
            check_action_range(row, actor_row.shape[-1], name, "b")
        return row

    def _check_step(self, step: Mapping[str, Any], t: int) -> dict[str, AnyArray]:
        """Check one step against the stored keys' shapes and dtype kinds; return its rows."""
        rows: dict[str, AnyArray] = {}
        for key, storage in self._arrays.items():
            name = f"model_outs[{t}][{key!r}]"
            value = step[key]
            if key in self._unset and _is_placeholder(value):
                raise ValueError(f"{name} must be an array of values, got a row of None")
            row = as_numeric(value, name, copy=False, min_ndim=_min_row_ndim(key))
            if row.shape != storage.shape[1:]:
                raise ValueError(
                    f"{name} has shape {row.shape}, expected {storage.shape[1:]} like "
                    f"model_outs[0][{key!r}]"
                    + (f" (B={storage.shape[1]})" if storage.ndim > 1 else "")
                )
            if row.dtype.kind != storage.dtype.kind and not (
                key in FLOAT32_OUTPUTS
                or (key == "actions" and storage.dtype.kind == "i" and row.dtype.kind in "biuf")
            ):
                raise ValueError(
                    f"{name} has dtype {row.dtype} ({kind_name(row.dtype)}), expected the same "
                    f"kind as model_outs[0][{key!r}] ({storage.dtype}, "
                    f"{kind_name(storage.dtype)})"
                )
            rows[key] = row
        for key, row in rows.items():
            storage = self._arrays[key]
            rule = output_rule(key, storage.ndim)
            name = f"model_outs[{t}][{key!r}]"
            rows[key] = conform_into(rule, storage.dtype, row, name, axes="b" if row.ndim else "")
        if (
            "actions" in rows
            and "actor" in rows
            and _is_discrete(rows["actions"], rows["actor"], 1)
        ):
            num_actions = rows["actor"].shape[-1]
            check_action_range(rows["actions"], num_actions, f"model_outs[{t}]['actions']", "b")
        return rows

    def _write(self, key: str, t: int, index: Any, value: Any) -> None:
        """Validate `value` for `outs[t][key][index]`, then store it (nothing on failure)."""
        storage = self._arrays[key]
        row = _row(storage, t)
        rule = output_rule(key, storage.ndim)
        if (  # the rule's fast test, for the usual write of a whole row
            index is Ellipsis
            and key != "actions"
            and key not in self._unset
            and np.shape(value) == row.shape
            and rule.passes(value, storage.dtype)
        ):
            row[...] = value
            return
        target = row[index]
        whole = index is Ellipsis or (isinstance(index, slice) and index == slice(None))
        suffix = "" if whole else _fmt_sub(index)
        name = f"model_outs[{t}][{key!r}]{suffix}"
        array = as_numeric(value, name, copy=False, min_ndim=0)
        try:
            array = np.broadcast_to(array, np.shape(target))
        except ValueError:
            raise ValueError(
                f"{name} has shape {array.shape}, expected {np.shape(target)}"
                + (f" (B={storage.shape[1]})" if storage.ndim > 1 and not suffix else "")
            ) from None
        array = conform_into(rule, storage.dtype, array, name, axes="" if suffix else "b")
        actor = self._arrays.get("actor")
        if key == "actions" and actor is not None and storage.ndim == 2 and actor.ndim == 3:
            check_action_range(array, actor.shape[-1], name, "" if suffix else "b")
        row[index] = array
        mask = self._unset.get(key)
        if mask is not None:
            mask[t][index[0] if isinstance(index, tuple) else index] = False

    # ------------------------------------------------------------------ plumbing

    def _clone(self, copy: bool) -> ModelOutputs:
        """A new `ModelOutputs` with the same state (arrays copied when `copy`)."""
        if not copy:
            return self
        n = self._num_rows
        arrays = {k: a.copy() for k, a in self._arrays.items()}
        unset = {k: m.copy() for k, m in self._unset.items()}
        outs = ModelOutputs._of(arrays, n, building=self._building, unset=unset)
        outs._expected, outs._batch = self._expected, self._batch
        return outs

    def _attach(self, num_rows: int, batch: int) -> None:
        """Bind to a rollout's T+1 and B (called by `Rollout` validation)."""
        if self._building:
            n = self._num_rows
            if n > num_rows:
                raise ValueError(f"model_outs has {n} steps, expected at most T+1 = {num_rows}")
            for key, a in self._arrays.items():
                if n and (a.ndim < 2 or a.shape[1] != batch):
                    raise ValueError(
                        f"model_outs[{key!r}] has shape {a[:n].shape}, expected "
                        f"({n}, {batch}, ...) (B={batch})"
                    )
            if n and len(next(iter(self._arrays.values()))) != num_rows:
                self._arrays = {
                    k: np.concatenate([a[:n], np.empty((num_rows - n, *a.shape[1:]), a.dtype)])
                    for k, a in self._arrays.items()
                }
            if n == num_rows:
                self._building = False
        self._expected, self._batch = num_rows, batch

    @property
    def building(self) -> bool:
        """Whether steps are still being appended (see [`append`][trajkit.ModelOutputs.append]).

        Examples:
            >>> ModelOutputs([]).building
            True
        """
        return self._building

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ModelOutputs):
            return NotImplemented
        mine, theirs = self._plain(), other._plain()
        return (
            len(self) == len(other)
            and self._building == other._building
            and self.keys() == other.keys()
            and all(arrays_equal(a, theirs[k]) for k, a in mine.items())
            and self.incomplete() == other.incomplete()
        )

    __hash__: ClassVar[None] = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        parts = [f"{k}={a.dtype}{list(a.shape)}" for k, a in self._plain().items()]
        state = f", {self._num_rows} steps appended" if self._building else ""
        return f"ModelOutputs({', '.join(parts)}{state})"


def _by_key_hint(key: str, keys: Sequence[str]) -> str:
    """What to write instead of `model_outs[key]`: the outputs are indexed by step first."""
    known = f"keys: {list(keys)}" if key in keys else f"no key {key!r}; keys: {list(keys)}"
    return (
        f"model_outs[{key!r}]: model_outs is a sequence of T+1 steps, indexed by step ({known}); "
        f"use model_outs[t][{key!r}] for step t's [B, ...] row, or "
        f"model_outs.arrays[{key!r}] for the stacked [T+1, B, ...] array"
    )


def _row(storage: AnyArray, t: int) -> AnyArray:
    """Step `t` of a stacked output as a writable view: 0-d for a per-step scalar `[T+1]`."""
    return storage[t] if storage.ndim > 1 else storage[t : t + 1].reshape(())


def _fmt_sub(index: Any) -> str:
    parts = index if isinstance(index, tuple) else (index,)
    return "".join(f"[{p}]" if isinstance(p, int | np.integer) else "[...]" for p in parts)


def _stack_steps(steps: Sequence[Any]) -> tuple[dict[str, AnyArray], dict[str, AnyArray]]:
    """Stack obs-tower2's list of T+1 dicts into one array per key, checking every step.

    Returns the arrays and, for keys with rows of `None`, masks of the entries still unset.
    """
    columns: dict[str, list[AnyArray | None]] = {}  # in the order of model_outs[0]'s keys
    templates: dict[str, AnyArray] = {}  # per key, the first row (a zero row for `None`)
    for t, step in enumerate(steps):
        if t == 0:
            columns = {key: [] for key in _first_keys(step)}
        else:
            _check_keys(step, t, list(columns))
        for key, column in columns.items():
            column.append(_step_row(step[key], t, key, templates, column))
    return _stacked(columns, templates)


def _first_keys(step: Any) -> list[str]:
    """The keys of `model_outs[0]`, which every later step must have."""
    _check_mapping(step, 0)
    keys = list(step)
    for key in keys:
        if not isinstance(key, str):
            raise ValueError(f"model_outs keys must be strings, got {key!r}")
    return keys


def _check_keys(step: Any, t: int, first_keys: list[str]) -> None:
    _check_mapping(step, t)
    keys = list(step)
    if set(keys) != set(first_keys):
        raise ValueError(
            f"model_outs[{t}] has keys {sorted(map(str, keys))}, expected "
            f"{sorted(first_keys)} (the keys of model_outs[0])"
        )


def _check_mapping(step: Any, t: int) -> None:
    if not isinstance(step, Mapping):
        raise ValueError(
            f"model_outs[{t}] must be a mapping of key -> array, got {type(step).__name__}"
        )


def _step_row(
    value: Any,
    t: int,
    key: str,
    templates: dict[str, AnyArray],
    column: Sequence[AnyArray | None],
) -> AnyArray | None:
    """Step t's row of `key` (`None` for a placeholder), checked against the template.

    The first row of a key becomes its template; later rows must have its shape and dtype
    kind (unless every row so far was a placeholder).
    """
    if _is_placeholder(value):
        if key not in templates:
            dtype = _PLACEHOLDER_DTYPES.get(key, np.dtype(np.float32))
            templates[key] = np.zeros(len(value), dtype)
        return None
    array = as_numeric(value, f"model_outs[{t}][{key!r}]", copy=False, min_ndim=_min_row_ndim(key))
    ref = templates.get(key)
    if ref is None:
        templates[key] = array
        return array
    if array.shape != ref.shape:
        raise ValueError(
            f"model_outs[{t}][{key!r}] has shape {array.shape}, expected "
            f"{ref.shape} like model_outs[0][{key!r}]"
        )
    if array.dtype.kind != ref.dtype.kind and not _placeholder_only(column):
        raise ValueError(
            f"model_outs[{t}][{key!r}] has dtype {array.dtype} "
            f"({kind_name(array.dtype)}), expected the same kind as "
            f"model_outs[0][{key!r}] ({ref.dtype}, {kind_name(ref.dtype)})"
        )
    return array


def _stacked(
    columns: dict[str, list[AnyArray | None]], templates: dict[str, AnyArray]
) -> tuple[dict[str, AnyArray], dict[str, AnyArray]]:
    """One array per key, with `None` rows as zeros and masks of where they were."""
    arrays: dict[str, AnyArray] = {}
    unset: dict[str, AnyArray] = {}
    for key, column in columns.items():
        template = templates[key]
        if any(row is None for row in column):
            if template.ndim != 1:
                raise ValueError(
                    f"model_outs[...][{key!r}] mixes rows of None with rows of shape "
                    f"{template.shape}: None placeholders stand for one value per env"
                )
            zeros = np.zeros_like(template)
            unset[key] = np.array([[row is None] * len(template) for row in column], bool)
            column = [zeros if row is None else row for row in column]
        # np.stack always copies: the list form never aliases the caller's arrays.
        arrays[key] = np.stack(column)  # type: ignore[arg-type]
    return arrays, unset


def _placeholder_only(column: Sequence[AnyArray | None]) -> bool:
    return all(row is None for row in column)


def _coerce_mapping(value: Mapping[Any, Any], *, copy: bool) -> dict[str, AnyArray]:
    raw: dict[str, AnyArray] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise ValueError(f"model_outs keys must be strings, got {key!r}")
        raw[key] = as_numeric(
            item, f"model_outs[{key!r}]", copy=False, min_ndim=_min_row_ndim(key) + 1
        )
    return _coerce_known(raw, copy=copy)  # copied while converted: one pass per array


def _coerce_known(raw: dict[str, AnyArray], *, copy: bool = False) -> dict[str, AnyArray]:
    return {
        key: _coerce_key(key, array, raw.get("actor"), f"model_outs[{key!r}]", copy=copy)
        for key, array in raw.items()
    }


def coerce_model_outs(value: Any, *, copy: bool) -> ModelOutputs:
    """Turn either accepted form of model outputs into `ModelOutputs`, checking dtypes.

    Accepts obs-tower2's list of T+1 mappings (key -> array with leading dim B, or a row of
    `None` to fill in later), an empty list (outputs to be appended step by step), a mapping of
    key -> stacked `[T+1, B, ...]` array, or a `ModelOutputs`. Known keys are converted and
    checked: `critic`, `log_probs` and `actor` to finite float32; `actions` to int32 (integer
    values only) when they are integers or Discrete (see `discrete_actions`), else to finite
    float32 (Box). Shapes across fields are checked later, by `Rollout`.

    Raises:
        ValueError: With a message naming the key and, for the list form, the timestep.
    """
    if type(value) is dict or isinstance(value, Mapping):  # a dict without abc's machinery
        arrays = _coerce_mapping(value, copy=copy)
        return ModelOutputs._of(arrays, None if arrays else 0)
    if isinstance(value, ModelOutputs):
        return value._clone(copy)
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        if len(value) == 0:
            return ModelOutputs._of({}, 0, building=True)
        raw, unset = _stack_steps(value)
        return ModelOutputs._of(_coerce_known(raw), len(value), unset=unset)
    raise ValueError(
        "model_outs must be a list of T+1 mappings (key -> [B, ...] array) or a mapping "
        f"of key -> stacked [T+1, B, ...] array, got {type(value).__name__}"
    )
