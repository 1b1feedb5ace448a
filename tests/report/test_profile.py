"""One file's profile: its verdict, episodes, actions and per-feature statistics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import trajkit
from trajkit.dataset import check_file
from trajkit.report import _profile
from trajkit.report._profile import (
    FRAME_ROWS,
    LARGE_LEAF_BYTES,
    MAX_CLASSES,
    MAX_FEATURES,
    image_layout,
    profile_file,
    profile_rollout,
)
from trajkit.testing import example_rollout


def _reference_episodes(r: trajkit.Rollout) -> list[tuple[float, int, bool, int, int]]:
    """(return, length, truncated, env, first) of each complete episode, by a plain loop."""
    out = []
    dones = np.asarray(r.dones)
    for b in range(r.batch_size):
        start = None
        for t in range(r.num_steps + 1):
            if dones[t, b] == 1:
                if start is not None:
                    cut = r.truncated is not None and bool(r.truncated[t - 1, b] == 1)
                    ret = float(np.asarray(r.rews, np.float64)[start:t, b].sum())
                    out.append((ret, t - start, cut, b, start))
                start = t
    return out


@pytest.mark.parametrize("seed", range(4))
def test_episodes_match_a_loop(seed: int) -> None:
    r = example_rollout(num_steps=40, num_envs=3, truncation=True, seed=seed)
    p = profile_rollout(r, "a.npz")
    expected = _reference_episodes(r)
    assert p.episodes is not None
    got = sorted(map(tuple, p.episodes.values.tolist()))
    want = sorted((ret, float(n), float(cut), float(b), float(s)) for ret, n, cut, b, s in expected)
    np.testing.assert_allclose(got, want)
    assert p.best is not None
    assert p.worst is not None
    assert p.best[0] == max(e[0] for e in expected)
    assert p.worst[0] == min(e[0] for e in expected)


def test_a_rollout_without_complete_episodes_has_no_best() -> None:
    r = example_rollout(num_steps=8, num_envs=1, done_prob=0.0)
    r = r.replace(dones=np.zeros((9, 1)))
    p = profile_rollout(r, "a.npz")
    assert p.best is None
    assert p.worst is None
    assert p.episodes is not None
    assert p.episodes.population == 0


@st.composite
def _files(draw: st.DrawFn) -> list[np.ndarray]:
    width = draw(st.integers(1, 4))
    sizes = draw(st.lists(st.integers(1, 12), min_size=1, max_size=4))
    values = st.floats(-1e3, 1e3, width=32)
    return [
        np.array(
            draw(st.lists(values, min_size=n * width, max_size=n * width)), np.float32
        ).reshape(n, width)
        for n in sizes
    ]


@given(_files())
def test_merged_leaf_statistics_are_those_of_all_the_rows(files: list[np.ndarray]) -> None:
    merged = None
    for rows in files:
        leaf = _profile._leaf("obses", rows[:, None], np.random.default_rng(0))
        merged = leaf if merged is None else merged.merge(leaf)
    assert merged is not None
    everything = np.concatenate(files).astype(np.float64)
    assert merged.count == len(everything)
    np.testing.assert_allclose(merged.mean, everything.mean(0), rtol=1e-9, atol=1e-6)
    np.testing.assert_allclose(merged.std, everything.std(0), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(merged.low, everything.min(0))
    np.testing.assert_array_equal(merged.high, everything.max(0))


def test_image_statistics_are_per_channel_over_every_pixel() -> None:
    r = example_rollout(num_steps=4, num_envs=2, nested=True, obs_shape=(8, 8, 3))
    (image, *_) = profile_rollout(r, "a.npz").leaves
    pixels = np.asarray(r.obses["image"], np.float64).reshape(-1, 3)
    assert (image.unit, image.count, image.per_row) == ("channel", 10, 64)
    np.testing.assert_allclose(image.mean, pixels.mean(0))
    np.testing.assert_allclose(image.std, pixels.std(0))


@pytest.mark.parametrize(
    ("shape", "dtype", "layout"),
    [
        ((8, 8), "uint8", "hw"),
        ((7, 8), "uint8", None),
        ((8, 7), "uint8", None),
        ((84, 84), "float32", None),
        ((8, 8, 1), "uint8", "hwc"),
        ((8, 8, 3), "uint8", "hwc"),
        ((8, 8, 4), "uint8", "hwc"),
        ((8, 8, 2), "uint8", None),
        ((8, 8, 5), "uint8", None),
        ((7, 8, 3), "uint8", None),
        ((3, 8, 8), "uint8", "chw"),
        ((4, 84, 84), "uint8", "chw"),
        ((2, 8, 8), "uint8", None),
        ((3, 7, 8), "uint8", None),
        ((4, 8, 8, 3), "uint8", "nhwc"),
        ((4, 8, 8, 1), "uint8", "nhwc"),
        ((4, 8, 8, 4), "uint8", None),
        ((4, 7, 8, 3), "uint8", None),
        ((64,), "uint8", None),
    ],
)
def test_image_layouts(shape: tuple[int, ...], dtype: str, layout: str | None) -> None:
    assert image_layout(shape, dtype) == layout


def _leaf_of(step_bytes: int, rows: int) -> _profile.LeafProfile:
    leaf = np.zeros((rows, 1, step_bytes), np.uint8)
    return _profile._leaf("obses", leaf, np.random.default_rng(0))


def test_large_leaves_are_sampled_from_the_threshold_on() -> None:
    below, at = (
        _leaf_of(LARGE_LEAF_BYTES - 1, FRAME_ROWS + 1),
        _leaf_of(LARGE_LEAF_BYTES, FRAME_ROWS + 1),
    )
    assert (below.sampled, below.count) == (False, FRAME_ROWS + 1)
    assert (at.sampled, at.count) == (True, FRAME_ROWS)
    few = _leaf_of(LARGE_LEAF_BYTES, FRAME_ROWS)  # no more rows than would be drawn
    assert (few.sampled, few.count) == (False, FRAME_ROWS)


def test_leaves_of_many_values_are_summarised_whole() -> None:
    assert _leaf_of(MAX_FEATURES, 3).unit == "feature"
    wide = _leaf_of(MAX_FEATURES + 1, 3)
    assert (wide.unit, wide.low.shape, wide.per_row) == ("value", (1,), MAX_FEATURES + 1)


def _actions(values: np.ndarray) -> _profile.ActionProfile:
    r = example_rollout(num_steps=len(values), num_envs=1, keys=("actions",))
    actions = np.concatenate([values, values[-1:]]).reshape(-1, 1).astype(values.dtype)
    r = r.replace(model_outs={"actions": actions})
    p = profile_rollout(r, "a.npz").actions
    assert p is not None
    return p


def test_integer_actions_are_counted_up_to_max_classes() -> None:
    counted = _actions(np.arange(MAX_CLASSES, dtype=np.int32))
    assert counted.counts is not None
    assert counted.sample is None
    assert counted.counts[0] == dict.fromkeys(range(MAX_CLASSES), 1)
    sampled = _actions(np.arange(MAX_CLASSES + 1, dtype=np.int32))
    assert sampled.counts is None
    assert sampled.sample is not None
    assert sampled.sample.population == MAX_CLASSES + 1


def test_float_actions_are_sampled_per_dimension() -> None:
    r = example_rollout(num_steps=16, num_envs=2, action_kind="box", action_shape=(3,))
    p = profile_rollout(r, "a.npz").actions
    assert p is not None
    assert p.counts is None
    assert p.sample is not None
    steps = np.asarray(r.model_outs.arrays["actions"])[:16].reshape(32, 3)
    assert p.sample.values.shape == (32, 3)
    np.testing.assert_array_equal(p.low, steps.min(0))
    np.testing.assert_array_equal(p.high, steps.max(0))
    assert p.dims == 3
    assert p.shape == (3,)


def test_a_refused_file_gets_validates_verdict(tmp_path: Path) -> None:
    path = tmp_path / "a.npz"
    trajkit.save(example_rollout(), path)
    path.write_bytes(path.read_bytes()[:-40])
    profile = profile_file(str(path), max_bytes=None, seed=0)
    assert not profile.check.ok
    assert profile.check.problems == check_file(str(path), max_bytes=None).problems
    assert profile.stats.files == 0
    assert profile.metadata is None


def test_a_file_against_a_spec(tmp_path: Path) -> None:
    path = tmp_path / "a.npz"
    trajkit.save(example_rollout(), path)
    spec = trajkit.RolloutSpec.from_rollout(example_rollout()).model_copy(update={"min_steps": 8})
    profile = profile_file(str(path), spec=spec, max_bytes=None, seed=0)
    assert profile.check.problems == check_file(str(path), spec=spec, max_bytes=None).problems
    assert profile.check.problems
    assert "spec" in profile.check.problems[0]


def test_max_bytes_arrives(tmp_path: Path) -> None:
    path = tmp_path / "a.npz"
    trajkit.save(example_rollout(), path)
    assert profile_file(str(path), max_bytes=None, seed=0).check.ok
    refused = profile_file(str(path), max_bytes=100, seed=0)
    assert "over the limit of 100 bytes" in refused.check.problems[0]


def test_the_seed_and_the_path_seed_the_samples() -> None:
    r = example_rollout(num_steps=64, num_envs=8, seed=3)
    rewards = [
        profile_rollout(r, path, seed=seed).rewards
        for path, seed in (("a", 0), ("a", 0), ("a", 1), ("b", 0))
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_profile, "REWARD_SAMPLE", 10)
        small = [
            profile_rollout(r, p, seed=s).rewards
            for p, s in (("a", 0), ("a", 0), ("a", 1), ("b", 0))
        ]
    assert all(s is not None and len(s.values) == 10 for s in small)
    values = [s.values.tolist() for s in small if s is not None]
    assert values[0] == values[1]
    assert values[0] != values[2]
    assert values[0] != values[3]
    assert all(s is not None and s.population == 512 for s in rewards)


@pytest.mark.parametrize("kind", ["discrete", "box", "multi_discrete"])
def test_a_rollout_of_no_steps(kind: str) -> None:
    r = example_rollout(num_steps=0, num_envs=2, action_kind=kind)  # type: ignore[arg-type]
    p = profile_rollout(r, "a.npz")
    assert p.stats.steps == 0
    assert p.rewards is not None
    assert p.rewards.population == 0
    assert p.actions is not None
    assert p.actions.sample is not None
    assert p.actions.sample.population == 0
    assert p.leaves[0].count == 2  # the one row of observations
