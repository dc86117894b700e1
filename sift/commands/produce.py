"""``sift produce``: push a JSONL file of documents, judgments or profile specs to Kafka."""

from __future__ import annotations

import argparse
import gzip
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from sift.commands._common import Progress, positive_int
from sift.errors import SiftError
from sift.settings import Settings
from sift.topics.codecs import GZIP_MAGIC, dumps, is_document_batch, loads, open_jsonl
from sift.topics.errors import RecordError
from sift.topics.records import Document, Judgment, ProfileSpec, document_bytes, show
from sift.topics.review import ReviewSpec, is_review_obj

EPILOG = """\
examples:
  sift produce data/reuters21578/test.jsonl.gz                 # batches of 100 documents
  sift produce docs.jsonl --batch 1                            # one document per message
  sift produce judgments.jsonl --topic judgments
  sift produce profiles.jsonl --topic profiles
  sift produce anything.jsonl --topic documents --raw          # lines as they are
  sift produce tailed.jsonl                                    # what `sift tail documents` printed
  echo '{"doc_id": "r14832", "profile": "trade", "relevant": true}' \\
    | sift produce - --topic judgments                          # - reads standard input

Documents are keyed by id (a batch by its first id); judgments and profile specs
by profile, which puts them on the partition of the worker that owns the profile.
A documents line may also be a batch, {"documents": [...]} (what `sift tail documents`
prints): its documents are checked one by one and sent re-batched by --batch.
Every line is validated before the first is sent: a bad line is reported with its
file and line number and nothing is sent. --raw sends lines as they are, unchecked,
one a message; a line that is a JSON object is still keyed as above (by its "id", a
batch by its first document's "id", or by its "profile"), any other line is unkeyed.
A documents line is also refused when the worker would dead-letter it: a document over
SIFT_MAX_DOCUMENT_BYTES of text and title (too_large), or an id that came earlier in
the input (duplicate_id).
A file, a pipe or standard input is read as gzip when it starts with gzip's magic bytes.
A message the broker refuses (larger than its message.max.bytes, say) stops the
command with an error naming its file and lines; "sent" counts only what it took.
"""

def _spec(obj: Any) -> Any:
    """A profiles-topic record as the worker reads it: a review spec when it has a
    ``mode`` (a misspelt mode is refused here, as the worker would dead-letter it),
    otherwise a standing profile's spec."""
    return ReviewSpec.from_obj(obj) if is_review_obj(obj) else ProfileSpec.from_obj(obj)


PARSERS: dict[str, Any] = {"documents": Document.from_obj, "judgments": Judgment.from_obj,
                           "profiles": _spec}

#: what a record of each topic is called in a message's description (one, several)
NOUNS = {"documents": ("document", "documents"), "judgments": ("judgment", "judgments"),
         "profiles": ("profile spec", "profile specs")}

def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("produce", help="push a JSONL file (gzip allowed) to a sift topic",
                       description="Validate and push JSONL records to Kafka.", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", type=Path, help="a JSONL file (gzip allowed), or - for standard input")
    p.add_argument("--topic", choices=sorted(PARSERS), default="documents",
                   help="which sift topic the records go to (default documents)")
    p.add_argument("--batch", type=positive_int, default=100,
                   help="documents per message (default 100; 1 sends one per message)")
    p.add_argument("--limit", type=positive_int, default=None, help="send at most this many records")
    p.add_argument("--raw", action="store_true",
                   help="send lines unvalidated, one per message; a line that is a JSON object is "
                        "still keyed by its document 'id' (a batch: its first id) or its 'profile' "
                        "(strings only), so a profile's records keep their order; other lines "
                        "are unkeyed (any partition, order not kept)")
    p.add_argument("--broker", help="broker URL (SIFT_BROKER)")
    p.set_defaults(func=run)


def label(path: Path) -> str:
    """How errors name the input: the path, or ``<stdin>`` for ``-``."""
    return "<stdin>" if str(path) == "-" else str(path)


def lines(path: Path, data: bytes | None = None) -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` of each non-blank line of ``path``, or of ``data`` (what
    standard input held, gzip allowed) when given."""
    if data is not None:
        if data[:2] == GZIP_MAGIC:
            try:
                data = gzip.decompress(data)
            except (OSError, EOFError, zlib.error) as exc:
                raise SiftError(f"{label(path)}: cannot read: {exc}") from None
        for n, line in enumerate(data.split(b"\n"), 1):
            if line.strip():
                yield n, line.rstrip(b"\r")
        return
    check_input(path)
    try:
        with open_jsonl(path) as fh:  # gzip by name or magic bytes; one open, a pipe too
            for n, line in enumerate(fh, 1):
                if line.strip():
                    yield n, line.rstrip(b"\r\n")
    except (OSError, EOFError, zlib.error) as exc:  # zlib: a corrupt gzip stream
        raise SiftError(f"{path}: cannot read: {exc}") from None


def check_input(path: Path) -> None:
    """A one-line error for an input path that cannot be read: missing, or a folder
    (a pipe, ``<(zcat f)``, is read: it is no regular file but exists)."""
    if path.is_dir():
        raise SiftError(f"{path}: is a directory, not a JSONL file")
    if not path.exists():
        raise SiftError(f"{path}: no such file")


def read_input(path: Path) -> bytes | None:
    """What the command reads twice (checked, then sent), read whole first when it can be
    read only once: standard input (``-``) or a pipe (``<(zcat f)``, ``/dev/stdin``);
    ``None`` for a regular file, which is read again."""
    if str(path) == "-":
        return sys.stdin.buffer.read()
    check_input(path)
    if path.is_file():
        return None
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise SiftError(f"{path}: cannot read: {exc}") from None


class Message(NamedTuple):
    """One message to send and where its records came from.

    Attributes
    ----------
    key, value
        The message's key (``None``: unkeyed) and value.
    records
        How many records (documents, judgments, profile specs, raw lines) it holds.
    first, last
        The input lines its records came from (equal for a message of one line).
    """

    key: bytes | None
    value: bytes
    records: int
    first: int
    last: int

    def where(self, source: str, noun: tuple[str, str]) -> str:
        """How an error names the message: ``test.jsonl:101-200 (100 documents, 2,345,678
        bytes)``; ``noun`` is what one record and several are called.

        >>> Message(b"d1", b"{}", 1, 7, 7).where("d.jsonl", ("document", "documents"))
        'd.jsonl:7 (1 document, 2 bytes)'
        """
        span = str(self.first) if self.first == self.last else f"{self.first}-{self.last}"
        return f"{source}:{span} ({self.records} {noun[self.records != 1]}, {len(self.value):,} bytes)"


def raw_key(line: bytes, topic: str) -> bytes | None:
    """The key the wire contract gives a line sent with ``--raw``, when the line is a JSON
    object whose field is a string: a document's ``id`` (a batch's: its first document's),
    or a judgment's or profile spec's ``profile``; ``None`` (unkeyed) otherwise.

    >>> raw_key(b'{"documents": [{"id": "d1"}, {"id": "d2"}]}', "documents")
    b'd1'
    >>> raw_key(b'{"profile": "trade", "delete": true}', "profiles")
    b'trade'
    >>> raw_key(b'{"profile": 3}', "judgments") is None, raw_key(b"not json", "documents") is None
    (True, True)
    """
    try:
        obj = loads(line)
    except RecordError:
        return None
    if not isinstance(obj, dict):
        return None
    if topic != "documents":
        value = obj.get("profile")
    elif is_document_batch(obj):
        items = obj["documents"]
        first = items[0] if isinstance(items, list) and items else None
        value = first.get("id") if isinstance(first, dict) else None
    else:
        value = obj.get("id")
    return value.encode() if isinstance(value, str) else None


class DocumentCheck:
    """What the worker would refuse of documents that parse: one over
    ``max_document_bytes`` (``too_large``, counted as the worker counts,
    :func:`~sift.topics.records.document_bytes`) and an id that came earlier in the input
    (``duplicate_id``: in one routed batch the worker keeps the first; later, with another
    text, it refuses it). ``None``: no size limit."""

    def __init__(self, max_document_bytes: int | None = None) -> None:
        self.limit = max_document_bytes
        self.seen: dict[str, str] = {}  # id -> where it came first

    def __call__(self, doc: Document, where: str) -> None:
        if self.limit is not None:
            size = document_bytes(doc)
            if size > self.limit:
                raise RecordError("too_large", f"document {show(doc.id)} has {size} bytes of "
                                  f"text, over the limit of {self.limit} "
                                  "(SIFT_MAX_DOCUMENT_BYTES)")
        first = self.seen.get(doc.id)
        if first is not None:
            raise RecordError("duplicate_id", f"document id {show(doc.id)} came before, on "
                              f"{first}: ids must be unique")
        self.seen[doc.id] = where


def _documents(obj: Any, where: str, room: int | None, lineno: int = 0,
               check: DocumentCheck | None = None) -> list[Document]:
    """The documents of a parsed documents line (one, or the items of a batch, at most
    ``room`` of them when given), checked one by one (and by ``check``, the line being
    ``lineno``), without their gold labels; a bad one is a :class:`SiftError` naming
    ``where`` (file:line) and its index in the batch."""
    parse = PARSERS["documents"]
    check = check or DocumentCheck()
    if not is_document_batch(obj):
        try:
            found = [parse(obj)]
            check(found[0], f"line {lineno}")
        except RecordError as exc:
            raise SiftError(f"{where}: {exc}") from None
    else:
        items = obj["documents"]
        if not isinstance(items, list):
            raise SiftError(f"{where}: field 'documents' must be a list")
        found = []
        for i, item in enumerate(items if room is None else items[:room]):
            try:
                found.append(parse(item))
                check(found[-1], f"line {lineno}, documents[{i}]")
            except RecordError as exc:
                raise SiftError(f"{where}: documents[{i}]: {exc}") from None
    return [Document(d.id, d.text, d.title, d.date, d.metadata) for d in found]  # no gold labels


def _batch(pending: list[tuple[int, Document]], batch: int) -> Message:
    """The message of documents read from lines ``pending[i][0]`` (one document alone when
    ``batch`` is 1, else a ``{"documents": [...]}`` batch)."""
    docs = [d for _, d in pending]
    first, last = min(n for n, _ in pending), max(n for n, _ in pending)
    if batch <= 1:
        return Message(docs[0].id.encode(), dumps(docs[0].to_obj()), 1, first, last)
    return Message(docs[0].id.encode(), dumps({"documents": [d.to_obj() for d in docs]}),
                   len(docs), first, last)


def numbered_messages(path: Path, topic: str, batch: int, raw: bool, limit: int | None,
                      data: bytes | None = None, *,
                      max_document_bytes: int | None = None) -> Iterator[Message]:
    """The messages to send, each with the input lines it came from.

    Parameters
    ----------
    path
        The input file, or ``-`` (then ``data`` holds what standard input held).
    topic
        ``documents``, ``judgments`` or ``profiles``.
    batch
        Documents a message (a ``{"documents": [...]}`` line is split and re-batched).
    raw
        Send lines unchecked, one a message, keyed by :func:`raw_key`.
    limit
        At most this many records (documents, not lines, for the documents topic).
    data
        Standard input's bytes, see :func:`lines`.
    max_document_bytes
        The worker's ``SIFT_MAX_DOCUMENT_BYTES`` (``None``: no limit), see
        :class:`DocumentCheck`.

    Raises
    ------
    SiftError
        A line (or an item of a batch line) that is not a valid record, or a document the
        worker would refuse (:class:`DocumentCheck`), named by file and line (and the
        item's index).
    """
    parse = PARSERS[topic]
    check = DocumentCheck(max_document_bytes)
    pending: list[tuple[int, Document]] = []
    count = 0
    for n, line in lines(path, data):
        if limit is not None and count >= limit:
            break
        if raw:
            count += 1
            yield Message(raw_key(line, topic), line, 1, n, n)
            continue
        where = f"{label(path)}:{n}"
        try:
            obj = loads(line)
        except RecordError as exc:
            raise SiftError(f"{where}: {exc}") from None
        if topic == "documents":
            for doc in _documents(obj, where, None if limit is None else limit - count, n,
                                  check):
                count += 1
                pending.append((n, doc))
                if len(pending) >= batch:
                    yield _batch(pending, batch)
                    pending = []
            continue
        try:
            rec = parse(obj)
        except RecordError as exc:
            raise SiftError(f"{where}: {exc}") from None
        count += 1
        key = rec.review if isinstance(rec, ReviewSpec) else rec.profile
        yield Message(key.encode(), dumps(rec.to_obj()), 1, n, n)
    if pending:
        yield _batch(pending, batch)


def messages(path: Path, topic: str, batch: int, raw: bool, limit: int | None,
             data: bytes | None = None, *, max_document_bytes: int | None = None
             ) -> Iterator[tuple[bytes | None, bytes, int]]:
    """(key, value, number of records) per message: :func:`numbered_messages` without
    the line numbers."""
    for m in numbered_messages(path, topic, batch, raw, limit, data,
                               max_document_bytes=max_document_bytes):
        yield m.key, m.value, m.records


def run(args: argparse.Namespace) -> int:
    from kafka.errors import MessageSizeTooLargeError

    from sift.kafkaclient import KafkaClientError, Sends, ensure_topics, producer

    settings = Settings.from_env(broker=args.broker)
    if args.batch < 1 or args.batch > settings.max_batch_documents:
        raise SiftError(f"--batch must be between 1 and {settings.max_batch_documents}")
    # standard input or a pipe is read whole first: it is read twice (checked, then sent)
    data = read_input(args.file)
    topic = settings.topic(args.topic)
    # the whole file first: a bad line stops the command before anything is sent, so a
    # corrected file can be sent again without duplicating its first records (--raw:
    # the lines are only counted); an empty one is refused before connecting
    records = sum(n for _, _, n in messages(args.file, args.topic, args.batch, args.raw,
                                            args.limit, data,
                                            max_document_bytes=settings.max_document_bytes))
    if records == 0:
        raise SiftError(f"{label(args.file)}: no records (every line is blank)")
    ensure_topics(settings, [topic])
    prod = producer(settings)
    sends = Sends(prod)
    progress = Progress(None, f"produce {topic}")
    noun = ("raw line", "raw lines") if args.raw else NOUNS[args.topic]
    sent = 0
    held: dict[str, int] = {}  # records of each message sent, by its description
    try:
        for msg in numbered_messages(args.file, args.topic, args.batch, args.raw, args.limit,
                                     data, max_document_bytes=settings.max_document_bytes):
            if sends.failed:  # the broker refused one: stop, the error names it
                break
            where = msg.where(label(args.file), noun)
            held[where] = msg.records
            if not sends.send(topic, msg.key, msg.value, where):
                break  # refused by the client itself: flush reports it
            sent += msg.records
            progress.update(msg.records)
        try:
            sends.flush(timeout=60)
        except KafkaClientError as exc:
            where, refused = sends.failures[0] if sends.failures else ("", None)
            if isinstance(refused, MessageSizeTooLargeError) and held.get(where, 0) > 1 \
                    and not args.raw:
                raise KafkaClientError(f"{exc}; try a smaller --batch than {args.batch}") from None
            raise
    finally:
        progress.close()
        prod.close(timeout=10)
    print(f"sent {sent} {args.topic} to {topic}")
    return 0
