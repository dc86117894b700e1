"""Errors of the wire contract."""

from sift.errors import SiftError


class RecordError(SiftError):
    """A message or record does not follow the wire contract.

    ``reason`` is a short machine-readable code (the dead-letter reasons, listed in
    docs/streaming.md and docs/screening.md and kept complete by
    ``tests/unit/test_reason_codes.py``); the message is a one-line human explanation.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
