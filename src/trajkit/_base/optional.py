"""Importing the optional libraries that trajkit's integrations build on, lazily."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["require"]


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import `module`, or raise an `ImportError` that says which extra installs it.

    Args:
        module: The module to import, e.g. `"pyarrow.parquet"`.
        extra: The trajkit extra that brings it, e.g. `"arrow"`.
        feature: What needs it, for the message, e.g. `"trajkit.arrow"`.

    Returns:
        The module.

    Raises:
        ImportError: If it cannot be imported.

    Examples:
        >>> require("json", "none", "this example").dumps([1])
        '[1]'
        >>> require("no_such_module", "arrow", "trajkit.arrow")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ImportError: trajkit.arrow needs no_such_module; install it with: pip install ...
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        raise ImportError(
            f"{feature} needs {top}; install it with: pip install 'trajkit[{extra}]'"
        ) from exc
