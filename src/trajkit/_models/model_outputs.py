"""Model outputs stored as one stacked array per key, seen as the seed's list of T+1 dicts."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, overload

import numpy as np

from trajkit._base.types import AnyArray
from trajkit._models.arrays import as_float32, as_int32, as_numeric, check_finite, kind_name

__all__ = ["KNOWN_KEYS", "ModelOutputs", "StepOutputs", "coerce_model_outs", "discrete_actions"]

KNOWN_KEYS: Mapping[str, str] = MappingProxyType(
    {
        "critic": "value predictions V(obs_t), float [B]",
        "log_probs": "log-probability of the action taken, float [B]",
        "actor": "policy logits, float [B, A]",
        "actions": (
            "actions of any Gymnasium space: integer [B] (Discrete, 0 <= action < A when "
            "actor is present), integer [B, K] (MultiDiscrete, MultiBinary) or finite float "
            "[B, ...] (Box)"
        ),
    }
)
"""Model-output keys with a meaning (and validation rules) in trajkit."""


class StepOutputs(Mapping[str, AnyArray]):
    """The model outputs of one timestep: `key -> [B, ...]` array, as in the seed's dicts.

    Values are views into the stacked storage, so editing one in place edits the rollout, and
    assigning to an existing key copies into that timestep's row.

    Examples:
        >>> import numpy as np
        >>> outs = ModelOutputs({"critic": np.zeros((3, 2), np.float32)})
        >>> step = outs[1]
        >>> step["critic"]
        array([0., 0.], dtype=float32)
        >>> step["critic"] = [1.0, 2.0]
        >>> outs.arrays["critic"][1]
        array([1., 2.], dtype=float32)
    """

    __slots__ = ("_arrays", "_t")

    def __init__(self, arrays: Mapping[str, AnyArray], t: int) -> None:
        self._arrays = arrays
        self._t = t

    def __getitem__(self, key: str) -> AnyArray:
        return self._arrays[key][self._t]  # type: ignore[no-any-return]

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in self._arrays:
            raise KeyError(
                f"model_outs has no key {key!r} (keys: {sorted(self._arrays)}); "
                "use Rollout.replace(model_outs=...) to add keys"
            )
        self._arrays[key][self._t] = value

    def __iter__(self) -> Iterator[str]:
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)

    def __repr__(self) -> str:
        return f"StepOutputs(t={self._t}, keys={list(self._arrays)})"


class ModelOutputs(Sequence[StepOutputs]):
    """Model outputs of a rollout: T+1 timesteps, stored as one `[T+1, B, ...]` array per key.

    It behaves as the seed's list of T+1 dicts (`outs[t][key]`, `len(outs)`, iteration), while
    [`arrays`][trajkit.ModelOutputs.arrays] gives the stacked arrays without restacking.

    Args:
        arrays: Key to stacked array. Used as given (no validation; `Rollout` validates).
        num_rows: The number of timesteps (T+1); inferred from the arrays when omitted.

    Examples:
        >>> import numpy as np
        >>> outs = ModelOutputs({"actions": np.array([[0, 1], [1, 1], [0, 0]], np.int32)})
        >>> len(outs), outs.keys()
        (3, ('actions',))
        >>> outs[2]["actions"]
        array([0, 0], dtype=int32)
        >>> outs.arrays["actions"].shape
        (3, 2)
    """

    __slots__ = ("_arrays", "_num_rows")

    def __init__(self, arrays: Mapping[str, AnyArray], num_rows: int | None = None) -> None:
        self._arrays = dict(arrays)
        if num_rows is None:
            num_rows = len(next(iter(self._arrays.values()))) if self._arrays else 0
        self._num_rows = num_rows

    @property
    def arrays(self) -> Mapping[str, AnyArray]:
        """Read-only mapping of key to stacked `[T+1, B, ...]` array (the storage itself).

        Examples:
            >>> import numpy as np
            >>> outs = ModelOutputs({"critic": np.zeros((3, 2), np.float32)})
            >>> outs.arrays["critic"].shape
            (3, 2)
            >>> outs.arrays["critic"] is outs.arrays["critic"]  # no restacking
            True
        """
        return MappingProxyType(self._arrays)

    def keys(self) -> tuple[str, ...]:
        """The output keys, in the order given.

        Examples:
            >>> import numpy as np
            >>> ModelOutputs({"critic": np.zeros((3, 2)), "actions": np.zeros((3, 2))}).keys()
            ('critic', 'actions')
        """
        return tuple(self._arrays)

    def __len__(self) -> int:
        return self._num_rows

    @overload
    def __getitem__(self, index: int) -> StepOutputs: ...

    @overload
    def __getitem__(self, index: slice) -> list[StepOutputs]: ...

    def __getitem__(self, index: int | slice) -> StepOutputs | list[StepOutputs]:
        if isinstance(index, slice):
            return [StepOutputs(self._arrays, t) for t in range(self._num_rows)[index]]
        t = range(self._num_rows)[index]  # IndexError for out-of-range, handles negatives
        return StepOutputs(self._arrays, t)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ModelOutputs):
            return NotImplemented
        return (
            len(self) == len(other)
            and self.keys() == other.keys()
            and all(
                a.dtype == other._arrays[k].dtype and np.array_equal(a, other._arrays[k])
                for k, a in self._arrays.items()
            )
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        parts = [f"{k}={a.dtype}{list(a.shape)}" for k, a in self._arrays.items()]
        return f"ModelOutputs({', '.join(parts)})"


def _stack_steps(steps: Sequence[Any]) -> dict[str, AnyArray]:
    """Stack the seed's list of T+1 dicts into one array per key, checking every step."""
    if len(steps) == 0:
        raise ValueError("model_outs must have T+1 >= 1 timesteps, got an empty list")
    columns: dict[str, list[AnyArray]] = {}
    first_keys: list[str] = []
    for t, step in enumerate(steps):
        if not isinstance(step, Mapping):
            raise ValueError(
                f"model_outs[{t}] must be a mapping of key -> array, got {type(step).__name__}"
            )
        keys = list(step)
        if t == 0:
            for key in keys:
                if not isinstance(key, str):
                    raise ValueError(f"model_outs keys must be strings, got {key!r}")
            first_keys = keys
            columns = {key: [] for key in keys}
        elif set(keys) != set(first_keys):
            raise ValueError(
                f"model_outs[{t}] has keys {sorted(map(str, keys))}, expected "
                f"{sorted(first_keys)} (the keys of model_outs[0])"
            )
        for key in first_keys:
            array = as_numeric(step[key], f"model_outs[{t}][{key!r}]", copy=False)
            if t:
                ref = columns[key][0]
                if array.shape != ref.shape:
                    raise ValueError(
                        f"model_outs[{t}][{key!r}] has shape {array.shape}, expected "
                        f"{ref.shape} like model_outs[0][{key!r}]"
                    )
                if array.dtype.kind != ref.dtype.kind:
                    raise ValueError(
                        f"model_outs[{t}][{key!r}] has dtype {array.dtype} "
                        f"({kind_name(array.dtype)}), expected the same kind as "
                        f"model_outs[0][{key!r}] ({ref.dtype}, {kind_name(ref.dtype)})"
                    )
            columns[key].append(array)
    # np.stack always copies: the list form never aliases the caller's arrays.
    return {key: np.stack(column) for key, column in columns.items()}


def _is_discrete(actions: AnyArray, actor: AnyArray | None) -> bool:
    return actor is not None and actions.ndim == 2 and actor.ndim == 3


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


def _coerce_actions(array: AnyArray, actor: AnyArray | None, name: str) -> AnyArray:
    """Integer or bool actions (any space but Box) to int32; float ones (Box) to finite float32.

    Float actions next to `actor` logits of one more dimension are Discrete actions written as
    floats (the seed accepted them): they must be integer-valued and become int32.
    """
    if array.dtype.kind == "b":  # MultiBinary flags given as bool
        return array.astype(np.int32)
    if array.dtype.kind in "iu" or _is_discrete(array, actor):
        return as_int32(array, name, copy=False)
    converted = as_float32(array, name, copy=False)
    check_finite(converted, name, "tb")
    return converted


def coerce_model_outs(value: Any, *, copy: bool) -> ModelOutputs:
    """Turn either accepted form of model outputs into `ModelOutputs`, checking dtypes.

    Accepts the seed's list of T+1 mappings (key -> array with leading dim B), a mapping of
    key -> stacked `[T+1, B, ...]` array, or a `ModelOutputs`. Known keys are converted and
    checked: `critic`, `log_probs` and `actor` to finite float32; `actions` to int32 (integer
    values only) when they are integers or Discrete (see `discrete_actions`), else to finite
    float32 (Box). Shapes across fields are checked later, by `Rollout`.

    Raises:
        ValueError: With a message naming the key and, for the list form, the timestep.
    """
    if isinstance(value, ModelOutputs):
        raw: dict[str, AnyArray] = {k: (a.copy() if copy else a) for k, a in value.arrays.items()}
    elif isinstance(value, Mapping):
        raw = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"model_outs keys must be strings, got {key!r}")
            raw[key] = as_numeric(item, f"model_outs[{key!r}]", copy=copy, min_ndim=2)
    elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
        raw = _stack_steps(value)
    else:
        raise ValueError(
            "model_outs must be a list of T+1 mappings (key -> [B, ...] array) or a mapping "
            f"of key -> stacked [T+1, B, ...] array, got {type(value).__name__}"
        )
    arrays: dict[str, AnyArray] = {}
    for key, array in raw.items():
        name = f"model_outs[{key!r}]"
        if key == "actions":
            arrays[key] = _coerce_actions(array, raw.get("actor"), name)
        elif key in ("critic", "log_probs", "actor"):
            converted = as_float32(array, name, copy=False)
            check_finite(converted, name, "tba" if key == "actor" else "tb")
            arrays[key] = converted
        else:
            arrays[key] = array
    if arrays:
        num_rows: int | None = len(next(iter(arrays.values())))
    else:
        num_rows = len(value) if isinstance(value, Sequence | ModelOutputs) else None
    return ModelOutputs(arrays, num_rows)
