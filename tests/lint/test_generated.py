"""`trajkit lint` on generated corpora it was not tuned on: no false alarm, planted bugs found.

The measurement of `tests/lint/measure.py` at the published generator seed, at the size
`make test` affords (`benchmarks/bench_lint_corpus.py` runs a larger one): clean sets must
give no warning or error; planted bugs that the data shows must be found at their file, env
and step, at least 90 % of them. docs/lint.md's tables are this measurement's, regenerated
here so that they cannot go stale.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("gymnasium")
from tests.lint import plant
from tests.lint.measure import (
    PUBLISHED_SEED,
    Result,
    bug_table,
    measure,
    summary,
    table,
)

CLEAN = 150
PER_BUG = 6
DOCS = Path(__file__).resolve().parents[2] / "docs" / "lint.md"


@pytest.fixture(scope="module")
def published() -> Result:
    return measure(PUBLISHED_SEED, clean=CLEAN, per_bug=PER_BUG)


def test_clean_sets_give_no_warning_or_error(published: Result) -> None:
    alarms = [f"{o.world.name}: {f.format()}" for o in published.clean for _, f in o.alarms]
    assert alarms == []


def test_planted_bugs_that_show_are_found_where_they_are(published: Result) -> None:
    """The goal, 90 %, met here (95 %) and by the larger run (90.6 %, docs/lint.md)."""
    visible = [o for o in published.planted if o.visible]
    found = sum(o.found for o in visible)
    assert len(visible) >= 50, summary(published)
    assert found >= 0.90 * len(visible), summary(published)


def test_every_bug_class_is_planted(published: Result) -> None:
    assert {o.bug for o in published.planted} == set(plant.BUGS)


def test_the_worlds_vary_what_real_data_varies(published: Result) -> None:
    worlds = [o.world for o in published.clean]
    configs = [w.config for w in worlds if w.config]
    assert {c["obs"]["type"] for c in configs} >= {
        "Box",
        "Discrete",
        "MultiDiscrete",
        "MultiBinary",
        "Dict",
        "Tuple",
    }
    assert {c["act"]["type"] for c in configs} == {
        "Box",
        "Discrete",
        "MultiDiscrete",
        "MultiBinary",
    }
    assert {c["reward"] for c in configs} == {
        "dense",
        "signed",
        "saturated",
        "effort",
        "constant",
        "negative",
        "sparse",
        "terminal",
    }
    assert {c["end"]["kind"] for c in configs} == {"hazard", "fixed", "threshold", "never"}
    assert {c["start"] for c in configs} == {"fixed", "random"}
    assert any(c["noise"] == 0 for c in configs)  # deterministic envs
    assert {w.mode for w in worlds} == {"NEXT_STEP", "SAME_STEP", "DISABLED"}
    assert {w.maker for w in worlds} == {"recorder", "loop"}
    assert len({w.wrapper for w in worlds}) >= 5
    assert len({w.env_id for w in worlds}) >= 6  # real envs beside the synthetic one
    assert {1, 4} <= {w.B for w in worlds}
    assert {2, 64} <= {w.T for w in worlds}
    assert any(w.deterministic for w in worlds)


def _block(name: str) -> str:
    text = DOCS.read_text(encoding="utf-8")
    match = re.search(rf"<!-- {name}: start -->\n(.*?)\n<!-- {name}: end -->", text, re.S)
    assert match, f"docs/lint.md has no {name} block"
    return match.group(1).strip()


def test_the_docs_tables_are_this_measurement(published: Result) -> None:
    stale = (
        "docs/lint.md's measured tables are stale: paste what `python -m tests.lint.measure "
        "--docs` prints"
    )
    assert _block("checks-table") == table(published), stale
    assert _block("bugs-table") == f"{summary(published)}\n\n{bug_table(published)}", stale
