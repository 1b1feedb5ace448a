"""What the CLI tests share: a command run in this process, its output captured."""

from __future__ import annotations

import pytest

from trajkit.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`trajkit *argv` through `main`: its exit code, stdout and stderr, never a traceback."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err
