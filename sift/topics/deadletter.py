"""Dead letters: every rejected input, with the reason, where it came from and its bytes."""

from __future__ import annotations

import base64
import math
import time
from dataclasses import dataclass
from typing import Any

import orjson

from sift.topics.errors import RecordError
from sift.topics.records import show

#: The dead-letters topic's max.message.bytes wherever sift creates it (a worker, the
#: command line): a letter carries its input in base64, 4/3 of its size, and a stock
#: broker's default of 1 MiB refused the letter of any input over about 786 kB.
TOPIC_MAX_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class DeadLetter:
    """``{"reason", "message", "topic", "partition", "offset", "original_b64", "ts"}``,
    and ``"original_size"`` and ``"original_clipped": true`` for a letter whose original
    was too large to carry whole (see :meth:`encode`).

    ``original_size`` is the size of the whole original in bytes (``-1``: ``original``
    is whole)."""

    reason: str
    message: str
    topic: str
    partition: int
    offset: int
    original: bytes
    ts: float = 0.0
    original_size: int = -1

    @property
    def clipped(self) -> bool:
        """Whether ``original`` is only the first part of the input's bytes."""
        return self.original_size > len(self.original)

    def to_obj(self) -> dict[str, Any]:
        obj = {
            "reason": self.reason,
            "message": self.message,
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "original_b64": base64.b64encode(self.original).decode("ascii"),
            "ts": self.ts or time.time(),
        }
        if self.clipped:
            obj["original_size"] = self.original_size
            obj["original_clipped"] = True
        return obj

    def encode(self, max_bytes: int | None = None) -> bytes:
        """The dead letter as JSON bytes, at most ``max_bytes`` of them when given.

        A dead letter carries its input whole in base64 (4/3 of its size), so the letter of
        a large message (a document over the size limit, a big malformed batch) can be
        larger than its topic accepts, and the broker would refuse it: a letter counted
        and never delivered. Over ``max_bytes`` the original is cut to the longest prefix
        that fits, and the letter gives the whole original's size (``original_size``) and
        ``"original_clipped": true``; its topic, partition and offset still find it whole.

        >>> dl = DeadLetter("too_large", "over the limit", "sift.documents", 0, 7, b"x" * 3000, ts=1.0)
        >>> len(dl.encode()) > 4000, len(dl.encode(1000)) <= 1000
        (True, True)
        >>> back = DeadLetter.from_obj(orjson.loads(dl.encode(1000)))
        >>> back.clipped, back.original_size, back.original == b"x" * len(back.original)
        (True, 3000, True)
        """
        obj = self.to_obj()
        data = orjson.dumps(obj)
        if max_bytes is None or len(data) <= max_bytes:
            return data
        obj.update(original_b64="", original_size=max(self.original_size, len(self.original)),
                   original_clipped=True)
        room = max_bytes - len(orjson.dumps(obj))
        keep = max(room, 0) // 4 * 3  # whole base64 quanta: no padding inside the limit
        obj["original_b64"] = base64.b64encode(self.original[:keep]).decode("ascii")
        return orjson.dumps(obj)

    @classmethod
    def from_obj(cls, obj: Any) -> DeadLetter:
        """Read a dead letter back (``sift tail dead-letters``, a test). Raises only
        :class:`RecordError`: ``not_an_object``, or ``bad_dead_letter`` naming the field
        (before the forty-fifth session a malformed one raised KeyError, ValueError,
        TypeError or binascii.Error). Absent optional fields take the defaults above."""
        if not isinstance(obj, dict):
            raise RecordError("not_an_object",
                              f"dead letter must be a JSON object, got {type(obj).__name__}")

        def bad(key: str, what: str) -> RecordError:
            return RecordError("bad_dead_letter", f"dead letter field {key!r} must be {what}, "
                               f"got {show(obj.get(key))}")

        def text(key: str, required: bool = False) -> str:
            value = obj.get(key, None if required else "")
            if not isinstance(value, str):
                raise bad(key, "a string")
            return value

        def integer(key: str) -> int:
            value = obj.get(key, -1)
            if isinstance(value, bool) or not isinstance(value, int):
                raise bad(key, "an integer")
            return value

        ts = obj.get("ts", 0.0)
        try:
            finite = not isinstance(ts, bool) and isinstance(ts, int | float) and math.isfinite(ts)
        except OverflowError:  # an integer beyond any float
            finite = False
        if not finite:
            raise bad("ts", "a finite number")
        try:
            original = base64.b64decode(text("original_b64"), validate=True)
        except ValueError:  # binascii.Error; a non-ASCII character
            raise bad("original_b64", "base64") from None
        size = obj.get("original_size", -1)
        if isinstance(size, bool) or not isinstance(size, int) or (
                size != -1 and size < len(original)):
            raise bad("original_size", f"an integer >= the original's {len(original)} bytes")
        return cls(reason=text("reason", required=True), message=text("message"),
                   topic=text("topic"), partition=integer("partition"),
                   offset=integer("offset"), original=original, ts=float(ts),
                   original_size=size)
