"""``sift produce``: push a JSONL file of documents, judgments or profile specs to Kafka."""

from __future__ import annotations

import argparse
import gzip
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sift.commands._common import Progress, positive_int
from sift.errors import SiftError
from sift.settings import Settings
from sift.topics.codecs import dumps, loads
from sift.topics.errors import RecordError
from sift.topics.records import Document, Judgment, ProfileSpec

EPILOG = """\
examples:
  sift produce data/reuters21578/test.jsonl.gz                 # batches of 100 documents
  sift produce docs.jsonl --batch 1                            # one document per message
  sift produce judgments.jsonl --topic judgments
  sift produce profiles.jsonl --topic profiles
  sift produce anything.jsonl --topic documents --raw          # lines as they are
  echo '{"doc_id": "r14832", "profile": "trade", "relevant": true}' \\
    | sift produce - --topic judgments                          # - reads standard input

Documents are keyed by id (a batch by its first id); judgments and profile specs
by profile, which puts them on the partition of the worker that owns the profile.
Every line is validated before the first is sent: a bad line is reported with its
file and line number and nothing is sent (--raw sends lines as they are).
"""

PARSERS: dict[str, Any] = {"documents": Document.from_obj, "judgments": Judgment.from_obj,
                           "profiles": ProfileSpec.from_obj}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("produce", help="push a JSONL file (gzip allowed) to a sift topic",
                       description="Validate and push JSONL records to Kafka.", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", type=Path, help="a JSONL file (.gz allowed), or - for standard input")
    p.add_argument("--topic", choices=sorted(PARSERS), default="documents",
                   help="which sift topic the records go to (default documents)")
    p.add_argument("--batch", type=positive_int, default=100,
                   help="documents per message (default 100; 1 sends one per message)")
    p.add_argument("--limit", type=positive_int, default=None, help="send at most this many records")
    p.add_argument("--raw", action="store_true", help="send lines unvalidated, one per message")
    p.add_argument("--broker", help="broker URL (SIFT_BROKER)")
    p.set_defaults(func=run)


def label(path: Path) -> str:
    """How errors name the input: the path, or ``<stdin>`` for ``-``."""
    return "<stdin>" if str(path) == "-" else str(path)


def lines(path: Path, data: bytes | None = None) -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` of each non-blank line of ``path``, or of ``data`` (what
    standard input held, gzip allowed) when given."""
    if data is not None:
        if data[:2] == b"\x1f\x8b":
            try:
                data = gzip.decompress(data)
            except (OSError, EOFError, zlib.error) as exc:
                raise SiftError(f"{label(path)}: cannot read: {exc}") from None
        for n, line in enumerate(data.split(b"\n"), 1):
            if line.strip():
                yield n, line.rstrip(b"\r")
        return
    if not path.is_file():
        raise SiftError(f"{path}: no such file")
    opener: Any = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            for n, line in enumerate(fh, 1):
                if line.strip():
                    yield n, line.rstrip(b"\r\n")
    except (OSError, EOFError, zlib.error) as exc:  # zlib: a corrupt gzip stream
        raise SiftError(f"{path}: cannot read: {exc}") from None


def messages(path: Path, topic: str, batch: int, raw: bool, limit: int | None,
             data: bytes | None = None) -> Iterator[tuple[bytes | None, bytes, int]]:
    """(key, value, number of records) per message (of ``data`` instead of the file when
    given, see :func:`lines`)."""
    parse = PARSERS[topic]
    pending: list[Document] = []
    count = 0
    for n, line in lines(path, data):
        if limit is not None and count >= limit:
            break
        count += 1
        if raw:
            yield None, line, 1
            continue
        try:
            rec = parse(loads(line))
        except RecordError as exc:
            raise SiftError(f"{label(path)}:{n}: {exc}") from None
        if isinstance(rec, Document):
            rec = Document(rec.id, rec.text, rec.title, rec.date, rec.metadata)  # no gold labels
            if batch <= 1:
                yield rec.id.encode(), dumps(rec.to_obj()), 1
                continue
            pending.append(rec)
            if len(pending) >= batch:
                yield pending[0].id.encode(), dumps({"documents": [d.to_obj() for d in pending]}), \
                    len(pending)
                pending = []
        else:
            yield rec.profile.encode(), dumps(rec.to_obj()), 1
    if pending:
        yield pending[0].id.encode(), dumps({"documents": [d.to_obj() for d in pending]}), \
            len(pending)


def run(args: argparse.Namespace) -> int:
    from sift.kafkaclient import ensure_topics, producer

    settings = Settings.from_env(broker=args.broker)
    if args.batch < 1 or args.batch > settings.max_batch_documents:
        raise SiftError(f"--batch must be between 1 and {settings.max_batch_documents}")
    # standard input is read whole first: it is read twice (checked, then sent)
    data = sys.stdin.buffer.read() if str(args.file) == "-" else None
    if data is None and not args.file.is_file():
        raise SiftError(f"{args.file}: no such file")
    topic = settings.topic(args.topic)
    if not args.raw:
        # the whole file first: a bad line stops the command before anything is sent,
        # so a corrected file can be sent again without duplicating its first records
        for _ in messages(args.file, args.topic, args.batch, args.raw, args.limit, data):
            pass
    ensure_topics(settings, [topic])
    prod = producer(settings)
    progress = Progress(None, f"produce {topic}")
    sent = 0
    try:
        for key, value, n in messages(args.file, args.topic, args.batch, args.raw, args.limit,
                                      data):
            prod.send(topic, key=key, value=value)
            sent += n
            progress.update(n)
        prod.flush(timeout=60)
    finally:
        progress.close()
        prod.close(timeout=10)
    print(f"sent {sent} {args.topic} to {topic}")
    return 0
