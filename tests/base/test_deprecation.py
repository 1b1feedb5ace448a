"""`deprecated` warns once per call, naming the replacement and the release, at the caller."""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import pytest

from tests.mutation_report import UNDER_MUTMUT
from trajkit._base.deprecation import deprecated


def _old_name() -> int:
    deprecated("trajkit.old_name", "trajkit.new_name")
    return 1


@pytest.mark.skipif(
    UNDER_MUTMUT, reason="mutmut's trampoline adds frames between the caller and the warning"
)
def test_the_warning_points_at_the_line_that_called_the_deprecated_function() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        _old_name()
    (warning,) = caught
    assert warning.category is DeprecationWarning
    assert (warning.filename, warning.lineno) == (__file__, line)
    assert str(warning.message) == (
        "trajkit.old_name is deprecated and will be removed in trajkit 0.3.0: use trajkit.new_name"
    )


def test_removal_and_stacklevel_are_passed_on(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(warnings, "warn", lambda *args, **kwargs: calls.append((args, kwargs)))
    deprecated("a", "b")
    deprecated("a", "b", removal="9.0", stacklevel=1)
    default, given = (
        "a is deprecated and will be removed in trajkit 0.3.0: use b",
        "a is deprecated and will be removed in trajkit 9.0: use b",
    )
    assert calls == [
        ((default, DeprecationWarning), {"stacklevel": 3}),
        ((given, DeprecationWarning), {"stacklevel": 1}),
    ]
