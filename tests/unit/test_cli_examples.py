"""Every example in the ``sift`` commands' help parses: a help text's example is the
first thing a user copies."""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Iterator

import pytest

from sift.cli import build_parser


def subparsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield name, sub
                yield from subparsers(sub)


def examples(epilog: str) -> Iterator[str]:
    """The command lines of an epilog: a line (with its continuations) that runs ``sift``,
    perhaps after environment assignments or at the end of a pipe."""
    text = re.sub(r"\\\n", " ", epilog)
    for line in text.splitlines():
        cmd = line.split("  #")[0].strip()
        if " | sift " in cmd:
            cmd = cmd[cmd.index(" | sift ") + 3:]
        cmd = re.sub(r"^([A-Z_]+=\S+\s+)+", "", cmd)
        if cmd.startswith("sift "):
            yield cmd


EXAMPLES = [(name, cmd) for name, sub in subparsers(build_parser())
            for cmd in examples(sub.epilog or "")]


def test_the_commands_have_examples() -> None:
    names = {name for name, _ in EXAMPLES}
    assert {"produce", "replay", "review", "screen", "tail", "profiles", "nominate"} <= names


@pytest.mark.parametrize(("name", "cmd"), EXAMPLES)
def test_an_example_parses(name: str, cmd: str) -> None:
    argv = shlex.split(cmd)
    assert argv[0] == "sift"
    try:
        build_parser().parse_args(argv[1:])
    except SystemExit as exc:  # pragma: no cover - the failure's message says which
        pytest.fail(f"`sift {name}` help example does not parse (exit {exc.code}): {cmd}")


def test_every_option_says_what_it_does() -> None:
    """Each option of each command has a help line: ``--seed SEED`` alone leaves the user
    guessing what is seeded and from what default."""
    bare = [f"sift {name} {action.option_strings[-1]}"
            for name, sub in subparsers(build_parser())
            for action in sub._actions
            if action.option_strings and not isinstance(action, argparse._HelpAction)
            and not action.help]
    assert bare == []
