"""``sift worker``: run one stream-processing worker against a Kafka broker."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

from sift.errors import SiftError
from sift.settings import Settings

if TYPE_CHECKING:
    from sift.agents.service import TrainingSet

log = logging.getLogger("sift.worker")

EPILOG = """\
example:
  SIFT_BROKER=kafka://127.0.0.1:9092 sift worker
  SIFT_DATA_DIR=.cache/w2 SIFT_WEB_PORT=6067 sift worker --web     # a second worker

Settings come from SIFT_* environment variables (see docs/streaming.md), among
them SIFT_BROKER, SIFT_TOPIC_PREFIX, SIFT_APP_ID (the consumer group),
SIFT_PARTITIONS, SIFT_REPLICATION_FACTOR (3 on a cluster), SIFT_IDF_CORPUS,
SIFT_SECURITY_PROTOCOL, SIFT_SASL_MECHANISM,
SIFT_SASL_USERNAME, SIFT_SASL_PASSWORD, SIFT_SSL_CAFILE, SIFT_SSL_CERTFILE and
SIFT_SSL_KEYFILE. Workers with the same SIFT_APP_ID share the profiles; each
needs its own SIFT_DATA_DIR (and SIFT_WEB_PORT with --web): a worker locks its
directory, and a second one started on it stops at once.
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
                   help="serve /sift/stats (JSON) and /metrics (Prometheus) on SIFT_WEB_HOST:SIFT_WEB_PORT")
    p.set_defaults(func=run)


def log_training(training: TrainingSet) -> str:
    """Say which corpus the IDF and the profiles' initial training come from, and warn
    when there is none (an installed package has no bundled data: a worker then runs,
    but without IDF, pseudolabels or training-document positives). Returns the line."""
    if training.path:
        line = (f"training corpus {training.path}: {len(training.ids)} documents "
                "(IDF, initial training, positives by id)")
        log.info(line)
    else:
        line = ("no training corpus: SIFT_IDF_CORPUS is unset and the bundled "
                "data/reuters21578/train.jsonl.gz is not beside this installation; vectors "
                "have no IDF, profiles no pseudolabels, and positives must be texts")
        log.warning(line)
    return line


def check_web_port(host: str, port: int) -> None:
    """A one-line error, before anything starts, when ``--web`` cannot listen on
    ``host:port`` (Faust found out only once the worker had joined its group, and ended
    in a traceback)."""
    import socket

    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise SiftError(f"SIFT_WEB_HOST {host!r} does not resolve: {exc}") from None
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp binds
        try:
            s.bind(addr)
        except OSError as exc:
            raise SiftError(f"--web cannot listen on {host}:{port} (SIFT_WEB_HOST, "
                            f"SIFT_WEB_PORT): {exc.strerror or exc}; each worker on a "
                            "machine needs its own SIFT_WEB_PORT") from None


def check_data_dir(path: str, name: str = "SIFT_DATA_DIR") -> None:
    """A one-line error naming ``name`` (the variable, or ``--data-dir`` when the option
    gave the path) unless ``path`` is (or can be made) a directory this process can write
    in; Faust found out only after the topics were created, in two tracebacks
    (forty-fourth session)."""
    import tempfile

    try:
        os.makedirs(path, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".sift-write-test-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise SiftError(f"{name} {path!r} is not a writable directory: "
                        f"{exc.strerror or exc}") from None


#: the lock file in a worker's data dir (:func:`lock_data_dir`)
LOCK_FILE = ".sift-worker.lock"


class DataDirLock:
    """An exclusive ``flock`` on ``<data dir>/.sift-worker.lock``, held while the file
    stays open: for the worker's life, released by the kernel when the process ends,
    however it ends (a killed worker leaves no stale lock; the file that stays behind
    locks nothing)."""

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self.fd: int | None = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the last descriptor drops the lock
            self.fd = None


def lock_data_dir(path: str, name: str = "SIFT_DATA_DIR") -> DataDirLock:
    """Lock ``path`` (created if need be) for this worker, before anything else touches
    it; a one-line error naming the directory, the other worker's pid and
    ``SIFT_DATA_DIR`` when another live process holds it. Two workers sharing a directory
    wrote the same stats.json without a word (forty-fifth session)."""
    import fcntl

    lock = os.path.join(path, LOCK_FILE)
    try:
        os.makedirs(path, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise SiftError(f"{name} {path!r} is not a writable directory: "
                        f"{exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        try:
            other = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
        except OSError:
            other = ""
        os.close(fd)
        who = f"another worker (pid {other})" if other.isdigit() else "another worker"
        raise SiftError(f"{who} is using the data directory {path!r} (it holds {lock}): "
                        "each worker needs its own SIFT_DATA_DIR (or --data-dir)") from None
    # the holder's pid, for the message above (the lock itself is the flock)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return DataDirLock(path, fd)


def load_training(settings: Settings) -> TrainingSet:
    """The training corpus (``SIFT_IDF_CORPUS``, else the bundled one), loaded before any
    topic is created; its errors name the variable and, when no line could be used, the
    first bad line (the error said "no documents", not why; forty-fourth session)."""
    from sift.agents.service import ServiceError, TrainingSet, default_corpus

    path = settings.idf_corpus or default_corpus()
    try:
        return TrainingSet.load(path, truncate=settings.truncate or None, chars=settings.chars)
    except ServiceError as exc:
        what = "SIFT_IDF_CORPUS" if settings.idf_corpus else "the bundled training corpus"
        why = str(exc).removeprefix("training corpus").lstrip(": ")
        raise SiftError(f"{what} {why}") from None


class StopWatchdog:
    """Ends the process if a stop takes longer than ``timeout`` seconds.

    Seen in the seventh session: workers sent SIGTERM after their broker had gone stayed
    alive indefinitely, one spinning at 70-90 % of a core in aiokafka's metadata
    synchronizer (``AIOKafkaClient._md_synchronizer`` reconnecting), so a supervisor's
    stop never completed. The watchdog is a daemon timer armed when the stop begins;
    a clean stop exits long before it fires. ``exit`` is ``os._exit`` (no cleanup can
    hang it); tests pass their own.
    """

    def __init__(self, timeout: float, exit: Any = os._exit) -> None:
        self.timeout = timeout
        self.exit = exit
        self.timer: threading.Timer | None = None

    def arm(self) -> None:
        """Start the countdown (once; later calls do nothing)."""
        if self.timer is None:
            self.timer = threading.Timer(self.timeout, self._fire)
            self.timer.daemon = True
            self.timer.start()

    def _fire(self) -> None:
        msg = (f"sift worker: still stopping after {self.timeout:g} s (SIFT_STOP_TIMEOUT); "
               "exiting without a clean shutdown")
        log.error(msg)
        print(msg, file=sys.stderr, flush=True)
        self.exit(1)


def freeze_heap() -> int:
    """Collect once, then move every object alive now out of the collector's reach
    (``gc.freeze``); return how many were frozen.

    Found in the eighth session, timing the collector in a worker holding 1,000
    profiles: each full (generation 2) collection walked 145,000-194,000 objects,
    nearly all of them the code of the imported libraries (functions, tuples, dicts,
    classes of Faust, aiokafka, numpy, scipy), and took 63-119 ms, during which no
    document was scored; at 1,000 documents a second one such pause holds up about a
    hundred documents, one percent of a ten-second window, so it set the decision
    latency's 99th percentile. Frozen objects are still freed when their references go
    (only cycles among them wait); the worker calls this after building the app and
    again once it has started.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def restore_documents(settings: Settings, service: Any) -> None:
    """Fill the worker's document store from the documents topic before it joins the
    group (:mod:`sift.agents.restore`), so judgments of documents scored before it
    started still work; a broker that cannot be read only costs that, with a warning."""
    from sift.agents.restore import restore_document_store
    from sift.kafkaclient import KafkaClientError

    try:
        done = restore_document_store(settings, service)
    except KafkaClientError as exc:
        log.warning("could not read back the recent documents (%s): judgments of documents "
                    "scored before this worker started will be dead-lettered "
                    "unknown_document unless they carry the text", exc)
        return
    if done.messages:
        log.info("restored %d recent documents from %d messages of %s in %.1f s, for "
                 "judgments of documents scored before this worker started", done.documents,
                 done.messages, settings.topic("documents"), done.seconds)


def run(args: argparse.Namespace) -> int:
    settings = Settings.from_env(broker=args.broker, app_id=args.app_id,
                                 partitions=args.partitions, data_dir=args.data_dir)
    if settings.partitions < 1:
        print("sift worker: error: partitions must be >= 1", file=sys.stderr)
        return 1
    if args.web:
        check_web_port(settings.web_host, settings.web_port)
    # what can be checked here is, before anything is created on the broker; the data
    # dir locked before anything else touches it, for as long as this worker runs
    held = lock_data_dir(settings.data_dir, "--data-dir" if args.data_dir else "SIFT_DATA_DIR")
    try:
        return _run(args, settings)
    finally:
        held.release()


def worker_class(watchdog: StopWatchdog) -> type:
    """Faust's worker, with the stop watchdog armed by a signal or a crash and each
    plain-text log message escaped to one line (:func:`sift.observability.one_line_handlers`:
    Faust's own formatter writes a message as it is; JSON lines escape it anyway)."""
    from faust import Worker as FaustWorker

    class Worker(FaustWorker):
        def _schedule_shutdown(self, signal: Any) -> None:  # SIGTERM, SIGINT
            watchdog.arm()
            super()._schedule_shutdown(signal)

        def stop_and_shutdown(self) -> None:  # also the way out after a crash
            watchdog.arm()
            super().stop_and_shutdown()

        def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
            super().on_setup_root_logger(logger, level)
            from sift.observability import one_line_handlers

            one_line_handlers(logger)

        async def on_startup_finished(self) -> None:
            await super().on_startup_finished()
            log.info("froze %d objects out of the garbage collector's passes", freeze_heap())

    return Worker


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from sift.agents.app import create_app, prepare_topics

    check_data_dir(settings.data_dir, "--data-dir" if args.data_dir else "SIFT_DATA_DIR")
    training = load_training(settings)
    dead_letter_bytes = prepare_topics(settings)
    worker = create_app(settings, training=training, web=args.web)
    worker.service.dead_letter_bytes = dead_letter_bytes
    level = settings.log_level.upper()
    if settings.log_json:
        # one JSON object a line for every logger, Faust's too: its own set-up (plain
        # text) is then left out (override_logging below)
        from sift.observability import configure_logging

        configure_logging(level, json_lines=True)
    else:
        logging.basicConfig(level=level, format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    if level != "DEBUG":
        # kafka-python's connection chatter (the clients that check the topics, restore the
        # document store and watch the partitions' tails: some hundred lines at a start);
        # its warnings and errors still show
        logging.getLogger("kafka").setLevel(logging.WARNING)
    log_training(worker.service.training)
    restore_documents(settings, worker.service)
    watchdog = StopWatchdog(settings.stop_timeout)
    freeze_heap()
    from sift.agents import gcwatch

    gcwatch.install()  # the collector's pauses, in the stats (``gc``)

    duplicate: list[str] = []
    if settings.instance_id:
        from sift.agents import membership

        def stop_duplicate(reason: str) -> None:  # from the consumer's thread: a signal
            duplicate.append(reason)
            log.error("%s; stopping", reason)
            os.kill(os.getpid(), signal.SIGTERM)

        membership.install(settings.instance_id, settings.session_timeout, stop_duplicate)
    Worker = worker_class(watchdog)
    fw = Worker(worker.app, loglevel=level, quiet=True, redirect_stdouts=False,
                override_logging=not settings.log_json)
    if settings.log_json:
        # Faust drops its terminal spinner when it sets up logging at INFO or below; left
        # on, it writes cursor codes among the JSON lines and says "OK" instead of
        # logging "Ready"
        fw.spinner = None
    try:
        fw.execute_from_commandline()
    except SystemExit as exc:
        code = int(exc.code or 0)
    else:
        code = 0
    if duplicate:
        print(f"sift worker: error: {duplicate[0]}", file=sys.stderr, flush=True)
        return 1
    return code
