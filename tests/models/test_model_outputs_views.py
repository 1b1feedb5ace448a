"""Writes into model outputs through views: of a step's row, and of the stacked arrays.

A view of a step's row (`model_outs[t]['actor'][b]`, `.T`, a strided slice) writes where
its elements lie in the row, checked as a step is, and named by the indices written (one
element) or `[...]` (several); a 0-d row (a key with one value per step) too. A view of a
stacked array writes through a check of the whole array it would make, and a value of the
wrong shape is refused naming both shapes.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from trajkit import Rollout
from trajkit.testing import example_rollout


def _rollout() -> Rollout:
    r = example_rollout(num_steps=3, num_envs=2)
    outs = {key: np.array(array) for key, array in r.model_outs.arrays.items()}
    outs["lr"] = np.full(4, 0.5, np.float32)  # one value per step: 0-d rows
    return r.replace(model_outs=outs)


def test_views_of_a_row_write_where_their_elements_lie() -> None:
    r = _rollout()
    actor = r.model_outs.arrays["actor"]
    expected = np.array(actor)
    row = r.model_outs[1]["actor"]
    row[0][2] = 5.0
    expected[1, 0, 2] = 5.0
    row[1][1:] = [1.0, 2.0]
    expected[1, 1, 1:] = [1.0, 2.0]
    row.T[0, 1] = 7.0
    expected[1, 1, 0] = 7.0
    row[::-1][0, ::2] = [8.0, 9.0]
    expected[1, 1, ::2] = [8.0, 9.0]
    np.testing.assert_array_equal(actor, expected)
    assert actor.dtype == np.float32


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (
            lambda row: row[0].__setitem__(2, np.nan),
            "model_outs[1]['actor'][0][2] must be finite, got nan",
        ),
        (
            lambda row: row.T.__setitem__((0, 1), np.nan),
            "model_outs[1]['actor'][1][0] must be finite, got nan",
        ),
        (
            lambda row: row[1][::-1].__setitem__(0, np.inf),
            "model_outs[1]['actor'][1][2] must be finite, got inf",
        ),
        (
            lambda row: row[1].__setitem__(slice(0, 2), [1.0, np.inf]),
            "model_outs[1]['actor'][...][...] must be finite, got inf at (1)",
        ),
        (
            lambda row: row[::2].__setitem__(0, np.nan),
            "model_outs[1]['actor'][...][...] must be finite, got nan at (0)",
        ),
    ],
)
def test_a_refused_write_through_a_view_names_what_it_wrote(write: Any, message: str) -> None:
    r = _rollout()
    before = np.array(r.model_outs.arrays["actor"])
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        write(r.model_outs[1]["actor"])
    np.testing.assert_array_equal(r.model_outs.arrays["actor"], before)


def test_a_view_of_a_0d_row_writes_the_steps_value() -> None:
    r = _rollout()
    row = r.model_outs[1]["lr"]
    assert row.shape == ()
    row.reshape(1)[0] = 0.25
    row[None][0] = np.float32(0.125)
    r.model_outs[2]["lr"].reshape(1, 1)[0, 0] = 2.0
    np.testing.assert_array_equal(r.model_outs.arrays["lr"], [0.5, 0.125, 2.0, 0.5])
    with pytest.raises(ValueError, match=r"^model_outs\[1\]\['lr'\] holds 1e\+300, beyond float32"):
        row.reshape(1)[0] = np.float64(1e300)
    with pytest.raises(ValueError, match=r"^model_outs\[1\]\['lr'\] must hold real numbers"):
        row.reshape(1)[0] = "x"
    np.testing.assert_array_equal(r.model_outs.arrays["lr"], [0.5, 0.125, 2.0, 0.5])


def test_actions_written_through_a_view_are_checked_against_the_actor() -> None:
    r = _rollout()
    row = r.model_outs[2]["actions"]
    row.reshape(-1)[1] = 2
    assert r.model_outs.arrays["actions"][2, 1] == 2
    with pytest.raises(ValueError, match="actions"):
        row.reshape(-1)[1] = 3  # the actor has 3 columns
    assert r.model_outs.arrays["actions"][2, 1] == 2


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (
            lambda a: a.__setitem__((2, 1), np.inf),
            "model_outs['critic'] must be finite, got inf at (t=2, b=1)",
        ),
        (
            lambda a: a[1:].__setitem__((1, 0), np.nan),
            "model_outs['critic'] must be finite, got nan at (t=2, b=0)",
        ),
        (
            lambda a: a.T[::-1].__setitem__((0, 3), np.nan),
            "model_outs['critic'] must be finite, got nan at (t=3, b=1)",
        ),
        (
            lambda a: a.__setitem__(slice(None), np.ones(3)),
            "model_outs['critic'] write has shape (3,), expected (4, 2)",
        ),
        (
            lambda a: a[1:].__setitem__(0, np.ones((2, 2))),
            "model_outs['critic'] write has shape (2, 2), expected (2,)",
        ),
    ],
)
def test_a_stacked_array_refuses_by_position(write: Any, message: str) -> None:
    r = _rollout()
    critic = r.model_outs.arrays["critic"]
    before = np.array(critic)
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        write(critic)
    np.testing.assert_array_equal(critic, before)


def test_a_stacked_array_writes_through_its_views() -> None:
    r = _rollout()
    critic = r.model_outs.arrays["critic"]
    expected = np.array(critic)
    critic[1:][1, 0] = 3.0
    expected[2, 0] = 3.0
    critic.T[::-1][0, 1:3] = [4.0, 5.0]
    expected[1:3, 1] = [4.0, 5.0]
    critic[::2] = np.float64(0.5)
    expected[::2] = 0.5
    np.testing.assert_array_equal(critic, expected)
    assert critic.dtype == np.float32
    actions = r.model_outs.arrays["actions"]
    actions[3] = [2, 0]
    assert actions[3].tolist() == [2, 0]
    assert actions.dtype == np.int32
    with pytest.raises(ValueError, match="actions"):
        actions[3, 1] = 3
    assert actions[3].tolist() == [2, 0]
