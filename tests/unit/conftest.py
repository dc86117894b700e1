"""Fixtures shared by the unit tests."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator

import pytest


@pytest.fixture
def root_handlers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The root logger's handlers and level as they were before the test (tests that set
    up logging as a worker does add handlers of their own)."""
    from mode.utils import logging as mode_logging

    # mode's colour formatter asks the standard output it found at its import whether it
    # is a terminal: pytest's capture of an earlier test, closed since
    monkeypatch.setitem(mode_logging.DEFAULT_FORMATTERS["colored"], "stream", sys.stdout)
    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        root.removeHandler(h)
        if h not in saved:
            h.close()
    for h in saved:
        root.addHandler(h)
    root.setLevel(level)
