"""``Sends``: kafka-python's ``flush`` does not raise for a record the broker refused, so
a producer's sends are checked through their futures (forty-third session: ``sift
produce`` printed "sent" for messages over the broker's ``message.max.bytes``, lost)."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.errors import KafkaTimeoutError, MessageSizeTooLargeError

from sift.kafkaclient import KafkaClientError, Sends
from tests.unit.fake_kafka import FakeProducer


@pytest.mark.parametrize("late", [False, True])
def test_a_refused_message_is_named_and_the_others_counted(late: bool) -> None:
    prod = FakeProducer(refuse={b"big": MessageSizeTooLargeError("too big"),
                                b"big2": MessageSizeTooLargeError()}, late=late)
    sends = Sends(prod)
    for i, value in enumerate([b"a", b"big", b"b", b"big2"]):
        sends.send("t", None, value, f"line {i + 1}")
    assert (sends.failed is None) == late  # known at once when the send itself failed
    with pytest.raises(KafkaClientError, match=r"^line 2: refused by the broker as too large "
                                               r"\(MessageSizeTooLargeError\).*message.max.bytes"
                                               r".* \(1 more messages refused\)$"):
        sends.flush()
    assert len(prod.sent) == 4


def test_other_failures_name_their_error_and_clean_sends_pass() -> None:
    sends = Sends(FakeProducer(refuse={b"x": RuntimeError("topic authorization failed")}))
    sends.send("t", b"k", b"x", "profile spec 'p'")
    with pytest.raises(KafkaClientError, match="profile spec 'p': not sent: RuntimeError: topic"):
        sends.flush()
    ok = Sends(FakeProducer())
    ok.send("t", b"k", b"fine", "line 1")
    ok.flush()
    assert ok.failed is None and ok.failures == []


def test_a_flush_that_times_out_is_one_line() -> None:
    class Stuck(FakeProducer):
        def flush(self, timeout: float | None = None) -> Any:
            raise KafkaTimeoutError("Timeout after waiting for 60 secs")

    sends = Sends(Stuck())
    sends.send("t", None, b"v", "line 1")
    with pytest.raises(KafkaClientError, match=r"not every message was sent within 60 s"):
        sends.flush(timeout=60)


def test_a_message_the_client_refuses_at_once_is_remembered_for_every_caller() -> None:
    """kafka-python raises from ``send`` itself for a record over its max_request_size
    (or without metadata in time); that refusal is remembered under the message's label
    and reported by ``flush``, as the broker's are, whoever sends (until the forty-fourth
    session only ``sift produce`` caught it; the others let kafka-python's error through)."""
    sends = Sends(FakeProducer(fail_send=MessageSizeTooLargeError("over max_request_size")))
    assert sends.send("t", b"k", b"v" * 10, "the judgment of 'd1'") is False
    assert sends.failed is not None and sends.failed.startswith("the judgment of 'd1': refused by the client")
    with pytest.raises(KafkaClientError, match=r"^the judgment of 'd1': refused by the client as too large "
                                              r"\(\[Error 10\] MessageSizeTooLargeError: over max_request_size\): "
                                              r"over its max_request_size; send fewer records a message$"):
        sends.flush()
    assert Sends(FakeProducer()).send("t", None, b"v", "line 1") is True
