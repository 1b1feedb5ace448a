"""Declared dimensions per field ("T+1 B ...", "T B"), bound across all fields at once.

Every shape rule of a rollout comes from one table of dimension strings. `bind_dims` reads the
actual shapes, lets the fields vote on each symbol (T, B, A), takes the value most fields agree
on, and reports every field that disagrees with the expected shape and the fields that fixed
the symbol. A single wrong field is blamed, not the many right ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Binding", "Dim", "DimSpec", "bind_dims", "fmt_shape"]


@dataclass(frozen=True)
class Dim:
    """One named dimension: `symbol` plus a fixed `offset` (`T+1` is `Dim("T", 1)`)."""

    symbol: str
    offset: int = 0

    def __str__(self) -> str:
        return f"{self.symbol}+{self.offset}" if self.offset else self.symbol


@dataclass(frozen=True)
class DimSpec:
    """A parsed dimension string such as `"T+1 B ..."`.

    Attributes:
        text: The string as declared.
        dims: The named leading dimensions.
        variadic: Whether any number of trailing dimensions may follow (`...`).
    """

    text: str
    dims: tuple[Dim, ...]
    variadic: bool

    @classmethod
    def parse(cls, text: str) -> DimSpec:
        """Parse `"T+1 B ..."` style text.

        Args:
            text: Space-separated symbols, each optionally `+N`; `...` may only come last.

        Returns:
            The parsed spec.

        Raises:
            ValueError: On malformed text.

        Examples:
            >>> DimSpec.parse("T+1 B ...").describe()
            '(T+1, B, ...)'
        """
        tokens = text.split()
        variadic = bool(tokens) and tokens[-1] == "..."
        if variadic:
            tokens = tokens[:-1]
        dims = []
        for token in tokens:
            symbol, _, offset = token.partition("+")
            if not symbol.isidentifier() or (offset and not offset.isdigit()):
                raise ValueError(f"bad dimension {token!r} in {text!r}")
            dims.append(Dim(symbol, int(offset or 0)))
        return cls(text, tuple(dims), variadic)

    def describe(self) -> str:
        """The spec as a tuple-like string, e.g. `(T+1, B, ...)`."""
        parts = [str(d) for d in self.dims] + (["..."] if self.variadic else [])
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"

    def expected(self, values: Mapping[str, int]) -> str:
        """The expected concrete shape under `values`, e.g. `(9, 4, ...)`."""
        parts = [
            str(values[d.symbol] + d.offset) if d.symbol in values else str(d) for d in self.dims
        ]
        if self.variadic:
            parts.append("...")
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


Shape = Sequence[int | None]
"""An actual shape; `None` marks a dimension that is unknown (an empty nested list, say)."""


@dataclass
class Binding:
    """The result of `bind_dims`.

    Attributes:
        values: The bound value of every symbol that some field determines.
        sources: For each symbol, the fields that agreed on its value.
        problems: One readable message per field that disagrees.
    """

    values: dict[str, int] = field(default_factory=dict)
    sources: dict[str, list[str]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def fmt_shape(shape: Shape) -> str:
    """A shape as a tuple-like string, `?` for an unknown dimension: `(9, ?)`."""
    parts = ["?" if s is None else str(s) for s in shape]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def bind_dims(shapes: Mapping[str, Shape], specs: Mapping[str, DimSpec]) -> Binding:
    """Bind the symbols of `specs` from `shapes`, reporting every disagreement.

    Fields vote on each symbol's value; the value with the most votes wins, ties going to the
    field listed first in `shapes`. A field of the wrong rank is reported and does not vote.

    Args:
        shapes: Field name to its actual shape, in priority order.
        specs: Field name to its declared dimensions (every name in `shapes` must have one).

    Returns:
        The binding, with `problems` empty when all shapes agree.

    Examples:
        >>> specs = {"dones": DimSpec.parse("T+1 B"), "rews": DimSpec.parse("T B")}
        >>> b = bind_dims({"dones": (9, 4), "rews": (9, 4)}, specs)
        >>> b.values
        {'T': 8, 'B': 4}
        >>> print(b.problems[0])
        rews has shape (9, 4), expected (T, B) = (8, 4); T=8 from dones (9 rows is T+1)
    """
    agreed = _agreed_values(shapes, specs)
    if agreed is not None:  # the common case, without votes: every field agrees
        return Binding(values=agreed, sources={symbol: list(shapes) for symbol in agreed})
    binding = Binding()
    votes: dict[str, dict[int, list[str]]] = {}
    ranked: dict[str, Shape] = {}
    for name, shape in shapes.items():
        spec = specs[name]
        n = len(spec.dims)
        if len(shape) < n or (not spec.variadic and len(shape) != n):
            need = f"at least {n}" if spec.variadic else f"exactly {n}"
            binding.problems.append(
                f"{name} must have {need} dimensions {spec.describe()}, "
                f"got {len(shape)} (shape {fmt_shape(shape)})"
            )
            continue
        ranked[name] = shape
        for dim, size in zip(spec.dims, shape, strict=False):
            if size is not None:
                votes.setdefault(dim.symbol, {}).setdefault(size - dim.offset, []).append(name)
    for symbol, by_value in votes.items():
        # max() keeps the first of equal counts, and dicts keep insertion (priority) order.
        value, names = max(by_value.items(), key=lambda item: len(item[1]))
        binding.values[symbol] = value
        binding.sources[symbol] = names
    for name, shape in ranked.items():
        spec = specs[name]
        wrong = [
            dim
            for dim, size in zip(spec.dims, shape, strict=False)
            if size is not None and size - dim.offset != binding.values[dim.symbol]
        ]
        if wrong:
            binding.problems.append(
                f"{name} has shape {fmt_shape(shape)}, expected {spec.describe()} = "
                f"{spec.expected(binding.values)}; "
                + "; ".join(_why(dim.symbol, binding, specs) for dim in dict.fromkeys(wrong))
            )
    return binding


def _agreed_values(
    shapes: Mapping[str, Shape], specs: Mapping[str, DimSpec]
) -> dict[str, int] | None:
    """The symbols' values when every field has the right rank and agrees; else `None`."""
    values: dict[str, int] = {}
    for name, shape in shapes.items():
        spec = specs[name]
        dims = spec.dims
        if len(shape) < len(dims) or (not spec.variadic and len(shape) != len(dims)):
            return None
        for dim, size in zip(dims, shape, strict=False):
            if size is not None and values.setdefault(dim.symbol, size - dim.offset) != (
                size - dim.offset
            ):
                return None
    return values


def _why(symbol: str, binding: Binding, specs: Mapping[str, DimSpec]) -> str:
    value = binding.values[symbol]
    names = binding.sources[symbol]
    first = specs[names[0]]
    dim = next(d for d in first.dims if d.symbol == symbol)
    unit = "rows" if first.dims.index(dim) == 0 else "entries"
    return f"{symbol}={value} from {', '.join(names)} ({value + dim.offset} {unit} is {dim})"
