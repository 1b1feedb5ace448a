"""Every CLI command and one typical call of every public module, each in a fresh interpreter.

A test process imports many modules as it goes, so a call can work there only because an
earlier test imported what it forgot to (issue 34: `trajkit.arrow.read_parquet` reached
`pyarrow.compute` as an attribute of `pyarrow`, which exists only once someone imported it).
Here each case starts its own `python` (`sys.executable`: the one running the tests), with a
clean working folder, on files written by trajkit and on trajkit's Parquet exports rewritten
by the tools the Interchange page names (polars, DuckDB, pandas).

`make test` also runs this module with the Python of a fresh virtual environment that has the
built wheel installed (`tests/project/wheel_check.py`), setting `TRAJKIT_EXPECT_INSTALLED` to that
environment's folder: then `test_trajkit_comes_from_the_expected_install` proves that the
children import the installed wheel, not the source tree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import trajkit
from trajkit.testing import example_rollout

TIMEOUT = 300


def _env(tmp_path: Path) -> dict[str, str]:
    """The inherited environment, offline and quiet, with Minari and Ray kept in `tmp_path`."""
    return {
        **os.environ,
        "MINARI_DATASETS_PATH": str(tmp_path / "minari"),
        "MPLBACKEND": "Agg",
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "disabled",
        "HF_HUB_OFFLINE": "1",
        "PYTHONWARNINGS": "error::DeprecationWarning:trajkit",
    }


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=_env(cwd),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def cli(cwd: Path, *args: str, code: int = 0) -> str:
    """`python -m trajkit ARGS` in `cwd`; its stdout, after checking its exit code."""
    done = _run(["-m", "trajkit", *args], cwd)
    assert done.returncode == code, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def python(cwd: Path, code: str) -> str:
    """`python -c CODE` in `cwd`; its stdout, after checking that it exited with 0."""
    done = _run(["-c", textwrap.dedent(code)], cwd)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture
def run_npz(tmp_path: Path) -> Path:
    """A rollout file written by trajkit: truncations, episode ends, every model output."""
    path = tmp_path / "run.npz"
    trajkit.save(example_rollout(num_steps=16, num_envs=2, truncation=True), path)
    return path


@pytest.fixture
def exported(tmp_path: Path, run_npz: Path) -> Path:
    """`run.npz` exported to Parquet by the CLI, in a fresh process too."""
    out = tmp_path / "run.parquet"
    cli(tmp_path, "export", str(run_npz), "--out", str(out))
    return out


# ----------------------------------------------------------------------------- the install


def test_trajkit_comes_from_the_expected_install(tmp_path: Path) -> None:
    where = python(tmp_path, "import trajkit; print(trajkit.__file__)").strip()
    expected = os.environ.get("TRAJKIT_EXPECT_INSTALLED")
    if expected is None:
        pytest.skip("TRAJKIT_EXPECT_INSTALLED is not set (set by tests/project/wheel_check.py)")
    assert Path(where).resolve().is_relative_to(Path(expected).resolve()), where
    assert "site-packages" in Path(where).parts, where


def test_the_console_script_runs(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("trajkit")
    if not script.exists():
        pytest.skip(f"no `trajkit` script next to {sys.executable}")
    done = subprocess.run(
        [str(script), "--version"], capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"trajkit {trajkit.__version__}\n"


# ------------------------------------------------------------------------------------ CLI


def test_cli_version(tmp_path: Path) -> None:
    assert cli(tmp_path, "--version") == f"trajkit {trajkit.__version__}\n"


def test_cli_validate(tmp_path: Path, run_npz: Path) -> None:
    assert cli(tmp_path, "validate", str(run_npz)) == f"{run_npz}: ok\n"
    (line,) = cli(tmp_path, "validate", "--json", "--jobs", "2", str(tmp_path)).splitlines()
    assert json.loads(line)["ok"] is True


def test_cli_validate_refuses_a_damaged_file(tmp_path: Path, run_npz: Path) -> None:
    run_npz.write_bytes(run_npz.read_bytes()[:100])
    assert cli(tmp_path, "validate", str(run_npz), code=1).startswith(f"{run_npz}: invalid: ")


def test_cli_info(tmp_path: Path, run_npz: Path) -> None:
    out = cli(tmp_path, "info", str(run_npz))
    assert "steps (T):         16" in out


def test_cli_lint(tmp_path: Path, run_npz: Path) -> None:
    done = _run(["-m", "trajkit", "lint", "--no-config", str(run_npz)], tmp_path)
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
    assert done.stderr == "All checks passed (1 file).\n"
    assert "TK101" in cli(tmp_path, "lint", "--list")


def test_cli_plot(tmp_path: Path, run_npz: Path) -> None:
    cli(tmp_path, "plot", str(run_npz), "--out", str(tmp_path / "plots"))
    assert sorted(p.suffix for p in (tmp_path / "plots").iterdir()) == [".png"] * 3


def test_cli_report(tmp_path: Path, run_npz: Path) -> None:
    out = tmp_path / "report.html"
    assert cli(tmp_path, "report", str(run_npz), "-o", str(out), "--no-config") == f"{out}\n"
    assert out.read_text(encoding="utf-8").count("<h1>") == 1


def test_cli_export(exported: Path) -> None:
    assert exported.read_bytes()[:4] == b"PAR1"


def test_cli_import(tmp_path: Path, exported: Path, run_npz: Path) -> None:
    cli(tmp_path, "import", str(exported), "--out", str(tmp_path / "back"))
    (back,) = (tmp_path / "back").iterdir()
    assert trajkit.load(back) == trajkit.load(run_npz)


def test_cli_import_of_plain_pages(tmp_path: Path, run_npz: Path) -> None:
    """Uncompressed and compact: `read_parquet` reads the bytes' pages into place."""
    out = tmp_path / "plain.parquet"
    cli(tmp_path, "export", str(run_npz), "--out", str(out), "--compression", "none",
        "--layout", "compact")  # fmt: skip
    cli(tmp_path, "import", str(out), "--out", str(tmp_path / "back"))
    (back,) = (tmp_path / "back").iterdir()
    assert trajkit.load(back) == trajkit.load(run_npz)


@pytest.mark.parametrize("which", ["spec", "metadata"])
def test_cli_schema(tmp_path: Path, which: str) -> None:
    args = ["--metadata"] if which == "metadata" else []
    assert json.loads(cli(tmp_path, "schema", *args))["type"] == "object"


# ------------------------------------------------------- Parquet rewritten by other tools


def _rewrite(tool: str, source: Path, target: Path) -> None:
    """`source` read and written again by `tool`, as the Interchange page shows."""
    if tool == "polars":
        pl = pytest.importorskip("polars", reason="polars is in trajkit's dev extras")
        pl.read_parquet(source).write_parquet(target)
    elif tool == "duckdb":
        duckdb = pytest.importorskip("duckdb", reason="duckdb is in trajkit's dev extras")
        duckdb.sql(f"COPY (SELECT * FROM '{source}') TO '{target}' (FORMAT parquet)")
    else:
        pd = pytest.importorskip("pandas", reason="pandas comes with trajkit's dev extras")
        pd.read_parquet(source).to_parquet(target)


@pytest.mark.parametrize("tool", ["polars", "duckdb", "pandas"])
def test_cli_import_of_a_rewritten_export(
    tmp_path: Path, exported: Path, run_npz: Path, tool: str
) -> None:
    rewritten = tmp_path / f"{tool}.parquet"
    _rewrite(tool, exported, rewritten)
    cli(tmp_path, "import", str(rewritten), "--out", str(tmp_path / "back"))
    (back,) = (tmp_path / "back").iterdir()
    assert trajkit.load(back) == trajkit.load(run_npz)


@pytest.mark.parametrize("tool", ["polars", "duckdb", "pandas"])
def test_read_parquet_of_a_rewritten_export(
    tmp_path: Path, exported: Path, run_npz: Path, tool: str
) -> None:
    rewritten = tmp_path / f"{tool}.parquet"
    _rewrite(tool, exported, rewritten)
    python(
        tmp_path,
        f"""
        import trajkit, trajkit.arrow
        assert trajkit.arrow.read_parquet({str(rewritten)!r}) == [trajkit.load({str(run_npz)!r})]
        """,
    )


# ------------------------------------------------------------------------- public modules


def test_trajkit(tmp_path: Path) -> None:
    out = python(
        tmp_path,
        """
        import trajkit
        from trajkit.testing import example_rollout
        r = example_rollout(num_steps=8, num_envs=2, truncation=True)
        trajkit.save(r, "run.npz", compress=True)
        back = trajkit.load("run.npz")
        assert back == r
        adv = trajkit.gae(back.rews, back.value_predictions(), back.dones, 0.99, 0.95,
                          truncated=back.truncated, final_values=back.final_values)
        batch = next(back.minibatches(4, gamma=0.99, lam=0.95))
        print(adv.shape, sorted(batch))
        """,
    )
    shape, keys = out.split(" ", 2)[:2], out.split("[", 1)[1]
    assert " ".join(shape) == "(8, 2)", out
    assert "'advantages'" in keys, out


def test_testing(tmp_path: Path) -> None:
    python(
        tmp_path,
        """
        from hypothesis import given, settings
        from trajkit.testing import rollouts

        @settings(max_examples=5, database=None, deadline=None)
        @given(rollouts(max_steps=4))
        def check(r):
            assert r.rews.shape == (r.num_steps, r.batch_size)

        check()
        """,
    )


def test_arrow_export(tmp_path: Path) -> None:
    python(
        tmp_path,
        """
        import trajkit.arrow
        from trajkit.testing import example_rollout
        r = example_rollout(num_steps=8, num_envs=2, truncation=True)
        assert trajkit.arrow.from_arrow(trajkit.arrow.to_arrow(r)) == r
        trajkit.arrow.write_parquet(r, "run.parquet")
        """,
    )


def test_arrow_read_parquet(tmp_path: Path, exported: Path, run_npz: Path) -> None:
    python(
        tmp_path,
        f"""
        import trajkit, trajkit.arrow
        assert trajkit.arrow.read_parquet({str(exported)!r}) == [trajkit.load({str(run_npz)!r})]
        """,
    )


def test_minari(tmp_path: Path) -> None:
    out = python(
        tmp_path,
        """
        import gymnasium as gym
        from trajkit.minari import from_minari, to_minari
        from trajkit.testing import example_rollout
        r = example_rollout(num_steps=8, num_envs=2, truncation=True)
        data = to_minari(r, "trajkit/fresh-v0",
                         observation_space=gym.spaces.Box(-10, 10, (4,), "float32"),
                         action_space=gym.spaces.Discrete(3))
        print(data.total_episodes, len(from_minari(data)))
        """,
    )
    episodes, rollouts = map(int, out.split())
    assert episodes == rollouts > 0


def test_ray(tmp_path: Path, run_npz: Path) -> None:
    out = python(
        tmp_path,
        f"""
        import tempfile, warnings
        import ray
        with warnings.catch_warnings(record=True) as caught:  # __all__ has no deprecated name
            warnings.simplefilter("always")
            from trajkit.ray import *
        assert not caught, [str(w.message) for w in caught]
        ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False,
                 logging_level="ERROR", _temp_dir=tempfile.mkdtemp(prefix="tkray-"))
        try:
            print(read_rollouts([{str(run_npz)!r}]).count())
        finally:
            ray.shutdown()
        """,
    )
    assert out.splitlines()[-1] == "1"


def test_dataset(tmp_path: Path) -> None:
    out = python(
        tmp_path,
        """
        from trajkit.dataset import Dataset, validate_files
        from trajkit.testing import example_rollout
        data = Dataset.write("runs", [example_rollout(num_steps=4, seed=i) for i in range(3)])
        data.append(example_rollout(num_steps=4, seed=3))
        assert all(check.ok for check in validate_files("runs"))
        batch = next(data.minibatches(4, gamma=0.99, lam=0.95))
        print(data.stats().files, len(batch["advantages"]))
        """,
    )
    assert out.split() == ["4", "4"]


def test_lint(tmp_path: Path, run_npz: Path) -> None:
    out = python(
        tmp_path,
        f"""
        from trajkit.lint import lint
        print(lint([{str(run_npz)!r}]))
        """,
    )
    assert out == "[]\n"


def test_gym(tmp_path: Path) -> None:
    out = python(
        tmp_path,
        """
        import gymnasium as gym
        import numpy as np
        import trajkit
        from trajkit.gym import RolloutRecorder
        env = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync",
                           max_episode_steps=10)
        policy = lambda obs: {"actions": (obs[:, 2] > 0).astype(np.int64),
                              "critic": np.zeros(2, np.float32)}
        recorder = RolloutRecorder(env, policy, seed=0)
        r = recorder.record(16)
        trajkit.save(r, "cartpole.npz", recording=recorder.recording)
        print(trajkit.load("cartpole.npz").num_steps)
        """,
    )
    assert out == "16\n"


def test_torch(tmp_path: Path) -> None:
    out = python(
        tmp_path,
        """
        from trajkit.torch import minibatches
        from trajkit.testing import example_rollout
        r = example_rollout(num_steps=8, num_envs=2)
        batch = next(minibatches(r, 4, gamma=0.99, lam=0.95))
        print(batch["advantages"].dtype, tuple(batch["obses"].shape))
        """,
    )
    assert out == "torch.float32 (4, 4)\n"


def test_plot(tmp_path: Path) -> None:
    python(
        tmp_path,
        """
        from trajkit.plot import plot_episodes
        from trajkit.testing import example_rollout
        plot_episodes([example_rollout(num_steps=8, num_envs=2)]).savefig("episodes.png")
        """,
    )
    assert (tmp_path / "episodes.png").stat().st_size > 0


def test_report(tmp_path: Path, run_npz: Path, exported: Path) -> None:
    out = python(
        tmp_path,
        f"""
        from trajkit.report import report
        page = report([{str(run_npz)!r}, {str(exported)!r}], "report.html", jobs=1)
        print(page.count("<h1>"), "(rollout 0)" in page)
        """,
    )
    assert out == "1 True\n"


def test_cli_module(tmp_path: Path, run_npz: Path) -> None:
    out = python(
        tmp_path,
        f"""
        from trajkit.cli import main
        raise SystemExit(main(["validate", {str(run_npz)!r}]))
        """,
    )
    assert out == f"{run_npz}: ok\n"
