"""``sift worker``: run one stream-processing worker against a Kafka broker."""

from __future__ import annotations

import argparse
import logging
import sys

from sift.settings import Settings

EPILOG = """\
example:
  SIFT_BROKER=kafka://127.0.0.1:9092 sift worker
  SIFT_DATA_DIR=.cache/w2 SIFT_WEB_PORT=6067 sift worker --web     # a second worker

Settings come from SIFT_* environment variables (see docs/streaming.md), among
them SIFT_BROKER, SIFT_TOPIC_PREFIX, SIFT_APP_ID (the consumer group),
SIFT_PARTITIONS, SIFT_IDF_CORPUS, SIFT_SECURITY_PROTOCOL, SIFT_SASL_MECHANISM,
SIFT_SASL_USERNAME, SIFT_SASL_PASSWORD, SIFT_SSL_CAFILE, SIFT_SSL_CERTFILE and
SIFT_SSL_KEYFILE. Workers with the same SIFT_APP_ID share the profiles; each
needs its own SIFT_DATA_DIR (and SIFT_WEB_PORT with --web).
"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "worker", help="run a stream-processing worker (Faust) against a Kafka broker",
        description="Consume documents, judgments and profile specs; emit decisions.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--broker", help="broker URL, e.g. kafka://127.0.0.1:9092 (SIFT_BROKER)")
    p.add_argument("--app-id", help="consumer group and table namespace (SIFT_APP_ID)")
    p.add_argument("--partitions", type=int, help="profile shards = partitions (SIFT_PARTITIONS)")
    p.add_argument("--data-dir", help="this worker's directory for stats (SIFT_DATA_DIR)")
    p.add_argument("--web", action="store_true",
                   help="serve /sift/stats on SIFT_WEB_HOST:SIFT_WEB_PORT")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from faust import Worker as FaustWorker

    from sift.agents.app import create_app, prepare_topics

    settings = Settings.from_env(broker=args.broker, app_id=args.app_id,
                                 partitions=args.partitions, data_dir=args.data_dir)
    if settings.partitions < 1:
        print("sift worker: error: partitions must be >= 1", file=sys.stderr)
        return 1
    prepare_topics(settings)
    worker = create_app(settings, web=args.web)
    level = settings.log_level.upper()
    logging.basicConfig(level=level, format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    fw = FaustWorker(worker.app, loglevel=level, quiet=True, redirect_stdouts=False)
    try:
        fw.execute_from_commandline()
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0
