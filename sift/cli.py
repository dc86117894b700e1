"""The ``sift`` command.

Every subcommand lives in its own module under :mod:`sift.commands` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` (a callable
taking the parsed namespace and returning an exit code). Modules are discovered
in name order, so adding a command never touches this file.

Every error a user can cause is reported as one line on standard error with exit
code 1; a traceback means a bug in sift.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence
from typing import NoReturn

from sift import __version__
from sift.errors import SiftError


class _Parser(argparse.ArgumentParser):
    """Usage errors are one line and exit code 1, like every other sift error."""

    def error(self, message: str) -> NoReturn:
        self.exit(1, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _CommandParser(_Parser):
    """A subcommand's parser (and its verbs'): an argument it does not know is reported
    by it, naming the subcommand and its help. argparse hands a subparser's leftovers up
    to the top-level parser, which said ``sift: error: unrecognized arguments: --limit 10
    (see sift --help)`` for ``sift replay --limit 10`` (forty-fifth session). Everything
    after a subcommand's name goes to its parser, so a leftover there is always its own."""

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None
                         ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="sift",
        description="Streaming adaptive document filter (Rocchio, Kantor, kNN, fusion + TROT).",
    )
    parser.add_argument("--version", action="version", version=f"sift {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_CommandParser)
    import sift.commands as commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"sift.commands.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


def _unusable(value: object) -> str | None:
    """Why an argument's value would fail only later, when written as JSON: a number
    past 64 bits, or text that is not UTF-8 (undecodable bytes in the command line)."""
    if isinstance(value, list | tuple):
        return next((p for p in map(_unusable, value) if p), None)
    if isinstance(value, int) and not isinstance(value, bool) and not -2**63 <= value < 2**63:
        return f"{value} is out of range"
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"'{value.encode('utf-8', 'backslashreplace').decode()}' is not valid UTF-8"
    return None


def _argument_name(parser: argparse.ArgumentParser, command: str, dest: str) -> str:
    """How the user wrote argument ``dest`` of ``command``: its longest option string
    (``--seed``), or its name for a positional one."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            for sub in action.choices[command]._actions:
                if sub.dest == dest:
                    return max(sub.option_strings, key=len) if sub.option_strings else dest
    return dest


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 1
    for key, value in vars(args).items():
        problem = _unusable(value)
        if problem:  # a usage error: exit 1, named as argparse names the argument
            print(f"sift {args.command}: error: argument {_argument_name(parser, args.command, key)}: "
                  f"{problem} (see sift {args.command} --help)", file=sys.stderr)
            return 1
    try:
        return int(func(args) or 0)
    except SiftError as exc:
        print(f"sift {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:
        print(f"sift {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"sift {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
