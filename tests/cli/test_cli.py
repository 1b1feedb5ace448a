"""The `trajkit` command line through `main([...])`: exit codes and output."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import trajkit
from tests.cli.helpers import run
from trajkit.testing import example_rollout


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """good/a.npz, good/nested/b.npz (compressed, T=0), plus non-npz and hidden files."""
    root = tmp_path / "good"
    (root / "nested").mkdir(parents=True)
    (root / ".hidden").mkdir()
    trajkit.save(example_rollout(num_steps=6, num_envs=2), root / "a.npz")
    trajkit.save(example_rollout(num_steps=0, num_envs=2), root / "nested" / "b.npz", compress=True)
    (root / "notes.txt").write_text("not a rollout")
    (root / ".hidden" / "junk.npz").write_bytes(b"junk")
    (root / ".partial.npz").write_bytes(b"junk")
    return root


@pytest.fixture
def bad(tmp_path: Path) -> Path:
    path = tmp_path / "bad.npz"
    path.write_bytes(b"PK\x03\x04 not really a zip")
    return path


# --------------------------------------------------------------------------------- validate


def test_validate_good_files_and_folders(capsys: pytest.CaptureFixture[str], dataset: Path) -> None:
    code, out, _ = run(capsys, "validate", str(dataset))
    assert code == 0
    assert out.splitlines() == [f"{dataset / 'a.npz'}: ok", f"{dataset / 'nested' / 'b.npz'}: ok"]


def test_v_shows_the_trajkit_logger_on_stderr(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # In this process (tests/cli/test_startup.py runs it in a fresh one), so that what -v
    # sets up is seen by the tests of trajkit._cli; the logger is put back afterwards.
    path = tmp_path / "r.npz"
    trajkit.save(example_rollout(), path)
    logger = logging.getLogger("trajkit")
    handlers, level = list(logger.handlers), logger.level
    try:
        code, _, err = run(capsys, "validate", "-v", "-j", "2", str(path))
    finally:
        logger.handlers[:] = handlers
        logger.setLevel(level)
    assert code == 0
    assert err == (
        f"trajkit: 2 jobs: 1 files ({path.stat().st_size / 1024:,.0f} KiB) are worked through "
        "in this process, too few to pay for starting worker processes\n"
    )


def test_validate_reports_bad_and_missing_paths(
    capsys: pytest.CaptureFixture[str], dataset: Path, bad: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "missing.npz"
    code, out, err = run(capsys, "validate", str(dataset / "a.npz"), str(bad), str(missing))
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == f"{dataset / 'a.npz'}: ok"
    assert lines[1].startswith(f"{bad}: invalid: damaged or not a ZIP archive")
    assert lines[2] == f"{missing}: invalid: no such file or directory"
    assert "3 files: 1 ok, 2 invalid" in err


def test_validate_an_explicit_file_whatever_its_suffix(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "rollout.bin"
    trajkit.save(example_rollout(), path)
    assert run(capsys, "validate", str(path))[0] == 0


def test_validate_an_empty_folder_fails(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    code, out, _ = run(capsys, "validate", str(tmp_path / "empty"))
    assert code == 1
    assert "no *.npz files in this folder" in out


def test_validate_json(
    capsys: pytest.CaptureFixture[str], dataset: Path, bad: Path, tmp_path: Path
) -> None:
    code, out, _ = run(capsys, "validate", "--json", str(dataset), str(bad))
    assert code == 1
    results = [json.loads(line) for line in out.splitlines()]  # JSON Lines (issue 29)
    assert [r["ok"] for r in results] == [True, True, False]
    assert results[0] == {"path": str(dataset / "a.npz"), "ok": True, "problems": []}
    assert results[2]["path"] == str(bad)
    assert results[2]["problems"][0].startswith("damaged or not a ZIP archive")


def test_validate_names_the_member(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    r = example_rollout()
    dones = r.dones.copy()
    dones[1, 0] = 3
    path = tmp_path / "r.npz"
    trajkit.save(r, path)
    data = bytearray(path.read_bytes())
    offset = data.find(r.dones.tobytes())
    data[offset : offset + dones.nbytes] = dones.tobytes()
    path.write_bytes(bytes(data))
    code, out, _ = run(capsys, "validate", str(path))
    assert code == 1
    assert "member dones.npy" in out


def test_validate_against_a_spec(
    capsys: pytest.CaptureFixture[str], dataset: Path, tmp_path: Path
) -> None:
    spec = trajkit.RolloutSpec.from_rollout(example_rollout())
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(spec.model_dump_json(indent=2))
    assert run(capsys, "validate", "--spec", str(spec_path), str(dataset))[0] == 0
    strict = spec.model_copy(update={"min_steps": 1, "obs_dtype": "uint8"})
    spec_path.write_text(strict.model_dump_json())
    code, out, _ = run(capsys, "validate", "--spec", str(spec_path), str(dataset))
    assert code == 1
    lines = out.splitlines()
    assert lines[0].endswith(
        "a.npz: invalid: obses: dtype float32, but the spec says obs_dtype uint8"
    )
    assert "T=0 is below the spec's min_steps=1" in lines[1]
    code, out, _ = run(capsys, "validate", "--quick", "--spec", str(spec_path), str(dataset))
    assert code == 1
    assert "T=0 is below" in out


def test_validate_shows_at_most_three_problems(
    capsys: pytest.CaptureFixture[str], dataset: Path, tmp_path: Path
) -> None:
    spec = trajkit.RolloutSpec.model_validate(
        {"obs_shape": [9], "obs_dtype": "uint8", "state_shape": [9], "model_outputs": {}}
    )
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(spec.model_dump_json())
    code, out, _ = run(capsys, "validate", "--spec", str(spec_path), str(dataset / "a.npz"))
    assert code == 1
    assert out.count("\n") == 1
    assert out.rstrip().endswith("more)")
    code, out, _ = run(
        capsys, "validate", "--json", "--spec", str(spec_path), str(dataset / "a.npz")
    )
    assert len(json.loads(out)["problems"]) > 3


@pytest.mark.parametrize(
    "content", ["{not json", '{"obs_shape": [1]}', '{"obs_shape": [1], "x": NaN}', "[]"]
)
def test_validate_with_a_bad_spec_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], dataset: Path, tmp_path: Path, content: str
) -> None:
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(content)
    code, out, err = run(capsys, "validate", "--spec", str(spec_path), str(dataset))
    assert code == 2
    assert out == ""
    assert "invalid spec" in err


def test_validate_with_a_missing_spec_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], dataset: Path, tmp_path: Path
) -> None:
    code, _, err = run(capsys, "validate", "--spec", str(tmp_path / "nope.json"), str(dataset))
    assert code == 2
    assert "cannot read the spec" in err


def test_quick_validation_reads_only_the_metadata(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    r = example_rollout()
    path = tmp_path / "r.npz"
    trajkit.save(r, path)
    data = bytearray(path.read_bytes())
    offset = data.find(r.obses.tobytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))
    assert run(capsys, "validate", "--quick", str(path))[0] == 0
    code, out, _ = run(capsys, "validate", str(path))
    assert code == 1
    assert "CRC-32" in out


def test_max_bytes_option(capsys: pytest.CaptureFixture[str], dataset: Path) -> None:
    code, out, _ = run(capsys, "validate", "--max-bytes", "1KiB", str(dataset / "a.npz"))
    assert code == 1
    assert "over the limit of 1024 bytes" in out
    assert run(capsys, "validate", "--max-bytes", "none", str(dataset))[0] == 0
    assert run(capsys, "validate", "--max-bytes", "1g", str(dataset))[0] == 0


def test_progress_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "r.npz"
    trajkit.save(example_rollout(num_steps=1), path)
    for i in range(25):
        (tmp_path / f"copy{i:02d}.npz").write_bytes(path.read_bytes())
    code, out, err = run(capsys, "validate", str(tmp_path))
    assert code == 0
    assert "26/26" not in err  # stderr is not a terminal
    code, out, err = run(capsys, "validate", "--progress", str(tmp_path))
    assert code == 0
    assert "26/26 [" in err  # tqdm's bar
    assert out.count(": ok") == 26
    monkeypatch.setitem(sys.modules, "tqdm", None)  # without trajkit[progress]: a plain line
    code, out, err = run(capsys, "validate", "--progress", str(tmp_path))
    assert code == 0
    assert "\r[26/26] checking" in err
    assert out.count(": ok") == 26
    code, out, err = run(capsys, "validate", "--no-progress", str(tmp_path))
    assert "checking" not in err
    assert "26/26" not in err


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["validate"],
        ["validate", "--bogus", "x.npz"],
        ["validate", "--max-bytes", "lots", "x.npz"],
        ["frobnicate"],
        ["info"],
        ["info", "x.npz", "--gamma", "2"],
        ["info", "x.npz", "--lam", "abc"],
        ["schema", "extra"],
    ],
)
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert "usage:" in err


def test_help_and_version_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0
    assert "validate" in out
    code, out, _ = run(capsys, "validate", "--help")
    assert code == 0
    assert "*.npz" in out or ".npz" in out
    code, out, _ = run(capsys, "--version")
    assert code == 0
    assert out.strip() == f"trajkit {trajkit.__version__}"


# ------------------------------------------------------------------------------------- info


def test_info(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    r = example_rollout(num_steps=8, num_envs=3, truncation=True, done_prob=0.5)
    path = tmp_path / "r.npz"
    trajkit.save(r, path)
    code, out, _ = run(capsys, "info", str(path))
    assert code == 0
    assert "steps (T):         8" in out
    assert "envs (B):          3" in out
    ends = int(r.dones[1:].sum())
    assert r.truncated is not None
    truncated = int(r.truncated.sum())
    assert f"episode ends:      {ends} within the steps" in out
    assert f"{truncated} of them truncated" in out
    assert "model outputs:     critic, actions, log_probs, actor" in out
    assert re.search(r"model_outs\['actor'\] +float32 +\(9, 3, 3\)", out)
    assert re.search(r"obses +float32 +\(9, 3, 4\)", out)
    assert "infos:             8 x 3 dicts; keys: env, t" in out
    assert f"sum {float(r.rews.astype(np.float64).sum()):.6g}" in out
    adv = r.advantages(0.9, 0.8).astype(np.float64)
    code, out, _ = run(capsys, "info", str(path), "--gamma", "0.9", "--lam", "0.8")
    assert f"advantages:        mean {adv.mean():.6g}" in out
    assert "(gamma=0.9, lam=0.8)" in out


def test_info_names_nested_leaves_and_the_action_space(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "n.npz"
    trajkit.save(example_rollout(nested=True, action_kind="box", action_shape=(2,)), path)
    code, out, _ = run(capsys, "info", str(path))
    assert code == 0
    assert "format trajkit.rollout v2" in out
    assert "actions:           continuous (Box), float, per step (2,)" in out
    assert "  obses['proprio'][1]['goal']  float32  (5, 2, 2)" in out
    assert "  states['h']  " in out
    trajkit.save(example_rollout(), path)
    _, out, _ = run(capsys, "info", str(path))
    assert "actions:           discrete, integer in [0, 3) (A from model_outs['actor'])" in out


def test_info_lists_the_final_observations(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    r = example_rollout(num_steps=6, num_envs=2, seed=3)
    ends = int((r.dones[1:] == 1).sum())
    final = np.zeros((ends, *r.obses.shape[2:]), r.obses.dtype)
    path = tmp_path / "f.npz"
    trajkit.save(r.replace(final_obses=final), path)
    code, out, _ = run(capsys, "info", str(path))
    assert code == 0
    assert "format trajkit.rollout v5" in out
    assert "  final_obses " in out
    assert f"{final.shape}" in out.split("final_obses", 1)[1].splitlines()[0]


def test_info_without_critic_or_steps(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "r.npz"
    trajkit.save(example_rollout(keys=("actions",)), path)
    code, out, _ = run(capsys, "info", str(path))
    assert code == 0
    assert "rewards:" in out
    assert "advantages" not in out
    trajkit.save(example_rollout(num_steps=0), path)
    code, out, _ = run(capsys, "info", str(path))
    assert code == 0
    assert "rewards:           (no steps)" in out


def test_info_on_bad_and_missing_files(
    capsys: pytest.CaptureFixture[str], bad: Path, tmp_path: Path
) -> None:
    code, out, err = run(capsys, "info", str(bad))
    assert code == 1
    assert out == ""
    assert err.startswith(f"{bad}: invalid:")
    code, _, err = run(capsys, "info", str(tmp_path / "missing.npz"))
    assert code == 1
    assert "cannot open" in err


# ----------------------------------------------------------------------------------- schema


def test_schema(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "schema")
    assert code == 0
    assert json.loads(out) == trajkit.RolloutSpec.model_json_schema()
    code, out, _ = run(capsys, "schema", "--metadata")
    assert code == 0
    schema = json.loads(out)
    assert schema == trajkit.RolloutFileMetadata.model_json_schema()
    assert schema["properties"]["format"]["const"] == "trajkit.rollout"


# ---------------------------------------------------------------------------- entry points


def test_python_dash_m_trajkit(dataset: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trajkit", "validate", str(dataset)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(": ok") == 2


# ----------------------------------------------------------------- hostile names and text


def test_file_names_that_are_not_utf8_are_shown_escaped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 12: validate and info printed a traceback for a name that is not valid UTF-8."""
    folder = tmp_path / "runs"
    folder.mkdir()
    name = os.fsdecode(b"bad\xff\x1b[2J.npz")  # undecodable bytes and a terminal escape
    trajkit.save(example_rollout(), folder / name)
    code, out, _ = run(capsys, "validate", str(folder))
    assert code == 0
    assert out == f"{folder}/bad\\xff\\x1b[2J.npz: ok\n"
    code, out, _ = run(capsys, "validate", "--json", str(folder))
    assert json.loads(out)["ok"] is True
    code, out, _ = run(capsys, "info", str(folder / name))
    assert code == 0
    assert "bad\\xff\\x1b[2J.npz (" in out
    (folder / name).write_bytes(b"junk")
    code, _, err = run(capsys, "info", str(folder / name))
    assert code == 1
    assert err.startswith(f"{folder}/bad\\xff\\x1b[2J.npz: invalid:")


def test_info_escapes_control_characters_from_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 12: keys and metadata reached the terminal as escape sequences."""
    r = example_rollout()
    infos = r.infos
    infos[0][0] = {"\x1b]0;owned\x07": 1, "bidi\u202eevil": 2}
    r = r.replace(model_outs={"\x1b[31mred": r.obses[..., 0]}, infos=infos)
    path = tmp_path / "r.npz"
    trajkit.save(r, path)
    code, out, _ = run(capsys, "info", str(path))
    assert code == 0
    assert "\x1b" not in out
    assert "\u202e" not in out
    assert "model outputs:     \\x1b[31mred" in out
    assert "keys: \\x1b]0;owned\\x07, bidi\\u202eevil" in out


def test_a_spec_that_is_not_a_regular_file_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, dataset: Path
) -> None:
    """Issue 12: `trajkit validate --spec FIFO` blocked forever, opening the FIFO."""
    fifo = tmp_path / "spec.json"
    os.mkfifo(fifo)
    done = subprocess.run(  # in a subprocess, so that a regression fails instead of hanging
        [sys.executable, "-m", "trajkit", "validate", "--spec", str(fifo), str(dataset)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert f"cannot read the spec {fifo}: not a regular file" in done.stderr
    code, _, err = run(capsys, "validate", "--spec", str(tmp_path), str(dataset))
    assert code == 2
    assert "not a regular file" in err


CONSOLE_MAIN = "from trajkit.cli import console_main; console_main()"


def test_the_console_script_escapes_what_the_terminal_cannot_show(
    tmp_path: Path,
) -> None:
    path = tmp_path / "é.npz"
    trajkit.save(example_rollout(), path)
    done = subprocess.run(
        [sys.executable, "-c", CONSOLE_MAIN, "validate", str(path)],
        capture_output=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONIOENCODING": "ascii"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{tmp_path}/\\xe9.npz: ok\n".encode()
