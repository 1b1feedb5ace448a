"""Figures of recorded rollouts and learning curves (needs `trajkit[plot]`, i.e. matplotlib).

Every function returns a `matplotlib.figure.Figure` built with matplotlib's object API on the
Agg backend: no pyplot, no global state, nothing shown. Save it with `figure.savefig(path)`,
or from the command line with `trajkit plot FILES... --out DIR`. matplotlib is imported here
only, never by `import trajkit`.

- [`plot_episodes`][trajkit.plot.plot_episodes]: episode returns and lengths over time;
- [`plot_distributions`][trajkit.plot.plot_distributions]: reward and advantage histograms;
- [`plot_timeline`][trajkit.plot.plot_timeline]: where episodes ended, per env, terminations
  versus truncations;
- [`plot_learning_curve`][trajkit.plot.plot_learning_curve]: mean return against env steps.

Examples:
    >>> from trajkit.plot import plot_timeline
    >>> from trajkit.testing import example_rollout
    >>> figure = plot_timeline([example_rollout(num_steps=32, num_envs=4, truncation=True)])
    >>> type(figure).__name__
    'Figure'
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from trajkit._base.types import AnyArray
from trajkit._core.episodes import complete_episodes
from trajkit._models.rollout import Rollout
from trajkit._models.rules import episode_ends

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_distributions", "plot_episodes", "plot_learning_curve", "plot_timeline"]

_TERMINATED = "#1f77b4"
_TRUNCATED = "#ff7f0e"


def _figure(width: float, height: float, rows: int = 1, cols: int = 1) -> tuple[Figure, Any]:
    try:
        figure_module = importlib.import_module("matplotlib.figure")
    except ImportError as exc:  # pragma: no cover - matplotlib is installed with the dev extras
        raise ImportError(
            "trajkit.plot needs matplotlib; install it with: pip install 'trajkit[plot]'"
        ) from exc
    figure: Figure = figure_module.Figure(figsize=(width, height), layout="constrained")
    axes = figure.subplots(rows, cols, squeeze=False)
    return figure, axes


def _episode_ends(rollouts: Sequence[Rollout]) -> list[tuple[int, int, float, int, bool]]:
    """(global step, env, return, length, truncated) of every complete episode, in order.

    Complete episodes as `Rollout.episode_stats` defines them (they start and end inside a
    rollout). The rollouts are taken as consecutive: each one's steps are numbered after the
    previous.
    """
    out: list[tuple[int, int, float, int, bool]] = []
    offset = 0
    for r in rollouts:
        stats = r.episode_stats()
        env, _, last = complete_episodes(r.dones)
        cut = r.truncated[last - 1, env] == 1 if r.truncated is not None else np.zeros_like(env)
        out.extend(
            zip(
                (offset + last).tolist(),
                env.tolist(),
                stats.returns.tolist(),
                stats.lengths.tolist(),
                cut.astype(bool).tolist(),
                strict=True,
            )
        )
        offset += r.num_steps
    out.sort()
    return out


def plot_episodes(rollouts: Sequence[Rollout]) -> Figure:
    """Episode returns and lengths against the step each episode ended at.

    Counts the episodes that start and end inside a rollout (see
    [`Rollout.episode_stats`][trajkit.Rollout.episode_stats]); for learning curves across
    rollouts use the recorder's `last_episodes` and
    [`plot_learning_curve`][trajkit.plot.plot_learning_curve]. Terminations and truncations are
    told apart by colour; the line is the running mean of the last 20 returns.

    Args:
        rollouts: Consecutive rollouts (one file, or several in recording order).

    Returns:
        A figure with two panels: returns, lengths.

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> fig = plot_episodes([example_rollout(num_steps=64, num_envs=4, truncation=True)])
        >>> [ax.get_ylabel() for ax in fig.axes]
        ['return', 'length (steps)']
    """
    figure, axes = _figure(8, 5.5, rows=2)
    ends = _episode_ends(rollouts)
    steps = np.array([e[0] for e in ends])
    returns = np.array([e[2] for e in ends])
    lengths = np.array([e[3] for e in ends])
    cut = np.array([e[4] for e in ends], dtype=bool)
    top, bottom = axes[0, 0], axes[1, 0]
    for ax, values in ((top, returns), (bottom, lengths)):
        ax.scatter(steps[~cut], values[~cut], s=12, color=_TERMINATED, label="terminated")
        ax.scatter(steps[cut], values[cut], s=12, color=_TRUNCATED, marker="s", label="truncated")
        ax.grid(alpha=0.3)
    if len(returns):
        window = np.array([returns[max(0, i - 19) : i + 1].mean() for i in range(len(returns))])
        top.plot(steps, window, color="black", linewidth=1.5, label="mean of last 20")
    top.set_ylabel("return")
    bottom.set_ylabel("length (steps)")
    bottom.set_xlabel("step at which the episode ended")
    top.set_title(f"{len(ends)} complete episodes in {len(rollouts)} rollout(s)")
    top.legend(loc="best", fontsize="small")
    return figure


def plot_distributions(rollouts: Sequence[Rollout], *, gamma: float, lam: float) -> Figure:
    """Histograms of the rewards and of the GAE advantages (when there is a critic).

    Args:
        rollouts: The rollouts whose steps to pool.
        gamma: Discount for the advantages.
        lam: GAE λ for the advantages.

    Returns:
        A figure with two panels: rewards, advantages; a black line marks each mean.

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> fig = plot_distributions([example_rollout()], gamma=0.99, lam=0.95)
        >>> [ax.get_xlabel() for ax in fig.axes]
        ['reward', 'advantage (gamma=0.99, lam=0.95)']
    """
    figure, axes = _figure(9, 3.6, cols=2)
    rews = np.concatenate([np.ravel(r.rews) for r in rollouts]) if rollouts else np.zeros(0)
    with_critic = [r for r in rollouts if "critic" in r.model_outs.arrays]
    _histogram(axes[0, 0], rews, "reward", "#2ca02c")
    if with_critic:
        adv = np.concatenate([np.ravel(r.advantages(gamma, lam)) for r in with_critic])
        _histogram(axes[0, 1], adv, f"advantage (gamma={gamma}, lam={lam})", "#9467bd")
    else:
        axes[0, 1].set_xlabel(f"advantage (gamma={gamma}, lam={lam})")
        axes[0, 1].text(0.5, 0.5, "no critic recorded", ha="center", va="center")
    return figure


def _histogram(ax: Any, values: AnyArray, label: str, color: str) -> None:
    if values.size:
        ax.hist(values, bins=min(50, max(5, int(np.sqrt(values.size)))), color=color)
        ax.axvline(float(values.mean()), color="black", linewidth=1, label="mean")
        ax.legend(loc="upper right", fontsize="small")
        ax.set_title(f"mean {values.mean():.3g}, std {values.std():.3g}, n={values.size}")
    ax.set_xlabel(label)
    ax.set_ylabel("count")
    ax.grid(alpha=0.3)


def plot_timeline(rollouts: Sequence[Rollout]) -> Figure:
    """Where episodes ended, one row per env: terminations and truncations over time.

    Args:
        rollouts: Consecutive rollouts (one file, or several in recording order).

    Returns:
        A figure with one panel.

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> fig = plot_timeline([example_rollout(num_steps=16, num_envs=2)])
        >>> fig.axes[0].get_ylabel()
        'env'
    """
    num_envs = max((r.batch_size for r in rollouts), default=1)
    figure, axes = _figure(9, 1.2 + 0.35 * num_envs)
    ax = axes[0, 0]
    offset = 0
    for i, r in enumerate(rollouts):
        ends = episode_ends(r.dones)
        cut = (r.truncated == 1) if r.truncated is not None else np.zeros_like(ends)
        t_end, b_end = np.nonzero(ends & ~cut)
        t_cut, b_cut = np.nonzero(ends & cut)
        ax.scatter(
            offset + t_end + 1,
            b_end,
            marker="|",
            s=120,
            color=_TERMINATED,
            label="terminated" if i == 0 else None,
        )
        ax.scatter(
            offset + t_cut + 1,
            b_cut,
            marker="x",
            s=40,
            color=_TRUNCATED,
            label="truncated" if i == 0 else None,
        )
        offset += r.num_steps
        if i + 1 < len(rollouts):
            ax.axvline(offset, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xlim(0, max(offset, 1))
    ax.set_ylim(num_envs - 0.5, -0.5)
    ax.set_yticks(range(num_envs))
    ax.set_ylabel("env")
    ax.set_xlabel("step (dotted lines: rollout boundaries)" if len(rollouts) > 1 else "step")
    ax.set_title("episode ends")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    ax.grid(axis="x", alpha=0.3)
    return figure


def plot_learning_curve(
    steps: Sequence[int],
    mean_returns: Sequence[float],
    *,
    episodes: tuple[Sequence[int], Sequence[float]] | None = None,
    title: str | None = None,
) -> Figure:
    """A learning curve: mean episode return against env steps.

    Args:
        steps: Env steps at each point.
        mean_returns: The mean return at each point (NaN where no episode had ended yet).
        episodes: Optionally, each episode's (end step, return), drawn as faint dots.
        title: The figure's title.

    Returns:
        A figure with one panel.

    Examples:
        >>> fig = plot_learning_curve([100, 200, 300], [10.0, 40.0, 90.0], title="demo")
        >>> fig.axes[0].get_xlabel()
        'env steps'
    """
    figure, axes = _figure(8, 4)
    ax = axes[0, 0]
    if episodes is not None:
        ax.scatter(episodes[0], episodes[1], s=6, alpha=0.25, color="grey", label="episodes")
    ax.plot(steps, mean_returns, color=_TERMINATED, linewidth=2, label="mean of last 20")
    ax.set_xlabel("env steps")
    ax.set_ylabel("episode return")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    if title:
        ax.set_title(title)
    return figure
