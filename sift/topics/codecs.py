"""orjson codecs for the wire records, and the JSONL file readers.

Decoding never raises anything but :class:`~sift.topics.errors.RecordError`:
bytes that are not UTF-8, not JSON, or not a valid record all become a
RecordError with a reason code, ready for a dead letter or a one-line error.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import orjson

from sift.topics.errors import RecordError
from sift.topics.records import Decision, Document, Judgment, ProfileSpec

T = TypeVar("T")

MAX_DEPTH_NOTE = "orjson rejects nesting deeper than 1024 levels"


def loads(data: bytes | str) -> Any:
    """Parse JSON bytes, mapping every failure to a RecordError."""
    if isinstance(data, bytes | bytearray | memoryview):
        try:
            bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordError("not_utf8", f"not UTF-8 (byte {exc.start})") from None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        # on one line, the character only: "line 1" beside a JSONL file's own line
        # number read as a second, different line (and a line's newline made it "line 2")
        where = (f"character {exc.pos + 1}" if exc.lineno == 1
                 else f"line {exc.lineno} column {exc.colno}")
        raise RecordError("bad_json", f"not valid JSON: {exc.msg} at {where}") from None


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY)


def _message(data: bytes | None) -> Any:
    """A message's value parsed; no value (``None`` or no bytes) is the reason ``empty``
    on every topic, not ``bad_json``."""
    if not data:
        raise RecordError("empty", "message has no value")
    return loads(data)


def is_document_batch(obj: Any) -> bool:
    """Whether a parsed documents message is a batch, ``{"documents": [...]}``: an object
    with ``documents`` and no ``id``."""
    return isinstance(obj, dict) and "documents" in obj and "id" not in obj


def decode_documents(data: bytes, *, max_batch: int = 1000) -> list[Document]:
    """Decode one message of the documents topic: a document or ``{"documents": [...]}``.

    A batch is all-or-nothing only for its envelope; use :func:`decode_document_batch`
    to get per-item errors.
    """
    docs, errors = decode_document_batch(data, max_batch=max_batch)
    if errors:
        raise errors[0][1]
    return docs


def decode_document_batch(
    data: bytes, *, max_batch: int = 1000
) -> tuple[list[Document], list[tuple[int, RecordError]]]:
    """Decode a documents message; return the good documents and (index, error) per bad item.

    Raises RecordError when the envelope itself is unusable.
    """
    obj = _message(data)
    if is_document_batch(obj):
        items = obj["documents"]
        if not isinstance(items, list):
            raise RecordError("bad_batch", "field 'documents' must be a list")
        if len(items) > max_batch:
            raise RecordError("batch_too_large", f"batch of {len(items)} documents exceeds {max_batch}")
        good: list[Document] = []
        bad: list[tuple[int, RecordError]] = []
        for i, item in enumerate(items):
            try:
                good.append(Document.from_obj(item))
            except RecordError as exc:
                bad.append((i, exc))
        return good, bad
    return [Document.from_obj(obj)], []


def encode_documents(docs: list[Document]) -> bytes:
    if len(docs) == 1:
        return dumps(docs[0].to_obj())
    return dumps({"documents": [d.to_obj() for d in docs]})


def decode_judgment(data: bytes | None) -> Judgment:
    return Judgment.from_obj(_message(data))


def decode_profile_spec(data: bytes | None) -> ProfileSpec:
    return ProfileSpec.from_obj(_message(data))


def decode_decision(data: bytes) -> Decision:
    return Decision.from_obj(loads(data))


def encode(record: Document | Judgment | ProfileSpec | Decision) -> bytes:
    return dumps(record.to_obj())


def write_jsonl(path: str | Path, records: Iterable[Any]) -> int:
    """Write records (objects with ``to_obj()``, or JSON-able values) one per line to
    ``path`` (gzip when it ends in ``.gz``), the format :func:`read_jsonl` reads; the
    number of lines written."""
    p = Path(path)
    opener = gzip.open if p.suffix == ".gz" else open
    n = 0
    with opener(p, "wb") as fh:
        for rec in records:
            fh.write(orjson.dumps(rec.to_obj() if hasattr(rec, "to_obj") else rec) + b"\n")
            n += 1
    return n


#: the first two bytes of a gzip stream
GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(path: Path) -> bool:
    """Whether a file is read as gzip: named ``.gz``, or starting with gzip's magic bytes
    whatever its name (a ``.gz`` file that is not gzip is then refused as unreadable).

    For a regular file only: on a pipe the probe takes bytes the reader then misses
    (:func:`open_jsonl` sniffs the bytes from the stream it reads)."""
    if path.suffix == ".gz":
        return True
    with path.open("rb") as probe:
        return probe.read(len(GZIP_MAGIC)) == GZIP_MAGIC


class _Prefixed(io.RawIOBase):
    """A stream that cannot seek (a pipe) with the bytes already read from it put back."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self._head = head
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        return self._rest.readinto(buffer)  # type: ignore[attr-defined,no-any-return]

    def close(self) -> None:
        self._rest.close()
        super().close()


@contextlib.contextmanager
def open_jsonl(path: str | Path) -> Iterator[BinaryIO]:
    """The bytes of a JSONL file, gunzipped when it is gzip (:func:`is_gzip`'s rule), from
    one open of the path: its first bytes are sniffed from the stream that is then read,
    so a pipe (``<(zcat f)``, ``/dev/stdin``) loses nothing and may hold gzip (before the
    forty-fifth session a second open missed the 8 KiB the probe had buffered). Raises
    OSError (a missing file, a folder) as :func:`open` does."""
    p = Path(path)
    raw = open(p, "rb", buffering=0)  # noqa: SIM115 (closed below)
    try:
        head = b""
        while len(head) < len(GZIP_MAGIC):  # a pipe may give fewer bytes than asked
            more = raw.read(len(GZIP_MAGIC) - len(head))
            if not more:
                break
            head += more
        if raw.seekable():
            raw.seek(0)
            stream: BinaryIO = io.BufferedReader(raw)
        else:
            stream = io.BufferedReader(_Prefixed(head, raw))
        if p.suffix == ".gz" or head == GZIP_MAGIC:
            stream = gzip.GzipFile(fileobj=stream, mode="rb")  # type: ignore[assignment]
        yield stream
    finally:
        raw.close()


def read_jsonl_numbered(
    path: str | Path,
    parse: Callable[[Any], T],
    *,
    skip_bad: bool = False,
    on_skip: Callable[[int, RecordError], None] | None = None,
) -> Iterator[tuple[int, T]]:
    """:func:`read_jsonl`, each record with its line number."""
    p = Path(path)
    if not p.exists():
        raise RecordError("no_file", f"{p}: no such file")
    try:
        with open_jsonl(p) as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    yield lineno, parse(loads(line.rstrip(b"\r\n") if isinstance(line, bytes)
                                              else line.rstrip("\r\n")))
                except RecordError as exc:
                    if skip_bad:
                        if on_skip is not None:
                            on_skip(lineno, exc)
                        continue
                    raise RecordError(exc.reason, f"{p}:{lineno}: {exc}") from None
    except (OSError, EOFError, zlib.error) as exc:  # zlib: a corrupt gzip stream
        raise RecordError("unreadable", f"{p}: cannot read: {exc}") from None


def read_jsonl(
    path: str | Path,
    parse: Callable[[Any], T],
    *,
    skip_bad: bool = False,
    on_skip: Callable[[int, RecordError], None] | None = None,
) -> Iterator[T]:
    """Yield records from a JSONL file (gzip allowed, see :func:`is_gzip`; a pipe too,
    see :func:`open_jsonl`).

    A bad line raises ``RecordError`` naming the file and line number, unless
    ``skip_bad`` is set, in which case ``on_skip(line_number, error)`` is called.
    Blank lines are ignored.
    """
    for _, record in read_jsonl_numbered(path, parse, skip_bad=skip_bad, on_skip=on_skip):
        yield record
