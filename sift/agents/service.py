"""The streaming service in plain Python: everything the Faust agents do, without Kafka.

The agents in :mod:`sift.agents.app` only decode Faust events into
:class:`InputMessage`, call one method of :class:`Service` and emit what it
returns, so every rule below is testable without a broker.

Data flow (``P`` = number of partitions = number of profile shards):

1. ``route``: a message of the documents topic (one document or a batch) is
   decoded, checked and vectorized once. The routing worker scores the vectors
   itself for the shards it holds (:meth:`Service.score_here`, one product over
   all of them); for the other shards they go out as :func:`encode_vector_batch`
   payloads to the internal shard topic: one copy naming all those shards, sent to
   the first of them (:meth:`Service.shard_copies`).
2. ``score``: the owner of that partition scores the payload against the profiles
   of the shards it holds among those named (one stacked sparse product per model
   family, see :class:`~sift.filters.bank.ProfileBank`), keeps the vectors in a
   bounded :class:`DocumentStore` for later judgments, returns the decisions, and
   sends one copy on for the shards it does not hold (:meth:`Service.score_copies`).
3. ``apply_specs`` / ``apply_judgments``: profile specs and judgments are keyed
   by profile, so they arrive on partition ``shard_of(profile, P)`` (Kafka's
   default murmur2 partitioner), the partition whose owner holds the
   profile's state. The state lives in a mapping (a Faust table in the
   service) and is written back after every change.

A profile's shard is ``murmur2(utf8(name)) & 0x7fffffff % P``, exactly what
Kafka's default partitioner (Java, kafka-python, aiokafka, librdkafka's
``murmur2_random``) does with the key, so any producer that keys a judgment
by profile name reaches the right worker. A message on the wrong partition
(a producer with another partitioner) is forwarded to the right one.
"""

from __future__ import annotations

import bisect
import ctypes
import functools
import itertools
import logging
import math
import operator
import struct
import sys
import time
import uuid
import zlib
from collections import Counter, deque
from collections.abc import Callable, Collection, Container, Iterable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import orjson
import scipy.sparse as sp
from aiokafka.partitioner import murmur2
from numpy.typing import NDArray

from sift.agents.journal import (
    MAX_SEQ,
    after,
    append,
    decode_journal,
    encode_batch,
    encode_journal,
    journal_full,
    record_profile_epoch,
    stack_batches,
)
from sift.agents.keys import JudgmentKeys
from sift.errors import SiftError
from sift.filters.bagging import BaggedProfile, load_profile
from sift.filters.bank import AnyProfile, ProfileBank
from sift.filters.errors import FilterError
from sift.filters.examples import first_bad_value
from sift.filters.profile import MAX_VALUE, Profile
from sift.filters.sparse import stack_row_refs
from sift.filters.state import decode_csr
from sift.filters.vectorize import Vectorizer
from sift.replay import query_from_name
from sift.topics.codecs import decode_judgment, decode_profile_spec, loads
from sift.topics.deadletter import DeadLetter
from sift.topics.errors import RecordError
from sift.topics.records import (
    MAX_EPOCH_CHARS,
    Decision,
    Document,
    Judgment,
    ProfileSpec,
    clip,
    document_bytes,
    is_positive_text,
    new_profile_epoch,
    show,
    unknown_positive,
)

log = logging.getLogger("sift.worker")

RECORD_FORMAT = 1
#: Idempotency keys remembered per profile (oldest forgotten first).
MAX_JUDGED_KEYS = 200_000
#: Documents' labels remembered per profile, to tell a repeat or a correction from a new
#: judgment (oldest forgotten first): far more than the judgments a profile holds (2,000
#: by default), and about 1-2 MiB of the state record at the bound, where the keys take
#: up to 8 MiB (ids of 13-40 characters)
MAX_LABELS = 50_000
#: Upper bound of one state record: the changelog topics' max.message.bytes (profiles'
#: and reviews' tables).
MAX_STATE_BYTES = 16 * 1024 * 1024
#: The largest record a profile or review may have: the limit less room for the
#: message's key and framing (what would be larger is refused, ``state_too_large``)
MAX_RECORD_BYTES = MAX_STATE_BYTES - 64 * 1024
#: Room left in a message under its topic's limit for the record's key and framing.
RECORD_FRAMING_BYTES = 4096
#: The most a compressed profile record may inflate to (8 times what the changelog takes;
#: the worker writes records uncompressed, but reads compressed ones): a damaged or
#: foreign value of 16 MiB of zeros compressed inflated to 16 GB at every recovery of
#: its partition, out of memory (forty-ninth session)
MAX_RECORD_JSON_BYTES = 8 * MAX_STATE_BYTES
#: The largest dead letter sent until the worker has read its topic's limit (a stock
#: broker's default less framing); larger ones carry their input clipped
#: (:meth:`~sift.topics.deadletter.DeadLetter.encode`).
DEAD_LETTER_BYTES = 1_048_588 - RECORD_FRAMING_BYTES
#: Offsets remembered as processed per partition, for skipping re-deliveries (most recent
#: first kept). Faust re-delivers what was not committed yet (offsets are committed every
#: second), so this only has to cover a few seconds of messages.
MAX_PROCESSED_OFFSETS = 20_000
#: Profile names whose shard a service remembers: every name a judgment or a spec gives
#: is looked up, those of no profile too (dead-lettered), so past this many the cache
#: starts again (until the fifty-second session it grew with every name ever seen).
MAX_SHARD_CACHE = 100_000
#: Size an internal vector-batch payload is cut to (estimated before encoding).
CHUNK_BYTES = 400_000
#: Largest internal vector-batch payload sent: one estimated under CHUNK_BYTES and
#: encoded larger (long document ids) is cut in two (under the broker's 1 MiB).
MAX_COPY_BYTES = 800_000


#: What a dead letter says of a profile or review whose table record does not decode.
UNUSABLE = ("whose state record is unusable (the worker's log says why); send its spec "
            "again to rebuild it")


class ServiceError(SiftError):
    """The service cannot start (bad training corpus, bad state)."""


_F = TypeVar("_F", bound=Callable[..., Any])


def cpu_timed(key: str) -> Callable[[_F], _F]:
    """Add the CPU time of each call of a :class:`Service` method, in its thread, to
    ``self.stats[key]`` (microseconds). The worker's stats then split its main thread's
    CPU into routing, scoring and the copies (``cpu_*_us``; docs/streaming.md), unlike
    wall-clock timers, which count the time the process waits throttled or for the
    broker, and other tasks' time across an ``await``."""
    def wrap(fn: _F) -> _F:
        @functools.wraps(fn)
        def timed(self: Service, *args: Any, **kwargs: Any) -> Any:
            t = time.thread_time_ns()
            try:
                return fn(self, *args, **kwargs)
            finally:
                self.stats[key] += (time.thread_time_ns() - t) // 1000
        return timed  # type: ignore[return-value]
    return wrap


def shard_of(key: str, n_shards: int) -> int:
    """The partition Kafka's default partitioner gives ``key``: murmur2, positive, modulo.

    >>> shard_of("earn", 4) == shard_of("earn", 4)
    True
    >>> 0 <= shard_of("wheat", 4) < 4
    True
    """
    return int(murmur2(key.encode("utf-8")) & 0x7FFFFFFF) % n_shards


def drop_shards_elsewhere(by_name: MutableMapping[str, Any], shards: Container[int],
                          n_shards: int) -> None:
    """Remove from ``by_name`` every name whose shard is not in ``shards`` (what a worker
    keeps per profile or review of shards that moved to another worker).

    >>> kept = {"earn": 1, "wheat": 2}
    >>> drop_shards_elsewhere(kept, {shard_of("earn", 4)} - {shard_of("wheat", 4)}, 4)
    >>> sorted(kept)
    ['earn']
    """
    for name in list(by_name):  # (copied in one step: a review thread may add meanwhile)
        if shard_of(name, n_shards) not in shards:
            by_name.pop(name, None)


def known_unusable(bad: dict[str, bytes], name: str, raw: bytes) -> bool:
    """Whether ``raw`` is the value remembered in ``bad`` as unusable for ``name``: the
    same object, or an equal one (recovery reads every value of a partition that comes
    back as a new object), which then replaces it (the table's object: the other copy
    can go). Such a value is not logged nor counted again."""
    held = bad.get(name)
    if held is None or not (held is raw or held == raw):
        return False
    bad[name] = raw
    return True


@dataclass(frozen=True)
class InputMessage:
    """One consumed Kafka message: bytes and where they came from."""

    value: bytes | None
    topic: str = ""
    partition: int = 0
    offset: int = -1
    key: bytes | None = None


def same_payloads(messages: Iterable[InputMessage]) -> list[list[InputMessage]]:
    """``messages`` grouped by equal values, the groups in the order of their first
    message and each group in arrival order (for :meth:`Service.score_copies`).

    >>> ms = [InputMessage(b"a", "t", 0, 5), InputMessage(b"b", "t", 0, 6),
    ...       InputMessage(b"a", "t", 1, 9)]
    >>> [[(m.partition, m.offset) for m in g] for g in same_payloads(ms)]
    [[(0, 5), (1, 9)], [(0, 6)]]
    """
    groups: dict[bytes, list[InputMessage]] = {}
    for m in messages:
        groups.setdefault(m.value or b"", []).append(m)
    return list(groups.values())


@dataclass(frozen=True)
class Forward:
    """A message that arrived on the wrong partition, to re-send to ``partition``."""

    topic: str
    partition: int
    key: bytes
    value: bytes


def dead_letter(msg: InputMessage, err: RecordError, original: bytes | None = None) -> DeadLetter:
    """A dead letter for ``msg`` (``original`` overrides the bytes kept, e.g. one batch item)."""
    raw = msg.value if original is None else original
    # one line, bounded: a message wrapping a model's error may quote a parameter whole
    return DeadLetter(err.reason, clip(str(err)), msg.topic, msg.partition, msg.offset, raw or b"",
                      time.time())


# ----------------------------------------------------------------------------- memory
_LIBC: Any = None


def release_free_memory() -> bool:
    """Give the heap's free pages back to the OS (glibc ``malloc_trim(0)``, all arenas).

    A worker allocates and frees many short-lived buffers of every size (decoded
    batches, score matrices, profile records of several MB) from two threads (Faust's
    consumer thread has its own malloc arena), so freed memory stays in the process
    and RSS creeps up although the live data is bounded. Called periodically by the
    worker; returns False where there is no glibc.
    """
    global _LIBC
    if _LIBC is None:
        try:
            _LIBC = ctypes.CDLL("libc.so.6")
            _LIBC.malloc_trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):
            _LIBC = False
    return bool(_LIBC and _LIBC.malloc_trim(0))


def memory_usage() -> dict[str, int]:
    """Resident set size (bytes, from ``/proc``; 0 elsewhere) and Python's allocated
    blocks (pymalloc objects: a leak of Python objects shows there, numpy data does not)."""
    rss = 0
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmRSS:"):
                    rss = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    return {"rss_bytes": rss, "python_blocks": sys.getallocatedblocks()}


# ----------------------------------------------------------------------------- vectors
#: Internal vector-batch payload (the shard topic): magic and format version, then the
#: length of an orjson header, the header (ids, shape, nnz, ts; and in format 2 the
#: shards it is for) padded to 8 bytes, then
#: the CSR arrays as little-endian bytes: data (float64), indptr (int64), indices (int32).
#: Binary so that each shard's decode is a few ``np.frombuffer`` views, not base64 and
#: JSON (4 decodes per document with 4 shards); still no pickle, and validated.
VECTOR_BATCH_MAGIC = b"SIFTVB\x01\x00"
#: A batch naming the shards it is for (nineteenth session): a worker of an earlier
#: version, which would score it for its partition's shard only and silently skip the
#: others, refuses it as another format version (a dead letter) instead.
VECTOR_BATCH_MAGIC_SHARDS = b"SIFTVB\x02\x00"
#: A batch of term counts (twentieth session): the documents' counts and columns, 5
#: bytes a term instead of 12, which the receiver weighs with its vectorizer
#: (:meth:`Vectorizer.weigh`, bit for bit the router's vectors); it names the
#: vectorizer's fingerprint, and a worker whose vectorizer differs refuses it.
VECTOR_BATCH_MAGIC_COUNTS = b"SIFTVB\x03\x00"
_MAGICS = (VECTOR_BATCH_MAGIC, VECTOR_BATCH_MAGIC_SHARDS, VECTOR_BATCH_MAGIC_COUNTS)
_COUNT_DTYPES = {"<u1": 1, "<u2": 2, "<u4": 4}
_HEADER_LEN = struct.Struct("<I")


def encode_vector_batch(ids: Sequence[str], X: sp.csr_matrix,
                        shards: Iterable[int] | None = None, *,
                        counts: np.ndarray | None = None, vectorizer: str = "") -> bytes:
    """Internal payload: document ids and their vectors (bit-exact, no pickle), and the
    profile shards it is to be scored for (``None``: the partition it is sent to).

    With ``counts`` (the term count behind each entry of ``X.data``, as
    :meth:`Vectorizer.transform_counts` gives them) the payload carries the counts
    instead of the weights, and ``vectorizer`` (its fingerprint) for the receiver to
    check that it weighs them the same way (:func:`read_vector_batch`)."""
    if counts is not None:
        return _encode_counts(ids, X, counts, shards, vectorizer)
    X = sp.csr_matrix(X)
    if not X.has_sorted_indices:
        X = X.copy()
        X.sort_indices()
    n, m = X.shape
    if len(ids) != n:
        raise ValueError(f"encode_vector_batch: {len(ids)} ids for {n} rows")
    indptr = np.asarray(X.indptr, dtype="<i8")
    nnz = int(indptr[-1] - indptr[0]) if n else 0
    start = int(indptr[0]) if n else 0
    data = np.asarray(X.data[start:start + nnz], dtype="<f8")
    indices = np.asarray(X.indices[start:start + nnz], dtype="<i4")
    head: dict[str, Any] = {"ids": list(ids), "shape": [n, m], "nnz": nnz, "ts": time.time()}
    if shards is not None:
        head["shards"] = sorted({int(s) for s in shards})
    return b"".join((_vector_batch_header(head), data.tobytes(), (indptr - start).tobytes(),
                     indices.tobytes()))


def _encode_counts(ids: Sequence[str], X: sp.csr_matrix, counts: np.ndarray,
                   shards: Iterable[int] | None, vectorizer: str) -> bytes:
    """Format 3: header, then indptr (int64), columns (int32) and counts (the smallest
    of uint8, uint16, uint32 that holds them)."""
    if not isinstance(X, sp.csr_matrix) or not X.has_sorted_indices:
        raise ValueError("encode_vector_batch: counts need the CSR matrix they came with")
    n, m = X.shape
    if len(ids) != n:
        raise ValueError(f"encode_vector_batch: {len(ids)} ids for {n} rows")
    start, stop = int(X.indptr[0]), int(X.indptr[-1])
    nnz = stop - start
    values = np.asarray(counts)
    if values.shape != (nnz,) and values.shape != X.data.shape:
        raise ValueError(f"encode_vector_batch: {values.size} counts for {nnz} entries")
    values = values[start:stop] if values.shape == X.data.shape else values
    dtype = f"<u{_count_width(values)}"
    head: dict[str, Any] = {"ids": list(ids), "shape": [n, m], "nnz": nnz, "ts": time.time(),
                            "counts": dtype, "vectorizer": vectorizer}
    if shards is not None:
        head["shards"] = sorted({int(s) for s in shards})
    indptr = np.asarray(X.indptr, dtype="<i8") - start
    return b"".join((_vector_batch_header(head), indptr.tobytes(),
                     np.asarray(X.indices[start:stop], dtype="<i4").tobytes(),
                     values.astype(dtype).tobytes()))


def _count_width(counts: np.ndarray | None) -> int:
    """Bytes a count takes in a format-3 payload (:func:`_encode_counts` writes them so):
    the width of the smallest unsigned type holding the largest."""
    top = float(np.max(counts)) if counts is not None and counts.size else 0.0
    return 1 if top < 2**8 else 2 if top < 2**16 else 4


def _vector_batch_header(head: dict[str, Any]) -> bytes:
    """Magic, length and JSON header, padded so that the arrays after it are aligned."""
    magic = (VECTOR_BATCH_MAGIC_COUNTS if "counts" in head
             else VECTOR_BATCH_MAGIC_SHARDS if "shards" in head else VECTOR_BATCH_MAGIC)
    header = orjson.dumps(head)
    header += b" " * ((-(len(magic) + _HEADER_LEN.size + len(header))) % 8)
    return b"".join((magic, _HEADER_LEN.pack(len(header)), header))


def _vector_batch_head(data: bytes) -> tuple[dict[str, Any], int]:
    """The JSON header of a binary vector batch and the offset of its arrays."""
    k = len(VECTOR_BATCH_MAGIC)
    magic = data[:k]
    if magic not in _MAGICS or len(data) < k + _HEADER_LEN.size:
        raise RecordError("bad_vector_batch",
                          "vector batch: not a sift vector batch (or another format version)")
    (hlen,) = _HEADER_LEN.unpack_from(data, k)
    body = k + _HEADER_LEN.size + hlen
    try:
        head = orjson.loads(data[k + _HEADER_LEN.size:body])
    except orjson.JSONDecodeError:
        raise RecordError("bad_vector_batch", "vector batch: bad header (JSONDecodeError)") \
            from None
    if not isinstance(head, dict):
        raise RecordError("bad_vector_batch", "vector batch: bad header (not an object)")
    if ("counts" in head) != (magic == VECTOR_BATCH_MAGIC_COUNTS) or (
            magic != VECTOR_BATCH_MAGIC_COUNTS
            and ("shards" in head) != (magic == VECTOR_BATCH_MAGIC_SHARDS)):
        raise RecordError("bad_vector_batch", "vector batch: shards and format disagree")
    return head, body


def vector_batch_shards(head: dict[str, Any]) -> list[int] | None:
    """The ``shards`` of a vector batch header (None when absent), checked."""
    shards = head.get("shards")
    if shards is None:
        return None
    if not isinstance(shards, list) or not all(
            type(s) is int and 0 <= s < 2**31 for s in shards):
        raise RecordError("bad_vector_batch",
                          f"vector batch: shards must be a list of partitions, got {shards!r:.80}")
    return shards


def reshard_vector_batch(data: bytes, shards: Iterable[int]) -> bytes:
    """The same vector batch (arrays untouched) for other ``shards``."""
    head, body = _vector_batch_head(data)
    head["shards"] = sorted({int(s) for s in shards})
    return _vector_batch_header(head) + data[body:]


def decode_vector_batch(data: bytes, vectorizer: Vectorizer | None = None
                        ) -> tuple[list[str], sp.csr_matrix]:
    """Inverse of :func:`encode_vector_batch` (also reads the earlier JSON payloads);
    a malformed payload raises :class:`RecordError` (``bad_vector_batch``). A payload of
    counts needs the ``vectorizer`` that weighs them."""
    ids, X, _ = read_vector_batch(data, vectorizer)
    return ids, X


def read_vector_batch(data: bytes, vectorizer: Vectorizer | None = None
                      ) -> tuple[list[str], sp.csr_matrix, list[int] | None]:
    """:func:`decode_vector_batch`, and the shards the batch is for (None: not said).

    A payload of counts is weighed by ``vectorizer``, which must have the fingerprint
    the payload names (the router's): otherwise the vectors would not be the ones the
    router scored its own shards with, and the payload is refused. A payload of weights
    (formats 0 to 2) must have the ``vectorizer``'s width and values a profile can learn
    (finite, at most ``MAX_VALUE``): it carries no fingerprint to check."""
    def bad(why: str) -> RecordError:
        return RecordError("bad_vector_batch", f"vector batch: {why}")

    if data[:1] == b"{":  # format 0: orjson with base64 arrays (payloads from before v1)
        try:
            obj = orjson.loads(data)
            ids = obj["ids"]
            X = decode_csr(obj["X"], name="vector batch")
        except (ValueError, KeyError, TypeError, SiftError) as exc:  # JSONDecodeError too
            # a bad payload, not a bug: its reason, not internal_error (forty-ninth session)
            raise bad(f"bad JSON payload ({type(exc).__name__}: {clip(str(exc))})") from None
        if not isinstance(ids, list) or len(ids) != X.shape[0]:
            raise bad("ids and rows disagree")
        _check_weights(X.shape[1], X.data, vectorizer)
        return [str(i) for i in ids], X, None

    head, body = _vector_batch_head(data)
    try:
        ids = head["ids"]
        n, m = (int(v) for v in head["shape"])
        nnz = int(head["nnz"])
    except (KeyError, TypeError, ValueError) as exc:
        raise bad(f"bad header ({type(exc).__name__})") from None
    shards = vector_batch_shards(head)
    if not isinstance(ids, list) or len(ids) != n or not all(isinstance(i, str) for i in ids):
        raise bad("ids and rows disagree")
    if not (0 <= n < 2**31 and 0 <= m < 2**31 and 0 <= nnz < 2**31):
        raise bad(f"shape {[n, m]} or nnz {nnz} out of range")
    if "counts" in head:
        return ids, _read_counts(data, head, body, n, m, nnz, vectorizer), shards
    if body % 8 or len(data) != body + 12 * nnz + 8 * (n + 1):
        raise bad("payload length does not match its header")
    values = np.frombuffer(data, dtype="<f8", count=nnz, offset=body)
    indptr = np.frombuffer(data, dtype="<i8", count=n + 1, offset=body + 8 * nnz)
    indices = np.frombuffer(data, dtype="<i4", count=nnz, offset=body + 8 * nnz + 8 * (n + 1))
    if indptr[0] != 0 or indptr[-1] != nnz or (n and np.any(indptr[1:] < indptr[:-1])):
        raise bad("bad indptr")
    if nnz and (int(indices.min()) < 0 or int(indices.max()) >= m):
        raise bad("column index out of range")
    _check_weights(m, values, vectorizer)
    return ids, sp.csr_matrix((values, indices, indptr), shape=(n, m), copy=False), shards


def _check_weights(m: int, values: np.ndarray, vectorizer: Vectorizer | None) -> None:
    """A payload of weights as its receiver's profiles can take it: ``m`` columns, the
    ``vectorizer``'s (when given), and values finite and at most ``MAX_VALUE`` in
    magnitude (what a profile learns; a worker's vectors are L2-normalized, at most 1).
    Before the forty-ninth session another width was stored and then failed in scoring
    (``internal_error``), and every later judgment of its documents too; 1e300 was
    scored, up to an infinite score (``null`` on the decisions topic)."""
    if vectorizer is not None and m != vectorizer.n_features:
        raise RecordError("bad_vector_batch", f"vector batch: {m} columns for a vectorizer "
                                              f"of {vectorizer.n_features}")
    worst = first_bad_value(values)
    if worst is not None:
        raise RecordError("bad_vector_batch", f"vector batch: a value not finite or beyond "
                                              f"{MAX_VALUE:g} in magnitude ({worst!r})")


def _read_counts(data: bytes, head: dict[str, Any], body: int, n: int, m: int, nnz: int,
                 vectorizer: Vectorizer | None) -> sp.csr_matrix:
    """The vectors of a format-3 payload: its counts checked and weighed."""
    def bad(why: str) -> RecordError:
        return RecordError("bad_vector_batch", f"vector batch: {why}")

    dtype = head["counts"]
    size = _COUNT_DTYPES.get(dtype) if isinstance(dtype, str) else None
    if size is None:
        raise bad(f"counts of type {dtype!r:.20}")
    if vectorizer is None:
        raise bad("term counts, and no vectorizer to weigh them")
    theirs, ours = head.get("vectorizer"), vectorizer.fingerprint()
    if theirs != ours:
        raise bad(f"counts of another vectorizer (fingerprint {theirs!r:.20}, here {ours}): "
                  "every worker needs the same SIFT_IDF_CORPUS and vectorizer settings")
    if m != vectorizer.n_features:
        raise bad(f"{m} columns for a vectorizer of {vectorizer.n_features}")
    if body % 8 or len(data) != body + 8 * (n + 1) + (4 + size) * nnz:
        raise bad("payload length does not match its header")
    indptr = np.frombuffer(data, dtype="<i8", count=n + 1, offset=body)
    indices = np.frombuffer(data, dtype="<i4", count=nnz, offset=body + 8 * (n + 1))
    counts = np.frombuffer(data, dtype=dtype, count=nnz, offset=body + 8 * (n + 1) + 4 * nnz)
    if indptr[0] != 0 or indptr[-1] != nnz or (n and np.any(indptr[1:] < indptr[:-1])):
        raise bad("bad indptr")
    if nnz:
        if int(indices.min()) < 0 or int(indices.max()) >= m:
            raise bad("column index out of range")
        if int(counts.min()) < 1:
            raise bad("a term count below 1")
        # columns strictly increasing within each row: the weighing sums each row's
        # squares in column order, as the router did
        rising = np.diff(indices) > 0
        starts = indptr[1:-1]
        rising[starts[(starts > 0) & (starts < nnz)] - 1] = True
        if not rising.all():
            raise bad("columns not sorted within a row")
    C = sp.csr_matrix((counts.astype(np.float64), indices, indptr), shape=(n, m), copy=False)
    C.has_sorted_indices = True
    return vectorizer.weigh(C, copy=False)


def split_rows(X: sp.csr_matrix, max_bytes: int = CHUNK_BYTES,
               entry_bytes: int = 12) -> Iterator[tuple[int, int]]:
    """Row ranges ``[a, b)`` whose encoded size stays under ``max_bytes`` (a single row
    larger than that is a range of its own): ``entry_bytes`` a non-zero (12 for
    weights, 5, 6 or 8 for counts), ~72 a row.

    As few ranges as the limit allows, and of about equal size where that fits the
    limit: 2,000 documents of 700 kB are two payloads of 350 kB, not one of 400 kB and
    one of 300 kB (each payload costs its receiver a message and a scoring call,
    whatever its size).
    """
    n = X.shape[0]
    cum = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.diff(X.indptr) * entry_bytes + 72, out=cum[1:])
    # greedy ranges: the fewest possible
    bounds = [0]
    while bounds[-1] < n:
        start = bounds[-1]
        stop = int(np.searchsorted(cum, cum[start] + max_bytes, side="right")) - 1
        bounds.append(min(max(stop, start + 1), n))
    k = len(bounds) - 1
    if k > 1:
        # as many ranges, cut at the row boundaries nearest to equal shares, when each
        # stays under the limit
        targets = cum[-1] * np.arange(1, k) / k
        at = np.clip(np.searchsorted(cum, targets), 1, n)
        at = np.where(targets - cum[at - 1] < cum[at] - targets, at - 1, at)
        even = np.concatenate([[0], at, [n]])
        sizes = np.diff(cum[even])
        if np.all(np.diff(even) > 0) and np.all(sizes <= max_bytes):
            bounds = even.tolist()
    yield from itertools.pairwise(bounds)


class DocumentStore:
    """The recent documents' vectors, for judgments that arrive after scoring.

    Bounded: holds the last ``capacity`` distinct document ids (first in, first
    out); a repeated id keeps its first row and its place. Every shard sees every
    document, so one store per worker serves the judgments of all the shards it owns.

    Every document a worker scores passes through :meth:`put` (with two workers, each
    document through both), and once full the store evicts as much as it adds. So it
    is kept out of the garbage collector's way: an id maps to an int (its batch's first
    position plus its row), and the batches' matrices and added ids sit in lists
    found by bisection, so the store holds no tracked object per document (before the
    twenty-sixth session each held a ``(matrix, row)`` tuple, 100,000 of them for the
    collector to walk at every full collection). Filling and eviction are done a batch
    at a time in C (docs/streaming.md, twenty-sixth session).

    >>> import numpy as np, scipy.sparse as sp
    >>> store = DocumentStore(3)
    >>> store.put(["a", "b"], sp.csr_matrix(np.eye(2)))
    >>> store.put(["b", "c", "d"], sp.csr_matrix(np.eye(3)))    # "b" stays the first one
    >>> list(store.ids()), store.locate("b")[1], store.locate("d")[1]
    (['b', 'c', 'd'], 1, 2)
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = max(int(capacity), 0)
        # doc id -> position: row r of the batch whose first position is s is s + r
        self._pos: dict[str, int] = {}
        self._next = 0
        # per batch, oldest first from index _first: its first position, its matrix
        # (slicing a CSR row costs ~25 us, so it is done on demand) and the ids it added;
        # _head of the oldest batch's ids are evicted already
        self._starts: list[int] = []
        self._mats: list[sp.csr_matrix | None] = []
        self._added: list[tuple[str, ...]] = []
        self._first = 0
        self._head = 0
        #: the first position of the newest batch eviction has taken documents from
        self._evicted_to = -1

    def __len__(self) -> int:
        return len(self._pos)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._pos

    def holds_any(self, ids: Iterable[str]) -> bool:
        """Whether any of ``ids`` is held (one pass, in C)."""
        return not self._pos.keys().isdisjoint(ids)

    def reserve(self, n: int) -> int:
        """Set ``n`` positions aside before every document put from now on, and return
        the first: :meth:`put` ``at`` them stores documents as if they had been put
        before those (documents read back while new ones come, which are evicted
        after them)."""
        start = self._next
        self._next += max(int(n), 0)
        return start

    def put(self, ids: Sequence[str], X: sp.csr_matrix, *, at: int | None = None) -> None:
        """Store the rows of ``X`` under ``ids``, as the newest documents; with ``at``
        (positions from :meth:`reserve`) as older than the documents put after the
        reservation, and not at all once eviction has reached documents newer than them."""
        n = len(ids)
        if self.capacity == 0 or n == 0:
            return
        pos = self._pos
        if at is None:
            start, b = self._next, len(self._starts)
            self._next += n
        else:
            start = at
            if start < self._evicted_to:  # newer documents are evicted already
                return
            b = bisect.bisect_left(self._starts, start, self._first)
            if b < len(self._starts) and start + n > self._starts[b]:
                raise ValueError(f"positions {start}-{start + n - 1} are not all reserved")
        fresh: tuple[str, ...] = tuple(ids)
        if len(set(fresh)) == n and pos.keys().isdisjoint(fresh):
            pos.update(zip(fresh, range(start, start + n), strict=True))  # the usual batch, in C
        else:  # a repeat (a re-delivered message, or an id twice in a batch)
            added = []
            for row, doc_id in enumerate(fresh):
                if doc_id not in pos:
                    pos[doc_id] = start + row
                    added.append(doc_id)
            fresh = tuple(added)
        if fresh:
            self._starts.insert(b, start)
            self._mats.insert(b, X)
            self._added.insert(b, fresh)
        self._evict(len(pos) - self.capacity)

    def _evict(self, excess: int) -> None:
        pos = self._pos
        while excess > 0:
            oldest, head = self._added[self._first], self._head
            self._evicted_to = self._starts[self._first]
            k = min(excess, len(oldest) - head)
            deque(map(pos.__delitem__, itertools.islice(oldest, head, head + k)), maxlen=0)
            excess -= k
            if head + k < len(oldest):
                self._head = head + k
                break
            self._mats[self._first] = None  # every row gone: the matrix can go
            self._first += 1
            self._head = 0
        if self._first > 64 and 2 * self._first > len(self._added):
            f = self._first
            del self._starts[:f], self._mats[:f], self._added[:f]
            self._first = 0

    def ids(self) -> Iterator[str]:
        """The ids held, oldest first (the order of eviction)."""
        for b in range(self._first, len(self._added)):
            yield from itertools.islice(self._added[b], self._head if b == self._first else 0, None)

    def get(self, doc_id: str) -> sp.csr_matrix | None:
        hit = self.locate(doc_id)
        return None if hit is None else hit[0][hit[1]]

    def locate(self, doc_id: str) -> tuple[sp.csr_matrix, int] | None:
        """The batch matrix holding ``doc_id`` and its row (no copy), or None."""
        at = self._pos.get(doc_id)
        if at is None:
            return None
        b = bisect.bisect_right(self._starts, at, self._first) - 1
        X = self._mats[b]
        assert X is not None  # a batch with ids held has its matrix
        return X, at - self._starts[b]


# ----------------------------------------------------------------------------- profiles
@dataclass
class ProfileEntry:
    """A profile as the service keeps it: its spec, the trained profile, judgment keys seen."""

    spec: ProfileSpec
    profile: AnyProfile
    judged: JudgmentKeys = field(default_factory=lambda: JudgmentKeys(MAX_JUDGED_KEYS))
    #: The journal (see :mod:`sift.agents.journal`): the id of this profile's life, the
    #: batches of judgments learned in it, and how many of them the state record holds
    epoch: str = ""
    seq: int = 0
    record_bytes: int = 0
    #: the journal's batches after the state record, and its bytes
    journal_batches: int = 0
    journal_bytes: int = 0
    #: this profile's spec replaced a profile of the same name (what `sift profiles add
    #: --wait` says), rather than creating a new one
    replaces: bool = False
    #: the id of this profile's life: given when it is created, kept by its replacements
    #: (not by one with ``reset``), so a profile deleted and created again has another.
    #: Its decisions carry it, and a judgment carrying another is refused
    #: (``stale_profile``). A record from before the fifty-second session has none: its
    #: journal's epoch stands for it, or with no journal yet (before the twenty-first
    #: session) nothing, and nothing is checked until its first judgment gives it one
    profile_epoch: str = ""

    #: the label each recently judged document has for this profile now (the last
    #: judgment of it, a correction included), so that a judgment of a document judged
    #: before is told apart: the same label again changes nothing, the other corrects
    #: it (oldest forgotten first, as the keys). In the order of the examples the
    #: judgments are in the profile (a judgment corrected where it is held keeps its
    #: place), so the newest labels are those of the judgments the profile still holds
    #: (what a replacement carries, see Service._carry_judgments)
    labels: dict[str, bool] = field(default_factory=dict)

    def remember(self, key: str, doc_id: str | None = None, relevant: bool | None = None, *,
                 in_place: bool = False) -> None:
        """Remember a judgment's key and its document's label: the newest label, or with
        ``in_place`` (a judgment corrected where the profile holds it) where it was."""
        self.judged.add(key)
        if doc_id is not None and relevant is not None:
            if not (in_place and doc_id in self.labels):
                self.labels.pop(doc_id, None)  # to the end: the newest
            self.labels[doc_id] = bool(relevant)
            while len(self.labels) > MAX_LABELS:
                del self.labels[next(iter(self.labels))]


def encode_profile_record(entry: ProfileEntry, *, compress: bool = False) -> bytes:
    """Table value: orjson of the spec, the core's state and the judgment keys.

    ``compress`` (zlib level 1) halves the bytes but costs ~18 ms for a 1 MB state,
    more than learning the judgment; the changelog allows 16 MiB, so it is off.
    """
    obj = {"format": RECORD_FORMAT, "spec": entry.spec.to_obj(), "state": entry.profile.to_state(),
           "judged_digests": entry.judged.to_obj(), "labels": [[d, r] for d, r in entry.labels.items()],
           "journal": {"epoch": entry.epoch, "seq": entry.seq}}
    if entry.profile_epoch:
        obj["profile_epoch"] = entry.profile_epoch
    if entry.replaces:
        obj["replaces"] = True
    raw = orjson.dumps(obj)
    # orjson hands back its output buffer as the ``bytes``, its allocation grown for the
    # writing and never shrunk: some 6 times the record's length for records of MBs.
    # The table keeps the record, so it is copied to its length (a memcpy, a fraction of
    # the encoding): 100 profiles at their caps held about 1 GB more without the copy
    # (fifty-second session, benchmarks/memory_budget.py)
    return zlib.compress(raw, 1) if compress else bytes(memoryview(raw))


def decode_profile_record(data: bytes, feature_weights: np.ndarray | None,
                          name: str | None = None, *,
                          n_features: int | None = None) -> ProfileEntry:
    """Inverse of :func:`encode_profile_record`; raises ServiceError on a bad record,
    on a record of another profile than ``name`` (the table key), or on one of another
    width than ``n_features`` (the vectorizer's; implied by ``feature_weights``)."""
    try:
        obj = orjson.loads(data if data[:1] == b"{" else _inflate(data))
        if obj.get("format") != RECORD_FORMAT:
            raise ServiceError(f"profile record format {obj.get('format')!r} is not "
                               f"{RECORD_FORMAT}")
        spec = ProfileSpec.from_obj(obj["spec"])
        profile = load_profile(obj["state"], feature_weights, n_features)
        # the keys' digests; a record from before the fifty-third session lists the keys
        judged = JudgmentKeys.from_record(obj, MAX_JUDGED_KEYS)
        labels = _decode_labels(obj.get("labels", ()))  # none before the 47th session
        if name is not None and (spec.profile != name or profile.name != name):
            raise ServiceError(f"record under {name!r} is for profile {spec.profile!r} "
                               f"(state {profile.name!r})")
        journal = obj.get("journal", {"epoch": "", "seq": 0})  # none before the 21st session
        epoch, seq = journal["epoch"], journal["seq"]
        if (not isinstance(epoch, str) or isinstance(seq, bool) or not isinstance(seq, int)
                or not 0 <= seq < MAX_SEQ):
            raise ServiceError(f"bad journal position in the record: {clip(repr(journal))}")
        replaces = obj.get("replaces", False)
        if not isinstance(replaces, bool):
            raise ServiceError(f"bad 'replaces' in the record: {replaces!r}")
        # none before the fifty-second session: the journal's epoch then stands for it,
        # the id every worker reads from this record (it changes only at a replacement,
        # which writes the profile epoch)
        life = record_profile_epoch(obj)
        if not isinstance(life, str) or len(life) > MAX_EPOCH_CHARS:
            raise ServiceError(f"bad 'profile_epoch' in the record: {clip(repr(life))}")
    except ServiceError:
        raise
    except (zlib.error, orjson.JSONDecodeError, KeyError, TypeError, AttributeError,
            ValueError, OverflowError, IndexError, SiftError) as exc:
        # ValueError, OverflowError, IndexError: numpy and scipy on shapes or values the
        # core's own checks let through (e.g. a 2**64 column count): still this record's
        # fault, so only this profile is skipped.
        raise ServiceError(f"bad profile record: {type(exc).__name__}: {exc}") from None
    return ProfileEntry(spec, profile, judged, epoch=epoch, seq=seq, record_bytes=len(data),
                        replaces=replaces, labels=labels, profile_epoch=life)


def _inflate(data: bytes) -> bytes:
    """A zlib-compressed record inflated, at most :data:`MAX_RECORD_JSON_BYTES` of it."""
    inflate = zlib.decompressobj()
    raw = inflate.decompress(data, MAX_RECORD_JSON_BYTES)
    if inflate.unconsumed_tail:
        raise ServiceError(f"profile record is over {MAX_RECORD_JSON_BYTES} bytes decompressed")
    if not inflate.eof:
        raise ServiceError("profile record is truncated (incomplete zlib stream)")
    return raw


def _decode_labels(pairs: Any) -> dict[str, bool]:
    """The record's ``labels``: ``[[doc_id, relevant], ...]``, oldest first."""
    if not isinstance(pairs, list | tuple):
        raise ServiceError(f"bad 'labels' in the record: {type(pairs).__name__}")
    out: dict[str, bool] = {}
    for pair in pairs:
        if (not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[0], str)
                or not isinstance(pair[1], bool)):
            raise ServiceError(f"bad 'labels' entry in the record: {clip(repr(pair))}")
        out.pop(pair[0], None)
        out[pair[0]] = pair[1]
    return out


# ----------------------------------------------------------------------------- training set
@dataclass
class TrainingSet:
    """The corpus that gives the IDF and the training matrix profiles start from."""

    vectorizer: Vectorizer
    X: sp.csr_matrix | None
    ids: dict[str, int]
    path: str = ""

    @classmethod
    def load(cls, path: str | Path | None, **vectorizer: Any) -> TrainingSet:
        """Fit the vectorizer on a JSONL corpus; with no corpus, no IDF (``idf="none"``)."""
        from sift.topics.codecs import read_jsonl

        if not path:
            return cls(Vectorizer(**{**vectorizer, "idf": "none"}), None, {}, "")
        skipped: list[tuple[int, RecordError]] = []
        try:
            docs = list(read_jsonl(path, Document.from_obj, skip_bad=True,
                                   on_skip=lambda n, exc: skipped.append((n, exc))))
        except RecordError as exc:
            raise ServiceError(f"training corpus: {exc}") from None
        first = f" (the first bad line: {path}:{skipped[0][0]}: {skipped[0][1]})" if skipped else ""
        if not docs:
            raise ServiceError(f"training corpus {path}: no documents{first}")
        if skipped:  # said, not dropped silently
            log.warning("training corpus %s: %d bad lines skipped%s", path, len(skipped), first)
        vec = Vectorizer(**vectorizer)
        texts = [d.scored_text for d in docs]
        vec.fit(texts)
        return cls(vec, vec.transform(texts), {d.id: i for i, d in enumerate(docs)}, str(path))


def default_corpus() -> str:
    """The bundled Reuters-21578 training file, when this is a source checkout."""
    p = Path(__file__).resolve().parents[2] / "data" / "reuters21578" / "train.jsonl.gz"
    return str(p) if p.is_file() else ""


# ----------------------------------------------------------------------------- the service
@dataclass
class RouteResult:
    """A routed batch: its documents' ids and vectors (one block per call of
    :meth:`Service.route`, normally one), the dead letters and the number of documents."""

    parts: list[tuple[list[str], sp.csr_matrix]]
    dead_letters: list[DeadLetter]
    n_documents: int
    #: the documents carrying metadata (which may name a review), with their message
    with_metadata: list[tuple[InputMessage, list[Document]]] = field(default_factory=list)
    #: per part, the term count behind each entry of its matrix (copies travel as counts)
    counts: list[np.ndarray] = field(default_factory=list)

    @property
    def batches(self) -> list[tuple[list[str], sp.csr_matrix]]:
        """The parts in chunks of at most :data:`CHUNK_BYTES` encoded (shard-topic messages)."""
        return [chunk for ids, X in self.parts for chunk in chunks(ids, X)]

    @property
    def payloads(self) -> list[bytes]:
        """The chunks as shard-topic payloads (:func:`encode_vector_batch`)."""
        return [encode_vector_batch(ids, X) for ids, X in self.batches]


def chunks(ids: list[str], X: sp.csr_matrix) -> list[tuple[list[str], sp.csr_matrix]]:
    """``(ids, X)`` in row ranges of at most :data:`CHUNK_BYTES` encoded (:func:`split_rows`)."""
    if X.shape[0] <= 1:
        return [(ids, X)]
    return [(ids[a:b], X[a:b]) for a, b in split_rows(X)]


@dataclass
class ShardScoring:
    """What scoring a shard-topic payload gives: the decisions, and the payload to send
    on to the shards it is for that are not held here, as (partition, payload)."""

    decisions: list[Decision]
    forward: tuple[int, bytes] | None


@dataclass
class UpdateResult:
    dead_letters: list[DeadLetter] = field(default_factory=list)
    forwards: list[Forward] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)


class Service:
    """Routing, scoring and learning for one worker.

    Parameters
    ----------
    training
        Vectorizer (IDF) and training matrix, identical on every worker.
    n_shards
        Number of partitions of the shard, judgments and profiles topics.
    recent_documents
        Capacity of the :class:`DocumentStore`.
    max_document_bytes
        Larger documents are dead-lettered (``too_large``).
    max_batch_documents
        Larger batch messages are dead-lettered whole (``batch_too_large``).
    coalesce_judgments
        Apply the judgments of one consumed batch that concern one profile
        together (one re-threshold) under the ``"every"`` policy. The final
        model and threshold are those of applying them one by one; only the
        intermediate thresholds, which no document sees, are skipped.
    journal
        The table of the profiles' judgment journals (:mod:`sift.agents.journal`),
        co-partitioned with the profiles' table: a batch of judgments is appended there
        and the profile's state record rewritten only when the journal is full. None:
        the state record is rewritten after every batch (as before the twenty-first
        session). The app always sets it, so journals are read on recovery.
    append_journal
        Append batches to ``journal``; False (``SIFT_JOURNAL=false``): write a whole
        state record after every batch, while journals that earlier runs left are still
        read (turning the journal off loses nothing).
    max_record_bytes
        The largest profile state record the table can take (its changelog's message
        limit, less room for the message's framing). A profile spec whose new profile
        would need more is dead-lettered (``state_too_large``) and changes nothing: the
        record could not be written, so the profile would not survive a restart. None:
        no limit.
    reviews
        The names of the reviews held here (:class:`~sift.agents.review.ReviewNames`
        over the review table; the app sets it): a profile spec taking a review's name is
        dead-lettered (``review_exists``), as a review spec taking a standing profile's
        name is (``profile_exists``). Judgments of a review's name go to the review, so
        a standing profile of that name would deliver and never learn. None: no reviews.
    """

    def __init__(
        self,
        training: TrainingSet,
        *,
        n_shards: int = 4,
        recent_documents: int = 100_000,
        max_document_bytes: int = 1_000_000,
        max_batch_documents: int = 1000,
        coalesce_judgments: bool = True,
        judgments_topic: str = "judgments",
        profiles_topic: str = "profiles",
        journal: MutableMapping[str, bytes] | None = None,
        append_journal: bool = True,
        max_record_bytes: int | None = None,
        reviews: Container[str] | None = None,
    ) -> None:
        if n_shards < 1:
            raise ServiceError(f"n_shards must be >= 1, got {n_shards}")
        self.training = training
        self.vectorizer = training.vectorizer
        self.weights = training.vectorizer.feature_weights()
        self.n_shards = n_shards
        self.store = DocumentStore(recent_documents)
        self.max_document_bytes = max_document_bytes
        self.max_batch_documents = max_batch_documents
        self.coalesce_judgments = coalesce_judgments
        self.judgments_topic = judgments_topic
        self.profiles_topic = profiles_topic
        self.stats: Counter[str] = Counter()
        self.scored: Counter[str] = Counter()  # documents scored, per profile
        self._shard_cache: dict[str, int] = {}
        self.journal = journal
        self.append_journal = append_journal
        self.max_record_bytes = max_record_bytes
        self.reviews = reviews
        #: the largest dead letter sent (its topic's max.message.bytes less framing: set
        #: by the worker from the topic; see DEAD_LETTER_BYTES)
        self.dead_letter_bytes = DEAD_LETTER_BYTES
        self._raw: dict[str, bytes] = {}
        self._jraw: dict[str, bytes | None] = {}  # the journal value each entry includes
        self._rewrite: set[str] = set()  # profiles whose next save is a whole record
        self._entries: dict[str, ProfileEntry] = {}
        self._banks: dict[int, ProfileBank] = {}
        self._joint: tuple[list[AnyProfile], ProfileBank] | None = None  # see _joint_bank
        self._bad: dict[str, bytes] = {}
        #: the documents topic's offsets (per partition) below which recent documents
        #: were read back into the store (sift.agents.restore), at the start or by a
        #: refill: the next refill reads only above them
        self.restored_to: dict[tuple[str, int], int] = {}
        # offsets processed here, per (topic, partition): a set, and the order to forget them
        self._done: dict[tuple[str, int], tuple[set[int], deque[int]]] = {}
        # the last offset seen per (topic, partition), to report gaps and rewinds
        self._last: dict[tuple[str, int], int] = {}

    # -- helpers ------------------------------------------------------------------------------
    def shard(self, name: str) -> int:
        s = self._shard_cache.get(name)
        if s is None:
            if len(self._shard_cache) >= MAX_SHARD_CACHE:
                self._shard_cache.clear()  # names of no profile (any judgment's) included
            s = self._shard_cache[name] = shard_of(name, self.n_shards)
        return s

    def _dead(self, out: list[DeadLetter], msg: InputMessage, err: RecordError,
              original: bytes | None = None) -> None:
        self.stats["dead_letters"] += 1
        self.stats[f"dead_letters.{err.reason}"] += 1
        out.append(dead_letter(msg, err, original))

    # -- 1. documents -> vectors, fanned out to every shard -----------------------------------
    def _check_size(self, doc: Document) -> None:
        """``too_large`` over ``max_document_bytes`` of text and title, the title counted
        once (:func:`~sift.topics.records.document_bytes`, also what `sift produce` checks)."""
        # text and title at most 4 bytes a character, counted twice at most: when that
        # fits, the exact count (which may copy the text) is not needed
        if (len(doc.text) + len(doc.title)) * 4 > self.max_document_bytes:
            size = document_bytes(doc)
            if size > self.max_document_bytes:
                raise RecordError("too_large", f"document {show(doc.id)} has {size} bytes of "
                                  f"text, over the limit of {self.max_document_bytes}")

    def decode_documents(self, msg: InputMessage,
                         dead: list[DeadLetter] | None) -> list[Document]:
        """Documents of one message; every bad one becomes a dead letter in ``dead`` (with
        ``None``, none is made or counted: a message read back, whose dead letters went
        out when it was first read)."""
        def reject(err: RecordError, original: bytes | None = None) -> None:
            if dead is not None:
                self._dead(dead, msg, err, original)

        value = msg.value
        if not value:  # None, or no bytes: the same reason as on the other topics
            reject(RecordError("empty", "message has no value"))
            return []
        try:
            obj = loads(value)
        except RecordError as exc:
            reject(exc)
            return []
        if isinstance(obj, dict) and "documents" in obj and "id" not in obj:
            items = obj["documents"]
            if not isinstance(items, list):
                reject(RecordError("bad_batch", "field 'documents' must be a list"))
                return []
            if len(items) > self.max_batch_documents:
                reject(RecordError(
                    "batch_too_large",
                    f"batch of {len(items)} documents exceeds {self.max_batch_documents}"))
                return []
            docs = []
            for i, item in enumerate(items):
                try:
                    doc = Document.from_obj(item)
                    self._check_size(doc)
                    docs.append(doc)
                except RecordError as exc:
                    err = RecordError(exc.reason, f"batch item {i}: {exc}")
                    try:
                        original = orjson.dumps(item)
                    except TypeError:  # nested past orjson's limit: keep the whole message
                        original = value
                    reject(err, original)
            return docs
        try:  # the limit is on the text, as for a batch's documents (not on metadata or escapes)
            doc = Document.from_obj(obj)
            self._check_size(doc)
        except RecordError as exc:
            reject(exc)
            return []
        return [doc]

    def redelivered(self, msg: InputMessage) -> bool:
        """Whether this worker already processed ``msg`` (see :meth:`processed`).

        Faust (at least once) re-delivers messages whose offsets were not committed
        yet when a rebalance happens, to the same worker (faust-streaming#502): those
        are skipped. Only offsets this worker actually processed are skipped, not every
        offset below the highest one: after a rebalance Faust can deliver a prefetched
        message from beyond the committed offset first and then seek back
        (faust-streaming#221), and "at or below the highest offset processed" then
        skipped the messages in between, which nobody had processed (found by
        ``benchmarks/rebalance.py``: 15 decisions missing). After a crash another
        worker cannot know: then documents are scored again.
        """
        done = self._done.get((msg.topic, msg.partition))
        if msg.offset >= 0 and done is not None and msg.offset in done[0]:
            self.stats["redelivered_skipped"] += 1
            return True
        return False

    def expect(self, topic: str, partition: int, next_offset: int) -> None:
        """The next offset due on a partition (its committed offset, after an assignment),
        unless this worker already saw messages of it since the last :meth:`forget`."""
        self._last.setdefault((topic, partition), next_offset - 1)

    def last_offset(self, topic: str, partition: int) -> int | None:
        """The highest offset of the partition seen since the last :meth:`forget_offsets`
        (or the committed offset's predecessor given to :meth:`expect`); None if none."""
        return self._last.get((topic, partition))

    def forget_offsets(self) -> None:
        """Drop the offsets seen (a rebalance: another worker may have gone on)."""
        self._last.clear()

    @staticmethod
    def _walk(messages: Iterable[InputMessage], last: dict[tuple[str, int], int]
              ) -> Iterator[tuple[InputMessage, int | None]]:
        """Each message with an offset and the highest offset seen before it on its
        partition (None: none known); ``last`` is brought up to date as it goes (a
        re-delivered offset does not lower it)."""
        for msg in messages:
            if msg.offset < 0:
                continue
            tp = (msg.topic, msg.partition)
            prev = last.get(tp)
            yield msg, prev
            last[tp] = msg.offset if prev is None else max(prev, msg.offset)

    def gaps(self, messages: Sequence[InputMessage]) -> list[tuple[str, int, int, int]]:
        """``(topic, partition, start, stop)`` ranges missing before or between
        ``messages`` on their partitions, given the offsets seen so far (not recorded:
        see :meth:`observe`)."""
        return [(m.topic, m.partition, prev + 1, m.offset)
                for m, prev in self._walk(messages, dict(self._last))
                if prev is not None and m.offset > prev + 1]

    def observe(self, messages: Iterable[InputMessage]) -> None:
        """Report offsets that never reached this worker (gaps) and offsets seen again.

        sift's input topics are neither compacted nor written in transactions, so one
        partition's offsets reach a worker consecutively; a gap means the consumer
        skipped messages (logged as a warning and counted: ``offset_gaps`` and
        ``offsets_skipped``). Going back (``offset_rewinds``) is normal after a
        rebalance or a restart (at least once) and only counted.
        """
        for msg, prev in self._walk(messages, self._last):
            if prev is None:
                continue
            if msg.offset > prev + 1:
                self.stats["offset_gaps"] += 1
                self.stats["offsets_skipped"] += msg.offset - prev - 1
                log.warning("offsets %d..%d of %s[%d] never reached this worker",
                            prev + 1, msg.offset - 1, msg.topic, msg.partition)
            elif msg.offset <= prev:
                self.stats["offset_rewinds"] += 1
                log.info("%s[%d]: offset %d again (last seen %d)", msg.topic,
                         msg.partition, msg.offset, prev)

    def processed(self, messages: Iterable[InputMessage]) -> None:
        """Remember messages as processed (after success: a failed batch is retried)."""
        for msg in messages:
            if msg.offset < 0:
                continue
            done = self._done.get((msg.topic, msg.partition))
            if done is None:
                done = self._done[(msg.topic, msg.partition)] = (set(), deque())
            offsets, order = done
            if msg.offset in offsets:
                continue
            offsets.add(msg.offset)
            order.append(msg.offset)
            if len(order) > MAX_PROCESSED_OFFSETS:
                offsets.discard(order.popleft())

    @cpu_timed("cpu_route_us")
    def route(self, messages: Iterable[InputMessage]) -> RouteResult:
        """Decode and vectorize a batch of document messages (once), for every shard."""
        dead: list[DeadLetter] = []
        docs: list[Document] = []
        with_metadata: list[tuple[InputMessage, list[Document]]] = []
        fresh = [m for m in messages if not self.redelivered(m)]
        placed = [(m.topic, m.partition, m.offset) for m in fresh if m.offset >= 0]
        if len(set(placed)) < len(placed):
            # one message delivered twice in a take: a re-delivery, not duplicate ids
            # (messages without an offset, made in process, are all kept)
            once: set[tuple[str, int, int]] = set()
            kept = []
            for m in fresh:
                where = (m.topic, m.partition, m.offset)
                if m.offset < 0 or where not in once:
                    once.add(where)
                    kept.append(m)
            fresh = kept
        seen: set[str] = set()  # the batch's ids so far
        origin: list[InputMessage] = []  # the message of each document
        for msg in fresh:
            got = self.decode_documents(msg, dead)
            ids = [d.id for d in got]
            if len(set(ids)) == len(ids) and seen.isdisjoint(ids):  # the usual case, in C
                seen.update(ids)
            else:
                got = self._first_of_each_id(msg, got, seen, dead)
            docs.extend(got)
            origin.extend(itertools.repeat(msg, len(got)))
            if any(d.metadata for d in got):
                with_metadata.append((msg, [d for d in got if d.metadata]))
        if not docs:
            self.processed(fresh)
            return RouteResult([], dead, 0)
        X, counts = self.vectorizer.transform_counts([d.scored_text for d in docs])
        if self.store.holds_any(seen):
            keep = self._kept_texts_only(docs, origin, X, dead)
            if keep is not None:
                docs = [d for d, k in zip(docs, keep, strict=True) if k]
                counts = counts[np.repeat(keep, np.diff(X.indptr))]
                X = X[keep]
                if not docs:
                    self.processed(fresh)
                    return RouteResult([], dead, 0, with_metadata)
        self.stats["documents"] += len(docs)
        self.processed(fresh)
        return RouteResult([([d.id for d in docs], X)], dead, len(docs), with_metadata, [counts])

    def restore_recent(self, docs: Iterable[Document], *, chunk: int = 10_000,
                       at: int | None = None) -> int:
        """Put ``docs`` (read back from the documents topic, oldest first, decoded by
        :meth:`decode_documents` without dead letters) in the store, vectorized as
        :meth:`route` does, so that a worker that starts late (a restart, a replacement)
        can apply judgments of documents scored before it started. Returns the number of
        documents put.

        Nothing else changes: no document is scored or counted as routed, no offset is
        marked processed. An id is kept with its first text, as the store keeps it; ids
        the store holds already are skipped (and not vectorized). With ``at`` (positions
        the store reserved, :meth:`DocumentStore.reserve`, one per document in ``docs``)
        they go before the documents put since the reservation.
        """
        ids: list[str] = []
        texts: list[str] = []
        seen: set[str] = set()
        for d in docs:
            if d.id not in seen and d.id not in self.store:
                seen.add(d.id)
                ids.append(d.id)
                texts.append(d.scored_text)
        for a in range(0, len(ids), chunk):
            X, _ = self.vectorizer.transform_counts(texts[a : a + chunk])
            self.store.put(ids[a : a + chunk], X, at=None if at is None else at + a)
        self.stats["documents_restored"] += len(ids)
        return len(ids)

    def _first_of_each_id(self, msg: InputMessage, got: list[Document], seen: set[str],
                          dead: list[DeadLetter]) -> list[Document]:
        """``got`` without the documents whose id came earlier in the routed batch (``seen``,
        which gains the others' ids), each dead-lettered (``duplicate_id``): the store
        keeps an id's first vector for its judgments, so a second text under the id
        would be scored but never learned from."""
        kept: list[Document] = []
        for d in got:
            if d.id in seen:
                self._dead(dead, msg, RecordError(
                    "duplicate_id", f"document id {d.id!r} came twice in one batch of "
                    f"documents; the first is kept"), orjson.dumps(d.to_obj()))
            else:
                seen.add(d.id)
                kept.append(d)
        return kept

    def _kept_texts_only(self, docs: list[Document], origin: list[InputMessage],
                         X: sp.csr_matrix, dead: list[DeadLetter]) -> NDArray[np.bool_] | None:
        """Which documents to score when some ids are in the store already: a text the
        store holds under its id again (a document sent twice) is scored again; another
        text under a stored id is dead-lettered (``duplicate_id``), since a judgment of the
        id would learn the stored text, not the one scored. ``None``: every one."""
        keep = np.ones(len(docs), dtype=bool)
        for i, d in enumerate(docs):
            hit = self.store.locate(d.id)
            if hit is None:
                continue
            M, r = hit
            a, b = M.indptr[r], M.indptr[r + 1]
            c, e = X.indptr[i], X.indptr[i + 1]
            if np.array_equal(M.indices[a:b], X.indices[c:e]) and np.array_equal(M.data[a:b],
                                                                                  X.data[c:e]):
                continue
            keep[i] = False
            self._dead(dead, origin[i], RecordError(
                "duplicate_id", f"document id {d.id!r} was scored before with another text, "
                "which its judgments learn; send a changed document under a new id"),
                orjson.dumps(d.to_obj()))
        return None if keep.all() else keep

    # -- 2. scoring one shard ------------------------------------------------------------------
    def sync_shard(self, shard: int, table: MutableMapping[str, bytes]) -> ProfileBank:
        """The bank of shard ``shard``, brought up to date with the table (cheap when unchanged)."""
        return self.sync_shards([shard], table)[0]

    def sync_shards(self, shards: Sequence[int],
                    table: MutableMapping[str, bytes]) -> list[ProfileBank]:
        """:meth:`sync_shard` of each of ``shards``, with one pass over the table's keys."""
        present: dict[int, list[str]] = {s: [] for s in shards}
        for k in list(table.keys()):
            names = present.get(self.shard(k))
            if names is not None:
                names.append(k)
        return [self._sync(s, names, table) for s, names in present.items()]

    def _sync(self, shard: int, present: list[str],
              table: MutableMapping[str, bytes]) -> ProfileBank:
        bank = self._banks.setdefault(shard, ProfileBank())
        keep = set(present)
        for name in bank.names:
            if name not in keep:  # deleted (by another worker while the shard was away)
                bank.remove(name)
                self._forget(name)
                self.scored.pop(name, None)  # as this worker's own deletion does
        journal = self.journal
        for name in present:
            raw = table.get(name)
            if raw is None:
                continue
            jraw = None if journal is None else journal.get(name)
            if self._raw.get(name) is raw and self._jraw.get(name) is jraw and name in bank:
                continue
            entry = self._decode(name, raw, jraw)
            if entry is None:
                continue
            bank.add(entry.profile)
            self._raw[name] = raw
            self._jraw[name] = jraw
            self._entries[name] = entry
        return bank

    def release_shards(self, held: Collection[int]) -> list[str]:
        """Stop holding the profiles of every shard not in ``held`` (the shards whose
        table partitions this worker owns now); returns the names released.

        A shard that moved to another worker kept its decoded profiles here (models,
        example sets, kNN pools, judgment keys) until it came back, and then they were
        decoded again anyway: the table's memory store drops a revoked partition's
        values when its next recovery ends, and the values read back from the changelog
        are new objects, which :meth:`_sync` does not take for unchanged. Meanwhile
        ``/sift/stats`` and ``sift_worker_profiles`` counted them as held here. What is
        kept per profile beside the state (the documents scored, ``scored``; a pending
        whole-record rewrite) stays: it is small and bounded by the profile names. The
        unusable records remembered of those shards are let go too."""
        released: list[str] = []
        for shard in [s for s in self._banks if s not in held]:
            bank = self._banks.pop(shard)
            for name in bank.names:
                self._forget(name)
                released.append(name)
        # unusable records of those shards (up to a record's 16 MiB each): read again,
        # logged and counted again, if the shard comes back
        drop_shards_elsewhere(self._bad, held, self.n_shards)
        if released:
            self._joint = None  # it may hold released profiles (rebuilt when next needed)
            self.stats["profiles_released"] += len(released)
        return released

    def score(self, shard: int, payload: bytes, table: MutableMapping[str, bytes],
              source: InputMessage | None = None) -> list[Decision]:
        """Score one vector batch against the profiles of ``shard``; the deliveries as decisions.

        ``source`` (the consumed message) lets a re-delivered batch be skipped.
        """
        if source is None:
            source = InputMessage(payload, "", shard, -1)
        return self.score_copies([source], table).decisions

    @cpu_timed("cpu_score_copies_us")
    def score_copies(self, messages: Sequence[InputMessage], table: MutableMapping[str, bytes],
                     here: Iterable[int] = ()) -> ShardScoring:
        """Score the copies of one vector batch from the shard topic, decoded, stored and
        scored once against the profiles of all the shards they are for together.

        A payload is for the partition it arrived on and for the ``shards`` of its
        header: the router sends one copy for all the shards it does not hold to the
        first of them (:meth:`shard_copies`). Of those, this worker scores the
        partitions the messages arrived on and the shards in ``here`` (the ones it
        holds, its table recovered); the rest go on as one copy, :attr:`ShardScoring.forward`,
        to the first of them. So each shard of a payload is scored by exactly one
        worker whichever way the partitions moved since it was routed, and with two
        workers a payload crosses the broker once, not once per shard.

        Copies of one payload arriving on several partitions (from routers of earlier
        versions, or ``SIFT_SCORE_HERE=false``, which send one per shard) are scored as
        one too. The messages must carry equal values (:func:`same_payloads`); the
        re-delivered ones are skipped, and the rest are marked processed.
        """
        fresh = [m for m in messages if not self.redelivered(m)]
        if not fresh:
            return ShardScoring([], None)
        payload = fresh[0].value or b""
        if any(m.value != payload for m in fresh[1:]):
            raise ServiceError("score_copies takes copies of one payload only")
        ids, X, for_shards = read_vector_batch(payload, self.vectorizer)
        arrived = {m.partition for m in fresh}
        wanted = arrived | set(for_shards or ())
        if max(wanted) >= self.n_shards:
            raise RecordError("bad_vector_batch", f"vector batch for shards {sorted(wanted)} "
                                                  f"of {self.n_shards}")
        scored = sorted(wanted & (arrived | set(here)))
        rest = sorted(wanted.difference(scored))
        self.store.put(ids, X)
        banks = self.sync_shards(scored, table)
        bank = banks[0] if len(banks) == 1 else self._joint_bank(banks)
        decisions = self._decide(bank, ids, X)
        self.stats["scored_from_shard_topic"] += len(ids) * len(scored)
        self.stats["shard_payloads"] += 1  # against shard_messages: copies scored as one
        self.stats["shard_messages"] += len(fresh)
        forward = None
        if rest:
            self.stats["shard_forwards"] += 1
            forward = (rest[0], reshard_vector_batch(payload, rest))
        self.processed(fresh)
        return ShardScoring(decisions, forward)

    def shard_copies(self, ids: Sequence[str], X: sp.csr_matrix, elsewhere: Sequence[int],
                     *, one_copy: bool = True, counts: np.ndarray | None = None
                     ) -> list[tuple[int, bytes]]:
        """The shard-topic messages (partition, payload) that send a routed batch to the
        shards ``elsewhere`` (those its router does not hold): one copy for all of them
        to the first (whose owner scores the ones it holds and sends the rest on,
        :meth:`score_copies`), or with ``one_copy=False`` one copy per shard.

        With ``counts`` (:attr:`RouteResult.counts`) the one copy carries the term
        counts (format 3, weighed by the receiver); ``one_copy=False`` is the format
        that workers of earlier versions read (float64 weights, one copy per shard)."""
        if not elsewhere:
            return []
        if one_copy:
            fingerprint = self.vectorizer.fingerprint() if counts is not None else ""
            return [(min(elsewhere), encode_vector_batch(ids, X, shards=elsewhere, counts=counts,
                                                         vectorizer=fingerprint))]
        payload = encode_vector_batch(ids, X)
        return [(p, payload) for p in sorted(set(elsewhere))]

    @cpu_timed("cpu_copies_us")
    def copies(self, ids: list[str], X: sp.csr_matrix, counts: np.ndarray | None,
               elsewhere: Sequence[int], *, one_copy: bool = True) -> list[tuple[int, bytes]]:
        """:meth:`shard_copies` of a whole routed part, cut into chunks of about
        :data:`CHUNK_BYTES` encoded (:func:`split_rows`); a chunk that still encodes to
        more than :data:`MAX_COPY_BYTES` (ids far longer than the estimate's) is cut in
        two until it does not, so the shard topic's messages stay under the broker's
        1 MiB."""
        if not elsewhere:
            return []
        with_counts = counts is not None and one_copy
        # a count takes 1, 2 or 4 bytes in the payload (the widest it needs)
        entry = 12 if not with_counts else 4 + _count_width(counts)
        ranges = [(0, X.shape[0])] if X.shape[0] <= 1 else list(
            split_rows(X, CHUNK_BYTES, entry_bytes=entry))
        out: list[tuple[int, bytes]] = []
        ranges.reverse()
        while ranges:
            a, b = ranges.pop()
            part = X if (a, b) == (0, X.shape[0]) else X[a:b]
            part_counts = None
            if with_counts:
                assert counts is not None
                part_counts = counts[int(X.indptr[a]):int(X.indptr[b])]
            made = self.shard_copies(ids[a:b], part, elsewhere, one_copy=one_copy,
                                     counts=part_counts)
            if b - a > 1 and any(len(payload) > MAX_COPY_BYTES for _, payload in made):
                mid = (a + b) // 2
                ranges += [(mid, b), (a, mid)]
                continue
            out += made
        return out

    @cpu_timed("cpu_score_here_us")
    def score_here(self, shards: Iterable[int], ids: list[str], X: sp.csr_matrix,
                   table: MutableMapping[str, bytes]) -> list[Decision]:
        """Score routed vectors against the profiles of ``shards`` directly, without the
        shard topic: what :meth:`score` gives for each shard's payload.

        The worker calls this for the shards whose state it holds itself (it owns
        their partitions and their table is recovered), so a document it routes costs
        no internal message for them; the other shards still get the payload.
        """
        self.store.put(ids, X)
        banks = self.sync_shards(sorted(set(shards)), table)
        bank = banks[0] if len(banks) == 1 else self._joint_bank(banks)
        self.stats["scored_here"] += len(ids)
        return self._decide(bank, ids, X)

    def _joint_bank(self, banks: list[ProfileBank]) -> ProfileBank:
        """One bank holding the profiles of several shards (the same objects), so that a
        batch is restricted to their columns and multiplied once, not once per shard.
        Rebuilt when its members change; a changed model is re-stacked by the bank."""
        members = [p for b in banks for p in b]
        if self._joint is None or len(self._joint[0]) != len(members) or not all(
                map(operator.is_, self._joint[0], members)):
            joint = ProfileBank()
            for p in members:
                joint.add(p)
            self._joint = (members, joint)
        return self._joint[1]

    def _decide(self, bank: ProfileBank, ids: list[str], X: sp.csr_matrix) -> list[Decision]:
        if not len(bank) or not ids:
            return []
        hits = bank.decide(X)
        now = time.time()
        for name in bank.names:
            self.scored[name] += len(ids)
        self.stats["scored"] += len(ids) * len(bank)
        self.stats["decisions"] += len(hits)
        entries = self._entries
        return [Decision(ids[h.row], h.profile, h.score, h.threshold, h.model_version, now,
                         entries[h.profile].profile_epoch if h.profile in entries else "")
                for h in hits]

    # -- 3. profiles ---------------------------------------------------------------------------
    def entry(self, name: str, table: MutableMapping[str, bytes]) -> ProfileEntry | None:
        """The profile ``name`` from the table (decoded once per table value)."""
        raw = table.get(name)
        if raw is None:
            return None
        jraw = None if self.journal is None else self.journal.get(name)
        if self._raw.get(name) is raw and self._jraw.get(name) is jraw and name in self._entries:
            return self._entries[name]
        entry = self._decode(name, raw, jraw)
        if entry is None:
            return None
        self._put(name, raw, entry, jraw)
        return entry

    def _decode(self, name: str, raw: bytes, jraw: bytes | None = None) -> ProfileEntry | None:
        """Decode a table value and learn its journal's batches after it; a bad record is
        logged and counted once (per value), a bad journal too (the record alone is used).

        A value that does not decode also drops the profile decoded from the name's
        previous value, if one is held: a record going bad live (a newer worker's,
        recovered after a rebalance) is then what it is at start-up, a profile skipped,
        not the old model scored while its judgments are refused (forty-ninth session).

        A value equal to the one found bad is that value again (recovery reads every value
        of a partition that comes back as a new object): not logged nor counted again."""
        if known_unusable(self._bad, name, raw):
            return None
        try:
            entry = self._decode_record(name, raw)
        except MemoryError:
            raise  # the worker's, not the value's: not a reason to skip the profile for good
        except Exception as exc:
            # ServiceError, or what no check foresaw (a bug, or a value no test made):
            # either way this value's fault, so it costs this profile, not every scoring
            # of the shards it is synced with (forty-ninth session: an IndexError there
            # failed every document batch of the worker while the value stayed)
            self._bad[name] = raw
            self.stats["bad_state"] += 1
            why = str(exc) if isinstance(exc, ServiceError) else f"{type(exc).__name__}: {exc}"
            log.warning("profile %r: unusable state record, profile skipped (send its spec "
                        "again to rebuild it): %s", name, clip(why))
            self._drop_held(name)
            return None
        self._bad.pop(name, None)
        if jraw is not None and entry.epoch and not self._replay(name, entry, jraw):
            # the replay may have stopped part way, the profile holding some of the
            # journal's batches but not their keys nor its position: the record alone
            # again, as logged (the bytes decoded once already: no error this time)
            entry = self._decode_record(name, raw)
        return entry

    def _decode_record(self, name: str, raw: bytes) -> ProfileEntry:
        return decode_profile_record(raw, self.weights, name,
                                     n_features=self.vectorizer.n_features)

    def _drop_held(self, name: str) -> None:
        """Stop holding the profile ``name`` (its table value is not usable)."""
        self._forget(name)
        bank = self._banks.get(self.shard(name))
        if bank is not None and name in bank:
            bank.remove(name)

    def _replay(self, name: str, entry: ProfileEntry, jraw: bytes) -> bool:
        """Learn the journal's batches that follow the state record, as they were learned;
        False when the journal cannot be used (logged, counted; ``entry`` may then hold
        part of it)."""
        try:
            epoch, batches = decode_journal(jraw, name, self.vectorizer.n_features)
            if epoch != entry.epoch:
                return True  # the journal of an earlier profile of this name: not ours
            todo = after(batches, entry.seq)
            if not todo:
                return True
            # the batches' learn_many calls in one step (Profile.relearn_rows): the state
            # they leave, with one re-threshold instead of one a batch, and the rows of
            # all the batches stacked into one matrix; a correction (step -1) ends the
            # step, is made (Profile.relabel) and the next one begins after it
            X = stack_batches(todo, self.vectorizer.n_features)
            relevant = [r for b in todo for r in b.relevant]
            profile = entry.profile

            def rows(a: int, b: int) -> sp.csr_matrix:
                return X if (a, b) == (0, X.shape[0]) else X[a:b]

            in_place: set[int] = set()
            sizes: list[int] = []
            first = at = 0
            for b in todo:
                for n in b.plan():
                    if n > 0:
                        sizes += call_sizes(n, b.coalesce)
                        at += n
                        continue
                    if sizes:
                        profile.relearn_rows(rows(first, at), relevant[first:at], sizes)
                    if profile.relabel(X[at:at + 1], relevant[at]):
                        in_place.add(at)
                    at += 1
                    first, sizes = at, []
            if sizes:
                profile.relearn_rows(rows(first, at), relevant[first:at], sizes)
            row = 0
            for b in todo:
                docs = b.docs if b.docs is not None else [None] * len(b.keys)
                for key, doc, rel in zip(b.keys, docs, b.relevant, strict=True):
                    entry.remember(key, doc, rel, in_place=row in in_place)
                    row += 1
            entry.seq = todo[-1].seq
            entry.journal_batches = len(todo)
            entry.journal_bytes = len(jraw)  # appends go on from this value
            self.stats["journal_replayed"] += len(todo)
        except MemoryError:
            raise  # (as in _decode)
        except Exception as exc:
            # JournalError, FilterError (a batch the profile refuses) or what no check
            # foresaw: the journal's fault, never every scoring of the shard (see _decode).
            # The judgments after the record are lost for this profile (logged, counted)
            self.stats["bad_journal"] += 1
            why = str(exc) if isinstance(exc, SiftError) else f"{type(exc).__name__}: {exc}"
            log.warning("profile %r: unusable judgment journal, the state record (batch %d) "
                        "used alone: %s", name, entry.seq, clip(why))
            return False
        return True

    def _put(self, name: str, raw: bytes, entry: ProfileEntry, jraw: bytes | None) -> None:
        self._raw[name] = raw
        self._jraw[name] = jraw
        self._entries[name] = entry
        bank = self._banks.setdefault(self.shard(name), ProfileBank())
        bank.add(entry.profile)

    def _forget(self, name: str) -> None:
        self._raw.pop(name, None)
        self._jraw.pop(name, None)
        self._entries.pop(name, None)

    def _write(self, name: str, entry: ProfileEntry, table: MutableMapping[str, bytes],
               raw: bytes | None = None) -> None:
        """Write the profile's whole state record (its journal starts again after it);
        ``raw``: the record, when the caller has just encoded it."""
        entry.journal_batches = entry.journal_bytes = 0
        if raw is None:
            raw = self._fit_record(name, entry)
        entry.record_bytes = len(raw)
        table[name] = raw
        self._bad.pop(name, None)  # a value found bad before is no longer the profile's
        # the journal value stays (its batches are all in the record now) until the next
        # append replaces it: deleting it here could land without the record
        jraw = None if self.journal is None else self.journal.get(name)
        self._put(name, raw, entry, jraw)
        self.stats["state_records"] += 1
        self.stats["state_bytes_max"] = max(self.stats["state_bytes_max"], len(raw))

    def _fit_record(self, name: str, entry: ProfileEntry) -> bytes:
        """The profile's record, within :attr:`max_record_bytes`: what grows with the
        judgments, the judgment keys (up to 200,000, some 8 MiB) and the documents'
        labels (up to 50,000), gives way, the oldest keys first, then the oldest labels,
        until it fits beside the state (a bagged profile's five members with full
        example sets take some 13 MiB of the 16). Counted (``record_keys_trimmed``) and
        logged; a state too large alone is refused when the profile is made
        (``state_too_large``)."""
        raw = encode_profile_record(entry)
        limit = self.max_record_bytes
        if limit is None or len(raw) <= limit:
            return raw
        dropped = 0
        while len(raw) > limit and (entry.judged or entry.labels):
            need, freed = len(raw) - limit, 0
            while freed < need and entry.judged:
                entry.judged.pop_oldest()
                freed += 11  # 8 bytes of digest, in base64
                dropped += 1
            while freed < need and entry.labels:
                doc = next(iter(entry.labels))
                del entry.labels[doc]
                freed += len(orjson.dumps(doc)) + 9
                dropped += 1
            raw = encode_profile_record(entry)
        self.stats["record_keys_trimmed"] += dropped
        log.warning("profile %r: its record would pass %d bytes; the %d oldest judgment keys "
                    "and labels were forgotten (%d bytes now)", name, limit, dropped, len(raw))
        return raw

    def _save_batch(self, name: str, entry: ProfileEntry, table: MutableMapping[str, bytes],
                    X: sp.csr_matrix | None, relevant: list[bool], keys: list[str],
                    docs: list[str] | None = None, steps: list[int] | None = None) -> None:
        """After a learned batch: append it to the journal, or write the state record when
        the journal is off, full, or the record predates journals (or ``X`` is ``None``:
        nothing to append)."""
        entry.seq += 1
        journal = self.journal
        if journal is None or not self.append_journal or not entry.epoch \
                or name in self._rewrite or X is None:
            if journal is not None and not entry.epoch:
                entry.epoch = uuid.uuid4().hex  # a record from before journals: start one
                # (the record is written now, with it)
                entry.profile_epoch = entry.profile_epoch or new_profile_epoch()
            self._rewrite.discard(name)
            self._write(name, entry, table)
            return
        piece = encode_batch(entry.seq, X, relevant, keys, self.coalesce_judgments, docs, steps)
        if journal_full(entry.journal_batches, entry.journal_bytes, len(piece),
                        entry.record_bytes):
            self._write(name, entry, table)
            return
        last = self._jraw.get(name)
        p = entry.profile
        latest = {"threshold": None if math.isinf(p.threshold_) else p.threshold_,
                  "model_version": p.version_, "n_judged": p.n_judged_,
                  "n_pending": p.n_pending_}
        # the journal value goes on from the batches after the record (the value this
        # worker wrote or learned last), or starts again
        jraw = (append(last, piece, name, entry.epoch, latest)
                if entry.journal_batches and last is not None
                else encode_journal(name, entry.epoch, [piece], latest))
        entry.journal_batches += 1
        entry.journal_bytes = len(jraw)
        journal[name] = jraw
        self._jraw[name] = jraw
        self.stats["journal_appends"] += 1
        self.stats["journal_bytes_max"] = max(self.stats["journal_bytes_max"], len(jraw))

    def rewrite_records(self, names: Iterable[str] | None = None) -> None:
        """Make the next save of these profiles (default: all held) a whole state record.

        After a table write that did not reach the changelog: a journal appended after a
        lost record would not continue the record on the broker, and recovery would fall
        back to the older record (``bad_journal``); a new record repairs it at once."""
        self._rewrite.update(self._entries if names is None else names)

    def _drop(self, name: str, table: MutableMapping[str, bytes]) -> None:
        if name in table:
            del table[name]
        if self.journal is not None and name in self.journal:
            del self.journal[name]
        self._forget(name)
        self._bad.pop(name, None)
        self.scored.pop(name, None)
        bank = self._banks.get(self.shard(name))
        if bank is not None:
            bank.remove(name)

    def build_profile(self, spec: ProfileSpec) -> AnyProfile:
        """Train a new profile from a spec: query, positives (ids or texts), training set;
        a bagged one (:class:`~sift.filters.bagging.BaggedProfile`) when ``spec.bags`` > 1."""
        tr = self.training
        rows: list[int] = []
        extra: list[sp.csr_matrix] = []
        texts: list[str] = []
        for pos in spec.positives:
            if pos in tr.ids:
                rows.append(tr.ids[pos])
            elif (x := self.store.get(pos)) is not None:
                extra.append(x)
            elif is_positive_text(pos):
                texts.append(pos)
            else:
                raise unknown_positive(spec.profile, pos, "a training document or a recently seen one")
        if texts:
            extra.append(self.vectorizer.transform(texts))
        X = tr.X
        if extra:
            more = sp.vstack(extra, format="csr")
            base = 0 if X is None else X.shape[0]
            X = more if X is None else sp.vstack([X, more], format="csr")
            rows.extend(range(base, base + more.shape[0]))
        query = spec.query or query_from_name(spec.profile)
        kwargs: dict[str, Any] = dict(query=query, model=spec.model, model_params=spec.params,
                                      measure=spec.measure, update=spec.update)
        profile: AnyProfile = (
            BaggedProfile.of(spec.profile, spec.bags, rule=spec.bag_rule, **kwargs) if spec.bags > 1
            else Profile(spec.profile, **kwargs))
        qv = self.vectorizer.transform([query]) if query.strip() else None
        profile.fit(qv, X, positives=rows, feature_weights=self.weights,
                    n_features=self.vectorizer.n_features)
        return profile

    def _carry_judgments(self, spec: ProfileSpec, profile: AnyProfile,
                         table: MutableMapping[str, bytes],
                         ) -> tuple[JudgmentKeys, dict[str, bool]]:
        """A profile replaced by a new spec keeps its feedback: ``profile`` (built from
        ``spec``) learns the judgments the profile of that name holds
        (:meth:`~sift.filters.profile.Profile.judgments`, under the new update policy),
        and the judgment keys it saw are returned for the new entry, so a re-delivered
        judgment stays a duplicate, with the labels of the documents whose judgments it
        learned (so a later judgment of one of them is still told apart as a repeat or a
        correction). The labels of judgments the old profile no longer held (evicted
        from its example set, or ignored under ``update="never"``) are not carried: the
        new profile never learned them, so a later judgment of such a document is new to
        it (not a repeat, nor a correction taking out of its sums what they never held).
        The held judgments are the newest (``labels`` is in their order), one label each.
        Nothing is carried with ``reset``, or for a new name.

        Nor when either profile is under ``update="never"`` (fiftieth session): a new one
        would ignore the judgments, and an old one learned none of those it saw, so their
        keys and labels are not carried either; until then they were, and the judgments,
        held by no profile, were skipped as duplicates when sent again under a later spec
        that learns (the feedback lost for good)."""
        if spec.reset or spec.profile not in table:
            return JudgmentKeys(MAX_JUDGED_KEYS), {}
        old = self.entry(spec.profile, table)
        if old is None or "never" in (profile.update, old.profile.update):
            return JudgmentKeys(MAX_JUDGED_KEYS), {}
        # the old record was decoded at this vectorizer's width (decode_profile_record
        # refuses another), so its rows fit the new profile
        X, relevant, weights = old.profile.judgments()
        if relevant.size:
            profile.learn_many(X, relevant, weights)
            self.stats["judgments_carried"] += int(relevant.size)
        held = int(relevant.size)
        labels = (dict(old.labels) if held >= len(old.labels)
                  else dict(itertools.islice(old.labels.items(), len(old.labels) - held, None)))
        return old.judged.copy(), labels

    def apply_specs(self, messages: Iterable[InputMessage],
                    table: MutableMapping[str, bytes]) -> UpdateResult:
        """Create, replace or delete profiles; state written back to ``table``. A spec
        creating or replacing a profile whose name is a review's (:attr:`reviews`) is
        dead-lettered (``review_exists``); deleting one is not refused (a profile made
        before the check can be deleted)."""
        out = UpdateResult()
        for msg in messages:
            try:
                spec = decode_profile_spec(msg.value or b"")
            except RecordError as exc:
                self._dead(out.dead_letters, msg, exc)
                continue
            if self.shard(spec.profile) != msg.partition:
                self.stats["forwarded"] += 1
                out.forwards.append(Forward(self.profiles_topic, self.shard(spec.profile),
                                            spec.profile.encode(), msg.value or b""))
                continue
            if spec.delete:
                if spec.profile not in table:
                    self._dead(out.dead_letters, msg, RecordError(
                        "unknown_profile",
                        f"cannot delete profile {spec.profile!r}: no such profile"))
                    continue
                self._drop(spec.profile, table)
                self.stats["profiles_deleted"] += 1
                out.changed.append(spec.profile)
                continue
            if self.reviews is not None and spec.profile in self.reviews:
                self._dead(out.dead_letters, msg, RecordError(
                    "review_exists", f"a standing profile needs another name: review "
                    f"{spec.profile!r} is running"))
                continue
            try:
                profile = self.build_profile(spec)
            except RecordError as exc:
                self._dead(out.dead_letters, msg, exc)
                continue
            except (FilterError, ValueError, TypeError) as exc:
                self._dead(out.dead_letters, msg, RecordError("bad_params", f"profile "
                                                              f"{spec.profile!r}: {exc}"))
                continue
            judged, labels = self._carry_judgments(spec, profile, table)
            previous = self.entry(spec.profile, table) if spec.profile in table else None
            if previous is not None:
                # decisions' model_version goes on from the replaced profile's, never back
                profile.continue_versions(previous.profile.version_)
            # a new epoch: a journal left by an earlier profile of this name is not ours;
            # the profile's life goes on through a replacement, not through a reset
            life = (previous.profile_epoch if previous is not None and not spec.reset
                    and previous.profile_epoch else new_profile_epoch())
            entry = ProfileEntry(spec, profile, judged=judged, epoch=uuid.uuid4().hex,
                                 replaces=spec.profile in table, labels=labels,
                                 profile_epoch=life)
            raw = self._fit_record(spec.profile, entry)  # carried keys give way first
            limit = self.max_record_bytes
            if limit is not None and len(raw) > limit:
                bags = f"{spec.bags} bagged members, " if spec.bags > 1 else ""
                self._dead(out.dead_letters, msg, RecordError(
                    "state_too_large",
                    f"profile {spec.profile!r}: its state ({bags}{profile.model}) is "
                    f"{len(raw) / 2**20:.1f} MiB, over the {limit / 2**20:.1f} MiB a table "
                    f"record may hold" + ("; use fewer bags" if spec.bags > 1 else "")))
                continue
            self._write(spec.profile, entry, table, raw)
            self.stats["profiles_created"] += 1
            out.changed.append(spec.profile)
        return out

    # -- 4. judgments --------------------------------------------------------------------------
    def apply_judgments(self, messages: Iterable[InputMessage],
                        table: MutableMapping[str, bytes]) -> UpdateResult:
        """Apply judgments under each profile's update policy; write changed profiles back.

        A document has one label per profile, its last judgment's. A judgment of a
        document the profile has a label for is a *repeat* when it gives the same label
        (skipped and counted, ``judgments_repeated``: learning a document twice would
        count it twice in the model and in TROT) and a *correction* when it gives the
        other (:meth:`~sift.filters.profile.Profile.relabel`, ``judgments_corrected``).
        A judgment delivered again (its key seen) stays a duplicate; without an ``id`` the
        key is the document's, so a judgment without an id giving the other label is a
        correction too. One giving the other label of a document whose judgment the
        profile never learned (another vector: a ``text`` without the title the document
        was scored with; ignored under ``update="never"``) is learned as a new judgment,
        counted in ``judgments`` (see :meth:`_learn_items`)."""
        out = UpdateResult()
        batches: dict[str, list[tuple[Judgment, tuple[sp.csr_matrix, int], bool]]] = {}
        seen: set[tuple[str, str]] = set()
        # the labels this batch gives, before they are applied
        given: dict[tuple[str, str], bool] = {}
        for msg in messages:
            try:
                j = decode_judgment(msg.value or b"")
            except RecordError as exc:
                self._dead(out.dead_letters, msg, exc)
                continue
            if self.shard(j.profile) != msg.partition:
                self.stats["forwarded"] += 1
                out.forwards.append(Forward(self.judgments_topic, self.shard(j.profile),
                                            j.profile.encode(), msg.value or b""))
                continue
            entry = self.entry(j.profile, table)
            if entry is None:
                # a record there that does not decode is not a missing profile: say so,
                # and what rebuilds it (its record is never overwritten unasked: it may
                # be a newer version's, which a newer worker still reads)
                self._dead(out.dead_letters, msg, RecordError(
                    "unknown_profile", f"judgment for profile {j.profile!r}, {UNUSABLE}"
                    if j.profile in table else f"judgment for unknown profile {j.profile!r}"))
                continue
            if j.profile_epoch is not None and entry.profile_epoch \
                    and j.profile_epoch != entry.profile_epoch:
                self._dead(out.dead_letters, msg, RecordError(
                    "stale_profile", f"judgment of document {j.doc_id!r} for profile "
                    f"{j.profile!r} of epoch {clip(j.profile_epoch, 80)!r}: that profile was "
                    f"deleted or reset; the profile now is epoch {entry.profile_epoch!r}"))
                continue
            label = given.get((j.profile, j.doc_id), entry.labels.get(j.doc_id))
            correct = label is not None and label != j.relevant
            if (j.key in entry.judged or (j.profile, j.key) in seen) and not (
                    correct and j.id is None):
                self.stats["judgments_duplicate"] += 1
                log.info("judgment %r of %r (%s[%d]@%d) already applied%s", j.key, j.profile,
                         msg.topic, msg.partition, msg.offset,
                         " in this batch" if (j.profile, j.key) in seen else "")
                continue
            if label is not None and not correct:
                self.stats["judgments_repeated"] += 1
                log.info("judgment %r of %r (%s[%d]@%d): document %r is judged %s already",
                         j.key, j.profile, msg.topic, msg.partition, msg.offset, j.doc_id,
                         "relevant" if label else "not relevant")
                # its key is not remembered: it changed nothing, so delivered again it
                # is a repeat again (the profile's keys are those of its record and
                # journal, which a worker taking over reads back)
                seen.add((j.profile, j.key))
                continue
            x = self.store.locate(j.doc_id)
            if x is None and j.text:
                size = len(j.text.encode("utf-8"))
                if size > self.max_document_bytes:
                    self._dead(out.dead_letters, msg, RecordError(
                        "too_large", f"judgment of document {j.doc_id!r} carries {size} bytes "
                        f"of text, over the limit of {self.max_document_bytes}"))
                    continue
                x = (self.vectorizer.transform([j.text]), 0)
            if x is None:
                self._dead(out.dead_letters, msg, RecordError(
                    "unknown_document",
                    f"{'correction' if correct else 'judgment'} of document {j.doc_id!r}: the "
                    f"document was not seen or is no longer kept (the last "
                    f"{self.store.capacity} are); send the judgment with its 'text'"))
                continue
            seen.add((j.profile, j.key))
            given[(j.profile, j.doc_id)] = j.relevant
            batches.setdefault(j.profile, []).append((j, x, correct))
        for name, items in batches.items():
            entry = self._entries[name]
            try:
                X = stack_row_refs([x for _, x, _ in items])
                X.sort_indices()  # as the journal stores them: relearning sums in this order
                steps, in_place = self._learn_items(entry.profile, items, X)
                for k, (j, _, _) in enumerate(items):
                    entry.remember(j.key, j.doc_id, j.relevant, in_place=k in in_place)
                # the journal holds every row with what was done with it (steps: runs
                # learned and corrections), so a worker taking over does the same
                self._save_batch(name, entry, table, X, [j.relevant for j, _, _ in items],
                                 [j.key for j, _, _ in items], [j.doc_id for j, _, _ in items],
                                 steps)
            except Exception:
                # the profile may have learned part of the batch: drop it, so that its
                # next use (the caller's retry, message by message) decodes it again
                # from its table value and journal, as it was before the batch
                self._forget(name)
                raise
            self.stats["judgments"] += sum(n for n in steps if n > 0)
            self.stats["judgments_corrected"] += steps.count(-1)
            self.stats["judgment_profile_batches"] += 1  # one re-threshold and write each
            out.changed.append(name)
        if batches:
            self.stats["judgment_batches"] += 1
        return out

    def _learn_items(self, profile: AnyProfile,
                     items: list[tuple[Judgment, tuple[sp.csr_matrix, int], bool]],
                     X: sp.csr_matrix) -> tuple[list[int], set[int]]:
        """Learn a profile's judgments of a batch in order (``X``: their rows, stacked):
        the runs of new ones a batch at a time (:func:`learn_batch`), each correction by
        :meth:`~sift.filters.profile.Profile.relabel`. Returns the steps taken (a run of
        ``n`` rows learned: ``n``; a correction: ``-1``; as
        :attr:`~sift.agents.journal.JournalBatch.steps`) and the numbers of the items
        corrected where the profile holds them.

        A correction of a judgment the profile never learned
        (:meth:`~sift.filters.profile.Profile.find_judgment` is ``None``: its vector is
        not the one judged, e.g. a judgment's ``text`` without the document's title, or
        the judgment was ignored under ``update="never"``) is learned as a new judgment:
        there is nothing to take back."""
        steps: list[int] = []
        in_place: set[int] = set()
        first = 0  # the run of new judgments not learned yet: items first..k-1

        def flush(k: int) -> None:
            if k > first:
                rows = X if k - first == X.shape[0] else X[first:k]
                learn_batch(profile, rows, [j.relevant for j, _, _ in items[first:k]],
                            coalesce=self.coalesce_judgments)
                steps.append(k - first)

        for k, (j, _, correct) in enumerate(items):
            if not correct:
                continue
            flush(k)
            first = k
            row = X[k:k + 1]  # the row as it was learned
            if profile.find_judgment(row, not j.relevant) is None:
                if profile.update != "never":
                    log.warning("judgment %r of %r: document %r has the other label, but the "
                                "profile holds no judgment of this vector (judged from another "
                                "text?): learned as a new judgment", j.key, j.profile, j.doc_id)
                continue  # it begins the next run
            held = profile.relabel(row, j.relevant)
            steps.append(-1)
            first = k + 1
            if held:
                in_place.add(k)
            log.info("judgment %r of %r corrects document %r to %s%s", j.key, j.profile,
                     j.doc_id, "relevant" if j.relevant else "not relevant",
                     "" if held else " (its judgment was no longer held: learned anew)")
        flush(len(items))
        return steps, in_place

    def counters(self) -> dict[str, Any]:
        """A JSON-safe snapshot of the counters.

        The worker writes it from a thread of its own (the stats file) while the main
        thread scores: every container is copied in one C-level step before it is walked
        (a generator over ``self._banks`` would raise if a shard's first batch added a
        bank meanwhile)."""
        banks = list(self._banks.values())
        return {"stats": dict(self.stats), "scored": dict(self.scored),
                "documents_kept": len(self.store), "memory": memory_usage(),
                "profiles": sorted(n for b in banks for n in b.names)}


def learn_batch(profile: AnyProfile, X: sp.csr_matrix, relevant: Sequence[bool], *,
                coalesce: bool = True) -> None:
    """Apply judgments (row ``i`` of ``X`` judged ``relevant[i]``) to one profile, in order.

    Thin adapter over the core: with ``coalesce``, :meth:`Profile.learn_many` (one
    re-threshold for the batch, exactly the state one by one would leave, under
    every update policy); without it, one :meth:`Profile.learn_one` per judgment.
    """
    if X.shape[0] != len(relevant):
        raise ValueError(f"learn_batch: {X.shape[0]} rows but {len(relevant)} labels")
    start = 0
    for n in call_sizes(len(relevant), coalesce):
        rows = X if n == X.shape[0] else X[start:start + n]
        profile.learn_many(rows, [bool(r) for r in relevant[start:start + n]])
        start += n


def call_sizes(n_rows: int, coalesce: bool) -> list[int]:
    """The rows of each :meth:`Profile.learn_many` call :func:`learn_batch` makes for a
    batch of ``n_rows`` judgments: one call for the batch, or one a row (``learn_one`` is
    ``learn_many`` of the row)."""
    return [n_rows] if coalesce or n_rows == 1 else [1] * n_rows

