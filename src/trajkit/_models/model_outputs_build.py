"""Model outputs as given, made into one checked array per key: the list-of-dicts builder.

obs-tower2 records model outputs as a list of T+1 dicts (key -> `[B, ...]` array, or a row
of `None` to fill in later); trajkit also takes a mapping of key -> stacked `[T+1, B, ...]`
array. Both become one stacked array per key, each checked by its rule in the rule table
(`trajkit._models.rules.OUTPUT_RULES`); a step appended or written later is checked against
the stored keys, shapes and dtype kinds (`check_step`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from trajkit._base.types import AnyArray
from trajkit._models.arrays import as_numeric, kind_name
from trajkit._models.rules import (
    FLOAT32_OUTPUTS,
    INT_ACTIONS,
    OUTPUT_RULES,
    conform,
    conform_into,
    discrete_actions,
    output_rule,
)

__all__ = [
    "Built",
    "build_outputs",
    "check_step",
    "coerce_known",
    "first_step_rows",
    "is_placeholder",
    "min_row_ndim",
    "row_of",
]

_PLACEHOLDER_DTYPES = {"actions": INT_ACTIONS}  # other keys' placeholders are float32


class Built(NamedTuple):
    """Model outputs as stored: arrays, steps, whether steps are still appended, unset masks."""

    arrays: dict[str, AnyArray]
    num_rows: int | None
    building: bool = False
    unset: dict[str, AnyArray] | None = None


def coerce_key(
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
    discrete = key == "actions" and discrete_actions({"actions": array, "actor": actor}, lead)
    return conform(rule, array, name, copy=copy, axes=axes, min_ndim=0, discrete=discrete)


def min_row_ndim(key: str) -> int:
    """The fewest dimensions of one step's row of `key`: 0 for a per-step scalar (`*scalar`)."""
    return 1 if key in OUTPUT_RULES else 0


def is_placeholder(value: Any) -> bool:
    """Whether `value` is a row of `None`s: obs-tower2's way to allocate outputs filled later."""
    if isinstance(value, np.ndarray):
        return value.dtype.kind == "O" and value.size > 0 and all(v is None for v in value.flat)
    return isinstance(value, list | tuple) and len(value) > 0 and all(v is None for v in value)


def row_of(storage: AnyArray, t: int) -> AnyArray:
    """Step `t` of a stacked output as a view: 0-d for a per-step scalar `[T+1]`."""
    return storage[t] if storage.ndim > 1 else storage[t : t + 1].reshape(())


def coerce_known(raw: Mapping[str, AnyArray], *, copy: bool = False) -> dict[str, AnyArray]:
    """Every stacked output converted and checked by its rule (copied where `copy`)."""
    return {
        key: coerce_key(key, array, raw.get("actor"), f"model_outs[{key!r}]", copy=copy)
        for key, array in raw.items()
    }


def build_outputs(value: Any, *, copy: bool) -> Built:
    """Either accepted form of model outputs as stored arrays, each checked by its rule.

    Accepts obs-tower2's list of T+1 mappings (key -> array with leading dim B, or a row of
    `None` to fill in later), an empty list (outputs to be appended step by step) or a mapping
    of key -> stacked `[T+1, B, ...]` array. Known keys are converted and checked: `critic`,
    `log_probs` and `actor` to finite float32; `actions` to int32 (integer values only) when
    they are integers or Discrete (see `discrete_actions`), else to finite float32 (Box).
    Shapes across fields are checked later, by `Rollout`.

    Raises:
        ValueError: With a message naming the key and, for the list form, the timestep.
    """
    if type(value) is dict or isinstance(value, Mapping):  # a dict without abc's machinery
        arrays = _coerce_mapping(value, copy=copy)
        return Built(arrays, None if arrays else 0)
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        if len(value) == 0:
            return Built({}, 0, building=True)
        raw, unset = _stack_steps(value)
        return Built(coerce_known(raw), len(value), unset=unset)
    raise ValueError(
        "model_outs must be a list of T+1 mappings (key -> [B, ...] array) or a mapping "
        f"of key -> stacked [T+1, B, ...] array, got {type(value).__name__}"
    )


def _coerce_mapping(value: Mapping[Any, Any], *, copy: bool) -> dict[str, AnyArray]:
    raw: dict[str, AnyArray] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise ValueError(f"model_outs keys must be strings, got {key!r}")
        raw[key] = as_numeric(
            item, f"model_outs[{key!r}]", copy=False, min_ndim=min_row_ndim(key) + 1
        )
    return coerce_known(raw, copy=copy)  # copied while converted: one pass per array


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
    if is_placeholder(value):
        if key not in templates:
            dtype = _PLACEHOLDER_DTYPES.get(key, np.dtype(np.float32))
            templates[key] = np.zeros(len(value), dtype)
        return None
    array = as_numeric(value, f"model_outs[{t}][{key!r}]", copy=False, min_ndim=min_row_ndim(key))
    ref = templates.get(key)
    if ref is None:
        templates[key] = array
        return array
    if array.shape != ref.shape:
        raise ValueError(
            f"model_outs[{t}][{key!r}] has shape {array.shape}, expected "
            f"{ref.shape} like model_outs[0][{key!r}]"
        )
    if array.dtype.kind != ref.dtype.kind and not all(row is None for row in column):
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


def check_step(
    stored: Mapping[str, AnyArray], unset: Mapping[str, AnyArray], step: Mapping[str, Any], t: int
) -> dict[str, AnyArray]:
    """Step t's rows, checked against the stored keys' shapes and dtype kinds and by their rules.

    Returns the rows converted into the stored dtypes. The rules across fields that read the
    outputs (Discrete actions in range) are the caller's to check.
    """
    rows: dict[str, AnyArray] = {}
    for key, storage in stored.items():
        name = f"model_outs[{t}][{key!r}]"
        value = step[key]
        if key in unset and is_placeholder(value):
            raise ValueError(f"{name} must be an array of values, got a row of None")
        row = as_numeric(value, name, copy=False, min_ndim=min_row_ndim(key))
        if row.shape != storage.shape[1:]:
            raise ValueError(
                f"{name} has shape {row.shape}, expected {storage.shape[1:]} like "
                f"model_outs[0][{key!r}]" + (f" (B={storage.shape[1]})" if storage.ndim > 1 else "")
            )
        if row.dtype.kind != storage.dtype.kind and not (
            key in FLOAT32_OUTPUTS
            or (key == "actions" and storage.dtype.kind == "i" and row.dtype.kind in "biuf")
        ):
            raise ValueError(
                f"{name} has dtype {row.dtype} ({kind_name(row.dtype)}), expected the same "
                f"kind as model_outs[0][{key!r}] ({storage.dtype}, {kind_name(storage.dtype)})"
            )
        rows[key] = row
    for key, row in rows.items():
        storage = stored[key]
        rule = output_rule(key, storage.ndim)
        name = f"model_outs[{t}][{key!r}]"
        rows[key] = conform_into(rule, storage.dtype, row, name, axes="b" if row.ndim else "")
    return rows


def first_step_rows(step: Mapping[Any, Any], batch: int | None) -> dict[str, AnyArray]:
    """Step 0's rows, each converted and checked by its rule; `batch`: a rollout's B, if known."""
    for key in step:
        if not isinstance(key, str):
            raise ValueError(f"model_outs keys must be strings, got {key!r}")
    rows = {}
    for key, value in step.items():
        name = f"model_outs[0][{key!r}]"
        row = as_numeric(value, name, copy=False, min_ndim=min_row_ndim(key))
        actor = step.get("actor") if key == "actions" else None
        rows[key] = coerce_key(key, row, None if actor is None else np.asarray(actor), name, 1)
    if batch is not None:
        for key, row in rows.items():
            if row.ndim == 0 and key not in OUTPUT_RULES:
                continue  # one value per step (`*scalar`)
            if row.ndim == 0 or row.shape[0] != batch:
                raise ValueError(
                    f"model_outs[0][{key!r}] has shape {row.shape}, expected "
                    f"({batch}, ...) (B={batch})"
                )
    return rows
