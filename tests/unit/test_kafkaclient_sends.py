"""``Sends``: kafka-python's ``flush`` does not raise for a record the broker refused, so
a producer's sends are checked through their futures (forty-third session: ``sift
produce`` printed "sent" for messages over the broker's ``message.max.bytes``, lost)."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.errors import KafkaTimeoutError, MessageSizeTooLargeError
from kafka.future import Future

from sift.kafkaclient import KafkaClientError, Sends


class FakeProducer:
    """Fails the values listed in ``refuse`` (at once, or when flushed), as the broker does."""

    def __init__(self, refuse: dict[bytes, BaseException], late: bool = False) -> None:
        self.refuse, self.late = refuse, late
        self.sent: list[tuple[str, bytes | None, bytes]] = []
        self.waiting: list[tuple[Future, bytes]] = []

    def send(self, topic: str, key: bytes | None = None, value: bytes = b"") -> Future:
        self.sent.append((topic, key, value))
        future = Future()
        if self.late:
            self.waiting.append((future, value))
        else:
            self._settle(future, value)
        return future

    def _settle(self, future: Future, value: bytes) -> None:
        if value in self.refuse:
            future.failure(self.refuse[value])
        else:
            future.success(None)

    def flush(self, timeout: float | None = None) -> None:
        for future, value in self.waiting:
            self._settle(future, value)
        self.waiting = []


@pytest.mark.parametrize("late", [False, True])
def test_a_refused_message_is_named_and_the_others_counted(late: bool) -> None:
    prod = FakeProducer({b"big": MessageSizeTooLargeError("too big"), b"big2": MessageSizeTooLargeError()},
                        late=late)
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
    sends = Sends(FakeProducer({b"x": RuntimeError("topic authorization failed")}))
    sends.send("t", b"k", b"x", "profile spec 'p'")
    with pytest.raises(KafkaClientError, match="profile spec 'p': not sent: RuntimeError: topic"):
        sends.flush()
    ok = Sends(FakeProducer({}))
    ok.send("t", b"k", b"fine", "line 1")
    ok.flush()
    assert ok.failed is None and ok.failures == []


def test_a_flush_that_times_out_is_one_line() -> None:
    class Stuck(FakeProducer):
        def flush(self, timeout: float | None = None) -> Any:
            raise KafkaTimeoutError("Timeout after waiting for 60 secs")

    sends = Sends(Stuck({}))
    sends.send("t", None, b"v", "line 1")
    with pytest.raises(KafkaClientError, match=r"not every message was sent within 60 s"):
        sends.flush(timeout=60)
