"""`RolloutFileError` names the file (and member) and crosses process boundaries intact."""

from __future__ import annotations

import pickle

import pytest

from trajkit import RolloutFileError


class _NarrowerError(RolloutFileError):
    """A subclass, as the readers raise: it must come back as itself."""


@pytest.mark.parametrize(
    ("member", "text"),
    [("rews.npy", "run.npz: member rews.npy: truncated"), (None, "run.npz: truncated")],
)
@pytest.mark.parametrize("cls", [RolloutFileError, _NarrowerError])
def test_a_pickled_error_comes_back_whole(
    cls: type[RolloutFileError], member: str | None, text: str
) -> None:
    error = cls("truncated", path="run.npz", member=member)
    assert str(error) == text
    back = pickle.loads(pickle.dumps(error))  # as from a worker process or a Ray task
    assert type(back) is cls
    assert (back.reason, back.path, back.member, str(back)) == (
        "truncated",
        "run.npz",
        member,
        text,
    )
    assert isinstance(back, ValueError)
