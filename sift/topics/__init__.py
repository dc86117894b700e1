"""The wire contract: Kafka topic names, records, codecs and dead letters."""

from sift.topics.errors import RecordError
from sift.topics.records import Decision, Document, Judgment, ProfileSpec

TOPICS = ("documents", "judgments", "profiles", "decisions", "dead-letters", "requests", "review-status")

__all__ = ["TOPICS", "Decision", "Document", "Judgment", "ProfileSpec", "RecordError"]
