"""The defaults of finding and reading rollout files: the suffix searched for, the size limit.

A leaf module, so that the command line's parser can show them (`--help`) without importing
the reader (NumPy, pydantic and the models) or even `dataclasses`.
"""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_BYTES", "SUFFIX"]

SUFFIX = ".npz"
"""Files with this suffix are found when a folder is searched."""

DEFAULT_MAX_BYTES = 4 << 30
"""The default limit on the declared size of a file's contents: 4 GiB."""
