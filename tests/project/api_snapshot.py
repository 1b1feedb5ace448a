"""The public API as text: every public name and signature, and every CLI option.

`tests/project/test_public_api.py` compares `render()` with the checked-in
`tests/project/public_api.txt`; a difference fails the suite until the snapshot and
`CHANGELOG.md` are updated together. Regenerate the snapshot with `make api-snapshot`
(`python tests/project/api_snapshot.py --write`).

The names are the `__all__` of `trajkit` and of each public submodule (`MODULES`), read with
griffe from the source of the trajkit that is imported (so the optional libraries are not
imported); a class lists its public attributes and methods, inherited ones from trajkit's own
classes included, and its `__init__`/`__call__`. The CLI part lists each command's options as
`trajkit.cli.build_parser` declares them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

import griffe

import trajkit
from trajkit._cli.parser import build_parser

MODULES = (
    "trajkit",
    "trajkit.arrow",
    "trajkit.cli",
    "trajkit.dataset",
    "trajkit.gym",
    "trajkit.lint",
    "trajkit.minari",
    "trajkit.plot",
    "trajkit.ray",
    "trajkit.report",
    "trajkit.sb3",
    "trajkit.testing",
    "trajkit.torch",
)
"""The public modules whose `__all__` is the public API (add a new one here)."""

SNAPSHOT = Path(__file__).with_name("public_api.txt")
_SPECIAL = ("__init__", "__call__")


def _parameters(function: griffe.Function) -> str:
    """`function`'s parameters as Python writes them, with `/` and `*` where they belong."""
    parts: list[str] = []
    kinds = griffe.ParameterKind
    star_written = False
    previous = None
    for p in function.parameters:
        if previous is kinds.positional_only and p.kind is not kinds.positional_only:
            parts.append("/")
        if p.kind is kinds.keyword_only and not star_written:
            parts.append("*")
        star_written |= p.kind in (kinds.var_positional, kinds.keyword_only)
        prefix = {kinds.var_positional: "*", kinds.var_keyword: "**"}.get(p.kind, "")
        text = prefix + p.name
        if p.annotation is not None:
            text += f": {p.annotation}"
        if p.default is not None and not prefix:
            text += f" = {p.default}" if p.annotation is not None else f"={p.default}"
        parts.append(text)
        previous = p.kind
    if previous is kinds.positional_only:
        parts.append("/")
    return ", ".join(parts)


def _signature(name: str, function: griffe.Function) -> str:
    labels = sorted(function.labels & {"async", "classmethod", "staticmethod", "property"})
    head = f"{' '.join(f'@{label}' for label in labels)} " if labels else ""
    returns = f" -> {function.returns}" if function.returns is not None else ""
    return f"{head}def {name}({_parameters(function)}){returns}"


def _attribute(attribute: griffe.Attribute, *, value: bool) -> str:
    """`@property: int`, `Final = 5`: the labels, annotation and (for a module's) value."""
    labels = sorted(attribute.labels & {"property", "writable"})
    parts = [" ".join(f"@{label}" for label in labels)] if labels else []
    if attribute.annotation is not None:
        parts.append(str(attribute.annotation))
    if value and attribute.value is not None:
        parts.append(f"= {attribute.value}")
    return " ".join(parts) or "attribute"


def _public(name: str) -> bool:
    return not name.startswith("_") or name in _SPECIAL


def _own(member: griffe.Object | griffe.Alias) -> bool:
    """Declared in trajkit (not pydantic's or Python's machinery)."""
    return member.canonical_path.startswith("trajkit.")


def _class(path: str, cls: griffe.Class) -> Iterator[str]:
    bases = ", ".join(str(base) for base in cls.bases)
    yield f"{path}: class({bases})"
    for name, member in cls.all_members.items():
        if not _public(name) or name == "model_config":
            continue
        if isinstance(member, griffe.Alias):
            try:
                target = member.final_target
            except griffe.AliasResolutionError:
                yield f"{path}.{name}: alias of {member.target_path}"
                continue
        else:
            target = member
        if not _own(target):
            continue
        yield from _object(f"{path}.{name}", target, value=False)


def _object(path: str, obj: griffe.Object, *, value: bool = True) -> Iterator[str]:
    if isinstance(obj, griffe.Function):
        for overload in obj.overloads or ():
            yield f"{path}: @overload {_signature(obj.name, overload)}"
        yield f"{path}: {_signature(obj.name, obj)}"
    elif isinstance(obj, griffe.Class):
        yield from _class(path, obj)
    elif isinstance(obj, griffe.Attribute):
        yield f"{path}: {_attribute(obj, value=value)}"
    else:
        yield f"{path}: {obj.kind.value}"


def api_lines() -> Iterator[str]:
    """One line per public name, method, attribute and overload, module by module."""
    search = Path(trajkit.__file__).resolve().parents[1]
    package = griffe.load("trajkit", search_paths=[search], resolve_aliases=True)
    for module_path in MODULES:
        module = package if module_path == "trajkit" else package[module_path.split(".", 1)[1]]
        exports = module.exports
        if exports is None:
            raise ValueError(f"{module_path}: no literal __all__ for griffe to read")
        for name in exports:
            member = module[str(name)]
            try:
                target = member.final_target if isinstance(member, griffe.Alias) else member
            except griffe.AliasResolutionError:  # a name re-exported from another library
                yield f"{module_path}.{name}: alias of {member.target_path}"
                continue
            yield from _object(f"{module_path}.{name}", target)


def _actions(parser: argparse.ArgumentParser) -> Iterator[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
            continue
        name = ", ".join(action.option_strings) or action.dest
        nargs = "" if action.nargs is None else f" nargs={action.nargs}"
        metavar = "" if action.metavar is None else f" {action.metavar}"
        choices = "" if action.choices is None else f" choices={sorted(action.choices)}"
        required = " required" if action.required and action.option_strings else ""
        plain = action.default not in (None, False, argparse.SUPPRESS)
        default = f" default={action.default!r}" if plain else ""
        yield f"{name}{metavar}{nargs}{choices}{required}{default}"


def cli_lines() -> Iterator[str]:
    """Each `trajkit` command and its arguments and options."""
    parser = build_parser()
    for option in _actions(parser):
        yield f"trajkit {option}"
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command, sub in action.choices.items():
                yield f"trajkit {command}"
                for option in _actions(sub):
                    yield f"trajkit {command} {option}"


def render() -> str:
    """The snapshot's text."""
    header = (
        "# trajkit's public API: generated by `make api-snapshot`"
        " (tests/project/api_snapshot.py).\n"
        "# A change here is a change of the API: update CHANGELOG.md in the same commit.\n"
    )
    return header + "\n".join([*api_lines(), *cli_lines()]) + "\n"


def breaking_changes(ref: str) -> list[str]:
    """griffe's list of breaking changes of `src/trajkit` since the git `ref` (a tag: `v0.1.0`)."""
    root = SNAPSHOT.parents[2]
    old = griffe.load_git("trajkit", ref=ref, repo=root, search_paths=["src"])
    new = griffe.load("trajkit", search_paths=[root / "src"])
    return [breakage.explain() for breakage in griffe.find_breaking_changes(old, new)]


def main(argv: list[str] | None = None) -> int:
    """Print the snapshot, or write it (`--write`), or list breaking changes (`--against`)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {SNAPSHOT.name}")
    parser.add_argument(
        "--against", metavar="REF", help="list breaking changes since a git tag (griffe check)"
    )
    args = parser.parse_args(argv)
    if args.against:
        changes = breaking_changes(args.against)
        print("\n".join(changes) or f"no breaking change since {args.against}")
        return 1 if changes else 0
    text = render()
    if args.write:
        SNAPSHOT.write_text(text, encoding="utf-8")
        print(f"wrote {SNAPSHOT} ({text.count(chr(10))} lines)")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
