"""Dimension strings (`"T+1 B ..."`): parsed, described, and bound across fields with blame.

The rule table is parsed when `trajkit` is imported, so only these tests see `DimSpec.parse`
at work on new text; `bind_dims`'s messages are pinned word for word, since they are what a
user reads about a wrong shape.
"""

from __future__ import annotations

import re

import pytest

from trajkit._models.dims import Dim, DimSpec, bind_dims, fmt_shape


@pytest.mark.parametrize(
    ("text", "dims", "variadic"),
    [
        ("T+1 B ...", (Dim("T", 1), Dim("B")), True),
        ("T B", (Dim("T"), Dim("B")), False),
        ("  T\tB  ", (Dim("T"), Dim("B")), False),
        ("A+12", (Dim("A", 12),), False),
        ("A+0 ...", (Dim("A"),), True),
        ("...", (), True),
        ("", (), False),
    ],
)
def test_parse(text: str, dims: tuple[Dim, ...], variadic: bool) -> None:
    spec = DimSpec.parse(text)
    assert (spec.text, spec.dims, spec.variadic) == (text, dims, variadic)


@pytest.mark.parametrize("token", ["T+x", "T+-1", "1T", "+1", "T+1+1", "...", "T-1"])
def test_parse_refuses_a_bad_token(token: str) -> None:
    text = f"B {token} C"
    with pytest.raises(ValueError, match=f"^{re.escape(f'bad dimension {token!r} in {text!r}')}$"):
        DimSpec.parse(text)


def test_only_the_last_token_may_be_dots() -> None:
    with pytest.raises(ValueError, match=r"^bad dimension '\.\.\.' in '\.\.\. \.\.\.'$"):
        DimSpec.parse("... ...")


@pytest.mark.parametrize(
    ("text", "described", "expected"),
    [
        ("T+1 B ...", "(T+1, B, ...)", "(9, 4, ...)"),
        ("T B", "(T, B)", "(8, 4)"),
        ("T", "(T,)", "(8,)"),
        ("...", "(...,)", "(...,)"),
        ("A B", "(A, B)", "(A, 4)"),
        ("A+2", "(A+2,)", "(A+2,)"),
        ("", "()", "()"),
    ],
)
def test_describe_and_expected(text: str, described: str, expected: str) -> None:
    spec = DimSpec.parse(text)
    assert spec.describe() == described
    assert spec.expected({"T": 8, "B": 4}) == expected


@pytest.mark.parametrize(
    ("shape", "text"),
    [
        ((9, None), "(9, ?)"),
        ((None,), "(?,)"),
        ((3,), "(3,)"),
        ((), "()"),
        ((0, 1, 2), "(0, 1, 2)"),
    ],
)
def test_fmt_shape(shape: tuple[int | None, ...], text: str) -> None:
    assert fmt_shape(shape) == text


SPECS = {
    "dones": DimSpec.parse("T+1 B"),
    "rews": DimSpec.parse("T B"),
    "obses": DimSpec.parse("T+1 B ..."),
    "values": DimSpec.parse("T B A"),
}


def test_agreeing_shapes_bind_without_problems() -> None:
    binding = bind_dims({"dones": (9, 4), "rews": (8, 4), "obses": (9, 4, 3, 2)}, SPECS)
    assert binding.values == {"T": 8, "B": 4}
    assert binding.sources == {"T": ["dones", "rews", "obses"], "B": ["dones", "rews", "obses"]}
    assert binding.problems == []


def test_an_unknown_size_does_not_vote() -> None:
    binding = bind_dims({"dones": (9, None), "rews": (None, 4)}, SPECS)
    assert binding.values == {"T": 8, "B": 4}
    assert binding.problems == []
    first = bind_dims({"rews": (None, 4), "dones": (9, 4)}, SPECS)  # the first size unknown
    assert (first.values, first.problems) == ({"B": 4, "T": 8}, [])


def test_the_wrong_field_is_blamed_with_the_fields_that_fixed_the_symbol() -> None:
    binding = bind_dims({"dones": (9, 4), "rews": (8, 4), "obses": (7, 4, 3)}, SPECS)
    assert binding.values == {"T": 8, "B": 4}
    assert binding.sources == {"T": ["dones", "rews"], "B": ["dones", "rews", "obses"]}
    assert binding.problems == [
        "obses has shape (7, 4, 3), expected (T+1, B, ...) = (9, 4, ...); "
        "T=8 from dones, rews (9 rows is T+1)"
    ]


def test_a_symbol_fixed_by_a_field_without_offset_counts_its_rows() -> None:
    binding = bind_dims({"rews": (8, 4), "values": (8, 4, 2), "dones": (5, 4)}, SPECS)
    assert binding.problems == [
        "dones has shape (5, 4), expected (T+1, B) = (9, 4); T=8 from rews, values (8 rows is T)"
    ]


@pytest.mark.parametrize("rows", [7, 8, 10])
def test_a_field_with_an_offset_is_checked_against_a_symbol_fixed_before_it(rows: int) -> None:
    # T is fixed by rews (no offset) first: dones must then have T+1 rows, not T-1, T or T+2.
    binding = bind_dims({"rews": (8, 4), "dones": (rows, 4)}, SPECS)
    assert binding.values == {"T": 8, "B": 4}
    assert binding.problems == [
        f"dones has shape ({rows}, 4), expected (T+1, B) = (9, 4); T=8 from rews (8 rows is T)"
    ]


def test_a_later_dimension_counts_entries() -> None:
    binding = bind_dims({"dones": (9, 4), "rews": (8, 4), "values": (8, 3, 2)}, SPECS)
    assert binding.problems == [
        "values has shape (8, 3, 2), expected (T, B, A) = (8, 4, 2); "
        "B=4 from dones, rews (4 entries is B)"
    ]


def test_each_wrong_symbol_is_explained_once() -> None:
    binding = bind_dims(
        {"dones": (9, 4), "rews": (8, 4), "values": (8, 4, 2), "obses": (3, 2)}, SPECS
    )
    assert binding.problems == [
        "obses has shape (3, 2), expected (T+1, B, ...) = (9, 4, ...); "
        "T=8 from dones, rews, values (9 rows is T+1); "
        "B=4 from dones, rews, values (4 entries is B)"
    ]


def test_a_tie_goes_to_the_field_listed_first() -> None:
    binding = bind_dims({"rews": (8, 4), "dones": (6, 4)}, SPECS)
    assert binding.values == {"T": 8, "B": 4}
    assert binding.sources["T"] == ["rews"]
    assert binding.problems == [
        "dones has shape (6, 4), expected (T+1, B) = (9, 4); T=8 from rews (8 rows is T)"
    ]
    assert bind_dims({"dones": (6, 4), "rews": (8, 4)}, SPECS).values["T"] == 5


@pytest.mark.parametrize(
    ("name", "shape", "problem"),
    [
        ("rews", (8,), "rews must have exactly 2 dimensions (T, B), got 1 (shape (8,))"),
        ("rews", (8, 4, 1), "rews must have exactly 2 dimensions (T, B), got 3 (shape (8, 4, 1))"),
        ("obses", (9,), "obses must have at least 2 dimensions (T+1, B, ...), got 1 (shape (9,))"),
        (
            "values",
            (8, None),
            "values must have exactly 3 dimensions (T, B, A), got 2 (shape (8, ?))",
        ),
    ],
)
def test_a_field_of_the_wrong_rank_is_reported_and_does_not_vote(
    name: str, shape: tuple[int | None, ...], problem: str
) -> None:
    binding = bind_dims({name: shape, "dones": (9, 4)}, SPECS)
    assert binding.problems == [problem]
    assert binding.values == {"T": 8, "B": 4}
    assert binding.sources == {"T": ["dones"], "B": ["dones"]}


def test_fields_all_of_the_wrong_rank_are_each_reported() -> None:
    # No field of the right rank: nothing binds, and each field is reported.
    binding = bind_dims({"rews": (8, 4, 1), "dones": (9, 4, 1)}, SPECS)
    assert binding.problems == [
        "rews must have exactly 2 dimensions (T, B), got 3 (shape (8, 4, 1))",
        "dones must have exactly 2 dimensions (T+1, B), got 3 (shape (9, 4, 1))",
    ]
    assert binding.values == {}


def test_a_variadic_field_takes_any_number_of_trailing_dimensions() -> None:
    for shape in [(9, 4), (9, 4, 1), (9, 4, 1, 2, 3)]:
        assert bind_dims({"obses": shape}, SPECS).problems == []
