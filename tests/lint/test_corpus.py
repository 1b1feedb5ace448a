"""Lint on recordings of real Gymnasium envs: no finding on clean ones, each planted bug found.

The corpus (`tests/lint/corpus.py`) records eight or more envs with trajkit's recorder in
each autoreset mode and with correct hand-written loops, under random, epsilon-greedy and
good policies, then plants each bug class in the loop the way people write it. A finding of
the planted check must point at a place where the bug shows (file, env and step); a clean
case must give no finding at all. docs/lint.md shows the precision and recall per check,
regenerated here so that it cannot go stale.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

import trajkit
from trajkit.lint import CHECKS, Finding, lint

pytest.importorskip("gymnasium")
from tests.lint.corpus import PLANTED, Case, box2d_available, build, case_names

NAMES = case_names()
DOCS = Path(__file__).resolve().parents[2] / "docs" / "lint.md"
_RESULTS: dict[str, tuple[Case, list[tuple[int | None, Finding]]]] = {}


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("corpus")


def linted(name: str, root: Path) -> tuple[Case, list[tuple[int | None, Finding]]]:
    """The case and its findings, each with the index of its file (None for the dataset's)."""
    if name not in _RESULTS:
        case = build(name)
        folder = root / name.replace("/", "__")
        folder.mkdir()
        paths = []
        for i, (rollout, recording) in enumerate(case.files):
            paths.append(str(folder / f"part-{i:02d}.npz"))
            trajkit.save(rollout, paths[-1], recording=recording)
        found = lint(folder, jobs=1)
        _RESULTS[name] = (case, [(paths.index(f.path) if f.path else None, f) for f in found])
    return _RESULTS[name]


def _at_a_planted_place(case: Case, index: int | None, finding: Finding) -> bool:
    if index is None:
        return False
    places = case.places[index]
    if finding.env is None:
        return places == {(-1, -1)}
    return (finding.env, finding.step) in places


CLEAN = [n for n in NAMES if len(n.split("/")) == 3]
PLANTED_CASES = [n for n in NAMES if len(n.split("/")) == 4]


def test_the_corpus_covers_eight_envs_every_maker_and_every_bug_class() -> None:
    envs = {n.split("/")[0] for n in CLEAN}
    assert len(envs) >= 8
    makers = {n.split("/")[1] for n in CLEAN}
    assert {"recorder-NEXT_STEP", "recorder-SAME_STEP", "recorder-DISABLED"} <= makers
    assert {"loop-NEXT_STEP", "loop-SAME_STEP"} <= makers
    assert {n.split("/")[2] for n in CLEAN} >= {"random", "eps", "good"}
    assert {n.split("/")[3] for n in PLANTED_CASES} == set(PLANTED)


@pytest.mark.parametrize("name", CLEAN)
def test_a_clean_recording_gives_no_finding(name: str, corpus_dir: Path) -> None:
    _, found = linted(name, corpus_dir)
    assert [f.format() for _, f in found] == []


@pytest.mark.parametrize("name", PLANTED_CASES)
def test_a_planted_bug_is_found_where_it_is(name: str, corpus_dir: Path) -> None:
    case, found = linted(name, corpus_dir)
    assert case.code is not None
    assert any(case.places), "the bug shows nowhere: the case plants nothing"
    mine = [(i, f) for i, f in found if f.code == case.code]
    assert mine, [f.format() for _, f in found]
    for index, finding in mine:
        assert _at_a_planted_place(case, index, finding), (
            finding.format(),
            case.places[index or 0],
        )


# ------------------------------------------------------------------ precision and recall


def table(root: Path) -> str:
    """The precision/recall table of docs/lint.md, computed from the whole corpus.

    Per check: a finding is true when its case plants that check's bug and it points at a
    place where the bug shows; false when it is on a clean case (or off the planted place).
    Findings on the case of another bug are counted apart: there the data is wrong, often in
    that check's way too (a phantom step makes episodes a step longer, which TK105 sees).
    Precision is true / (true + false). A planted file is found when it gets a true finding;
    recall is over the files where the planted bug shows.
    """
    true, false, other = Counter[str](), Counter[str](), Counter[str]()
    files, hit = Counter[str](), Counter[str]()
    for name in NAMES:
        case, found = linted(name, root)
        for index, finding in found:
            if finding.code == case.code and _at_a_planted_place(case, index, finding):
                true[finding.code] += 1
            elif case.code is None or finding.code == case.code:
                false[finding.code] += 1
            else:
                other[finding.code] += 1
        if case.code is None:
            continue
        for i, places in enumerate(case.places):
            if places:
                files[case.code] += 1
                hit[case.code] += any(
                    index == i and f.code == case.code and _at_a_planted_place(case, i, f)
                    for index, f in found
                )
    lines = [
        f"Corpus: {len(CLEAN)} clean sets and {len(PLANTED_CASES)} with a planted bug, "
        f"{sum(len(build(n).files) for n in NAMES)} files.",
        "",
        "| Check | Planted bug | True | False | Precision | On other bugs' sets "
        "| Planted files found | Recall |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    bug_of = {code: bug for bug, code in PLANTED.items()}
    for code in sorted(CHECKS):
        if code.startswith(("TK0", "TK3")):
            continue
        t, f = true[code], false[code]
        precision = f"{t / (t + f):.0%}" if t + f else "-"
        recall = f"{hit[code]} / {files[code]}" if files[code] else "-"
        rate = f"{hit[code] / files[code]:.0%}" if files[code] else "-"
        planted = f"`{bug_of[code]}`" if code in bug_of else "-"
        lines.append(
            f"| {code} | {planted} | {t} | {f} | {precision} | {other[code]} | {recall} | {rate} |"
        )
    return "\n".join(lines)


def test_the_docs_table_is_the_corpus_table(corpus_dir: Path) -> None:
    if not box2d_available():
        pytest.skip("docs/lint.md's table is of the whole corpus, LunarLander (box2d) included")
    text = DOCS.read_text(encoding="utf-8")
    match = re.search(
        r"<!-- corpus-table: start -->\n(.*?)\n<!-- corpus-table: end -->", text, re.S
    )
    assert match, "docs/lint.md has no corpus table"
    assert match.group(1).strip() == table(corpus_dir), (
        "docs/lint.md's corpus table is stale: paste the table this test computes "
        "(python -m tests.lint.test_corpus prints it)"
    )


if __name__ == "__main__":  # pragma: no cover - prints the table for docs/lint.md
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        print(table(Path(tmp)))
