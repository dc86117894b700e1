"""Agent tests: plain-Python service tests and Faust test_context tests (no broker)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # kafka-python 3.0 loads its protocol schemas with the deprecated importlib.resources API.
    for text in ("read_text is deprecated", "open_text is deprecated"):
        config.addinivalue_line("filterwarnings", f"ignore:{text}:DeprecationWarning")
