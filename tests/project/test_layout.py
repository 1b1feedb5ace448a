"""The tests mirror the package: each folder of `tests/` specifies a module or package of trajkit.

`tests/core` holds the tests of `trajkit._core`, `tests/arrow` those of the package
`trajkit.arrow`, `tests/plot` those of the module `trajkit.plot`, `tests/cli` those of
`trajkit._cli` and `trajkit.cli` (a folder takes the name without its leading underscore).
`tests/project` holds what specifies the project as a whole: docs, layers, public API, typing,
wheel, examples. No test file lies flat in `tests/`, and every folder is a package, so two
folders may hold files of the same name (`tests/arrow/test_import.py`, `tests/cli/...`).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
SRC = ROOT / "src" / "trajkit"
PROJECT = "project"


def modules() -> set[str]:
    """The names a folder of tests may take: trajkit's modules and packages, no leading `_`."""
    names: set[str] = set()
    for path in SRC.iterdir():
        if path.name.startswith("__"):  # __init__.py, __main__.py, __pycache__
            continue
        if path.is_dir() and (path / "__init__.py").is_file():
            names.add(path.name.lstrip("_"))
        elif path.suffix == ".py":
            names.add(path.stem.lstrip("_"))
    return names


def folders() -> list[Path]:
    """The folders of `tests/` (not caches)."""
    return sorted(
        path for path in TESTS.iterdir() if path.is_dir() and not path.name.startswith((".", "__"))
    )


def test_the_names_are_read_from_the_package() -> None:
    names = modules()
    assert {"core", "models", "io", "cli", "arrow", "gym", "plot", "testing"} <= names
    assert PROJECT not in names  # the project's folder cannot be mistaken for a module's
    assert not any(name.startswith("_") for name in names)


def test_every_folder_of_tests_names_a_module_or_package_of_trajkit() -> None:
    stray = [path.name for path in folders() if path.name not in modules() | {PROJECT}]
    assert not stray, (
        f"tests/{stray} name no module or package of src/trajkit: put each test file in the "
        "folder of what it specifies (tests/project for the project as a whole)"
    )


def test_no_test_file_lies_flat_in_tests() -> None:
    flat = sorted(path.name for path in TESTS.glob("test_*.py"))
    assert not flat, f"{flat} lie flat in tests/: move each into the folder of what it specifies"


def test_every_folder_of_tests_is_a_package() -> None:
    bare = [path.name for path in folders() if not (path / "__init__.py").is_file()]
    assert not bare, f"tests/{bare} have no __init__.py"
