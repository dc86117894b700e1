"""Helpers shared by the subcommands: progress bars, JSON output, text for the terminal."""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

import orjson


class Progress:
    """A minimal progress bar, drawn only when the stream is a terminal.

    Parameters
    ----------
    total
        Number of steps expected, or ``None`` when unknown.
    label
        Text printed before the bar.
    stream
        Where to draw; defaults to standard error.
    """

    def __init__(self, total: int | None, label: str = "", stream: TextIO | None = None) -> None:
        self.total = total
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.count = 0
        self._last = 0.0
        self._start = time.monotonic()

    def update(self, n: int = 1) -> None:
        self.count += n
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.1 and (self.total is None or self.count < self.total):
            return
        self._last = now
        rate = self.count / max(now - self._start, 1e-9)
        if self.total:
            frac = min(self.count / self.total, 1.0)
            width = 30
            bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
            text = f"\r{self.label} [{bar}] {self.count}/{self.total} ({rate:,.0f}/s)"
        else:
            text = f"\r{self.label} {self.count} ({rate:,.0f}/s)"
        self.stream.write(text)
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


#: why a default path into ``data/`` is missing: an installed package has no data (the
#: errors said "run from the repository root", or named a file inside site-packages)
NO_BUNDLED_DATA = "the bundled data/ is in a source checkout of sift only, not in the installed package"


def int_at_least(low: int) -> Callable[[str], int]:
    """An argparse type: an integer >= ``low``."""
    what = "a positive integer" if low == 1 else f"an integer >= {low}"

    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            n = None
        if n is None or n < low:
            shown = repr(value) if n is None else n
            raise argparse.ArgumentTypeError(f"must be {what}, got {shown}")
        return n

    return parse


def refuse_unused(args: argparse.Namespace, dests: Iterable[str], reason: str) -> None:
    """Refuse options given (not at their defaults) that the chosen mode would ignore
    without a word: ``ConfigError("--chunk <reason>")``. The command's parser is
    ``args.parser`` (set with ``set_defaults(parser=p)``)."""
    from sift.errors import ConfigError

    parser: argparse.ArgumentParser = args.parser
    for dest in dests:
        if getattr(args, dest) != parser.get_default(dest):
            raise ConfigError(f"--{dest.replace('_', '-')} {reason}")


def _nonnegative(value: str, noun: str) -> float:
    """``value`` as a finite float >= 0, else an argparse error calling it ``noun``."""
    try:
        x = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {noun}, got {value!r}") from None
    if not (math.isfinite(x) and x >= 0):
        raise argparse.ArgumentTypeError(f"must be {noun} >= 0, got {value!r}")
    return x


def nonnegative_float(value: str) -> float:
    """An argparse type: a finite number >= 0."""
    return _nonnegative(value, "a finite number")


#: a seed, say
nonnegative_int = int_at_least(0)
#: a count, a limit
positive_int = int_at_least(1)


def nonnegative_seconds(value: str) -> float:
    """An argparse type: a finite number of seconds >= 0."""
    return _nonnegative(value, "a number of seconds")


def positive_seconds(value: str) -> float:
    """An argparse type: a finite number of seconds > 0."""
    try:
        x = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {value!r}") from None
    if not (math.isfinite(x) and x > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds > 0, got {value!r}")
    return x


def check_out_dir(out: Path, option: str = "--out") -> None:
    """Refuse, before any work, an output folder that cannot be one: a file, a path under a
    file, or a folder that cannot be written (nothing is created here). ``sift replay`` and
    ``sift nominate`` found out only when writing, after the whole run, with a raw
    ``[Errno 20] Not a directory`` (forty-fifth session)."""
    from sift.errors import ConfigError

    if out.exists():
        if not out.is_dir():
            raise ConfigError(f"{option} {out}: exists and is not a folder")
        if not os.access(out, os.W_OK | os.X_OK):
            raise ConfigError(f"{option} {out}: the folder is not writable")
        return
    parent = out.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"{option} {out}: {parent} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"{option} {out}: cannot be created ({parent} is not writable)")


def check_out_file(out: Path, option: str = "--out") -> None:
    """Refuse, before any work, an output file that cannot be written: a folder, a path
    under a file, or one in a folder that cannot be written (nothing is created here).
    ``sift demo`` found out only when writing its result, after the whole run."""
    from sift.errors import ConfigError

    if out.is_dir():
        raise ConfigError(f"{option} {out}: is a folder, not a file")
    if out.exists():
        if not os.access(out, os.W_OK):
            raise ConfigError(f"{option} {out}: the file is not writable")
        return
    check_out_dir(out.parent, option=f"{option} {out}: its folder")


def write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as indented JSON (numpy scalars and arrays allowed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(
        orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)
    )


def broker_option(group: argparse.ArgumentParser,
                  verbs: list[argparse.ArgumentParser]) -> None:
    """``--broker`` before the verb (``sift profiles --broker URL list``) and after it
    (``sift profiles list --broker URL``): the verb's copy sets it only when given."""
    helptext = "broker URL (default: SIFT_BROKER)"
    group.add_argument("--broker", help=helptext)
    for verb in verbs:
        verb.add_argument("--broker", default=argparse.SUPPRESS, help=helptext)


def printable(text: str) -> str:
    """``text`` for the terminal: each character that is not printable (control characters
    such as newline and ESC, DEL, format characters such as U+202E) as its ``repr``
    escape, the rest as it is. Names come from whoever can publish a spec: raw, they broke
    the table (a newline) or reached the terminal as escape sequences (forty-fourth
    session)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def json_line(obj: Any) -> str:
    """``obj`` as one JSON line with every character that is not printable escaped as
    ``\\uXXXX`` (orjson leaves DEL, the C1 controls and format characters raw): the same
    JSON for a program, nothing a terminal acts on."""
    text = orjson.dumps(obj).decode()
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _json_escape(c) for c in text)


def _json_escape(c: str) -> str:
    n = ord(c)
    if n < 0x10000:
        return f"\\u{n:04x}"
    n -= 0x10000
    return f"\\u{0xD800 + (n >> 10):04x}\\u{0xDC00 + (n & 0x3FF):04x}"
