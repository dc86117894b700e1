"""Review mode in the stream: thin agents over :class:`~sift.filters.screening.Review`.

:class:`ReviewService` is plain Python (testable without Kafka): it decodes messages,
calls the core, writes the core's versioned orjson state to a mapping (a Faust table
in the worker, keyed by review name, co-partitioned with the judgments and profiles
topics) and returns what to emit. :func:`attach` wires it into the worker's Faust app.

============================  ======================================================
agent / hook                  consumes -> emits
============================  ======================================================
``take_specs`` (hook)         profiles: specs with a ``mode`` (``"review"``, any
                              other is ``bad_mode``) -> table, requests, status, dead
                              letters; the rest goes on to the standing-profile agent,
                              which refuses a review's name (:class:`ReviewNames`)
``route_documents`` (hook)    documents (each batch the standing routing agent
                              consumed): documents whose ``metadata.review`` names a
                              review -> the internal ``review-documents`` topic,
                              partition = the review's shard
``apply_review_documents``    review-documents -> table, requests, status
``take_judgments`` (hook)     judgments whose ``profile`` is a review here -> table,
                              requests, status; the rest goes on
============================  ======================================================

After every change the review asks for its next batch when nothing is pending and the
stopping rule has not fired: one :class:`~sift.topics.review.JudgmentRequest` per
document on ``<prefix>requests``, then a :class:`~sift.topics.review.ReviewStatus` on
``<prefix>review-status`` (R-hat, its variance, recall so far, the stop signal).

Documents that join a running review enter the sampling population at the next batch;
the estimator stays valid without restarting (see ``docs/screening.md``). A document
for a review that does not exist (yet) is dead-lettered (``unknown_review``): create the
review first and wait for its first status.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Container, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from sift.agents.service import (
    MAX_RECORD_BYTES,
    MAX_STATE_BYTES,
    UNUSABLE,
    Forward,
    InputMessage,
    dead_letter,
    drop_shards_elsewhere,
    known_unusable,
    shard_of,
)
from sift.agents.tails import BusyTopics
from sift.filters.screening import Review
from sift.filters.screening.errors import ScreeningError
from sift.topics.codecs import decode_judgment, loads
from sift.topics.deadletter import DeadLetter
from sift.topics.errors import RecordError
from sift.topics.records import MAX_EPOCH_CHARS, Document, clip, new_profile_epoch
from sift.topics.review import (
    REQUESTS_TOPIC,
    STATUS_TOPIC,
    JudgmentRequest,
    ReviewDocuments,
    ReviewSpec,
    ReviewStatus,
    decode_review_documents,
    encode_review,
    is_review_obj,
    review_names,
)

log = logging.getLogger("sift.worker")

#: Version of the review record. 2 (since the thirty-ninth session): the documents' texts
#: and each batch's ranks are in chunk records of their own (see :func:`chunk_key`);
#: 1: everything inside the record, still read.
REVIEW_FORMAT = 2
REVIEW_TABLE = "review_to_state"
REVIEW_DOCUMENTS_TOPIC = "review-documents"
#: Topics the worker must create before it subscribes (see ``prepare_topics``).
REVIEW_WIRE_TOPICS = (REQUESTS_TOPIC, STATUS_TOPIC)
#: A chunk of a review's texts holds at most this many bytes of UTF-8 text (a longer
#: text has one of its own): about 1.6 MB compressed for English abstracts.
CHUNK_TEXT_BYTES = 4 * 1024 * 1024
#: Separates a review's name from the rest of a chunk's key (review names may not contain
#: it, see :class:`~sift.topics.review.ReviewSpec`).
CHUNK_SEPARATOR = "\x00"


def chunk_key(name: str, k: int) -> str:
    """The review table's key of chunk ``k`` of review ``name``'s texts.

    A review's state record holds its documents' ids and labels and what each batch drew;
    the texts and each batch's ranks of every document (most of the bytes, and the parts
    that never change once written) are in chunks under these keys and those of
    :func:`ranks_key`, in the same table and so in the same changelog partition as the
    record (:class:`~sift.agents.app.ShardedTable` places a key by the name before the
    separator). Chunks are written before the record that counts them, and a record only
    ever reads the first ``count`` texts and the ranks of its own batches, so a worker
    that dies between the two leaves a state that loads (what the new chunks hold beyond
    the record is written again, the same, when the unacknowledged messages come again).
    Only the last text chunk grows: adding documents rewrites at most one chunk of
    ``CHUNK_TEXT_BYTES`` plus the new ones, and a batch of judgments writes the record and
    the ranks of the batch it asks for, if any.
    """
    return f"{name}{CHUNK_SEPARATOR}{k}"


def ranks_key(name: str, t: int) -> str:
    """The review table's key of the ranks of review ``name``'s batch ``t`` (see
    :func:`chunk_key`)."""
    return f"{name}{CHUNK_SEPARATOR}r{t}"


def is_chunk_key(key: str) -> bool:
    """Whether a review table key is a chunk's (and not a review's name)."""
    return CHUNK_SEPARATOR in key


class ReviewNames(Container[str]):
    """The names of the reviews a review table holds (its records' keys, not its chunks'):
    what :class:`~sift.agents.service.Service` checks a standing profile spec's name
    against (``review_exists``), as a review spec's is checked against the standing
    profiles (``profile_exists``). The same test as the judgments' routing
    (:meth:`ReviewService.claims`): a name that is a review here is the review's."""

    def __init__(self, table: Mapping[str, bytes]) -> None:
        self.table = table

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and not is_chunk_key(name) and name in self.table


@dataclass
class ReviewEntry:
    """A review as the service keeps it: spec, the core's review, judgment keys seen,
    and where its parts are stored: the first text of each stored chunk (``starts``), the
    texts stored (``stored``), the UTF-8 bytes of the last chunk (``open_bytes``), and the
    batches whose ranks are stored (``ranks_stored``)."""

    spec: ReviewSpec
    review: Review
    judged: dict[str, None] = field(default_factory=dict)
    starts: list[int] = field(default_factory=list)
    stored: int = 0
    open_bytes: int = 0
    ranks_stored: int = 0
    #: the id of the review's life (:func:`~sift.topics.records.new_profile_epoch`), on
    #: its requests; a judgment carrying another is refused (``stale_review``). Empty for
    #: a review from before the fifty-second session: nothing is checked
    profile_epoch: str = ""


#: a compressed record starts with this (a plain one, as written before, with ``{``)
ZLIB_PREFIX = b"sift-zlib:"
#: the largest record, decompressed, a review may have (a guard against a damaged value)
MAX_REVIEW_JSON_BYTES = 1 << 30


def _utf8_bytes(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _layout(entry: ReviewEntry) -> tuple[list[int], int, int]:
    """``(starts, open_bytes, first)``: the chunks of the entry's texts once its new ones
    are stored, and the first chunk that has to be (re)written."""
    texts = entry.review.texts_
    if not texts:
        return [], 0, 0
    starts = list(entry.starts) or [0]
    open_bytes = entry.open_bytes if entry.starts else 0
    first = len(starts) - 1 if entry.stored < len(texts) else len(starts)
    for i in range(entry.stored, len(texts)):
        size = _utf8_bytes(texts[i])
        if open_bytes and open_bytes + size > CHUNK_TEXT_BYTES:
            starts.append(i)
            open_bytes = 0
        open_bytes += size
    return starts, open_bytes, first


def _epoch(entry: ReviewEntry) -> str:
    """What a review's chunks are marked with, so that a chunk left by an earlier review of
    the same name (another spec, or another first document) is never read as this one's:
    a hash of the spec and the first document's id (the same for the same input, so that
    records are reproducible)."""
    ids = entry.review.ids_
    h = hashlib.blake2b(orjson.dumps(entry.spec.to_obj()), digest_size=8)
    h.update(b"\x00" + (ids[0] if ids else "").encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _compress(obj: Any) -> bytes:
    return ZLIB_PREFIX + zlib.compress(orjson.dumps(obj), 1)


def encode_review_record(entry: ReviewEntry) -> bytes:
    """Table value: orjson of the spec, the core's versioned state without the texts and
    the batches' ranks, the judgment keys and where the texts are (the chunks
    :func:`encode_chunks` gives), zlib-compressed (level 1)."""
    starts, _, _ = _layout(entry)
    state = entry.review.to_state(without=("texts", "ranks"))
    return _compress({"format": REVIEW_FORMAT, "spec": entry.spec.to_obj(), "state": state,
                      "judged": list(entry.judged),
                      "texts": {"epoch": _epoch(entry), "starts": starts,
                                "count": len(entry.review.texts_)},
                      **({"profile_epoch": entry.profile_epoch} if entry.profile_epoch else {})})


def encode_chunks(entry: ReviewEntry) -> tuple[list[tuple[str, bytes]], list[int], int]:
    """The chunk records to write before the entry's record (``(key, value)`` each: the
    last stored text chunk if it takes new texts, the new ones, and the ranks of the
    batches not stored yet), with the texts' layout they make (``starts``, ``open_bytes``)."""
    starts, open_bytes, first = _layout(entry)
    review, name, epoch = entry.review, entry.spec.review, _epoch(entry)
    texts = review.texts_
    out = []
    for k in range(first, len(starts)):
        end = starts[k + 1] if k + 1 < len(starts) else len(texts)
        out.append((chunk_key(name, k), _compress(
            {"format": REVIEW_FORMAT, "review": name, "epoch": epoch, "start": starts[k],
             "texts": texts[starts[k] : end]})))
    for t in range(entry.ranks_stored, len(review.batches_)):
        out.append((ranks_key(name, t), _compress(
            {"format": REVIEW_FORMAT, "review": name, "epoch": epoch, "batch": t,
             "ranks": Review.encode_ranks(review.batches_[t])})))
    return out, starts, open_bytes


def review_record_obj(data: bytes) -> Any:
    """The JSON object of a review record, compressed or not; ScreeningError if the
    compressed bytes are damaged."""
    if data.startswith(ZLIB_PREFIX):
        inflate = zlib.decompressobj()
        try:
            raw = inflate.decompress(memoryview(data)[len(ZLIB_PREFIX):], MAX_REVIEW_JSON_BYTES)
        except zlib.error as exc:
            raise ScreeningError(f"bad review record: not zlib: {exc}") from None
        if inflate.unconsumed_tail:
            raise ScreeningError(f"review record is over {MAX_REVIEW_JSON_BYTES} bytes decompressed")
        if not inflate.eof:
            raise ScreeningError("review record is truncated (incomplete zlib stream)")
        data = raw
    return orjson.loads(data)


def _count(value: Any, what: str) -> int:
    if type(value) is not int or value < 0:
        raise ScreeningError(f"bad review record: {what} must be an integer >= 0, got {value!r:.40}")
    return value


def _chunk(name: str, key: str, what: str, chunks: Mapping[str, bytes] | None) -> Any:
    """The JSON object of one chunk record; ScreeningError if it is missing or unreadable."""
    raw = chunks.get(key) if chunks is not None else None
    if raw is None:
        raise ScreeningError(f"review {name!r}: {what} is missing")
    try:
        return review_record_obj(raw)
    except orjson.JSONDecodeError as exc:
        raise ScreeningError(f"review {name!r}: {what} is not JSON: {exc}") from None


def _read_ranks(name: str, epoch: Any, batches: Any, chunks: Mapping[str, bytes] | None
                ) -> list[Any]:
    """The state's batches with each one's ranks read from its chunk."""
    if not isinstance(batches, list) or not all(isinstance(b, dict) and "ranks" not in b
                                                for b in batches):
        raise ScreeningError("bad review record: batches must be a list of objects "
                             "without their ranks")
    out = []
    for t, batch in enumerate(batches):
        what = f"the ranks of batch {t}"
        obj = _chunk(name, ranks_key(name, t), what, chunks)
        if (not isinstance(obj, dict) or obj.get("format") != REVIEW_FORMAT
                or obj.get("review") != name or obj.get("epoch") != epoch
                or obj.get("batch") != t or "ranks" not in obj):
            raise ScreeningError(f"review {name!r}: {what} are not the ones its record names "
                                 f"(epoch {epoch})")
        out.append({**batch, "ranks": obj["ranks"]})
    return out


def _read_texts(name: str, where: Any, chunks: Mapping[str, bytes] | None
                ) -> tuple[list[str], list[int], int]:
    """The texts a format-2 record names, read from its chunks: ``(texts, starts,
    open_bytes)``; ScreeningError when the record's pointer or a chunk is unusable (the
    epoch is checked against the review's once it is rebuilt)."""
    if not isinstance(where, dict):
        raise ScreeningError("bad review record: 'texts' must be an object")
    epoch, starts, count = where.get("epoch"), where.get("starts"), where.get("count")
    if not isinstance(epoch, str) or not 0 < len(epoch) <= 64:
        raise ScreeningError(f"bad review record: texts epoch must be a short string, got {epoch!r:.40}")
    count = _count(count, "texts count")
    if not isinstance(starts, list) or len(starts) > count:
        raise ScreeningError("bad review record: texts starts must be a list of at most "
                             "count integers")
    for k, s in enumerate(starts):
        _count(s, "a chunk's first text")
        if s >= count or (s != 0 if k == 0 else s <= starts[k - 1]):
            raise ScreeningError("bad review record: texts starts must increase from 0, "
                                 f"below the count {count}, got {s!r} at {k}")
    if count and not starts:
        raise ScreeningError(f"bad review record: {count} texts in no chunk")
    texts: list[str] = []
    last: list[str] = []
    for k, start in enumerate(starts):
        need = (starts[k + 1] if k + 1 < len(starts) else count) - start
        obj = _chunk(name, chunk_key(name, k), f"text chunk {k}", chunks)
        got = obj.get("texts") if isinstance(obj, dict) else None
        if (not isinstance(obj, dict) or obj.get("format") != REVIEW_FORMAT
                or obj.get("review") != name or obj.get("epoch") != epoch
                or obj.get("start") != start or not isinstance(got, list)):
            raise ScreeningError(f"review {name!r}: text chunk {k} is not the one its record "
                                 f"names (epoch {epoch}, first text {start})")
        if len(got) < need or not all(isinstance(t, str) for t in got[:need]):
            raise ScreeningError(f"review {name!r}: text chunk {k} has {len(got)} texts, "
                                 f"{need} needed, or one is not a string")
        last = got[:need]
        texts.extend(last)
    return texts, list(starts), sum(map(_utf8_bytes, last))


def decode_review_record(data: bytes, name: str | None = None,
                         chunks: Mapping[str, bytes] | None = None) -> ReviewEntry:
    """Inverse of :func:`encode_review_record`, the texts read from ``chunks`` (the review
    table; a record written before format 2 has its texts inside); ScreeningError on a bad
    record or chunk."""
    try:
        obj = review_record_obj(data)
        fmt = obj.get("format")
        if fmt not in (1, REVIEW_FORMAT):
            raise ScreeningError(f"review record format {fmt!r} is not 1 or {REVIEW_FORMAT}")
        spec = ReviewSpec.from_obj(obj["spec"])
        state = obj["state"]
        layout: tuple[Any, list[int], int] | None = None
        if fmt == REVIEW_FORMAT:
            if not isinstance(state, dict) or "texts" in state:
                raise ScreeningError("bad review record: its state must be an object without texts")
            texts, starts, open_bytes = _read_texts(spec.review, obj.get("texts"), chunks)
            epoch = obj["texts"]["epoch"]
            batches = _read_ranks(spec.review, epoch, state.get("batches"), chunks)
            state = {**state, "texts": texts, "batches": batches}
            layout = (epoch, starts, open_bytes)
        review = Review.from_state(state)
        # one spec, one review: a record is written from a spec and the review built from
        # it (its query the topic, each param the spec sets as given), so a state run with
        # other params is damage, not this spec's review (compared as stored: from_state
        # reads an older record's hh_window 0 as 1; forty-ninth session, R6)
        stored = state["params"]
        if stored.get("topic") != spec.query or any(
                k not in stored or stored[k] != v for k, v in spec.params.items()):
            raise ScreeningError("bad review record: its state's params are not its spec's")
        judged = dict.fromkeys(str(k) for k in obj.get("judged", ()))
        life = obj.get("profile_epoch", "")  # none before the fifty-second session
        if not isinstance(life, str) or len(life) > MAX_EPOCH_CHARS:
            raise ScreeningError(f"bad review record: profile_epoch {life!r:.80}")
    except ScreeningError:
        raise
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError, RecordError,
            ValueError, OverflowError) as exc:  # whatever from_state did not anticipate
        raise ScreeningError(f"bad review record: {' '.join(str(exc).split())}") from None
    if name is not None and spec.review != name:
        raise ScreeningError(f"record under {name!r} is for review {spec.review!r}")
    entry = ReviewEntry(spec, review, judged, profile_epoch=life)
    if layout is not None:  # (format 1: the next write stores every text in chunks)
        if layout[0] != _epoch(entry):
            raise ScreeningError(f"review {spec.review!r}: its record's texts epoch is not "
                                 "its own (a record of another review?)")
        entry.starts, entry.open_bytes = layout[1], layout[2]
        entry.stored, entry.ranks_stored = len(review.texts_), len(review.batches_)
    return entry


#: the share of a review's record its documents may fill: the rest is kept for the ranks
#: each batch records of every document (about 100 KB a batch at 30,000 documents,
#: compressed), which judgments add until the review stops
DOCUMENTS_SHARE = 0.75


@dataclass(frozen=True)
class Change:
    """One message's change to a review, replayable on another copy of the review."""

    msg: InputMessage
    apply: Callable[[ReviewEntry], None]
    units: int  # documents or judgments it brings
    what: str  # how a dead letter names it


def _add_documents(entry: ReviewEntry, *, ids: list[str], texts: list[str]) -> None:
    entry.review.add_documents(ids, texts)


def _record_judgment(entry: ReviewEntry, *, doc_id: str, relevant: bool, key: str) -> None:
    entry.review.record_judgment(doc_id, relevant)
    entry.judged[key] = None


@dataclass
class ReviewResult:
    """What one call produced: records to emit and dead letters."""

    requests: list[JudgmentRequest] = field(default_factory=list)
    statuses: list[ReviewStatus] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    forwards: list[Forward] = field(default_factory=list)
    documents: list[ReviewDocuments] = field(default_factory=list)

    def extend(self, other: ReviewResult) -> None:
        self.requests.extend(other.requests)
        self.statuses.extend(other.statuses)
        self.dead_letters.extend(other.dead_letters)
        self.forwards.extend(other.forwards)
        self.documents.extend(other.documents)


def status_of(name: str, review: Review, profile_epoch: str = "") -> ReviewStatus:
    """The status record of a review now.

    With no completed sampling batch since the collection last changed the estimate is not
    ``sampled``: ``recall_estimate`` is None (null on the wire: NaN is not JSON) and
    ``recall_lower`` 0.0; once every document is judged the recall is exactly 1.
    """
    est = review.estimate()
    n = review.n_documents
    complete = bool(n and review.screened == n)
    if complete:
        # nothing left unseen: R is what was found and the recall 1, whatever was sampled
        # (the estimator's R-hat, 23.6 for 20 found, stood beside a recall of 1.000;
        # forty-ninth session, R4)
        recall: float | None = 1.0
        lower = 1.0
        r_hat, var = float(est.found), 0.0
    else:
        recall = float(est.recall()) if est.sampled else None
        lower = float(est.recall_lower(review.confidence))
        r_hat, var = float(est.r_hat), float(est.var)
    return ReviewStatus(
        review=name, documents=n, screened=review.screened, found=est.found,
        pending=len(review.pending_), batches=len(review.batches_), r_hat=r_hat,
        r_hat_var=var, recall_estimate=recall, recall_lower=lower,
        estimator=review.estimator, target_recall=float(review.target_recall),
        stop=bool(n and review.should_stop()), complete=complete, ts=time.time(),
        profile_epoch=profile_epoch)


class ReviewService:
    """Review specs, documents and judgments -> state in a mapping, requests and statuses.

    Parameters
    ----------
    n_shards
        Partitions of the profiles, judgments and review-documents topics.
    standing
        The standing profiles' table (a review may not take a standing profile's name).
    """

    def __init__(self, *, n_shards: int = 4,
                 standing: MutableMapping[str, bytes] | None = None) -> None:
        self.n_shards = n_shards
        self.standing = standing
        self.stats: Counter[str] = Counter()
        self._cache: dict[str, tuple[bytes, ReviewEntry]] = {}
        self._bad: dict[str, bytes] = {}  # unusable table values, reported once each

    def _dead(self, out: ReviewResult, msg: InputMessage, err: RecordError,
              original: bytes | None = None) -> None:
        self.stats["review_dead_letters"] += 1
        out.dead_letters.append(dead_letter(msg, err, original))

    # -- state ----------------------------------------------------------------------------
    def forget(self) -> None:
        """Drop the reviews held in memory: the next use decodes them from the table."""
        self._cache.clear()

    def keep_shards(self, shards: Container[int]) -> None:
        """Drop the reviews held in memory whose shard is not in ``shards`` (the review
        table's partitions this worker holds, after a rebalance), and the unusable values
        remembered for them.

        A review whose partition moved to another worker is that worker's; if the
        partition comes back, recovery puts new values in the table and the review is
        decoded again from them, so nothing kept of it here is ever used again. Before the
        fifty-fourth session every review a worker had touched stayed decoded in it (its
        texts, its model's matrices: tens of MB for a large review) until the process
        ended, also once it lived elsewhere, or had been deleted there."""
        drop_shards_elsewhere(self._cache, shards, self.n_shards)
        drop_shards_elsewhere(self._bad, shards, self.n_shards)

    def entry(self, name: str, table: MutableMapping[str, bytes]) -> ReviewEntry | None:
        raw = None if is_chunk_key(name) else table.get(name)
        if raw is None:
            return None
        hit = self._cache.get(name)
        if hit is not None and hit[0] is raw:
            return hit[1]
        if known_unusable(self._bad, name, raw):  # said once already
            return None
        try:
            entry = decode_review_record(raw, name, table)
        except MemoryError:
            raise  # the worker's, not the value's: not a reason to skip the review for good
        except Exception as exc:
            # ScreeningError, or what no check foresaw (a bug, or a value no test made):
            # this value's fault either way, so it costs this review, not every batch that
            # names it (before, the batch failed, each message was retried alone and
            # dead-lettered internal_error, and neither a deletion nor the spec sent again
            # got past it; forty-ninth session, R1)
            self._bad[name] = raw
            self.stats["review_bad_state"] += 1
            why = str(exc) if isinstance(exc, ScreeningError) else f"{type(exc).__name__}: {exc}"
            log.warning("review %r: unusable state record, review skipped (send its spec "
                        "again to rebuild it): %s", name, clip(why))
            return None
        self._bad.pop(name, None)
        self._cache[name] = (raw, entry)
        return entry

    def _write(self, name: str, entry: ReviewEntry, table: MutableMapping[str, bytes],
               raw: bytes | None = None) -> None:
        """Write the entry back (``raw``: its record, if already encoded): its new chunks
        first, then the record that counts them (see :func:`chunk_key`)."""
        chunks, starts, open_bytes = encode_chunks(entry)
        raw = encode_review_record(entry) if raw is None else raw
        if len(raw) > MAX_STATE_BYTES:
            # the changelog will refuse it (the worker logs the failed write too): say
            # which review, so that its documents can be split into smaller reviews
            self.stats["review_state_too_large"] += 1
            log.error("review %r: its state record is %.1f MiB, over the %.0f MiB the changelog "
                      "takes; it will not survive a restart", name, len(raw) / 2**20,
                      MAX_STATE_BYTES / 2**20)
        for key, value in chunks:
            table[key] = value
            self.stats["review_chunks_written"] += 1
        table[name] = raw
        entry.starts, entry.stored, entry.open_bytes = starts, len(entry.review.texts_), open_bytes
        entry.ranks_stored = len(entry.review.batches_)
        self._cache[name] = (raw, entry)
        self._bad.pop(name, None)  # a value found bad before is no longer the review's
        self.stats["review_state_bytes_max"] = max(self.stats["review_state_bytes_max"], len(raw))

    def _advance(self, name: str, entry: ReviewEntry, out: ReviewResult, *,
                 resend: bool = False, stats: Counter[str] | None = None) -> None:
        """Ask for the next batch when nothing is pending and the rule has not fired.

        The status (estimates, stopping rule) is guarded: when it cannot be computed the
        review is not stopped (it goes on asking), no status is published for it this time,
        one line is logged and ``review_status_errors`` counted; the state is still written.
        So is the next batch: when its model cannot be fitted no request goes out, one line
        is logged and ``review_batch_errors`` counted, and the judgments and documents that
        came are kept (written, not dead-lettered); the review is left as it was before the
        attempt, and the next change to it (or its spec sent again) asks again.
        ``stats``: the counter to count in (the service's by default).
        """
        stats = self.stats if stats is None else stats
        review = entry.review
        ready = bool(review.n_documents) and not review.pending_
        failed = False
        try:
            more = ready and not review.should_stop()
        except Exception as exc:  # a bug in an estimator must not stall the review
            self._status_failed(name, exc, stats)
            more, failed = ready, True
        if more:
            try:
                batch = review.next_batch()
            except Exception as exc:  # a model that cannot be fitted must not stall the worker
                stats["review_batch_errors"] += 1
                log.warning("review %r: next batch not computed, no request sent: %s: %s", name,
                            type(exc).__name__, " ".join(str(exc).split()))
                batch = []
            resend = bool(batch)
        if resend and review.pending_:
            t, now = len(review.batches_), time.time()
            out.requests.extend(JudgmentRequest(name, d, t, i + 1, now, entry.profile_epoch)
                                for i, d in enumerate(review.pending_))
            stats["review_requests"] += len(review.pending_)
        if failed:
            return
        try:
            status = status_of(name, review, entry.profile_epoch)
        except Exception as exc:
            self._status_failed(name, exc, stats)
            return
        out.statuses.append(status)

    def _status_failed(self, name: str, exc: Exception, stats: Counter[str]) -> None:
        stats["review_status_errors"] += 1
        log.warning("review %r: status not computed, none published: %s: %s", name,
                    type(exc).__name__, " ".join(str(exc).split()))

    # -- specs ----------------------------------------------------------------------------
    @staticmethod
    def is_review_spec(msg: InputMessage) -> bool:
        """Whether a profiles-topic message is a review spec (undecodable ones are not)."""
        try:
            return is_review_obj(loads(msg.value or b""))
        except RecordError:
            return False

    def apply_specs(self, messages: Iterable[InputMessage], table: MutableMapping[str, bytes],
                    *, standing: Container[str] | None = None) -> ReviewResult:
        """Create, re-announce or delete reviews. ``standing``: the standing profiles'
        names to check new reviews against, in place of the table given at construction
        (a caller off the event loop passes the names it looked up there)."""
        standing = self.standing if standing is None else standing
        out = ReviewResult()
        for msg in messages:
            try:
                spec = ReviewSpec.from_obj(loads(msg.value or b""))
            except RecordError as exc:
                self._dead(out, msg, exc)
                continue
            name = spec.review
            if shard_of(name, self.n_shards) != msg.partition:
                out.forwards.append(Forward(msg.topic, shard_of(name, self.n_shards),
                                            name.encode(), msg.value or b""))
                continue
            if spec.delete:  # (whatever its record holds: deleting never decodes it)
                if name not in table:
                    self._dead(out, msg, RecordError(
                        "unknown_review", f"cannot delete review {name!r}: no such review"))
                    continue
                del table[name]
                for key_of in (chunk_key, ranks_key):  # its chunks (and one a write that
                    k = 0                               # did not finish may have left)
                    while key_of(name, k) in table:
                        del table[key_of(name, k)]
                        k += 1
                self._cache.pop(name, None)
                self._bad.pop(name, None)
                self.stats["reviews_deleted"] += 1
                continue
            current = self.entry(name, table)
            if current is not None:
                if current.spec != spec:
                    self._dead(out, msg, RecordError(
                        "review_exists", f"review {name!r} exists with another query or "
                        "params; delete it first"))
                    continue
                batches = len(current.review.batches_)
                self._advance(name, current, out, resend=True)
                if len(current.review.batches_) != batches:
                    # a batch asked for now (after one that could not be computed) is
                    # written before its requests go out, as after any other change: it
                    # lived only in memory, and a restart, a rebalance or a retry from the
                    # table took its answers as unrequested (forty-ninth session, R5)
                    self._write(name, current, table)
                continue
            if standing is not None and name in standing:
                self._dead(out, msg, RecordError(
                    "profile_exists", f"{name!r} is a standing profile; a review needs "
                    "another name"))
                continue
            params = dict(spec.params)
            params.setdefault("random_state", zlib.crc32(name.encode()))
            try:
                review = Review(spec.query, **params)
            except (ScreeningError, TypeError) as exc:
                self._dead(out, msg, RecordError("bad_params", f"review {name!r}: {exc}"))
                continue
            entry = ReviewEntry(spec, review, profile_epoch=new_profile_epoch())
            self._write(name, entry, table)
            self.stats["reviews_created"] += 1
            self._advance(name, entry, out)
        return out

    # -- documents ------------------------------------------------------------------------
    def route_documents(self, messages: Iterable[InputMessage]) -> ReviewResult:
        """Documents naming a review -> :class:`ReviewDocuments` for the review's shard.

        Undecodable documents are the standing agent's to dead-letter; here only a bad
        ``metadata.review`` is (``bad_review``).
        """
        decoded: list[tuple[InputMessage, list[Document]]] = []
        for msg in messages:
            try:
                obj = loads(msg.value or b"")
            except RecordError:
                continue
            items = obj["documents"] if (isinstance(obj, dict) and "documents" in obj
                                         and "id" not in obj) else [obj]
            if not isinstance(items, list):
                continue
            docs = []
            for item in items:
                try:
                    docs.append(Document.from_obj(item))
                except RecordError:
                    continue
            decoded.append((msg, docs))
        return self.route_decoded(decoded)

    def route_decoded(self, decoded: Iterable[tuple[InputMessage, Sequence[Document]]]
                      ) -> ReviewResult:
        """:meth:`route_documents` of documents already decoded (by the standing routing,
        which hands over those with metadata), each with the message it came in."""
        out = ReviewResult()
        groups: dict[str, tuple[list[str], list[str]]] = {}
        for msg, docs in decoded:
            for doc in docs:
                if not doc.metadata:
                    continue
                try:
                    names = review_names(doc)
                except RecordError as exc:
                    self._dead(out, msg, exc, orjson.dumps(doc.to_obj()))
                    continue
                for name in names:
                    ids, texts = groups.setdefault(name, ([], []))
                    ids.append(doc.id)
                    texts.append(doc.scored_text)
        out.documents = [ReviewDocuments(n, tuple(i), tuple(t)) for n, (i, t) in groups.items()]
        return out

    def add_documents(self, messages: Iterable[InputMessage],
                      table: MutableMapping[str, bytes]) -> ReviewResult:
        """Internal review-documents messages -> the review's collection.

        Ids already in the collection are skipped (a re-delivered message, or a document
        sent twice), so this is idempotent.
        """
        out = ReviewResult()
        added: dict[str, list[tuple[InputMessage, list[str], list[str]]]] = {}
        for msg in messages:
            try:
                batch = decode_review_documents(msg.value or b"")
            except RecordError as exc:
                self._dead(out, msg, exc)
                continue
            entry = self.entry(batch.review, table)
            if entry is None:
                self._dead(out, msg, RecordError(
                    "unknown_review", f"{len(batch.ids)} document(s) for review "
                    f"{batch.review!r}, {UNUSABLE}" if batch.review in ReviewNames(table)
                    else f"{len(batch.ids)} document(s) for unknown review "
                    f"{batch.review!r}: create the review first"))
                continue
            known = entry.review.index_
            seen: set[str] = set()
            ids, texts = [], []
            for doc_id, text in zip(batch.ids, batch.texts, strict=True):
                if doc_id not in known and doc_id not in seen:
                    seen.add(doc_id)
                    ids.append(doc_id)
                    texts.append(text)
            if ids:
                entry.review.add_documents(ids, texts)
                added.setdefault(batch.review, []).append((msg, ids, texts))
        for name, parts in added.items():
            changes = [Change(m, functools.partial(_add_documents, ids=ids, texts=texts),
                              len(ids), f"{len(ids)} more document(s)") for m, ids, texts in parts]
            n = self._commit(name, changes, table, out, int(DOCUMENTS_SHARE * MAX_RECORD_BYTES))
            self.stats["review_documents"] += n
        return out

    def _commit(self, name: str, changes: list[Change], table: MutableMapping[str, bytes],
                out: ReviewResult, limit: int) -> int:
        """Write back a review its messages have just changed (in the cached entry), with
        the next batch asked for, if its record stays within ``limit`` bytes. Else keep the
        longest run of its messages, in order, whose record does, found by bisection from
        the record in the table, and dead-letter the others (``state_too_large``): the
        record never outgrows the changelog. Returns the units the kept messages brought."""
        entry = self._cache[name][1]
        res, counted = ReviewResult(), Counter[str]()
        self._advance(name, entry, res, stats=counted)
        raw = encode_review_record(entry)
        if len(raw) > limit:
            before = table[name]

            def with_first(k: int) -> tuple[ReviewEntry, ReviewResult, Counter[str], bytes]:
                trial = decode_review_record(before, name, table)
                for change in changes[:k]:
                    change.apply(trial)
                r, c = ReviewResult(), Counter[str]()
                self._advance(name, trial, r, stats=c)
                return trial, r, c, encode_review_record(trial)

            lo, hi, size = 0, len(changes), len(raw)  # the first lo fit, the first hi do not
            kept: tuple[ReviewEntry, ReviewResult, Counter[str], bytes] | None = None
            while hi - lo > 1:
                mid = (lo + hi) // 2
                trial = with_first(mid)
                if len(trial[3]) <= limit:
                    lo, kept = mid, trial
                else:
                    hi, size = mid, len(trial[3])
            for change in changes[lo:]:
                self.stats["review_state_too_large"] += 1
                self._dead(out, change.msg, RecordError(
                    "state_too_large", f"review {name!r} cannot take {change.what}: its state "
                    f"record would reach {size / 2**20:.1f} MiB, over the {limit / 2**20:.1f} MiB "
                    f"it may have ({MAX_STATE_BYTES / 2**20:.0f} MiB is what its changelog "
                    "takes); split the collection into several reviews"))
            if kept is None:  # nothing fits: the review stays as the table has it
                self._cache[name] = (before, decode_review_record(before, name, table))
                return 0
            entry, res, counted, raw = kept
            changes = changes[:lo]
        out.requests.extend(res.requests)
        out.statuses.extend(res.statuses)
        self.stats.update(counted)
        self._write(name, entry, table, raw)
        return sum(change.units for change in changes)

    # -- judgments ------------------------------------------------------------------------
    def claims(self, msg: InputMessage, table: MutableMapping[str, bytes]) -> bool:
        """Whether a judgments-topic message is for a review held in ``table``, on the
        review's own partition.

        One on another partition is left to the standing agent, which forwards it to the
        review's shard (as it does its profiles' judgments, and as review specs are
        forwarded), where the worker owning the review applies it. Applied here, from
        whatever copy of the review this worker's table holds (Faust's memory store keeps
        the keys a worker wrote itself after their partition is revoked), it would write
        that copy to the owner's changelog partition over the owner's newer record
        (forty-ninth session, R2).
        """
        try:
            j = decode_judgment(msg.value or b"")
        except RecordError:
            return False
        return (shard_of(j.profile, self.n_shards) == msg.partition
                and j.profile in ReviewNames(table))

    def apply_judgments(self, messages: Iterable[InputMessage],
                        table: MutableMapping[str, bytes]) -> ReviewResult:
        out = ReviewResult()
        changed: dict[str, list[Change]] = {}
        for msg in messages:
            try:
                j = decode_judgment(msg.value or b"")
            except RecordError as exc:
                self._dead(out, msg, exc)
                continue
            entry = self.entry(j.profile, table)
            if entry is None:
                self._dead(out, msg, RecordError(
                    "unknown_review", f"judgment for review {j.profile!r}, {UNUSABLE}"
                    if j.profile in ReviewNames(table)
                    else f"judgment for unknown review {j.profile!r}"))
                continue
            if j.profile_epoch is not None and entry.profile_epoch \
                    and j.profile_epoch != entry.profile_epoch:
                self._dead(out, msg, RecordError(
                    "stale_review", f"judgment of document {j.doc_id!r} for review "
                    f"{j.profile!r} of epoch {clip(j.profile_epoch, 80)!r}: that review was "
                    f"deleted; the review now is epoch {entry.profile_epoch!r}"))
                continue
            if j.key in entry.judged:
                self.stats["review_judgments_duplicate"] += 1
                continue
            if j.doc_id not in entry.review.index_:
                self._dead(out, msg, RecordError(
                    "unknown_document", f"judgment of document {j.doc_id!r}, which is not in "
                    f"review {j.profile!r}"))
                continue
            change = Change(msg, functools.partial(_record_judgment, doc_id=j.doc_id,
                                                   relevant=j.relevant, key=j.key),
                            1, f"the judgment of {j.doc_id!r}")
            change.apply(entry)
            changed.setdefault(j.profile, []).append(change)
        for name, changes in changed.items():
            self.stats["review_judgments"] += self._commit(name, changes, table, out,
                                                           MAX_RECORD_BYTES)
        return out


# --------------------------------------------------------------------------- Faust wiring
class TableCopy(MutableMapping[str, bytes]):
    """The records of a few reviews, copied out of the review table, with the changes
    made to them kept in order (:attr:`changes`: ``(key, value)``, ``None`` for a
    deletion), so that a review's work can run off the event loop on this plain dict and
    its writes be made to the table afterwards, by the loop, in the order made (a
    review's chunks before its record)."""

    def __init__(self, table: Mapping[str, bytes], names: Iterable[str]) -> None:
        self.data: dict[str, bytes] = {}
        self.changes: list[tuple[str, bytes | None]] = []
        for name in dict.fromkeys(names):
            raw = None if is_chunk_key(name) else table.get(name)
            if raw is None:
                continue
            self.data[name] = raw
            for key_of in (chunk_key, ranks_key):
                k = 0
                while (chunk := table.get(key_of(name, k))) is not None:
                    self.data[key_of(name, k)] = chunk
                    k += 1

    def __getitem__(self, key: str) -> bytes:
        return self.data[key]

    def __setitem__(self, key: str, value: bytes) -> None:
        self.data[key] = value
        self.changes.append((key, value))

    def __delitem__(self, key: str) -> None:
        del self.data[key]
        self.changes.append((key, None))

    def __iter__(self) -> Any:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def apply_to(self, table: MutableMapping[str, bytes]) -> None:
        """Make the changes to ``table``, in order."""
        for key, value in self.changes:
            if value is not None:
                table[key] = value
            elif key in table:
                del table[key]


def _names(messages: Sequence[InputMessage], kind: str) -> list[str]:
    """The reviews that messages of ``kind`` (``specs``, ``documents`` or ``judgments``)
    name; messages that do not decode name none (the service dead-letters them)."""
    names = []
    for msg in messages:
        try:
            if kind == "judgments":
                names.append(decode_judgment(msg.value or b"").profile)
            elif kind == "documents":
                names.append(decode_review_documents(msg.value or b"").review)
            else:
                obj = loads(msg.value or b"")
                if isinstance(obj, dict) and isinstance(obj.get("profile"), str):
                    names.append(obj["profile"])
        except RecordError:
            continue
    return names


@dataclass
class ReviewHooks:
    """The review agents of one worker, and the hooks the standing agents call.

    A review's work (a new model over all its documents with each batch, the status)
    runs in a thread, one call at a time: a review of 100,000 documents spends about 20 s
    on its first model, which on the event loop would stall every other agent and the
    consumer's heartbeats that long. The thread works on the named reviews' records,
    copied out of the table (:class:`TableCopy`); the loop then makes its writes.
    """

    service: ReviewService
    table: MutableMapping[str, bytes]
    topics: dict[str, Any]
    emit_dead: Any
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    #: held by the thread itself: a call whose awaiting task was cancelled (a rebalance)
    #: still runs to its end before the next one starts on the same service
    thread_lock: threading.Lock = field(default_factory=threading.Lock)

    async def run(self, fn: Callable[..., ReviewResult], messages: list[InputMessage],
                  kind: str) -> ReviewResult:
        """``guarded(fn, messages, ...)`` in a thread, on a copy of the reviews the messages
        name; the writes made to the table afterwards. Returns what to emit."""
        async with self.lock:
            names = _names(messages, kind)
            copy = TableCopy(self.table, names)
            standing = self.service.standing
            if kind == "specs" and standing is not None:  # the standing table read here
                fn = functools.partial(fn, standing=frozenset(n for n in names if n in standing))
            result = await asyncio.to_thread(self._guarded, fn, messages, copy)
            copy.apply_to(self.table)
            return result

    def _guarded(self, fn: Callable[..., ReviewResult], messages: list[InputMessage],
                 table: MutableMapping[str, bytes]) -> ReviewResult:
        with self.thread_lock:
            return guarded(fn, messages, table)

    async def emit(self, result: ReviewResult) -> None:
        settle = getattr(self.table, "settle", None)
        if settle is not None:  # the review table's writes durable before the batch is acked
            await settle()
        await self.emit_dead(result.dead_letters)
        for r in result.requests:
            await self.topics[REQUESTS_TOPIC].send(key=r.review.encode(), value=encode_review(r))
        for s in result.statuses:
            await self.topics[STATUS_TOPIC].send(key=s.review.encode(), value=encode_review(s))
        for d in result.documents:
            await self.topics[REVIEW_DOCUMENTS_TOPIC].send(
                key=d.review.encode(), value=encode_review(d),
                partition=shard_of(d.review, self.service.n_shards))
        for f in result.forwards:
            await self.topics["profiles"].send(key=f.key, value=f.value, partition=f.partition)

    async def route_documents(self, decoded: Sequence[tuple[InputMessage, Sequence[Document]]]
                              ) -> None:
        """Send the documents naming a review to the review's shard.

        The standing routing agent calls this with the documents of each batch it
        consumed that carry metadata, already decoded: one stream over the documents
        topic, not two, and one decoding. (With a second agent on the topic every message
        had two references; one stream skipping a message during a rebalance left it
        unacknowledged forever, and Faust's rebalance waited for it until the group's
        session timeout expelled the worker; it also paid Faust's per-message cost twice.)
        """
        if not decoded:
            return
        try:
            result = self.service.route_decoded(decoded)
        except Exception:  # a bug here must not stop the standing documents' routing
            log.exception("routing documents of %d messages to reviews failed", len(decoded))
            return
        if result.documents or result.dead_letters:
            await self.emit(result)

    async def take_specs(self, messages: Sequence[InputMessage]) -> list[InputMessage]:
        """Apply the review specs among ``messages``; return the others."""
        mine = [m for m in messages if self.service.is_review_spec(m)]
        if not mine:
            return list(messages)
        await self.emit(await self.run(self.service.apply_specs, mine, "specs"))
        return [m for m in messages if not any(m is x for x in mine)]

    async def take_judgments(self, messages: Sequence[InputMessage]) -> list[InputMessage]:
        """Apply the judgments of reviews held here; return the others."""
        mine = [m for m in messages if self.service.claims(m, self.table)]
        if not mine:
            return list(messages)
        await self.emit(await self.run(self.service.apply_judgments, mine, "judgments"))
        return [m for m in messages if not any(m is x for x in mine)]


def guarded(fn: Any, messages: list[InputMessage], table: Any) -> ReviewResult:
    """``fn(messages, table)``; on a bug, message by message, dead-lettering failures.

    Retrying is safe: specs of existing reviews re-publish, documents and judgments
    already applied are skipped.
    """
    owner = getattr(getattr(fn, "func", fn), "__self__", None)  # (fn may be a partial)
    try:
        return fn(messages, table)  # type: ignore[no-any-return]
    except Exception:
        log.exception("review batch of %d messages failed; retrying one by one", len(messages))
    out = ReviewResult()
    for msg in messages:
        # what the failure left in memory is dropped: the retry starts from the table (a
        # judgment applied in memory but never written would be skipped as a duplicate)
        if isinstance(owner, ReviewService):
            owner.forget()
        try:
            out.extend(fn([msg], table))
        except Exception as exc:
            log.exception("review message %s[%d]@%d failed", msg.topic, msg.partition, msg.offset)
            out.dead_letters.append(dead_letter(msg, RecordError(
                "internal_error", f"{type(exc).__name__}: {exc}")))
    if isinstance(owner, ReviewService):
        owner.forget()
    return out


def attach(app: Any, settings: Any, topic: Any, documents_topic: Any, profiles_topic: Any,
           standing: MutableMapping[str, bytes], emit_dead: Any,
           busy: BusyTopics | None = None) -> ReviewHooks:
    """Add the review table, topics and agents to a worker's Faust app.

    ``topic(name, **kw)`` declares a raw-bytes topic with the worker's prefix and
    partitions; ``emit_dead(letters)`` sends dead letters; ``busy`` (the worker's
    :class:`~sift.agents.tails.BusyTopics`) learns when the review agent is inside a
    batch, so that the tail watch does not take the worker for idle meanwhile.
    """
    from sift.agents.app import (
        CHANGELOG_SEGMENT_BYTES,
        SHARD_RETENTION_MS,
        ShardedTable,
        TableView,
        take_events,
    )
    from sift.agents.service import InputMessage as Msg

    P = settings.partitions
    service = ReviewService(n_shards=P, standing=standing)
    class ReviewTable(ShardedTable):
        name_separator = CHUNK_SEPARATOR  # a review's chunks go with its record

    raw_table = app.tables.add(ReviewTable(
        app, name=REVIEW_TABLE, beacon=app.tables.beacon, partitions=P, key_type=bytes,
        value_type=bytes, extra_topic_configs={"max.message.bytes": str(MAX_STATE_BYTES),
                                               # compaction needs closed segments (see app.py)
                                               "segment.bytes": str(CHANGELOG_SEGMENT_BYTES)}))
    topics = {
        REQUESTS_TOPIC: topic(REQUESTS_TOPIC),
        STATUS_TOPIC: topic(STATUS_TOPIC),
        REVIEW_DOCUMENTS_TOPIC: topic(REVIEW_DOCUMENTS_TOPIC, retention=SHARD_RETENTION_MS / 1000,
                                      internal=True),
        "profiles": profiles_topic,
    }
    hooks = ReviewHooks(service, TableView(raw_table), topics, emit_dead)

    def to_msg(e: Any) -> InputMessage:
        m = e.message
        value = m.value if isinstance(m.value, bytes | None) else bytes(m.value)
        return Msg(value, m.topic, m.partition, m.offset, m.key)

    @app.agent(topics[REVIEW_DOCUMENTS_TOPIC],  # type: ignore[untyped-decorator]
               name="apply_review_documents")
    async def apply_review_documents(stream: Any) -> None:
        async for events in take_events(stream, 64, within=settings.batch_timeout, busy=busy):
            await hooks.emit(await hooks.run(service.add_documents, [to_msg(e) for e in events],
                                             "documents"))

    @app.on_partitions_assigned.connect  # type: ignore[untyped-decorator]
    async def forget_reviews_elsewhere(sender: Any, assigned: Any, **kwargs: Any) -> None:
        """Drop the decoded reviews of the partitions this worker no longer holds
        (:meth:`ReviewService.keep_shards`)."""
        changelog = raw_table.changelog_topic.get_topic_name()
        service.keep_shards({tp.partition for tp in assigned if tp.topic == changelog})

    return hooks


def prepare_review_topics(settings: Any) -> None:
    """Create the review topics before the worker subscribes (see ``prepare_topics``)."""
    from sift.agents.app import SHARD_RETENTION_MS
    from sift.kafkaclient import ensure_topics

    ensure_topics(settings, [settings.topic(t) for t in REVIEW_WIRE_TOPICS], settings.partitions)
    ensure_topics(settings, [settings.topic(REVIEW_DOCUMENTS_TOPIC)], settings.partitions,
                  configs={"retention.ms": str(SHARD_RETENTION_MS)})


def gold_reviewer(labels: dict[str, bool]) -> Any:
    """A simulated reviewer for tests and demos: answers requests from gold labels."""

    def answer(req: JudgmentRequest) -> dict[str, Any]:
        out = {"id": f"{req.review}/{req.doc_id}", "doc_id": req.doc_id, "profile": req.review,
               "relevant": bool(labels[req.doc_id]), "judge": "gold"}
        if req.profile_epoch:
            out["profile_epoch"] = req.profile_epoch
        return out

    return answer


__all__ = ["REVIEW_DOCUMENTS_TOPIC", "REVIEW_TABLE", "ReviewEntry", "ReviewHooks",
           "ReviewResult", "ReviewService", "attach", "chunk_key", "decode_review_record",
           "encode_chunks", "encode_review_record", "gold_reviewer", "is_chunk_key",
           "prepare_review_topics", "ranks_key", "review_record_obj", "status_of"]

