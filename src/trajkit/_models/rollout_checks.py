"""A rollout's checks: each field's validator, and the rules across fields (T, B, values).

`Rollout` runs `FIELD_CHECKS` on every field (directly, or through pydantic with
`field_validator`), then `cross_check`: the fields' shapes must agree on T and B, and the
rules across fields of the rule table (`trajkit._models.rules.CROSS_RULES`: truncation ends
an episode, Discrete actions within the actor's width, one final observation per episode
end) hold. It then links the guards of the stored arrays to the rollout, so that a write
into a field is checked against the rules across fields that read it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeVar

import numpy as np
from pydantic import PlainValidator, ValidationInfo

from trajkit._base.types import AnyArray
from trajkit._core import tree as _tree
from trajkit._models.checked import CheckedArray, checked, guard_of
from trajkit._models.dims import DimSpec, Shape, bind_dims
from trajkit._models.field_types import InfoRow, InfoRows, InfoTable, RolloutLike
from trajkit._models.guards import FieldGuard, Link, guard_field
from trajkit._models.model_outputs import ModelOutputs, coerce_model_outs
from trajkit._models.rules import (
    CROSS_RULES,
    FIELD_RULES,
    OUTPUT_RULES,
    TREE_FIELDS,
    FieldValues,
    conform,
    output_key,
    output_rule,
    rules_reading,
)

__all__ = [
    "FIELDS",
    "FIELD_CHECKS",
    "FIELD_DIMS",
    "MODEL_OUTPUT_DIMS",
    "cross_check",
    "field_values",
    "field_validator",
    "info_rows",
]

FIELD_DIMS: Mapping[str, str] = MappingProxyType(
    {"infos": "T B", **{name: rule.dims for name, rule in FIELD_RULES.items()}}
)
"""The declared dimensions of every field, from the rule table (`trajkit._models.rules`).

`E` (of `final_obses`) is the number of episode ends: the (t, b) with `dones[t+1] = 1`."""

MODEL_OUTPUT_DIMS: Mapping[str, str] = MappingProxyType(
    {key: rule.dims for key, rule in OUTPUT_RULES.items()}
)
"""The declared dimensions of model outputs; `*` applies to keys with no entry of their own,
`*scalar` to such keys with one value per step (`[T+1]`, no B)."""

_SPECS = {name: DimSpec.parse(text) for name, text in FIELD_DIMS.items()}
_OUT_SPECS = {text: DimSpec.parse(text) for text in MODEL_OUTPUT_DIMS.values()}
_ROWS_ONLY = DimSpec.parse("T+1")
_OPTIONAL_FLAT = tuple(
    name
    for name, rule in FIELD_RULES.items()
    if rule.optional and not rule.nested and rule.dims.split()[0].startswith("T")
)
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


def _copying(info: ValidationInfo) -> bool:
    return bool(info.context.get("copy", True)) if isinstance(info.context, dict) else True


def _array_check(name: str) -> Callable[[Any, bool], Any]:
    """The validator of array field `name`, from its rule in `FIELD_RULES`."""
    rule = FIELD_RULES[name]
    axes = "".join(dim.symbol.lower() for dim in DimSpec.parse(rule.dims).dims)  # `(t=3, b=1)`

    def validate_field(value: Any, copy: bool) -> Any:
        if value is None and rule.optional:
            return None
        if isinstance(value, np.ndarray) or not rule.nested:  # the common flat case
            stored = conform(rule, value, name, copy=copy, axes=axes)
            return checked(stored, FieldGuard(stored, rule, name, axes))

        def leaf_check(path: tuple[Any, ...], leaf: Any) -> Any:
            leaf_name = _tree.format_path(name, path)
            stored = conform(rule, leaf, leaf_name, copy=copy, axes=axes)
            return guard_field(stored, rule, leaf_name, axes, name)

        return _tree.map_with_path(leaf_check, _tree.normalize(value, name))

    validate_field.__name__ = f"_v_{name}"
    return validate_field


def _v_model_outs(value: Any, copy: bool) -> ModelOutputs:
    return coerce_model_outs(value, copy=copy)


def _v_infos(value: Any, copy: bool) -> InfoRows | None:
    if value is None:
        return None
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise ValueError(
            f"infos must be a list of T rows of B mappings, got {type(value).__name__}"
        )
    return InfoTable(_info_row(t, row) for t, row in enumerate(value))


def _info_row(t: int, row: Any) -> InfoRow:
    """Row t of `infos`, checked: a new row of dicts, of fixed length."""
    if type(row) in _LISTS and set(map(type, row)) <= {dict}:  # the common case, at C speed
        return InfoRow(row)
    if isinstance(row, str | bytes | Mapping) or not isinstance(row, Sequence):
        raise ValueError(f"infos[{t}] must be a list of B mappings, got {type(row).__name__}")
    for b, item in enumerate(row):
        if not isinstance(item, Mapping):
            raise ValueError(f"infos[{t}][{b}] must be a mapping, got {type(item).__name__}")
    return InfoRow(item if isinstance(item, dict) else dict(item) for item in row)


_LISTS = (list, InfoRow)


def info_rows(T: int, B: int) -> InfoRows:
    """T rows of B empty dicts: the infos of a rollout given none."""
    return InfoTable(InfoRow({} for _ in range(B)) for _ in range(T))


FIELD_CHECKS: Mapping[str, Callable[[Any, bool], Any]] = MappingProxyType(
    {
        **{name: _array_check(name) for name, rule in FIELD_RULES.items() if not rule.optional},
        "infos": _v_infos,
        "model_outs": _v_model_outs,
        **{name: _array_check(name) for name, rule in FIELD_RULES.items() if rule.optional},
    }
)
"""Each field's validator (the value, and whether to copy it), in declaration order: the
rule table's required fields, `infos`, `model_outs`, then its optional fields."""


def field_validator(name: str) -> PlainValidator:
    """Field `name`'s check as a pydantic validator, told whether to copy by the context."""
    check = FIELD_CHECKS[name]

    def validate(value: Any, info: ValidationInfo) -> Any:
        return check(value, _copying(info))

    return PlainValidator(validate)


FIELDS: tuple[str, ...] = tuple(FIELD_CHECKS)
"""The field names, in declaration order."""


# --------------------------------------------------------------------------------------------
# Across fields
# --------------------------------------------------------------------------------------------


class _Votes:
    """The shapes that vote on T and B, each with its declared dims, collected field by field."""

    def __init__(self) -> None:
        self.shapes: dict[str, Shape] = {}
        self.specs: dict[str, DimSpec] = {}
        self.empty_rows: list[str] = []  # fields given as `[]` for T = 0

    def add(self, name: str, shape: Shape, spec: DimSpec) -> None:
        if tuple(shape) == (0,) and len(spec.dims) > 1 and spec.dims[0].offset == 0:
            shape = (0,) + (None,) * (len(spec.dims) - 1)  # `[]` for a T = 0 field
            self.empty_rows.append(name)
        self.shapes[name] = shape
        self.specs[name] = spec

    def add_tree(self, name: str, tree: Any) -> None:
        """Every leaf of a nested field votes under its path."""
        if isinstance(tree, np.ndarray):
            self.add(name, tree.shape, _SPECS[name])
            return
        for path, leaf in _tree.flatten(tree):
            self.add(_tree.format_path(name, path), leaf.shape, _SPECS[name])


def _votes(
    rollout: RolloutLike, outs: Mapping[str, AnyArray], building: bool, infos: InfoRows | None
) -> _Votes:
    """Collect the shape of every field, leaf and model output."""
    votes = _Votes()
    votes.add("dones", rollout.dones.shape, _SPECS["dones"])
    votes.add_tree("obses", rollout.obses)
    votes.add_tree("states", rollout.states)
    for key, array in outs.items():
        spec = _OUT_SPECS[output_rule(key, array.ndim).dims]
        votes.add(f"model_outs[{key!r}]", array.shape, spec)
    if not outs and len(rollout.model_outs) and not building:
        votes.add("model_outs", (len(rollout.model_outs),), _ROWS_ONLY)
    votes.add("rews", rollout.rews.shape, _SPECS["rews"])
    if infos is not None:
        widths = {len(row) for row in infos}
        votes.shapes["infos"] = (len(infos), widths.pop() if len(widths) == 1 else None)
        votes.specs["infos"] = _SPECS["infos"]
    for name in _OPTIONAL_FLAT:  # `truncated`, `final_values`: T B when given
        array = getattr(rollout, name)
        if array is not None:
            votes.add(name, array.shape, _SPECS[name])
    return votes


def cross_check(rollout: RolloutLike) -> None:
    """The rules across fields: shapes agree on T and B, then `CROSS_RULES`.

    Then every guard of the rollout's arrays is linked to it, so that a write into a field
    is checked against the rules across fields that read it.
    """
    building = rollout.model_outs.building  # steps still being appended: rows don't vote
    outs = {} if building else rollout.model_outs._plain()
    infos: InfoRows | None = rollout.__dict__.get("infos")  # None: no infos were given
    votes = _votes(rollout, outs, building, infos)
    T, B = _agreed_dims(rollout, votes, infos)
    link = Link(rollout, field_values)
    _settle(rollout, votes.empty_rows, T, B, infos, keep_outs=bool(outs) or building, link=link)
    values = field_values(rollout)
    for rule in CROSS_RULES:
        if rule.applies(values):
            rule.check(values)
    for name in _READ_ACROSS:
        value = rollout.__dict__.get(name)
        if value is None:
            continue
        for leaf in (value,) if type(value) is CheckedArray else _tree.leaves(value):
            guard = guard_of(leaf)
            if isinstance(guard, FieldGuard):
                guard.link = link


_ARRAY_FIELDS = tuple(FIELD_RULES)
_FIELD_NAMES = frozenset(_ARRAY_FIELDS)
_READ_ACROSS = tuple(name for name in _ARRAY_FIELDS if rules_reading(name))
"""The fields some rule across fields reads: their guards need the rollout (from the table)."""


def field_values(rollout: RolloutLike) -> FieldValues:
    """The rollout's fields and model outputs by name, as the rules across fields read them."""
    return _Values(rollout)


class _Values(Mapping[str, Any]):
    """A rollout's values by name, read when asked (a rule may need none of them)."""

    __slots__ = ("_outputs", "_plain", "_rollout")

    def __init__(self, rollout: RolloutLike) -> None:
        self._rollout = rollout
        self._outputs: FieldValues | None = None
        self._plain: Mapping[str, AnyArray] | None = None

    def _outs(self) -> FieldValues:
        if self._outputs is None:
            self._outputs = self._rollout.model_outs._values()
        return self._outputs

    def _output(self, name: str, default: Any) -> Any:
        key = output_key(name)  # (one output, without naming them all)
        if key is None:
            return default
        if self._plain is None:
            self._plain = self._rollout.model_outs._plain()
        return self._plain.get(key, default)

    def __getitem__(self, name: str) -> Any:
        if name in _FIELD_NAMES:
            return self._rollout.__dict__.get(name)
        return self._outs()[name]

    def get(self, name: str, default: Any = None) -> Any:  # (without Mapping's try/except)
        if name in _FIELD_NAMES:
            return self._rollout.__dict__.get(name, default)
        return self._output(name, default)

    def __iter__(self) -> Iterator[str]:
        yield from _ARRAY_FIELDS
        yield from self._outs()

    def __len__(self) -> int:
        return len(_ARRAY_FIELDS) + len(self._outs())


def _agreed_dims(rollout: RolloutLike, votes: _Votes, infos: InfoRows | None) -> tuple[int, int]:
    """T and B, remembered for shapes that agreed before."""
    shape_key = tuple(votes.shapes.items())  # the specs follow from the names
    bound = _AGREED_SHAPES.get(shape_key)
    if bound is None:
        bound = _bind(rollout, votes.shapes, votes.specs, infos)
        _remember(_AGREED_SHAPES, shape_key, bound, _AGREED_SHAPES_MAX)
    return bound


def _settle(
    rollout: RolloutLike,
    empty_rows: list[str],
    T: int,
    B: int,
    infos: InfoRows | None,
    *,
    keep_outs: bool,
    link: Link,
) -> None:
    """Store what T and B decide: `[]` fields as (0, B), no infos, empty model outputs."""
    fields = rollout.__dict__
    for name in empty_rows:  # `[]` given for a T = 0 field becomes (0, B)
        if name in FIELDS:
            fields[name] = getattr(rollout, name).reshape(0, B)
    if infos is None:  # no per-step objects until someone reads `infos` (__getattr__)
        fields.pop("infos", None)
    if not keep_outs:
        fields["model_outs"] = ModelOutputs({}, T + 1)
    rollout.model_outs._attach(T + 1, B, link)


def _bind(
    rollout: RolloutLike,
    shapes: dict[str, Shape],
    specs: dict[str, DimSpec],
    infos: InfoRows | None,
) -> tuple[int, int]:
    """T and B from the fields' shapes, or a `ValueError` naming every disagreement."""
    binding = bind_dims(shapes, specs)
    problems = binding.problems
    T = binding.values.get("T")
    B = binding.values.get("B")
    if T is not None and T < 0:
        # Shapes compared against T = -1 would only confuse: say what is wrong instead.
        rows = ", ".join(f"{name} has {shape[0]}" for name, shape in shapes.items())
        raise ValueError(f"a rollout needs at least one observation (T+1 >= 1 rows): {rows} rows")
    if B == 0:
        problems.append("a rollout needs at least one environment (B >= 1), got B=0")
    if problems and T is not None:
        problems.extend(_per_step_tuple_hints(rollout, T))
    if infos is not None and B is not None and shapes["infos"][1] is None:
        problems.extend(
            f"infos[{t}] has {len(row)} entries, expected B={B}"
            for t, row in enumerate(infos)
            if len(row) != B
        )
    problems.extend(_pair_problems(rollout))
    if problems:
        raise ValueError("\n".join(problems))
    if T is None or B is None:  # pragma: no cover - dones always binds both
        raise ValueError("dones must be [T+1, B]")
    return T, B


def _pair_problems(rollout: RolloutLike) -> list[str]:
    """`truncated` and `final_values` come together or not at all."""
    if (rollout.truncated is None) == (rollout.final_values is None):
        return []
    given, missing = (
        ("truncated", "final_values")
        if rollout.final_values is None
        else ("final_values", "truncated")
    )
    return [f"{given} was given without {missing}: give both or neither"]


def _per_step_tuple_hints(rollout: RolloutLike, T: int) -> list[str]:
    """A hint for a tuple of T+1 per-step arrays, which reads as a Gymnasium Tuple instead."""
    hints = []
    for name in TREE_FIELDS:
        value = rollout.__dict__.get(name)
        if isinstance(value, tuple) and len(value) == T + 1 and all(map(_tree.is_leaf, value)):
            hints.append(
                f"{name} is a tuple of {T + 1} arrays, read as a Gymnasium Tuple observation with "
                f"{T + 1} parts; to pass one array per timestep, stack them: "
                f"np.stack({name})"
            )
    return hints
