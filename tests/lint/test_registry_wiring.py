"""The registry, in process: which codes a selection turns on, and how a check's error is worded.

`select` and `ignore` resolve as ruff's do: the longest matching prefix wins, and `ALL` is the
shortest of all (length 0). `failed` words an error with the place it was raised, named from
`trajkit/` on whatever the system's path separator and however deep the package lies.
"""

from __future__ import annotations

from trajkit.lint.registry import CHECKS, failed, selected_codes

TK1 = frozenset(code for code in CHECKS if code.startswith("TK1"))


def test_all_is_shorter_than_any_prefix() -> None:
    assert selected_codes(None, ["TK"]) == frozenset()  # select ALL, ignore TK: TK is longer
    assert selected_codes(["ALL"], ["T"]) == frozenset()
    assert selected_codes(["TK1"], ["ALL"]) == TK1  # TK1 is longer than ALL
    assert selected_codes(["T"], ["ALL"]) == frozenset(CHECKS)
    assert selected_codes(["all"], ["all"]) == frozenset()
    assert selected_codes(None, ["TK2", "TK3"]) == frozenset(
        code for code in CHECKS if code.startswith(("TK0", "TK1"))
    )


def _raised_in(filename: str) -> Exception:
    """A ValueError raised by code that claims to lie in `filename`, line 1."""
    try:
        exec(compile("raise ValueError('v')", filename, "exec"))
    except ValueError as exc:
        return exc
    raise AssertionError("not raised")


def test_failed_names_the_place_from_the_package_down() -> None:
    where = "(at trajkit/lint/checks.py:1 in <module>)"
    for filename in (
        r"C:\env\Lib\site-packages\trajkit\lint\checks.py",  # Windows
        "/home/me/trajkit/.venv/lib/site-packages/trajkit/lint/checks.py",  # a checkout's venv
    ):
        assert failed("a.npz", _raised_in(filename)) == f"a.npz: ValueError: v {where}"
    assert failed("a.npz", _raised_in("elsewhere.py")) == (
        "a.npz: ValueError: v (at elsewhere.py:1 in <module>)"
    )


def test_an_error_never_raised_is_worded_without_a_place() -> None:
    assert failed("a.npz", KeyError("k")) == "a.npz: KeyError: 'k'"
