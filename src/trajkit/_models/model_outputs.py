"""Model outputs stored as one stacked array per key, seen as obs-tower2's list of T+1 dicts.

The container: `ModelOutputs` and the `StepOutputs` of one timestep. How the accepted forms
become stacked arrays is `model_outputs_build`; the guards of the arrays it hands out are
`model_outputs_guards`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar, SupportsIndex, overload

import numpy as np

from trajkit._base.types import AnyArray
from trajkit._models.arrays import arrays_equal, as_numeric, first_true
from trajkit._models.checked import checked
from trajkit._models.guards import Link, applicable_rules, check_written, store_checked
from trajkit._models.model_outputs_build import (
    Built,
    build_outputs,
    check_step,
    coerce_known,
    first_step_rows,
    row_of,
)
from trajkit._models.model_outputs_guards import RowGuard, StorageGuard
from trajkit._models.rules import (
    FieldValues,
    conform_into,
    output_name,
    output_rule,
    rules_reading,
)

__all__ = ["ModelOutputs", "StepOutputs", "coerce_model_outs"]


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
        row = row_of(self._outs._arrays[key], self._t)
        return checked(row, RowGuard(self._outs, key, self._t, row))

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

    __slots__ = (
        "__weakref__",  # the guards of the arrays it hands out hold it weakly
        "_arrays",
        "_batch",
        "_building",
        "_expected",
        "_link",
        "_num_rows",
        "_unset",
        "_views",
    )

    def __init__(
        self,
        arrays: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        num_rows: int | None = None,
    ) -> None:
        outs = coerce_model_outs(arrays, copy=False)
        if num_rows is not None and not outs._arrays:
            outs = ModelOutputs._of({}, num_rows)
        self._setup(outs._arrays, outs._num_rows, building=outs._building, unset=outs._unset)
        self._check_across()

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
        self._link: Link | None = None  # the rollout's, once attached to one

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
            {k: checked(a, StorageGuard(self, k, a)) for k, a in self._plain().items()}
        )
        self._views = (self._arrays, self._num_rows, views)
        return views

    def _plain(self) -> Mapping[str, AnyArray]:
        """The stacked arrays as plain arrays, for trajkit's own reading (no views made)."""
        n = self._num_rows
        if any(len(a) != n for a in self._arrays.values()):
            return {k: a[:n] for k, a in self._arrays.items()}
        return self._arrays

    def _values(self) -> FieldValues:
        """The outputs by name (`model_outs['critic']`), as the rules across fields read them."""
        return {output_name(key): array for key, array in self._plain().items()}

    def _rule_values(self) -> FieldValues:
        """What a write's rules across fields read: the rollout's values, or the outputs'.

        (Outputs kept after their rollout is gone still check the rules among themselves.)
        """
        values = None if self._link is None else self._link.values()
        return self._values() if values is None else values

    def _check_across(self) -> None:
        """The rules across fields that read only model outputs, on these outputs."""
        values = self._values()
        for name in values:
            for rule in rules_reading(name):
                if rule.applies(values):
                    rule.check(values)

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
        rows = check_step(self._arrays, self._unset, step, t)
        self._check_rows(rows, t)
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
        self._check_rows(rows, t)
        if t == 0:
            capacity = self._expected or 8
            self._arrays = {
                key: np.empty((capacity, *row.shape), row.dtype) for key, row in rows.items()
            }
        elif self._expected is None and t == len(next(iter(self._arrays.values()), [])):
            self._arrays = {  # full: the storage doubles
                key: np.concatenate([a, np.empty_like(a)]) for key, a in self._arrays.items()
            }
        for key, row in rows.items():
            self._arrays[key][t] = row
        self._num_rows = t + 1
        if self._expected is not None and self._num_rows == self._expected:
            self._building = False

    def _first_step(self, step: Mapping[Any, Any]) -> dict[str, AnyArray]:
        """Step 0's rows, checked against B; they set the keys."""
        return first_step_rows(step, self._batch)

    def _next_step(self, step: Mapping[Any, Any], t: int) -> dict[str, AnyArray]:
        """Step t's rows, checked against step 0's."""
        if set(step) != set(self._arrays):
            raise ValueError(
                f"model_outs[{t}] has keys {sorted(map(str, step))}, expected "
                f"{sorted(self._arrays)} (the keys of model_outs[0])"
            )
        return check_step(self._arrays, self._unset, step, t)

    def _check_rows(self, rows: Mapping[str, AnyArray], t: int) -> None:
        """The rules across fields that read the outputs, on one step's rows."""
        values: dict[str, Any] | None = None
        for key, row in rows.items():
            name = output_name(key)
            if rules_reading(name):
                if values is None:  # the step's rows, as a one-step rollout's outputs
                    values = {output_name(k): r[np.newaxis] for k, r in rows.items()}
                rules = tuple(rule for rule in rules_reading(name) if rule.applies(values))
                check_written(rules, values, row, f"model_outs[{t}][{key!r}]", "b")

    def _write(self, key: str, t: int, index: Any, value: Any) -> None:
        """Validate `value` for `outs[t][key][index]`, then store it (nothing on failure)."""
        storage = self._arrays[key]
        row = row_of(storage, t)
        rule = output_rule(key, storage.ndim)
        rules, values = applicable_rules(output_name(key), self._rule_values)
        if (  # the rule's fast test, for the usual write of a whole row
            index is Ellipsis
            and not rules
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
        axes = "" if suffix else "b"
        array = conform_into(rule, storage.dtype, array, name, axes=axes)
        store_checked(row, index, array, rules, values, name, axes)
        mask = self._unset.get(key)
        if mask is not None:
            mask[t][index[0] if isinstance(index, tuple) else index] = False

    # ------------------------------------------------------------------ plumbing

    def _clone(self, copy: bool) -> ModelOutputs:
        """A new `ModelOutputs` with the same state (arrays copied when `copy`)."""
        if not copy:
            return self
        n = self._num_rows
        arrays = {k: np.array(a) for k, a in self._arrays.items()}
        unset = {k: m.copy() for k, m in self._unset.items()}
        outs = ModelOutputs._of(arrays, n, building=self._building, unset=unset)
        outs._expected, outs._batch = self._expected, self._batch
        return outs

    def _attach(self, num_rows: int, batch: int, link: Link) -> None:
        """Bind to a rollout's T+1 and B, and its writes to its rules (by `Rollout` validation)."""
        self._link = link
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

    def __getstate__(self) -> dict[str, Any]:
        return {
            "arrays": self._arrays,
            "num_rows": self._num_rows,
            "building": self._building,
            "unset": self._unset,
            "expected": self._expected,
            "batch": self._batch,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._setup(
            state["arrays"],
            state["num_rows"],
            building=state["building"],
            unset=state["unset"],
            batch=state["batch"],
        )
        self._expected = state["expected"]

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


def _fmt_sub(index: Any) -> str:
    parts = index if isinstance(index, tuple) else (index,)
    return "".join(f"[{p}]" if isinstance(p, int | np.integer) else "[...]" for p in parts)


def coerce_model_outs(value: Any, *, copy: bool) -> ModelOutputs:
    """Either accepted form of model outputs, or a `ModelOutputs`, as checked `ModelOutputs`.

    The forms are `build_outputs`'; a `ModelOutputs` is checked again by its keys' rules,
    as a mapping of its arrays would be (writes through a way out may have changed them),
    and copied where `copy`. The rules across fields are the rollout's to check.

    Raises:
        ValueError: With a message naming the key and, for the list form, the timestep.
    """
    if isinstance(value, ModelOutputs):
        coerce_known(value._plain())  # (the stored dtypes: nothing is converted)
        return value._clone(copy)
    built: Built = build_outputs(value, copy=copy)
    return ModelOutputs._of(
        built.arrays, built.num_rows, building=built.building, unset=built.unset
    )
