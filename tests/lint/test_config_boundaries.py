"""`[tool.trajkit.lint]` at its boundaries: the search upwards, files without the table,
messages that name the file.

Each test pins behaviour that a small change to `trajkit.lint.config` (a mutant of
`make mutate`) would break without any other test noticing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trajkit.lint import find_config, read_config

TABLE = "[tool.trajkit.lint]\nmax-episode-steps = 500\n"


def test_the_search_goes_on_past_other_projects_files(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(TABLE)
    inner = tmp_path / "a" / "b" / "c"
    inner.mkdir(parents=True)
    (tmp_path / "a" / "pyproject.toml").write_text("[project]\nname = 'other'\n")
    (tmp_path / "a" / "b" / "pyproject.toml").write_bytes(b"\xff\xfe not UTF-8")
    (tmp_path / "a" / "b" / "c" / "pyproject.toml").mkdir()  # (a folder of that name)
    assert find_config(inner) == tmp_path.resolve() / "pyproject.toml"


@pytest.mark.parametrize(
    "text",
    [
        "[project]\nname = 'trajkit-user'\n",  # no [tool] table
        "[tool.black]\n# trajkit\n",  # [tool] without trajkit
    ],
)
def test_a_file_without_the_table_is_no_config(tmp_path: Path, text: str) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(text)
    assert find_config(tmp_path) is None
    config = read_config(path)
    assert (config.select, config.max_episode_steps, config.path) == (None, None, path)


def test_invalid_toml_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.trajkit.lint\n")
    message = f"{path}: not valid TOML: "
    for call in (lambda: find_config(tmp_path), lambda: read_config(path)):
        with pytest.raises(ValueError, match=re.escape(message)):
            call()


def test_every_key_is_read_and_the_path_kept(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(
        "[tool.trajkit.lint]\nreward-scale-ratio = 50\nmax-episode-steps = 200\n"
        'ignore = ["TK202"]\naction-space = {type = "Discrete", n = 2}\n'
    )
    config = read_config(path)
    assert config.reward_scale_ratio == 50.0
    assert config.max_episode_steps == 200
    assert config.ignore == ("TK202",)
    assert config.action_space == {"type": "Discrete", "n": 2}
    assert config.path == path


def test_unknown_keys_are_listed_with_the_known_ones(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.trajkit.lint]\nzeta = 1\nalpha = 2\n")
    message = (
        f"{path}: [tool.trajkit.lint]: unknown key(s) alpha, zeta; known: select, ignore, "
        "max-episode-steps, reward-scale-ratio, action-space"
    )
    with pytest.raises(ValueError, match=re.escape(message) + "$"):
        read_config(path)
