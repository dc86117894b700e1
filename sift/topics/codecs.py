"""orjson codecs for the wire records, and the JSONL file readers.

Decoding never raises anything but :class:`~sift.topics.errors.RecordError`:
bytes that are not UTF-8, not JSON, or not a valid record all become a
RecordError with a reason code, ready for a dead letter or a one-line error.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

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
        raise RecordError("bad_json", f"not valid JSON: {exc}") from None


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
    whatever its name (a ``.gz`` file that is not gzip is then refused as unreadable)."""
    if path.suffix == ".gz":
        return True
    with path.open("rb") as probe:
        return probe.read(len(GZIP_MAGIC)) == GZIP_MAGIC


def read_jsonl(
    path: str | Path,
    parse: Callable[[Any], T],
    *,
    skip_bad: bool = False,
    on_skip: Callable[[int, RecordError], None] | None = None,
) -> Iterator[T]:
    """Yield records from a JSONL file (gzip allowed, see :func:`is_gzip`).

    A bad line raises ``RecordError`` naming the file and line number, unless
    ``skip_bad`` is set, in which case ``on_skip(line_number, error)`` is called.
    Blank lines are ignored.
    """
    p = Path(path)
    if not p.exists():
        raise RecordError("no_file", f"{p}: no such file")
    try:
        with (gzip.open(p, "rb") if is_gzip(p) else open(p, "rb")) as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    yield parse(loads(line))
                except RecordError as exc:
                    if skip_bad:
                        if on_skip is not None:
                            on_skip(lineno, exc)
                        continue
                    raise RecordError(exc.reason, f"{p}:{lineno}: {exc}") from None
    except (OSError, EOFError, zlib.error) as exc:  # zlib: a corrupt gzip stream
        raise RecordError("unreadable", f"{p}: cannot read: {exc}") from None
