"""False-alarm and detection rates of `trajkit lint` over generated corpora.

`measure(seed, clean=N, per_bug=K)` draws N clean worlds and, for every bug class of
`tests/lint/plant.py`, K worlds it applies to, with generator seed `seed`; writes each set's
files to a folder, lints it as a user does (`trajkit.lint.lint(folder)`), and counts:

- on clean sets: the sets with any warning or error (a false alarm), per check;
- on planted sets whose bug is visible in the data: the sets where a check meant for that
  bug (`Bug.codes`) reports a warning or an error at a place where the bug changed the data
  (its file, env and step; a finding about a whole file at a file-level bug's file);
- on planted sets whose bug is not visible but whose recording replays: the sets where
  replay (TK3xx) reports at such a place, counted apart.

`table(result)` is docs/lint.md's table; `python -m tests.lint.measure SEED CLEAN PER_BUG`
prints it with the sets behind every miss and false alarm. Development runs use seeds other
than `PUBLISHED_SEED`, the seed of the table in the docs.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import trajkit
from tests.lint import plant as p
from tests.lint import worlds as w
from trajkit.lint import CHECKS, Finding, lint

PUBLISHED_SEED = 2027
"""The generator seed of the measurement published in docs/lint.md (never used to develop)."""


@dataclass
class Outcome:
    """One linted set: what it was and what lint said."""

    world: w.World
    bug: str | None
    findings: list[tuple[int | None, Finding]]
    visible: bool = False
    replayable: bool = False
    found: bool = False
    replay_found: bool = False
    places: list[set[p.Place]] = field(default_factory=list)

    @property
    def alarms(self) -> list[tuple[int | None, Finding]]:
        """The warnings and errors."""
        return [(i, f) for i, f in self.findings if f.severity != "note"]


@dataclass
class Result:
    """Every outcome of one measurement."""

    seed: int
    clean: list[Outcome] = field(default_factory=list)
    planted: list[Outcome] = field(default_factory=list)


def _save(files: list[w.File], folder: str) -> list[str]:
    paths = []
    for i, (rollout, recording) in enumerate(files):
        paths.append(os.path.join(folder, f"part-{i:02d}.npz"))
        trajkit.save(rollout, paths[-1], recording=recording)
    return paths


def _lint(folder: str, paths: list[str], **kw: Any) -> list[tuple[int | None, Finding]]:
    found = lint(folder, jobs=1, **kw)
    return [(paths.index(f.path) if f.path in paths else None, f) for f in found]


def at_place(places: list[set[p.Place]], index: int | None, finding: Finding) -> bool:
    """Whether a finding points at a place where the planted bug changed the data."""
    if index is None or index >= len(places):
        return False
    if finding.env is None:
        return p.FILE_LEVEL in places[index]
    return (finding.env, finding.step) in places[index]


def _found(outcome: Outcome, codes: frozenset[str]) -> bool:
    return any(f.code in codes and at_place(outcome.places, i, f) for i, f in outcome.alarms)


def measure_clean(world: w.World) -> Outcome:
    """Lint one clean world's files."""
    context = w._quiet()
    try:
        files = w.clean_set(world)
    finally:
        context.__exit__(None, None, None)
    with tempfile.TemporaryDirectory() as tmp:
        paths = _save(files, tmp)
        return Outcome(world, None, _lint(tmp, paths))


def measure_planted(bug: str, world: w.World, rng: np.random.Generator, replay: bool) -> Outcome:
    """Lint one world's files with `bug` planted (and replay them where only replay can see)."""
    planted = p.plant(bug, world, rng)
    with tempfile.TemporaryDirectory() as tmp:
        paths = _save(planted.files, tmp)
        outcome = Outcome(
            planted.world,
            bug,
            _lint(tmp, paths),
            visible=planted.visible,
            replayable=planted.replayable and not planted.visible,
            places=planted.places,
        )
        outcome.found = planted.visible and _found(outcome, planted.codes)
        if replay and outcome.replayable:
            again = _lint(tmp, paths, replay=True, select=["TK3"])
            shown = Outcome(planted.world, bug, again, places=planted.places)
            outcome.replay_found = _found(shown, frozenset({"TK301", "TK302", "TK303"}))
    return outcome


def measure(seed: int, *, clean: int, per_bug: int, replay: bool = True) -> Result:
    """The measurement (see the module docstring)."""
    result = Result(seed)
    rng = np.random.default_rng(seed)
    for _ in range(clean):
        result.clean.append(measure_clean(w.sample_world(rng)))
    for bug, spec in p.BUGS.items():
        made = 0
        while made < per_bug:
            world = w.sample_world(rng)
            if not spec.applies(world):
                continue
            result.planted.append(measure_planted(bug, world, rng, replay))
            made += 1
    return result


# ------------------------------------------------------------------------- the table


def rates(result: Result) -> dict[str, Any]:
    """Per check: false alarms on clean sets, detections on planted ones."""
    false = Counter[str]()
    for o in result.clean:
        for code in {f.code for _, f in o.alarms}:
            false[code] += 1
    meant: dict[str, list[Outcome]] = defaultdict(list)
    for o in result.planted:
        for code in p.BUG_CODES[o.bug or ""]:
            meant[code].append(o)
    return {"false": false, "meant": meant}


def summary(result: Result) -> str:
    """The headline numbers."""
    clean = len(result.clean)
    alarms = sum(bool(o.alarms) for o in result.clean)
    visible = [o for o in result.planted if o.visible]
    found = sum(o.found for o in visible)
    replay = [o for o in result.planted if o.replayable]
    replayed = sum(o.replay_found for o in replay)
    neither = sum(not o.visible and not o.replayable for o in result.planted)
    return (
        f"{clean} clean sets: {alarms} with a warning or an error. "
        f"{len(result.planted)} planted sets: {len(visible)} visible in the data, "
        f"{found} of them found at a planted place ({_pct(found, len(visible))}); "
        f"{len(replay)} only replay can see, {replayed} found by replay; "
        f"{neither} that nothing can see."
    )


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:.0f} %" if b else "-"


def per_bug(result: Result) -> list[str]:
    """One line per bug class: planted, visible, found, replay-only, replay found."""
    lines = []
    for bug in p.BUGS:
        mine = [o for o in result.planted if o.bug == bug]
        vis = [o for o in mine if o.visible]
        rep = [o for o in mine if o.replayable]
        lines.append(
            f"| `{bug}` | {', '.join(sorted(p.BUG_CODES[bug])) or '-'} | {len(mine)} | "
            f"{sum(o.found for o in vis)} / {len(vis)} | {sum(o.replay_found for o in rep)} / {len(rep)} |"
        )
    return lines


def report(result: Result, *, details: bool = True) -> str:
    """The summary, the per-bug lines and (with `details`) every miss and false alarm."""
    out = [
        summary(result),
        "",
        "| Bug | Checks | Planted | Found (visible) | Replay found (replay-only) |",
        "| --- | --- | --- | --- | --- |",
        *per_bug(result),
    ]
    r = rates(result)
    out += ["", "False alarms per check: " + str(dict(sorted(r["false"].items())))]
    if details:
        out.append("\nFALSE ALARMS")
        for o in result.clean:
            for i, f in o.alarms[:3]:
                out.append(
                    f"  {o.world.name}\n      file {i}: {f.code} env {f.env} step {f.step}: {f.message[:220]}"
                )
        out.append("\nMISSES")
        for o in result.planted:
            if o.visible and not o.found:
                got = [f"{f.code}@{i}:{f.env},{f.step}" for i, f in o.alarms][:6]
                first = [sorted(s)[:3] for s in o.places][:3]
                out.append(f"  {o.bug}: {o.world.name}\n      got {got} places {first}")
    return "\n".join(out)


if __name__ == "__main__":  # pragma: no cover - a development tool
    seed, clean, k = (int(x) for x in sys.argv[1:4])
    print(report(measure(seed, clean=clean, per_bug=k, replay="--no-replay" not in sys.argv)))
