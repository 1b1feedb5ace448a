"""The docs site: reference coverage, docstring examples, and the pages' Python blocks.

`mkdocs build --strict` itself runs in `make docs`, not here. These tests check what the build
cannot: that every public name has a reference entry, that every public function and class shows
an example, and that the ```python blocks of the pages run.

Convention for the pages (documented in docs/screenshots.md): every ```python block runs, the
blocks of one page in order, in one namespace, in a temporary working directory. A block that
must not run uses another info string (```pycon, ```console, ```text), or is preceded by the
line `<!-- docs-test: skip -->`. A ```text block preceded by the line
`<!-- docs-test: output -->` shows what the python blocks since the previous such block print,
and must equal it. README.md's blocks follow the same convention.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import subprocess
import sys
import textwrap
import types
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pydantic
import pytest

import trajkit
import trajkit.cli
import trajkit.dataset
import trajkit.gym
import trajkit.lint
import trajkit.plot
import trajkit.ray
import trajkit.sb3
import trajkit.testing
import trajkit.torch

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference"
SKIP_MARKER = "<!-- docs-test: skip -->"
OUTPUT_MARKER = "<!-- docs-test: output -->"

# `::: identifier` at the start of a line, as mkdocstrings reads it.
_DIRECTIVE = re.compile(r"^:::\s+(?P<identifier>[\w.]+)\s*$", re.MULTILINE)
# An opening fence: indentation, three or more backticks or tildes, then the info string.
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


def _optional_module(name: str) -> types.ModuleType | None:
    """Import `name`, or return None if it (or a dependency it needs) is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing = getattr(exc, "name", None) or ""
        if missing == name or not missing.startswith("trajkit"):
            return None
        raise


# --------------------------------------------------------------------------- reference entries


def reference_entries() -> dict[str, set[str]]:
    """Page name (e.g. `models.md`) to the identifiers of its `::: ...` entries."""
    return {
        page.name: set(_DIRECTIVE.findall(page.read_text(encoding="utf-8")))
        for page in sorted(REFERENCE.glob("*.md"))
    }


def test_reference_pages_exist() -> None:
    pages = set(reference_entries())
    assert {"models.md", "core.md", "files.md", "cli.md", "testing.md", "gym.md"} <= pages


def test_every_public_name_has_a_reference_entry() -> None:
    documented = set().union(*reference_entries().values())
    missing = [name for name in trajkit.__all__ if f"trajkit.{name}" not in documented]
    assert not missing, f"add `::: trajkit.<name>` to a page of docs/reference/ for {missing}"


def test_every_testing_name_is_on_the_testing_page() -> None:
    entries = reference_entries()["testing.md"]
    missing = [n for n in trajkit.testing.__all__ if f"trajkit.testing.{n}" not in entries]
    assert not missing, f"add `::: trajkit.testing.<name>` to docs/reference/testing.md: {missing}"


def test_every_gym_name_is_on_the_gym_page() -> None:
    gym = _optional_module("trajkit.gym")
    if gym is None:
        pytest.skip("trajkit.gym (or gymnasium) is not installed")
    entries = reference_entries()["gym.md"]
    missing = [n for n in gym.__all__ if f"trajkit.gym.{n}" not in entries]
    assert not missing, f"add `::: trajkit.gym.<name>` to docs/reference/gym.md: {missing}"


@pytest.mark.parametrize(
    "name", ["torch", "plot", "arrow", "minari", "dataset", "ray", "lint", "report", "sb3"]
)
def test_every_integration_name_is_on_its_page(name: str) -> None:
    module = importlib.import_module(f"trajkit.{name}")
    entries = reference_entries()[f"{name}.md"]
    missing = [n for n in module.__all__ if f"trajkit.{name}.{n}" not in entries]
    assert not missing, f"add `::: trajkit.{name}.<name>` to docs/reference/{name}.md: {missing}"


def test_the_cli_entry_point_is_on_the_cli_page() -> None:
    cli = _optional_module("trajkit.cli")
    if cli is None:
        pytest.skip("trajkit.cli does not exist yet")
    assert "trajkit.cli.main" in reference_entries()["cli.md"]


def test_reference_entries_name_existing_objects() -> None:
    # mkdocs build --strict reports these too; this names the page and is much faster.
    for page, identifiers in reference_entries().items():
        for identifier in identifiers:
            module_name, _, attribute = identifier.rpartition(".")
            if _optional_module(identifier) is not None:
                continue
            module = _optional_module(module_name)
            if module is None and module_name.startswith("trajkit.gym"):
                continue  # gymnasium not installed: the gym page cannot be checked
            assert module is not None, f"{page}: no module {module_name!r} for {identifier!r}"
            with warnings.catch_warnings():  # a deprecated name warns when it is looked up
                warnings.simplefilter("ignore", DeprecationWarning)
                assert hasattr(module, attribute), f"{page}: {identifier!r} does not exist"


# ------------------------------------------------------------------------ docstring examples


def _public_callables() -> Iterator[tuple[str, Any]]:
    """Every public function and class, and every public method and property of those classes.

    Public means listed in the `__all__` of `trajkit`, `trajkit.testing`, `trajkit.gym`,
    `trajkit.cli`, `trajkit.torch`, `trajkit.plot`, `trajkit.dataset`, `trajkit.ray` or
    `trajkit.lint`.
    Members inherited from pydantic's `BaseModel` are pydantic's to document.
    """
    modules = (
        trajkit,
        trajkit.testing,
        trajkit.gym,
        trajkit.cli,
        trajkit.torch,
        trajkit.plot,
        trajkit.dataset,
        trajkit.ray,
        trajkit.lint,
        trajkit.sb3,
    )
    for module in modules:
        for name in module.__all__:
            obj = getattr(module, name)
            if getattr(obj, "__origin__", None) is not None:
                continue  # a type alias such as `Callable[..., ...]` (a "class" on Python 3.10)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            qualname = f"{module.__name__}.{name}"
            yield qualname, obj
            if not inspect.isclass(obj):
                continue
            # Members of trajkit's own bases too (Rollout's methods live in mixins).
            own = [klass for klass in obj.__mro__ if klass.__module__.startswith("trajkit")]
            members = {attr: m for klass in reversed(own) for attr, m in vars(klass).items()}
            for attr, member in members.items():
                if attr.startswith("_") or (
                    attr.startswith("model_") and hasattr(pydantic.BaseModel, attr)
                ):
                    continue  # private, or pydantic's API (some versions add it to the class)
                if isinstance(member, property):
                    yield f"{qualname}.{attr}", member.fget
                elif isinstance(member, classmethod | staticmethod):
                    yield f"{qualname}.{attr}", member.__func__
                elif inspect.isfunction(member):
                    yield f"{qualname}.{attr}", member


PUBLIC_CALLABLES = dict(_public_callables())


def test_the_docstring_check_sees_the_api() -> None:
    assert {"trajkit.Rollout", "trajkit.gae", "trajkit.testing.rollouts"} <= set(PUBLIC_CALLABLES)
    assert {"trajkit.Rollout.advantages", "trajkit.Rollout.replace"} <= set(PUBLIC_CALLABLES)


@pytest.mark.parametrize("qualname", sorted(PUBLIC_CALLABLES))
def test_public_docstrings_have_an_example(qualname: str) -> None:
    doc = inspect.getdoc(PUBLIC_CALLABLES[qualname]) or ""
    assert doc, f"{qualname} has no docstring"
    assert re.search(r"^Examples:\s*$", doc, re.MULTILINE), f"{qualname}: no `Examples:` section"
    assert ">>>" in doc, f"{qualname}: the example has no `>>>` lines"


# ------------------------------------------------------------------- the pages' Python blocks


@dataclass(frozen=True)
class Block:
    """A fenced code block of a page."""

    page: Path
    line: int  # 1-based line of the first line of code
    info: str
    code: str
    skipped: bool
    output: bool = False  # a block showing what the python blocks before it print

    @property
    def runs(self) -> bool:
        return self.info.split()[:1] == ["python"] and not self.skipped


def code_blocks(page: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page, dedented to their fence's indentation."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    previous = ""  # the last non-blank line before the current one
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            if lines[i].strip():
                previous = lines[i].strip()
            i += 1
            continue
        indent, fence = match["indent"], match["fence"]
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        end = i + 1
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        assert end < len(lines), f"{page.name}:{i + 1}: unclosed code fence"
        body = [
            line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : end]
        ]
        blocks.append(
            Block(
                page=page,
                line=i + 2,
                info=match["info"].strip(),
                code=textwrap.dedent("\n".join(body)),
                skipped=previous == SKIP_MARKER,
                output=previous == OUTPUT_MARKER,
            )
        )
        previous = lines[i].strip()
        i = end + 1
    return blocks


PAGES = [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]
PAGES_WITH_CODE = [p for p in PAGES if any(b.runs for b in code_blocks(p))]


def _page_id(page: Path) -> str:
    return page.relative_to(DOCS).as_posix() if page.is_relative_to(DOCS) else page.name


def test_the_block_parser_finds_the_examples() -> None:
    names = {_page_id(p) for p in PAGES_WITH_CODE}
    assert {"concepts.md", "gae.md", "validation.md", "migration.md", "index.md"} <= names
    assert "README.md" in names


def test_the_block_parser_follows_the_convention(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Text.\n\n```python\nx = 1\n```\n\n```pycon\n>>> x\n```\n\n"
        f"{SKIP_MARKER}\n```python\nraise SystemExit\n```\n\n"
        "1. A step:\n\n    ```python\n    y = x + 1\n    ```\n\n"
        f"It prints:\n\n{OUTPUT_MARKER}\n```text\n2\n```\n",
        encoding="utf-8",
    )
    blocks = code_blocks(page)
    assert [(b.info, b.runs, b.output) for b in blocks] == [
        ("python", True, False),
        ("pycon", False, False),
        ("python", False, False),
        ("python", True, False),
        ("text", False, True),
    ]
    assert blocks[0].line == 4
    assert blocks[3].code == "y = x + 1"


@pytest.mark.parametrize("page", ["index.md", "../README.md"])
def test_the_quickstart_output_is_checked(page: str) -> None:
    # The home page and the README show the error a malformed rollout raises: the test below
    # compares it with the real one, so the shown message cannot drift from the code's.
    shown = [b for b in code_blocks(DOCS / page) if b.output]
    assert shown, f"{page}: no ```text block marked {OUTPUT_MARKER}"
    assert any("rews has shape" in b.code for b in shown)


@pytest.mark.parametrize("page", PAGES_WITH_CODE, ids=[_page_id(p) for p in PAGES_WITH_CODE])
def test_page_python_blocks_run(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": f"docs_{page.stem.replace('-', '_')}"}
    capsys.readouterr()
    printed = ""  # what the blocks printed since the last output block
    for block in code_blocks(page):
        if block.output:
            where = f"{page.relative_to(ROOT)}:{block.line}"
            assert block.code.rstrip("\n") == printed.rstrip("\n"), (
                f"{where}: the page shows output the code above does not print"
            )
            printed = ""
            continue
        if not block.runs:
            continue
        # Pad with blank lines so that a traceback points at the line of the page.
        source = "\n" * (block.line - 1) + block.code
        code = compile(source, str(page.relative_to(ROOT)), "exec")
        exec(code, namespace)
        printed += capsys.readouterr().out


# ------------------------------------------------------------- types shown in the reference

_GRIFFE_EXTENSION = "docs/plugins/griffe_trajkit.py:TrajkitDocstrings"


def _documented_package() -> Any:
    """The package as the docs build sees it: griffe with the docs' extension applied."""
    griffe = pytest.importorskip("griffe", reason="griffe comes with the docs extra")
    assert _GRIFFE_EXTENSION in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    extensions = griffe.load_extensions(str(ROOT / _GRIFFE_EXTENSION))
    return griffe.load("trajkit", search_paths=[str(ROOT / "src")], extensions=extensions)


def test_the_reference_shows_the_read_type_of_rollout_fields() -> None:
    rollout = _documented_package()["Rollout"]
    shown = {name: str(rollout.members[name].annotation) for name in trajkit.Rollout.model_fields}
    assert shown == {
        "states": "ArrayTree",
        "obses": "ArrayTree",
        "rews": "Float32Array",
        "dones": "Float32Array",
        "infos": "InfoRows",
        "model_outs": "ModelOutputs",
        "truncated": "Float32Array | None",
        "final_values": "Float32Array | None",
        "final_obses": "ArrayTree | None",
    }


@pytest.mark.slow
def test_the_built_reference_names_no_private_field_type(tmp_path: Path) -> None:
    # `_Field[Get, Set]` is how type checkers see Rollout's fields; users see `Get`, in the
    # pages and in the search index (its previews).
    mkdocs = Path(sys.executable).parent / "mkdocs"
    if not mkdocs.exists():
        pytest.skip("mkdocs is not installed (it comes with the docs extra)")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    subprocess.run(
        [mkdocs, "build", "--strict", "--quiet", "-d", str(tmp_path)], cwd=ROOT, env=env, check=True
    )
    built = [*tmp_path.rglob("*.html"), tmp_path / "search" / "search_index.json"]
    leaks = [p.relative_to(tmp_path).as_posix() for p in built if "_Field" in p.read_text("utf-8")]
    assert not leaks, f"the private `_Field` type shows in {leaks}"
    models = (tmp_path / "reference" / "models.html").read_text(encoding="utf-8")
    assert "truncated: Float32Array | None" in re.sub(r"<[^>]+>", "", models)


# --------------------------------------------------------------------------------- install


@pytest.mark.parametrize("page", ["index.md", "../README.md"])
def test_the_install_section_gives_a_cpu_only_torch_route(page: str) -> None:
    # `pip install ".[torch]"` alone brings CUDA wheels (gigabytes); both install sections say
    # how to get the CPU-only build, before the extra.
    text = (DOCS / page).read_text(encoding="utf-8")
    install = text.split("## Install", 1)[1].split("\n## ", 1)[0]
    cpu = "pip install torch --index-url https://download.pytorch.org/whl/cpu"
    assert cpu in install
    assert install.index(cpu) < install.index('pip install "../trajkit[torch]"', install.index(cpu))


# ---------------------------------------------------------------------------- contributing


def test_contributing_names_files_and_names_that_exist() -> None:
    # CONTRIBUTING.md says where a change goes: the places it names must stay real.
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert "(CONTRIBUTING.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
    paths = set(re.findall(r"`((?:src|tests|docs|benchmarks|\.ci)/[^`<>*\s]+)`", text))
    named = {"src/trajkit/_models/rules.py", "tests/project/test_layers.py", "src/trajkit/_cli/"}
    assert named <= paths
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, f"CONTRIBUTING.md names missing paths: {missing}"
    from trajkit._models import rules

    for name in ("FIELD_RULES", "OUTPUT_RULES", "conform", "conform_into"):
        assert f"`{name}`" in text
        assert hasattr(rules, name), name
    layers = ROOT / "tests" / "project" / "test_layers.py"
    assert "INTEGRATIONS" in layers.read_text(encoding="utf-8")
