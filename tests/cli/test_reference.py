"""The CLI reference page is written from the parser: every command and option is on it."""

from __future__ import annotations

import argparse
from pathlib import Path

from tests.project.helpers import load_hook
from trajkit._cli.parser import build_parser
from trajkit._cli.reference import cli_reference

ROOT = Path(__file__).parents[2]


def _commands() -> dict[str, argparse.ArgumentParser]:
    (action,) = (a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_command_and_option_is_documented() -> None:
    text = cli_reference()
    commands = _commands()
    assert {"validate", "info", "plot", "schema"} <= set(commands)
    for name, sub in commands.items():
        assert f"## trajkit {name}\n" in text
        assert f"usage: trajkit {name}" in text
        for action in sub._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}" in text or f", {option}" in text, (name, option)
            if not action.option_strings:
                assert f"`{action.metavar}" in text, (name, action.dest)


def test_every_argument_has_help() -> None:
    for name, sub in _commands().items():
        for action in sub._actions:
            assert action.help, f"trajkit {name}: {action.dest} has no help text"


def test_markdown_markup_in_help_is_escaped() -> None:
    assert "searched for \\*.npz" in cli_reference()
    assert "one object &#123;path, ok, problems&#125; per line" in cli_reference()


def test_the_docs_hook_puts_the_reference_on_the_cli_page() -> None:
    hook = load_hook("cli_reference")
    page = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    assert hook.MARKER in page
    rendered = hook.on_page_markdown(page, page=None)
    assert hook.MARKER not in rendered
    assert cli_reference() in rendered
    assert hook.on_page_markdown("# Other page", page=None) == "# Other page"
