"""Reliability tests: the broker fixtures of ``tests/integration`` (re-exported; kafka-python's
deprecation noise is silenced for every directory in ``pyproject.toml``).

Tests that need a broker take ``broker_url`` or ``private_broker`` and are marked
``integration`` (and ``slow`` when long); the rest run without Kafka.
"""

from __future__ import annotations

from tests.integration.conftest import (  # noqa: F401  (fixtures)
    bootstrap,
    broker_url,
    kafka_broker,
    make_topics,
    private_broker,
    topic_prefix,
)
