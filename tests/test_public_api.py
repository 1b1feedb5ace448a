"""The public surface: `trajkit.__all__` is sorted, complete and importable, and pinned.

Every public name and signature, and every CLI option, is in the checked-in snapshot
`tests/public_api.txt` (see `tests/api_snapshot.py`): an unplanned change fails here.
"""

from __future__ import annotations

import difflib
import importlib
import types
from pathlib import Path

import pytest

import trajkit
from tests.api_snapshot import MODULES, SNAPSHOT, render


def test_all_is_sorted() -> None:
    assert trajkit.__all__ == sorted(trajkit.__all__)


def test_all_is_complete() -> None:
    public = {
        name
        for name, value in vars(trajkit).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public | {"__version__"} == set(trajkit.__all__)


def test_every_name_is_importable() -> None:
    for name in trajkit.__all__:
        assert getattr(trajkit, name) is not None


def test_version_is_a_string() -> None:
    assert isinstance(trajkit.__version__, str)
    assert trajkit.__version__.count(".") >= 2


@pytest.mark.parametrize("module", MODULES)
def test_every_public_module_is_importable(module: str) -> None:
    names = importlib.import_module(module).__all__
    assert names, module


def test_the_public_api_is_the_snapshot() -> None:
    expected = SNAPSHOT.read_text(encoding="utf-8")
    actual = render()
    if actual != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                actual.splitlines(keepends=True),
                "tests/public_api.txt (snapshot)",
                "the API now",
            )
        )
        pytest.fail(
            "The public API differs from its snapshot. If the change is intended, update the "
            "snapshot and the CHANGELOG together: run `make api-snapshot` and add a line to "
            "CHANGELOG.md (a removal or an incompatible change is breaking: see the "
            f"versioning policy in CONTRIBUTING.md).\n{diff}",
            pytrace=False,
        )


def test_every_public_module_is_in_the_snapshot() -> None:
    # A new integration (`src/trajkit/<name>.py` or a package) is public API from its first day.
    root = Path(trajkit.__file__).parent
    modules = [p for p in root.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()]
    public = {f"trajkit.{p.stem}" for p in modules if not p.name.startswith("_")}
    assert {"trajkit", *public} == set(MODULES)
