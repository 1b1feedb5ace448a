"""The tests mirror the package: each folder of `tests/` specifies a module or package of trajkit.

`tests/core` holds the tests of `trajkit._core`, `tests/arrow` those of the package
`trajkit.arrow`, `tests/plot` those of the module `trajkit.plot`, `tests/cli` those of
`trajkit._cli` and `trajkit.cli` (a folder takes the name without its leading underscore).
`tests/project` holds what specifies the project as a whole: docs, layers, public API, typing,
wheel, examples. No test file lies flat in `tests/`, and every folder is a package, so two
folders may hold files of the same name (`tests/arrow/test_import.py`, `tests/cli/...`).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
SRC = ROOT / "src" / "trajkit"
PROJECT = "project"


def modules() -> set[str]:
    """The names a folder of tests may take: trajkit's modules and packages, no leading `_`."""
    names: set[str] = set()
    for path in SRC.iterdir():
        if path.name.startswith("__"):  # __init__.py, __main__.py, __pycache__
            continue
        if path.is_dir() and (path / "__init__.py").is_file():
            names.add(path.name.lstrip("_"))
        elif path.suffix == ".py":
            names.add(path.stem.lstrip("_"))
    return names


def folders() -> list[Path]:
    """The folders of `tests/` (not caches)."""
    return sorted(
        path for path in TESTS.iterdir() if path.is_dir() and not path.name.startswith((".", "__"))
    )


def test_the_names_are_read_from_the_package() -> None:
    names = modules()
    assert {"core", "models", "io", "cli", "arrow", "gym", "plot", "testing"} <= names
    assert PROJECT not in names  # the project's folder cannot be mistaken for a module's
    assert not any(name.startswith("_") for name in names)


def test_every_folder_of_tests_names_a_module_or_package_of_trajkit() -> None:
    stray = [path.name for path in folders() if path.name not in modules() | {PROJECT}]
    assert not stray, (
        f"tests/{stray} name no module or package of src/trajkit: put each test file in the "
        "folder of what it specifies (tests/project for the project as a whole)"
    )


def test_no_test_file_lies_flat_in_tests() -> None:
    flat = sorted(path.name for path in TESTS.glob("test_*.py"))
    assert not flat, f"{flat} lie flat in tests/: move each into the folder of what it specifies"


def test_every_folder_of_tests_is_a_package() -> None:
    bare = [path.name for path in folders() if not (path / "__init__.py").is_file()]
    assert not bare, f"tests/{bare} have no __init__.py"


def imported_test_modules(source: str, module: str) -> list[str]:
    """The test modules (`tests.<folder>.test_<name>`) that the code of `module` imports.

    Every form counts: `from tests.a.test_b import x`, `import tests.a.test_b`,
    `from tests.a import test_b` and relative imports, at the top or inside a function. Left
    out: a module importing itself (in a fresh interpreter's script, say), and what a module
    run as a script imports under `if __name__ == "__main__":`.
    """
    package = module.rpartition(".")[0]
    names: set[str] = set()
    nodes: list[ast.AST] = [ast.parse(source)]
    while nodes:
        node = nodes.pop()
        if isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'":
            continue
        nodes.extend(ast.iter_child_nodes(node))
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0]
                base = f"{parent}.{base}" if base else parent
            names.update(f"{base}.{alias.name}" for alias in node.names)
    found = set()
    for name in names:
        parts = name.split(".")
        tests = [i for i, part in enumerate(parts) if i and part.startswith("test_")]
        if parts[0] == "tests" and tests:
            found.add(".".join(parts[: tests[0] + 1]))
    return sorted(found - {module})


def test_the_finder_sees_every_form_of_import() -> None:
    module = "tests.io.test_memory"
    for line in [
        "from tests.io.test_round_trips import rollout_with",
        "import tests.io.test_round_trips",
        "from tests.io import test_round_trips",
        "from .test_round_trips import rollout_with",
        "from ..io.test_round_trips import rollout_with",
        "def f():\n    from tests.io.test_round_trips import rollout_with",
        "from tests.io.test_round_trips import KINDS\nimport tests.io.test_round_trips as t",
    ]:
        assert imported_test_modules(line, module) == ["tests.io.test_round_trips"], line
    for line in [
        "from tests.io.helpers import rollout_with",
        "from tests.io import helpers",
        "from tests.mutation_report import UNDER_MUTMUT",
        "from tests.io.test_memory import x",  # itself
        "from trajkit.testing import example_rollout",
        "if __name__ == '__main__':\n    from tests.io.test_round_trips import KINDS",
    ]:
        assert imported_test_modules(line, module) == [], line


def test_no_test_module_imports_another() -> None:
    coupled = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted(TESTS.rglob("*.py"))  # test modules, helpers, conftest.py
        if "typing_cases" not in path.parts
        for name in imported_test_modules(
            path.read_text(encoding="utf-8"),
            ".".join(path.relative_to(ROOT).with_suffix("").parts),
        )
    ]
    assert not coupled, (
        f"{coupled}: a test module imported by another runs its module-level code twice, and "
        "renaming it breaks the other; move what they share into the folder's helpers.py"
    )
