"""`trajkit plot`: the episode, distribution and timeline figures of files, as PNGs."""

from __future__ import annotations

import argparse
import os
from typing import IO, Any

from trajkit._cli.common import (
    check_folder,
    check_outputs,
    load_all,
    make_folder,
    printable,
    write_output,
)


def plot_command(args: argparse.Namespace) -> int:
    import trajkit.plot as plot  # matplotlib is imported only when a figure is drawn

    out = args.out
    check_folder(out)
    targets = {name: os.path.join(out, name) for name in _PLOTS}
    check_outputs(list(targets.values()), args.paths)
    rollouts = load_all(args.paths, args.max_bytes)
    if rollouts is None:
        return 1
    make_folder(out)
    for name, target in targets.items():
        if name == "episodes.png":
            figure = plot.plot_episodes(rollouts)
        elif name == "distributions.png":
            figure = plot.plot_distributions(rollouts, gamma=args.gamma, lam=args.lam)
        else:
            figure = plot.plot_timeline(rollouts)

        def write(file: IO[bytes], figure: Any = figure) -> None:
            figure.savefig(file, format="png", dpi=args.dpi)

        write_output(target, write, args.paths)
        print(printable(target))
    return 0


_PLOTS = ("episodes.png", "distributions.png", "timeline.png")
