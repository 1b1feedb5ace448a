"""Griffe extension for the docs build: the types users see, and pydantic models' `__init__`.

It runs once the package is loaded, before anything is rendered:

- **`_Field[Get, Set]` annotations.** `Rollout` declares its fields for type checkers as
  `_Field[read type, accepted type]` (a private descriptor: reads give the validated type,
  assignment accepts what the constructor accepts). The reference and the search index show
  the read type, `Float32Array | None` rather than `_Field[Float32Array | None, ArrayLike |
  None]`; what a field accepts is in the class's `Args:` section.
- **pydantic models without an `__init__`.** pydantic builds their `__init__` at run time from
  the fields, so static analysis sees no parameters: the signature would be missing and the
  `Args:` section (one entry per field) would be reported as documenting unknown parameters.
  A keyword-only `__init__` is added from the annotated public fields, in source order, as
  pydantic makes it.

It is loaded by `mkdocs.yml` (`plugins.mkdocstrings.handlers.python.options.extensions`) and is
not part of the package.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import griffe


class TrajkitDocstrings(griffe.Extension):
    """Show fields' read types, and give pydantic models their `__init__` signature."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Rewrite the package's objects once it is loaded (before anything is rendered)."""
        for obj in _objects(pkg):
            if isinstance(obj, griffe.Attribute):
                obj.annotation = read_type(obj.annotation)
            if isinstance(obj, griffe.Class) and _needs_pydantic_init(obj):
                obj.set_member("__init__", _pydantic_init(obj))


def read_type(annotation: str | griffe.Expr | None) -> str | griffe.Expr | None:
    """`Get` for an annotation `_Field[Get, Set]`; any other annotation as it is."""
    if (
        isinstance(annotation, griffe.ExprSubscript)
        and str(annotation.left).rsplit(".", 1)[-1] == "_Field"
        and isinstance(annotation.slice, griffe.ExprTuple)
        and len(annotation.slice.elements) == 2
    ):
        return annotation.slice.elements[0]
    return annotation


def _objects(obj: griffe.Object) -> Iterator[griffe.Object]:
    """The object and all its members, recursively, skipping aliases."""
    yield obj
    for member in obj.members.values():
        if isinstance(member, griffe.Object):
            yield from _objects(member)


def _needs_pydantic_init(cls: griffe.Class) -> bool:
    return "__init__" not in cls.members and any(
        str(base).rsplit(".", 1)[-1] == "BaseModel" for base in cls.bases
    )


def _field_default(value: str | griffe.Expr | None) -> str | griffe.Expr | None:
    """The default of a field: its value, or the `default=` of a `Field(...)` call."""
    if isinstance(value, griffe.ExprCall) and str(value.function).endswith("Field"):
        for argument in value.arguments:
            if isinstance(argument, griffe.ExprKeyword) and argument.name == "default":
                return argument.value
        return None
    return value


def _pydantic_init(cls: griffe.Class) -> griffe.Function:
    """A keyword-only `__init__(self, *, field: annotation = default, ...)` for a model."""
    parameters = [griffe.Parameter("self", kind=griffe.ParameterKind.positional_or_keyword)]
    for name, member in cls.members.items():
        if (
            not isinstance(member, griffe.Attribute)
            or name.startswith("_")
            or name == "model_config"
            or member.annotation is None
            or str(member.annotation).startswith("ClassVar")
        ):
            continue
        parameters.append(
            griffe.Parameter(
                name,
                annotation=member.annotation,
                kind=griffe.ParameterKind.keyword_only,
                default=_field_default(member.value),
            )
        )
    return griffe.Function(
        "__init__",
        parameters=griffe.Parameters(*parameters),
        returns="None",
        lineno=cls.lineno,
        endlineno=cls.lineno,
    )
