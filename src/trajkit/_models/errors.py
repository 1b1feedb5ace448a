"""`RolloutValidationError` (pydantic's, told in trajkit's words) and `MissingModelOutputError`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

__all__ = ["MissingModelOutputError", "RolloutValidationError", "clean_validation_error"]

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


class MissingModelOutputError(KeyError, ValueError):
    """A method needs a model output that the rollout (or dataset) does not have.

    The one behaviour for a missing output, `critic` above all: every method that reads it
    (`value_predictions`, `advantages`, `returns`, `training_arrays`, the minibatch methods,
    `trajkit.torch`, `Dataset.minibatches`) raises this at the call, before yielding anything,
    naming the method, the key and the keys present. It is a `KeyError`, as obs-tower2's
    dict lookups raised, and a `ValueError`, like every other refusal of trajkit's.

    Attributes:
        method: The method that needs the output, e.g. `"advantages()"`.
        key: The missing key.
        keys: The keys present, sorted.

    Examples:
        >>> import trajkit
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(keys={"actions"})
        >>> try:
        ...     r.advantages(0.99, 0.95)
        ... except trajkit.MissingModelOutputError as err:
        ...     print(err)  # doctest: +ELLIPSIS
        advantages() needs model_outs['critic'] to compute ... has keys ['actions']: record ...
    """

    __module__ = "trajkit"

    def __init__(
        self,
        method: str,
        key: str,
        keys: Iterable[str],
        *,
        owner: str = "this rollout",
        purpose: str = "",
        hint: str = "",
    ) -> None:
        self.method: str = method
        self.key: str = key
        self.keys: list[str] = sorted(keys)
        why = f" {purpose}" if purpose else ""
        fix = f": {hint}" if hint else ""
        super().__init__(
            f"{method} needs model_outs[{key!r}]{why}, but {owner} has keys {self.keys}{fix}"
        )

    def __str__(self) -> str:  # a KeyError would show the message in quotes
        return str(self.args[0])


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
__test__ = {
    "RolloutValidationError": RolloutValidationError,
    "MissingModelOutputError": MissingModelOutputError,
}
