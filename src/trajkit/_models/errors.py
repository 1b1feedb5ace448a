"""`RolloutValidationError`: pydantic's `ValidationError`, told in trajkit's words."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

__all__ = ["RolloutValidationError", "clean_validation_error"]

_PREFIXES = ("Value error, ", "Assertion failed, ")


class RolloutValidationError(ValidationError):
    """A rollout was refused: the field, the problem and the fix, one problem per line.

    Raised by the [`Rollout`][trajkit.Rollout] constructor, by assignment of a whole field, by
    [`Rollout.replace`][trajkit.Rollout.replace] and by
    [`Rollout.revalidate`][trajkit.Rollout.revalidate]. It is a `pydantic.ValidationError`
    (and so a `ValueError`), with the same `errors()`, `error_count()` and `title`: code that
    catches pydantic's error keeps working. Only the message differs: pydantic's
    `Value error,` prefixes, the dump of the input and the link to a generic page are left
    out, so that the first line is the sentence that matters.

    Examples:
        >>> import numpy as np
        >>> import trajkit
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=4, num_envs=2)
        >>> try:
        ...     r.rews = np.ones((5, 2))
        ... except trajkit.RolloutValidationError as err:
        ...     print(str(err).splitlines()[0][:52])
        ...     print(err.error_count(), isinstance(err, ValueError))
        rews has shape (5, 2), expected (T, B) = (4, 2); T=4
        1 True
    """

    __module__ = "trajkit"  # how tracebacks name it: `trajkit.RolloutValidationError: ...`

    def errors(
        self, *, include_url: bool = True, include_context: bool = True, include_input: bool = True
    ) -> list[Any]:
        """Return pydantic's list of errors, each `msg` free of the `Value error,` prefix.

        Args:
            include_url: Include each error's link to pydantic's documentation.
            include_context: Include the `ctx` of each error.
            include_input: Include the input that failed.

        Returns:
            One dict per problem: `type`, `loc`, `msg`, and the optional parts asked for.

        Examples:
            >>> import trajkit
            >>> from trajkit.testing import example_rollout
            >>> try:
            ...     example_rollout().replace(rews=None)
            ... except trajkit.RolloutValidationError as err:
            ...     print(err.errors(include_url=False)[0]["msg"][:27])
            rews must hold real numbers
        """
        errors = super().errors(
            include_url=include_url, include_context=include_context, include_input=include_input
        )
        for error in errors:
            error["msg"] = _strip(str(error["msg"]))
        return errors

    def __str__(self) -> str:
        return "\n".join(_describe(error) for error in self.errors(include_url=False))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"


def _strip(message: str) -> str:
    for prefix in _PREFIXES:
        message = message.removeprefix(prefix)
    return message


def _describe(error: Any) -> str:
    message = _strip(str(error["msg"]))
    field = ".".join(str(part) for part in error["loc"])
    if field and not message.startswith(field):
        message = f"{field}: {message}"
    return message


def clean_validation_error(error: ValidationError) -> RolloutValidationError:
    """Return `error` as a `RolloutValidationError`, with the same title and errors."""
    if isinstance(error, RolloutValidationError):
        return error
    return RolloutValidationError.from_exception_data(
        error.title,
        error.errors(include_url=False),  # type: ignore[arg-type]
    )


# The class names its module `trajkit`, which hides it from doctest's search of this module.
__test__ = {"RolloutValidationError": RolloutValidationError}
