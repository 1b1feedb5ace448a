"""The yardstick of the generated corpora: when a planted bug counts as visible in the data."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tests.lint import plant, worlds
from tests.lint.helpers import dones_for, rollout

pytest.importorskip("gymnasium")


@pytest.mark.parametrize(
    ("pairs", "q", "visible"),
    [
        ([(3, 3)], 0.0999, True),  # 0.1^3 = 1e-3: COINCIDENCE
        ([(3, 3)], 0.1001, False),
        ([(3, 3), (0, 3)], 0.0999, False),  # two pairs: either could show it
        ([(1, 1)], 0.0, True),  # a continuous start shared once
        ([(0, 4)], 0.0, False),  # nothing shared
        ([], 0.0, False),  # one env
    ],
)
def test_seeded_alike_shows_where_its_chance_is_small(
    pairs: list[tuple[int, int]], q: float, visible: bool
) -> None:
    assert (plant.alike_chance(pairs, q) <= plant.COINCIDENCE) is visible


def test_the_chance_of_shared_starts_is_binomial() -> None:
    assert plant.alike_chance([(2, 3)], 0.5) == pytest.approx(0.5)  # 3/8 + 1/8


@pytest.mark.parametrize(("env_id", "collision"), [("FrozenLake-v1", 1.0), ("CartPole-v1", 0.0)])
def test_the_start_collision_of_an_env_is_measured(env_id: str, collision: float) -> None:
    world = next(w for w in worlds.worlds(3511, 400) if not w.config)
    world = replace(world, env_id=env_id)
    assert plant._start_collision(world) == collision


def test_files_with_the_same_arrays() -> None:
    r = rollout(dones_for([3, 3], 6))
    assert plant._same_arrays(r, r.replace(rews=r.rews.copy()))
    other = r.rews.copy()
    other[2, 0] += 1.0
    assert not plant._same_arrays(r, r.replace(rews=other))
    assert not plant._same_arrays(r, r.replace(obses=np.zeros_like(r.obses)))


def test_lunar_landers_soft_bounds_are_its_position_velocities_and_angle() -> None:
    assert plant.SOFT_BOUNDS["LunarLander-v3"] == slice(0, 6)  # its legs' contacts are 0 or 1
