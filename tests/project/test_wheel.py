"""`tests/project/wheel_check.py`'s check of what the sdist and wheel hold, on hand-made archives.

`make wheel` runs the whole check (build, twine, install, tests against the install); this
pins that a missing module, LICENSE or console script is reported, naming the file.
"""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.project.wheel_check import missing_files

MODULES = ["trajkit/__init__.py", "trajkit/py.typed"]
INFO = "trajkit-0.1.0.dist-info"
SCRIPT = "[console_scripts]\ntrajkit = trajkit._cli.main:console_main\n"


def _archives(tmp_path: Path, *, leave_out: str = "") -> tuple[Path, Path]:
    wheel_files = {
        **dict.fromkeys(MODULES, ""),
        f"{INFO}/licenses/LICENSE": "MIT",
        f"{INFO}/entry_points.txt": SCRIPT,
    }
    sdist_files = {"LICENSE": "MIT", "pyproject.toml": "", **{f"src/{n}": "" for n in MODULES}}
    wheel, sdist = tmp_path / "trajkit-0.1.0-py3-none-any.whl", tmp_path / "trajkit-0.1.0.tar.gz"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in wheel_files.items():
            if f"wheel:{name}" != leave_out:
                archive.writestr(name, text)
    with tarfile.open(sdist, "w:gz") as archive:
        for name, text in sdist_files.items():
            if f"sdist:{name}" != leave_out:
                info = tarfile.TarInfo(f"trajkit-0.1.0/{name}")
                info.size = len(text)
                archive.addfile(info, io.BytesIO(text.encode()))
    return sdist, wheel


def test_complete_archives_lack_nothing(tmp_path: Path) -> None:
    assert missing_files(*_archives(tmp_path), MODULES) == []


@pytest.mark.parametrize(
    ("leave_out", "reported"),
    [
        ("wheel:trajkit/py.typed", "wheel: trajkit/py.typed"),
        (f"wheel:{INFO}/licenses/LICENSE", f"wheel: {INFO}/licenses/LICENSE"),
        (
            f"wheel:{INFO}/entry_points.txt",
            f"wheel: the `trajkit` console script in {INFO}/entry_points.txt",
        ),
        ("sdist:LICENSE", "sdist: LICENSE"),
        ("sdist:src/trajkit/__init__.py", "sdist: src/trajkit/__init__.py"),
    ],
)
def test_a_missing_file_is_named(tmp_path: Path, leave_out: str, reported: str) -> None:
    assert missing_files(*_archives(tmp_path, leave_out=leave_out), MODULES) == [reported]
