"""TK201-TK204: checks across the files of a dataset, and their thresholds."""

from __future__ import annotations

import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import trajkit
from tests.lint.helpers import Array, dones_for, lint_rollouts, rollout
from trajkit import Rollout
from trajkit._core.images import channel_axes, image_layout
from trajkit.lint import lint
from trajkit.lint.crossfile import (
    FEW_VALUES,
    MIN_EPISODES,
    MIN_FILES,
    MIN_OBSERVATIONS,
    MIN_REWARDS,
    Rewards,
    _judged,
    _Others,
    _Pool,
    _scale_jump,
    summarize,
)
from trajkit.lint.evidence import CHANCE, rate_bound


def _rewards(T: int, B: int, value: float | Array, seed: int) -> Rollout:
    rews = np.broadcast_to(np.asarray(value, dtype=np.float64), (T, B)).copy()
    return rollout(np.stack([dones_for([T], T)] * B, axis=1), rews=rews, seed=seed)


# ------------------------------------------------------------------------------ TK201


def _constant(rows: int, starts: int) -> Rollout:
    """One env whose feature 1 is 7 on every row; `starts` episode starts among `rows` rows."""
    dones = np.zeros(rows)
    dones[np.linspace(0, rows - 2, starts).astype(int)] = 1
    r = rollout(dones)
    r.obses[:, :, 1] = 7.0
    return r


@pytest.mark.parametrize(
    ("rows", "starts", "hit"),
    [
        (MIN_OBSERVATIONS - 1, MIN_EPISODES, False),
        (MIN_OBSERVATIONS, MIN_EPISODES, True),
        (MIN_OBSERVATIONS, MIN_EPISODES - 1, False),
    ],
)
def test_tk201_a_constant_feature_needs_many_observations_and_episodes(
    rows: int, starts: int, hit: bool
) -> None:
    found = lint_rollouts([_constant(rows, starts)], "TK201")
    assert bool(found) is hit
    if hit:
        assert found[0].message == (
            f"1 of 3 feature(s) of obses never change over {rows} observations, {starts} "
            "episode starts and 1 file(s): obses[..., 1] = 7"
        )


@pytest.mark.parametrize(
    ("space", "hit"),
    [
        ({"type": "Box", "low": [-9.0, 7.0, -9.0], "high": 9.0, "shape": [3]}, False),
        ({"type": "Box", "low": -9.0, "high": [9.0, 7.0, 9.0], "shape": [3]}, False),
        ({"type": "Box", "low": -9.0, "high": 9.0, "shape": [3]}, True),
        ({"type": "MultiDiscrete", "nvec": [20, 8, 20], "start": [-5, 0, -5]}, False),
        ({"type": "MultiDiscrete", "nvec": [20, 8, 20], "start": [-5, -1, -5]}, True),
    ],
)
def test_tk201_a_feature_resting_at_a_bound_of_its_space(
    space: dict[str, object], hit: bool
) -> None:
    rec = {"id": "a", "index": 0, "num_envs": 1, "observation_space": space}
    found = lint_rollouts([_constant(MIN_OBSERVATIONS, MIN_EPISODES)], "TK201", [rec])
    assert bool(found) is hit


def _frames(rows: int, starts: int, shape: tuple[int, ...], seed: int = 0) -> Rollout:
    """One env of uint8 frames of `shape`, random but for a constant border and HUD bar."""
    r = _constant(rows, starts)
    rng = np.random.default_rng(seed)
    frames = rng.integers(0, 256, size=(rows, 1, *shape), dtype=np.uint8)
    layout = image_layout(shape, np.uint8)
    assert layout is not None
    axes = channel_axes(layout)
    hw = np.zeros([shape[a] for a in axes], bool)
    hw[:2] = hw[-1] = hw[:, 0] = hw[:, -1] = True  # a HUD bar on top, a border around
    border = hw.reshape([shape[a] if a in axes else 1 for a in range(len(shape))])
    frames[:, :, np.broadcast_to(border, shape)] = 87  # gray: no bound of Box(0, 255)
    return r.replace(obses=frames)


@pytest.mark.parametrize("shape", [(12, 10), (12, 10, 3), (12, 10, 4), (3, 12, 10), (2, 12, 10, 3)])
def test_tk201_constant_borders_of_image_observations_are_no_finding(
    shape: tuple[int, ...],
) -> None:
    r = _frames(MIN_OBSERVATIONS, MIN_EPISODES, shape)
    assert (r.obses[(slice(None), slice(None), *[0] * len(shape))] == 87).all()  # a corner
    assert lint_rollouts([r], "TK201") == []
    vector = r.replace(obses=r.obses.reshape(MIN_OBSERVATIONS, 1, -1))  # the same, as features
    assert [f.code for f in lint_rollouts([vector], "TK201")] == ["TK201"]


@pytest.mark.parametrize(
    ("shape", "still", "layout", "shown"),
    [
        ((12, 10, 4), (Ellipsis, 3), "hwc", "obses[..., :, :, 3] = 0"),  # a stack slot unfilled
        ((3, 12, 10), (0,), "chw", "obses[..., 0, :, :] = 0"),
        ((2, 12, 10, 3), (1, Ellipsis, 2), "nhwc", "obses[..., 1, :, :, 2] = 0"),
    ],
)
def test_tk201_a_channel_of_an_image_that_never_changes(
    shape: tuple[int, ...], still: tuple[object, ...], layout: str, shown: str
) -> None:
    r = _frames(MIN_OBSERVATIONS, MIN_EPISODES, shape)
    r.obses[(slice(None), slice(None), *still)] = 0
    channels = int(np.prod(shape)) // (12 * 10)
    [found] = lint_rollouts([r], "TK201")
    assert found.message == (
        f"1 of {channels} channel(s) of obses (an image, {layout}) never change over "
        f"{MIN_OBSERVATIONS} observations, {MIN_EPISODES} episode starts and 1 file(s): {shown}"
    )


@pytest.mark.parametrize(
    ("rows", "starts", "hit"),
    [
        (MIN_OBSERVATIONS - 1, MIN_EPISODES, False),
        (MIN_OBSERVATIONS, MIN_EPISODES, True),
        (MIN_OBSERVATIONS, MIN_EPISODES - 1, False),
    ],
)
def test_tk201_a_still_gray_picture_needs_as_much_evidence(
    rows: int, starts: int, hit: bool
) -> None:
    r = _frames(rows, starts, (12, 10))
    r.obses[:] = r.obses[0]  # one still picture, not one value
    found = lint_rollouts([r], "TK201")
    assert [f.message for f in found] == (
        [
            f"1 of 1 channel(s) of obses (an image, hw) never change over {rows} observations, "
            f"{starts} episode starts and 1 file(s): obses[..., :, :]: one still picture"
        ]
        if hit
        else []
    )


@pytest.mark.parametrize("value", [0, 255, 1])
def test_tk201_a_channel_at_a_bound_of_its_box_is_reported_too(value: int) -> None:
    """An image's Box(0, 255) is its dtype's range: a black channel is no level it rests at."""
    r = _frames(MIN_OBSERVATIONS, MIN_EPISODES, (12, 10, 3))
    r.obses[..., 1] = value
    space = {"type": "Box", "low": 0, "high": 255, "shape": [12, 10, 3], "dtype": "uint8"}
    rec = {"id": "a", "index": 0, "num_envs": 1, "observation_space": space}
    [found] = lint_rollouts([r], "TK201", [rec])
    assert found.message.endswith(f": obses[..., :, :, 1] = {value}")
    r.obses[..., 1] = r.obses[..., 0]  # every channel changes; the border is at 87
    assert lint_rollouts([r], "TK201", [rec]) == []


# ------------------------------------------------------------------------------ TK202


def test_tk202_a_file_of_another_scale(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    files = [_rewards(20, 2, -np.abs(rng.normal(size=(20, 2))), seed=i) for i in range(4)]
    files.append(_rewards(20, 2, -100 * np.abs(rng.normal(size=(20, 2))), seed=9))
    found = lint_rollouts(files, "TK202")
    assert [f.path for f in found] == ["r4.npz"]
    assert "(limit 10x)" in found[0].message
    assert lint_rollouts(files, "TK202", reward_scale_ratio=1000) == []


def test_tk202_a_good_policy_s_small_rewards_are_no_jump() -> None:
    rng = np.random.default_rng(0)
    scales = [5.0, 4.0, 6.0, 0.001, 0.0005]  # random, then balanced
    files = [
        _rewards(20, 2, -np.abs(rng.normal(size=(20, 2))) * s, seed=i) for i, s in enumerate(scales)
    ]
    assert lint_rollouts(files, "TK202") == []


def test_tk202_few_reward_values_none_in_common() -> None:
    files = [_rewards(20, 2, v, seed=i) for i, v in enumerate([1.0, 1.0, 1.0, 0.01])]
    [found] = lint_rollouts(files, "TK202")
    assert found.path == "r3.npz"
    assert found.message.startswith("rewards take the values 0.01 where the other 3 files take 1")


@pytest.mark.parametrize(("files", "hit"), [(MIN_FILES - 1, False), (MIN_FILES, True)])
def test_tk202_needs_min_files(files: int, hit: bool) -> None:
    values = [1.0] * (files - 1) + [0.01]
    assert (
        bool(lint_rollouts([_rewards(20, 2, v, i) for i, v in enumerate(values)], "TK202")) is hit
    )


@pytest.mark.parametrize(("T", "hit"), [(MIN_REWARDS // 2 - 1, False), (MIN_REWARDS // 2, True)])
def test_tk202_needs_min_rewards_per_file(T: int, hit: bool) -> None:
    values = [1.0, 1.0, 1.0, 0.01]
    assert bool(lint_rollouts([_rewards(T, 2, v, i) for i, v in enumerate(values)], "TK202")) is hit


def test_tk202_files_whose_recording_names_a_reward_wrapper_are_left_out() -> None:
    files = [_rewards(20, 2, v, i) for i, v in enumerate([1.0, 1.0, 1.0, 0.01])]
    rec = {"id": "a", "index": 0, "num_envs": 2, "wrappers": ["NormalizeReward"]}
    assert lint_rollouts(files, "TK202", [None, None, None, rec]) == []


def _few(values: tuple[float, ...], nonzero: int) -> Rewards:
    counts = tuple(nonzero // len(values) + (i < nonzero % len(values)) for i in range(len(values)))
    return Rewards(40, 40.0, 1.0, values, nonzero=nonzero, common=values, counts=counts)


@pytest.mark.parametrize(("distinct", "few"), [(FEW_VALUES, True), (FEW_VALUES + 1, False)])
def test_tk202_a_few_values_are_at_most_few_values(distinct: int, few: bool) -> None:
    union = tuple(float(v) for v in range(1, distinct + 1))
    others = [_few(union[:8], 80), _few(union[8:], 80)]
    message = _scale_jump(_few((100.0,), 40), others, 10.0)
    assert (message is not None and message.startswith("rewards take the values 100")) is few


@pytest.mark.parametrize(("nonzero", "few"), [(3, False), (4, True)])
def test_tk202_a_few_values_repeat(nonzero: int, few: bool) -> None:
    others = [_few((1.0,), nonzero // 2), _few((2.0,), nonzero - nonzero // 2)]
    message = _scale_jump(_few((100.0,), 40), others, 10.0)
    assert (message is not None and "none in common" in message) is few


def test_tk202_a_range_that_holds_their_values_is_no_scale() -> None:
    others = [_few((1.0,), 40), _few((1.0,), 40)]
    wide = Rewards(40, 40.0, 1.0, None, nonzero=40, common=(1.0, 0.5))
    assert _scale_jump(wide, others, 10.0) is None
    normalised = Rewards(40, 40.0, 1.0, None, nonzero=40, common=(0.3, 0.5))
    message = _scale_jump(normalised, others, 10.0)
    assert message is not None
    assert message.startswith("rewards take a range of values")


@pytest.mark.parametrize(("k", "hit"), [(2, False), (4, True)])
def test_tk202_new_values_against_the_chance_of_unseen_ones(k: int, hit: bool) -> None:
    # The others took 1 and 2, 27 times, none once: unseen values have a rate of 3 / 30;
    # k new rewards have a chance of 0.1^k (k = 3 gives 1e-3 itself, within float rounding).
    others = [_few((1.0,), 14), _few((2.0,), 13)]
    own = Rewards(40, 40.0, 1.0, (100.0,), nonzero=k, counts=(k,))
    assert (_scale_jump(own, others, 10.0) is not None) is hit


def test_tk202_terminal_rewards_of_another_sign_by_chance() -> None:
    """A few ±1 terminal rewards per file: a file with only -1 where the others had +1."""
    others = [_few((1.0,), 1), _few((1.0,), 2)]
    assert _scale_jump(_few((-1.0,), 2), others, 10.0) is None


@pytest.mark.parametrize(("typical", "hit"), [(10.0, False), (10.01, True)])
def test_tk202_the_ratio(typical: float, hit: bool) -> None:
    others = [Rewards(40, 40.0, 1.0, None, nonzero=40) for _ in "ab"]
    assert (
        _scale_jump(Rewards(40, 40.0, typical, None, nonzero=40), others, 10.0) is not None
    ) is hit


# ------------------------------------------------------------------------- TK203, TK204


def _recorded(tmp_path: Path, r: Rollout, name: str, index: int, rid: str = "r") -> None:
    rec = {"id": rid, "index": index, "num_envs": 1, "autoreset_mode": "NEXT_STEP"}
    trajkit.save(r, tmp_path / name, recording=rec)


def test_tk203_a_deterministic_env_repeats_itself_a_copy_does_not(tmp_path: Path) -> None:
    r = rollout(dones_for([3, 3], 6))
    _recorded(tmp_path, r, "a.npz", 0)
    _recorded(tmp_path, r, "b.npz", 1)  # the same arrays, the next index: a repeat
    assert lint(tmp_path, select=["TK20"], jobs=1) == []
    _recorded(tmp_path, r, "c.npz", 1)  # the same index again: saved twice
    [found] = lint(tmp_path, select=["TK20"], jobs=1)
    assert (found.code, Path(found.path or "").name) == ("TK203", "c.npz")
    _recorded(tmp_path, r, "c.npz", 1, rid="other")  # another recording: saved twice too
    assert [f.code for f in lint(tmp_path, select=["TK20"], jobs=1)] == ["TK203"]


def test_tk203_without_recordings_a_file_that_continues_the_one_before(tmp_path: Path) -> None:
    cycle = np.tile(np.eye(3, dtype=np.float32), (3, 1))[:7, None, :]  # row 6 is row 0's
    r = rollout(dones_for([3, 3], 6), obses=cycle, rews=np.ones(6))
    trajkit.save(r, tmp_path / "a.npz")
    trajkit.save(r, tmp_path / "b.npz")  # continues a.npz: a deterministic cycle
    assert lint(tmp_path, select=["TK203"], jobs=1) == []
    trajkit.save(rollout(dones_for([6], 6)), tmp_path / "b0.npz")  # listed between them
    assert [Path(f.path or "").name for f in lint(tmp_path, select=["TK203"], jobs=1)] == ["b.npz"]


def test_tk204_a_recording_index_claimed_twice(tmp_path: Path) -> None:
    _recorded(tmp_path, rollout(dones_for([6], 6), seed=1), "a.npz", 0)
    _recorded(tmp_path, rollout(dones_for([6], 6), seed=2), "b.npz", 0)
    [found] = lint(tmp_path, select=["TK204"], jobs=1)
    assert (Path(found.path or "").name, found.severity) == ("b.npz", "error")
    assert found.message.startswith(f"{tmp_path / 'a.npz'} is index 0 of recording r too")


@pytest.mark.parametrize(("k", "hit"), [(4, False), (5, True)])
def test_tk202_a_value_taken_once_makes_unseen_values_likelier(k: int, hit: bool) -> None:
    # The others took 1 ten times, 2 five times and 3 once: one value of 16 was new then,
    # so unseen values have a rate of (1 + 3) / (16 + 3); k new rewards: 2e-3 at 4, 4e-4 at 5.
    others = [
        Rewards(40, 40.0, 1.0, (1.0, 2.0), nonzero=15, common=(1.0, 2.0), counts=(10, 5)),
        Rewards(40, 40.0, 1.0, (3.0,), nonzero=1, common=(3.0,), counts=(1,)),
    ]
    own = Rewards(40, 40.0, 1.0, (100.0,), nonzero=k, counts=(k,))
    assert (_scale_jump(own, others, 10.0) is not None) is hit


def test_tk202_few_values_messages() -> None:
    others = [_few((1.0, 2.0), 40), _few((1.0,), 40)]
    message = _scale_jump(
        Rewards(40, 40.0, 1.0, (5.0, 7.0), nonzero=40, counts=(20, 20)), others, 10.0
    )
    assert message == (
        "rewards take the values 5, 7 where the other 2 files take 1, 2 (none in common; reward "
        "scale 1 against the median 1): rewards scaled or normalised differently?"
    )
    wide = Rewards(40, 40.0, 1.0, None, nonzero=40, common=(0.3, 0.5))
    assert _scale_jump(wide, others, 10.0) == (
        "rewards take a range of values where the other 2 files take only 1, 2 (reward scale 1 "
        "against the median 1): rewards normalised?"
    )


def _reference_tk202(file: Rewards, others: list[Rewards], ratio: float) -> str | None:
    """TK202 by a pass over the others (what each file of n once cost: n * n in all)."""
    median = float(np.median([o.scale for o in others]))
    scale = f"reward scale {file.scale:.6g} against the median {median:.6g}"
    listed = [o.values for o in others]
    union = sorted({v for values in listed if values is not None for v in values})
    taken = sum(o.nonzero for o in others)
    them = f"the other {len(others)} files"
    if (
        all(v is not None for v in listed)
        and 0 < len(union) <= FEW_VALUES
        and taken >= 2 * len(union)
    ):
        pooled: Counter[float] = Counter()
        for o in others:
            pooled.update(dict(zip(o.values or (), o.counts, strict=False)))
        if rate_bound(sum(1 for c in pooled.values() if c == 1), taken) ** file.nonzero > CHANCE:
            return None
        shown = ", ".join(f"{v:g}" for v in union)
        if file.values is None:
            if set(file.common) & set(union):
                return None
            return (
                f"rewards take a range of values where {them} take only {shown} ({scale}): "
                "rewards normalised?"
            )
        if set(file.values) & set(union):
            return None
        own = ", ".join(f"{v:g}" for v in file.values)
        return (
            f"rewards take the values {own} where {them} take {shown} (none in common; "
            f"{scale}): rewards scaled or normalised differently?"
        )
    top = max(o.typical for o in others)
    if top <= 0 or file.typical <= ratio * top:
        return None
    return (
        f"typical reward magnitude (median |r|) {file.typical:.6g} is "
        f"{file.typical / top:.3g}x above the largest {top:.6g} of {them} "
        f"(limit {ratio:g}x): rewards scaled or normalised differently?"
    )


_values = st.one_of(
    st.lists(st.sampled_from([-1.0, 0.5, 1.0, 2.0, 3.0]), unique=True),
    st.lists(st.sampled_from([10.0, 100.0]), min_size=1, unique=True),  # none in common
)


@st.composite
def _file_rewards(draw: st.DrawFn) -> Rewards:
    values = draw(st.one_of(st.none(), _values.map(lambda v: tuple(sorted(v)))))
    counts = tuple(draw(st.integers(1, 30)) for _ in values or ())
    nonzero = sum(counts) if values is not None else draw(st.integers(0, 40))
    common = values[:3] if values is not None else tuple(draw(_values)[:3])
    scale = draw(st.sampled_from([0.0, 0.5, 1.0, 2.0, 30.0]))
    typical = draw(st.sampled_from([0.0, 0.1, 1.0, 1.0, 20.0, 500.0]))
    return Rewards(40, 40 * scale * scale, typical, values, nonzero=nonzero, common=common,
                   counts=counts)  # fmt: skip


@given(st.lists(_file_rewards(), min_size=MIN_FILES, max_size=9), st.sampled_from([2.0, 10.0]))
def test_tk202_each_file_against_the_others_as_a_pass_over_them_would(
    files: list[Rewards], ratio: float
) -> None:
    pool = _Pool.of(files)
    for i, file in enumerate(files):
        others = files[:i] + files[i + 1 :]
        expected = _reference_tk202(file, others, ratio)
        assert _judged(file, pool.without(file), ratio) == expected
        assert _scale_jump(file, others, ratio) == expected


# --------------------------------------------- what a file's summary holds, end to end


def test_a_file_s_rewards_summary() -> None:
    """30 distinct nonzero rewards (too many to list), taken twice and once in turn, and
    zeros: the 16 most common are the 15 taken twice and, of those taken once, the smallest
    (ties in value order, the same on every machine)."""
    values = np.arange(1.0, 31.0)
    taken = np.concatenate([np.repeat(values, np.where(np.arange(30) % 2, 2, 1)), np.zeros(15)])
    r = _rewards(len(taken), 1, taken[:, None], seed=0)
    summary = summarize(r, "a.npz").rewards
    assert (summary.count, summary.nonzero, summary.typical) == (60, 45, 10.5)
    assert (summary.values, summary.counts) == (None, ())
    assert summary.common == (2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 16.0, 18.0, 20.0, 22.0,
                              24.0, 26.0, 28.0, 30.0, 1.0)  # fmt: skip


@pytest.mark.parametrize("distinct", [FEW_VALUES, FEW_VALUES + 1])
def test_a_file_s_reward_values_are_listed_up_to_few_values(distinct: int) -> None:
    rews = np.repeat(np.arange(1.0, distinct + 1), 3)[:, None] * [1.0, 1.0]
    summary = summarize(_rewards(len(rews), 2, rews, seed=0), "a.npz").rewards
    listed = distinct <= FEW_VALUES
    assert summary.values == (tuple(float(v) for v in range(1, distinct + 1)) if listed else None)
    assert summary.counts == ((6,) * distinct if listed else ())


def test_tk202_a_file_of_zero_rewards_is_not_compared() -> None:
    files = [_rewards(20, 2, v, seed=i) for i, v in enumerate([1.0, 1.0, 0.01, 0.0])]
    [found] = lint_rollouts(files, "TK202")
    assert found.path == "r2.npz"
    assert found.message.startswith("rewards take the values 0.01 where the other 2 files take 1")


@pytest.mark.parametrize(("taken", "hit"), [(2997, True), (2996, False)])
def test_tk202_a_new_value_at_exactly_the_chance(taken: int, hit: bool) -> None:
    """The others took 1, `taken` times, none once: a new value has a rate of 3 / (taken + 3);
    one new reward is reported where that is at most `CHANCE`, 3 / 3000 = 1e-3 exactly."""
    others = [_few((1.0,), taken // 2), _few((1.0,), taken - taken // 2)]
    own = Rewards(40, 40.0, 1.0, (5.0,), nonzero=1, counts=(1,))
    assert (_scale_jump(own, others, 10.0) is not None) is hit


@given(st.lists(_file_rewards(), min_size=MIN_FILES, max_size=9))
def test_a_pool_less_one_file_is_the_pool_of_the_others(files: list[Rewards]) -> None:
    """What `_Pool.without` gives of a file is what the others' own numbers are."""
    pool = _Pool.of(files)
    for i, file in enumerate(files):
        others = files[:i] + files[i + 1 :]
        pooled: Counter[float] = Counter()
        for o in others:
            pooled.update(dict(zip(o.values or (), o.counts, strict=True)))
        union = sorted({v for o in others for v in o.values or ()})
        assert pool.without(file) == _Others(
            count=len(others),
            median=float(np.median([o.scale for o in others])),
            top=max(o.typical for o in others),
            unlisted=sum(o.values is None for o in others),
            union=union,
            taken=sum(o.nonzero for o in others),
            once=sum(c == 1 for c in pooled.values()),
        )


# ------------------------------------------------------------ TK201 against a space's bounds


def _scalar(value: int) -> Rollout:
    """`_constant`'s episodes, with scalar observations (a Discrete space's), all `value`."""
    r = _constant(MIN_OBSERVATIONS, MIN_EPISODES)
    return r.replace(obses=np.full((MIN_OBSERVATIONS, 1), value, dtype=np.int64))


@pytest.mark.parametrize(
    ("space", "value", "hit"),
    [
        ({"type": "Discrete", "n": 8}, 0, False),  # its start
        ({"type": "Discrete", "n": 8}, 7, False),  # its last value
        ({"type": "Discrete", "n": 8}, 3, True),
        ({"type": "Discrete", "n": 8, "start": 2}, 9, False),
        ({"type": "Discrete", "n": 8, "start": 2}, 0, True),
    ],
)
def test_tk201_a_discrete_observation_at_a_bound(
    space: dict[str, object], value: int, hit: bool
) -> None:
    rec = {"id": "a", "index": 0, "num_envs": 1, "observation_space": space}
    found = lint_rollouts([_scalar(value)], "TK201", [rec])
    assert [f.message for f in found] == (
        [
            f"1 of 1 feature(s) of obses never change over {MIN_OBSERVATIONS} observations, "
            f"{MIN_EPISODES} episode starts and 1 file(s): obses = {value}"
        ]
        if hit
        else []
    )


@pytest.mark.parametrize("value", [0.0, 1.0])
def test_tk201_a_multibinary_flag_that_never_changes_is_at_its_bound(value: float) -> None:
    r = _constant(MIN_OBSERVATIONS, MIN_EPISODES)
    r.obses[:] = np.random.default_rng(0).integers(0, 2, size=r.obses.shape)
    r.obses[:, :, 1] = value
    space = {"type": "MultiBinary", "n": 3}
    rec = {"id": "a", "index": 0, "num_envs": 1, "observation_space": space}
    assert lint_rollouts([r], "TK201", [rec]) == []
    assert [f.code for f in lint_rollouts([r], "TK201")] == ["TK201"]  # no space: reported


@pytest.mark.parametrize(
    "space",
    [
        {"type": "Box", "low": [None, None, None], "high": [9.0, 7.0, 9.0], "shape": [3]},
        {"type": "Box", "low": [-9.0, 7.0, -9.0], "high": [None, None, None], "shape": [3]},
    ],
    ids=["unbounded-below", "unbounded-above"],
)
def test_tk201_a_box_unbounded_on_one_side_still_has_the_other(space: dict[str, object]) -> None:
    rec = {"id": "a", "index": 0, "num_envs": 1, "observation_space": space}
    assert lint_rollouts([_constant(MIN_OBSERVATIONS, MIN_EPISODES)], "TK201", [rec]) == []


def test_tk201_counts_every_file_and_judges_every_leaf() -> None:
    """Two files: the observations, episode starts and files counted over both. Leaf "b"'s
    feature 1 never changes; leaf "a", listed first, has no constant feature."""
    rows = MIN_OBSERVATIONS // 2
    files = []
    for seed in (0, 1):
        r = _constant(rows, MIN_EPISODES // 2)
        rng = np.random.default_rng(seed)
        b = rng.normal(size=(rows, 1, 3)).astype(np.float32)
        b[:, :, 1] = 7.0
        files.append(r.replace(obses={"a": rng.normal(size=(rows, 1, 2)), "b": b}))
    [found] = lint_rollouts(files, "TK201")
    assert found.message == (
        f"1 of 3 feature(s) of obses['b'] never change over {2 * rows} observations, "
        f"{MIN_EPISODES} episode starts and 2 file(s): obses['b'][..., 1] = 7"
    )


def test_tk201_a_leaf_whose_shape_differs_between_files_is_not_judged() -> None:
    """Leaf "a" has 3 features, then 4, then 3 again (all 0): it is not one feature; leaf
    "b" is judged over every file, and changes in the third."""
    rows = MIN_OBSERVATIONS // 3 + 1
    files = []
    for width, b in [(3, 7.0), (4, 7.0), (3, 8.0)]:
        r = _constant(rows, MIN_EPISODES // 3 + 1)
        files.append(r.replace(obses={"a": np.zeros((rows, 1, width)), "b": np.full((rows, 1), b)}))
    assert lint_rollouts(files, "TK201") == []


@pytest.mark.parametrize(
    ("constant", "shown"),
    [
        (5, "obses[..., 0] = 7, obses[..., 1] = 7, obses[..., 2] = 7, obses[..., 3] = 7, "
            "obses[..., 4] = 7"),
        (6, "obses[..., 0] = 7, obses[..., 1] = 7, obses[..., 2] = 7, obses[..., 3] = 7, "
            "obses[..., 4] = 7 (+1 more)"),
    ],
)  # fmt: skip
def test_tk201_names_five_features_and_counts_the_others(constant: int, shown: str) -> None:
    r = _constant(MIN_OBSERVATIONS, MIN_EPISODES)
    obses = np.random.default_rng(0).normal(size=(MIN_OBSERVATIONS, 1, 8))
    obses[:, :, :constant] = 7.0
    [found] = lint_rollouts([r.replace(obses=obses)], "TK201")
    assert found.message == (
        f"{constant} of 8 feature(s) of obses never change over {MIN_OBSERVATIONS} "
        f"observations, {MIN_EPISODES} episode starts and 1 file(s): {shown}"
    )


def test_tk201_a_feature_of_a_matrix_observation_is_named_by_its_indices() -> None:
    r = _constant(MIN_OBSERVATIONS, MIN_EPISODES)
    obses = np.random.default_rng(0).normal(size=(MIN_OBSERVATIONS, 1, 2, 3))
    obses[:, :, 1, 2] = 7.0
    [found] = lint_rollouts([r.replace(obses=obses)], "TK201")
    assert found.message.startswith("1 of 6 feature(s) of obses never change")
    assert found.message.endswith(": obses[..., 1, 2] = 7")


def test_tk201_two_still_channels_of_an_image() -> None:
    r = _frames(MIN_OBSERVATIONS, MIN_EPISODES, (12, 10, 4))
    r.obses[..., 2] = 0
    r.obses[..., 3] = 255
    [found] = lint_rollouts([r], "TK201")
    assert found.message.endswith(": obses[..., :, :, 2] = 0, obses[..., :, :, 3] = 255")
    assert found.message.startswith("2 of 4 channel(s) of obses (an image, hwc)")


# ------------------------------------------------------------------------ TK204, in memory


def test_tk204_only_where_one_index_of_one_recording_is_claimed_twice() -> None:
    files = [rollout(dones_for([6], 6), seed=s) for s in range(3)]
    recordings = [{"id": "r", "index": i, "num_envs": 1} for i in (0, 1, 1)]
    [found] = lint_rollouts(files, "TK204", recordings)
    assert (found.code, found.path) == ("TK204", "r2.npz")
    assert found.message == (
        "r1.npz is index 1 of recording r too, with other arrays: a recording captured once "
        "and saved with every file? (save each rollout with the recorder's recording of the "
        "moment)"
    )
    assert lint_rollouts(files[:2], "TK204", recordings[:2]) == []  # indices 0 and 1


def test_a_file_of_no_steps_is_summarised_quietly() -> None:
    """T = 0: no reward, no typical magnitude to take the median of (and no warning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        summary = summarize(rollout(np.zeros(1)), "a.npz").rewards
    assert (summary.count, summary.typical, summary.values) == (0, 0.0, ())


def test_tk203_a_copy_saved_with_and_without_a_recording() -> None:
    """A deterministic cycle (row T is row 0) saved twice, once with a recording: not the
    repeat of one recording, nor a file without one continuing the one before."""
    cycle = np.tile(np.eye(3, dtype=np.float32), (3, 1))[:7, None, :]
    r = rollout(dones_for([3, 3], 6), obses=cycle, rews=np.ones(6))
    rec = {"id": "r", "index": 0, "num_envs": 1}
    for recordings in ([rec, None], [None, rec]):
        found = lint_rollouts([r, r.copy()], "TK203", recordings)
        assert [(f.code, f.path) for f in found] == [("TK203", "r1.npz")]
    assert lint_rollouts([r, r.copy()], "TK203") == []  # no recording: it continues r0
