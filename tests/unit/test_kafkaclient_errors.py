"""The one-line error of a client that cannot connect names the cause kafka-python
logged (its exception only says "Unable to bootstrap"); the broker test
(tests/integration/test_secure_broker.py) checks the same against a real broker."""

from __future__ import annotations

import logging

import pytest

from sift.kafkaclient import _failures, failure_reason

SASL_REFUSED = ("Bootstrap connection to bootstrap-0 failed: [Error 58] SaslAuthenticationFailedError: "
                "SaslAuthenticationFailedError: Authentication failed: Invalid username or password "
                "(backoff 1.43 secs)")
CLOSED = ("<KafkaConnection node_id=bootstrap-0 broker_version=(3, 9) (disconnected)>: Connection "
          "lost: KafkaConnectionError: socket disconnected")
UNTRUSTED = ("Connection failed: KafkaConnectionError: Handshake failed: [SSL: "
             "CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate")


def logged(*messages: str) -> list[str]:
    with _failures() as log:
        for m in messages:
            logging.getLogger("kafka.net.manager").warning(m)
        logging.getLogger("kafka.net.manager").warning("Bootstrap bootstrap-0 not ready; waiting 1 secs")
    return log.reasons


def test_the_reasons_are_taken_from_the_log_without_the_repeated_class_name() -> None:
    assert logged(CLOSED, SASL_REFUSED) == [
        "KafkaConnectionError: socket disconnected",
        "SaslAuthenticationFailedError: Authentication failed: Invalid username or password"]
    assert logged() == []


def test_refused_credentials_beat_the_disconnections_around_them() -> None:
    why = failure_reason(logged(CLOSED, SASL_REFUSED, CLOSED), sasl=True)
    assert why is not None and why.startswith("SaslAuthenticationFailedError: Authentication failed")
    assert "refused the credentials" in why


def test_an_untrusted_certificate_names_the_ca_setting() -> None:
    why = failure_reason(logged(UNTRUSTED, CLOSED))
    assert why is not None and "CERTIFICATE_VERIFY_FAILED" in why and "SIFT_SSL_CAFILE" in why


def test_a_closed_connection_suspects_the_protocol_and_under_sasl_the_credentials() -> None:
    plain = failure_reason(logged(CLOSED))
    sasl = failure_reason(logged(CLOSED), sasl=True)
    assert plain is not None and "SIFT_SECURITY_PROTOCOL" in plain and "SASL" not in plain
    # an address that does not answer ends the same way on some networks: named too
    assert "SIFT_BROKER right and reachable" in plain
    assert sasl is not None and "SIFT_SASL_PASSWORD" in sasl and "SIFT_SECURITY_PROTOCOL" in sasl


def test_the_handler_is_removed_afterwards() -> None:
    before = list(logging.getLogger("kafka").handlers)
    logged(CLOSED)
    assert logging.getLogger("kafka").handlers == before


def test_a_silenced_kafka_logger_still_gives_the_reason_and_prints_nothing(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``sift web`` sets kafka-python's logger to CRITICAL: its connection failures were
    never recorded, so the web's error said only "Unable to bootstrap"."""
    from kafka.errors import KafkaTimeoutError

    from sift.kafkaclient import KafkaClientError, _connect
    from sift.settings import Settings

    kafka_log = logging.getLogger("kafka")
    root = logging.getLogger()
    printed = logging.StreamHandler()  # what a configured root handler would print
    root.addHandler(printed)
    old = kafka_log.level
    kafka_log.setLevel(logging.CRITICAL)
    try:
        def make() -> None:
            logging.getLogger("kafka.net.manager").error(
                "Connection failed: KafkaConnectionError: 111 ECONNREFUSED")
            raise KafkaTimeoutError("Unable to bootstrap from ['127.0.0.1:9999']")

        with pytest.raises(KafkaClientError, match=r"ECONNREFUSED \(nothing listens there"):
            _connect(Settings(broker="kafka://127.0.0.1:9999"), make)
        assert kafka_log.level == logging.CRITICAL and kafka_log.propagate
    finally:
        kafka_log.setLevel(old)
        root.removeHandler(printed)
    assert "ECONNREFUSED" not in capsys.readouterr().err


def test_topics_get_the_replication_factor_of_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every topic was created with one replica (the tables' changelogs too, through
    Faust), whatever the cluster: a broker lost lost profile state. A factor above the
    cluster's brokers is a one-line error."""
    import sift.kafkaclient as kc
    from sift.agents.app import create_app
    from sift.agents.service import TrainingSet
    from sift.settings import Settings

    created: list[tuple[str, int]] = []

    class FakeAdmin:
        def list_topics(self) -> list[str]:
            return [t for t, _ in created]

        def describe_cluster(self) -> dict[str, list[dict[str, int]]]:
            return {"brokers": [{"node_id": i} for i in range(3)]}

        def create_topics(self, new: list, timeout_ms: int) -> None:  # type: ignore[type-arg]
            created.extend((t.name, t.replication_factor) for t in new)

        def close(self) -> None:
            pass

    monkeypatch.setattr(kc, "admin", lambda settings, timeout=30.0: FakeAdmin())
    three = Settings(broker="kafka://a:1", replication_factor=3)
    kc.ensure_topics(three, ["sift.documents", "sift.judgments"])
    assert created == [("sift.documents", 3), ("sift.judgments", 3)]
    with pytest.raises(kc.KafkaClientError, match="SIFT_REPLICATION_FACTOR is 4, more than the "
                                                  r"cluster's 3 broker\(s\)"):
        kc.ensure_topics(Settings(broker="kafka://a:1", replication_factor=4), ["sift.x"])
    assert create_app(three, training=TrainingSet.load(None)).app.conf.topic_replication_factor == 3
