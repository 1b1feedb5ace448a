"""File problems (TK001), selection, settings, the order of findings and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import trajkit
from tests.cli.helpers import run as _run
from tests.lint.helpers import dones_for, rollout
from trajkit._io import engine
from trajkit.lint import CHECKS, Finding, find_config, lint, read_config
from trajkit.lint.registry import selected_codes


def _save(folder: Path, name: str, seed: int = 0, scale: float = 1.0, **kw: object) -> Path:
    r = rollout(np.stack([dones_for([6, 9], 20)] * 2, 1), seed=seed)
    r.rews *= scale
    for key, value in kw.items():
        getattr(r, key)[...] = value
    path = folder / name
    trajkit.save(r, path)
    return path


@pytest.fixture
def clean(tmp_path: Path) -> Path:
    folder = tmp_path / "clean"
    folder.mkdir()
    for i in range(4):
        _save(folder, f"r{i}.npz", seed=i)
    return folder


def test_a_clean_dataset_has_no_findings(clean: Path) -> None:
    assert lint(clean, jobs=1) == []


def test_tk001_unreadable_and_missing(tmp_path: Path) -> None:
    (tmp_path / "bad.npz").write_bytes(b"PK\x03\x04 not a zip")
    found = lint([tmp_path / "bad.npz", tmp_path / "missing.npz"], jobs=1)
    assert [(f.code, Path(f.path or "").name) for f in found] == [
        ("TK001", "bad.npz"),
        ("TK001", "missing.npz"),
    ]
    assert found[1].message == "no such file or directory"


def test_jobs_give_the_same_findings_in_the_same_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine, "CHUNK_FILES", 2)
    monkeypatch.setattr(engine, "IN_PROCESS_FILES", 0)  # workers, however few the files
    for i in range(6):
        _save(tmp_path, f"r{i}.npz", seed=i, scale=50.0 if i == 3 else 1.0)
    (tmp_path / "dup.npz").write_bytes((tmp_path / "r1.npz").read_bytes())
    (tmp_path / "junk.npz").write_bytes(b"junk")
    one = lint(tmp_path, jobs=1, max_episode_steps=7)
    two = lint(tmp_path, jobs=2, max_episode_steps=7)
    assert one == two
    assert {f.code for f in one} == {"TK001", "TK105", "TK202", "TK203"}


# ------------------------------------------------------------------------------ selection


def test_selection_by_prefix_as_ruff() -> None:
    assert selected_codes() == frozenset(CHECKS)
    assert selected_codes(["TK10"], ["TK10"]) == frozenset()
    assert selected_codes(["TK105"], ["TK1"]) == {"TK105"}
    assert selected_codes(["ALL"], ["TK2", "TK3"]) == {c for c in CHECKS if c[2] in "01"}
    with pytest.raises(ValueError, match="select: TK7 matches no check"):
        selected_codes(["TK7"])


def test_a_finding_as_text_and_json() -> None:
    f = Finding("TK104", "obses[3] repeats obses[2]", "a.npz", 1, 2)
    assert f.format() == "a.npz: env 1, step 2: TK104 [warning] obses[3] repeats obses[2]"
    assert json.loads(json.dumps(f.to_json()))["name"] == "reset-observation-twice"


# ------------------------------------------------------------------------------ pyproject


def test_pyproject_is_found_walking_up_and_read(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.trajkit.lint]\nselect = ["TK1"]\nignore = ["tk104"]\n'
        'max-episode-steps = 200\naction-space = {type = "Discrete", n = 4}\n'
    )
    (tmp_path / "a" / "b").mkdir(parents=True)
    path = find_config(tmp_path / "a" / "b")
    assert path == (tmp_path / "pyproject.toml").resolve()
    config = read_config(path)
    assert (config.select, config.ignore, config.max_episode_steps) == (("TK1",), ("TK104",), 200)
    assert config.action_space == {"type": "Discrete", "n": 4}


def test_pyproject_without_the_table_is_passed_over(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.trajkit.other]\nx = 1\n")
    assert find_config(tmp_path) is None or find_config(tmp_path) != tmp_path / "pyproject.toml"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("selct = []", "unknown key(s) selct"),
        ('select = "TK1"', "select must be a list of codes"),
        ('ignore = ["XX1"]', "ignore: XX1 matches no check"),
        ("max-episode-steps = 0", "max-episode-steps must be an integer >= 1, got 0"),
        ("reward-scale-ratio = 0.5", "reward-scale-ratio must be a finite number > 1"),
        ("action-space = 3", "action-space must be a table with a type"),
    ],
)
def test_pyproject_refusals_name_the_file_and_key(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(f"[tool.trajkit.lint]\n{body}\n")
    with pytest.raises(ValueError, match=r"pyproject.toml: \[tool.trajkit.lint\]") as info:
        read_config(path)
    assert message in str(info.value)


# ------------------------------------------------------------------------------------ CLI


def test_cli_exit_codes_as_ruff(
    capsys: pytest.CaptureFixture[str], clean: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(clean)
    code, out, err = _run(capsys, "lint", "-j", "1", str(clean))
    assert (code, out, err) == (0, "", "All checks passed (4 files).\n")
    (clean / "copy.npz").write_bytes((clean / "r0.npz").read_bytes())
    code, out, err = _run(capsys, "lint", "-j", "1", str(clean))
    assert code == 1
    assert out == (
        f"{clean / 'r0.npz'}: TK203 [warning] the same arrays as {clean / 'copy.npz'}: the "
        "rollout is saved twice\n"
    )
    assert err == "Found 1 finding (1 warning) in 5 files.\n"
    assert _run(capsys, "lint", "--ignore", "TK203", str(clean))[0] == 0
    code, _, err = _run(capsys, "lint", "--select", "TK9", str(clean))
    assert code == 2
    assert err.startswith("trajkit lint: error: --select: TK9 matches no check")
    assert _run(capsys, "lint")[0] == 2


def test_cli_json_lines_and_pyproject(
    capsys: pytest.CaptureFixture[str], clean: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(clean)
    (clean / "copy.npz").write_bytes((clean / "r0.npz").read_bytes())
    code, out, _ = _run(capsys, "lint", "--json", "-j", "1", "--max-episode-steps", "7", ".")
    objects = [json.loads(line) for line in out.splitlines()]
    assert code == 1
    assert [(Path(o["path"]).name, o["code"]) for o in objects] == [
        ("copy.npz", "TK105"),
        ("r0.npz", "TK105"),
        ("r0.npz", "TK203"),
        *((f"r{i}.npz", "TK105") for i in (1, 2, 3)),
    ]
    assert set(objects[0]) == {"code", "name", "severity", "path", "env", "step", "message"}
    (clean / "pyproject.toml").write_text('[tool.trajkit.lint]\nignore = ["TK105", "TK203"]\n')
    assert _run(capsys, "lint", "--max-episode-steps", "7", ".")[0] == 0
    assert _run(capsys, "lint", "--no-config", "--max-episode-steps", "7", ".")[0] == 1
    (clean / "pyproject.toml").write_text("[tool.trajkit.lint]\nbad = 1\n")
    code, _, err = _run(capsys, "lint", ".")
    assert code == 2
    assert "unknown key(s) bad" in err


def test_cli_lists_the_checks(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "lint", "--list")
    assert code == 0
    assert len(out.splitlines()) == len(CHECKS)
    assert out.splitlines()[1].startswith("TK101  warning  truncation-as-termination: ")


def test_a_file_s_own_findings_come_in_code_order() -> None:
    from tests.lint.helpers import codes

    obses = np.random.default_rng(0).uniform(-0.5, 0.5, size=(21, 1, 3)).astype(np.float32)
    obses[4] = obses[3]  # each episode end repeats its observation (TK104)
    obses[7] = obses[6]
    obses[7, 0, 0] = obses[6, 0, 0] = 50.0  # far outside the declared space (TK116),
    obses[9, 0, 0] = -50.0  # on both sides
    rews = np.ones(20)
    rews[[3, 6]] = 0.0
    dones = dones_for([4, 3], 20)
    outs = {"actions": np.array([[0], [1], [9]] + [[0]] * 18)}
    space = {"type": "Box", "low": -1.0, "high": 1.0, "shape": [3], "dtype": "float32"}
    rec = {"id": "a", "index": 0, "num_envs": 1, "observation_space": space, "wrappers": []}
    r = rollout(dones, obses=obses, rews=rews, outs=outs)
    found = codes(r, "TK1", recording=rec, action_space={"type": "Discrete", "n": 2})
    assert [f.code for f in found][:3] == ["TK104", "TK106", "TK116"]
