"""The rule table: each field's and model output's dimensions, dtype and value rules.

Every door into trajkit (the constructor, whole-field and per-step assignment, `append`,
`load`, the Arrow/Parquet and Minari importers, `Dataset` and the Gymnasium recorder) checks
values through this module, so a rule is one line in `FIELD_RULES` or `OUTPUT_RULES` and
applies everywhere. Two entry points do the work:

- [`conform`][trajkit._models.rules.conform]: what the constructor stores for a value, converted
  to the rule's dtype (float32, int32, or the value's own real dtype) and checked;
- [`conform_into`][trajkit._models.rules.conform_into]: a value to be stored into an existing
  dtype (a storage row, a Gymnasium space's dtype, a column's recorded dtype), converted only
  where no value changes: no wrap, no overflow to inf, no float-to-int truncation.

Both refuse with a `ValueError` whose message starts with the name given (`rews`,
`model_outs[3]['critic'][1]`, `obses['image']`), then says the rule: `... must be finite`,
`... must hold only 0 and 1`, `... must be integer-valued`, `... must fit in uint8`,
`... beyond float32's range`.

A `Rule` is the schema of its field: the tables other modules need are derived from it
(`Rule.stored_dtypes`, `Rule.file_dtype`, `Rule.arrow_type`, `Rule.per_env`,
`FLOAT32_OUTPUTS`, `PER_ENV_SCALAR_OUTPUTS`), and it owns its fast test beside its full check
(`Rule.passes`, `all_finite`, `within_float32`).

The rules across fields are the table `CROSS_RULES`: each `CrossRule` names the fields whose
values it reads, so that a write into one of them (`rollout.dones[t, b] = 1`) is checked
against every rule that reads it, as the constructor checks the whole rollout
(`rules_reading` derives the list from the table).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType
from typing import Any, Literal, get_args

import numpy as np

from trajkit._base.types import AnyArray
from trajkit._core import tree as _tree
from trajkit._core.episodes import check_truncations, episode_ends
from trajkit._models.arrays import (
    as_float32,
    as_int32,
    as_numeric,
    at,
    check_binary,
    check_finite,
    check_overflow,
    first_true,
    into_int,
)
from trajkit._models.dims import fmt_shape

__all__ = [
    "CROSS_RULES",
    "FIELD_RULES",
    "FLOAT32_OUTPUTS",
    "INT_ACTIONS",
    "OUTPUT_RULES",
    "PER_ENV_SCALAR_OUTPUTS",
    "STEP_COLUMNS",
    "TREE_FIELDS",
    "TreeField",
    "CrossRule",
    "FieldValues",
    "Rule",
    "all_finite",
    "check_action_range",
    "check_truncations",
    "conform",
    "conform_into",
    "discrete_actions",
    "episode_ends",
    "lossless",
    "named_arrays",
    "no_states",
    "output_key",
    "output_name",
    "output_rule",
    "rules_reading",
    "stray_bool_byte",
    "within_float32",
]

DType = Literal["float32", "real", "action"]

_F32 = np.dtype(np.float32)
INT_ACTIONS = np.dtype(np.int32)
"""How integer actions are stored (Discrete, MultiDiscrete, MultiBinary); Box ones as float32."""
_F32_MAX = float(np.finfo(np.float32).max)
_F32_EXACT = 1 << 24  # the largest integer magnitude float32 holds with every integer below


_STORED_DTYPES = {"float32": ("float32",), "action": (INT_ACTIONS.name, "float32")}
"""What each declared `dtype` of a rule is stored as (`Rule.stored_dtypes`); others are kept."""


@dataclass(frozen=True)
class Rule:
    """The rules of one field or model output.

    Attributes:
        dims: Its dimensions, e.g. `"T+1 B ..."` (see `trajkit._models.dims`).
        dtype: What it is stored as: `"float32"`; `"real"` (any real dtype, kept as given);
            `"action"` (int32 for integer and Discrete actions, float32 for Box actions).
        finite: NaN and ±inf are refused.
        flag: Only 0 and 1 are accepted (bool too).
        nested: It may be a dict/tuple tree of arrays (Gymnasium `Dict` and `Tuple` spaces).
        optional: It may be `None`.
        min_ndim: The fewest dimensions of one array (or leaf) as given.
        column: Its name for one step's value in tables of steps (Arrow, Ray and transition
            columns; the spec's `obs_`/`state_` fields): `obs`, `reward`, `action`, ...
    """

    dims: str
    dtype: DType
    finite: bool = False
    flag: bool = False
    nested: bool = False
    optional: bool = False
    min_ndim: int = 1
    column: str | None = None

    @property
    def stored_dtypes(self) -> tuple[str, ...] | None:
        """The dtypes it is stored (and saved) as, or `None` for any real dtype (kept).

        Examples:
            >>> OUTPUT_RULES["actions"].stored_dtypes, FIELD_RULES["obses"].stored_dtypes
            (('int32', 'float32'), None)
        """
        return _STORED_DTYPES.get(self.dtype)

    @property
    def file_dtype(self) -> str | None:
        """The dtype of its `.npy` member in a saved file, or `None` where it is the array's own.

        Examples:
            >>> FIELD_RULES["rews"].file_dtype, FIELD_RULES["obses"].file_dtype
            ('float32', None)
        """
        dtypes = self.stored_dtypes
        return dtypes[0] if dtypes is not None and len(dtypes) == 1 else None

    @property
    def arrow_type(self) -> str | None:
        """Its Arrow/Parquet column type (flags are `bool`), or `None` where it is the array's own.

        Examples:
            >>> FIELD_RULES["rews"].arrow_type, FIELD_RULES["dones"].arrow_type
            ('float32', 'bool')
        """
        return "bool" if self.flag else self.file_dtype

    @property
    def per_env(self) -> tuple[str, ...] | None:
        """The symbols of its dims after `T+1 B` (or `T B`), or `None` when they are free (`...`).

        Examples:
            >>> OUTPUT_RULES["critic"].per_env, OUTPUT_RULES["actor"].per_env
            ((), ('A',))
            >>> OUTPUT_RULES["actions"].per_env is None
            True
        """
        rest = self.dims.split()[2:]
        return None if "..." in rest else tuple(rest)

    def stored_description(self) -> str:
        """How a `Rollout` stores it, in words, for messages (`float32 with trailing shape ()`).

        Examples:
            >>> OUTPUT_RULES["actor"].stored_description()
            'float32 with trailing shape (A,)'
        """
        if self.dtype == "action":
            return "int32 (integer spaces) or float32 (Box)"
        per_env = self.per_env
        shape = "(...)" if per_env is None else "(" + ", ".join(per_env) + ",)" if per_env else "()"
        return f"{self.dtype} with trailing shape {shape}"

    def passes(self, value: Any, dtype: np.dtype[Any]) -> bool:
        """The rule's fast test: whether `value` surely passes `conform_into(self, dtype, ...)`.

        A constant number of cheap operations; `False` means "run the full check", which
        names the problem (it may still pass). Covers the writes of a collection loop: a
        Python number, or a C-contiguous float64/float32 array, into float32 storage; an
        array of the storage's own dtype.

        Examples:
            >>> f32 = np.dtype(np.float32)
            >>> FIELD_RULES["rews"].passes(0.5, f32), FIELD_RULES["rews"].passes(1e300, f32)
            (True, False)
            >>> FIELD_RULES["dones"].passes(1, f32), FIELD_RULES["dones"].passes(2, f32)
            (True, False)
        """
        if type(value) is float or type(value) is int:
            if self.flag:
                return value == 0 or value == 1
            limit = _F32_MAX if type(value) is float else _F32_EXACT  # ints: stored exactly
            return dtype == _F32 and -limit <= value <= limit
        if type(value) is not np.ndarray or self.flag:
            return False
        if value.dtype == dtype:  # (a float of the stored dtype: finite is the whole test)
            if dtype.kind in "iub" or not self.finite:
                return True
            return dtype.kind == "f" and _within(value, float(np.finfo(dtype).max))
        if dtype == _F32 and value.dtype.char in "fd":
            return within_float32(value)
        return False

    def constrains(self, dtype: np.dtype[Any]) -> bool:
        """Whether some value of `dtype` breaks the rule (else a value of it needs no check).

        Examples:
            >>> obses, dones = FIELD_RULES["obses"], FIELD_RULES["dones"]
            >>> obses.constrains(np.dtype(np.uint8)), obses.constrains(np.dtype(np.float32))
            (False, True)
            >>> dones.constrains(np.dtype(np.float32))
            True
        """
        return (self.flag and dtype.kind != "b") or (self.finite and dtype.kind not in "biu")

    def describe(self) -> str:
        """The rule in words, as the Validation page lists it.

        Examples:
            >>> FIELD_RULES["dones"].describe()
            'T+1 B; stored as float32; only 0 and 1'
        """
        stored = {
            "float32": "stored as float32",
            "real": "any real dtype, kept",
            "action": "int32 (integer, Discrete) or float32 (Box)",
        }[self.dtype]
        parts = [self.dims, stored]
        if self.finite:
            parts.append("finite")
        if self.flag:
            parts.append("only 0 and 1")
        if self.nested:
            parts.append("may be nested")
        if self.optional:
            parts.append("optional")
        return "; ".join(parts)


FIELD_RULES: Mapping[str, Rule] = MappingProxyType(
    {
        "states": Rule(
            "T+1 B ...", "float32", finite=True, nested=True, min_ndim=2, column="state"
        ),
        "obses": Rule("T+1 B ...", "real", finite=True, nested=True, column="obs"),
        "rews": Rule("T B", "float32", finite=True, column="reward"),
        "dones": Rule("T+1 B", "float32", flag=True),
        "truncated": Rule("T B", "float32", flag=True, optional=True, column="truncated"),
        "final_values": Rule("T B", "float32", finite=True, optional=True, column="final_value"),
        "final_obses": Rule("E ...", "real", finite=True, nested=True, optional=True),
    }
)
"""The array fields of a `Rollout` and their rules (`infos` are T rows of B JSON mappings).

`E` is the number of episode ends, the (t, b) with `dones[t+1] == 1`."""

OUTPUT_RULES: Mapping[str, Rule] = MappingProxyType(
    {
        "critic": Rule("T+1 B", "float32", finite=True, column="value"),
        "log_probs": Rule("T+1 B", "float32", finite=True, column="log_prob"),
        "actor": Rule("T+1 B A", "float32", finite=True),
        "actions": Rule("T+1 B ...", "action", finite=True, column="action"),
        "*": Rule("T+1 B ...", "real"),
        "*scalar": Rule("T+1", "real"),
    }
)
"""The model outputs' rules. `*` applies to other keys; `*scalar` to other keys with one value
per step (no B), such as obs-tower2 GAIL's `prob_pi`, stored as `[T+1]`."""


TreeField = Literal["obses", "states"]

TREE_FIELDS: tuple[TreeField, ...] = get_args(TreeField)
"""The fields with one tree per step, as `TreeField` types them for callers (a test holds them
to the required `nested` rules of `FIELD_RULES`); `final_obses` is laid out as `obses`."""

STEP_COLUMNS: Mapping[str, str] = MappingProxyType(
    {name: rule.column for name, rule in {**FIELD_RULES, **OUTPUT_RULES}.items() if rule.column}
)
"""Each field's and model output's name in tables of steps (`Rule.column`): `rews` -> `reward`."""


def named_arrays(rollout: Any) -> list[tuple[str, AnyArray]]:
    """Every array of a rollout as messages name it: set fields in table order, then outputs."""
    named = [
        (_tree.format_path(name, path), leaf)
        for name in FIELD_RULES
        for path, leaf in _tree.flatten(getattr(rollout, name))
        if leaf is not None
    ]
    return named + [(output_name(k), a) for k, a in rollout.model_outs.arrays.items()]


def no_states(T: int, B: int) -> AnyArray:
    """The `states` of a rollout that records none: `(T+1, B, 0)`, in the rule's dtype."""
    return np.zeros((T + 1, B, 0), FIELD_RULES["states"].file_dtype)


def stray_bool_byte(array: AnyArray) -> int | None:
    """The flat index of a bool's byte other than 0 and 1 (made by `.view(bool)`), or `None`.

    Such a "bool" compares unlike `True`: files and Arrow cells holding one are refused.
    """
    raw = array.reshape(-1).view(np.uint8)
    if not raw.size or int(raw.max()) <= 1:
        return None
    return int(np.argmax(raw > 1))


def output_rule(key: str, ndim: int | None = None) -> Rule:
    """The rule of model output `key`; `ndim` (of the stacked array) tells `*scalar` apart.

    Examples:
        >>> output_rule("critic").dims, output_rule("prob_pi", ndim=1).dims
        ('T+1 B', 'T+1')
    """
    rule = OUTPUT_RULES.get(key)
    if rule is not None:
        return rule
    return OUTPUT_RULES["*scalar" if ndim == 1 else "*"]


FLOAT32_OUTPUTS: tuple[str, ...] = tuple(
    key for key, rule in OUTPUT_RULES.items() if rule.dtype == "float32"
)
"""The model outputs stored as float32 (`critic`, `log_probs`, `actor`), from `OUTPUT_RULES`."""

PER_ENV_SCALAR_OUTPUTS: tuple[str, ...] = tuple(
    key for key, rule in OUTPUT_RULES.items() if rule.per_env == () and not key.startswith("*")
)
"""The model outputs with one value per env and step (`[T+1, B]`: `critic`, `log_probs`)."""


def all_finite(array: AnyArray) -> bool:
    """The `finite` rule's fast test: one sum, finite exactly when every value is (or overflow).

    `False` also where finite values overflow the sum: the full check then decides. Cheaper
    than `isfinite` on the small arrays of one step (the recorder's gate runs it per leaf).

    Examples:
        >>> all_finite(np.array([1.0, 2.0])), all_finite(np.array([1.0, np.nan]))
        (True, False)
    """
    # No `np.errstate` here: it costs more than the sum (this runs per leaf per recorded
    # step). A sum of +inf and -inf warns (invalid value) before the full check refuses it.
    return math.isfinite(np.add.reduce(array, axis=None))


def within_float32(array: AnyArray) -> bool:
    """The fast test of a float32 rule for wider floats: every value finite and in range.

    Examples:
        >>> within_float32(np.array([1.0, -3e38])), within_float32(np.array([1e300]))
        (True, False)
    """
    return _within(array, _F32_MAX)


def _within(array: AnyArray, limit: float) -> bool:
    """Whether every value's magnitude is at most `limit` (NaN fails); never warns."""
    return bool(np.maximum.reduce(np.abs(array), axis=None, initial=0.0) <= limit)


def conform(
    rule: Rule,
    value: Any,
    name: str,
    *,
    copy: bool = True,
    axes: str = "tb",
    min_ndim: int | None = None,
    discrete: bool = False,
) -> AnyArray:
    """`value` as the constructor stores it under `rule` (one array or leaf), checked.

    Args:
        rule: The field's or output's rule.
        value: An array or nested list.
        name: The name that starts every message (`rews`, `obses['image']`, ...).
        copy: Whether to copy where no conversion is needed.
        axes: One letter per leading axis, to name a position (`(t=3, b=1)`).
        min_ndim: Overrides the rule's `min_ndim` (0 for one step's row of an output).
        discrete: For `actions`: float values are Discrete action indices (next to logits
            of one more dimension) and become int32.

    Returns:
        The array, of the rule's dtype.

    Raises:
        ValueError: Naming `name`, for a value the rule refuses.

    Examples:
        >>> conform(FIELD_RULES["dones"], [[1, 0], [0, 0]], "dones").dtype
        dtype('float32')
        >>> conform(FIELD_RULES["obses"], [[0.0, float("nan")]], "obses")
        Traceback (most recent call last):
        ...
        ValueError: obses must be finite, got nan at (t=0, b=1)
    """
    ndim = rule.min_ndim if min_ndim is None else min_ndim
    if rule.dtype == "float32":
        binary = rule.flag and getattr(value, "dtype", None) != np.bool_
        return as_float32(
            value, name, copy=copy, min_ndim=ndim, finite=rule.finite, binary=binary, axes=axes
        )
    if rule.dtype == "action":
        array = as_numeric(value, name, copy=False, min_ndim=ndim)
        if array.dtype.kind == "b":  # MultiBinary flags given as bool
            return array.astype(INT_ACTIONS)
        if array.dtype.kind in "iu" or discrete:
            return as_int32(array, name, copy=copy, min_ndim=ndim, axes=axes)
        return as_float32(array, name, copy=copy, min_ndim=ndim, finite=True, axes=axes)
    array = as_numeric(value, name, copy=copy, min_ndim=ndim)
    if rule.finite:
        check_finite(array, name, axes)
    if rule.flag:
        check_binary(array, name)
    return array


def lossless(value: Any, dtype: np.dtype[Any], name: str, *, axes: str = "tb") -> AnyArray:
    """`value` as an array of `dtype`, refused where the conversion would change a value.

    Refused: values beyond the range of an integer `dtype` (they would wrap), floats that
    are not integer-valued or not finite into an integer `dtype` (they would be truncated),
    finite values beyond a float `dtype`'s range (they would become inf), and values other
    than 0 and 1 into bool, integers that a float `dtype` cannot hold exactly. Smaller floats
    into wider ones, and integers into floats that hold them, pass; a wider float into a
    narrower one is rounded to its precision (that is not a change of value; overflow is).

    Examples:
        >>> lossless([3, 250], np.dtype(np.uint8), "obses").tolist()
        [3, 250]
        >>> lossless([3, 300], np.dtype(np.uint8), "obses")
        Traceback (most recent call last):
        ...
        ValueError: obses must fit in uint8 [0, 255], got 300 at (t=1)
        >>> lossless([1.9], np.dtype(np.int64), "actions")
        Traceback (most recent call last):
        ...
        ValueError: actions must be integer-valued, got 1.9 at (t=0)
    """
    dtype = np.dtype(dtype)
    array = as_numeric(value, name, copy=False, min_ndim=0)
    if array.dtype == dtype:
        return array
    kind = dtype.kind
    if kind == "b":
        check_binary(array, name, axes)
        return array.astype(dtype)
    if kind == "f":
        return _into_float(array, dtype, name, axes)
    if kind in "iu":
        return into_int(array, dtype, name, axes)
    raise ValueError(f"{name} cannot be stored as {dtype}: not a real numeric dtype")


def _into_float(array: AnyArray, dtype: np.dtype[Any], name: str, axes: str) -> AnyArray:
    """`lossless` into a float dtype: no finite value becomes inf, no integer is rounded."""
    if array.dtype.kind == "f" and array.dtype.itemsize > dtype.itemsize:
        with np.errstate(over="ignore"):
            cast = array.astype(dtype)
        check_overflow(array, cast, name, axes)
        return cast
    with np.errstate(over="ignore"):  # (an integer beyond a small float's range: refused below)
        cast = array.astype(dtype)
    if array.dtype.kind in "iu" and array.dtype.itemsize * 8 > np.finfo(dtype).nmant + 1:
        with np.errstate(invalid="ignore", over="ignore"):  # (a wrong round trip is refused)
            inexact = cast.astype(array.dtype) != array
        if inexact.any():
            pos = first_true(inexact) if inexact.ndim else ()
            raise ValueError(
                f"{name} must be exactly representable in {dtype}, got "
                f"{array[pos].item()!r}{at(pos, axes)} (it would be rounded)"
            )
    return cast


def conform_into(
    rule: Rule, dtype: np.dtype[Any], value: Any, name: str, *, axes: str = "tb"
) -> AnyArray:
    """`value` to be stored into an existing array of `dtype`, under `rule`'s value checks.

    The value is converted only where no value changes (see `lossless`), then checked as
    `rule` says (finite, 0/1). Use it wherever a door writes into storage that already has
    a dtype: a model output's row, a Gymnasium space's dtype, an imported column.

    Examples:
        >>> conform_into(OUTPUT_RULES["critic"], np.dtype(np.float32), [1e300], "critic")
        ... # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: critic holds 1e+300 at (t=0), beyond float32's range ...
    """
    array = as_numeric(value, name, copy=False, min_ndim=0)
    if rule.finite:
        check_finite(array, name, axes)
    converted = lossless(array, dtype, name, axes=axes)
    if rule.flag and array.dtype != np.bool_:  # (booleans are 0 and 1 in any dtype)
        check_binary(converted, name, axes)
    return converted


# --------------------------------------------------------------------------------------------
# Rules across fields
# --------------------------------------------------------------------------------------------

FieldValues = Mapping[str, Any]
"""A rollout's values by name, as the rules across fields read them: the fields (`dones`,
`final_obses`, ...; `None` where absent) and the model outputs as `model_outs['key']`."""


@cache
def output_name(key: str) -> str:
    """The name of model output `key` in messages and in `FieldValues`: `model_outs['critic']`.

    Examples:
        >>> output_name("actions")
        "model_outs['actions']"
    """
    name = f"model_outs[{key!r}]"
    _OUTPUT_KEYS[name] = key
    return name


_OUTPUT_KEYS: dict[str, str] = {}


def output_key(name: str) -> str | None:
    """The key of a model output's name (`output_name`'s inverse), or `None` for another name.

    Examples:
        >>> output_key(output_name("critic")), output_key("rews")
        ('critic', None)
    """
    return _OUTPUT_KEYS.get(name)


_ACTIONS, _ACTOR = output_name("actions"), output_name("actor")


def discrete_actions(arrays: Mapping[str, Any], lead: int = 2) -> bool:
    """Whether `arrays` hold Discrete actions: `actions` `[T+1, B]`, `actor` `[T+1, B, A]`.

    Only then are the actions indices into the logits, checked to lie in `[0, A)`. `arrays`
    maps model-output keys (`actions`) to arrays with `lead` leading dimensions: 2 for the
    stacked `[T+1, B, ...]`, 1 for one step's `[B, ...]`.

    Examples:
        >>> discrete_actions({"actions": np.zeros((3, 2)), "actor": np.zeros((3, 2, 4))})
        True
        >>> discrete_actions({"actions": np.zeros((3, 2, 6)), "actor": np.zeros((3, 2, 12))})
        False
    """
    actions, actor = arrays.get("actions"), arrays.get("actor")
    return actions is not None and actor is not None and actions.ndim == lead == actor.ndim - 1


def check_action_range(actions: AnyArray, num_actions: int, name: str, axes: str = "tb") -> None:
    """The rule of Discrete actions next to `actor` logits of width A: each in `[0, A)`.

    Raises:
        ValueError: Naming `name`, the first action out of range and its position.

    Examples:
        >>> check_action_range(np.array([[0, 2], [1, 3]]), 3, "model_outs['actions']")
        Traceback (most recent call last):
        ...
        ValueError: model_outs['actions'] must be in [0, A) with A=3 from model_outs['actor'], \
got 3 at (t=1, b=1)
    """
    bad = (actions < 0) | (actions >= num_actions)
    if np.logical_or.reduce(bad, axis=None):
        pos = first_true(bad) if bad.ndim else ()
        raise ValueError(
            f"{name} must be in [0, A) with A={num_actions} from {_ACTOR}, "
            f"got {actions[pos].item()}{at(pos, axes)}"
        )


@dataclass(frozen=True)
class CrossRule:
    """A rule across fields: the fields whose values it reads, and its check.

    Attributes:
        text: The rule in words, as the Validation page lists it.
        reads: The fields (model outputs as `model_outs['key']`) whose values it reads. A
            write into one of them is checked against the rule as construction checks it;
            what it compares of other fields (shapes, dtypes, structure) no write changes.
        applies: Whether the rule applies to these values (the fields it needs are present).
        check: The constructor's check of the whole rollout: a `ValueError` with the rule's
            message.
        check_written: For a rule that holds value by value in the field written (each
            Discrete action in its range), the check of written values alone:
            `(values, written, name, axes)`; `None` where the whole field must be checked.
    """

    text: str
    reads: tuple[str, ...]
    applies: Callable[[FieldValues], bool]
    check: Callable[[FieldValues], None]
    check_written: Callable[[FieldValues, AnyArray, str, str], None] | None = None


def _is_discrete(values: FieldValues) -> bool:
    return discrete_actions({"actions": values.get(_ACTIONS), "actor": values.get(_ACTOR)})


def _actions_in_range(values: FieldValues) -> None:
    check_action_range(values[_ACTIONS], values[_ACTOR].shape[-1], _ACTIONS)


def _written_actions_in_range(values: FieldValues, written: AnyArray, name: str, axes: str) -> None:
    check_action_range(written, values[_ACTOR].shape[-1], name, axes)


def _final_obses_per_episode_end(values: FieldValues) -> None:
    """`final_obses`: one entry per episode end, with the leaves, dtypes and shapes of `obses`."""
    want = _tree.flatten(values["obses"])
    got = _tree.flatten(values["final_obses"])
    want_paths = [path for path, _ in want]
    got_paths = [path for path, _ in got]
    if got_paths != want_paths:

        def describe(paths: list[Any]) -> str:
            if paths == [()]:
                return "an array"
            return "nested (leaves " + ", ".join(_tree.format_path("", p) for p in paths) + ")"

        raise ValueError(
            f"final_obses must have the structure of obses: obses is {describe(want_paths)}, "
            f"final_obses is {describe(got_paths)}"
        )
    ends = int(np.count_nonzero(episode_ends(values["dones"])))
    for (path, obs), (_, leaf) in zip(want, got, strict=True):
        name = _tree.format_path("final_obses", path)
        obs_name = _tree.format_path("obses", path)
        if leaf.shape[:1] != (ends,):
            raise ValueError(
                f"{name} has {leaf.shape[0] if leaf.ndim else 0} entries (shape "
                f"{fmt_shape(leaf.shape)}), expected E={ends}: one per episode end, the (t, b) "
                "with dones[t+1] = 1, in the order of np.nonzero(dones[1:] == 1)"
            )
        if leaf.shape[1:] != obs.shape[2:]:
            raise ValueError(
                f"{name} has per-step shape {fmt_shape(leaf.shape[1:])}, expected "
                f"{fmt_shape(obs.shape[2:])} as {obs_name}"
            )
        if leaf.dtype.name != obs.dtype.name:  # (byte order aside)
            raise ValueError(
                f"{name} has dtype {leaf.dtype.name}, expected {obs.dtype.name} as {obs_name}; "
                f"convert it with .astype(np.{obs.dtype.name})"
            )


CROSS_RULES: tuple[CrossRule, ...] = (
    CrossRule(
        "a truncated step ends its episode: truncated[t] = 1 needs dones[t+1] = 1",
        reads=("truncated", "dones"),
        applies=lambda values: values.get("truncated") is not None,
        check=lambda values: check_truncations(values["truncated"], values["dones"]),
    ),
    CrossRule(
        "Discrete actions ([T+1, B], next to actor logits [T+1, B, A]) lie in [0, A)",
        reads=(_ACTIONS,),
        applies=_is_discrete,
        check=_actions_in_range,
        check_written=_written_actions_in_range,
    ),
    CrossRule(
        "final_obses has one entry per episode end (dones[t+1] = 1), laid out as obses",
        reads=("dones", "final_obses"),
        applies=lambda values: values.get("final_obses") is not None,
        check=_final_obses_per_episode_end,
    ),
)
"""The rules across fields, in the order the constructor checks them (after the fields and
their shapes). The agreement of shapes on T and B is the dimension table's (`Rule.dims`)."""


@cache
def rules_reading(name: str) -> tuple[CrossRule, ...]:
    """The rules across fields that read the values of field `name` (or `model_outs['key']`).

    A write into the field is checked against these, derived from `CROSS_RULES`.

    Examples:
        >>> [rule.reads for rule in rules_reading("dones")]
        [('truncated', 'dones'), ('dones', 'final_obses')]
        >>> rules_reading("rews")
        ()
    """
    return tuple(rule for rule in CROSS_RULES if name in rule.reads)
