"""`make wheel`: the wheel users install is the one the tests prove.

Run with the dev environment's Python (`python tests/project/wheel_check.py`); it

1. builds the sdist, and the wheel from the sdist, into `build/wheel-check/dist`
   (`python -m build`), and checks their metadata with `twine check --strict`;
2. checks what they hold: LICENSE, `py.typed`, every module of `src/trajkit` that git tracks,
   the `trajkit` console script;
3. makes a fresh virtual environment `build/wheel-check/venv` and installs the wheel with
   every extra (`trajkit[all]`) from the built files only (`--no-index`). The extras' packages
   are not downloaded again: the environment sees the dev environment's site-packages, minus
   anything of trajkit, through a `.pth` file (a view of the folder, not a copy), so the
   install resolves against them and puts nothing of trajkit anywhere but the new environment;
4. runs `tests/project/test_fresh_process.py` and `tests/project/test_public_api.py` with the
   new environment's Python (`TRAJKIT_EXPECT_INSTALLED` makes them prove that `trajkit` comes
   from it, not from `src/`), then `examples/demo.py`.

Exits non-zero at the first step that fails. Takes about two minutes on two cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "build" / "wheel-check"


def _step(what: str, command: list[str], **kwargs: object) -> None:
    print(f"wheel-check: {what}: {' '.join(command)}", flush=True)
    start = time.perf_counter()
    subprocess.run(command, check=True, **kwargs)  # type: ignore[call-overload]
    print(f"wheel-check: {what}: done in {time.perf_counter() - start:.1f} s", flush=True)


def build(dist: Path) -> tuple[Path, Path]:
    """The sdist and the wheel built from it, their metadata checked."""
    shutil.rmtree(dist, ignore_errors=True)
    _step("build", [sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)])
    (sdist,) = dist.glob("trajkit-*.tar.gz")
    (wheel,) = dist.glob("trajkit-*.whl")
    _step("twine", [sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)])
    return sdist, wheel


def _tracked_modules() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "src/trajkit"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [name.removeprefix("src/") for name in listed if name.endswith((".py", "py.typed"))]


def missing_files(sdist: Path, wheel: Path, modules: list[str]) -> list[str]:
    """What `sdist` and `wheel` lack of `modules` (paths under src/), LICENSE and the script."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        infos = {name.split("/")[0] for name in names if ".dist-info/" in name}
        if len(infos) != 1:
            return [f"wheel: one .dist-info folder (found {sorted(infos)})"]
        (info,) = infos
        entry_points = (
            archive.read(f"{info}/entry_points.txt").decode()
            if f"{info}/entry_points.txt" in names
            else ""
        )
    with tarfile.open(sdist) as archive:
        listed = archive.getnames()
        top = listed[0].split("/")[0] if listed else ""
        in_sdist = {name.removeprefix(f"{top}/") for name in listed}
    missing = [f"wheel: {name}" for name in modules if name not in names]
    if f"{info}/licenses/LICENSE" not in names:
        missing.append(f"wheel: {info}/licenses/LICENSE")
    missing += [f"sdist: src/{name}" for name in modules if f"src/{name}" not in in_sdist]
    missing += [f"sdist: {name}" for name in ("LICENSE", "pyproject.toml") if name not in in_sdist]
    if "trajkit = trajkit._cli.main:console_main" not in entry_points:
        missing.append(f"wheel: the `trajkit` console script in {info}/entry_points.txt")
    return missing


def check_contents(sdist: Path, wheel: Path) -> None:
    """Every tracked module, `py.typed`, LICENSE and the console script, in both files."""
    modules = _tracked_modules()
    if not modules:
        raise SystemExit("wheel-check: git lists no module under src/trajkit (not a checkout?)")
    missing = missing_files(sdist, wheel, modules)
    if missing:
        raise SystemExit("wheel-check: missing from the built files:\n  " + "\n  ".join(missing))
    print(f"wheel-check: contents: {len(modules)} modules, py.typed, LICENSE, console script")


def _view_of_dev_packages(folder: Path) -> Path:
    """A folder of links to the dev site-packages' entries, leaving out trajkit's own."""
    paths = sysconfig.get_paths()
    folder.mkdir(parents=True)
    for source in dict.fromkeys(Path(paths[key]) for key in ("purelib", "platlib")):
        for entry in source.iterdir():
            link = folder / entry.name
            if "trajkit" not in entry.name.lower() and not link.exists():
                link.symlink_to(entry)
    return folder


def make_venv(where: Path, wheel: Path) -> Path:
    """A fresh environment with the wheel and its extras installed; its Python."""
    shutil.rmtree(where, ignore_errors=True)
    venv.EnvBuilder(with_pip=False, symlinks=os.name != "nt").create(where)
    python = where / "bin" / "python"
    own = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    view = _view_of_dev_packages(where / "dev-packages")
    # Processed at start-up after the environment's own folder, so its packages come first.
    (own / "zz-dev-packages.pth").write_text(f"import site; site.addsitedir({str(view)!r})\n")
    _step(
        "install",
        [
            sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
            "--no-index", "--find-links", str(wheel.parent), f"trajkit[all] @ {wheel.as_uri()}",
        ],
    )  # fmt: skip
    return python


def run_against(python: Path, where: Path) -> None:
    """The fresh-process tests, the API snapshot and the demo, with the installed wheel."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["TRAJKIT_EXPECT_INSTALLED"] = str(where)
    tests = ["tests/project/test_fresh_process.py", "tests/project/test_public_api.py"]
    _step(
        "tests",
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        cwd=ROOT,
        env=env,
    )
    _step("demo", [str(python), "examples/demo.py"], cwd=ROOT, env=env)


def main(argv: list[str] | None = None) -> int:
    """Build, check, install and test; see the module's documentation."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-tests", action="store_true", help="build, check and install only")
    args = parser.parse_args(argv)
    sdist, wheel = build(WORK / "dist")
    check_contents(sdist, wheel)
    python = make_venv(WORK / "venv", wheel)
    if not args.no_tests:
        run_against(python, WORK / "venv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
