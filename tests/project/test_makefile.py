"""The Makefile's checks use the project's virtual environment, not whatever is on PATH."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _dry_run(target: str, venv: Path) -> list[str]:
    """The commands `make TARGET` would run with the venv at `venv` (`make -n` runs none)."""
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    done = subprocess.run(
        [make, "-n", "-s", target, f"VENV={venv}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.splitlines()


def test_typecheck_runs_pyright_against_the_venvs_packages(tmp_path: Path) -> None:
    # Without --pythonpath, pyright asks the first `python` on PATH for its search paths and
    # checks against that interpreter's packages (another pydantic, or none).
    venv = tmp_path / "venv"
    runs = [line for line in _dry_run("typecheck", venv) if "tests/project/verify_types.py" in line]
    assert len(runs) == 1, runs
    assert f"{venv}/bin/python tests/project/verify_types.py" in runs[0]
    source = (Path(__file__).parent / "verify_types.py").read_text(encoding="utf-8")
    assert '"--pythonpath", sys.executable' in source


def test_ci_tests_the_installed_wheel_and_another_order(tmp_path: Path) -> None:
    # Issues 34 and 39: `make test` (CI) runs the suite in reverse order, and the fresh-process
    # tests against the built wheel installed in a fresh environment, not the source tree.
    venv = tmp_path / "venv"
    commands = _dry_run("test", venv)
    pytest_runs = [line for line in commands if line.startswith(f"{venv}/bin/pytest")]
    expected = f"{venv}/bin/pytest --reverse-order --ignore=tests/project/test_fresh_process.py"
    assert pytest_runs == [expected]
    assert f"{venv}/bin/python tests/project/wheel_check.py" in commands
