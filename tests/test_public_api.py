"""The public surface: `trajkit.__all__` is sorted, complete and importable."""

from __future__ import annotations

import types

import trajkit


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
