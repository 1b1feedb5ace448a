"""trajkit.plot and `trajkit plot`: figures of recorded rollouts, written as PNG files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")

import trajkit
from trajkit import plot
from trajkit._cli.main import main
from trajkit.testing import example_rollout

PNG = b"\x89PNG\r\n\x1a\n"


def rollouts() -> list[trajkit.Rollout]:
    return [example_rollout(num_steps=40, num_envs=3, truncation=True, seed=s) for s in (1, 2)]


def test_episodes_figure_counts_the_complete_episodes() -> None:
    rs = rollouts()
    figure = plot.plot_episodes(rs)
    complete = sum(r.episode_stats().returns.size for r in rs)
    assert figure.axes[0].get_title() == f"{complete} complete episodes in 2 rollout(s)"
    offsets = [np.asarray(c.get_offsets()) for c in figure.axes[0].collections]
    returns = np.concatenate([o[:, 1] for o in offsets])
    expected = np.concatenate([r.episode_stats().returns for r in rs])
    np.testing.assert_allclose(np.sort(returns), np.sort(expected))


def test_timeline_marks_every_episode_end() -> None:
    rs = rollouts()
    figure = plot.plot_timeline(rs)
    marks = sum(np.asarray(c.get_offsets()).shape[0] for c in figure.axes[0].collections)
    assert marks == sum(r.episode_stats().episodes for r in rs)


def test_distributions_without_a_critic_say_so() -> None:
    figure = plot.plot_distributions([example_rollout(keys=("actions",))], gamma=0.9, lam=0.9)
    assert [t.get_text() for t in figure.axes[1].texts] == ["no critic recorded"]


def test_distributions_label_the_mean_line_in_a_legend() -> None:
    figure = plot.plot_distributions(rollouts(), gamma=0.9, lam=0.9)
    for ax in figure.axes:
        legend = ax.get_legend()
        assert legend is not None, ax.get_xlabel()
        assert [t.get_text() for t in legend.get_texts()] == ["mean"]
        (line,) = ax.get_lines()
        assert line.get_label() == "mean"
    empty = plot.plot_distributions([], gamma=0.9, lam=0.9)
    assert empty.axes[0].get_legend() is None  # no histogram, no mean, no legend


def test_learning_curve() -> None:
    figure = plot.plot_learning_curve([1, 2], [3.0, 4.0], episodes=([1], [3.0]), title="t")
    assert figure.axes[0].get_title() == "t"


def test_plot_command_writes_three_pngs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = []
    for i, r in enumerate(rollouts()):
        paths.append(str(tmp_path / f"r{i}.npz"))
        trajkit.save(r, paths[-1])
    out = tmp_path / "figures"
    assert main(["plot", *paths, "--out", str(out), "--dpi", "40"]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ["distributions.png", "episodes.png", "timeline.png"]
    for name in names:
        assert (out / name).read_bytes().startswith(PNG)
    printed = capsys.readouterr().out.splitlines()
    assert sorted(printed) == [str(out / name) for name in names]


def test_plot_command_refuses_a_bad_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    assert main(["plot", str(bad), "--out", str(tmp_path / "o")]) == 1
    assert "bad.npz: invalid:" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_importing_trajkit_does_not_import_matplotlib() -> None:
    import subprocess
    import sys

    code = "import sys, trajkit; print('matplotlib' in sys.modules)"
    assert (
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
        == "False"
    )
