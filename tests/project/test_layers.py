"""The layers import one way: _base <- _core <- _models <- _io <- integrations <- _cli.

The core knows nothing of pydantic or the models; no layer imports one above it. The
integrations with optional libraries (`trajkit.plot`, `trajkit.torch`, the `trajkit.gym`
package, ...) sit above the models and files and below the command line, which may call
them (lazily). An integration that is a package imports its own modules, and no other
integration.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "trajkit"
ORDER = ["_base", "_core", "_models", "_io", "_cli"]
# Public modules over optional libraries.
INTEGRATIONS = [
    "arrow",
    "dataset",
    "gym",
    "lint",
    "minari",
    "plot",
    "ray",
    "report",
    "sb3",
    "torch",
]
# The integrations that build on others: the SB3 callback lints and records like trajkit.gym;
# the report reads datasets, Parquet and Minari, and lints.
USES = {"sb3": ["gym", "lint"], "report": ["arrow", "dataset", "lint", "minari"]}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("layer", ORDER)
def test_layer_imports_only_layers_below(layer: str) -> None:
    allowed = {f"trajkit.{name}" for name in ORDER[: ORDER.index(layer) + 1]}
    if layer == "_cli":
        allowed |= {f"trajkit.{name}" for name in INTEGRATIONS}
    for path in sorted((SRC / layer).rglob("*.py")):
        for name in _imports(path):
            if name == "trajkit" or name.startswith("trajkit."):
                top = ".".join(name.split(".")[:2])
                assert top in allowed, f"{path.relative_to(SRC)} imports {name}"


@pytest.mark.parametrize("layer", ["_base", "_core"])
def test_lower_layers_do_not_import_pydantic(layer: str) -> None:
    for path in sorted((SRC / layer).rglob("*.py")):
        assert not any(n.split(".")[0] == "pydantic" for n in _imports(path)), path


def test_relative_imports_are_not_used() -> None:
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text())
        assert not any(
            isinstance(node, ast.ImportFrom) and node.level > 0 for node in ast.walk(tree)
        ), path


def _integration_files(module: str) -> list[Path]:
    """The files of integration `module`: `module.py`, or every file of the package `module/`."""
    single, package = SRC / f"{module}.py", SRC / module
    assert single.is_file() != package.is_dir(), f"{module} must be a module or a package"
    return [single] if single.is_file() else sorted(package.rglob("*.py"))


@pytest.mark.parametrize("module", INTEGRATIONS)
def test_integrations_import_only_the_layers_below_the_command_line(module: str) -> None:
    allowed = {f"trajkit.{name}" for name in [*ORDER[:-1], module, *USES.get(module, [])]}
    for path in _integration_files(module):
        for name in _imports(path):
            if name.startswith("trajkit."):
                top = ".".join(name.split(".")[:2])
                assert top in allowed, f"{path.relative_to(SRC)} imports {name}"


def test_optional_libraries_are_imported_lazily() -> None:
    code = (
        "import sys, trajkit, trajkit.cli, trajkit.dataset, trajkit.ray, trajkit.report\n"
        "print(sorted({'fsspec', 'ray', 'tqdm', 'pyarrow', 'zlib_ng', 'matplotlib', 'minari'}"
        " & set(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]"


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    """An import circle of `graph` (module -> the modules it imports), or None."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        for name in sorted(graph.get(module, ())):
            found = visit(name, [*path, module])
            if found:
                return found
        done.add(module)
        return None

    return next(filter(None, (visit(module, []) for module in sorted(graph))), None)


def _imported_modules(path: Path) -> set[str]:
    """`_imports` with `from package import module` as that module too."""
    names = _imports(path)
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("module", INTEGRATIONS)
def test_an_integration_has_no_import_circle(module: str) -> None:
    # Type-only imports count: a circle of them is two modules that need each other.
    names = {
        ".".join(("trajkit", *path.relative_to(SRC).with_suffix("").parts)).removesuffix(
            ".__init__"
        ): path
        for path in _integration_files(module)
    }
    graph = {name: (_imported_modules(path) & set(names)) - {name} for name, path in names.items()}
    assert _circle(graph) is None, " -> ".join(_circle(graph) or [])
