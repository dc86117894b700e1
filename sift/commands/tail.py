"""``sift tail``: print the messages of a sift topic as JSON lines."""

from __future__ import annotations

import argparse
import sys
import time

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


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("tail", help="print a sift topic's messages as JSON lines",
                       description="Follow a sift topic (decisions, dead letters, ...).",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("topic", choices=list(TOPICS))
    p.add_argument("--from-beginning", action="store_true", help="start at the oldest message")
    p.add_argument("--max", type=positive_int, default=None, help="stop after this many messages")
    p.add_argument("--timeout", type=positive_seconds, default=None,
                   help="stop after this many seconds without a message")
    p.add_argument("--broker", help="broker URL (SIFT_BROKER)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sift.kafkaclient import consumer

    settings = Settings.from_env(broker=args.broker)
    topic = settings.topic(args.topic)
    cons = consumer(settings, topic,
                    auto_offset_reset="earliest" if args.from_beginning else "latest")
    count = 0
    last = time.monotonic()
    out = sys.stdout
    try:
        while args.max is None or count < args.max:
            batch = cons.poll(timeout_ms=200)
            if not batch:
                if args.timeout is not None and time.monotonic() - last > args.timeout:
                    break
                continue
            last = time.monotonic()
            for records in batch.values():
                for r in records:
                    try:
                        obj = orjson.loads(r.value)
                        line = orjson.dumps(obj).decode()
                    except orjson.JSONDecodeError:
                        line = orjson.dumps({"undecodable": r.value.decode("utf-8", "replace")}
                                            ).decode()
                    out.write(line + "\n")
                    count += 1
                    if args.max is not None and count >= args.max:
                        break
            out.flush()
    except KeyboardInterrupt:
        pass
    finally:
        cons.close()
    return 0
