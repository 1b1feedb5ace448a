"""The rule table: one line per field and output, the Validation page's table pinned to it."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from trajkit import FIELD_DIMS, MODEL_OUTPUT_DIMS
from trajkit._models.rules import (
    CROSS_RULES,
    FIELD_RULES,
    OUTPUT_RULES,
    STEP_COLUMNS,
    TREE_FIELDS,
    conform,
    conform_into,
    discrete_actions,
    lossless,
    no_states,
    output_rule,
    rules_reading,
    stray_bool_byte,
)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "validation.md"


def test_the_validation_page_lists_every_rule_of_the_table_once() -> None:
    text = PAGE.read_text()
    block = re.search(r"<!-- rule-table:.*?-->\n(.*?)<!-- /rule-table -->", text, re.S)
    assert block is not None
    lines = [line for line in block.group(1).splitlines() if line]
    # (Blank lines around the markers keep the table a Markdown table, not an HTML block.)
    assert lines[:2] == ["| Field | Rules |", "| --- | --- |"]
    want = [f"| `{name}` | {rule.describe()} |" for name, rule in FIELD_RULES.items()]
    want += [f"| `model_outs[{key!r}]` | {rule.describe()} |" for key, rule in OUTPUT_RULES.items()]
    assert lines[2:] == want


def test_the_validation_page_lists_every_rule_across_fields_once() -> None:
    text = PAGE.read_text()
    block = re.search(r"<!-- cross-rules:.*?-->\n(.*?)<!-- /cross-rules -->", text, re.S)
    assert block is not None
    lines = [line for line in block.group(1).splitlines() if line]
    assert lines[:2] == ["| Rule | Reads |", "| --- | --- |"]
    want = [
        f"| {rule.text} | {', '.join(f'`{name}`' for name in rule.reads)} |" for rule in CROSS_RULES
    ]
    assert lines[2:] == want


def test_writes_re_check_the_rules_that_read_the_written_field() -> None:
    assert [rule.reads for rule in rules_reading("dones")] == [
        ("truncated", "dones"),
        ("dones", "final_obses"),
    ]
    assert rules_reading("rews") == ()
    assert {name for rule in CROSS_RULES for name in rule.reads} == {
        "truncated",
        "dones",
        "final_obses",
        "model_outs['actions']",
    }


def test_the_dimension_tables_are_views_of_the_rule_table() -> None:
    assert {k: v for k, v in FIELD_DIMS.items() if k != "infos"} == {
        name: rule.dims for name, rule in FIELD_RULES.items()
    }
    assert FIELD_DIMS["infos"] == "T B"
    assert dict(MODEL_OUTPUT_DIMS) == {key: rule.dims for key, rule in OUTPUT_RULES.items()}


def test_the_schema_facts_other_modules_read_are_the_rule_tables() -> None:
    per_step_trees = [
        name for name, rule in FIELD_RULES.items() if rule.nested and not rule.optional
    ]
    assert TREE_FIELDS == tuple(sorted(per_step_trees)) == ("obses", "states")
    assert dict(STEP_COLUMNS) == {  # the column names of Arrow, Ray and transition tables
        "states": "state",
        "obses": "obs",
        "rews": "reward",
        "truncated": "truncated",
        "final_values": "final_value",
        "critic": "value",
        "log_probs": "log_prob",
        "actions": "action",
    }
    empty = no_states(3, 2)
    assert (empty.shape, empty.dtype.name) == ((4, 2, 0), FIELD_RULES["states"].file_dtype)


def test_discrete_actions_are_one_index_per_env_next_to_one_more_dim_of_logits() -> None:
    for lead in (1, 2):
        env = (3,) * lead
        assert discrete_actions({"actions": np.zeros(env), "actor": np.zeros((*env, 4))}, lead)
        assert not discrete_actions({"actions": np.zeros(env), "actor": np.zeros(env)}, lead)
        assert not discrete_actions(
            {"actions": np.zeros((*env, 2)), "actor": np.zeros((*env, 4))}, lead
        )
        assert not discrete_actions({"actions": np.zeros(env)}, lead)


def test_stray_bool_byte_finds_the_first_byte_above_one() -> None:
    assert stray_bool_byte(np.array([0, 1, 1], np.uint8).view(bool)) is None
    assert stray_bool_byte(np.array([0, 1, 2, 3], np.uint8).view(bool)) == 2
    assert stray_bool_byte(np.array([[0, 255], [1, 0]], np.uint8).view(bool)) == 1
    assert stray_bool_byte(np.zeros(0, bool)) is None


def test_output_rule_tells_per_step_scalars_apart() -> None:
    assert output_rule("critic", 1) is OUTPUT_RULES["critic"]
    assert output_rule("prob_pi", 1) is OUTPUT_RULES["*scalar"]
    assert output_rule("prob_pi", 2) is OUTPUT_RULES["*"]


@pytest.mark.parametrize(
    ("value", "dtype", "message"),
    [
        ([3, 300], np.uint8, "x must fit in uint8 [0, 255], got 300 at (t=1)"),
        ([-1.0], np.uint8, "x must fit in uint8 [0, 255], got -1.0 at (t=0)"),
        ([1.9], np.int64, "x must be integer-valued, got 1.9 at (t=0)"),
        ([np.nan], np.int32, "x must be finite, got nan at (t=0)"),
        ([1e300], np.float32, "x holds 1e+300 at (t=0), beyond float32's range"),
        ([70000.0], np.float16, "x holds 70000.0 at (t=0), beyond float16's range"),
        ([2], np.bool_, "x must hold only 0 and 1, got 2 at (t=0, b=0)"[:29]),
        (["a"], np.float32, "x must hold real numbers, got dtype <U1 (string)"),
    ],
)
def test_lossless_refuses_every_change_of_value(
    value: list[object], dtype: type, message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        lossless(value, np.dtype(dtype), "x")


@pytest.mark.parametrize(
    ("value", "dtype"),
    [
        ([0, 255], np.uint8),
        ([1.0, -3.0], np.int8),
        ([0.5, 2.0**100], np.float32),  # (rounding to float32 precision is not a change)
        ([1, 0], np.bool_),
        ([np.inf], np.float64),
    ],
)
def test_lossless_keeps_every_value(value: list[float], dtype: type) -> None:
    out = lossless(value, np.dtype(dtype), "x")
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out.astype(np.float64), np.asarray(value, np.float64))


def test_conform_into_applies_the_rule_after_the_dtype() -> None:
    with pytest.raises(ValueError, match=re.escape("critic must be finite, got nan")):
        conform_into(OUTPUT_RULES["critic"], np.dtype(np.float32), np.float64("nan"), "critic")
    with pytest.raises(ValueError, match=re.escape("dones must hold only 0 and 1, got 2.0")):
        conform_into(FIELD_RULES["dones"], np.dtype(np.float32), np.float64(2), "dones")
    assert conform_into(OUTPUT_RULES["*"], np.dtype(np.float64), [np.nan], "x").dtype == np.float64


def test_conform_gives_the_stored_dtype() -> None:
    assert conform(OUTPUT_RULES["actions"], [[1.0, 2.0]], "a", discrete=True).dtype == np.int32
    assert conform(OUTPUT_RULES["actions"], [[1.5, 2.0]], "a").dtype == np.float32
    assert conform(OUTPUT_RULES["actions"], [[True, False]], "a").dtype == np.int32
    assert conform(FIELD_RULES["obses"], np.zeros((2, 1), np.uint8), "o").dtype == np.uint8


def test_lossless_names_the_axes_of_a_flag_and_refuses_rounded_integers() -> None:
    with pytest.raises(ValueError, match=re.escape("f must hold only 0 and 1, got 2 at (b=1)")):
        lossless([0, 2], np.dtype(np.bool_), "f", axes="b")
    with pytest.raises(
        ValueError, match=re.escape("x must be exactly representable in float32, got 16777217")
    ):
        lossless(np.array([2**24 + 1], np.int64), np.dtype(np.float32), "x")
    assert lossless(np.array([2**24], np.int64), np.dtype(np.float32), "x")[0] == 2**24
    assert lossless(np.array([2**31 - 1], np.int32), np.dtype(np.float64), "x")[0] == 2**31 - 1


def test_the_pages_rule_table_renders_as_a_table() -> None:
    markdown = pytest.importorskip("markdown", reason="the docs extras render Markdown")
    text = PAGE.read_text()
    section = text[text.index("<!-- rule-table:") : text.index("<!-- /rule-table -->")]
    html = markdown.markdown(section, extensions=["tables"])
    assert html.count("<tr>") == 1 + len(FIELD_RULES) + len(OUTPUT_RULES)
    assert "<td><code>model_outs['*scalar']</code></td>" in html
