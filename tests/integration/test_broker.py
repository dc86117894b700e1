"""The broker under test works end to end with kafka-python and aiokafka, and survives a restart."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaTimeoutError

from sift.devbroker import DevBroker, admin_ready, bootstrap_servers, port_open

pytestmark = pytest.mark.integration

N = 5000


def produce(bootstrap: str, topic: str, n: int, *, start: int = 0) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    try:
        for i in range(start, start + n):
            producer.send(topic, key=str(i % 17).encode(), value=f"m{i}".encode())
        producer.flush(timeout=60)
    finally:
        producer.close()


def consume_all(bootstrap: str, topic: str, n: int, *, timeout: float = 60.0) -> list[bytes]:
    """Read ``topic`` from the beginning (no group) until ``n`` messages or the time runs out."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        partitions = consumer.partitions_for_topic(topic) or set()
        consumer.assign([TopicPartition(topic, p) for p in sorted(partitions)])
        consumer.seek_to_beginning()
        got: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(got) < n and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
        return got
    finally:
        consumer.close()


def test_bootstrap_servers_parsing() -> None:
    assert bootstrap_servers("kafka://127.0.0.1:9092") == "127.0.0.1:9092"
    assert bootstrap_servers("kafka://a:1;kafka://b:2") == "a:1,b:2"
    assert bootstrap_servers("a:1,b:2") == "a:1,b:2"


def test_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    """``kafka-storage format -t -x...`` takes such an id for an option (seen: a broker
    start failing with "argument --cluster-id/-t: expected one argument")."""
    import uuid

    from sift import devbroker

    dash = uuid.UUID(bytes=bytes([0xF8]) + bytes(15))  # base64 of 0xF8... starts with "-"
    plain = uuid.UUID(bytes=bytes(16))
    ids = iter([dash, dash, plain])
    monkeypatch.setattr(devbroker.uuid, "uuid4", lambda: next(ids))
    assert devbroker._cluster_id() == "AAAAAAAAAAAAAAAAAAAAAA"


def test_broker_config_is_kraft_single_node(tmp_path: Path) -> None:
    props = DevBroker(port=29100, controller_port=29101, data_dir=tmp_path).properties()
    assert props["process.roles"] == "broker,controller"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:29100,CONTROLLER://127.0.0.1:29101"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:29101"
    assert props["offsets.topic.replication.factor"] == "1"
    assert props["group.initial.rebalance.delay.ms"] == "0"


def test_kafka_python_roundtrip(bootstrap: str, make_topics: Callable[..., list[str]]) -> None:
    (topic,) = make_topics("roundtrip", partitions=3)
    produce(bootstrap, topic, N)
    got = consume_all(bootstrap, topic, N)
    assert len(got) == N
    assert set(got) == {f"m{i}".encode() for i in range(N)}


def test_consumer_group_commits(bootstrap: str, make_topics: Callable[..., list[str]],
                                topic_prefix: str) -> None:
    (topic,) = make_topics("group", partitions=2)
    produce(bootstrap, topic, 100)
    group = f"{topic_prefix}group"

    def read(limit: float) -> int:
        consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                 auto_offset_reset="earliest", enable_auto_commit=False)
        try:
            count = 0
            deadline = time.monotonic() + limit
            while time.monotonic() < deadline and count < 100:
                for records in consumer.poll(timeout_ms=500).values():
                    count += len(records)
            consumer.commit()
            return count
        finally:
            consumer.close()

    assert read(30.0) == 100
    assert read(3.0) == 0  # the group's committed offsets are at the end


def test_aiokafka_roundtrip(bootstrap: str, make_topics: Callable[..., list[str]]) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    (topic,) = make_topics("aio", partitions=3)

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        await producer.start()
        try:
            futures = [await producer.send(topic, f"a{i}".encode()) for i in range(N)]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(60):
                while len(got) < N:
                    batches = await consumer.getmany(timeout_ms=500)
                    for records in batches.values():
                        got.extend(r.value for r in records if r.value is not None)
        finally:
            await consumer.stop()
        return got

    got = asyncio.run(run())
    assert len(got) == N
    assert set(got) == {f"a{i}".encode() for i in range(N)}


def test_topics_are_not_auto_created(kafka_broker: DevBroker | None, bootstrap: str,
                                     topic_prefix: str) -> None:
    if kafka_broker is None:
        pytest.skip("SIFT_BROKER names an outside broker whose settings are not ours")
    producer = KafkaProducer(bootstrap_servers=bootstrap, max_block_ms=2000)
    try:
        with pytest.raises(KafkaTimeoutError):
            producer.send(f"{topic_prefix}missing", b"x").get(timeout=5)
    finally:
        producer.close(timeout=2)


def test_stop_restart_keeps_messages(private_broker: DevBroker, topic_prefix: str,
                                     create_topics: Callable[..., list[str]]) -> None:
    broker = private_broker
    pid = broker.pid()
    assert broker.start().pid() == pid  # already running: start() keeps the same process
    status = broker.status()
    assert status["running"] and status["ready"] and status["pid"] == pid

    topic = f"{topic_prefix}durable"
    create_topics(broker.bootstrap, [topic], partitions=2)
    produce(broker.bootstrap, topic, 1000)

    assert broker.stop() is True
    assert broker.stop() is False  # already stopped
    assert broker.status()["running"] is False
    assert not port_open(broker.port)
    assert not admin_ready(broker.bootstrap, timeout=1.0)

    broker.restart()  # same ports, same data dir
    assert broker.pid() not in (None, pid)
    produce(broker.bootstrap, topic, 500, start=1000)
    got = consume_all(broker.bootstrap, topic, 1500)
    assert len(got) == 1500
    assert set(got) == {f"m{i}".encode() for i in range(1500)}


def test_read_offsets_reads_back_exactly_the_ranges(broker_url: str, bootstrap: str,
                                                    make_topics: Callable[..., list[str]]) -> None:
    """What a worker uses to fetch the messages its stream consumer skipped."""
    from sift.kafkaclient import KafkaClientError, read_offsets
    from sift.settings import Settings

    (topic,) = make_topics("readback", partitions=2)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(6):
        for p in (0, 1):
            producer.send(topic, key=f"k{i}".encode(), value=f"v{p}-{i}".encode(), partition=p)
    producer.flush()
    producer.close()
    got = read_offsets(Settings(broker=broker_url), [(topic, 0, 2, 5), (topic, 1, 5, 6)])
    assert got == [(topic, 0, o, f"k{o}".encode(), f"v0-{o}".encode()) for o in (2, 3, 4)] + [
        (topic, 1, 5, b"k5", b"v1-5")]
    assert read_offsets(Settings(broker=broker_url), [(topic, 0, 3, 3)]) == []
    # a range not read to its end in time is an error, never a short answer (a missing
    # offset in the answer means the log does not hold it)
    with pytest.raises(KafkaClientError, match="not read to the end"):
        read_offsets(Settings(broker=broker_url), [(topic, 1, 4, 9)], timeout=2.0)


def test_start_offsets_are_the_groups_commit_or_the_log_start(
        broker_url: str, bootstrap: str, make_topics: Callable[..., list[str]]) -> None:
    """Where a worker group starts on a partition: its committed offset, else the first
    offset still in the log (a worker expects its first message there and reads back a
    head its stream consumer dropped)."""
    from kafka import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata

    from sift.kafkaclient import start_offsets
    from sift.settings import Settings

    (topic,) = make_topics("starts", partitions=3)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(4):
        for p in (0, 1, 2):
            producer.send(topic, value=f"v{p}-{i}".encode(), partition=p)
    producer.flush()
    producer.close()
    group = f"starts-{time.monotonic_ns()}"
    committer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                              enable_auto_commit=False)
    committer.assign([TopicPartition(topic, 0)])
    committer.commit({TopicPartition(topic, 0): OffsetAndMetadata(3, "", -1)})
    committer.close()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.delete_records({TopicPartition(topic, 1): 2})  # retention, as it were
    admin.close()
    got = start_offsets(Settings(broker=broker_url, app_id=group),
                        [(topic, 0), (topic, 1), (topic, 2), (topic, 0)])
    assert got == {(topic, 0): 3, (topic, 1): 2, (topic, 2): 0}
    assert start_offsets(Settings(broker=broker_url, app_id=group), []) == {}
