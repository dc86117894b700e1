"""Dead letters: every rejected input, with the reason, where it came from and its bytes."""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass
from typing import Any


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
    def from_obj(cls, obj: dict[str, Any]) -> DeadLetter:
        return cls(
            reason=str(obj["reason"]),
            message=str(obj.get("message", "")),
            topic=str(obj.get("topic", "")),
            partition=int(obj.get("partition", -1)),
            offset=int(obj.get("offset", -1)),
            original=base64.b64decode(obj.get("original_b64", "")),
            ts=float(obj.get("ts", 0.0)),
        )
