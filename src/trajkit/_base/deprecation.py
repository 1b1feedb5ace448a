"""One way to deprecate a name: `deprecated(old, new)` warns with the replacement and the release.

Every deprecated alias calls it, so the wording, the warning class (`DeprecationWarning`) and
the stack level (the caller's line) are the same everywhere.
"""

from __future__ import annotations

import warnings

__all__ = ["REMOVAL", "deprecated"]

REMOVAL = "0.3.0"
"""The release that removes what is deprecated now."""


def deprecated(old: str, new: str, *, removal: str = REMOVAL, stacklevel: int = 3) -> None:
    """Warn that `old` is deprecated: use `new` instead; it goes in release `removal`.

    Call it first thing in the deprecated function; `stacklevel=3` points the warning at the
    line that called that function.

    Args:
        old: The deprecated name, as users write it (`trajkit.index_stream`).
        new: What to use instead, as users would write it.
        removal: The release that removes `old`.
        stacklevel: Passed to `warnings.warn` (3: the deprecated function's caller).

    Examples:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     deprecated("trajkit.old_name", "trajkit.new_name", stacklevel=2)
        >>> print(caught[0].category.__name__, caught[0].message)
        DeprecationWarning trajkit.old_name is deprecated and will be removed in trajkit 0.3.0: \
use trajkit.new_name
    """
    warnings.warn(
        f"{old} is deprecated and will be removed in trajkit {removal}: use {new}",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
