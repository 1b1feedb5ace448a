"""TK106, TK107 and TK116: actions and observations against the declared spaces (exact)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

from tests.lint.helpers import Array, codes, dones_for, rollout
from trajkit.lint.spaces import leaf_space, space_name


@pytest.mark.parametrize(
    ("space", "actions", "bad", "shown"),
    [
        ({"type": "Discrete", "n": 3}, [0, 1, 2, 3, 1], 3, "Discrete(3)"),
        ({"type": "Discrete", "n": 3, "start": 1}, [1, 2, 3, 0, 1], 3, "Discrete(3, start=1)"),
        (
            {"type": "MultiDiscrete", "nvec": [3, 3], "start": [2, 2]},
            [[2, 4], [3, 3], [2, 1]],
            2,
            "MultiDiscrete([3, 3], start=[2, 2])",
        ),
        (
            {"type": "MultiDiscrete", "nvec": [2, 3]},
            [[0, 2], [1, 1], [2, 0]],
            2,
            "MultiDiscrete([2, 3])",
        ),
        ({"type": "MultiBinary", "n": 2}, [[0, 1], [1, 1], [0, 2]], 2, "MultiBinary(2)"),
    ],
)
def test_tk106_an_action_outside_the_space_as_the_user_wrote_it(
    space: dict[str, object], actions: list[object], bad: int, shown: str
) -> None:
    values = np.array(actions)
    T = len(values) - 1
    outs = {"actions": values.reshape(T + 1, 1, *values.shape[1:]).astype(np.int64)}
    [found] = codes(rollout(np.zeros(T + 1), outs=outs), "TK106", action_space=space)
    assert found.step == bad
    assert f"is outside {shown} (1 row in 1 env, rows 0 to {T})" in found.message
    assert "[2, 2] is outside MultiDiscrete([3, 3])" not in found.message  # issue 44's reading


def test_tk106_the_first_row_of_the_start_is_in_and_the_last_value_too() -> None:
    space = {"type": "MultiDiscrete", "nvec": [3, 3], "start": [2, 2]}
    edges = np.array([[2, 2], [4, 4], [2, 4]]).reshape(3, 1, 2)
    assert codes(rollout(np.zeros(3), outs={"actions": edges}), "TK106", action_space=space) == []


def test_tk107_box_actions_outside_the_bounds_and_on_them() -> None:
    space = {"type": "Box", "low": -2.0, "high": [2.0, None], "shape": [2]}
    actions = np.zeros((5, 1, 2), np.float32)
    actions[1, 0, 0] = 2.0  # on the bound: inside
    actions[3, 0, 0] = 2.5
    actions[2, 0, 1] = 1e6  # unbounded above: fine
    [found] = codes(rollout(np.zeros(5), outs={"actions": actions}), "TK10", action_space=space)
    assert (found.code, found.step) == ("TK107", 3)
    assert found.message == (
        "actions[3, 0] = [2.5, 0.0] is outside Box(-2.0, [2.0, null], (2,)), which the env clips "
        "(1 row in 1 env, rows 0 to 4)"
    )


def _obs_recording(space: Mapping[str, object], **more: object) -> dict[str, object]:
    return {"id": "r", "index": 0, "num_envs": 1, "observation_space": space, **more}


def test_tk116_an_observation_far_outside_a_box() -> None:
    space = {"type": "Box", "low": -1.0, "high": 1.0, "shape": [3], "dtype": "float32"}
    obses = np.zeros((6, 1, 3), np.float32)
    obses[2, 0, 1] = 3.0  # a soft bound: 2 past, on one side
    obses[3, 0, 0] = 9.0  # far past one side only: an env's state running past a soft bound
    obses[4, 0, 2] = 3.5  # far past both sides: a rescale
    obses[5, 0, 2] = -3.5
    rec = _obs_recording(space)
    [found] = codes(rollout(np.zeros(6), obses=obses), "TK116", recording=rec)
    assert (found.code, found.path, found.env, found.step) == ("TK116", "r0.npz", 0, 4)
    assert found.message.startswith(
        "obses[4, 0][2] = 3.5 is outside Box(-1.0, 1.0, (3,)) (2 rows in 1 env): observations "
        "normalised, rescaled or clipped in place"
    )
    wrapped = _obs_recording(space, wrappers=["NormalizeObservation"])
    assert codes(rollout(np.zeros(6), obses=obses), "TK116", recording=wrapped) == []


@pytest.mark.parametrize(
    ("low", "high", "values", "hit"),
    [
        (-1.0, 1.0, (1.0, -1.0001), False),  # two bounds: past both, by any amount
        (-1.0, 1.0, (1.0001, -1.0001), True),
        (-1.0, 1.0, (-1.0001, 1.0), False),
        (-1.0, 1.0, (-1.0, 1.0001), False),
        (-1.0, 1.0, (3.0001, 0.0), False),  # far past one side only
        (-1.0, 1.0, (-30.0, -3.0001), False),
        (None, 5.0, (10.0, 0.0), False),  # one side unbounded: |5|, and one side suffices
        (None, 5.0, (10.0001, 0.0), True),
        (0.0, None, (-1.0, 0.0), False),  # at least 1
        (0.0, None, (-1.0001, 0.0), True),
        (None, None, (1e30, -1e30), False),
    ],
)
def test_tk116_the_box_margin(
    low: float | None, high: float | None, values: tuple[float, float], hit: bool
) -> None:
    space = {"type": "Box", "low": low, "high": high, "shape": [1], "dtype": "float64"}
    obses = np.array([0.0, *values])[:, None, None]
    found = codes(rollout(np.zeros(3), obses=obses), "TK116", recording=_obs_recording(space))
    assert bool(found) is hit


def test_tk116_both_sides_of_a_box_in_the_rows_and_final_observations() -> None:
    space = {"type": "Box", "low": -1.0, "high": 1.0, "shape": [1], "dtype": "float64"}
    obses = np.array([0.0, 9.0, 0.0, 0.0])[:, None, None]  # up in a row, down in a final
    final = np.array([[-9.0]])
    r = rollout(dones_for([2], 3), obses=obses, final_obses=final)
    [found] = codes(r, "TK116", recording=_obs_recording(space))
    assert (found.env, found.step) == (0, 1)


def test_tk116_float32_data_against_float64_bounds() -> None:
    """A bound of 4.8 is float32(4.8) in a float32 space: a value there is inside."""
    space = {"type": "Box", "low": -4.8, "high": 4.8, "shape": [1], "dtype": "float32"}
    obses = np.full((3, 1, 1), np.float32(4.8))
    assert codes(rollout(np.zeros(3), obses=obses), "TK116", recording=_obs_recording(space)) == []


def test_tk116_dict_leaves_discrete_values_and_final_observations() -> None:
    space: dict[str, object] = {
        "type": "Dict",
        "spaces": {
            "pos": {"type": "Discrete", "n": 4, "start": -1},
            "bits": {"type": "MultiBinary", "n": 2},
        },
    }
    T = 5
    obses: dict[str, Array] = {
        "pos": np.zeros((T + 1, 1), np.int64),
        "bits": np.zeros((T + 1, 1, 2), np.int8),
    }
    dones = np.zeros(T + 1)
    dones[[0, 3]] = 1
    finals = {"pos": np.array([3]), "bits": np.zeros((1, 2), np.int8)}  # 3 > start + n - 1
    r = rollout(dones, obses=obses, final_obses=finals)
    [found] = codes(r, "TK116", recording=_obs_recording(space))
    assert (found.step, found.message.startswith("final_obses['pos'][0] (step 2, env 0) = 3")) == (
        2,
        True,
    )
    obses["bits"][1, 0, 1] = 2
    [found] = codes(rollout(dones, obses=obses), "TK116", recording=_obs_recording(space))
    assert found.message.startswith("obses['bits'][1, 0][1] = 2 is outside MultiBinary(2)")


@pytest.mark.parametrize(
    ("space", "name"),
    [
        ({"type": "Discrete", "n": 4, "start": 0}, "Discrete(4)"),
        ({"type": "MultiBinary", "n": [2, 3]}, "MultiBinary([2, 3])"),
        ({"type": "Box", "low": None, "high": 1.0, "shape": []}, "Box(null, 1.0, ())"),
    ],
)
def test_space_names(space: dict[str, object], name: str) -> None:
    assert space_name(space) == name


def test_a_description_no_check_can_read_is_left_alone() -> None:
    weird: dict[str, object] = {"type": "Box", "low": "x", "high": 1.0, "shape": [1]}
    outs: dict[str, Array] = {"actions": np.full((3, 1, 1), 9.0)}
    assert codes(rollout(np.zeros(3), outs=outs), "TK107", action_space=weird) == []


# ---------------------------------------------------------- exact values, from mutation runs


def test_without_an_action_space_nothing_is_judged() -> None:
    outs: dict[str, Array] = {"actions": np.full((3, 1), 9)}
    assert codes(rollout(np.zeros(3), outs=outs), "TK106") == []


def test_tk106_finding_and_only_the_selected_code() -> None:
    space = {"type": "Discrete", "n": 3}
    outs = {"actions": np.array([[0], [5], [1]])}
    [found] = codes(rollout(np.zeros(3), outs=outs), "TK106", action_space=space)
    assert (found.code, found.path, found.env, found.step) == ("TK106", "r0.npz", 0, 1)
    box = {"type": "Box", "low": -1.0, "high": 1.0, "shape": [1]}
    wide = {"actions": np.array([[[0.0]], [[5.0]], [[1.0]]])}
    assert codes(rollout(np.zeros(3), outs=wide), "TK106", action_space=box) == []


def test_tk107_a_float32_action_on_a_bound_float32_cannot_hold_exactly() -> None:
    space = {"type": "Box", "low": -0.1, "high": 0.1, "shape": [1]}
    actions = np.full((3, 1, 1), np.float32(0.1))  # float32(0.1) > 0.1 in float64
    assert codes(rollout(np.zeros(3), outs={"actions": actions}), "TK107", action_space=space) == []
    actions[1] = np.float32(-0.1)
    assert codes(rollout(np.zeros(3), outs={"actions": actions}), "TK107", action_space=space) == []


def test_multi_dimensional_spaces_element_by_element() -> None:
    multi = {"type": "MultiDiscrete", "nvec": [[2, 3], [4, 5]], "start": [[0, 1], [2, 3]]}
    ok = np.array([[[1, 3], [5, 7]]] * 3)[:, None]  # the largest of each entry
    assert codes(rollout(np.zeros(3), outs={"actions": ok}), "TK106", action_space=multi) == []
    bad = ok.copy()
    bad[2, 0, 1, 0] = 6
    [found] = codes(rollout(np.zeros(3), outs={"actions": bad}), "TK106", action_space=multi)
    assert found.step == 2
    box = {
        "type": "Box",
        "low": [[0.0, 1.0], [2.0, 3.0]],
        "high": [[1.0, 2.0], [3.0, 4.0]],
        "shape": [2, 2],
    }
    inside = np.array([[[1.0, 2.0], [3.0, 4.0]]] * 3)[:, None]
    assert codes(rollout(np.zeros(3), outs={"actions": inside}), "TK107", action_space=box) == []
    inside[1, 0, 0, 0] = 1.5
    [found] = codes(rollout(np.zeros(3), outs={"actions": inside}), "TK107", action_space=box)
    assert found.step == 1


def test_tuple_observation_spaces_leaf_by_leaf() -> None:
    space = {
        "type": "Tuple",
        "spaces": [{"type": "Discrete", "n": 3}, {"type": "MultiBinary", "n": 1}],
    }
    obses = (np.array([[0], [1], [7]]), np.zeros((3, 1, 1), np.int8), np.full((3, 1), 99.0))
    [found] = codes(rollout(np.zeros(3), obses=obses), "TK116", recording=_obs_recording(space))
    assert found.message.startswith("obses[0][2, 0] = 7 is outside Discrete(3)")
    assert leaf_space(space, (1,)) == {"type": "MultiBinary", "n": 1}
    assert leaf_space(space, (2,)) is None  # a third leaf the space does not have
    assert leaf_space(space, ()) is None  # the whole space is no leaf
    assert leaf_space({"type": "Dict", "spaces": {"a": space}}, ("a",)) is None
    assert leaf_space(None, (0,)) is None


def test_space_names_without_shape_or_size() -> None:
    assert space_name({"type": "Box", "low": 0.0, "high": 1.0}) == "Box(0.0, 1.0, ())"
    assert space_name({"type": "Weird"}) == "Weird()"


def test_the_recording_s_action_space_comes_first() -> None:
    outs = {"actions": np.array([[0], [2], [1]])}
    rec = {"id": "r", "index": 0, "num_envs": 1, "action_space": {"type": "Discrete", "n": 2}}
    wide = {"type": "Discrete", "n": 5}
    [found] = codes(rollout(np.zeros(3), outs=outs), "TK106", recording=rec, action_space=wide)
    assert found.step == 1
