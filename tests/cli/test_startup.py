"""Start-up: what `import trajkit` and each command load, in a fresh interpreter (issue 45).

`import trajkit` and `trajkit --help`/`--version` load no NumPy and no pydantic; commands load
what they use when they run; no command loads numba, pyarrow, torch or matplotlib unless it
needs them. The engine forks its workers where that is safe, so that they import nothing, and
says with `-v` how it shares the files out. No timings here: `benchmarks/bench_startup.py`
measures them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from pydantic import BaseModel

import trajkit
from trajkit._base.docstrings import attribute_docstrings
from trajkit._io import engine
from trajkit._io.discovery import discover
from trajkit._io.items import Found
from trajkit.testing import example_rollout

NEVER = {"numba", "pyarrow", "torch", "matplotlib", "ray", "gymnasium", "fsspec", "tqdm"}
"""Libraries that no command of these tests needs, and so never loads."""

HEAVY = {"numpy", "pydantic", "pydantic_core"} | NEVER

HELP_MODULES = {
    "trajkit",
    "trajkit._base",
    "trajkit._base.version",
    "trajkit._cli",
    "trajkit._cli.common",
    "trajkit._cli.main",
    "trajkit._cli.parser",
    "trajkit._io",
    "trajkit._io.defaults",
}
"""Every trajkit module that `trajkit --help` loads: the parser and what it names."""

# Runs the command as `python -m trajkit` does, then prints the modules it loaded.
_RUN = """
import contextlib, io, json, runpy, sys
sys.argv = ["trajkit", *json.loads(sys.argv[1])]
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        runpy.run_module("trajkit", run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)))
"""


def loaded(*argv: str) -> set[str]:
    """The modules that `python -m trajkit ARGV` loads, in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", _RUN, json.dumps(argv)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return set(json.loads(done.stdout))


def tops(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


@pytest.fixture(scope="module")
def small_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("startup") / "run.npz"
    trajkit.save(example_rollout(num_steps=16, num_envs=2, truncation=True), path)
    return path


_PLUGINS = """
import contextlib, io, json, runpy, sys
sys.argv = ["trajkit", "validate", sys.argv[1]]
with contextlib.redirect_stdout(io.StringIO()):
    try:
        runpy.run_module("trajkit", run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
from pydantic.plugin import _loader
print(json.dumps(_loader._plugins is not None))
"""


@pytest.mark.parametrize(("given", "scanned"), [(None, False), ("", True), ("__all__", False)])
def test_the_command_looks_for_no_pydantic_plugins_unless_the_user_says(
    small_file: Path, given: str | None, scanned: bool
) -> None:
    # Finding plugins reads every installed package's metadata; the user's setting wins.
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    if given is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = given
    done = subprocess.run(
        [sys.executable, "-c", _PLUGINS, str(small_file)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=env,
    )
    assert json.loads(done.stdout) is scanned


def test_import_trajkit_loads_no_numpy_no_pydantic() -> None:
    code = "import json, sys, trajkit; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    modules = set(json.loads(done.stdout))
    assert {m for m in modules if m.startswith("trajkit")} == {
        "trajkit",
        "trajkit._base",
        "trajkit._base.version",
    }
    assert not tops(modules) & (HEAVY | {"typing", "dataclasses"})


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["validate", "--help"], []])
def test_help_and_version_load_the_parser_only(argv: list[str]) -> None:
    modules = loaded(*argv)
    assert {m for m in modules if m.startswith("trajkit")} == HELP_MODULES
    assert not tops(modules) & (HEAVY | {"typing", "dataclasses", "logging"})


def test_the_console_script_loads_what_python_m_loads() -> None:
    # The `trajkit` entry point imports `trajkit._cli.main` directly.
    code = (
        "import json, sys\n"
        "from trajkit._cli.main import main\n"
        "main(['--version'])\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('trajkit'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert set(json.loads(done.stdout.splitlines()[-1])) == HELP_MODULES


@pytest.mark.parametrize(
    "argv",
    [
        ["validate", "{file}"],
        ["validate", "--jobs", "2", "{file}"],
        ["validate", "--quick", "{file}"],
        ["lint", "--no-config", "{file}"],
        ["info", "{file}"],
        ["schema"],
    ],
)
def test_commands_load_no_optional_library(small_file: Path, argv: list[str]) -> None:
    modules = loaded(*(arg.format(file=small_file) for arg in argv))
    assert not tops(modules) & NEVER
    if argv[0] == "validate":  # one file needs no process pool, nor the dataset or lint package
        unused = {"concurrent.futures.process", "logging", "trajkit.dataset", "trajkit.lint"}
        assert not unused & modules


def test_validate_with_a_spec_loads_the_dataset_reader_of_specs(
    small_file: Path, tmp_path: Path
) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(trajkit.RolloutSpec.from_rollout(trajkit.load(small_file)).model_dump_json())
    assert "trajkit.dataset" in loaded("validate", "--spec", str(spec), str(small_file))


# ------------------------------------------------------------------------- -v and the engine


def test_validate_v_says_small_work_stays_in_this_process(small_file: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trajkit", "validate", "-v", "-j", "2", str(small_file)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    size = small_file.stat().st_size
    assert done.stderr == (
        f"trajkit: 2 jobs: 1 files ({size / 1024:,.0f} KiB) are worked through in this process, "
        "too few to pay for starting worker processes\n"
    )


def test_lint_v_says_how_the_files_are_shared_out(tmp_path: Path) -> None:
    for i in range(engine.IN_PROCESS_FILES + 1):
        trajkit.save(example_rollout(num_steps=2, num_envs=1, seed=i), tmp_path / f"r{i:03d}.npz")
    every_core_free = (
        "import sys, trajkit._io.engine as engine; engine.LOADAVG = '/dev/null'; "
        "from trajkit.cli import console_main; sys.argv[0] = 'trajkit'; console_main()"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            every_core_free,
            "lint",
            "--no-config",
            "-v",
            "-j",
            "2",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(
        "trajkit: 2 jobs: this process and 1 worker process(es), forked from it\n"
    )


def test_without_v_nothing_is_said(small_file: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trajkit", "validate", "-j", "2", str(small_file)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stderr == ""


def _where(items: Sequence[engine.Item]) -> list[tuple[str, int, int]]:
    """Each file with the process that saw it and that process's parent."""
    return [(item.path, os.getpid(), os.getppid()) for item in items]


def _touch(tmp_path: Path, count: int) -> None:
    for i in range(count):
        (tmp_path / f"r{i:03d}.npz").touch()


def _parent(_: object) -> int:
    return os.getppid()


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin", reason="no safe fork")
def test_workers_are_forked_where_no_other_thread_runs() -> None:
    code = "from trajkit._io import engine; print(engine.start_method())"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout == "fork\n"
    pool = engine._pool(_where, 2, "fork")
    try:
        engine._fork_workers(pool, 2)
        assert set(pool.map(_parent, range(8))) == {os.getpid()}  # no fork server between
    finally:
        pool.shutdown()


def test_a_large_first_chunk_is_worked_here_before_the_fork(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (A small first file alone is worked here, its result dropped, and its chunk shared
    # out: which process then works that chunk is a race, pinned without a pool in
    # tests/io/test_engine_shared.py.)
    monkeypatch.setattr(engine, "CHUNK_FILES", 2)
    monkeypatch.setattr(engine, "IN_PROCESS_FILES", 0)
    monkeypatch.setattr(engine, "start_method", lambda: "fork")
    _touch(tmp_path, 12)
    (tmp_path / "r000.npz").write_bytes(b"\0" * (engine.WARM_BYTES + 1))
    seen = list(engine.run_ordered(_where, discover(str(tmp_path)), jobs=2))
    assert [Path(path).name for path, _, _ in seen] == [f"r{i:03d}.npz" for i in range(12)]
    assert [pid for _, pid, _ in seen[:2]] == [os.getpid()] * 2
    assert len({pid for _, pid, _ in seen}) <= 2


@pytest.fixture
def another_thread() -> Iterator[None]:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join()


def test_a_running_thread_rules_out_fork(another_thread: None) -> None:
    assert engine.start_method() in ("forkserver", "spawn")


@pytest.mark.parametrize("extra", [0, 1])
def test_the_in_process_limit_grows_without_fork(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: int
) -> None:
    """Workers from a fork server import trajkit first: `SERVER_FACTOR` times the limit."""
    started: list[str] = []

    def no_pool(work: object, workers: int, method: str) -> None:
        started.append(method)
        raise AssertionError("a process pool was started")

    monkeypatch.setattr(engine, "_pool", no_pool)
    monkeypatch.setattr(engine, "start_method", lambda: "forkserver")
    count = engine.SERVER_FACTOR * engine.IN_PROCESS_FILES + extra
    items = [Found(str(tmp_path / f"{i}.npz")) for i in range(count)]
    if extra:
        with pytest.raises(AssertionError, match="a process pool was started"):
            list(engine.run_ordered(_where, iter(items), jobs=2, by_size=False))
        assert started == ["forkserver"]
    else:
        assert len(list(engine.run_ordered(_where, iter(items), jobs=2, by_size=False))) == count
        assert started == []


@pytest.mark.parametrize("extra", [0, 1])
def test_the_in_process_limits_with_fork(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: int
) -> None:
    started: list[str] = []

    def no_pool(work: object, workers: int, method: str) -> None:
        started.append(method)
        raise AssertionError("a process pool was started")

    monkeypatch.setattr(engine, "_pool", no_pool)
    monkeypatch.setattr(engine, "start_method", lambda: "fork")
    count = engine.IN_PROCESS_FILES + extra
    items = [Found(str(tmp_path / f"{i}.npz")) for i in range(count)]
    if extra:
        with pytest.raises(AssertionError, match="a process pool was started"):
            list(engine.run_ordered(_where, iter(items), jobs=2, by_size=False))
        assert started == ["fork"]
    else:
        assert len(list(engine.run_ordered(_where, iter(items), jobs=2, by_size=False))) == count
    # Bytes count too where the work reads the files' contents.
    nbytes = engine.IN_PROCESS_BYTES // 2 + extra
    two = [Found(str(tmp_path / f"{i}.npz"), nbytes) for i in range(2)]
    started.clear()
    if extra:
        with pytest.raises(AssertionError, match="a process pool was started"):
            list(engine.run_ordered(_where, iter(two), jobs=2))
    else:
        assert len(list(engine.run_ordered(_where, iter(two), jobs=2))) == 2


def test_a_broken_pool_is_recognised_without_importing_the_pool() -> None:
    assert not engine.pool_broke(RuntimeError("not a pool"))
    from concurrent.futures.process import BrokenProcessPool

    assert engine.pool_broke(BrokenProcessPool("a worker died"))


# ------------------------------------------------------------- descriptions in the JSON schema


@pytest.mark.parametrize("model", [trajkit.RolloutSpec, trajkit.RolloutFileMetadata])
def test_the_json_schema_describes_each_field_by_its_docstring(model: type[BaseModel]) -> None:
    """Read when the schema is made (not at import, as pydantic's own option does)."""
    schema = model.model_json_schema()
    docs = attribute_docstrings(model)
    assert set(docs) == set(schema["properties"])
    for name, text in docs.items():
        assert schema["properties"][name]["description"] == text
    assert schema["properties"]["spec" if model is trajkit.RolloutFileMetadata else "obs_shape"]


def test_a_progress_bar_leaves_no_thread_behind(
    small_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """tqdm's monitor thread would rule out forking the workers of every later pool."""
    pytest.importorskip("tqdm")
    from trajkit.cli import main

    before = set(threading.enumerate())
    assert main(["validate", "--progress", str(small_file), str(small_file)]) == 0
    assert "2/2 [" in capsys.readouterr().err  # tqdm's bar
    assert set(threading.enumerate()) <= before


def test_without_the_source_the_schema_has_no_descriptions(monkeypatch: pytest.MonkeyPatch) -> None:
    """An install without `.py` files: no descriptions, as pydantic's own option gives."""
    import inspect

    def no_source(obj: object) -> str:
        raise OSError("could not get source code")

    monkeypatch.setattr(inspect, "getsource", no_source)
    assert attribute_docstrings(trajkit.RolloutSpec) == {}
    schema = trajkit.RolloutSpec.model_json_schema()
    assert "description" not in schema["properties"]["state_dtype"]
    assert schema["allOf"]  # the rest of the model's extra keys still apply


def test_the_command_leaves_its_objects_to_the_exit(small_file: Path) -> None:
    """Frozen before the exit: the interpreter's last collections skip them; `atexit` still runs."""
    said = (
        "import atexit, gc, sys; atexit.register(lambda: print(gc.get_freeze_count() > 0)); "
        "from trajkit.cli import console_main; sys.argv[0] = 'trajkit'; console_main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", said, "validate", str(small_file)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.splitlines()[-1] == "True"
