"""The report's figures, drawn with matplotlib (object API, Agg) and inlined as PNG data URIs.

Each function returns a `Picture` (the PNG as a `data:` URI, its size in CSS pixels and its
alt text, which says in words what the figure shows) or `None` when there is nothing to draw.
matplotlib is imported here only, when the first figure is drawn.
"""

from __future__ import annotations

import base64
import io
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from trajkit._base.optional import require
from trajkit._base.types import AnyArray
from trajkit.report._collect import Collection
from trajkit.report._profile import ActionProfile, LeafProfile
from trajkit.report._views import View

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "MAX_FEATURES_DRAWN",
    "Picture",
    "action_picture",
    "episode_picture",
    "frame_pictures",
    "leaf_picture",
    "reward_picture",
    "trace_picture",
]

MAX_FEATURES_DRAWN = 64
"""The most features of a leaf drawn (the first ones)."""

_DPI = 100  # CSS pixels per inch of a figure
_SCALE = 2  # PNG pixels per CSS pixel: sharp on high-density screens
_MAX_PANELS = 12  # action dimensions or features drawn
_MAX_CLASSES_DRAWN = 40
_FEW_VALUES = 12  # values this few are drawn as bars, one per value

BLUE, ORANGE, GREEN, PURPLE, GREY = "#3266a8", "#e07b24", "#2e8b57", "#7b4fa0", "#666666"


@dataclass(frozen=True)
class Picture:
    """A figure ready for the page.

    Attributes:
        uri: The PNG as a `data:image/png;base64,...` URI.
        width: Its width in CSS pixels.
        height: Its height in CSS pixels.
        alt: What it shows, in words.
    """

    uri: str
    width: int
    height: int
    alt: str


@dataclass(frozen=True)
class _Margins:
    """A figure's margins in inches, and the gaps between panels (fractions of a panel)."""

    left: float = 0.75
    right: float = 0.2
    top: float = 0.3
    bottom: float = 0.55
    wspace: float = 0.25
    hspace: float = 0.5


def _figure(
    width: float,
    height: float,
    rows: int = 1,
    cols: int = 1,
    margins: _Margins = _Margins(),
    **kw: Any,
) -> tuple[Figure, Any]:
    """A figure of panels with fixed margins (constrained layout costs a third of a figure)."""
    module = require("matplotlib.figure", "plot", "trajkit.report")
    figure: Figure = module.Figure(figsize=(width, height))
    axes = figure.subplots(rows, cols, squeeze=False, **kw)
    figure.subplots_adjust(
        left=margins.left / width,
        right=1 - margins.right / width,
        top=1 - margins.top / height,
        bottom=margins.bottom / height,
        wspace=margins.wspace,
        hspace=margins.hspace,
    )
    for ax in axes.flat:
        ax.spines[["top", "right"]].set_visible(False)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.25, linewidth=0.6)
        ax.set_axisbelow(True)
    return figure, axes


def _picture(figure: Figure, alt: str) -> Picture:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=_DPI * _SCALE, metadata={"Software": None})
    width, height = figure.get_size_inches()
    uri = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
    return Picture(uri, round(width * _DPI), round(height * _DPI), alt)


def _bins(values: AnyArray) -> Any:
    """Histogram bins: one per integer where the values are few integers, else about √n."""
    low, high = float(values.min()), float(values.max())
    if low == high:
        return np.array([low - 0.5, high + 0.5])
    if np.all(values == np.round(values)) and high - low <= 60:
        return np.arange(low - 0.5, high + 1.5)
    return min(60, max(10, int(math.sqrt(len(values)))))


def _distribution(ax: Any, values: AnyArray, color: str) -> bool:
    """A bar per value where the values are few (a reward of 1 per step), else a histogram.

    Returns whether bars were drawn (their axis has no numeric scale to mark a mean on).
    """
    distinct, counts = np.unique(values, return_counts=True)
    few = len(distinct) <= _FEW_VALUES
    if few:
        _bars(ax, [_number(float(v)) for v in distinct], counts, color)
    else:
        ax.hist(values, bins=_bins(values), color=color)
    _integer_ticks(ax)
    return few


def _bars(ax: Any, labels: Sequence[str], heights: Any, color: str) -> None:
    """One bar per label, narrow where there are few."""
    ax.bar(labels, heights, color=color, width=0.6)
    center, half = (len(labels) - 1) / 2, max(len(labels), 4) / 2
    ax.set_xlim(center - half, center + half)


def _integer_ticks(ax: Any) -> None:
    ax.yaxis.get_major_locator().set_params(integer=True)


def _number(value: float) -> str:
    return f"{value:,.4g}" if math.isfinite(value) else "n/a"


def episode_picture(collection: Collection) -> Picture | None:
    """Histograms of the complete episodes' returns and lengths, terminated vs truncated."""
    if collection.episodes is None or not len(collection.episodes.values):
        return None
    rows = collection.episodes.values
    cut = rows[:, 2] == 1
    figure, axes = _figure(9.6, 3.2, cols=2, margins=_Margins(top=0.15, wspace=0.22))
    for ax, column, label in (
        (axes[0, 0], 0, "episode return"),
        (axes[0, 1], 1, "episode length (steps)"),
    ):
        values = rows[:, column]
        bins = _bins(values)
        ax.hist(
            [values[~cut], values[cut]],
            bins=bins,
            stacked=True,
            color=[BLUE, ORANGE],
            label=["terminated", "truncated"],
        )
        ax.axvline(
            float(np.median(values)), color="black", linewidth=1, linestyle="--", label="median"
        )
        ax.set_xlabel(label)
        ax.set_ylabel("episodes")
        _integer_ticks(ax)
    axes[0, 0].legend(fontsize=8, frameon=False)
    stats = collection.stats
    shown = len(rows)
    of = (
        f" (a sample of {shown:,} of {collection.episodes.population:,})"
        if shown < collection.episodes.population
        else ""
    )
    alt = (
        f"Histograms of the returns and lengths of {collection.episodes.population:,} complete "
        f"episodes{of}: returns from {_number(stats.returns.min)} to {_number(stats.returns.max)}, "
        f"mean {_number(stats.returns.mean)}; lengths from {_number(stats.lengths.min)} to "
        f"{_number(stats.lengths.max)} steps, mean {_number(stats.lengths.mean)}; "
        f"{int(cut.sum()):,} of the {shown:,} drawn were truncated."
    )
    return _picture(figure, alt)


def reward_picture(collection: Collection) -> Picture | None:
    """A histogram of the rewards (a uniform sample of them)."""
    sample = collection.rewards
    if sample is None or not len(sample.values):
        return None
    figure, axes = _figure(9.6, 2.6, margins=_Margins(left=0.8, top=0.35))
    ax = axes[0, 0]
    moments = collection.reward_moments
    if not _distribution(ax, sample.values, GREEN):
        ax.axvline(moments.mean, color="black", linewidth=1, linestyle="--", label="mean")
        ax.legend(fontsize=8, frameon=False)
    ax.set_title(
        f"mean {_number(moments.mean)}, std {_number(moments.std)}", fontsize=9, loc="left"
    )
    ax.set_xlabel("reward per step")
    ax.set_ylabel("steps" if len(sample.values) == sample.population else "steps (sampled)")
    alt = (
        f"Histogram of {len(sample.values):,} of {sample.population:,} rewards: from "
        f"{_number(moments.min)} to {_number(moments.max)}, mean {_number(moments.mean)}, "
        f"standard deviation {_number(moments.std)}."
    )
    return _picture(figure, alt)


def action_picture(actions: ActionProfile | None) -> Picture | None:
    """Bars of how often each action was taken (per dimension), or histograms per dimension."""
    if actions is None or actions.dims == 0:
        return None
    dims = min(actions.dims, _MAX_PANELS)
    cols = min(dims, 4)
    rows = math.ceil(dims / cols)
    margins = _Margins(left=0.75, right=0.2, top=0.15, bottom=0.55, wspace=0.35, hspace=0.45)
    figure, axes = _figure(9.6, 0.6 + 2.2 * rows, rows=rows, cols=cols, margins=margins)
    for ax in axes.flat[dims:]:
        ax.set_visible(False)
    if actions.counts is not None:
        alt = _action_bars(axes.flat, actions.counts[:dims], actions)
    else:
        alt = _action_histograms(axes.flat, actions)
    return _picture(figure, alt)


def _dimension(actions: ActionProfile, index: int) -> str:
    if not actions.shape:
        return "action"
    where = np.unravel_index(index, actions.shape)
    return "action" + "".join(f"[{int(i)}]" for i in where)


def _action_bars(axes: Any, counts: Sequence[Counter[int]], actions: ActionProfile) -> str:
    parts = []
    for index, (ax, counter) in enumerate(zip(axes, counts, strict=False)):
        total = sum(counter.values())
        top = sorted(counter.items())
        if len(top) > _MAX_CLASSES_DRAWN:
            top = sorted(counter.most_common(_MAX_CLASSES_DRAWN))
        values = [value for value, _ in top]
        _bars(ax, [str(v) for v in values], [n / total for _, n in top], PURPLE)
        ax.set_xlabel(_dimension(actions, index))
        ax.set_ylabel("share of steps")
        if len(values) > 12:
            ax.tick_params(axis="x", labelrotation=90, labelsize=6)
        shares = ", ".join(f"{v}: {n / total:.1%}" for v, n in top[:10])
        more = f" and {len(top) - 10} more" if len(top) > 10 else ""
        parts.append(f"{_dimension(actions, index)} ({shares}{more})")
    return "Bar charts of how often each action value was taken: " + "; ".join(parts) + "."


def _action_histograms(axes: Any, actions: ActionProfile) -> str:
    sample = actions.sample
    values = sample.values if sample is not None else np.zeros((0, actions.dims))
    parts = []
    for index, ax in enumerate(axes):
        if index >= min(actions.dims, _MAX_PANELS):
            break
        column = values[:, index]
        if len(column):
            _distribution(ax, column, PURPLE)
        ax.set_xlabel(_dimension(actions, index))
        ax.set_ylabel("steps")
        parts.append(
            f"{_dimension(actions, index)} from {_number(actions.low[index])} to "
            f"{_number(actions.high[index])}"
        )
    shown = f"{len(values):,} sampled steps" if sample is not None else "no steps"
    return f"Histograms of the actions per dimension ({shown}): " + "; ".join(parts) + "."


def leaf_picture(leaf: LeafProfile) -> Picture | None:
    """Each feature's range (min to max), mean and ± one standard deviation."""
    count = min(len(leaf.low), MAX_FEATURES_DRAWN)
    if count == 0 or leaf.count == 0:
        return None
    names = _feature_names(leaf, count)
    left = 0.35 + 0.065 * max(len(name) for name in names)  # room for the longest name
    margins = _Margins(left=left, right=1.5, top=0.15, bottom=0.55)
    figure, axes = _figure(9.6, 0.8 + 0.22 * count, margins=margins)
    ax = axes[0, 0]
    y = np.arange(count)
    low, high, mean, std = leaf.low[:count], leaf.high[:count], leaf.mean[:count], leaf.std[:count]
    ax.hlines(y, low, high, color=GREY, linewidth=1.5, label="min to max")
    ax.hlines(y, mean - std, mean + std, color=BLUE, linewidth=6, alpha=0.55, label="mean ± std")
    ax.plot(mean, y, "|", color="black", markersize=9, label="mean")
    ax.set_yticks(y, names, fontsize=7)
    ax.set_ylim(count - 0.5, -0.5)
    ax.set_xlabel("value")
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    what = {"feature": "feature", "channel": "channel", "value": "all values"}[leaf.unit]
    alt = (
        f"Ranges of {leaf.name} per {what}: "
        + "; ".join(
            f"{name} from {_number(lo)} to {_number(hi)}, mean {_number(mu)}"
            for name, lo, hi, mu in zip(
                _feature_names(leaf, min(count, 16)), low, high, mean, strict=False
            )
        )
        + ("; ..." if count > 16 else "")
        + "."
    )
    return _picture(figure, alt)


def _feature_names(leaf: LeafProfile, count: int) -> list[str]:
    if leaf.unit == "value":
        return ["all values"]
    if leaf.unit == "channel":
        if leaf.low.shape[0] == 1:
            return ["gray"]
        if leaf.low.shape[0] == 3:
            return ["red", "green", "blue"][:count]
        return [f"channel {i}" for i in range(count)]
    shape = leaf.shape or (1,)
    return [
        "[" + ", ".join(str(int(i)) for i in np.unravel_index(k, shape)) + "]" for k in range(count)
    ]


def frame_pictures(view: View, where: str) -> list[tuple[str, list[tuple[int, Picture]]]]:
    """Per image leaf, its frames (step, PNG at its own size), for a strip the page lays out.

    A frame is encoded as it was recorded (no figure around it: drawing eight panels costs
    far more than encoding eight small images); `where` names the file, for the alt text.
    """
    image = require("matplotlib.image", "plot", "trajkit.report")
    pick = view.pick
    strips = []
    for name, frames in view.frames:
        pictures: list[tuple[int, Picture]] = []
        for frame, step in zip(frames, view.frame_steps, strict=True):
            buffer = io.BytesIO()
            gray = frame.ndim == 2
            image.imsave(
                buffer,
                frame,
                format="png",
                cmap="gray" if gray else None,
                vmin=0,
                vmax=255,
                metadata={"Software": None},
            )
            uri = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
            alt = (
                f"{name} at step {step} of the {pick.title.lower()} episode (env {pick.env} of "
                f"{where})"
            )
            pictures.append((step, Picture(uri, frame.shape[1], frame.shape[0], alt)))
        strips.append((name, pictures))
    return strips


def trace_picture(view: View, where: str) -> Picture:
    """Traces of the vector observations (if any) and of the reward, the episode's end marked.

    `where` names the episode's file, for the alt text.
    """
    return _traces(view, where)


def _traces(view: View, where: str) -> Picture:
    panels = len(view.traces) + 1
    height = 0.75 + 1.1 * panels
    margins = _Margins(left=1.65, right=0.2, top=0.3, bottom=0.5, hspace=0.18)
    figure, axes = _figure(9.6, height, rows=panels, margins=margins, sharex=True)
    steps = view.steps
    for ax, (label, values) in zip(axes.flat, view.traces, strict=False):
        ax.plot(steps, values, color=BLUE, linewidth=1.1)
        ax.set_ylabel(label, fontsize=7, rotation=0, ha="right", va="center")
    reward_ax = axes.flat[-1]
    reward_ax.plot(steps, view.rewards, color=GREEN, linewidth=1.1, drawstyle="steps-post")
    reward_ax.set_ylabel("reward", fontsize=7, rotation=0, ha="right", va="center")
    reward_ax.set_xlabel("step of the episode")
    pick = view.pick
    for ax in axes.flat:
        for end in view.ends:
            ax.axvline(end, color=ORANGE, linewidth=1, linestyle=":")
        if pick.ending != "goes on":
            ax.axvline(
                pick.length - 1,
                color="black" if pick.ending == "terminated" else ORANGE,
                linewidth=1.2,
                linestyle="--",
            )
    if pick.ending != "goes on":
        axes.flat[0].set_title(
            f"ends at step {pick.length - 1}: {pick.ending}", fontsize=8, loc="right"
        )
    elif view.ends:
        axes.flat[0].set_title("dotted lines: episode ends", fontsize=8, loc="right")
    shown = "".join(f"{label}, " for label, _ in view.traces)
    ends = (
        f"it ends at step {pick.length - 1} ({pick.ending})"
        if pick.ending != "goes on"
        else f"episodes end at steps {', '.join(str(e) for e in view.ends) or 'none'}"
    )
    alt = (
        f"Traces over the {pick.length} steps of the {pick.title.lower()} episode (env "
        f"{pick.env} of {where}): {shown}the reward per step; {ends}."
    )
    return _picture(figure, alt)
