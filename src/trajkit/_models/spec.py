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
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator
from typing_extensions import Self

from trajkit._models.dims import fmt_shape

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

# Known model-output keys: the dtype and number of trailing dimensions `Rollout` gives them.
_KNOWN_OUTPUTS: Mapping[str, tuple[str, int]] = {
    "critic": ("float32", 0),
    "log_probs": ("float32", 0),
    "actor": ("float32", 1),
    "actions": ("int32", 0),
}


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

    Examples:
        >>> OutputSpec(shape=(6,), dtype="float32").model_dump()
        {'shape': (6,), 'dtype': 'float32'}
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    shape: Shape
    """Trailing shape after `[T+1, B]`."""
    dtype: DtypeName
    """Canonical NumPy dtype name."""


@dataclass(frozen=True)
class _Layout:
    """What a spec compares: per-step shapes and dtypes, keys, truncation, T and B."""

    obs_shape: tuple[int, ...]
    obs_dtype: str
    state_shape: tuple[int, ...]
    state_dtype: str
    outputs: dict[str, tuple[tuple[int, ...], str]]
    has_truncation: bool
    num_steps: int | None
    num_envs: int | None


class RolloutSpec(BaseModel):
    """The schema of a rollout: per-step shapes and dtypes, model-output keys, truncation, bounds.

    A spec does not depend on T or B (unless you set bounds on them), so one spec describes every
    recording of a dataset. It is plain JSON: write it with `spec.model_dump_json(indent=2)`,
    read it with `RolloutSpec.model_validate_json(text)`, and get its JSON Schema from
    `RolloutSpec.model_json_schema()`.

    Args:
        obs_shape: Per-step observation shape, after `[T+1, B]`.
        obs_dtype: Observation dtype name (`"uint8"`, `"float32"`, ...).
        state_shape: Per-step state shape, after `[T+1, B]` (`(0,)` for no state).
        state_dtype: Always `"float32"`, as `Rollout` stores states.
        model_outputs: Model-output key to its `OutputSpec`. The keys trajkit knows must have
            the layout `Rollout` gives them: `critic` and `log_probs` float32 `()`, `actor`
            float32 `(A,)`, `actions` int32 `()`.
        has_truncation: Whether `truncated` and `final_values` are present.
        min_steps: Smallest allowed T, or `None`.
        max_steps: Largest allowed T, or `None`.
        min_envs: Smallest allowed B, or `None`.
        max_envs: Largest allowed B, or `None`.

    Raises:
        pydantic.ValidationError: For unknown fields, dtypes outside `DtypeName`, negative
            dimensions, inconsistent bounds, or a known key with the wrong layout.

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
    """

    model_config = ConfigDict(
        extra="forbid", frozen=True, use_attribute_docstrings=True, protected_namespaces=()
    )

    obs_shape: Shape
    """Per-step observation shape, after `[T+1, B]`."""
    obs_dtype: DtypeName
    """Observation dtype (canonical NumPy name)."""
    state_shape: Shape
    """Per-step state shape, after `[T+1, B]`; `(0,)` when the env has no state."""
    state_dtype: Literal["float32"] = "float32"
    """State dtype: always float32."""
    model_outputs: dict[str, OutputSpec]
    """Model-output key to trailing shape (after `[T+1, B]`) and dtype."""
    has_truncation: bool = False
    """Whether `truncated` and `final_values` are present."""
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
        for key, (dtype, ndim) in _KNOWN_OUTPUTS.items():
            out = self.model_outputs.get(key)
            if out is not None and (out.dtype != dtype or len(out.shape) != ndim):
                want = "()" if ndim == 0 else "(A,)"
                problems.append(
                    f"model_outputs[{key!r}] must be {dtype} with trailing shape {want} "
                    f"(as Rollout stores it), got {out.dtype} {fmt_shape(out.shape)}"
                )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @classmethod
    def from_rollout(cls, rollout: Rollout) -> RolloutSpec:
        """The spec a rollout conforms to, with no bounds on T and B.

        Args:
            rollout: Any valid rollout.

        Returns:
            Its per-step shapes and dtypes, model-output keys (in order) and truncation flag.

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
        return cls.model_validate(
            {
                "obs_shape": layout.obs_shape,
                "obs_dtype": layout.obs_dtype,
                "state_shape": layout.state_shape,
                "model_outputs": {
                    key: {"shape": shape, "dtype": dtype}
                    for key, (shape, dtype) in layout.outputs.items()
                },
                "has_truncation": layout.has_truncation,
            }
        )

    def check(self, rollout: Rollout) -> list[str]:
        """Every way `rollout` departs from this spec, as readable sentences.

        Args:
            rollout: The rollout to check.

        Returns:
            The problems, or an empty list when the rollout conforms.

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
                obs_shape=other.obs_shape,
                obs_dtype=other.obs_dtype,
                state_shape=other.state_shape,
                state_dtype=other.state_dtype,
                outputs={k: (o.shape, o.dtype) for k, o in other.model_outputs.items()},
                has_truncation=other.has_truncation,
                num_steps=num_steps,
                num_envs=num_envs,
            )
        )

    def _problems(self, actual: _Layout) -> list[str]:
        problems: list[str] = []

        def compare_array(name: str, shape: tuple[int, ...], dtype: str, spec: str) -> None:
            want_shape, want_dtype = getattr(self, f"{spec}_shape"), getattr(self, f"{spec}_dtype")
            if shape != want_shape:
                problems.append(
                    f"{name}: per-step shape {fmt_shape(shape)}, but the spec says "
                    f"{spec}_shape {fmt_shape(want_shape)}"
                )
            if dtype != want_dtype:
                problems.append(
                    f"{name}: dtype {dtype}, but the spec says {spec}_dtype {want_dtype}"
                )

        compare_array("obses", actual.obs_shape, actual.obs_dtype, "obs")
        compare_array("states", actual.state_shape, actual.state_dtype, "state")
        for key, want in self.model_outputs.items():
            if key not in actual.outputs:
                problems.append(f"model_outs: key {key!r} is in the spec but missing")
                continue
            shape, dtype = actual.outputs[key]
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
        if actual.has_truncation != self.has_truncation:
            problems.append(
                "truncated/final_values are present, but the spec says has_truncation=false"
                if actual.has_truncation
                else "truncated/final_values are missing, but the spec says has_truncation=true"
            )
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


def _layout_of(rollout: Rollout) -> _Layout:
    def tail(array: np.ndarray[Any, Any]) -> tuple[int, ...]:
        return tuple(int(d) for d in array.shape[2:])

    return _Layout(
        obs_shape=tail(rollout.obses),
        obs_dtype=dtype_name(rollout.obses.dtype),
        state_shape=tail(rollout.states),
        state_dtype=dtype_name(rollout.states.dtype),
        outputs={
            key: (tail(array), dtype_name(array.dtype))
            for key, array in rollout.model_outs.arrays.items()
        },
        has_truncation=rollout.truncated is not None,
        num_steps=rollout.num_steps,
        num_envs=rollout.batch_size,
    )
