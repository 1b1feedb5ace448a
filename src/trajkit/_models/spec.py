"""`RolloutSpec`: the shape of a rollout (per-step shapes, dtypes, keys), as JSON-able data.

A spec says what every rollout of a dataset looks like, independently of its length T and its
number of environments B: the per-step shapes and dtypes of observations and states, the
model-output keys with their trailing shapes and dtypes, whether truncation data is present,
and optional bounds on T and B. Saved files carry the spec of their rollout, and a dataset can
pin one spec file and hold every recording to it (`trajkit validate --spec SPEC.json`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, get_args

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from typing_extensions import Self

from trajkit._base.docstrings import described
from trajkit._core import tree as _tree
from trajkit._models.dims import fmt_shape
from trajkit._models.rules import (
    FIELD_RULES,
    OUTPUT_RULES,
    STEP_COLUMNS,
    TREE_FIELDS,
    TreeField,
)

if TYPE_CHECKING:
    from trajkit._models.rollout import Rollout

__all__ = ["SUPPORTED_DTYPES", "DtypeName", "OutputSpec", "RolloutSpec", "dtype_name"]

DtypeName = Literal[
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
]
"""The canonical NumPy names of the dtypes a spec (and a rollout file) can describe."""

SUPPORTED_DTYPES: tuple[str, ...] = get_args(DtypeName)
"""`DtypeName` as a tuple: `("bool", "int8", ..., "float64")`."""

MAX_TRAILING_DIMS = 30
"""The most trailing dimensions a per-step shape may have (32 dimensions with T+1 and B)."""

Shape = Annotated[
    tuple[Annotated[int, Field(ge=0)], ...],
    Field(max_length=MAX_TRAILING_DIMS),
]

_KNOWN_OUTPUTS: Mapping[str, tuple[tuple[str, ...], int | None, str]] = {
    key: (
        rule.stored_dtypes,
        None if rule.per_env is None else len(rule.per_env),
        rule.stored_description(),
    )
    for key, rule in OUTPUT_RULES.items()
    if rule.stored_dtypes is not None
}
"""Model outputs stored in fixed dtypes: (dtypes, per-env ndim, in words), from `OUTPUT_RULES`."""

# The fields of one tree per step, with the prefix of their flat and per-leaf spec fields.
_NESTED_FIELDS: Mapping[TreeField, str] = {name: STEP_COLUMNS[name] for name in TREE_FIELDS}

# Fields of the flat or the nested form, left out of dumps when unused.
_FORM_FIELDS = ("obs_shape", "obs_dtype", "obs_leaves", "state_shape", "state_leaves")

LeafLayout = tuple[tuple[int, ...], str]
"""A leaf's per-step shape and dtype name."""
OutputLayout = tuple[tuple[int, ...], str, bool]
"""A model output's per-step shape, dtype name, and whether it has one value per env."""


def dtype_name(dtype: Any) -> str:
    """The canonical NumPy name of a dtype, without byte order: `"float32"`, `"uint8"`, ...

    Args:
        dtype: Anything `numpy.dtype` accepts.

    Returns:
        `numpy.dtype(dtype).name`.

    Examples:
        >>> import numpy as np
        >>> dtype_name(">f4"), dtype_name(np.uint8), dtype_name(bool)
        ('float32', 'uint8', 'bool')
    """
    return str(np.dtype(dtype).name)


class OutputSpec(BaseModel):
    """The per-step layout of one model output: trailing shape after `[T+1, B]` and dtype.

    Args:
        shape: The trailing shape: `()` for one value per (t, b), `(A,)` for logits.
        dtype: A canonical NumPy dtype name (see `DtypeName`).
        per_env: `False` for a per-step scalar output, stored as `[T+1]` with no B (such as
            obs-tower2 GAIL's `prob_pi`); then `shape` is `()`. Left out of the JSON when
            `True`.

    Examples:
        >>> OutputSpec(shape=(6,), dtype="float32").model_dump()
        {'shape': (6,), 'dtype': 'float32'}
    """

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    shape: Shape
    """Trailing shape after `[T+1, B]`."""
    dtype: DtypeName
    """Canonical NumPy dtype name."""
    per_env: bool = Field(default=True, exclude_if=lambda per_env: per_env is True, repr=False)
    """Whether the output has one value per env (`[T+1, B, ...]`), or one per step (`[T+1]`)."""


@dataclass(frozen=True)
class _Layout:
    """What a spec compares: per-step shapes and dtypes, keys, truncation, T and B."""

    obses: dict[str, LeafLayout]  # rendered leaf path ("" for a flat array) -> layout
    states: dict[str, LeafLayout]
    outputs: dict[str, OutputLayout]
    has_truncation: bool
    has_final_obses: bool
    num_steps: int | None
    num_envs: int | None


class RolloutSpec(BaseModel):
    """The schema of a rollout: per-step shapes and dtypes, model-output keys, truncation, bounds.

    A spec does not depend on T or B (unless you set bounds on them), so one spec describes every
    recording of a dataset. It is plain JSON: write it with `spec.model_dump_json(indent=2)`,
    read it with `RolloutSpec.model_validate_json(text)`, and get its JSON Schema from
    `RolloutSpec.model_json_schema()`.

    Flat observations are described by `obs_shape` and `obs_dtype`; nested ones (Gymnasium
    `Dict`/`Tuple` spaces) by `obs_leaves`, which maps each leaf's path, written as in messages
    without the field name (`"['image']"`, `"[1]['pos']"`), to its `OutputSpec`, in the
    rollout's order. States likewise (`state_shape` or `state_leaves`). The spec of a flat
    rollout dumps to the same JSON as before nested fields existed.

    Args:
        obs_shape: Per-step observation shape, after `[T+1, B]` (flat observations).
        obs_dtype: Observation dtype name (`"uint8"`, `"float32"`, ...; flat observations).
        obs_leaves: Leaf path to per-step shape and dtype (nested observations).
        state_shape: Per-step state shape, after `[T+1, B]` (`(0,)` for no state; flat states).
        state_dtype: Always `"float32"`, as `Rollout` stores states.
        state_leaves: Leaf path to per-step shape and dtype `"float32"` (nested states).
        model_outputs: Model-output key to its `OutputSpec`. The keys trajkit knows must have
            the layout `Rollout` gives them: `critic` and `log_probs` float32 `()`, `actor`
            float32 `(A,)`, `actions` int32 (integer spaces) or float32 (Box), any shape.
        has_truncation: Whether `truncated` and `final_values` are present.
        has_final_obses: Whether `final_obses` is present (laid out as the observations). Left
            out of the JSON when `False`.
        min_steps: Smallest allowed T, or `None`.
        max_steps: Largest allowed T, or `None`.
        min_envs: Smallest allowed B, or `None`.
        max_envs: Largest allowed B, or `None`.

    Raises:
        pydantic.ValidationError: For unknown fields, dtypes outside `DtypeName`, negative
            dimensions, inconsistent bounds, a known key with the wrong layout, both or
            neither of the flat and nested forms of a field, or leaf paths that are not a tree.

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=4, num_envs=2, obs_shape=(3,), keys={"critic"})
        >>> spec = RolloutSpec.from_rollout(r)
        >>> spec.obs_shape, spec.obs_dtype, list(spec.model_outputs)
        ((3,), 'float32', ['critic'])
        >>> spec.check(r)
        []
        >>> pinned = spec.model_copy(update={"obs_dtype": "uint8", "min_steps": 8})
        >>> for problem in pinned.check(r):
        ...     print(problem)
        obses: dtype float32, but the spec says obs_dtype uint8
        T=4 is below the spec's min_steps=8
        >>> RolloutSpec.model_validate_json(spec.model_dump_json()) == spec
        True
        >>> nested = RolloutSpec.from_rollout(example_rollout(nested=True, keys=()))
        >>> {path: leaf.dtype for path, leaf in nested.obs_leaves.items()}
        {"['image']": 'uint8', "['proprio'][0]": 'float32', "['proprio'][1]['goal']": 'float32'}
    """

    model_config: ClassVar[ConfigDict] = ConfigDict(
        extra="forbid",
        frozen=True,
        protected_namespaces=(),
        defer_build=True,  # built on first use, not at import
        # The fields' docstrings describe them; each field is described flat or nested, never
        # both: say so to JSON Schema validators.
        json_schema_extra=described(
            {
                "allOf": [
                    {
                        "oneOf": [
                            {"required": ["obs_shape", "obs_dtype"]},
                            {"required": ["obs_leaves"]},
                        ]
                    },
                    {"oneOf": [{"required": ["state_shape"]}, {"required": ["state_leaves"]}]},
                ]
            }
        ),
    )

    obs_shape: Shape | None = None
    """Per-step observation shape, after `[T+1, B]`; `None` when observations are nested."""
    obs_dtype: DtypeName | None = None
    """Observation dtype (canonical NumPy name); `None` when observations are nested."""
    obs_leaves: dict[str, OutputSpec] | None = None
    """Nested observations: leaf path (`"['image']"`) to per-step shape and dtype, in order."""
    state_shape: Shape | None = None
    """Per-step state shape, after `[T+1, B]`; `(0,)` when the env has no state; `None` when
    states are nested."""
    state_dtype: Literal["float32"] = "float32"
    """State dtype: always float32."""
    state_leaves: dict[str, OutputSpec] | None = None
    """Nested states: leaf path to per-step shape and dtype (always float32), in order."""
    model_outputs: dict[str, OutputSpec]
    """Model-output key to trailing shape (after `[T+1, B]`) and dtype."""
    has_truncation: bool = False
    """Whether `truncated` and `final_values` are present."""
    has_final_obses: bool = Field(
        default=False, exclude_if=lambda present: present is False, repr=False
    )
    """Whether `final_obses`, the true final observations of ended episodes, is present."""
    min_steps: Annotated[int, Field(ge=0)] | None = None
    """Smallest allowed T (number of steps), or `None` for no bound."""
    max_steps: Annotated[int, Field(ge=0)] | None = None
    """Largest allowed T, or `None` for no bound."""
    min_envs: Annotated[int, Field(ge=1)] | None = None
    """Smallest allowed B (number of environments), or `None` for no bound."""
    max_envs: Annotated[int, Field(ge=1)] | None = None
    """Largest allowed B, or `None` for no bound."""

    @model_validator(mode="after")
    def _check_consistent(self) -> Self:
        problems: list[str] = []
        for low, high in (("min_steps", "max_steps"), ("min_envs", "max_envs")):
            lo, hi = getattr(self, low), getattr(self, high)
            if lo is not None and hi is not None and lo > hi:
                problems.append(f"{low}={lo} is greater than {high}={hi}")
        for key, (dtypes, ndim, want) in _KNOWN_OUTPUTS.items():
            out = self.model_outputs.get(key)
            if out is not None and (
                out.dtype not in dtypes or (ndim is not None and len(out.shape) != ndim)
            ):
                problems.append(
                    f"model_outputs[{key!r}] must be {want} (as Rollout stores it), "
                    f"got {out.dtype} {fmt_shape(out.shape)}"
                )
        problems.extend(self._field_problems("obs", with_dtype=True))
        problems.extend(self._field_problems("state", with_dtype=False))
        stored = FIELD_RULES["states"].file_dtype
        for path, leaf in (self.state_leaves or {}).items():
            if leaf.dtype != stored:
                problems.append(f"state_leaves[{path!r}] must be {stored}, got {leaf.dtype}")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _field_problems(self, prefix: str, *, with_dtype: bool) -> list[str]:
        flat = [f"{prefix}_shape"] + ([f"{prefix}_dtype"] if with_dtype else [])
        given = [name for name in flat if getattr(self, name) is not None]
        leaves: dict[str, OutputSpec] | None = getattr(self, f"{prefix}_leaves")
        described = " and ".join(flat)
        if leaves is None:
            if len(given) == len(flat):
                return []
            return [f"give {described} (flat) or {prefix}_leaves (nested)"]
        if given:
            return [f"give {described} (flat) or {prefix}_leaves (nested), not both"]
        try:
            _tree.unflatten_paths((_tree.parse_path(path), None) for path in leaves)
        except ValueError as exc:
            return [f"{prefix}_leaves must be the leaf paths of a dict/tuple structure: {exc}"]
        if "" in leaves:
            return [f"{prefix}_leaves must be the leaf paths of a dict/tuple structure, got ''"]
        return []

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        data = handler(self)
        if isinstance(data, dict):  # only the form in use: flat specs dump as they always did
            for name in _FORM_FIELDS:
                if data.get(name, 0) is None:
                    del data[name]
        return data

    def leaves(self, name: TreeField) -> list[tuple[_tree.Path, OutputSpec]]:
        """The per-step layout of every leaf of `obses` or `states`, in order.

        Args:
            name: A field of one tree per step (`TREE_FIELDS`): `"obses"` or `"states"`.

        Returns:
            `(path, spec)` pairs: one pair with path `()` for a flat field, else the leaf paths
            as `trajkit._core.tree.flatten` gives them.

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> spec = RolloutSpec.from_rollout(example_rollout(nested=True))
            >>> spec.leaves("states")
            [(('h',), OutputSpec(shape=(2,), dtype='float32')),
             (('c',), OutputSpec(shape=(2,), dtype='float32'))]
            >>> RolloutSpec.from_rollout(example_rollout()).leaves("obses")
            [((), OutputSpec(shape=(4,), dtype='float32'))]
        """
        prefix = _NESTED_FIELDS[name]
        nested: dict[str, OutputSpec] | None = getattr(self, f"{prefix}_leaves")
        if nested is not None:
            return [(_tree.parse_path(path), leaf) for path, leaf in nested.items()]
        shape = getattr(self, f"{prefix}_shape")
        return [((), OutputSpec(shape=shape, dtype=getattr(self, f"{prefix}_dtype")))]

    @classmethod
    def from_rollout(cls, rollout: Rollout) -> RolloutSpec:
        """The spec a rollout conforms to, with no bounds on T and B.

        Args:
            rollout: Any valid rollout.

        Returns:
            Its per-step shapes and dtypes (per leaf for nested fields), model-output keys (in
            order) and truncation flag.

        Raises:
            pydantic.ValidationError: If an array has a dtype outside `DtypeName` (such as
                float128), which no spec can describe.

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> spec = RolloutSpec.from_rollout(example_rollout(num_actions=5))
            >>> spec.model_outputs["actor"]
            OutputSpec(shape=(5,), dtype='float32')
        """
        layout = _layout_of(rollout)
        data: dict[str, Any] = {
            "model_outputs": {
                key: {"shape": shape, "dtype": dtype, "per_env": per_env}
                for key, (shape, dtype, per_env) in layout.outputs.items()
            },
            "has_truncation": layout.has_truncation,
            "has_final_obses": layout.has_final_obses,
        }
        for name, prefix in _NESTED_FIELDS.items():
            leaves: dict[str, LeafLayout] = getattr(layout, name)
            if list(leaves) == [""]:
                data[f"{prefix}_shape"], dtype = leaves[""]
                if prefix == "obs":
                    data["obs_dtype"] = dtype
            else:
                data[f"{prefix}_leaves"] = {
                    path: {"shape": shape, "dtype": dtype}
                    for path, (shape, dtype) in leaves.items()
                }
        return cls.model_validate(data)

    def check(self, rollout: Rollout) -> list[str]:
        """Every way `rollout` departs from this spec, as readable sentences.

        Args:
            rollout: The rollout to check.

        Returns:
            The problems, or an empty list when the rollout conforms. Problems with a leaf of
            a nested field name its path, e.g. `obses['image']`.

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> spec = RolloutSpec.from_rollout(example_rollout(keys={"critic", "actions"}))
            >>> for problem in spec.check(example_rollout(keys={"critic"}, truncation=True)):
            ...     print(problem)
            model_outs: key 'actions' is in the spec but missing
            truncated/final_values are present, but the spec says has_truncation=false
        """
        return self._problems(_layout_of(rollout))

    def compare(
        self,
        other: RolloutSpec,
        *,
        num_steps: int | None = None,
        num_envs: int | None = None,
    ) -> list[str]:
        """Every way a rollout described by `other` (with T and B if given) departs from this.

        This checks a recording from its metadata alone, without reading its arrays. Bounds
        of `other` are ignored; `num_steps` and `num_envs` are checked against this spec's.

        Args:
            other: The spec of the rollout, e.g. from a file's metadata.
            num_steps: The rollout's T, or `None` to skip the bounds on T.
            num_envs: The rollout's B, or `None` to skip the bounds on B.

        Returns:
            The problems, or an empty list.

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> spec = RolloutSpec.from_rollout(example_rollout())
            >>> spec.compare(spec, num_steps=4, num_envs=2)
            []
            >>> spec.model_copy(update={"max_envs": 1}).compare(spec, num_envs=2)
            ["B=2 is above the spec's max_envs=1"]
        """
        return self._problems(
            _Layout(
                obses=other._leaf_layouts("obses"),
                states=other._leaf_layouts("states"),
                outputs={k: (o.shape, o.dtype, o.per_env) for k, o in other.model_outputs.items()},
                has_truncation=other.has_truncation,
                has_final_obses=other.has_final_obses,
                num_steps=num_steps,
                num_envs=num_envs,
            )
        )

    def _leaf_layouts(self, name: TreeField) -> dict[str, LeafLayout]:
        return {
            _tree.format_path("", path): (leaf.shape, leaf.dtype)
            for path, leaf in self.leaves(name)
        }

    def _problems(self, actual: _Layout) -> list[str]:
        problems: list[str] = []
        for name, prefix in _NESTED_FIELDS.items():
            problems.extend(
                _compare_leaves(name, prefix, getattr(actual, name), self._leaf_layouts(name))
            )
        problems.extend(self._output_problems(actual))
        if actual.has_truncation != self.has_truncation:
            problems.append(
                "truncated/final_values are present, but the spec says has_truncation=false"
                if actual.has_truncation
                else "truncated/final_values are missing, but the spec says has_truncation=true"
            )
        if actual.has_final_obses != self.has_final_obses:
            problems.append(
                "final_obses is present, but the spec says has_final_obses=false (drop it "
                "with rollout.replace(final_obses=None))"
                if actual.has_final_obses
                else "final_obses is missing, but the spec says has_final_obses=true"
            )
        problems.extend(self._size_problems(actual))
        return problems

    def _output_problems(self, actual: _Layout) -> list[str]:
        """Model outputs missing, extra, or of another shape, dtype or per-env-ness."""
        problems: list[str] = []
        for key, want in self.model_outputs.items():
            if key not in actual.outputs:
                problems.append(f"model_outs: key {key!r} is in the spec but missing")
                continue
            shape, dtype, per_env = actual.outputs[key]
            if per_env != want.per_env:
                problems.append(
                    f"model_outs[{key!r}]: "
                    + ("one value per env" if per_env else "one value per step (no B)")
                    + f", but the spec says per_env={want.per_env}"
                )
            if shape != want.shape:
                problems.append(
                    f"model_outs[{key!r}]: trailing shape {fmt_shape(shape)}, but the spec "
                    f"says {fmt_shape(want.shape)}"
                )
            if dtype != want.dtype:
                problems.append(
                    f"model_outs[{key!r}]: dtype {dtype}, but the spec says {want.dtype}"
                )
        problems.extend(
            f"model_outs: key {key!r} is not in the spec"
            for key in actual.outputs
            if key not in self.model_outputs
        )
        return problems

    def _size_problems(self, actual: _Layout) -> list[str]:
        """T and B outside the spec's bounds."""
        problems: list[str] = []
        for symbol, value, low_name, high_name in (
            ("T", actual.num_steps, "min_steps", "max_steps"),
            ("B", actual.num_envs, "min_envs", "max_envs"),
        ):
            low, high = getattr(self, low_name), getattr(self, high_name)
            if value is None:
                continue
            if low is not None and value < low:
                problems.append(f"{symbol}={value} is below the spec's {low_name}={low}")
            if high is not None and value > high:
                problems.append(f"{symbol}={value} is above the spec's {high_name}={high}")
        return problems


def _compare_leaves(
    name: str, prefix: str, actual: dict[str, LeafLayout], want: dict[str, LeafLayout]
) -> list[str]:
    """Problems of one possibly nested field, naming each leaf by its path."""
    actual_flat, want_flat = list(actual) == [""], list(want) == [""]
    if actual_flat and want_flat:  # the messages of flat specs, unchanged
        (shape, dtype), (want_shape, want_dtype) = actual[""], want[""]
        problems = []
        if shape != want_shape:
            problems.append(
                f"{name}: per-step shape {fmt_shape(shape)}, but the spec says "
                f"{prefix}_shape {fmt_shape(want_shape)}"
            )
        if dtype != want_dtype:
            problems.append(f"{name}: dtype {dtype}, but the spec says {prefix}_dtype {want_dtype}")
        return problems
    if actual_flat != want_flat:

        def describe(leaves: dict[str, LeafLayout]) -> str:
            if list(leaves) == [""]:
                return "an array"
            return "nested (leaves " + ", ".join(name + path for path in leaves) + ")"

        return [f"{name} is {describe(actual)}, but the spec says {describe(want)}"]
    problems = [f"{name + path} is in the spec but missing" for path in want if path not in actual]
    problems.extend(f"{name + path} is not in the spec" for path in actual if path not in want)
    if not problems and list(actual) != list(want):
        problems.append(
            f"{name} has its leaves in the order {list(actual)}, but the spec says {list(want)}"
        )
    for path, (shape, dtype) in actual.items():
        if path not in want:
            continue
        want_shape, want_dtype = want[path]
        if shape != want_shape:
            problems.append(
                f"{name + path}: per-step shape {fmt_shape(shape)}, but the spec says "
                f"{fmt_shape(want_shape)}"
            )
        if dtype != want_dtype:
            problems.append(f"{name + path}: dtype {dtype}, but the spec says {want_dtype}")
    return problems


def _layout_of(rollout: Rollout) -> _Layout:
    def tail(array: np.ndarray[Any, Any]) -> tuple[int, ...]:
        return tuple(int(d) for d in array.shape[2:])

    def leaves(value: Any) -> dict[str, LeafLayout]:
        return {
            _tree.format_path("", path): (tail(leaf), dtype_name(leaf.dtype))
            for path, leaf in _tree.flatten(value)
        }

    return _Layout(
        obses=leaves(rollout.obses),
        states=leaves(rollout.states),
        outputs={
            key: (tail(array), dtype_name(array.dtype), array.ndim > 1)
            for key, array in rollout.model_outs.arrays.items()
        },
        has_truncation=rollout.truncated is not None,
        has_final_obses=rollout.final_obses is not None,
        num_steps=rollout.num_steps,
        num_envs=rollout.batch_size,
    )
