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
from trajkit.lint import Finding, lint

PUBLISHED_SEED = 3511
"""The generator seed of the measurement published in docs/lint.md (never used to develop).

Development used seeds 11 to 16, and 2027: the first published seed, whose first run showed
a false TK116 (LunarLander's lander above its declared y bound) and so became a development
seed when TK116 was given its margin."""


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
    if p.FILE_LEVEL in places[index]:  # a bug of the whole file: anywhere in it
        return True
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


def evidence() -> dict[str, tuple[str, str]]:
    """Per check: what it reads, and its evidence threshold (from the constants in lint/)."""
    from trajkit.lint import alignment, boundaries, columns, crossfile, policy, rewards
    from trajkit.lint.evidence import CHANCE

    chance = f"chance <= {CHANCE:g}"
    return {
        "TK101": (
            "joined episodes, `truncated`, the time limit",
            f"{chance}: h^n, n distinct episodes unflagged at L; h over the last L/4 steps",
        ),
        "TK102": (
            "rewards at terminations, first steps, controls",
            f">= {alignment.MIN_SHIFTED} episodes, most of them; {chance}",
        ),
        "TK103": (
            "actions, `actor`/`mean`, `log_probs`",
            f">= {alignment.MIN_TELLING_LOGP} telling rows by log_probs, "
            f"{alignment.MIN_TELLING} by greedy; {chance}",
        ),
        "TK104": (
            "observations and rewards at episode ends",
            f"every end, >= {boundaries.MIN_BOUNDARIES}; {chance}",
        ),
        "TK105": ("joined episodes, the time limit", "exact"),
        "TK106": ("actions, the action space", "exact"),
        "TK107": ("Box actions, the action space", "exact"),
        "TK108": (
            "boundary steps' rewards, observation jumps, episode lengths",
            f"{chance}: q^k, k distinct boundary states; exact: L + 1 steps, truncated",
        ),
        "TK109": (
            "observation jumps around `dones`",
            f"{chance} against the mirror, >= {boundaries.MIN_BOUNDARIES}",
        ),
        "TK110": (
            "`log_probs`, `actor`/`mean`/`std`, actions",
            f"{chance} against decoys (none: >= {policy.MIN_FIT} rows fit); "
            f"order: >= {policy.MIN_ROWS} rows",
        ),
        "TK111": (
            "rewards, the recording's wrappers",
            f"a note: >= {rewards.MIN_CLIPPED} at c, >= {rewards.MIN_INSIDE} inside",
        ),
        "TK112": (
            "episode starts per env, observation columns, policy outputs",
            f"{chance} (binomial; p^n); outputs: >= {columns.MIN_DISAGREE} rows",
        ),
        "TK113": ("joined episodes, `truncated`, the time limit", "exact"),
        "TK114": (
            "`final_obses`, the rows after ends",
            f"{chance}, >= {boundaries.MIN_BOUNDARIES} ends",
        ),
        "TK115": (
            "observation rows, episode starts, policy outputs",
            f"{chance}: q^T (floats); outputs: >= {columns.MIN_DISAGREE} steps",
        ),
        "TK116": (
            "observations, `final_obses`, the observation space",
            "exact (Box: past both bounds; one bound: past it by its size)",
        ),
        "TK201": (
            "per-feature ranges (images: per channel), the observation space",
            f">= {crossfile.MIN_OBSERVATIONS} observations, >= {crossfile.MIN_EPISODES} starts",
        ),
        "TK202": (
            "rewards per file, the recording's wrappers",
            f">= {crossfile.MIN_FILES} files of >= {crossfile.MIN_REWARDS} rewards",
        ),
        "TK203": ("file contents, recording indices", "exact"),
        "TK204": ("recording ids and indices", "exact"),
    }


def rates(result: Result) -> dict[str, Any]:
    """Per check: the clean sets it reports on (`false`), the planted sets meant for it."""
    false = Counter[str]()
    for o in result.clean:
        for code in {f.code for _, f in o.findings}:  # a note counts here, not as an alarm
            false[code] += 1
    meant: dict[str, list[Outcome]] = defaultdict(list)
    for o in result.planted:
        for code in p.BUG_CODES[o.bug or ""]:
            meant[code].append(o)
    return {"false": false, "meant": meant}


def table(result: Result) -> str:
    """docs/lint.md's table: per check, its evidence, false alarms and detections."""
    from trajkit.lint.registry import CHECKS

    reads = evidence()
    false = rates(result)["false"]
    meant: dict[str, list[Outcome]] = rates(result)["meant"]
    lines = [
        f"Generator seed {result.seed}: {len(result.clean)} clean sets, "
        f"{len(result.planted)} with a planted bug ({PER_BUG_NOTE}).",
        "",
        "| Check | Severity | Reads | Evidence threshold | Clean sets it reports on | "
        "Planted, visible: found | Replay-only: found by replay |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for code, (what, threshold) in reads.items():
        mine = meant.get(code, [])
        visible = [o for o in mine if o.visible]
        found = sum(
            any(f.code == code and at_place(o.places, i, f) for i, f in o.alarms) for o in visible
        )
        replay = [o for o in mine if o.replayable]
        shown = f"{found} / {len(visible)}" if visible else "-"
        again = f"{sum(o.replay_found for o in replay)} / {len(replay)}" if replay else "-"
        lines.append(
            f"| {code} | {CHECKS[code].severity} | {what} | {threshold} | "
            f"{false.get(code, 0)} / {len(result.clean)} | {shown} | {again} |"
        )
    return "\n".join(lines)


PER_BUG_NOTE = "the same number of each bug class"


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


def bug_table(result: Result) -> str:
    """docs/lint.md's second table: per bug class, how often it shows and is found."""
    head = [
        "| Bug class | Checks | Planted | Visible: found | Replay-only: found by replay | "
        "Neither |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    return "\n".join([*head, *per_bug(result)])


def per_bug(result: Result) -> list[str]:
    """One line per bug class: planted, visible, found, replay-only, replay found, neither."""
    lines = []
    for bug in p.BUGS:
        mine = [o for o in result.planted if o.bug == bug]
        vis = [o for o in mine if o.visible]
        rep = [o for o in mine if o.replayable]
        neither = len(mine) - len(vis) - len(rep)
        lines.append(
            f"| `{bug}` | {', '.join(sorted(p.BUG_CODES[bug])) or '-'} | {len(mine)} | "
            f"{sum(o.found for o in vis)} / {len(vis)} | "
            f"{sum(o.replay_found for o in rep)} / {len(rep)} | {neither} |"
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
                where = f"file {i}: {f.code} env {f.env} step {f.step}"
                out.append(f"  {o.world.name}\n      {where}: {f.message[:220]}")
        out.append("\nMISSES")
        for o in result.planted:
            if o.visible and not o.found:
                got = [f"{f.code}@{i}:{f.env},{f.step}" for i, f in o.alarms][:6]
                first = [sorted(s)[:3] for s in o.places][:3]
                out.append(f"  {o.bug}: {o.world.name}\n      got {got} places {first}")
    return "\n".join(out)


if __name__ == "__main__":  # pragma: no cover - a development tool
    if "--docs" in sys.argv:  # the published measurement, as docs/lint.md shows it
        from tests.lint.test_generated import CLEAN, PER_BUG

        published = measure(PUBLISHED_SEED, clean=CLEAN, per_bug=PER_BUG)
        print(table(published), "", summary(published), "", bug_table(published), sep="\n")
    else:
        seed, clean, k = (int(x) for x in sys.argv[1:4])
        print(report(measure(seed, clean=clean, per_bug=k, replay="--no-replay" not in sys.argv)))
