"""Wire records of review mode: review specs, judgment requests and review statuses.

A *review* is a profile in review mode (see ``docs/screening.md``):

* **spec** (profiles topic, keyed by the review name)::

      {"profile": "wilson", "mode": "review", "query": "Wilson disease therapies",
       "params": {"target_recall": 0.95, "estimator": "bound", ...}}

  Any profiles-topic object with a ``mode`` field is a review spec (:func:`is_review_obj`);
  one whose ``mode`` is not ``"review"`` is refused (``bad_mode``). The names are shared
  with the standing profiles: a review may not take a standing profile's name
  (``profile_exists``), nor a standing profile a review's (``review_exists``).

  ``params`` are :class:`~sift.filters.screening.Review` hyperparameters. ``"delete": true``
  ends the review. A spec for an existing review with the same query and params changes
  nothing but re-publishes the pending requests and the status (a client that lost them
  can ask again); other params are refused (``review_exists``): delete first.
* **documents** (documents topic): a document joins a review's collection when its
  ``metadata.review`` names the review (a string or a list of names).
* **judgments** (judgments topic): the ordinary :class:`~sift.topics.records.Judgment`,
  with ``profile`` the review name.
* **requests** (``<prefix>requests``, keyed by review): one :class:`JudgmentRequest` per
  document the review wants judged.
* **status** (``<prefix>review-status``, keyed by review): :class:`ReviewStatus`, the
  estimate of R, recall so far and the stop signal, after every change.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sift.topics.codecs import dumps, loads
from sift.topics.errors import RecordError
from sift.topics.records import MAX_EPOCH_CHARS, MAX_ID_CHARS, Document, show

REVIEW_MODE = "review"
REQUESTS_TOPIC = "requests"
STATUS_TOPIC = "review-status"
#: Review hyperparameters a spec may set (those of ``sift.filters.screening.Review``).
REVIEW_PARAMS = ("draws", "n_top", "growth", "n_negatives", "exponent", "target_recall",
                 "estimator", "confidence", "min_batches", "hh_window", "hh_variance",
                 "warmup_precision", "warmup_window",
                 "C", "class_ratio", "max_df", "stop_words", "grow_when_sampling",
                 "strip_design", "topic_weight", "learner", "svm_C", "random_state")


def _show(value: Any) -> str:
    """``repr`` of a received value, on one line and short (for error messages), never
    walking a deeply nested value (:func:`sift.topics.records.show`)."""
    return show(value, 60)


def _number(value: Any) -> bool:
    """A finite JSON number (an int or a float, not a boolean)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer beyond any float
        return False


def is_review_obj(obj: Any) -> bool:
    """Whether a decoded profiles-topic object is a review spec: an object with a ``mode``
    field, whatever its value. A standing profile's spec has no ``mode``; ``"review"`` is
    the only mode, and :meth:`ReviewSpec.from_obj` refuses any other value (``bad_mode``),
    null and ``"profile"`` included, so a misspelt mode is dead-lettered instead of
    becoming a standing profile (forty-fourth session, operations audit finding 2)."""
    return isinstance(obj, dict) and "mode" in obj


def _name(obj: dict[str, Any], key: str, what: str) -> str:
    """A name field: ``missing_<key>`` when absent, null or blank, ``bad_<key>`` when it is
    not a string or too long."""
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise RecordError(f"bad_{key}", f"{what} field {key!r} must be a string, got "
                          f"{type(value).__name__}")
    if value is None or not value.strip():
        raise RecordError(f"missing_{key}", f"{what} has no {key!r} (a non-empty string)")
    if len(value) > MAX_ID_CHARS:
        raise RecordError(f"bad_{key}", f"{what} field {key!r} is longer than {MAX_ID_CHARS} "
                          "characters")
    return value


@dataclass(frozen=True)
class ReviewSpec:
    """Create or delete a review: ``{"profile", "mode": "review", "query", "params"?, "delete"?}``."""

    review: str
    query: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    delete: bool = False

    @classmethod
    def from_obj(cls, obj: Any) -> ReviewSpec:
        if not isinstance(obj, dict):
            raise RecordError("not_an_object",
                              f"review spec must be a JSON object, got {type(obj).__name__}")
        name = _name(obj, "profile", "review spec")
        if "\x00" in name:  # it separates a review's name from the rest of its chunks' keys
            raise RecordError("bad_profile", "review spec field 'profile' must not contain "
                              "a NUL character")
        if obj.get("mode") != REVIEW_MODE:
            raise RecordError("bad_mode", f"review spec field 'mode' must be 'review' (a "
                              f"standing profile's spec has no 'mode'), got {_show(obj.get('mode'))}")
        delete = obj.get("delete", False)
        if not isinstance(delete, bool):
            raise RecordError("bad_delete", "review spec field 'delete' must be true or false")
        query = obj.get("query", "")
        if not isinstance(query, str):
            raise RecordError("bad_query", "review spec field 'query' must be a string")
        if not delete and not query.strip():
            raise RecordError("missing_query", f"review {show(name)} has no 'query' (its topic text)")
        params = obj.get("params", {})
        if not isinstance(params, dict):  # [], false, null: not an empty set of params
            raise RecordError("bad_params", "review spec field 'params' must be an object, "
                              f"got {_show(params)}")
        for key, value in params.items():
            if key not in REVIEW_PARAMS:
                raise RecordError("bad_params", f"review spec param {_show(key)} is not one of "
                                  f"{', '.join(REVIEW_PARAMS)}")
            ok = value is None or isinstance(value, str | bool | int) or (
                isinstance(value, float) and math.isfinite(value))
            if not ok:
                raise RecordError("bad_params", f"review spec param {_show(key)} must be a finite "
                                  "number, a string or a boolean")
        return cls(name, query, dict(params), delete)

    def to_obj(self) -> dict[str, Any]:
        out: dict[str, Any] = {"profile": self.review, "mode": REVIEW_MODE, "query": self.query,
                               "params": self.params}
        if self.delete:
            out["delete"] = True
        return out


def review_names(doc: Document) -> list[str]:
    """The reviews a document joins (``metadata.review``: a name or a list of names).

    Raises RecordError (``bad_review``) when the field is present but not names.
    """
    meta = doc.metadata or {}
    value = meta.get("review")
    if value is None:
        return []
    names = [value] if isinstance(value, str) else value
    if (not isinstance(names, list) or not names
            or not all(isinstance(n, str) and n.strip() and len(n) <= MAX_ID_CHARS
                       for n in names)):
        raise RecordError("bad_review", f"document {show(doc.id)}: metadata 'review' must be a "
                          "review name or a list of names")
    return list(dict.fromkeys(names))


@dataclass(frozen=True)
class ReviewDocuments:
    """Internal: documents of one review, on their way to the review's shard."""

    review: str
    ids: tuple[str, ...]
    texts: tuple[str, ...]

    @classmethod
    def from_obj(cls, obj: Any) -> ReviewDocuments:
        if not isinstance(obj, dict):
            raise RecordError("not_an_object", "review documents must be a JSON object")
        name = _name(obj, "review", "review documents")
        ids, texts = obj.get("ids"), obj.get("texts")
        if (not isinstance(ids, list) or not isinstance(texts, list) or len(ids) != len(texts)
                or not all(isinstance(x, str) and x for x in ids)
                or not all(isinstance(x, str) for x in texts)):
            raise RecordError("bad_batch", "review documents need equal-length string lists "
                              "'ids' and 'texts'")
        return cls(name, tuple(ids), tuple(texts))

    def to_obj(self) -> dict[str, Any]:
        return {"review": self.review, "ids": list(self.ids), "texts": list(self.texts)}


@dataclass(frozen=True)
class JudgmentRequest:
    """Please judge a document: ``{"review", "doc_id", "batch", "rank", "ts",
    "profile_epoch"}``.

    ``batch`` counts the review's batches from 1; ``rank`` is the position in the batch
    (best-ranked first). Answer with a judgment whose ``profile`` is the review and whose
    ``profile_epoch`` is the request's: the id of the review's life, so that a review
    deleted and started again under the name refuses the answers meant for the old one
    (``""``, not written: a review from before the fifty-second session).
    """

    review: str
    doc_id: str
    batch: int
    rank: int
    ts: float = 0.0
    profile_epoch: str = ""

    @classmethod
    def from_obj(cls, obj: Any) -> JudgmentRequest:
        if not isinstance(obj, dict):
            raise RecordError("not_an_object", "judgment request must be a JSON object")
        review = _name(obj, "review", "judgment request")
        doc_id = _name(obj, "doc_id", "judgment request")
        batch, rank = obj.get("batch"), obj.get("rank")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (batch, rank)):
            raise RecordError("bad_batch", "judgment request 'batch' and 'rank' must be integers")
        ts = obj.get("ts", 0.0)
        epoch = obj.get("profile_epoch")
        epoch = "" if epoch is None else epoch  # (absent or null: a review without one)
        if not isinstance(epoch, str) or len(epoch) > MAX_EPOCH_CHARS:
            raise RecordError("bad_profile_epoch", "judgment request 'profile_epoch' must be a "
                              f"string of at most {MAX_EPOCH_CHARS} characters")
        assert isinstance(batch, int) and isinstance(rank, int)
        return cls(review, doc_id, batch, rank, float(ts) if isinstance(ts, int | float) else 0.0,
                   epoch)

    def to_obj(self) -> dict[str, Any]:
        out: dict[str, Any] = {"review": self.review, "doc_id": self.doc_id,
                               "batch": self.batch, "rank": self.rank, "ts": self.ts}
        if self.profile_epoch:
            out["profile_epoch"] = self.profile_epoch
        return out


@dataclass(frozen=True)
class ReviewStatus:
    """Where a review stands.

    ``{"review", "documents", "screened", "found", "pending", "batches", "r_hat",
    "r_hat_var", "recall_estimate", "recall_lower", "estimator", "target_recall", "stop",
    "complete", "ts"}``: ``recall_estimate`` is ``found / R-hat``, ``recall_lower`` the
    bound rule's heuristic lower bound on recall (a normal approximation, not a
    guaranteed confidence bound: docs/screening.md, forty-third session). While no
    sampling batch has completed since the collection last changed (the start, the
    warm-up, documents just joined) there is no estimate: ``recall_estimate`` is null,
    ``recall_lower`` 0.0 and ``r_hat`` just ``found`` (variance 0); once every document
    is judged both are 1.0, exactly. ``stop`` is the stopping rule's signal (it can turn
    false again when new documents join the collection); ``complete`` means every
    document is judged.
    """

    review: str
    documents: int
    screened: int
    found: int
    pending: int
    batches: int
    r_hat: float
    r_hat_var: float
    recall_estimate: float | None
    recall_lower: float
    estimator: str
    target_recall: float
    stop: bool
    complete: bool
    ts: float = 0.0
    #: the review's life (:class:`JudgmentRequest`'s); ``""``, not written: none
    profile_epoch: str = ""

    @classmethod
    def from_obj(cls, obj: Any) -> ReviewStatus:
        """Decode a status, every field of its type (as :meth:`JudgmentRequest.from_obj`
        does): integers >= 0 (not booleans) for the counts, numbers for the estimates
        (``recall_estimate`` may be null), a string estimator, booleans for ``stop`` and
        ``complete``; RecordError ``bad_status`` naming the field otherwise."""
        if not isinstance(obj, dict):
            raise RecordError("not_an_object", "review status must be a JSON object")
        review = _name(obj, "review", "review status")

        def field_(key: str, ok: Callable[[Any], bool], what: str, default: Any = ...) -> Any:
            if key not in obj and default is not ...:
                return default
            if key not in obj:
                raise RecordError("bad_status", f"review status has no {key!r}")
            value = obj[key]
            if not ok(value):
                raise RecordError("bad_status", f"review status field {key!r} must be {what}, "
                                  f"got {_show(value)}")
            return value

        def count(key: str) -> int:
            return int(field_(key, lambda v: type(v) is int and v >= 0, "an integer >= 0"))

        def number(key: str, default: Any = ...) -> float:
            return float(field_(key, _number, "a number", default))

        estimate = field_("recall_estimate", lambda v: v is None or _number(v),
                          "a number or null (no estimate yet)")
        return cls(
            review=review, documents=count("documents"), screened=count("screened"),
            found=count("found"), pending=count("pending"), batches=count("batches"),
            r_hat=number("r_hat"), r_hat_var=number("r_hat_var"),
            recall_estimate=None if estimate is None else float(estimate),
            recall_lower=number("recall_lower"),
            estimator=field_("estimator", lambda v: isinstance(v, str), "a string"),
            target_recall=number("target_recall"),
            stop=field_("stop", lambda v: isinstance(v, bool), "true or false"),
            complete=field_("complete", lambda v: isinstance(v, bool), "true or false"),
            ts=number("ts", 0.0),
            profile_epoch=field_("profile_epoch", lambda v: isinstance(v, str)
                                 and len(v) <= MAX_EPOCH_CHARS,
                                 f"a string of at most {MAX_EPOCH_CHARS} characters", ""))

    def to_obj(self) -> dict[str, Any]:
        return {"review": self.review, "documents": self.documents, "screened": self.screened,
                "found": self.found, "pending": self.pending, "batches": self.batches,
                "r_hat": self.r_hat, "r_hat_var": self.r_hat_var,
                "recall_estimate": self.recall_estimate, "recall_lower": self.recall_lower,
                "estimator": self.estimator, "target_recall": self.target_recall,
                "stop": self.stop, "complete": self.complete, "ts": self.ts,
                **({"profile_epoch": self.profile_epoch} if self.profile_epoch else {})}


def decode_review_spec(data: bytes) -> ReviewSpec:
    return ReviewSpec.from_obj(loads(data))


def decode_request(data: bytes) -> JudgmentRequest:
    return JudgmentRequest.from_obj(loads(data))


def decode_status(data: bytes) -> ReviewStatus:
    return ReviewStatus.from_obj(loads(data))


def decode_review_documents(data: bytes) -> ReviewDocuments:
    return ReviewDocuments.from_obj(loads(data))


def encode_review(record: ReviewSpec | JudgmentRequest | ReviewStatus | ReviewDocuments) -> bytes:
    return dumps(record.to_obj())
