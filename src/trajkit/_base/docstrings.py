"""Field descriptions from attribute docstrings, read when a JSON schema is made, not at import.

pydantic's `use_attribute_docstrings` reads a model's source when the class is created: for
the spec and the file metadata that was about 40 ms of every start-up, for descriptions only
a JSON schema shows. `described` gives the same descriptions, read when the schema is made.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Mapping
from itertools import pairwise
from typing import Any

__all__ = ["attribute_docstrings", "described"]


def attribute_docstrings(cls: type[Any]) -> dict[str, str]:
    """The docstring under each annotated attribute of `cls`'s body, by attribute name.

    Empty where the source cannot be read (an install without `.py` files), as pydantic's
    `use_attribute_docstrings` is.

    Examples:
        >>> from trajkit import RolloutSpec
        >>> attribute_docstrings(RolloutSpec)["state_dtype"]
        'State dtype: always float32.'
    """
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    tree = ast.parse(textwrap.dedent(source))
    body = next(node for node in tree.body if isinstance(node, ast.ClassDef)).body
    return {
        first.target.id: inspect.cleandoc(second.value.value)
        for first, second in pairwise(body)
        if isinstance(first, ast.AnnAssign) and isinstance(first.target, ast.Name)
        if isinstance(second, ast.Expr) and isinstance(second.value, ast.Constant)
        if isinstance(second.value.value, str)
    }


def described(
    extra: Mapping[str, Any] | None = None,
) -> Callable[[dict[str, Any], type[Any]], None]:
    """A pydantic `json_schema_extra`: each property described by its attribute docstring.

    Args:
        extra: More keys for the model's schema, as a `json_schema_extra` dict gives them.

    Returns:
        The function pydantic calls with the model's JSON schema and class.

    Examples:
        >>> from trajkit import RolloutSpec
        >>> RolloutSpec.model_json_schema()["properties"]["state_dtype"]["description"]
        'State dtype: always float32.'
    """

    def describe(schema: dict[str, Any], cls: type[Any]) -> None:
        properties = schema.get("properties", {})
        for name, text in attribute_docstrings(cls).items():
            if name in properties:
                properties[name]["description"] = text
        schema.update(extra or {})

    return describe
