"""What the web process knows: an in-memory view built from the wire topics.

:class:`WebState` is fed the records of the documents, decisions, judgments,
profiles, dead-letters and review-status topics and of the profile table's
changelog (by :mod:`sift.web.feed`, or directly by tests) and answers the pages,
the API and ``/metrics``. Plain Python, no I/O; every input is untrusted and a
record it cannot use is counted and skipped, never raised.

Bounded: the last ``doc_capacity`` documents (title and text), at most
``pending_capacity`` documents awaiting judgment per profile and
``outcome_capacity`` (document, verdict) marks per profile.
"""

from __future__ import annotations

import base64
import itertools
import math
import re
import time
import zlib
from collections import Counter, OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from sift.agents.journal import latest_after, pending_in_state, record_profile_epoch
from sift.observability import RateMeter, Registry
from sift.topics.codecs import decode_document_batch, loads
from sift.topics.errors import RecordError
from sift.topics.records import (
    Decision,
    Judgment,
    ProfileSpec,
    epoch_before,
    newest_life,
    scored_text,
)
from sift.topics.review import JudgmentRequest, ReviewSpec, is_review_obj

SNIPPET_CHARS = 320
#: Documents naming a review kept apart (title and snippet only) for its judging page: a
#: review asks for any document of its collection, however long ago it was sent.
REVIEW_DOC_CAPACITY = 200_000
#: Latency buckets (seconds from a document's Kafka timestamp to its decision).
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
#: Seconds between two decodings of one profile's changelog record.
STATE_REFRESH = 1.0
#: Deleted profiles remembered, so that their decisions read later do not bring them back.
DELETED_CAPACITY = 10_000
#: Profile specs the workers rejected, remembered so that one read after its dead letter
#: (the two topics are read in no fixed order) does not make a profile appear.
REJECTED_CAPACITY = 10_000
#: A review's specs remembered, for a dead letter read after them (see ReviewQueue.specs).
REVIEW_SPECS_KEPT = 8
#: Dead-letter reasons counted under their own name (``sift_dead_letters_total{reason}``
#: and ``dead_letters_by_reason``): a reason code as the workers write them (some 55 of
#: them), the first this many read. Other text, and codes past these, count as
#: ``other``: any producer of the dead-letters topic made a series (for the life of the
#: process) of every distinct string (forty-ninth session).
DEAD_REASONS_KEPT = 128
REASON_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_SPACE = re.compile(r"\s+")


def snippet(text: str, n: int = SNIPPET_CHARS) -> str:
    """The first ``n`` characters of ``text`` with whitespace collapsed (``…`` when cut).

    >>> snippet("a  b\\n\\nc", 10)
    'a b c'
    >>> snippet("abcdef", 3)
    'abc…'
    """
    flat = _SPACE.sub(" ", text).strip()
    return flat if len(flat) <= n else flat[:n].rstrip() + "…"


@dataclass(frozen=True)
class DocInfo:
    """A document as the web keeps it: title, text (maybe cut) and its Kafka timestamp."""

    title: str
    text: str
    truncated: bool
    ts: float


@dataclass
class PendingItem:
    """A delivered document awaiting judgment."""

    doc_id: str
    profile: str
    score: float
    threshold: float
    model_version: int
    ts: float
    doc: DocInfo | None = None
    #: the decision's: a judgment of it carries it back (``""``: the decision had none)
    profile_epoch: str = ""


@dataclass
class ReviewItem:
    """A document a review asked to be judged (:class:`~sift.topics.review.JudgmentRequest`)."""

    doc_id: str
    review: str
    batch: int
    rank: int
    ts: float
    doc: DocInfo | None = None
    #: the request's: a judgment of it carries it back (``""``: the request had none)
    profile_epoch: str = ""


@dataclass
class ReviewQueue:
    """A review's requests awaiting judgment, and the documents judged for it."""

    name: str
    pending: OrderedDict[str, ReviewItem] = field(default_factory=OrderedDict)
    #: doc_id -> verdict, the first seen
    judged: OrderedDict[str, bool] = field(default_factory=OrderedDict)
    query: str = ""
    #: the review's specs read and not (yet) dead-lettered, oldest first, as (bytes,
    #: query): the query shown is the last one's, and a spec the workers reject is taken
    #: out, so a rejected spec neither makes a review nor replaces a running one's query
    specs: list[tuple[bytes, str]] = field(default_factory=list)
    #: a status or request of the review was read: a worker runs it, whatever its specs
    confirmed: bool = False
    #: the newest epoch of its requests and statuses read: the review's life (a review
    #: deleted and started again has a later one; the topics have no order between them)
    profile_epoch: str = ""

    def follow(self, epoch: str) -> bool:
        """Whether a request or status of the life ``epoch`` is the review's now: False for
        an older life's; a newer one's starts the queue afresh (its judged documents too)."""
        life = newest_life(epoch, self.profile_epoch)
        if life is None:
            return False
        if life != self.profile_epoch:
            if self.profile_epoch:  # started again: nothing of the old one is its own
                self.pending.clear()
                self.judged.clear()
            self.profile_epoch = life
        return True


@dataclass
class ProfileView:
    """Per-profile counts and the last known state of one profile."""

    name: str
    delivered: int = 0
    judged: int = 0
    relevant: int = 0
    judgments: int = 0
    threshold: float | None = None
    model_version: int | None = None
    last_update: float | None = None
    last_decision: float | None = None
    spec: dict[str, Any] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    pending: OrderedDict[str, PendingItem] = field(default_factory=OrderedDict)
    #: doc_id -> [delivered, verdict (None until judged), the delivery's profile epoch
    #: ("" when none)]: a correction of the document carries the epoch back
    marks: OrderedDict[str, list[Any]] = field(default_factory=OrderedDict)
    raw_state: bytes | None = None
    #: the last spec's bytes, to tell whether a rejected spec is the one that made the view
    raw_spec: bytes | None = None
    #: the profile's judgment journal (sift.agents.journal): its "latest" fields are newer
    #: than the state record's while the journal continues the record
    raw_journal: bytes | None = None
    raw_decoded_at: float = 0.0
    raw_dirty: bool = False

    @property
    def precision(self) -> float | None:
        """Relevant among judged delivered documents (None before the first judgment)."""
        return self.relevant / self.judged if self.judged else None


def _finite(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    return float(x) if math.isfinite(x) else None


def _count(x: Any) -> int:
    """A count from a record: an integer in [0, 2**63) (what JSON and the API can carry
    back), else ``ValueError`` (the record is counted as unreadable)."""
    n = int(x)
    if not 0 <= n < 2**63:
        raise ValueError(f"count {x!r} out of range")
    return n


def summarize_state(raw: bytes) -> dict[str, Any]:
    """The displayable fields of a profile table record (orjson, maybe zlib: see the service)."""
    rec = orjson.loads(raw if raw[:1] == b"{" else zlib.decompress(raw))
    st = rec["state"]
    params = st.get("params", {})
    spec = rec.get("spec", {})
    bags = params.get("bags", spec.get("bags", 1))
    return {"model": str(params.get("model", spec.get("model", ""))),
            "bags": bags if isinstance(bags, int) and not isinstance(bags, bool) and bags > 0 else 1,
            "measure": str(params.get("measure", spec.get("measure", ""))),
            "update": str(params.get("update", spec.get("update", ""))),
            "query": str(spec.get("query", "")),
            "threshold": _finite(st.get("threshold")),
            "model_version": _count(st.get("model_version", 0)),
            "n_judged": _count(st.get("n_judged", 0)),
            "n_pending": _count(pending_in_state(st)),
            "epoch": str((rec.get("journal") or {}).get("epoch", "")),
            "profile_epoch": str(record_profile_epoch(rec))}


def overlay_journal(summary: dict[str, Any], raw: bytes) -> dict[str, Any]:
    """``summary`` (of a state record) with the threshold, model version and judgment
    count the profile has after its journal's last batch, when the journal continues
    that record (the same epoch, a version not older: :func:`sift.agents.journal.latest_after`)."""
    latest = latest_after(summary.get("epoch"), summary["model_version"], raw)
    if latest is None:
        return summary
    return {**summary, "threshold": _finite(latest["threshold"]),
            "model_version": _count(latest["model_version"]),
            "n_judged": _count(latest["n_judged"]), "n_pending": _count(latest["n_pending"])}


class WebState:
    """The web process's view of the service.

    Parameters
    ----------
    doc_capacity
        Recent documents kept (title and text) for the judging page.
    text_chars
        Characters of a document's text kept; a longer text is cut (and then not
        sent along with a judgment).
    pending_capacity
        Documents awaiting judgment kept per profile (oldest dropped first).
    outcome_capacity
        (document, verdict) marks kept per profile, for de-duplication.
    """

    def __init__(self, *, doc_capacity: int = 20_000, text_chars: int = 50_000,
                 pending_capacity: int = 10_000, outcome_capacity: int = 200_000) -> None:
        self.doc_capacity = doc_capacity
        self.text_chars = text_chars
        self.pending_capacity = pending_capacity
        self.outcome_capacity = outcome_capacity
        self.docs: OrderedDict[str, DocInfo] = OrderedDict()
        self.profiles: dict[str, ProfileView] = {}
        self.reviews: dict[str, dict[str, Any]] = {}
        #: reviews' requests awaiting judgment (sift.requests) and their judged documents,
        #: and the reviews deleted (most recent last), kept from coming back
        self.review_queues: dict[str, ReviewQueue] = {}
        self.deleted_reviews: OrderedDict[str, None] = OrderedDict()
        #: title and snippet of the documents naming a review (REVIEW_DOC_CAPACITY)
        self.review_docs: OrderedDict[str, DocInfo] = OrderedDict()
        self.dead_by_reason: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        #: judgments read that gave a judged document the other label (the worker's
        #: corrections, as the counts here follow them)
        self.corrections = 0
        #: profiles deleted (most recent last), the ids of judgments seen (for the
        #: documents they judged) and the judgments posted here being published
        self.deleted: OrderedDict[str, None] = OrderedDict()
        #: profile -> the bytes of its last spec the workers dead-lettered
        self.rejected: OrderedDict[str, bytes] = OrderedDict()
        self.judgment_ids: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self.claimed: set[tuple[str, str]] = set()
        #: the profile epochs read on decisions (see :meth:`on_decision`)
        self._epochs: dict[str, str] = {}
        self.lag: dict[str, int] = {}
        self.lag_ts: float | None = None
        #: why the last lag reading failed ("" when it did not): the lag is unknown then
        self.lag_error = ""
        #: messages the feed has still to read to reach what the topics held when it
        #: started (None: not known yet), and whether it has reached it once: until then a
        #: name not seen may be one not read yet, and is answered 503, not 404
        self.behind: int | None = None
        self.caught_up = False
        self.started = time.time()
        self.rates = {k: RateMeter(10.0) for k in ("documents", "decisions", "judgments",
                                                    "dead_letters")}
        reg = self.registry = Registry()
        self.c_documents = reg.counter("sift_documents_total",
                                       "Documents read from the documents topic.")
        self.c_decisions = reg.counter("sift_decisions_total",
                                       "Deliveries (distinct document, profile) read.")
        self.c_judgments = reg.counter("sift_judgments_total",
                                       "Judgments read from the judgments topic.", ["relevant"])
        for relevant in ("true", "false"):  # at 0 from the start: increase() sees the first
            self.c_judgments.inc(0.0, {"relevant": relevant})
        self.c_dead = reg.counter("sift_dead_letters_total", "Dead letters, by reason.",
                                  ["reason"])
        self.g_rate = reg.gauge("sift_events_per_second",
                                "Events per second over the last 10 s (by event time).",
                                ["kind"])
        self.h_latency = reg.histogram(
            "sift_scoring_latency_seconds",
            "Seconds from a document's Kafka timestamp to its decision.", LATENCY_BUCKETS)
        self.g_lag = reg.gauge("sift_consumer_lag",
                               "Messages the workers' consumer group has not committed yet.",
                               ["topic"])
        self.g_profiles = reg.gauge("sift_profiles", "Profiles known.")
        self.g_delivered = reg.gauge("sift_profile_delivered", "Documents delivered.",
                                     ["profile"])
        self.g_judged = reg.gauge("sift_profile_judged", "Delivered documents judged.",
                                  ["profile"])
        self.g_pending = reg.gauge("sift_profile_pending", "Delivered documents awaiting "
                                   "judgment.", ["profile"])
        self.g_precision = reg.gauge("sift_profile_precision",
                                     "Relevant among judged delivered documents.", ["profile"])
        self.g_threshold = reg.gauge("sift_profile_threshold", "Current threshold.",
                                     ["profile"])
        self.g_version = reg.gauge("sift_profile_model_version", "Current model version.",
                                   ["profile"])
        self.g_review = reg.gauge("sift_review_value", "Review estimates (r_hat, recall, "
                                  "found, screened, stop).", ["review", "field"])

    # -- helpers ------------------------------------------------------------------------------
    def profile(self, name: str) -> ProfileView:
        view = self.profiles.get(name)
        if view is None:
            view = self.profiles[name] = ProfileView(name)
        return view

    def _mark(self, view: ProfileView, doc_id: str) -> list[Any]:
        mark = view.marks.get(doc_id)
        if mark is None:
            mark = view.marks[doc_id] = [False, None, ""]
            while len(view.marks) > self.outcome_capacity:
                view.marks.popitem(last=False)
        return mark

    def _skip(self, what: str) -> None:
        self.skipped[what] += 1

    def _deleted(self, name: str) -> None:
        """Forget a deleted profile, and keep its decisions and judgments read later (a
        restart reads the topics from their start) from bringing it back."""
        self.profiles.pop(name, None)
        self.deleted[name] = None
        self.deleted.move_to_end(name)
        while len(self.deleted) > DELETED_CAPACITY:
            self.deleted.popitem(last=False)

    def known(self, name: str) -> bool:
        """Whether ``name`` is a profile the service was told about (a spec or a state
        record), not only a name in decisions or judgments."""
        view = self.profiles.get(name)
        return view is not None and (bool(view.spec) or view.raw_state is not None)

    def shown(self, name: str) -> ProfileView | None:
        """The view of profile ``name`` if it is one: a spec or state record was read, or
        a decision the workers made for it. A name only judgments use (a judgment for a
        profile that does not exist, which the workers dead-letter) is not listed."""
        view = self.profiles.get(name)
        if view is None or not (self.known(name) or view.model_version is not None):
            return None
        return view

    def shown_names(self) -> list[str]:
        """The profiles listed, in name order (see :meth:`shown`)."""
        return [n for n in sorted(self.profiles) if self.shown(n) is not None]

    def is_review(self, name: str) -> bool:
        """Whether ``name`` is a review (a review spec, status or request was read) and
        not a standing profile."""
        return name in self.review_queues and not self.known(name)

    def review_queue(self, name: str) -> ReviewQueue:
        queue = self.review_queues.get(name)
        if queue is None:
            queue = self.review_queues[name] = ReviewQueue(name)
            view = self.profiles.get(name)
            if view is not None and not self.known(name):
                # judgments read before the review was known made it look like a profile:
                # their verdicts are the review's
                del self.profiles[name]
                queue.judged.update((d, bool(m[1])) for d, m in view.marks.items()
                                    if m[1] is not None)
        return queue

    def _review_deleted(self, name: str) -> None:
        """Forget a deleted review, and keep its requests, statuses and judgments read later
        (a restart reads the topics from their start, each at its own pace) from bringing
        it back, until a new spec of that name."""
        self.review_queues.pop(name, None)
        self.reviews.pop(name, None)
        self.rejected.pop(name, None)  # a spec rejected before the deletion may be taken now
        self.deleted_reviews[name] = None
        self.deleted_reviews.move_to_end(name)
        while len(self.deleted_reviews) > DELETED_CAPACITY:
            self.deleted_reviews.popitem(last=False)

    def claim(self, j: Judgment, correct: bool = False) -> str | None:
        """Reserve a judgment posted here while it is published: why it must be refused
        (the document already judged, or being judged, for the profile, unless
        ``correct`` and the judgment gives a standing profile's document the other label;
        its id used for another document), else ``None`` and it is reserved until
        :meth:`release`."""
        if (j.profile, j.doc_id) in self.claimed:
            return f"document {j.doc_id!r} is being judged for {j.profile!r}"
        verdict = self.verdict(j.profile, j.doc_id)
        if verdict is not None and not (correct and verdict != j.relevant
                                        and not self.is_review(j.profile)):
            return f"document {j.doc_id!r} is already judged for {j.profile!r}"
        if j.id is not None:
            seen = self.judgment_ids.get(j.id)
            if seen is not None and seen != (j.profile, j.doc_id):
                return f"judgment id {j.id!r} was used for document {seen[1]!r} of {seen[0]!r}"
        self.claimed.add((j.profile, j.doc_id))
        return None

    def release(self, j: Judgment) -> None:
        self.claimed.discard((j.profile, j.doc_id))

    # -- inputs -------------------------------------------------------------------------------
    def on_documents(self, value: bytes | None, ts: float) -> int:
        """A message of the documents topic (one or a batch); the number of documents kept."""
        if value is None:
            return 0
        try:
            docs, _bad = decode_document_batch(value, max_batch=1_000_000)
        except RecordError:
            self._skip("documents")
            return 0
        for d in docs:
            text = d.text
            cut = len(text) > self.text_chars
            info = DocInfo(d.title, text[: self.text_chars] if cut else text, cut, ts)
            self.docs[d.id] = info
            self.docs.move_to_end(d.id)
            if d.metadata and "review" in d.metadata:
                self.review_docs[d.id] = DocInfo(d.title, snippet(text), True, ts)
                self.review_docs.move_to_end(d.id)
        while len(self.docs) > self.doc_capacity:
            self.docs.popitem(last=False)
        while len(self.review_docs) > REVIEW_DOC_CAPACITY:
            self.review_docs.popitem(last=False)
        self.c_documents.inc(len(docs))
        self.rates["documents"].add(ts, len(docs))
        return len(docs)

    def on_decision(self, value: bytes | None) -> Decision | None:
        """A decision; the first one of a (document, profile) pair is a delivery."""
        try:
            d = Decision.from_obj(loads(value or b""))
        except RecordError:
            self._skip("decisions")
            return None
        if d.profile in self.deleted:
            self._skip("deleted-profile")
            return None
        view = self.profile(d.profile)
        mark = self._mark(view, d.doc_id)
        view.threshold = d.threshold
        view.model_version = max(d.model_version, view.model_version or 0)
        view.last_decision = max(d.ts, view.last_decision or 0.0)
        if mark[0]:
            return d  # a repeat (at-least-once): already counted
        mark[0] = True
        # (one string per life, not one per mark: up to outcome_capacity marks a profile)
        mark[2] = self._epochs.setdefault(d.profile_epoch, d.profile_epoch) \
            if len(self._epochs) < 4096 else d.profile_epoch
        view.delivered += 1
        self.c_decisions.inc()
        self.rates["decisions"].add(d.ts or time.time())
        doc = self.docs.get(d.doc_id)
        if doc is not None and d.ts:
            self.h_latency.observe(max(d.ts - doc.ts, 0.0))
        if mark[1] is None:
            current = view.state.get("profile_epoch")
            if current and epoch_before(d.profile_epoch, current):
                return d  # an earlier life's delivery: not for the queue (_drop_stale)
            view.pending[d.doc_id] = PendingItem(d.doc_id, d.profile, d.score, d.threshold,
                                                 d.model_version, d.ts, doc, d.profile_epoch)
            while len(view.pending) > self.pending_capacity:
                view.pending.popitem(last=False)
        else:
            view.judged += 1
            view.relevant += int(bool(mark[1]))
        return d

    def on_judgment(self, value: bytes | None, ts: float) -> Judgment | None:
        """A judgment: the document leaves the profile's queue; its verdict is the last
        one read (a later one of the other label corrects it), as the workers take it."""
        try:
            j = Judgment.from_obj(loads(value or b""))
        except RecordError:
            self._skip("judgments")
            return None
        return self.apply_judgment(j, ts)

    def apply_judgment(self, j: Judgment, ts: float) -> Judgment:
        """Record a verdict (from the topic, or optimistically from a POST)."""
        if j.id is not None:
            self.judgment_ids[j.id] = (j.profile, j.doc_id)
            self.judgment_ids.move_to_end(j.id)
            while len(self.judgment_ids) > self.outcome_capacity:
                self.judgment_ids.popitem(last=False)
        if j.profile in self.deleted_reviews:
            self._skip("deleted-review")
            return j
        if self.is_review(j.profile):
            queue = self.review_queues[j.profile]
            if j.doc_id not in queue.judged:
                queue.judged[j.doc_id] = j.relevant
                while len(queue.judged) > self.outcome_capacity:
                    queue.judged.popitem(last=False)
                queue.pending.pop(j.doc_id, None)
                self.c_judgments.inc(labels={"relevant": "true" if j.relevant else "false"})
                self.rates["judgments"].add(j.ts or ts)
            elif queue.judged[j.doc_id] != j.relevant:
                # the review's workers take the last verdict (Review.record_judgment)
                queue.judged[j.doc_id] = j.relevant
                self.corrections += 1
            return j
        if j.profile in self.deleted:
            self._skip("deleted-profile")
            return j
        view = self.profile(j.profile)
        mark = self._mark(view, j.doc_id)
        if mark[1] is not None:
            if bool(mark[1]) != j.relevant:
                # a correction: the worker relabels the document (one label per document
                # and profile, the last judgment's), so the counts follow it
                mark[1] = j.relevant
                if mark[0]:
                    view.relevant += 1 if j.relevant else -1
                self.corrections += 1
            return j
        mark[1] = j.relevant
        view.judgments += 1
        view.pending.pop(j.doc_id, None)
        if mark[0]:
            view.judged += 1
            view.relevant += int(j.relevant)
        self.c_judgments.inc(labels={"relevant": "true" if j.relevant else "false"})
        self.rates["judgments"].add(j.ts or ts)
        return j

    def is_judged(self, profile: str, doc_id: str) -> bool:
        return self.verdict(profile, doc_id) is not None

    def verdict(self, profile: str, doc_id: str) -> bool | None:
        """The verdict that counts for ``doc_id`` of a profile or review (the first one
        read), ``None`` when it is not judged (or no longer remembered)."""
        if self.is_review(profile):
            return self.review_queues[profile].judged.get(doc_id)
        view = self.profiles.get(profile)
        mark = None if view is None else view.marks.get(doc_id)
        return None if mark is None or mark[1] is None else bool(mark[1])

    def on_profile_spec(self, value: bytes | None) -> None:
        """A profile spec: the profile exists (soon) or, for a deletion, no more. A review
        spec (``"mode": "review"``) makes or ends a review instead."""
        try:
            obj = loads(value or b"")
            if is_review_obj(obj):
                review = ReviewSpec.from_obj(obj)
                if review.delete:
                    self._review_deleted(review.review)
                elif self.rejected.get(review.review) != value:  # else dead-lettered first
                    self.deleted_reviews.pop(review.review, None)
                    queue = self.review_queue(review.review)
                    queue.specs.append((value or b"", review.query))
                    del queue.specs[:-REVIEW_SPECS_KEPT]
                    queue.query = review.query
                return
            spec = ProfileSpec.from_obj(obj)
        except RecordError:
            self._skip("profiles")
            return
        if spec.delete:
            self._deleted(spec.profile)
            return
        if self.rejected.get(spec.profile) == value:
            return  # its dead letter was read first: the workers did not take it
        self.deleted.pop(spec.profile, None)
        view = self.profile(spec.profile)
        view.raw_spec = value
        view.spec = {"model": spec.model, "measure": spec.measure, "update": str(spec.update),
                     "query": spec.query, "bags": spec.bags}

    def _spec_rejected(self, original_b64: object) -> None:
        """A profile spec the workers dead-lettered (a bad parameter, an unknown positive):
        a profile it would have created does not exist, so it leaves the view (and the
        API no longer takes judgments for it); a profile that exists keeps its view."""
        try:
            raw = base64.b64decode(str(original_b64), validate=True)
            obj = loads(raw)
            if is_review_obj(obj):
                review = ReviewSpec.from_obj(obj)
                if not review.delete:
                    self._reject(review.review, raw)
                    self._review_spec_rejected(review.review, raw)
                return
            spec = ProfileSpec.from_obj(obj)
        except (ValueError, RecordError):  # binascii.Error is a ValueError
            return
        if spec.delete:
            return
        self._reject(spec.profile, raw)
        view = self.profiles.get(spec.profile)
        if view is not None and view.raw_state is None and view.raw_spec == raw:
            del self.profiles[spec.profile]

    def _reject(self, name: str, raw: bytes) -> None:
        """Remember the last spec of ``name`` the workers rejected (bounded)."""
        self.rejected[name] = raw
        self.rejected.move_to_end(name)
        while len(self.rejected) > REJECTED_CAPACITY:
            self.rejected.popitem(last=False)

    def _review_spec_rejected(self, name: str, raw: bytes) -> None:
        """A review spec the workers dead-lettered (bad parameters, ``review_exists``,
        ``profile_exists``, ...) read after the spec: it is taken out of the review's specs.
        A review no spec is left of that no status or request confirmed leaves the view
        (its page and the API answered as for a review the workers never had); one that
        is left shows the query of its last spec still standing, not the rejected one."""
        queue = self.review_queues.get(name)
        if queue is None or not any(spec == raw for spec, _ in queue.specs):
            return
        queue.specs = [(spec, q) for spec, q in queue.specs if spec != raw]
        if queue.specs:
            queue.query = queue.specs[-1][1]
        elif queue.confirmed:
            queue.query = ""  # the spec that made it was not read (``--latest``)
        else:
            del self.review_queues[name]
            self.reviews.pop(name, None)

    def on_profile_state(self, name: str, value: bytes | None, ts: float) -> None:
        """A record of the profile table's changelog (``None``: the profile was deleted)."""
        if not value:
            self._deleted(name)
            return
        self.deleted.pop(name, None)
        view = self.profile(name)
        view.raw_state = value
        view.raw_dirty = True
        view.last_update = max(ts, view.last_update or 0.0)

    def on_profile_journal(self, name: str, value: bytes | None, ts: float) -> None:
        """A record of the journal table's changelog (``None``: deleted with the profile)."""
        view = self.profiles.get(name)
        if view is None:
            if not value:
                return
            view = self.profile(name)
        view.raw_journal = value or None
        view.raw_dirty = True
        if value:
            view.last_update = max(ts, view.last_update or 0.0)

    def on_dead_letter(self, value: bytes | None, ts: float,
                       topics: Mapping[str, str] | None = None) -> None:
        """A dead letter, counted by reason; with ``topics`` (topic name -> kind, as the
        feed reads them) a rejected profile spec is also taken back from the view."""
        reason = "unknown"
        obj: Any = None
        try:
            obj = loads(value or b"")
            if isinstance(obj, dict) and isinstance(obj.get("reason"), str):
                reason = self._reason(obj["reason"])
        except RecordError:
            pass
        if topics and isinstance(obj, dict) and topics.get(str(obj.get("topic"))) == "profiles":
            self._spec_rejected(obj.get("original_b64"))
        self.dead_by_reason[reason] += 1
        self.c_dead.inc(labels={"reason": reason})
        self.rates["dead_letters"].add(ts)

    def _reason(self, reason: str) -> str:
        """The name a dead letter's reason is counted under: the reason if it is a code
        counted already or one of the first :data:`DEAD_REASONS_KEPT`, else ``other``."""
        if reason in self.dead_by_reason:
            return reason
        if not REASON_CODE.fullmatch(reason) or len(self.dead_by_reason) >= DEAD_REASONS_KEPT:
            return "other"
        return reason

    def on_review_status(self, value: bytes | None, ts: float) -> None:
        """A review status (:class:`sift.topics.review.ReviewStatus`): ``{"review", "screened",
        "found", "r_hat", "recall_estimate", "target_recall", "stop", ...}``."""
        try:
            obj = loads(value or b"")
        except RecordError:
            self._skip("review-status")
            return
        name = obj.get("review") if isinstance(obj, dict) else None
        if not isinstance(name, str) or not name or len(name) > 512:
            self._skip("review-status")
            return
        if name in self.deleted_reviews:
            self._skip("deleted-review")
            return
        assert isinstance(obj, dict)
        epoch = obj.get("profile_epoch")
        if not self.review_queue(name).follow(epoch if isinstance(epoch, str) else ""):
            self._skip("stale-status")  # a deleted review's, read after the new one's
            return
        out: dict[str, Any] = {"review": name}
        for key in ("screened", "found", "r_hat", "target_recall"):
            out[key] = _finite(obj.get(key))
        # the service publishes found / R-hat as ``recall_estimate`` (sift.topics.review)
        out["recall"] = _finite(obj.get("recall_estimate", obj.get("recall")))
        out["stop"] = obj.get("stop") is True
        out["ts"] = _finite(obj.get("ts")) or ts
        self.reviews[name] = out
        self.review_queue(name).confirmed = True

    def on_request(self, value: bytes | None, ts: float) -> None:
        """A review's request to judge a document (``sift.requests``): it waits in the
        review's queue until a judgment of it is read."""
        try:
            req = JudgmentRequest.from_obj(loads(value or b""))
        except RecordError:
            self._skip("requests")
            return
        if self.known(req.review):
            self._skip("requests")  # a standing profile's name: not a review
            return
        if req.review in self.deleted_reviews:
            self._skip("deleted-review")
            return
        queue = self.review_queue(req.review)
        queue.confirmed = True
        if not queue.follow(req.profile_epoch):
            self._skip("stale-request")  # a deleted review's: its judgment would be refused
            return
        if req.doc_id in queue.judged or req.doc_id in queue.pending:
            return  # judged already, or asked again (a re-sent spec re-publishes them)
        queue.pending[req.doc_id] = ReviewItem(req.doc_id, req.review, req.batch, req.rank,
                                               req.ts or ts, self.docs.get(req.doc_id),
                                               req.profile_epoch)
        while len(queue.pending) > self.pending_capacity:
            queue.pending.popitem(last=False)

    def set_behind(self, behind: int | None) -> None:
        """What the feed has still to read of what the topics held when it started
        (``None``: not known yet); 0 marks the state caught up, for good.

        >>> st = WebState()
        >>> st.set_behind(120); st.caught_up
        False
        >>> st.set_behind(0); st.set_behind(None); st.caught_up
        True
        """
        if self.caught_up:
            return
        self.behind = behind
        self.caught_up = behind == 0

    def set_lag(self, lag: dict[str, int], ts: float | None = None) -> None:
        self.lag = dict(lag)
        self.lag_ts = time.time() if ts is None else ts
        self.lag_error = ""

    def lag_unavailable(self, reason: str) -> None:
        """The lag could not be read (the broker unreachable, say): it is unknown, not the
        last value read (which the dashboard showed as current, 0 with the broker down),
        and ``sift_consumer_lag`` has no series until it is read again."""
        self.lag = {}
        self.lag_error = reason or "unknown error"

    # -- outputs ------------------------------------------------------------------------------
    def refresh_states(self, now: float | None = None) -> None:
        """Decode changed changelog records (each at most once per ``STATE_REFRESH``)."""
        now = time.time() if now is None else now
        for view in self.profiles.values():
            self._refresh_view(view, now)

    def _refresh_view(self, view: ProfileView, now: float) -> None:
        """Decode ``view``'s changed changelog record (at most once per ``STATE_REFRESH``)."""
        if not view.raw_dirty or view.raw_state is None or now - view.raw_decoded_at < STATE_REFRESH:
            return
        epoch = view.state.get("profile_epoch")
        try:
            view.state = summarize_state(view.raw_state)
        except (zlib.error, orjson.JSONDecodeError, KeyError, TypeError, ValueError,
                AttributeError):
            self._skip("profile-state")
            view.state = {"error": "unreadable state"}
        else:
            if view.raw_journal:
                try:
                    view.state = overlay_journal(view.state, view.raw_journal)
                except (orjson.JSONDecodeError, TypeError, ValueError, AttributeError):
                    self._skip("profile-journal")
        view.raw_dirty = False
        view.raw_decoded_at = now
        if view.state.get("profile_epoch") != epoch:
            self._drop_stale(view)

    def profile_summary(self, view: ProfileView) -> dict[str, Any]:
        st = view.state
        threshold = st.get("threshold") if "threshold" in st else view.threshold
        version = st.get("model_version") if "model_version" in st else view.model_version
        last = max((t for t in (view.last_update, view.last_decision) if t), default=None)
        return {"profile": view.name,
                "model": st.get("model") or view.spec.get("model"),
                "bags": st.get("bags") or view.spec.get("bags") or 1,
                "measure": st.get("measure") or view.spec.get("measure"),
                "update": st.get("update") or view.spec.get("update"),
                "query": st.get("query") or view.spec.get("query", ""),
                "delivered": view.delivered, "judged": view.judged, "relevant": view.relevant,
                "judgments": view.judgments, "precision": view.precision,
                "pending": len(view.pending), "threshold": threshold,
                "model_version": version, "learned_judgments": st.get("n_judged"),
                "waiting_judgments": st.get("n_pending"), "last_update": last,
                "profile_epoch": st.get("profile_epoch") or None}

    def snapshot(self, now: float | None = None) -> dict[str, Any]:
        """Everything the dashboard shows, JSON-safe."""
        now = time.time() if now is None else now
        self.refresh_states(now)
        return {
            "ts": now,
            "uptime": now - self.started,
            "rates": {k: m.rate(now) for k, m in self.rates.items()},
            "totals": {"documents": int(self.c_documents.get()),
                       "decisions": int(self.c_decisions.get()),
                       "judgments": sum(int(v) for v in self.c_judgments.values.values()),
                       "dead_letters": sum(self.dead_by_reason.values())},
            "dead_letters_by_reason": dict(self.dead_by_reason),
            "lag": dict(self.lag), "lag_total": sum(self.lag.values()) if self.lag else None,
            "lag_ts": self.lag_ts, "lag_error": self.lag_error or None,
            "caught_up": self.caught_up, "behind": None if self.caught_up else self.behind,
            "profiles": [self.profile_summary(self.profiles[n]) for n in self.shown_names()],
            "reviews": [self.review_summary(n) for n in sorted(self.reviews)],
            "skipped": dict(self.skipped), "corrections": self.corrections,
        }

    def review_summary(self, name: str) -> dict[str, Any]:
        """A review's last status (if any), with its requests awaiting judgment here and
        its query (when its spec was read)."""
        queue = self.review_queues.get(name)
        return {"review": name, **self.reviews.get(name, {}),
                "pending": len(queue.pending) if queue else 0,
                "query": queue.query if queue else ""}

    def pending(self, profile: str, limit: int = 50) -> list[dict[str, Any]]:
        """The oldest ``limit`` documents awaiting judgment for ``profile`` (a review: its
        requests, in the order asked)."""
        if self.is_review(profile):
            asked: list[dict[str, Any]] = []
            for it in itertools.islice(self.review_queues[profile].pending.values(), limit):
                if it.doc is None:
                    it.doc = self.docs.get(it.doc_id) or self.review_docs.get(it.doc_id)
                doc = it.doc
                asked.append({"doc_id": it.doc_id, "profile": it.review, "review": True,
                              "title": doc.title if doc else "",
                              "snippet": snippet(doc.text) if doc else "",
                              "batch": it.batch, "rank": it.rank, "ts": it.ts,
                              **({"profile_epoch": it.profile_epoch} if it.profile_epoch
                                 else {})})
            return asked
        view = self.profiles.get(profile)
        if view is None:
            return []
        self._refresh_view(view, time.time())
        out: list[dict[str, Any]] = []
        for item in view.pending.values():
            if len(out) >= limit:
                break
            if item.doc is None:
                item.doc = self.docs.get(item.doc_id)
            doc = item.doc
            out.append({"doc_id": item.doc_id, "profile": item.profile,
                        "title": doc.title if doc else "",
                        "snippet": snippet(doc.text) if doc else "",
                        "score": item.score, "threshold": item.threshold,
                        "model_version": item.model_version, "ts": item.ts,
                        **({"profile_epoch": item.profile_epoch} if item.profile_epoch else {})})
        return out

    @staticmethod
    def _drop_stale(view: ProfileView) -> None:
        """Drop the queued deliveries of an earlier life of the profile (deleted and
        created again, or reset): the workers would refuse their judgments. The topics
        have no order between them (and a restarted page reads them all again), so a
        decision may be read after its profile's next record, or before its own: only
        those whose epoch is older than the record's are dropped (:func:`epoch_before`).
        Called when the record's epoch changes; :meth:`on_decision` keeps them out after."""
        current = view.state.get("profile_epoch")
        if current:
            stale = [d for d, it in view.pending.items() if epoch_before(it.profile_epoch, current)]
            for doc_id in stale:
                del view.pending[doc_id]

    def pending_epoch(self, profile: str, doc_id: str) -> str | None:
        """The profile epoch of the decision (or a review's request) that put ``doc_id`` in
        ``profile``'s queue, if it is there and had one: what a judgment of it from the page
        is meant for. A profile's document no longer queued (judged: a correction; or
        dropped as an earlier life's, which a page loaded before still shows) has the epoch
        of its delivery, while its mark is kept (``outcome_capacity``)."""
        if self.is_review(profile):
            asked = self.review_queues[profile].pending.get(doc_id)
            return asked.profile_epoch or None if asked is not None else None
        view = self.profiles.get(profile)
        if view is None:
            return None
        item = view.pending.get(doc_id)
        if item is not None:
            return item.profile_epoch or None
        mark = view.marks.get(doc_id)
        return mark[2] or None if mark is not None and mark[0] else None

    def document_text(self, doc_id: str) -> str | None:
        """The full text of a kept document as the workers scored it, its title included
        (:func:`~sift.topics.records.scored_text`; None when unknown or cut)."""
        doc = self.docs.get(doc_id)
        if doc is None:
            queues: list[OrderedDict[str, Any]] = [v.pending for v in self.profiles.values()]
            queues += [q.pending for q in self.review_queues.values()]
            for pending in queues:
                item = pending.get(doc_id)
                if item is not None and item.doc is not None:
                    doc = item.doc
                    break
        # what the workers scored (the title too), so that a worker learning from the
        # text learns the vector it scored (forty-seventh session: the text alone made
        # another vector, and a later correction of the document could not find it)
        return None if doc is None or doc.truncated else scored_text(doc.text, doc.title)

    def metrics(self, now: float | None = None) -> str:
        """``/metrics``: the text exposition format."""
        now = time.time() if now is None else now
        self.refresh_states(now)
        self.g_rate.replace(({"kind": k}, m.rate(now)) for k, m in self.rates.items())
        self.g_lag.replace(({"topic": t}, n) for t, n in self.lag.items())
        rows = [self.profile_summary(self.profiles[n]) for n in self.shown_names()]
        self.g_profiles.set(len(rows))
        for gauge, key in ((self.g_delivered, "delivered"), (self.g_judged, "judged"),
                           (self.g_pending, "pending"), (self.g_precision, "precision"),
                           (self.g_threshold, "threshold"), (self.g_version, "model_version")):
            gauge.replace(({"profile": r["profile"]}, r[key]) for r in rows
                          if r[key] is not None)
        items = []
        for r in self.reviews.values():
            for key in ("r_hat", "recall", "found", "screened"):
                if r.get(key) is not None:
                    items.append(({"review": r["review"], "field": key}, r[key]))
            items.append(({"review": r["review"], "field": "stop"}, 1.0 if r["stop"] else 0.0))
        self.g_review.replace(items)
        return self.registry.render()
