"""The CLI reference page, written from the argument parser itself so that it cannot drift.

`docs/plugins/cli_reference.py` (a MkDocs hook) puts `cli_reference()` into
`docs/reference/cli.md` at build time; `trajkit COMMAND --help` prints from the same parser.
"""

from __future__ import annotations

import argparse

from trajkit._cli.parser import build_parser

__all__ = ["cli_reference"]

_WIDTH = 88  # usage lines are wrapped as on an 88-column terminal


def _formatter(parser: argparse.ArgumentParser) -> argparse.HelpFormatter:
    return argparse.HelpFormatter(parser.prog, width=_WIDTH)


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = _formatter(parser)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _cell(text: str) -> str:
    text = " ".join(text.split())
    for char in "\\|*_<":  # Markdown would read these as markup
        text = text.replace(char, "\\" + char)
    return text.replace("{", "&#123;").replace("}", "&#125;")  # not attr_list attributes


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    formatter = _formatter(parser)
    rows = ["| Argument | Description |", "| --- | --- |"]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        invocation = formatter._format_action_invocation(action)
        if not action.option_strings and action.nargs in ("+", "*"):
            invocation += " ..."
        help_text = (action.help or "") % {"default": action.default, "prog": parser.prog}
        if action.required and action.option_strings:
            help_text += " (required)"
        rows.append(f"| `{invocation}` | {_cell(help_text)} |")
    return rows


def _commands(parser: argparse.ArgumentParser) -> dict[str, tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            return {name: (helps.get(name, ""), sub) for name, sub in action.choices.items()}
    return {}  # pragma: no cover - the trajkit parser has commands


def cli_reference(heading_level: int = 2) -> str:
    """Return Markdown for every `trajkit` command: usage, description and arguments.

    Args:
        heading_level: The Markdown heading level of each command's section.

    Returns:
        The Markdown text.
    """
    parser = build_parser()
    hashes = "#" * heading_level
    lines = [
        f"{_cell(parser.description or '')} {_cell(parser.epilog or '')}",
        "",
        "```text",
        _usage(parser),
        "```",
        "",
    ]
    for name, (summary, sub) in _commands(parser).items():
        lines += [f"{hashes} trajkit {name}", "", f"{_cell(summary[:1].upper() + summary[1:])}."]
        lines += ["", "```text", _usage(sub), "```", "", _cell(sub.description or ""), ""]
        lines += [*_arguments(sub), ""]
    return "\n".join(lines)
