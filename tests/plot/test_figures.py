"""What trajkit.plot's figures show, artist by artist, against references computed here.

`tests/test_plot.py` checks that the figures are made and count the episodes; these pin what
a reader sees: where each mark is (from a slow loop over the dones), which marks are
terminations and which truncations (marker, colour, legend), the running mean, the axes'
labels, limits, ticks and grids, the legends' texts and places, and the figures' sizes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("matplotlib")

import itertools

from matplotlib.colors import to_rgba
from matplotlib.markers import MarkerStyle

from trajkit import Rollout, plot
from trajkit.testing import example_rollout

TERMINATED = to_rgba("#1f77b4")
TRUNCATED = to_rgba("#ff7f0e")
SMALL = 10 * 0.833  # matplotlib's "small" font at the default size


def _rollouts(num_envs: int = 3) -> list[Rollout]:
    return [
        example_rollout(num_steps=30, num_envs=num_envs, truncation=True, seed=s, done_prob=0.3)
        for s in (3, 4)
    ]


def _episodes(rollouts: list[Rollout]) -> list[tuple[int, int, float, int, bool]]:
    """(end step, env, return, length, truncated) of each complete episode, by a slow loop."""
    found = []
    offset = 0
    for r in rollouts:
        dones, rews = np.asarray(r.dones), np.asarray(r.rews)
        truncated = np.zeros_like(rews) if r.truncated is None else np.asarray(r.truncated)
        for b in range(r.batch_size):
            starts = [t for t in range(r.num_steps + 1) if dones[t, b] == 1]
            for start, end in itertools.pairwise(starts):
                found.append(
                    (
                        offset + end,
                        b,
                        float(rews[start:end, b].sum()),
                        end - start,
                        bool(truncated[end - 1, b] == 1),
                    )
                )
        offset += r.num_steps
    return sorted(found)


def _axes(figure: Any) -> list[Any]:
    """The figure's axes (as `Any`: matplotlib's artists are loosely typed)."""
    return list(figure.axes)


def _marker(collection: Any, marker: str) -> bool:
    style = MarkerStyle(marker)
    expected = style.get_path().transformed(style.get_transform()).vertices
    return bool(np.allclose(collection.get_paths()[0].vertices, expected))


def _legend(ax: Any) -> tuple[list[str], int, float]:
    legend = ax.get_legend()
    assert legend is not None
    sizes = {text.get_fontsize() for text in legend.get_texts()}
    assert len(sizes) == 1
    return [text.get_text() for text in legend.get_texts()], legend._loc, sizes.pop()


def _grid(axis: Any) -> tuple[bool, float | None]:
    line = axis.get_gridlines()[0]
    return line.get_visible(), line.get_alpha()


def test_episode_ends_are_numbered_across_consecutive_rollouts() -> None:
    rollouts = _rollouts()
    expected = _episodes(rollouts)
    assert any(e[4] for e in expected)
    assert any(not e[4] for e in expected)
    assert any(e[0] > rollouts[0].num_steps for e in expected)
    ends = plot._episode_ends(rollouts)
    assert [(s, b, n, cut) for s, b, _, n, cut in ends] == [
        (s, b, n, cut) for s, b, _, n, cut in expected
    ]
    np.testing.assert_allclose([e[2] for e in ends], [e[2] for e in expected], atol=1e-5)
    assert all(type(e[4]) is bool for e in ends)
    without = [r.replace(truncated=None, final_values=None) for r in rollouts]
    assert [e[4] for e in plot._episode_ends(without)] == [False] * len(expected)


def test_the_episodes_figure() -> None:
    rollouts = _rollouts()
    expected = _episodes(rollouts)
    figure = plot.plot_episodes(rollouts)
    assert tuple(figure.get_size_inches()) == (8.0, 5.5)
    assert type(figure.get_layout_engine()).__name__ == "ConstrainedLayoutEngine"
    top, bottom = _axes(figure)
    assert (top.get_ylabel(), bottom.get_ylabel()) == ("return", "length (steps)")
    assert bottom.get_xlabel() == "step at which the episode ended"
    assert top.get_title() == f"{len(expected)} complete episodes in 2 rollout(s)"
    for ax, column in ((top, 2), (bottom, 3)):
        terminated, truncated = ax.collections
        for collection, cut, color, marker, label in (
            (terminated, False, TERMINATED, "o", "terminated"),
            (truncated, True, TRUNCATED, "s", "truncated"),
        ):
            points = [(e[0], e[column]) for e in expected if e[4] is cut]
            np.testing.assert_allclose(collection.get_offsets(), points, atol=1e-5)
            assert collection.get_label() == label
            assert tuple(collection.get_facecolor()[0]) == color
            assert list(collection.get_sizes()) == [12]
            assert _marker(collection, marker)
        assert _grid(ax.xaxis) == (True, 0.3)
        assert _grid(ax.yaxis) == (True, 0.3)
    (mean,) = top.get_lines()
    returns = np.array([e[2] for e in expected])
    window = [returns[max(0, i - 19) : i + 1].mean() for i in range(len(returns))]
    np.testing.assert_allclose(mean.get_xdata(), [e[0] for e in expected])
    np.testing.assert_allclose(mean.get_ydata(), window, atol=1e-5)
    assert (mean.get_color(), mean.get_linewidth(), mean.get_label()) == (
        "black",
        1.5,
        "mean of last 20",
    )
    assert _legend(top) == (["terminated", "truncated", "mean of last 20"], 0, SMALL)
    assert bottom.get_legend() is None
    assert len(bottom.get_lines()) == 0


def test_the_episodes_figure_of_no_episodes() -> None:
    figure = plot.plot_episodes([])
    top, _ = _axes(figure)
    assert len(top.get_lines()) == 0
    assert top.get_title() == "0 complete episodes in 0 rollout(s)"


def test_the_timeline() -> None:
    rollouts = _rollouts(num_envs=4)
    assert all(np.any(r.truncated == 1) for r in rollouts)
    figure = plot.plot_timeline(rollouts)
    assert tuple(figure.get_size_inches()) == pytest.approx((9.0, 1.2 + 0.35 * 4))
    (ax,) = _axes(figure)
    offset = 0
    for i, r in enumerate(rollouts):
        dones = np.asarray(r.dones)
        cut = np.asarray(r.truncated)
        ends = [(t, b) for t in range(r.num_steps) for b in range(4) if dones[t + 1, b] == 1]
        terminated, truncated = ax.collections[2 * i : 2 * i + 2]
        for collection, is_cut, color, marker, size, label in (
            (terminated, False, TERMINATED, "|", 120, "terminated"),
            (truncated, True, TRUNCATED, "x", 40, "truncated"),
        ):
            points = sorted((offset + t + 1, b) for t, b in ends if bool(cut[t, b] == 1) is is_cut)
            got = sorted(map(tuple, np.asarray(collection.get_offsets()).tolist()))
            assert got == points
            assert tuple(collection.get_facecolor()[0]) == color
            assert list(collection.get_sizes()) == [size]
            assert _marker(collection, marker)
            if i == 0:
                assert collection.get_label() == label
            else:  # (unlabelled: each kind once in the legend)
                assert collection.get_label().startswith("_child")
        offset += r.num_steps
    (boundary,) = ax.get_lines()
    assert list(boundary.get_xdata()) == [30, 30]
    assert (boundary.get_color(), boundary.get_linewidth(), boundary.get_linestyle()) == (
        "grey",
        0.8,
        ":",
    )
    assert ax.get_xlim() == (0.0, 60.0)
    assert ax.get_ylim() == (3.5, -0.5)
    assert list(ax.get_yticks()) == [0, 1, 2, 3]
    assert ax.get_ylabel() == "env"
    assert ax.get_xlabel() == "step (dotted lines: rollout boundaries)"
    assert ax.get_title() == "episode ends"
    assert _legend(ax) == (["terminated", "truncated"], 2, SMALL)
    anchor = ax.get_legend().get_bbox_to_anchor().transformed(ax.transAxes.inverted())
    assert anchor.bounds[:2] == pytest.approx((1.0, 1.0))
    assert _grid(ax.xaxis) == (True, 0.3)
    assert _grid(ax.yaxis)[0] is False


def test_the_timeline_of_one_rollout() -> None:
    r = example_rollout(num_steps=5, num_envs=2, truncation=False, seed=1, done_prob=0.5)
    (ax,) = _axes(plot.plot_timeline([r]))
    assert ax.get_xlabel() == "step"
    assert len(ax.get_lines()) == 0  # no boundary
    assert ax.get_xlim() == (0.0, 5.0)
    assert len(ax.collections[1].get_offsets()) == 0  # no truncation without `truncated`
    assert ax.get_ylim() == (1.5, -0.5)


def test_the_learning_curve() -> None:
    figure = plot.plot_learning_curve(
        [10, 20, 30], [1.0, 2.0, 4.0], episodes=([5, 25], [0.5, 3.5]), title="run"
    )
    assert tuple(figure.get_size_inches()) == (8.0, 4.0)
    (ax,) = _axes(figure)
    (dots,) = ax.collections
    np.testing.assert_array_equal(dots.get_offsets(), [[5, 0.5], [25, 3.5]])
    assert list(dots.get_sizes()) == [6]
    assert dots.get_alpha() == 0.25
    assert tuple(dots.get_facecolor()[0][:3]) == to_rgba("grey")[:3]
    assert dots.get_label() == "episodes"
    (line,) = ax.get_lines()
    assert list(line.get_xdata()) == [10, 20, 30]
    assert list(line.get_ydata()) == [1.0, 2.0, 4.0]
    assert (line.get_color(), line.get_linewidth(), line.get_label()) == (
        "#1f77b4",
        2,
        "mean of last 20",
    )
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == (
        "env steps",
        "episode return",
        "run",
    )
    assert _legend(ax) == (["episodes", "mean of last 20"], 4, SMALL)
    assert _grid(ax.xaxis) == (True, 0.3)
    assert _grid(ax.yaxis) == (True, 0.3)
    (plain,) = _axes(plot.plot_learning_curve([1], [2.0]))
    assert len(plain.collections) == 0
    assert plain.get_title() == ""
