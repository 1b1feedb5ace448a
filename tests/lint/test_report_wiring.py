"""`trajkit lint`'s options and summary, in process: each setting arrives, each word is pinned."""

from __future__ import annotations

import errno
import re
from pathlib import Path

import pytest

from trajkit.lint import report
from trajkit.lint.config import DEFAULT_REWARD_SCALE_RATIO, LintOptions
from trajkit.lint.registry import Finding
from trajkit.lint.report import Tally, options_from

PYPROJECT = """\
[tool.trajkit.lint]
select = ["TK10"]
ignore = ["TK107"]
max-episode-steps = 200
reward-scale-ratio = 50
action-space = {type = "Discrete", n = 4}
"""
TK10 = {"TK101", "TK102", "TK103", "TK104", "TK105", "TK106", "TK108", "TK109"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder under a `pyproject.toml` that sets every key of `[tool.trajkit.lint]`."""
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "data").mkdir()
    return tmp_path / "data"


def test_every_setting_of_the_file_arrives(project: Path) -> None:
    options, config = options_from(
        select=None, ignore=None, max_episode_steps=None, start=str(project)
    )
    assert options == LintOptions(frozenset(TK10), 200, {"type": "Discrete", "n": 4}, 50.0)
    assert config is not None
    assert config.path == project.parent / "pyproject.toml"


def test_the_command_line_overrides_the_file(project: Path) -> None:
    options, _ = options_from(
        select=["TK105", "TK107", "TK2"],
        ignore=["TK2"],
        max_episode_steps=9,
        start=str(project),
    )
    assert options == LintOptions(frozenset({"TK105"}), 9, {"type": "Discrete", "n": 4}, 50.0)


def test_the_file_is_read_from_the_current_folder_by_default(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    options, config = options_from(select=None, ignore=None, max_episode_steps=None)
    assert config is not None
    assert config.path == project.parent / "pyproject.toml"
    assert options.max_episode_steps == 200


def test_without_the_file_every_setting_is_the_default(project: Path) -> None:
    options, config = options_from(
        select=None, ignore=None, max_episode_steps=None, use_config=False, start=str(project)
    )
    assert config is None
    assert options == LintOptions(options.codes, None, None, DEFAULT_REWARD_SCALE_RATIO)
    assert "TK107" in options.codes


def test_a_bad_ignore_code_names_the_option() -> None:
    with pytest.raises(ValueError, match=r"^--ignore: TK9 matches no check \(codes are TK001"):
        options_from(select=None, ignore=["TK9"], max_episode_steps=None, use_config=False)


@pytest.mark.parametrize(
    ("error", "shown"),
    [(OSError(errno.EACCES, "Permission denied"), "Permission denied"), (OSError("gone"), "gone")],
)
def test_a_file_that_cannot_be_read_is_refused_naming_it(
    project: Path, monkeypatch: pytest.MonkeyPatch, error: OSError, shown: str
) -> None:
    def unreadable(path: Path) -> None:
        raise error

    monkeypatch.setattr(report, "read_config", unreadable)
    path = (project.parent / "pyproject.toml").resolve()
    with pytest.raises(ValueError, match=f"^{re.escape(f'cannot read {path}: {shown}')}$"):
        options_from(select=None, ignore=None, max_episode_steps=None, start=str(project))


@pytest.mark.parametrize(
    ("severities", "summary"),
    [
        ([], "All checks passed (1 file)."),
        (["note"], "Found 1 finding (1 note) in 1 file."),
        (["error", "error"], "Found 2 findings (2 errors) in 1 file."),
        (
            ["note", "warning", "error", "warning", "note", "note"],
            "Found 6 findings (1 error, 2 warnings, 3 notes) in 1 file.",
        ),
    ],
)
def test_the_summary_counts_each_severity(severities: list[str], summary: str) -> None:
    code = {"error": "TK105", "warning": "TK203", "note": "TK300"}
    tally = Tally()
    for severity in severities:
        tally.add(Finding(code[severity], "found", "a.npz"))
    assert tally.summary(files=1) == summary
    assert tally.exit_code == int("error" in severities or "warning" in severities)
