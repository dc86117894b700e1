"""Dead letters: every rejected input, with the reason, where it came from and its bytes."""

from __future__ import annotations

import base64
import math
import time
from dataclasses import dataclass
from typing import Any

from sift.topics.errors import RecordError
from sift.topics.records import show


@dataclass(frozen=True)
class DeadLetter:
    """``{"reason", "message", "topic", "partition", "offset", "original_b64", "ts"}``."""

    reason: str
    message: str
    topic: str
    partition: int
    offset: int
    original: bytes
    ts: float = 0.0

    def to_obj(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "message": self.message,
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "original_b64": base64.b64encode(self.original).decode("ascii"),
            "ts": self.ts or time.time(),
        }

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
        return cls(reason=text("reason", required=True), message=text("message"),
                   topic=text("topic"), partition=integer("partition"),
                   offset=integer("offset"), original=original, ts=float(ts))
