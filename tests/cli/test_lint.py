"""`trajkit lint` on degenerate files and when a check raises: exit codes and output pinned."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import trajkit
from trajkit.cli import main
from trajkit.lint import run
from trajkit.lint.checks import check_rollout
from trajkit.testing import example_rollout


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_file_of_no_steps_is_linted_without_finding(tmp_path: Path, jobs: str) -> None:
    r = example_rollout(num_steps=0)
    assert (r.num_steps, r.rews.shape[0], r.dones.shape[0]) == (0, 0, 1)
    trajkit.save(r, tmp_path / "a.npz")
    trajkit.save(example_rollout(num_steps=0, num_envs=1, seed=1), tmp_path / "b.npz")
    done = subprocess.run(
        [sys.executable, "-m", "trajkit", "lint", "--jobs", jobs, str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=tmp_path,  # no pyproject.toml above it to read
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "All checks passed (2 files).\n")


def test_a_check_that_raises_is_reported_and_the_run_exits_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for i, name in enumerate("abc"):
        trajkit.save(example_rollout(num_steps=8, seed=i), tmp_path / f"{name}.npz")

    def check(rollout: Any, options: Any, *, path: str | None = None, **kw: Any) -> Any:
        if path is not None and path.endswith("b.npz"):
            raise IndexError("index 0 is out of bounds")
        return check_rollout(rollout, options, path=path, **kw)

    monkeypatch.setattr(run, "check_rollout", check)
    code = main(["lint", "--jobs", "1", "--select", "TK203", "--no-config", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 3
    assert out == ""
    first, second = err.splitlines()
    assert first == "All checks passed (3 files)."
    assert second.startswith(
        f"trajkit lint: a check failed (please report it): {tmp_path / 'b.npz'}: IndexError: "
        "index 0 is out of bounds (at "
    )
    assert "Traceback" not in err


def test_a_failure_beside_findings_still_exits_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    r = example_rollout(num_steps=8)
    trajkit.save(r, tmp_path / "a.npz")
    trajkit.save(r, tmp_path / "b.npz")  # TK203, an error
    trajkit.save(example_rollout(num_steps=8, seed=2), tmp_path / "c.npz")

    def check(rollout: Any, options: Any, *, path: str | None = None, **kw: Any) -> Any:
        if path is not None and path.endswith("c.npz"):
            raise RuntimeError("a bug")
        return check_rollout(rollout, options, path=path, **kw)

    monkeypatch.setattr(run, "check_rollout", check)
    code = main(["lint", "--jobs", "1", "--select", "TK203", "--no-config", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 3
    assert out.count("TK203") == 1
    assert "a check failed (please report it)" in err


BROKEN_CHECK = """
import sys
from trajkit.lint import run
from trajkit.cli import main

def broken(rollout, options, **kwargs):
    raise ValueError("a check broke")

run.check_rollout = broken  # a bug in lint, as a user's run would meet it
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("command", ["lint", "report"])
def test_a_check_that_raises_exits_3_in_a_fresh_interpreter(tmp_path: Path, command: str) -> None:
    """As users run the commands: the failure is said on stderr, the exit code is 3."""
    trajkit.save(example_rollout(num_steps=8), tmp_path / "a.npz")
    out = ["-o", str(tmp_path / "report.html")] if command == "report" else []
    done = subprocess.run(
        [sys.executable, "-c", BROKEN_CHECK, command, str(tmp_path), "-j", "1", *out],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert f"a check failed (please report it): {tmp_path / 'a.npz'}" in done.stderr.replace(
        "a lint check failed", "a check failed"
    )
