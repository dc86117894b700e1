"""``sift tail``: print the messages of a sift topic as JSON lines."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable
from itertools import chain, islice
from typing import Any

import orjson

from sift.commands._common import positive_int, positive_seconds
from sift.settings import Settings
from sift.topics import TOPICS

EPILOG = """\
examples:
  sift tail decisions                      # follow new decisions (Ctrl-C stops)
  sift tail dead-letters --from-beginning --timeout 5
  sift tail decisions --max 10 --from-beginning
"""


#: seconds without a message after which ``--timeout`` counts even if the consumer has not
#: got its partitions (or reached their ends): a topic deleted meanwhile must not make it
#: wait for ever
START_GRACE = 30.0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("tail", help="print a sift topic's messages as JSON lines",
                       description="Follow a sift topic (decisions, dead letters, ...).",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("topic", choices=list(TOPICS))
    p.add_argument("--from-beginning", action="store_true", help="start at the oldest message")
    p.add_argument("--max", type=positive_int, default=None, help="stop after this many messages")
    p.add_argument("--timeout", type=positive_seconds, default=None,
                   help="stop after this many seconds without a message (counted once "
                        "the consumer has its partitions and, with --from-beginning, has "
                        "read what they held then)")
    p.add_argument("--broker", help="broker URL (SIFT_BROKER)")
    p.set_defaults(func=run)


def render(value: bytes | None) -> str:
    """The line printed for a message's value: its JSON (compacted), ``{"empty": true}``
    for a message with no value (``None`` or no bytes: a tombstone, or what the worker
    dead-letters as ``empty``), or ``{"undecodable": "..."}`` for bytes that are not JSON.

    >>> render(b'{"a": 1}'), render(None), render(b"")
    ('{"a":1}', '{"empty":true}', '{"empty":true}')
    >>> render(b"not json")
    '{"undecodable":"not json"}'
    """
    if not value:
        return orjson.dumps({"empty": True}).decode()
    try:
        return orjson.dumps(orjson.loads(value)).decode()
    except orjson.JSONDecodeError:
        return orjson.dumps({"undecodable": value.decode("utf-8", "replace")}).decode()


def run(args: argparse.Namespace) -> int:
    from sift.kafkaclient import EndWatch, consumer, partition_counts

    settings = Settings.from_env(broker=args.broker)
    topic = settings.topic(args.topic)
    exists = topic in partition_counts(settings, [topic])
    if not exists:
        # waiting for it is right before the first worker starts, not with a misspelt prefix
        print(f"sift tail: topic {topic} does not exist yet; waiting for it (is "
              f"SIFT_TOPIC_PREFIX={settings.topic_prefix!r} right?)", file=sys.stderr)
    cons = consumer(settings, topic,
                    auto_offset_reset="earliest" if args.from_beginning else "latest")
    count = 0
    last = time.monotonic()
    out = sys.stdout
    # --timeout counts from when the consumer has its partitions (and, --from-beginning,
    # has read up to their ends as they were then): it counted from the start, so a
    # consumer slower than the timeout to connect and seek (TLS, a loaded machine)
    # printed nothing for a topic that held messages (forty-sixth session). A topic that
    # does not exist has nothing to wait for: the timeout counts at once.
    started = EndWatch(cons) if exists else None
    try:
        while args.max is None or count < args.max:
            batch = cons.poll(timeout_ms=200)
            if started is not None and (started.reached()
                                        or time.monotonic() - last > START_GRACE):
                started = None
                last = time.monotonic()
            if not batch:
                if args.timeout is not None and started is None \
                        and time.monotonic() - last > args.timeout:
                    break
                continue
            last = time.monotonic()
            # one poll holds records of several partitions: --max counts across them all
            records: Iterable[Any] = chain.from_iterable(batch.values())
            if args.max is not None:
                records = islice(records, args.max - count)
            for r in records:
                out.write(render(r.value) + "\n")
                count += 1
            out.flush()
    except KeyboardInterrupt:
        pass
    finally:
        cons.close()
    return 0
