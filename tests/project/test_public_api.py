"""The public surface: `trajkit.__all__` is sorted, complete and importable, and pinned.

Every public name and signature, and every CLI option, is in the checked-in snapshot
`tests/project/public_api.txt` (see `tests/project/api_snapshot.py`): an unplanned change fails
here.
"""

from __future__ import annotations

import ast
import difflib
import importlib
import subprocess
import sys
import types
from pathlib import Path

import pytest

import trajkit
from tests.mutation_report import UNDER_MUTMUT
from tests.project.api_snapshot import MODULES, SNAPSHOT, render


def test_all_is_sorted() -> None:
    assert trajkit.__all__ == sorted(trajkit.__all__)


def test_all_is_complete() -> None:
    # The names are imported on first use (`trajkit.__getattr__`): `dir` lists them all.
    public = {
        name
        for name in dir(trajkit)
        if not name.startswith("_") and not isinstance(getattr(trajkit, name), types.ModuleType)
    }
    assert public | {"__version__"} == set(trajkit.__all__)


def _type_checking_imports() -> dict[str, str]:
    """Name -> module of the imports under `if TYPE_CHECKING:` in `trajkit/__init__.py`."""
    tree = ast.parse(Path(trajkit.__file__).read_text(encoding="utf-8"))
    blocks = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name)
        if node.test.id == "TYPE_CHECKING"
    ]
    assert len(blocks) == 1
    return {
        alias.asname or alias.name: node.module or ""
        for node in ast.walk(blocks[0])
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def test_type_checkers_see_each_name_where_it_is_imported_from_at_run_time() -> None:
    # mypy and IDEs read the `if TYPE_CHECKING:` imports; at run time `__getattr__` imports
    # each name from `_MODULES` (deprecated names from `_DEPRECATED`): the two must agree.
    run_time = {name: module for module, names in trajkit._MODULES.items() for name in names}
    run_time |= {name: module for name, (module, _) in trajkit._DEPRECATED.items()}
    assert _type_checking_imports() == run_time
    assert set(run_time) - set(trajkit._DEPRECATED) | {"__version__"} == set(trajkit.__all__)


def test_a_name_is_imported_on_first_use_and_kept() -> None:
    code = (
        "import sys, trajkit\n"
        "assert 'trajkit._models.rollout' not in sys.modules\n"
        "first = trajkit.Rollout\n"
        "assert 'Rollout' in vars(trajkit) and trajkit.Rollout is first\n"
        "from trajkit._models.rollout import Rollout\n"
        "assert first is Rollout\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'trajkit' has no attribute 'Rolout'"):
        trajkit.Rolout  # type: ignore[attr-defined]  # noqa: B018
    assert not hasattr(trajkit, "TYPE_CHECKING")


@pytest.mark.parametrize("name", ["index_batches", "index_stream"])
def test_a_deprecated_name_warns_at_each_use_and_is_not_public(name: str) -> None:
    assert name not in trajkit.__all__
    assert name not in dir(trajkit)
    removed = "is deprecated and will be removed in trajkit 0.3.0: use"
    for _ in range(2):  # not cached: the second use warns too
        with pytest.warns(DeprecationWarning, match=rf"trajkit\.{name} {removed}") as caught:
            function = getattr(trajkit, name)
        if not UNDER_MUTMUT:  # its trampoline's frames lie between the user and the warning
            assert caught[0].filename == __file__  # the line that used the name
    from trajkit._core import indices

    assert function is getattr(indices, name)


def test_every_name_is_importable() -> None:
    for name in trajkit.__all__:
        assert getattr(trajkit, name) is not None


def test_version_is_a_string() -> None:
    assert isinstance(trajkit.__version__, str)
    assert trajkit.__version__.count(".") >= 2


@pytest.mark.parametrize("module", MODULES)
def test_every_public_module_is_importable(module: str) -> None:
    names = importlib.import_module(module).__all__
    assert names, module


def test_the_public_api_is_the_snapshot() -> None:
    expected = SNAPSHOT.read_text(encoding="utf-8")
    actual = render()
    if actual != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                actual.splitlines(keepends=True),
                "tests/project/public_api.txt (snapshot)",
                "the API now",
            )
        )
        pytest.fail(
            "The public API differs from its snapshot. If the change is intended, update the "
            "snapshot and the CHANGELOG together: run `make api-snapshot` and add a line to "
            "CHANGELOG.md (a removal or an incompatible change is breaking: see the "
            f"versioning policy in CONTRIBUTING.md).\n{diff}",
            pytrace=False,
        )


def test_every_public_module_is_in_the_snapshot() -> None:
    # A new integration (`src/trajkit/<name>.py` or a package) is public API from its first day.
    root = Path(trajkit.__file__).parent
    modules = [p for p in root.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()]
    public = {f"trajkit.{p.stem}" for p in modules if not p.name.startswith("_")}
    assert {"trajkit", *public} == set(MODULES)
