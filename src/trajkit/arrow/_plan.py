"""The first pass of an import: the rollouts of a table from its small columns alone.

The index columns (`rollout`, `step`, `env`) and the flags (`is_first`, `terminated`,
`truncated`) say which rows make which rollout, in which order, its T and B, its `dones`
and its truncations. They are checked here, before anything the size of a rollout is built;
the other columns are read afterwards, a batch at a time (`_import`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from trajkit._base.types import AnyArray
from trajkit._models.arrays import first_true
from trajkit._models.rules import FIELD_RULES, Rule, conform_into, episode_ends
from trajkit.arrow._buffers import from_numpy, to_numpy
from trajkit.arrow._export import EpisodeIds, RolloutIds, new_episodes

PLAN_COLUMNS = ("step", "env", "is_first", "terminated", "truncated")
"""The columns a rollout's plan is made of (`plan_rollout`)."""

SMALL_COLUMNS = ("rollout", *PLAN_COLUMNS)
"""The columns the first pass reads (with the layout column)."""


def stored(rule: Rule) -> np.dtype[Any]:
    """The dtype a field is stored as, from its declaration in the rule table."""
    return np.dtype(rule.file_dtype)


@dataclass
class Plan:
    """One rollout of a table: where its rows are, its shape, and what its flags say.

    Attributes:
        rows: Its rows in the table (ascending; a `range` where they are consecutive).
        T: Its steps.
        B: Its envs.
        order: Its rows (positions in `rows`) in (step, env) order, or `None` where they are
            in that order already.
        dones: `[T+1, B]`, from `is_first` and the last step's flags.
        truncated: `[T, B]` where the layout records truncations, else `None`.
        ids: Its episode ids as `write_parquet` numbers them (set by `number`).
    """

    rows: AnyArray | range
    T: int
    B: int
    order: AnyArray | None
    dones: AnyArray
    truncated: AnyArray | None
    ids: RolloutIds | None = None

    def where(self, i: int) -> str:
        """Cell `i` (`t * B + b`) for a message: its step, env and row in the rollout."""
        return where(i, self.B, self.order)


def where(i: int, B: int, order: AnyArray | None) -> str:
    """Cell `i` (`t * B + b`) of a rollout of B envs for a message: step, env and row."""
    t, b = divmod(i, B)
    row = i if order is None else int(order[i])
    return f"step {t}, env {b} (row {row})"


def plan_rollouts(pa: Any, small: Any, layout: dict[str, Any]) -> list[Plan]:
    """The rollouts of a table (its small columns), in the order of their `rollout` id."""
    if small.num_rows == 0:
        raise ValueError("the table has no rows; a rollout has at least one step per env")
    plans = []
    for rows in _groups(index_column(small, "rollout")):
        part = small.slice(rows[0], len(rows)) if isinstance(rows, range) else small.take(rows)
        plans.append(plan_rollout(pa, part, layout, rows))
    return plans


def _groups(ids: AnyArray) -> list[AnyArray | range]:
    """The rows of each rollout id, ascending, ids in order; a `range` where consecutive."""
    if (ids[1:] >= ids[:-1]).all():  # as write_parquet writes them: no sort needed
        bounds = [0, *(np.flatnonzero(ids[1:] != ids[:-1]) + 1).tolist(), len(ids)]
        return [range(a, b) for a, b in itertools.pairwise(bounds)]
    order = np.argsort(ids, kind="stable")
    groups: list[AnyArray | range] = []
    for rows in np.split(order, np.flatnonzero(np.diff(ids[order])) + 1):
        consecutive = int(rows[-1]) - int(rows[0]) == len(rows) - 1
        groups.append(range(int(rows[0]), int(rows[-1]) + 1) if consecutive else rows)
    return groups


def number(plans: list[Plan]) -> None:
    """Give each plan its episode ids, as `write_parquet` numbers them across the rollouts."""
    numbering = EpisodeIds()
    for plan in plans:
        plan.ids = numbering.next(plan.dones)


def plan_rollout(pa: Any, table: Any, layout: dict[str, Any], rows: AnyArray | range) -> Plan:
    """The plan of a one-rollout table (its small columns), at `rows` of the whole table."""
    T, B, order = _grid(table)

    def cells(name: str) -> AnyArray:
        column = table.column(name)
        if order is not None:
            column = column.take(from_numpy(pa, order))
        if column.null_count:
            at = where(int(np.argmax(to_numpy(column.is_null()))), B, order)
            raise ValueError(
                f"column {name!r} is null at {at}; a rollout has a value at every step"
            )
        return to_numpy(column).reshape(T, B)

    def flags(name: str, rule: Rule, label: str) -> AnyArray:
        """A flag column as bools: a boolean column as it is, any other under `rule`."""
        values = cells(name)
        if values.dtype == np.bool_:  # (0 or 1 by its type: the rule holds)
            return values
        is_set: AnyArray = conform_into(rule, stored(rule), values, label) == 1
        return is_set

    flag, dones_rule = FIELD_RULES["truncated"], FIELD_RULES["dones"]
    starts = flags("is_first", dones_rule, "is_first")
    terminated = flags("terminated", flag, "column 'terminated'")
    cut = flags("truncated", flag, "column 'truncated'")
    dones = np.empty((T + 1, B), stored(dones_rule))
    dones[:T] = starts
    dones[T] = _ends(starts, terminated, cut)
    if not layout["truncation"] and cut.any():
        t, b = first_true(cut)
        raise ValueError(
            f"column 'truncated' is true at step {t}, env {b}, but the table's layout says "
            "the rollout has no truncations ('truncation': false)"
        )
    truncated = cut.astype(stored(flag)) if layout["truncation"] else None
    return Plan(rows, T, B, order, dones, truncated)


def _grid(table: Any) -> tuple[int, int, AnyArray | None]:
    """T, B and the (step, env) order of a one-rollout table; before any allocation.

    `step` and `env` must index every (step, env) once.
    """
    rows = table.num_rows
    steps = index_column(table, "step")
    envs = index_column(table, "env")
    for name, values in (("step", steps), ("env", envs)):
        low = int(values.min())
        if low < 0:
            row = int(np.argmin(values))
            raise ValueError(f"column {name!r} holds {low} at row {row}; it counts from 0")
    T, B = int(steps.max()) + 1, int(envs.max()) + 1
    if rows != T * B:  # Python ints: no overflow, and nothing allocated yet
        raise ValueError(
            f"the rows are not a full grid of steps 0..{T - 1} by envs 0..{B - 1}: that "
            f"makes {T * B} rows, the table has {rows} (each (step, env) once)"
        )
    if _in_order(steps.reshape(T, B), envs.reshape(T, B)):
        return T, B, None
    keys = steps.astype(np.int64) * B + envs.astype(np.int64)  # < rows: bounded above
    counts = np.bincount(keys, minlength=rows)
    if (counts != 1).any():
        key = int(np.argmax(counts > 1))
        t, b = divmod(key, B)
        raise ValueError(
            f"the rows are not a full grid of steps 0..{T - 1} by envs 0..{B - 1}: step "
            f"{t}, env {b} appears {int(counts[key])} times (each (step, env) once)"
        )
    return T, B, np.argsort(keys)


def _in_order(steps: AnyArray, envs: AnyArray) -> bool:
    """Whether `[T, B]` steps and envs are each (step, env) once, in order, as written."""
    T, B = steps.shape  # (aranges of the columns' dtype: compared without a cast)
    in_order = (envs == np.arange(B, dtype=envs.dtype)).all()
    return bool(in_order and (steps == np.arange(T, dtype=steps.dtype)[:, None]).all())


def _ends(starts: AnyArray, terminated: AnyArray, cut: AnyArray) -> AnyArray:
    """`dones[T]` from the flags of the last step (`[T, B]` bools), checked against `is_first`."""
    both = terminated & cut
    if both.any():
        t, b = first_true(both)
        raise ValueError(
            f"columns 'terminated' and 'truncated' are both true at step {t}, env {b}; an "
            "episode ends one way"
        )
    flagged = terminated | cut
    following = episode_ends(starts)
    if not np.array_equal(flagged[:-1], following):
        t, b = first_true(flagged[:-1] != following)
        if flagged[t, b]:
            which = "terminated" if terminated[t, b] else "truncated"
            raise ValueError(
                f"column {which!r} contradicts column 'is_first': it is true at step {t}, "
                f"env {b}, but 'is_first' is false at step {t + 1} (an episode that ended "
                "there makes the next step start one)"
            )
        raise ValueError(
            f"columns 'terminated' and 'truncated' contradict column 'is_first': both are "
            f"false at step {t}, env {b}, but 'is_first' is true at step {t + 1} (one of them "
            "says how the episode before ended)"
        )
    last: AnyArray = flagged[-1].astype(np.float32)
    return last


def check_episodes(ids: AnyArray, dones: AnyArray) -> None:
    """One id per episode as `dones` cuts them (each env's first row starts one), all distinct."""
    new = new_episodes(dones, np.zeros(dones.shape[1], bool))
    T, B = new.shape
    number = np.cumsum(new.T.reshape(-1)).reshape(B, T).T - 1  # the episode of each (t, b)
    firsts = np.flatnonzero(new.T.reshape(-1))  # env-major positions of each episode's start
    first_ids = ids.T.reshape(-1)[firsts]
    expected = first_ids[number]
    if not np.array_equal(ids, expected):
        t, b = first_true(ids != expected)
        raise ValueError(
            f"column 'episode_id' changes within an episode at step {t}, env {b}: it holds "
            f"{int(ids[t, b])}, where the episode's first step holds {int(expected[t, b])} "
            "('is_first' is false there)"
        )
    unique, counts = np.unique(first_ids, return_counts=True)
    if (counts > 1).any():
        value = unique[int(np.argmax(counts > 1))]
        (a, b_), *_ = ((int(p) % T, int(p) // T) for p in firsts[first_ids == value])
        raise ValueError(
            f"column 'episode_id' gives {int(counts.max())} episodes the id {int(value)} "
            f"(the first starts at step {a}, env {b_}); each episode has its own"
        )


def index_column(table: Any, name: str, first: int = 0) -> AnyArray:
    """An integer column with no nulls (`rollout`, `step`, `env`), as NumPy.

    `first`: the row of the file that is the table's (or record batch's) first, for messages.
    """
    column = table.column(name)
    if column.null_count:
        nulls = to_numpy(column.is_null())
        raise ValueError(f"column {name!r} is null at row {first + int(np.argmax(nulls))}")
    values = to_numpy(column)
    if values.dtype.kind == "u" and values.size and int(values.max()) > np.iinfo(np.int64).max:
        row = int(np.argmax(values))
        raise ValueError(
            f"column {name!r} holds {int(values[row])} at row {first + row}, out of range"
        )
    return values
