"""A kafka-python producer stand-in for unit tests of what the command line sends."""

from __future__ import annotations

from kafka.errors import MessageSizeTooLargeError
from kafka.future import Future


class FakeProducer:
    """Refuses a value over ``limit`` bytes, as a broker over its message.max.bytes, or a
    value listed in ``refuse`` with its error (at once, or only when flushed with
    ``late``); ``fail_send`` raises from ``send`` itself, as kafka-python does for a
    record over its max_request_size."""

    def __init__(self, limit: int = 10**9, late: bool = False,
                 fail_send: BaseException | None = None,
                 refuse: dict[bytes, BaseException] | None = None) -> None:
        self.limit, self.late, self.fail_send = limit, late, fail_send
        self.refuse = refuse or {}
        self.sent: list[tuple[str, bytes | None, bytes]] = []
        self.waiting: list[tuple[Future, bytes]] = []
        self.closed = False

    def send(self, topic: str, key: bytes | None = None, value: bytes = b"") -> Future:
        if self.fail_send is not None:
            raise self.fail_send
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
        elif len(value) > self.limit:
            future.failure(MessageSizeTooLargeError(f"{len(value)} bytes"))
        else:
            future.success(None)

    def flush(self, timeout: float | None = None) -> None:
        for future, value in self.waiting:
            self._settle(future, value)
        self.waiting = []

    def close(self, timeout: float | None = None) -> None:
        self.closed = True
