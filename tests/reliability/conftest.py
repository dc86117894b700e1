"""Reliability tests: the broker fixtures of ``tests/integration`` (re-exported), and
kafka-python's deprecation noise silenced as there.

Tests that need a broker take ``broker_url`` or ``private_broker`` and are marked
``integration`` (and ``slow`` when long); the rest run without Kafka.
"""

from __future__ import annotations

import pytest

from tests.integration.conftest import (  # noqa: F401  (fixtures)
    bootstrap,
    broker_url,
    kafka_broker,
    make_topics,
    private_broker,
    topic_prefix,
)


def pytest_configure(config: pytest.Config) -> None:
    # kafka-python 3.0 loads its protocol schemas with the deprecated importlib.resources API.
    for text in ("read_text is deprecated", "open_text is deprecated"):
        config.addinivalue_line("filterwarnings", f"ignore:{text}:DeprecationWarning")
