"""Fixtures for tests against a real Kafka broker.

``broker_url`` is ``$SIFT_BROKER`` when set, else a broker this session starts itself
(:class:`sift.devbroker.DevBroker`, free ports, a temporary data dir) and stops at the
end. When no broker can be had the tests fail (one line naming the reason), in CI or
not: a run without its broker is not a green run. The only opt-out is explicit:
``SIFT_ALLOW_NO_BROKER=1`` skips them instead (or deselect them with
``-m "not integration"``).

Every test under ``tests/integration`` gets the ``integration`` marker. Topic names
should start with the per-test ``topic_prefix`` so that tests never share topics.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import NoReturn

import orjson
import pytest

from sift.devbroker import BrokerError, DevBroker, admin_ready, bootstrap_servers, free_port
from sift.settings import Settings

HERE = Path(__file__).resolve().parent


#: Set to 1 to skip, not fail, the tests whose broker cannot be had.
ALLOW_NO_BROKER = "SIFT_ALLOW_NO_BROKER"


def unavailable(reason: str) -> NoReturn:
    """Fail (skip only with ``SIFT_ALLOW_NO_BROKER=1``) because the broker the test needs
    is missing."""
    reason = " ".join(reason.split())  # one line
    if os.environ.get(ALLOW_NO_BROKER, "").strip() == "1":
        pytest.skip(f"Kafka broker unavailable ({ALLOW_NO_BROKER}=1): {reason}")
    pytest.fail(f"Kafka broker unavailable: {reason} (set {ALLOW_NO_BROKER}=1 to skip instead)",
                pytrace=False)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.integration)


def new_broker(data_dir: Path) -> DevBroker:
    """A (not yet started) local broker on free ports, killed if the test process dies."""
    port = free_port()
    controller = free_port()
    while controller == port:
        controller = free_port()
    return DevBroker(port=port, controller_port=controller, data_dir=data_dir,
                     die_with_parent=True)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevBroker | None]:
    """The broker this session started, or None when ``SIFT_BROKER`` names an outside one."""
    url = os.environ.get("SIFT_BROKER", "").strip()
    if url:
        if not admin_ready(bootstrap_servers(url), timeout=10.0):
            unavailable(f"SIFT_BROKER={url} does not answer")
        yield None
        return
    broker = new_broker(tmp_path_factory.mktemp("kafka"))
    try:
        broker.start(timeout=120.0)
    except BrokerError as exc:
        unavailable(str(exc))
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def broker_url(kafka_broker: DevBroker | None) -> str:
    """``kafka://host:port`` of the broker under test (what ``SIFT_BROKER`` takes)."""
    if kafka_broker is None:
        return os.environ["SIFT_BROKER"].strip()
    return kafka_broker.url


@pytest.fixture(scope="session")
def bootstrap(broker_url: str) -> str:
    """``host:port[,host:port]`` for kafka-python and aiokafka."""
    return bootstrap_servers(broker_url)


@pytest.fixture
def private_broker(tmp_path: Path) -> Iterator[DevBroker]:
    """A broker of this test's own (started), for stop/restart/kill tests; stopped afterwards."""
    broker = new_broker(tmp_path / "kafka")
    try:
        broker.start(timeout=120.0)
    except BrokerError as exc:
        unavailable(str(exc))
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def topic_prefix() -> str:
    """A prefix unique to this test, such as ``t1a2b3c4d.``."""
    return f"t{uuid.uuid4().hex[:8]}."


def create_topics_on(
    bootstrap: str,
    names: Iterable[str],
    *,
    partitions: int = 1,
    configs: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> list[str]:
    """Create topics (replication factor 1) with kafka-python and wait until they are usable."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    wanted = list(names)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="sift-tests",
                             request_timeout_ms=int(timeout * 1000))
    try:
        new = [NewTopic(name, partitions, 1, topic_configs=dict(configs or {})) for name in wanted]
        with contextlib.suppress(TopicAlreadyExistsError):
            admin.create_topics(new, timeout_ms=int(timeout * 1000))
        deadline = time.monotonic() + timeout
        while True:
            described = {t["name"]: t for t in admin.describe_topics(wanted)}
            ready = all(
                name in described
                and not described[name].get("error_code")
                and len(described[name].get("partitions") or []) == partitions
                and all(p.get("leader_id", -1) >= 0 for p in described[name]["partitions"])
                for name in wanted
            )
            if ready:
                return wanted
            if time.monotonic() > deadline:
                raise TimeoutError(f"topics {wanted} not ready within {timeout:.0f}s")
            time.sleep(0.1)
    finally:
        admin.close()


@pytest.fixture
def make_topics(bootstrap: str, topic_prefix: str) -> Callable[..., list[str]]:
    """``make_topics("in", "out", partitions=4)`` creates ``<prefix>in`` and ``<prefix>out``."""

    def make(*names: str, partitions: int = 1, configs: dict[str, str] | None = None) -> list[str]:
        full = [f"{topic_prefix}{n}" for n in names]
        return create_topics_on(bootstrap, full, partitions=partitions, configs=configs)

    return make


@pytest.fixture
def create_topics() -> Callable[..., list[str]]:
    """``create_topics(bootstrap, names, partitions=1, configs=None)`` on any broker."""
    return create_topics_on


@pytest.fixture
def review_settings(broker_url: str, topic_prefix: str, tmp_path: Path) -> Settings:
    """Settings of one worker for review mode: fresh topics and group, and a tiny IDF
    corpus (a review vectorizes its own collection; the worker starts fast)."""
    corpus = tmp_path / "idf.jsonl.gz"
    with gzip.open(corpus, "wb") as fh:
        for i in range(20):
            fh.write(orjson.dumps({"id": f"c{i}", "text": f"word{i} text{i % 3}"}) + b"\n")
    return Settings(broker=broker_url, topic_prefix=topic_prefix,
                    app_id=f"sift-{uuid.uuid4().hex[:8]}", partitions=2,
                    data_dir=str(tmp_path / "w1"), idf_corpus=str(corpus), batch_timeout=0.05)

