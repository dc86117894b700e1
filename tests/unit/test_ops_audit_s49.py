"""The forty-ninth session's operational fixes: the clients and the command line.

A broker address that refuses connections is reported in seconds: kafka-python retried a
refused bootstrap connection until its 15 s bootstrap time-out, so ``sift profiles list``
with no broker running took about 17 s to say ``ECONNREFUSED (nothing listens there
...)``. Also the replication factor checked when every topic exists, and a table key that
is not UTF-8 in ``sift profiles list``.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from sift import kafkaclient
from sift.devbroker import free_port
from sift.kafkaclient import KafkaClientError
from sift.settings import Settings


@pytest.mark.parametrize("make", [kafkaclient.admin, kafkaclient.producer,
                                  lambda s: kafkaclient.consumer(s, "t")])
def test_a_refused_address_is_reported_after_the_patience_not_the_bootstrap_timeout(
        make: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafkaclient, "REFUSED_PATIENCE", 0.3)
    port = free_port()
    called: list[str] = []

    def never(*args: object, **kwargs: object) -> None:  # the client must not be built
        called.append("built")

    import kafka
    for name in ("KafkaProducer", "KafkaConsumer", "KafkaAdminClient"):
        monkeypatch.setattr(kafka, name, never)
    with pytest.raises(KafkaClientError) as info:
        make(Settings(broker=f"kafka://127.0.0.1:{port}"))  # type: ignore[operator]
    text = str(info.value)
    assert text.startswith(f"cannot connect to kafka://127.0.0.1:{port}: ")
    assert "ECONNREFUSED" in text and "nothing listens there" in text
    assert f"127.0.0.1:{port}" in text.split(": ", 1)[1]
    assert "\n" not in text and called == []


def test_a_listener_that_appears_within_the_patience_is_used(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A broker still starting (its port opening a moment later) is waited for."""
    port = free_port()
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)

    def open_later() -> None:
        time.sleep(0.3)
        server.bind(("127.0.0.1", port))
        server.listen(1)

    opener = threading.Thread(target=open_later)
    opener.start()
    try:
        assert kafkaclient.refused([f"127.0.0.1:{port}"], patience=5.0) is None
    finally:
        opener.join()
        server.close()


def test_only_refusals_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """An address that cannot be resolved, or one of several that answers, is left to
    kafka-python (which names the failure as before)."""
    port = free_port()
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        live = server.getsockname()[1]
        assert kafkaclient.refused([f"127.0.0.1:{port}", f"127.0.0.1:{live}"], patience=0.1) is None
    assert kafkaclient.refused(["no-such-host.invalid:9092"], patience=0.1) is None
    assert kafkaclient.refused([f"127.0.0.1:{port}"], patience=0.0) == (
        f"ECONNREFUSED from 127.0.0.1:{port}")


@pytest.mark.parametrize(("address", "expected"), [
    ("127.0.0.1:9092", ("127.0.0.1", 9092)), ("broker", ("broker", 9092)),
    ("[::1]:9093", ("::1", 9093)), ("::1", ("::1", 9092)),
])
def test_host_and_port(address: str, expected: tuple[str, int]) -> None:
    assert kafkaclient.host_port(address) == expected


def test_a_replication_factor_above_the_brokers_is_refused_when_every_topic_exists(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The check ran only when a topic was missing: a new ``SIFT_APP_ID`` on existing wire
    topics left Faust to create the tables' changelogs with more replicas than brokers."""
    class FakeAdmin:
        def list_topics(self) -> list[str]:
            return ["sift.documents"]

        def describe_cluster(self) -> dict[str, list[dict[str, int]]]:
            return {"brokers": [{"node_id": 0}]}

        def create_topics(self, new: list, timeout_ms: int) -> None:  # type: ignore[type-arg]
            raise AssertionError("nothing to create")

        def close(self) -> None:
            pass

    monkeypatch.setattr(kafkaclient, "admin", lambda settings, timeout=30.0: FakeAdmin())
    with pytest.raises(KafkaClientError, match=r"SIFT_REPLICATION_FACTOR is 3, more than the "
                                               r"cluster's 1 broker\(s\)"):
        kafkaclient.ensure_topics(Settings(broker="kafka://a:1", replication_factor=3),
                                  ["sift.documents"])
    kafkaclient.ensure_topics(Settings(broker="kafka://a:1", replication_factor=1),
                              ["sift.documents"])


def test_profiles_list_names_a_key_that_is_not_utf8_instead_of_failing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One table key that is not UTF-8 (no worker writes one; a foreign or damaged
    value) ended ``sift profiles list`` in a UnicodeDecodeError (forty-ninth session)."""
    from sift.commands import profiles

    table = profiles.changelog_topic(Settings())
    monkeypatch.setattr(kafkaclient, "partition_counts", lambda settings, names: {table: 4})
    monkeypatch.setattr(kafkaclient, "read_all", lambda settings, topic, **kw: (
        [(b"\xffbad", b"{not a record", 0, 0)] if topic == table else []))
    rows = profiles.list_profiles(Settings())
    assert rows == [{"profile": "\\xffbad", "error": "unreadable state"}]


def test_a_terminated_demo_gives_its_worker_ten_seconds_not_thirty() -> None:
    """A Faust stop that hung (30 s to the worker's own watchdog) plus the topics and the
    broker under load outlasted the terminated demo's 60 s of clean-up in one CI run: it
    then ended without deleting its topics."""
    from sift.commands import demo

    class Worker:
        def __init__(self) -> None:
            self.timeouts: list[float | None] = []

        def stop(self, timeout: float | None = None) -> None:
            self.timeouts.append(timeout)

    w = Worker()
    demo._TERMINATED.clear()
    demo._stop_worker(w)
    demo._TERMINATED.set()
    try:
        demo._stop_worker(w)
    finally:
        demo._TERMINATED.clear()
    assert w.timeouts == [None, demo.TERMINATED_WORKER_STOP]
    assert demo.TERMINATE_GRACE[1] > demo.TERMINATED_WORKER_STOP + 30  # room for the rest
