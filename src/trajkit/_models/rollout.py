"""`Rollout`: a validated batch of trajectory segments, faithful to obs-tower2's."""

from __future__ import annotations

import copy as _copy
from collections.abc import Mapping, Sequence
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    ClassVar,
    Generic,
    TypeAlias,
    TypeVar,
    overload,
)

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from typing_extensions import Self, TypedDict, Unpack

from trajkit._base.types import AnyArray, ArrayLike, ArrayTree, Float32Array
from trajkit._core import fused
from trajkit._core import tree as _tree
from trajkit._models.arrays import arrays_equal
from trajkit._models.checked import CheckedArray
from trajkit._models.errors import clean_validation_error
from trajkit._models.field_types import InfoRows
from trajkit._models.model_outputs import ModelOutputs
from trajkit._models.rollout_checks import (
    FIELD_CHECKS,
    FIELD_DIMS,
    FIELDS,
    MODEL_OUTPUT_DIMS,
    cross_check,
    field_validator,
    info_rows,
)
from trajkit._models.rollout_obs_tower2 import missing_critic
from trajkit._models.rollout_training import AdvantageNormalization, TrainingMethods
from trajkit._models.rules import FIELD_RULES, episode_ends

__all__ = [
    "FIELD_DIMS",
    "MODEL_OUTPUT_DIMS",
    "AdvantageNormalization",
    "Rollout",
    "RolloutFields",
    "given_infos",
    "missing_critic",
]

ModelOutsLike: TypeAlias = "Sequence[Mapping[str, Any]] | Mapping[str, ArrayLike] | ModelOutputs"


class RolloutFields(TypedDict, total=False):
    """The fields of a [`Rollout`][trajkit.Rollout], typed as the constructor accepts them.

    This types the keyword arguments of [`Rollout.replace`][trajkit.Rollout.replace], so that
    a misspelt field or a value of the wrong kind is caught by mypy and pyright. Use it to
    type a dict of fields built up before a `replace(**fields)`.

    Examples:
        >>> import numpy as np
        >>> from trajkit import RolloutFields
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=4, num_envs=2)
        >>> fields: RolloutFields = {"rews": np.zeros((4, 2)), "infos": None}
        >>> float(r.replace(**fields).rews.sum())
        0.0
    """

    states: ArrayLike | Mapping[str, Any]
    obses: ArrayLike | Mapping[str, Any]
    rews: ArrayLike
    dones: ArrayLike
    infos: Sequence[Sequence[Mapping[str, Any]]] | None
    model_outs: ModelOutsLike
    truncated: ArrayLike | None
    final_values: ArrayLike | None
    final_obses: ArrayLike | Mapping[str, Any] | None


_Get = TypeVar("_Get")
_Set = TypeVar("_Set")


class _Field(Generic[_Get, _Set]):
    """For type checkers only: a field that reads as `_Get` and accepts `_Set` on assignment."""

    @overload
    def __get__(self, instance: None, owner: type[Any]) -> Self: ...
    @overload
    def __get__(self, instance: object, owner: type[Any]) -> _Get: ...
    def __get__(self, instance: object, owner: type[Any]) -> Self | _Get:
        raise NotImplementedError  # pragma: no cover - never instantiated

    def __set__(self, instance: object, value: _Set) -> None:
        raise NotImplementedError  # pragma: no cover - never instantiated


class Rollout(TrainingMethods, BaseModel):
    """A validated batch of trajectory segments: what B environments saw, did and received.

    Faithful to the obs-tower2 `Rollout`: the same six constructor arguments, attributes,
    methods, results, dtypes and shapes. Arrays are time-major. `obses`, `states`, `dones` and
    `model_outs` have T+1 rows (the last is for bootstrapping off the value function); `rews`
    and `infos` have T. `dones[t] = 1` means observation t is the first of a new episode.

    Every malformed rollout is refused at construction, and on assignment of a whole field,
    with a `trajkit.RolloutValidationError` (a `pydantic.ValidationError` and a `ValueError`)
    naming the field, the key and the
    timestep or env where it applies, and the expected and actual values. A failed assignment
    leaves the rollout as it was. Writes into the arrays in place (`r.rews[t] -= bonus`,
    `r.obses[t, b] = x`, `r.model_outs[t]['critic'][b] = v`) are checked as they are made, by
    the same rules, and a refused write changes nothing; the arrays read and compute as plain
    NumPy arrays (`r.rews * 2` and `np.asarray(r.rews)` are plain `ndarray`s).

    Args:
        states: Env states `[T+1, B, ...]`, at least 2-D, stored as float32. Use shape
            `(T+1, B, 0)` when the env has no state to record. May be nested like `obses`.
        obses: Observations `[T+1, B, ...]`, any real dtype (uint8 images stay uint8); or,
            for a Gymnasium `Dict`/`Tuple` space, a mapping (str keys) or tuple of such arrays,
            nested to any depth, stored as `dict`/`tuple`. Every leaf has the same T+1 and B;
            messages name the leaf, e.g. `obses['image']`.
        rews: Rewards `[T, B]`, finite, stored as float32.
        dones: Episode starts `[T+1, B]`, only 0 and 1 (bool accepted), stored as float32.
        infos: T rows of B mappings (`None` gives empty dicts).
        model_outs: obs-tower2's list of T+1 dicts (key -> array with leading dim B), or a
            mapping key -> stacked `[T+1, B, ...]` array.
        truncated: Optional `[T, B]` 0/1 flags: step t's episode was cut by a time limit
            (requires `dones[t+1] = 1`). Given together with `final_values`.
        final_values: Optional `[T, B]` critic values of the true final observation of step t,
            used by `advantages` where `truncated` is 1.
        final_obses: Optional true final observations of the episodes that end in the
            rollout: what the env returned when the episode ended, before the reset put the
            next episode's first observation in `obses[t+1]`. Laid out as `obses` (same tree,
            dtypes and per-step shapes) with leading dimension E, the number of (t, b) with
            `dones[t+1] = 1`, in the order of `np.nonzero(dones[1:] == 1)`. Read it through
            [`next_obses`][trajkit.Rollout.next_obses].
        copy: Copy the input arrays (the default, as obs-tower2 does). `False` keeps arrays of
            the right dtype as given, e.g. memory-mapped files. Every array argument may also
            be a plain CPU PyTorch tensor, converted like an array; a tensor that requires
            grad or is on a GPU is refused, naming the field: pass
            `tensor.detach().cpu().numpy()`.

    Examples:
        >>> import numpy as np
        >>> T, B = 3, 2
        >>> r = Rollout(
        ...     states=np.zeros((T + 1, B, 1)),
        ...     obses=np.zeros((T + 1, B, 4), np.uint8),
        ...     rews=np.ones((T, B)),
        ...     dones=np.zeros((T + 1, B), bool),
        ...     infos=[[{} for _ in range(B)] for _ in range(T)],
        ...     model_outs=[{"critic": np.zeros(B), "actions": np.zeros(B, int)}] * (T + 1),
        ... )
        >>> r.num_steps, r.batch_size
        (3, 2)
        >>> r.advantages(gamma=0.5, lam=1.0)[:, 0]
        array([1.75, 1.5 , 1.  ], dtype=float32)
        >>> r.rews = np.ones((T + 1, B))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        trajkit.RolloutValidationError: rews has shape (4, 2), expected (T, B) = (3, 2); T=3 ...
    """

    model_config: ClassVar[ConfigDict] = ConfigDict(
        arbitrary_types_allowed=True,
        validate_assignment=True,
        extra="forbid",
        protected_namespaces=(),
        revalidate_instances="never",
        # Built on first use: construction validates the fields directly (see `_validate`), so
        # loading and checking files never needs pydantic's validator. (No
        # `use_attribute_docstrings`: reading this class's source cost tens of milliseconds
        # at import, for descriptions no JSON schema shows.)
        defer_build=True,
    )

    if TYPE_CHECKING:
        # What type checkers see: each field reads as the validated type and accepts, on
        # assignment, what the constructor accepts (validated at run time). pydantic sees the
        # `else` branch.
        states: _Field[ArrayTree, ArrayLike | Mapping[str, Any]]
        """Env states `[T+1, B, ...]`, float32, at least 2-D; or a dict/tuple of such arrays."""
        obses: _Field[ArrayTree, ArrayLike | Mapping[str, Any]]
        """Observations `[T+1, B, ...]`, any real dtype; or a dict/tuple of such arrays."""
        rews: _Field[Float32Array, ArrayLike]
        """Rewards `[T, B]`, float32, finite."""
        dones: _Field[Float32Array, ArrayLike]
        """Episode starts `[T+1, B]`, float32 0/1: `dones[t] = 1` if observation t starts one."""
        infos: _Field[InfoRows, Sequence[Sequence[Mapping[str, Any]]] | None]
        """Env infos: T rows of B dicts."""
        model_outs: _Field[ModelOutputs, ModelOutsLike]
        """Model outputs for T+1 timesteps: `model_outs[t][key]` is a `[B, ...]` array."""
        truncated: _Field[Float32Array | None, ArrayLike | None]
        """Optional time-limit truncation flags `[T, B]`, float32 0/1."""
        final_values: _Field[Float32Array | None, ArrayLike | None]
        """Optional values of true final observations `[T, B]`, float32; read where truncated."""
        final_obses: _Field[ArrayTree | None, ArrayLike | Mapping[str, Any] | None]
        """Optional true final observations `[E, ...]` (as `obses`), one per episode end."""
    else:
        states: Annotated[ArrayTree, field_validator("states")]
        obses: Annotated[ArrayTree, field_validator("obses")]
        rews: Annotated[Float32Array, field_validator("rews")]
        dones: Annotated[Float32Array, field_validator("dones")]
        infos: Annotated[InfoRows, field_validator("infos")]
        model_outs: Annotated[ModelOutputs, field_validator("model_outs")]
        truncated: Annotated[Float32Array | None, field_validator("truncated")] = None
        final_values: Annotated[Float32Array | None, field_validator("final_values")] = None
        final_obses: Annotated[ArrayTree | None, field_validator("final_obses")] = None

    _FIELDS: ClassVar[tuple[str, ...]] = FIELDS

    def __init__(
        self,
        states: ArrayLike | Mapping[str, Any],
        obses: ArrayLike | Mapping[str, Any],
        rews: ArrayLike,
        dones: ArrayLike,
        infos: Sequence[Sequence[Mapping[str, Any]]] | None,
        model_outs: ModelOutsLike,
        *,
        truncated: ArrayLike | None = None,
        final_values: ArrayLike | None = None,
        final_obses: ArrayLike | Mapping[str, Any] | None = None,
        copy: bool = True,
    ) -> None:
        __tracebackhide__ = True
        values = {
            "states": states,
            "obses": obses,
            "rews": rews,
            "dones": dones,
            "infos": infos,
            "model_outs": model_outs,
            "truncated": truncated,
            "final_values": final_values,
            "final_obses": final_obses,
        }
        self._validate(values, copy)

    def _validate(self, values: dict[str, Any], copy: bool) -> None:
        """Check every field and the rules across them, and store the fields in `self`.

        The fields go through the same validators, and then the same check across fields, as
        pydantic would run, but called directly: pydantic's own work around them is about a
        tenth of a small rollout's construction. Where anything is refused, pydantic validates
        `values` again, and its error names every problem at once. (A subclass, which may
        add fields or validators, always goes through pydantic.)
        """
        __tracebackhide__ = True
        scope = fused.open_scope()  # whether compiled checks are on: decided once, if at all
        try:
            if type(self) is Rollout and self._validated_directly(values, copy):
                return
            self.__pydantic_validator__.validate_python(
                values, self_instance=self, context={"copy": copy}
            )
        except ValidationError as exc:
            raise clean_validation_error(exc) from None
        finally:
            fused.close_scope(scope)

    def _validated_directly(self, values: dict[str, Any], copy: bool) -> bool:
        """Whether every field and rule passed, validated without pydantic (see `_validate`)."""
        try:
            fields = {name: check(values[name], copy) for name, check in FIELD_CHECKS.items()}
        except (ValueError, AssertionError):  # what pydantic turns into validation errors
            return False
        self._store(fields)
        try:
            self._cross_check()
        except (ValueError, AssertionError):
            return False
        return True

    def _store(self, fields: dict[str, Any]) -> None:
        """Set `fields` as pydantic's validation into an existing instance does."""
        object.__setattr__(self, "__dict__", fields)
        object.__setattr__(self, "__pydantic_fields_set__", set(self._FIELDS))
        object.__setattr__(self, "__pydantic_extra__", None)
        object.__setattr__(self, "__pydantic_private__", None)

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            # `infos=None` stores no per-step objects: the T rows of B empty dicts are made
            # the first time `infos` is read, so rollouts without infos cost only arrays.
            if name == "infos" and "dones" in self.__dict__:
                rows = info_rows(self.num_steps, self.batch_size)
                self.__dict__["infos"] = rows
                return rows
            return super().__getattr__(name)

    def __setattr__(self, name: str, value: Any) -> None:
        # pydantic leaves a field assigned even when the model validator then refuses it;
        # put the previous value back so that a failed assignment loses nothing.
        if name not in self._FIELDS:
            super().__setattr__(name, value)
            return
        __tracebackhide__ = True
        previous = self.__dict__.get(name)
        if value is previous and isinstance(value, CheckedArray):
            return  # `r.rews -= x` assigns the array its checked writes already changed
        try:
            super().__setattr__(name, value)
        except ValidationError as exc:
            self.__dict__[name] = previous
            raise clean_validation_error(exc) from None

    @model_validator(mode="after")
    def _check_across_fields(self) -> Self:
        self._cross_check()
        return self

    def _cross_check(self) -> None:
        cross_check(self)

    # ------------------------------------------------------- copies and checks (obs-tower2's copy)

    def copy(self) -> Rollout:  # type: ignore[override]
        """Return an independent, validated deep copy (arrays, model outputs and infos).

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> r = example_rollout()
            >>> r2 = r.copy()
            >>> r2.rews[0, 0] += 1.0
            >>> bool(r.rews[0, 0] == r2.rews[0, 0])
            False
        """
        return self.replace()

    def replace(self, **fields: Unpack[RolloutFields]) -> Rollout:
        """Return a validated copy with some fields replaced.

        Args:
            **fields: New values for any of `states`, `obses`, `rews`, `dones`, `infos`,
                `model_outs`, `truncated`, `final_values`, `final_obses`: what the constructor
                accepts for
                each (typed by [`RolloutFields`][trajkit.RolloutFields]).

        Returns:
            A new, independent `Rollout`; `self` is unchanged.

        Raises:
            TypeError: For an unknown field name.
            pydantic.ValidationError: If the result would be invalid.

        Examples:
            >>> import numpy as np
            >>> from trajkit.testing import example_rollout
            >>> r = example_rollout()
            >>> scaled = r.replace(rews=r.rews * 0.1)
            >>> bool(np.allclose(scaled.rews, r.rews * 0.1)), scaled.rews is r.rews
            (True, False)
        """
        unknown = set(fields) - set(self._FIELDS)
        if unknown:
            raise TypeError(
                f"replace() got unknown field(s) {sorted(unknown)}; fields are {list(self._FIELDS)}"
            )
        values: dict[str, Any] = {name: self.__dict__.get(name) for name in self._FIELDS}
        values.update(fields)
        if "infos" not in fields:
            values["infos"] = _copy.deepcopy(self.__dict__.get("infos"))
        return Rollout(**values)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with some fields replaced, validated as the constructor validates.

        pydantic's `model_copy` skips validation; here `update` goes through every check of
        construction, so a copy can never hold what the constructor refuses. Prefer
        [`replace`][trajkit.Rollout.replace], which is typed.

        Args:
            update: New values of some fields, as the constructor accepts them.
            deep: Copy the arrays (and infos); a shallow copy shares them with `self`.

        Returns:
            A new, validated `Rollout`.

        Raises:
            TypeError: For an unknown field name.
            trajkit.RolloutValidationError: If the copy would be invalid.

        Examples:
            >>> import numpy as np
            >>> from trajkit.testing import example_rollout
            >>> r = example_rollout(num_steps=4, num_envs=2)
            >>> r.model_copy(update={"obses": r.obses[:-1]})  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            trajkit.RolloutValidationError: obses has shape (4, 2, 4), expected (T+1, B, ...) ...
        """
        update = dict(update or {})
        unknown = set(update) - set(self._FIELDS)
        if unknown:
            raise TypeError(
                f"model_copy() got unknown field(s) {sorted(unknown)}; fields are "
                f"{list(self._FIELDS)}"
            )
        values: dict[str, Any] = {name: self.__dict__.get(name) for name in self._FIELDS}
        if deep:
            values["infos"] = _copy.deepcopy(values["infos"])
        values.update(update)
        return type(self)(**values, copy=deep)

    @classmethod
    def model_construct(  # type: ignore[override]
        cls, _fields_set: set[str] | None = None, **values: Any
    ) -> Self:
        """Build a rollout from `values`, validated: the same as `Rollout(**values, copy=False)`.

        pydantic's `model_construct` trusts its input; a `Rollout` never does, so this is the
        constructor (without copying arrays of the right dtype).

        Examples:
            >>> import numpy as np
            >>> Rollout.model_construct(  # doctest: +ELLIPSIS
            ...     states=np.zeros((3, 1, 0)), obses=np.zeros((3, 1)), infos=None,
            ...     rews=[[np.nan], [0.0]], dones=np.zeros((3, 1)), model_outs={},
            ... )
            Traceback (most recent call last):
            ...
            trajkit.RolloutValidationError: rews must be finite, got nan at (t=0, b=0)...
        """
        values.setdefault("copy", False)
        return cls(**values)

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
        """Pydantic's `model_validate`, refusing with a `RolloutValidationError`.

        Examples:
            >>> import numpy as np
            >>> Rollout.model_validate(  # doctest: +ELLIPSIS
            ...     {"states": np.zeros((3, 1, 0)), "obses": np.zeros((3, 1)), "infos": None,
            ...      "rews": [[np.nan], [0.0]], "dones": np.zeros((3, 1)), "model_outs": {}}
            ... )
            Traceback (most recent call last):
            ...
            trajkit.RolloutValidationError: rews must be finite, got nan at (t=0, b=0)...
        """
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as exc:
            raise clean_validation_error(exc) from None

    @classmethod
    def model_validate_json(cls, json_data: Any, *args: Any, **kwargs: Any) -> Self:
        """Pydantic's `model_validate_json`, refusing with a `RolloutValidationError`.

        Examples:
            >>> import json
            >>> Rollout.model_validate_json(json.dumps(  # doctest: +ELLIPSIS
            ...     {"states": [[[]], [[]]], "obses": [[0.0], [0.0]], "infos": None,
            ...      "rews": [[1.0]], "dones": [[0.0], [2.0]], "model_outs": {}}
            ... ))
            Traceback (most recent call last):
            ...
            trajkit.RolloutValidationError: dones must hold only 0 and 1, got 2.0 at (t=1, b=0)...
        """
        try:
            return super().model_validate_json(json_data, *args, **kwargs)
        except ValidationError as exc:
            raise clean_validation_error(exc) from None

    @classmethod
    def model_validate_strings(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
        """Pydantic's `model_validate_strings`, refusing with a `RolloutValidationError`."""
        try:
            return super().model_validate_strings(obj, *args, **kwargs)
        except ValidationError as exc:
            raise clean_validation_error(exc) from None

    def __copy__(self) -> Self:
        return self.model_copy()

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        return self.model_copy(deep=True)

    def __setstate__(self, state: dict[Any, Any]) -> None:
        super().__setstate__(state)  # arrays come back plain: check and guard them again
        self._validate({name: self.__dict__.get(name) for name in self._FIELDS}, copy=False)

    def revalidate(self) -> None:
        """Run every check of construction again, on the whole rollout as it is now.

        The fields, their shapes, the model outputs by their keys' rules and the rules across
        fields, as the constructor checks them. Writes into the rollout's arrays are checked
        as they are made (see the Validation page); writes through a documented way out
        (the storage behind an array, `.base`; `flags.writeable = True`; `np.add.at`;
        compiled code) are not: this checks them, and seals the arrays read-only again.
        Every writer ([`trajkit.save`][trajkit.save], `Dataset.append`,
        `trajkit.arrow.write_parquet`, `trajkit.minari.to_minari`) calls it before writing
        anything.

        Raises:
            pydantic.ValidationError: If a field breaks a rule (the message names it).
            ValueError: If the model outputs are still being appended or filled in.

        Examples:
            >>> import numpy as np
            >>> from trajkit.testing import example_rollout
            >>> r = example_rollout(num_steps=4, num_envs=2)
            >>> r.revalidate()
            >>> r.rews.base[1, 0] = np.nan  # the storage: not checked until asked
            >>> r.revalidate()  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            trajkit.RolloutValidationError: rews must be finite, got nan at (t=1, b=0)...
        """
        problem = self.model_outs.incomplete()
        if problem is not None:
            raise ValueError(f"the rollout is incomplete: {problem}")
        self._validate({name: self.__dict__.get(name) for name in self._FIELDS}, copy=False)

    def next_obses(self) -> ArrayTree:
        """The observation after each step, `[T, B, ...]`, true final observations at ends.

        Entry `(t, b)` is `obses[t+1, b]`, except where step t ended its episode
        (`dones[t+1, b] = 1`): there it is the episode's true final observation from
        `final_obses`. Offline RL reads its `next_obs` here. When `final_obses` is `None`,
        every entry is `obses[t+1, b]`, so at an episode end it holds the *next* episode's
        first observation, not the final one.

        Returns:
            A new array (or a dict/tuple of arrays, as `obses`) of `obses`' dtypes.

        Examples:
            >>> import numpy as np
            >>> r = Rollout(
            ...     states=np.zeros((4, 1, 0)),
            ...     obses=np.array([[[0]], [[1]], [[10]], [[11]]]),  # step 1 ends an episode
            ...     rews=np.zeros((3, 1)),
            ...     dones=np.array([[0], [0], [1], [0]]),
            ...     infos=None,
            ...     model_outs={},
            ...     final_obses=np.array([[2]]),  # what the env returned when it ended
            ... )
            >>> r.next_obses()[:, 0, 0].tolist()
            [1, 2, 11]
            >>> r.replace(final_obses=None).next_obses()[:, 0, 0].tolist()
            [1, 10, 11]
        """
        if self.final_obses is None:
            return _tree.map_leaves(lambda leaf: leaf[1:].copy(), self.obses)
        ends = np.nonzero(episode_ends(self.dones))
        finals = iter(_tree.leaves(self.final_obses))

        def after(leaf: AnyArray) -> AnyArray:
            out = leaf[1:].copy()
            out[ends] = next(finals)
            return out

        return _tree.map_leaves(after, self.obses)

    # ----------------------------------------------------------------- dunder methods

    def __repr__(self) -> str:
        def desc(value: ArrayTree | None) -> str:
            if value is None:
                return "None"
            if _tree.is_leaf(value):
                return f"{value.dtype}{list(value.shape)}"
            return repr(_tree.map_leaves(lambda leaf: _Verbatim(desc(leaf)), value))

        keys = ", ".join(self.model_outs.keys())
        extra = "" if self.truncated is None else ", truncated=yes"
        if self.final_obses is not None:
            extra += ", final_obses=yes"
        return (
            f"Rollout(T={self.num_steps}, B={self.batch_size}, obses={desc(self.obses)}, "
            f"states={desc(self.states)}, model_outs=[{keys}]{extra})"
        )

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        """Exact equality: same dtypes, shapes and values in every field, equal infos.

        Values compare up to byte order (a big-endian array equals its little-endian copy),
        and NaN equals NaN in the same position, so that a rollout equals itself and its
        saved and loaded copy.
        """
        if not isinstance(other, Rollout):
            return NotImplemented
        for name in FIELD_RULES:  # every array field
            a, b = getattr(self, name), getattr(other, name)
            if (a is None) != (b is None):
                return False
            if a is None:
                continue
            pairs_a, pairs_b = _tree.flatten(a), _tree.flatten(b)
            if [p for p, _ in pairs_a] != [p for p, _ in pairs_b]:
                return False
            for (_, x), (_, y) in zip(pairs_a, pairs_b, strict=True):
                if not arrays_equal(x, y):
                    return False
        return self.model_outs == other.model_outs and _same_infos(
            self.__dict__.get("infos"), other.__dict__.get("infos")
        )

    __hash__: ClassVar[None] = None  # type: ignore[assignment]


def given_infos(rollout: Rollout) -> InfoRows | None:
    """The rollout's infos, or `None` when none were given and `infos` was never read.

    Lets writers store "no infos" without making T*B empty dicts to find out.
    """
    infos: InfoRows | None = rollout.__dict__.get("infos")
    return infos


def _same_infos(a: InfoRows | None, b: InfoRows | None) -> bool:
    """Equal infos; `None` (none given, not yet read) equals rows of empty dicts."""
    if a is None:
        return b is None or not any(item for row in b for item in row)
    if b is None:
        return not any(item for row in a for item in row)
    return a == b


class _Verbatim(str):
    """A string whose repr is itself, to print leaf descriptions inside a dict/tuple repr."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)
