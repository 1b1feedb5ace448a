"""`Rollout`: a validated batch of trajectory segments, faithful to the obs-tower2 seed."""

from __future__ import annotations

import copy as _copy
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    ClassVar,
    Generic,
    Literal,
    TypeAlias,
    TypeVar,
    overload,
)

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    PlainValidator,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from typing_extensions import Self, TypedDict, Unpack

from trajkit._base.rng import as_generator
from trajkit._base.types import AnyArray, ArrayLike, ArrayTree, Float32Array, Int32Array
from trajkit._core import fused
from trajkit._core import gae as _gae
from trajkit._core import minibatch as _mb
from trajkit._core import tree as _tree
from trajkit._core.episodes import EpisodeStats, episode_stats
from trajkit._models.arrays import arrays_equal, first_true, fmt_index
from trajkit._models.dims import DimSpec, Shape, bind_dims
from trajkit._models.errors import MissingModelOutputError, clean_validation_error
from trajkit._models.model_outputs import ModelOutputs, coerce_model_outs, discrete_actions
from trajkit._models.rules import FIELD_RULES, OUTPUT_RULES, conform, output_rule

__all__ = [
    "FIELD_DIMS",
    "MODEL_OUTPUT_DIMS",
    "AdvantageNormalization",
    "Rollout",
    "RolloutFields",
    "advantage_normalization",
    "given_infos",
    "missing_critic",
    "normalized_minibatch",
    "ppo_arrays",
]

FIELD_DIMS: Mapping[str, str] = MappingProxyType(
    {"infos": "T B", **{name: rule.dims for name, rule in FIELD_RULES.items()}}
)
"""The declared dimensions of every field, from the rule table (`trajkit._models.rules`)."""

MODEL_OUTPUT_DIMS: Mapping[str, str] = MappingProxyType(
    {key: rule.dims for key, rule in OUTPUT_RULES.items()}
)
"""The declared dimensions of model outputs; `*` applies to keys with no entry of their own,
`*scalar` to such keys with one value per step (`[T+1]`, no B)."""

_SPECS = {name: DimSpec.parse(text) for name, text in FIELD_DIMS.items()}
_OUT_SPECS = {text: DimSpec.parse(text) for text in MODEL_OUTPUT_DIMS.values()}
_ROWS_ONLY = DimSpec.parse("T+1")
_AGREED_SHAPES: dict[tuple[tuple[str, Shape], ...], tuple[int, int]] = {}
"""T and B of shapes that agreed before: a training loop builds rollouts of the same shapes."""
_AGREED_SHAPES_MAX = 64
_K = TypeVar("_K")
_V = TypeVar("_V")


def _remember(cache: dict[_K, _V], key: _K, value: _V, limit: int) -> None:
    """Keep `value` under `key` in `cache`, which is emptied first when it holds `limit` entries.

    (A training loop repeats one structure; a bound keeps a loop of ever-new ones small.)
    """
    if len(cache) >= limit:
        cache.clear()
    cache[key] = value


InfoRows = list[list[dict[str, Any]]]

AdvantageNormalization: TypeAlias = Literal["rollout", "minibatch"] | None
"""How minibatch methods standardize advantages: not at all, over the rollout, or per batch."""
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


def _copying(info: ValidationInfo) -> bool:
    return bool(info.context.get("copy", True)) if isinstance(info.context, dict) else True


def _array_check(name: str) -> Callable[[Any, bool], Any]:
    """The validator of array field `name`, from its rule in `FIELD_RULES`."""
    rule = FIELD_RULES[name]

    def check(value: Any, copy: bool) -> Any:
        if value is None and rule.optional:
            return None
        if type(value) is np.ndarray or not rule.nested:  # the common flat case
            return conform(rule, value, name, copy=copy)
        return _tree.map_with_path(
            lambda path, leaf: conform(rule, leaf, _tree.format_path(name, path), copy=copy),
            _tree.normalize(value, name),
        )

    check.__name__ = f"_v_{name}"
    return check


def _v_model_outs(value: Any, copy: bool) -> ModelOutputs:
    return coerce_model_outs(value, copy=copy)


def _v_infos(value: Any, copy: bool) -> InfoRows | None:
    if value is None:
        return None
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise ValueError(
            f"infos must be a list of T rows of B mappings, got {type(value).__name__}"
        )
    rows: InfoRows = []
    for t, row in enumerate(value):
        if type(row) is list and set(map(type, row)) <= {dict}:  # the common case, at C speed
            rows.append(row.copy())
            continue
        if isinstance(row, str | bytes | Mapping) or not isinstance(row, Sequence):
            raise ValueError(f"infos[{t}] must be a list of B mappings, got {type(row).__name__}")
        for b, item in enumerate(row):
            if not isinstance(item, Mapping):
                raise ValueError(f"infos[{t}][{b}] must be a mapping, got {type(item).__name__}")
        rows.append([item if isinstance(item, dict) else dict(item) for item in row])
    return rows


_FIELD_CHECKS: Mapping[str, Callable[[Any, bool], Any]] = MappingProxyType(
    {
        "states": _array_check("states"),
        "obses": _array_check("obses"),
        "rews": _array_check("rews"),
        "dones": _array_check("dones"),
        "infos": _v_infos,
        "model_outs": _v_model_outs,
        "truncated": _array_check("truncated"),
        "final_values": _array_check("final_values"),
    }
)
"""Each field's validator (the value, and whether to copy it), in declaration order."""


def _validator(name: str) -> PlainValidator:
    """Field `name`'s check as a pydantic validator, told whether to copy by the context."""
    check = _FIELD_CHECKS[name]

    def validate(value: Any, info: ValidationInfo) -> Any:
        return check(value, _copying(info))

    return PlainValidator(validate)


class Rollout(BaseModel):
    """A validated batch of trajectory segments: what B environments saw, did and received.

    Faithful to the obs-tower2 `Rollout`: the same six constructor arguments, attributes,
    methods, results, dtypes and shapes. Arrays are time-major. `obses`, `states`, `dones` and
    `model_outs` have T+1 rows (the last is for bootstrapping off the value function); `rews`
    and `infos` have T. `dones[t] = 1` means observation t is the first of a new episode.

    Every malformed rollout is refused at construction, and on assignment of a whole field,
    with a `trajkit.RolloutValidationError` (a `pydantic.ValidationError` and a `ValueError`)
    naming the field, the key and the
    timestep or env where it applies, and the expected and actual values. A failed assignment
    leaves the rollout as it was. Editing arrays in place (`r.rews[t] -= bonus`) is allowed and
    not re-validated.

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
        model_outs: The seed's list of T+1 dicts (key -> array with leading dim B), or a
            mapping key -> stacked `[T+1, B, ...]` array.
        truncated: Optional `[T, B]` 0/1 flags: step t's episode was cut by a time limit
            (requires `dones[t+1] = 1`). Given together with `final_values`.
        final_values: Optional `[T, B]` critic values of the true final observation of step t,
            used by `advantages` where `truncated` is 1.
        copy: Copy the input arrays (the default, as the seed does). `False` keeps arrays of
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
        use_attribute_docstrings=True,
        revalidate_instances="never",
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
    else:
        states: Annotated[ArrayTree, _validator("states")]
        obses: Annotated[ArrayTree, _validator("obses")]
        rews: Annotated[Float32Array, _validator("rews")]
        dones: Annotated[Float32Array, _validator("dones")]
        infos: Annotated[InfoRows, _validator("infos")]
        model_outs: Annotated[ModelOutputs, _validator("model_outs")]
        truncated: Annotated[Float32Array | None, _validator("truncated")] = None
        final_values: Annotated[Float32Array | None, _validator("final_values")] = None

    _FIELDS: ClassVar[tuple[str, ...]] = tuple(_FIELD_CHECKS)

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
            fields = {name: check(values[name], copy) for name, check in _FIELD_CHECKS.items()}
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
                T, B = self.num_steps, self.batch_size
                rows: InfoRows = [[{} for _ in range(B)] for _ in range(T)]
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
        """The rules across fields: shapes agree on T and B, and the values that need them."""
        shapes: dict[str, Shape] = {}
        specs: dict[str, DimSpec] = {}
        empty_rows: list[str] = []

        def add(name: str, shape: Shape, spec: DimSpec) -> None:
            if tuple(shape) == (0,) and len(spec.dims) > 1 and spec.dims[0].offset == 0:
                shape = (0,) + (None,) * (len(spec.dims) - 1)  # `[]` for a T = 0 field
                empty_rows.append(name)
            shapes[name] = shape
            specs[name] = spec

        add("dones", self.dones.shape, _SPECS["dones"])
        for name in ("obses", "states"):  # every leaf of a nested field votes under its path
            tree = getattr(self, name)
            if type(tree) is np.ndarray:
                add(name, tree.shape, _SPECS[name])
                continue
            for path, leaf in _tree.flatten(tree):
                add(_tree.format_path(name, path), leaf.shape, _SPECS[name])
        building = self.model_outs.building  # steps still being appended: rows don't vote
        outs = {} if building else self.model_outs.arrays
        for key, array in outs.items():
            add(f"model_outs[{key!r}]", array.shape, _OUT_SPECS[output_rule(key, array.ndim).dims])
        if not outs and len(self.model_outs) and not building:
            add("model_outs", (len(self.model_outs),), _ROWS_ONLY)
        add("rews", self.rews.shape, _SPECS["rews"])
        infos: InfoRows | None = self.__dict__.get("infos")  # None: no infos were given
        if infos is not None:
            widths = {len(row) for row in infos}
            width = widths.pop() if len(widths) == 1 else None
            shapes["infos"] = (len(infos), width)
            specs["infos"] = _SPECS["infos"]
        for name in ("truncated", "final_values"):
            array = getattr(self, name)
            if array is not None:
                add(name, array.shape, _SPECS[name])

        shape_key = tuple(shapes.items())  # the specs follow from the names
        bound = _AGREED_SHAPES.get(shape_key)
        if bound is None:
            bound = self._bind(shapes, specs, infos)
            _remember(_AGREED_SHAPES, shape_key, bound, _AGREED_SHAPES_MAX)
        T, B = bound

        for name in empty_rows:  # `[]` given for a T = 0 field becomes (0, B)
            if name in self._FIELDS:
                self.__dict__[name] = getattr(self, name).reshape(0, B)
        if infos is None:  # no per-step objects until someone reads `infos` (__getattr__)
            self.__dict__.pop("infos", None)
        if not outs and not building:
            self.__dict__["model_outs"] = ModelOutputs({}, T + 1)
        self.model_outs._attach(T + 1, B)
        self._check_values(self.model_outs.arrays if building else outs)

    def _bind(
        self, shapes: dict[str, Shape], specs: dict[str, DimSpec], infos: InfoRows | None
    ) -> tuple[int, int]:
        """T and B from the fields' shapes, or a `ValueError` naming every disagreement."""
        binding = bind_dims(shapes, specs)
        problems = binding.problems
        T = binding.values.get("T")
        B = binding.values.get("B")
        if T is not None and T < 0:
            # Shapes compared against T = -1 would only confuse: say what is wrong instead.
            rows = ", ".join(f"{name} has {shape[0]}" for name, shape in shapes.items())
            raise ValueError(
                f"a rollout needs at least one observation (T+1 >= 1 rows): {rows} rows"
            )
        if B == 0:
            problems.append("a rollout needs at least one environment (B >= 1), got B=0")
        if problems and T is not None:
            problems.extend(_per_step_tuple_hints(self, T))
        if infos is not None and B is not None and shapes["infos"][1] is None:
            problems.extend(
                f"infos[{t}] has {len(row)} entries, expected B={B}"
                for t, row in enumerate(infos)
                if len(row) != B
            )
        if (self.truncated is None) != (self.final_values is None):
            given, missing = (
                ("truncated", "final_values")
                if self.final_values is None
                else ("final_values", "truncated")
            )
            problems.append(f"{given} was given without {missing}: give both or neither")
        if problems:
            raise ValueError("\n".join(problems))
        if T is None or B is None:  # pragma: no cover - dones always binds both
            raise ValueError("dones must be [T+1, B]")
        return T, B

    def _check_values(self, outs: Mapping[str, AnyArray]) -> None:
        """Rules across fields that need the shapes to agree first (`outs`: the model outputs)."""
        if self.truncated is not None:
            bad = (self.truncated == 1) & (self.dones[1:] == 0)
            if bad.any():
                t, b = first_true(bad)
                raise ValueError(
                    f"truncated[{t}, {b}] is 1 but dones[{t + 1}, {b}] is 0: a truncated step "
                    "must end its episode (set dones[t+1] = 1 where truncated[t] = 1)"
                )
        if discrete_actions(outs):
            actions = outs["actions"]
            num_actions = outs["actor"].shape[-1]
            bad = (actions < 0) | (actions >= num_actions)
            if bad.any():
                pos = first_true(bad)
                raise ValueError(
                    f"model_outs['actions'] must be in [0, A) with A={num_actions} from "
                    f"model_outs['actor'], got {actions[pos]} at {fmt_index(pos)}"
                )

    # ---------------------------------------------------------------- the seed's API

    @property
    def num_steps(self) -> int:
        """T, the number of steps (rows of `rews`).

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> example_rollout(num_steps=6, num_envs=2).num_steps
            6
        """
        return int(self.rews.shape[0])

    @property
    def batch_size(self) -> int:
        """B, the number of environments.

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> example_rollout(num_steps=6, num_envs=2).batch_size
            2
        """
        return int(self.dones.shape[1])

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
                `model_outs`, `truncated`, `final_values`: what the constructor accepts for
                each (typed by [`RolloutFields`][trajkit.RolloutFields]).

        Returns:
            A new, independent `Rollout`; `self` is unchanged.

        Raises:
            TypeError: For an unknown field name.
            pydantic.ValidationError: If the result would be invalid.

        Examples:
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

    def revalidate(self) -> None:
        """Run every check of construction again, on the rollout as it is now.

        In-place NumPy edits of field arrays (`r.rews[t] -= bonus`, as obs-tower2's GAIL and
        Prierarchy do) are not checked when they happen; call this to check them.
        [`trajkit.save`][trajkit.save] calls it before writing anything.

        Raises:
            pydantic.ValidationError: If a field breaks a rule (the message names it).
            ValueError: If the model outputs are still being appended or filled in.

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> r = example_rollout(num_steps=4, num_envs=2)
            >>> r.revalidate()
            >>> r.rews[1, 0] = float("nan")  # in place: not checked until asked
            >>> r.revalidate()  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            trajkit.RolloutValidationError: rews must be finite, got nan at (t=1, b=0)...
        """
        problem = self.model_outs.incomplete()
        if problem is not None:
            raise ValueError(f"the rollout is incomplete: {problem}")
        self._validate({name: self.__dict__.get(name) for name in self._FIELDS}, copy=False)

    def _complete_outs(self, method: str) -> Mapping[str, AnyArray]:
        """The model-output arrays, or a ValueError when they are still being filled in."""
        problem = self.model_outs.incomplete()
        if problem is not None:
            raise ValueError(f"{method}() needs complete model outputs, but {problem}")
        return self.model_outs.arrays

    def _model_out(self, key: str, method: str) -> AnyArray:
        """Model output `key`, or the `MissingModelOutputError` naming `method`."""
        outs = self._complete_outs(method)
        if key not in outs:
            raise MissingModelOutputError(f"{method}()", key, outs)
        return outs[key]

    def _critic(self, method: str) -> AnyArray:
        """The critic's values for `method`, which computes advantages from them."""
        outs = self._complete_outs(method)
        if "critic" not in outs:
            raise missing_critic(f"{method}()", outs)
        return outs["critic"]

    def value_predictions(self) -> Float32Array:
        """The critic's values at each timestep: `model_outs[t]['critic']`, float32 `[T+1, B]`.

        Raises:
            MissingModelOutputError: If there is no `critic` key (a `KeyError`; the message
                lists the keys present).

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> example_rollout(num_steps=4, num_envs=3).value_predictions().shape
            (5, 3)
        """
        return np.array(self._model_out("critic", "value_predictions"), dtype=np.float32)

    def actions(self) -> Int32Array | Float32Array:
        """The actions taken at each timestep: `model_outs[t]['actions']`, a new array.

        int32 for integer actions (Discrete `[T+1, B]`, MultiDiscrete and MultiBinary
        `[T+1, B, K]`), as in the seed; float32 `[T+1, B, ...]` for continuous (Box) actions.

        Raises:
            MissingModelOutputError: If there is no `actions` key (a `KeyError`).

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> example_rollout(num_steps=4, num_envs=3).actions().dtype
            dtype('int32')
            >>> box = example_rollout(num_steps=4, num_envs=3, action_kind="box")
            >>> box.actions().dtype, box.actions().shape
            (dtype('float32'), (5, 3, 2))
        """
        actions = self._model_out("actions", "actions")
        if actions.dtype.kind == "f":
            return np.array(actions, dtype=np.float32)
        return np.array(actions, dtype=np.int32)

    def log_probs(self) -> Float32Array:
        """Log-probabilities of the actions taken: `model_outs[t]['log_probs']`, float32 `[T+1, B]`.

        Raises:
            MissingModelOutputError: If there is no `log_probs` key (a `KeyError`).

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> example_rollout(num_steps=4, num_envs=3).log_probs().shape
            (5, 3)
        """
        return np.array(self._model_out("log_probs", "log_probs"), dtype=np.float32)

    def logits(self) -> Float32Array:
        """The actor's logits: `model_outs[t]['actor']`, float32 `[T+1, B, A]`.

        Raises:
            MissingModelOutputError: If there is no `actor` key (a `KeyError`).

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> example_rollout(num_steps=4, num_envs=3, num_actions=5).logits().shape
            (5, 3, 5)
        """
        return np.array(self._model_out("actor", "logits"), dtype=np.float32)

    def advantages(self, gamma: float, lam: float) -> Float32Array:
        r"""Generalized advantage estimates, float32 `[T, B]` (Schulman et al. 2015).

        $\hat A_t = \delta_t + \gamma\lambda(1 - d_{t+1})\hat A_{t+1}$ with
        $\delta_t = r_t + \gamma(1 - d_{t+1})V_{t+1} - V_t$, plus $\gamma V^{final}_t$ in
        $\delta_t$ where `truncated[t]` is 1. See [`trajkit.gae`][trajkit.gae].

        Args:
            gamma: Discount, finite, in [0, 1].
            lam: GAE λ, finite, in [0, 1].

        Returns:
            The advantages.

        Raises:
            ValueError: If gamma or lam is not a finite number in [0, 1].
            MissingModelOutputError: If there is no `critic` key (a `KeyError`).

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> r = example_rollout(num_steps=4, num_envs=3)
            >>> targets = r.advantages(0.99, 0.95) + r.value_predictions()[:-1]
            >>> targets.shape, targets.dtype
            ((4, 3), dtype('float32'))
        """
        return _gae.gae(
            self.rews,
            self._critic("advantages"),
            self.dones,
            gamma,
            lam,
            truncated=self.truncated,
            final_values=self.final_values,
        )

    def returns(self, gamma: float, lam: float) -> Float32Array:
        """λ-returns, the PPO value targets: `advantages(gamma, lam) + value_predictions()[:-1]`.

        Args:
            gamma: Discount, finite, in [0, 1].
            lam: GAE λ, finite, in [0, 1].

        Returns:
            float32 `[T, B]`.

        Raises:
            ValueError: If gamma or lam is not a finite number in [0, 1].
            MissingModelOutputError: If there is no `critic` key (a `KeyError`).

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> example_rollout(num_steps=4, num_envs=3).returns(0.99, 0.95).shape
            (4, 3)
        """
        return _gae.lambda_returns(
            self.rews,
            self._critic("returns"),
            self.dones,
            gamma,
            lam,
            truncated=self.truncated,
            final_values=self.final_values,
        )

    def batches(
        self,
        batch_size: int,
        count: int,
        *,
        seed: int | np.random.Generator | random.Random | None = None,
    ) -> Iterator[list[tuple[int, int]]]:
        """Yield `count` batches, each a list of `batch_size` `(timestep, env)` tuples.

        As in the seed, batches are cut from an endless stream of shuffled permutations of all
        (t, b) (see `entries`), so a batch may span two permutations. For array indices, use
        [`minibatches`][trajkit.Rollout.minibatches] or [`trajkit.index_batches`][].

        Args:
            batch_size: Entries per batch, at least 1.
            count: Number of batches, at least 0.
            seed: `None` (the default) shuffles with Python's global `random` exactly as the
                seed did, so `random.seed(s)` reproduces its batches entry for entry; a
                `random.Random` does the same with its own state; an int or a
                `numpy.random.Generator` shuffles with NumPy (faster, independent of `random`).

        Raises:
            ValueError: If batch_size < 1, count < 0, or the rollout is empty (T = 0) and
                count > 0. Raised at the call, not at the first `next()`.
            TypeError: If `seed` is of another type.

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> r = example_rollout(num_steps=2, num_envs=2)
            >>> [sorted(batch) for batch in r.batches(4, 1, seed=0)]
            [[(0, 0), (0, 1), (1, 0), (1, 1)]]
        """
        stream = _mb.obs_tower2_batches(
            self.num_steps, self.batch_size, batch_size, count, seed, method="batches()"
        )
        return _tuple_batches(stream)

    def entries(
        self, *, seed: int | np.random.Generator | random.Random | None = None
    ) -> Iterator[tuple[int, int]]:
        """Yield an endless, shuffled stream of `(timestep, env)` tuples.

        Every consecutive run of T·B entries (from the start) is a permutation of all (t, b).

        Args:
            seed: `None` (the default) shuffles with Python's global `random` exactly as the
                seed did (see [`batches`][trajkit.Rollout.batches]); a `random.Random`, an int
                or a `numpy.random.Generator` as there.

        Raises:
            ValueError: If the rollout has no steps (T = 0), where obs-tower2 would hang.
                Raised at the call, not at the first `next()`.
            TypeError: If `seed` is of another type.

        Examples:
            >>> from itertools import islice
            >>> from trajkit.testing import example_rollout
            >>> r = example_rollout(num_steps=2, num_envs=2)
            >>> sorted(islice(r.entries(seed=1), 4))
            [(0, 0), (0, 1), (1, 0), (1, 1)]
        """
        stream = _mb.obs_tower2_epochs(self.num_steps, self.batch_size, seed, method="entries()")
        return _tuple_entries(stream)

    # ------------------------------------------------------------- trajkit additions

    def episode_stats(self) -> EpisodeStats:
        """Episode ends (terminations and truncations) and the complete episodes' returns.

        See [`trajkit.episode_stats`][trajkit.episode_stats].

        Returns:
            The `EpisodeStats`.

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> r = example_rollout(num_steps=32, num_envs=4, truncation=True)
            >>> stats = r.episode_stats()
            >>> stats.episodes == int(r.dones[1:].sum())
            True
        """
        return episode_stats(self.rews, self.dones, self.truncated)

    def training_arrays(self, gamma: float, lam: float) -> dict[str, ArrayTree]:
        """Every array a PPO step needs, aligned on `[T, B, ...]` (rows 0..T-1).

        Keys: `obses`, `states`, `dones`, `rews`, `advantages`, `returns`, and every
        model-output key (`actions`, `log_probs`, `critic`, `actor`, ...) with one value per
        env: per-step scalar outputs (`[T+1]`, such as GAIL's `prob_pi`) have no entry per
        env, and are left out. The arrays are views where possible, not copies. Nested
        `obses` and `states` keep their structure, with every leaf cut to `[T, B, ...]`.

        Args:
            gamma: Discount, finite, in [0, 1].
            lam: GAE λ, finite, in [0, 1].

        Returns:
            Name to `[T, B, ...]` array.

        Raises:
            MissingModelOutputError: If there is no `critic` (advantages and returns need
                it), as every method that computes them raises.
            ValueError: If a model-output key has the name of a field, or gamma or lam is not
                a finite number in [0, 1].

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> arrays = example_rollout(num_steps=4, num_envs=3).training_arrays(0.99, 0.95)
            >>> sorted(arrays)  # doctest: +NORMALIZE_WHITESPACE
            ['actions', 'actor', 'advantages', 'critic', 'dones', 'log_probs', 'obses',
             'returns', 'rews', 'states']
        """
        return ppo_arrays(self, "training_arrays", gamma, lam)

    def minibatches(
        self,
        minibatch_size: int,
        *,
        gamma: float,
        lam: float,
        epochs: int = 1,
        drop_last: bool = False,
        seed: int | np.random.Generator | None = None,
        normalize_advantages: AdvantageNormalization = None,
    ) -> Iterator[dict[str, ArrayTree]]:
        """Yield shuffled PPO minibatches: every training array gathered at once.

        Advantages and returns are computed once; each epoch is a fresh permutation of all
        (t, b), cut into minibatches of `minibatch_size` (the last one smaller unless
        `drop_last`). Each minibatch maps the names of
        [`training_arrays`][trajkit.Rollout.training_arrays] to `[n, ...]` arrays; nested
        `obses` and `states` come out with the same structure, every leaf gathered.

        Args:
            minibatch_size: Entries per minibatch, at least 1.
            gamma: Discount, finite, in [0, 1].
            lam: GAE λ, finite, in [0, 1].
            epochs: Passes over the data.
            drop_last: Drop each epoch's last, smaller minibatch.
            seed: An int, a `numpy.random.Generator`, or `None` for fresh entropy.
            normalize_advantages: `None` (the default) leaves `advantages` as computed;
                `"rollout"` standardizes them once over the whole rollout (population std);
                `"minibatch"` standardizes each minibatch on its own with the unbiased std,
                as stable-baselines3 and CleanRL do (a minibatch of one is left as is).
                `returns` are never changed.

        Returns:
            An iterator of minibatches, each name to `[n, ...]` array.

        Raises:
            MissingModelOutputError: If there is no `critic` (advantages need it).
            ValueError: If a size argument is not an integer or is below its minimum, if
                `drop_last` would yield nothing, or gamma, lam or `normalize_advantages` is
                invalid.
            TypeError: If `seed` is of another type.

            All raised at the call, before the first minibatch.

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> r = example_rollout(num_steps=4, num_envs=3)
            >>> sizes = [len(mb["advantages"]) for mb in r.minibatches(5, gamma=0.99, lam=0.95)]
            >>> sizes
            [5, 5, 2]
            >>> mb = next(r.minibatches(6, gamma=0.99, lam=0.95, normalize_advantages="minibatch"))
            >>> round(float(mb["advantages"].std(ddof=1)), 4)
            1.0
        """
        per_minibatch = advantage_normalization(normalize_advantages)
        plan = _mb.plan_minibatches(
            self.num_steps, self.batch_size, minibatch_size, epochs=epochs, drop_last=drop_last
        )
        rng = as_generator(seed)
        arrays = ppo_arrays(self, "minibatches", gamma, lam, normalize_advantages)
        rows_of = _mb.as_rows(_tree.flatten_fields(arrays))
        rebuild = _tree.fields_rebuilder(arrays)
        return (
            normalized_minibatch(rebuild(_mb.take_rows(rows_of, rows)), per_minibatch)
            for rows in _mb.minibatch_rows(plan, rng)
        )

    def sequence_minibatches(
        self,
        envs_per_batch: int,
        *,
        gamma: float,
        lam: float,
        epochs: int = 1,
        drop_last: bool = False,
        seed: int | np.random.Generator | None = None,
        normalize_advantages: AdvantageNormalization = None,
    ) -> Iterator[dict[str, ArrayTree]]:
        """Yield minibatches of whole env columns (all T steps) for recurrent policies.

        Each minibatch maps the names of [`training_arrays`][trajkit.Rollout.training_arrays]
        to time-major `[T, n, ...]` arrays for a shuffled set of n envs; `states[0]` holds the
        initial recurrent state and `dones` marks where to reset it. Nested `obses` and
        `states` keep their structure.

        Args:
            envs_per_batch: Envs per minibatch, at least 1.
            gamma: Discount, finite, in [0, 1].
            lam: GAE λ, finite, in [0, 1].
            epochs: Passes over the envs.
            drop_last: Drop each epoch's last, smaller minibatch.
            seed: An int, a `numpy.random.Generator`, or `None` for fresh entropy.
            normalize_advantages: As for [`minibatches`][trajkit.Rollout.minibatches]:
                `None`, `"rollout"` or `"minibatch"` (over the `[T, n]` advantages of each).

        Returns:
            An iterator of minibatches, each name to `[T, n, ...]` array.

        Raises:
            MissingModelOutputError: If there is no `critic`.
            ValueError: If a size argument is invalid, or gamma, lam or
                `normalize_advantages` is. As for
                [`minibatches`][trajkit.Rollout.minibatches], all raised at the call.
            TypeError: If `seed` is of another type.

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> r = example_rollout(num_steps=4, num_envs=3)
            >>> [mb["obses"].shape[:2] for mb in r.sequence_minibatches(2, gamma=0.9, lam=0.9)]
            [(4, 2), (4, 1)]
        """
        per_minibatch = advantage_normalization(normalize_advantages)
        plan = _mb.plan_sequences(
            self.batch_size, envs_per_batch, epochs=epochs, drop_last=drop_last
        )
        rng = as_generator(seed)
        arrays = ppo_arrays(self, "sequence_minibatches", gamma, lam, normalize_advantages)
        flat = _tree.flatten_fields(arrays)
        rebuild = _tree.fields_rebuilder(arrays)
        return (
            normalized_minibatch(rebuild(_mb.gather_sequences(flat, b_idx)), per_minibatch)
            for b_idx in _mb.sequence_rows(plan, rng)
        )

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
        for name in ("states", "obses", "rews", "dones", "truncated", "final_values"):
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


def missing_critic(
    method: str, keys: Iterable[str], owner: str = "this rollout"
) -> MissingModelOutputError:
    """The one error for a missing critic where advantages are computed, whoever computes them.

    Examples:
        >>> print(missing_critic("minibatches()", ["actions"]))  # doctest: +NORMALIZE_WHITESPACE
        minibatches() needs model_outs['critic'] to compute advantages and returns, but this
        rollout has keys ['actions']: record the critic's values as model_outs['critic'], or
        gather your own arrays with trajkit.minibatch_indices and trajkit.gather
    """
    return MissingModelOutputError(
        method,
        "critic",
        keys,
        owner=owner,
        purpose="to compute advantages and returns",
        hint="record the critic's values as model_outs['critic'], or gather your own arrays "
        "with trajkit.minibatch_indices and trajkit.gather",
    )


def ppo_arrays(
    rollout: Rollout,
    method: str,
    gamma: float,
    lam: float,
    normalize: AdvantageNormalization = None,
) -> dict[str, ArrayTree]:
    """The training arrays of `rollout` for `method` (named in every refusal), checked now.

    What every minibatch adapter starts from (`Rollout.minibatches`, `trajkit.torch`,
    `Dataset.minibatches`): a rollout without a `critic` raises `MissingModelOutputError`.
    With `normalize="rollout"` the advantages are standardized over the whole rollout.
    """
    outs = rollout._complete_outs(method)
    T = rollout.num_steps
    critic = rollout._critic(method)
    advantages = _gae.gae(
        rollout.rews,
        critic,
        rollout.dones,
        gamma,
        lam,
        truncated=rollout.truncated,
        final_values=rollout.final_values,
    )
    arrays: dict[str, ArrayTree] = {
        "obses": _tree.map_leaves(lambda leaf: leaf[:T], rollout.obses),
        "states": _tree.map_leaves(lambda leaf: leaf[:T], rollout.states),
        "dones": rollout.dones[:T],
        "rews": rollout.rews,
        "advantages": advantages,
        "returns": advantages + critic[:T],
    }
    for key, array in outs.items():
        if key in arrays:
            raise ValueError(f"model_outs key {key!r} clashes with the field of that name")
        if array.ndim > 1:  # per-step scalars `[T+1]` have no entry per env
            arrays[key] = array[:T]
    if normalize == "rollout":
        arrays["advantages"] = _gae.normalize_advantages(advantages)
    return arrays


def _tuple_batches(
    stream: Iterator[tuple[AnyArray, AnyArray]],
) -> Iterator[list[tuple[int, int]]]:
    """obs-tower2's batches: each pair of index arrays as a list of `(t, b)` tuples."""
    for t_idx, b_idx in stream:
        yield list(zip(t_idx.tolist(), b_idx.tolist(), strict=True))


def _tuple_entries(stream: Iterator[tuple[AnyArray, AnyArray]]) -> Iterator[tuple[int, int]]:
    """obs-tower2's entries: every permutation, one `(t, b)` tuple at a time."""
    for t_idx, b_idx in stream:
        yield from zip(t_idx.tolist(), b_idx.tolist(), strict=True)


def advantage_normalization(mode: object) -> bool:
    """Check a `normalize_advantages=` argument; return whether it asks for per-minibatch."""
    if mode is not None and mode not in ("rollout", "minibatch"):
        raise ValueError(
            f"normalize_advantages must be None, 'rollout' or 'minibatch', got {mode!r}"
        )
    return mode == "minibatch"


def normalized_minibatch(batch: dict[str, ArrayTree], normalize: bool) -> dict[str, ArrayTree]:
    """Standardize a minibatch's advantages with the unbiased std when `normalize`."""
    if normalize:
        batch["advantages"] = _gae.normalize_advantages(batch["advantages"], ddof=1)
    return batch


def _per_step_tuple_hints(rollout: Rollout, T: int) -> list[str]:
    """A hint for a tuple of T+1 per-step arrays, which reads as a Gymnasium Tuple instead."""
    hints = []
    for name in ("obses", "states"):
        value = rollout.__dict__.get(name)
        if isinstance(value, tuple) and len(value) == T + 1 and all(map(_tree.is_leaf, value)):
            hints.append(
                f"{name} is a tuple of {T + 1} arrays, read as a Gymnasium Tuple observation with "
                f"{T + 1} parts; to pass one array per timestep, stack them: "
                f"np.stack({name})"
            )
    return hints


class _Verbatim(str):
    """A string whose repr is itself, to print leaf descriptions inside a dict/tuple repr."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)
