"""``sift demo``: the whole streaming job on Reuters-21578, end to end through Kafka.

A local broker (unless ``SIFT_BROKER`` names a reachable one), one worker, one
profile per category (query = category name, the first three training documents
of the category as positives, as ``sift replay`` does), the test documents
produced in order, and a simulated judge that answers every decision from the
gold labels. At the end the delivered documents are evaluated with
:func:`sift.replay.evaluate` and compared with ``sift replay`` on the same data.

The producer is paced (closed loop): a chunk of documents is sent, and the next
one only when the worker has scored it and applied the judge's answers, so
feedback reaches a profile at most one chunk late, as in the replay protocol
(where it is zero documents late). ``--chunk`` sets that lag.

``--review DATASET`` runs review mode instead (:func:`run_review`): a bundled screening
set screened in the worker, a simulated reviewer answering from its labels until the
stop signal, and the recall at the stop against the target.
"""

from __future__ import annotations

import argparse
import faulthandler
import functools
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from sift.commands._common import NO_BUNDLED_DATA, Progress, positive_int, write_json
from sift.errors import SiftError
from sift.settings import Settings
from sift.topics.records import MAX_BAGS

ROOT = Path(__file__).resolve().parents[2]
REUTERS = ROOT / "data" / "reuters21578"
DEFAULT_TRAIN = REUTERS / "train.jsonl.gz"
DEFAULT_TEST = REUTERS / "test.jsonl.gz"
#: Seconds between two looks at the worker's counters in the closed loop (its stats
#: file is written every 2.5 times that): two waits a chunk, so they set the pace.
POLL = 0.02

EPILOG = """\
examples:
  sift demo                            # local broker on 127.0.0.1:9092, Reuters, 1 worker
  sift demo --limit 1000 --chunk 10    # a shorter run
  SIFT_TRUNCATE=6 sift demo --bags 5   # bagged profiles, tokens cut to 6 characters
  SIFT_BROKER=kafka://host:9092 sift demo --no-compare
  sift demo --review Donners_2021      # review mode: a screening set to its stop signal

The closing table compares the stream's measures with 'sift replay' on the same
data (in process, no broker). Results also go to --out as JSON.
"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("demo", help="the streaming job on Reuters-21578: broker, worker, judge",
                       description="Run the whole streaming job end to end and evaluate it.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train", type=Path, default=DEFAULT_TRAIN,
                   help="training JSONL: the corpus weights and the profiles (default: the bundled Reuters-21578)")
    p.add_argument("--test", type=Path, default=DEFAULT_TEST,
                   help="stream JSONL, produced in file order (default: the bundled Reuters-21578)")
    p.add_argument("--limit", type=positive_int, default=None, help="stream only the first N test documents")
    p.add_argument("--chunk", type=int, default=20,
                   help="documents sent before waiting for their judgments (default 20)")
    p.add_argument("--port", type=int, default=9092, help="port of the local broker")
    p.add_argument("--keep-broker", action="store_true",
                   help="leave the local broker running, and this run's topics on it (by "
                        "default they are deleted at the end, on any broker)")
    p.add_argument("--no-compare", action="store_true", help="skip the in-process sift replay")
    p.add_argument("--bags", type=int, default=1, metavar="B",
                   help="each profile bagged over B pseudolabel draws (a spec's bags; default 1)")
    p.add_argument("--review", metavar="DATASET", default=None,
                   help="run review mode instead: a bundled screening set (e.g. Donners_2021) "
                        "screened in the worker, a simulated reviewer answering from its labels")
    p.add_argument("--target-recall", type=float, default=0.95,
                   help="with --review: the review's target recall (default 0.95)")
    p.add_argument("--out", type=Path, default=Path(".cache/demo/result.json"),
                   help="where the result JSON is written (default .cache/demo/result.json)")
    p.set_defaults(func=run, parser=p)


@contextmanager
def broker_for(settings: Settings, port: int, keep: bool,
               trash: list[str] | None = None) -> Iterator[str]:
    """The URL of a reachable broker: SIFT_BROKER's, or a local one started here.

    ``trash``: the topics deleted on it by then (:func:`demo_run` fills it): the partition
    folders they leave in the data dir of a broker stopped here are removed once it has
    stopped (a deleted topic's folders are renamed at once, but deleted by the broker only
    a minute later, or at its next run)."""
    from sift.devbroker import DevBroker, admin_ready

    if Settings.is_set("broker"):
        from sift.kafkaclient import admin

        # the settings' client (SASL/SSL too), whose failure names its cause; a bare
        # "does not answer" said neither why nor what to check
        admin(settings, timeout=10.0).close()
        yield settings.broker
        return
    # a broker the demo stops at its end also ends with it however it ends (SIGTERM,
    # SIGKILL, a closed terminal): it was left running, a JVM of 512 MB on the port
    broker = DevBroker(port=port, controller_port=port + 1, die_with_parent=not keep)
    if broker.is_running() or admin_ready(broker.bootstrap, timeout=3.0):
        print(f"demo: using the broker already running on {broker.bootstrap}")
        yield broker.url
        return
    print(f"demo: starting a local Kafka broker on {broker.bootstrap} (first run fetches jars)")
    broker.start(timeout=180.0)
    try:
        yield broker.url
    finally:
        if not keep:
            broker.stop()
            print("demo: broker stopped")
            if trash and not broker.is_running():
                remove_partition_dirs(broker.data / "kafka-logs", trash)


def run_topics(names: Iterable[str], settings: Settings) -> list[str]:
    """The topics among ``names`` that a demo run with ``settings`` created: those under its
    own topic prefix, and its Faust app's internal ones (the tables' changelogs, repartition
    topics, the assignor's), named ``<app id>-...``. Nothing else: on a user's broker
    (SIFT_BROKER) the other topics are not the demo's."""
    if not settings.topic_prefix or not settings.app_id:
        raise ValueError("a demo run needs a topic prefix and an app id of its own")
    internal = f"{settings.app_id}-"
    return sorted(n for n in names if n.startswith((settings.topic_prefix, internal)))


def delete_run_topics(settings: Settings, timeout: float = 30.0) -> list[str]:
    """Delete the topics this demo run created (:func:`run_topics`) and wait until the
    broker no longer lists them; return their names."""
    from kafka.errors import KafkaError

    from sift.kafkaclient import KafkaClientError, admin, wait_listed

    client = admin(settings, timeout)
    try:
        names = run_topics(client.list_topics(), settings)
        if names:
            client.delete_topics(names, timeout_ms=int(timeout * 1000))
            wait_listed(client, names, present=False, timeout=timeout,
                        failure=f"{len(names)} topics not deleted within {timeout:g} s")
    except KafkaError as exc:
        raise KafkaClientError(f"{type(exc).__name__}: {exc}") from None
    finally:
        client.close()
    return names


def delete_run_group(settings: Settings, timeout: float = 30.0) -> bool:
    """Delete the consumer group of this demo run's worker (``settings.app_id``); whether
    there was one to delete.

    Its committed offsets name topics deleted by then, and the broker keeps an empty
    group for ``offsets.retention.minutes`` (a week by default): every run left one
    (forty-sixth session). A group with members still in it (a worker killed, not
    stopped, before the session time-out) is refused by the broker:
    :class:`~sift.kafkaclient.KafkaClientError` naming the reason.
    """
    from kafka.errors import KafkaError

    from sift.kafkaclient import KafkaClientError, admin

    client = admin(settings, timeout)
    try:
        # kafka-python 3 names it delete_groups and answers {group: "OK" or the error's
        # class name}; 2.x delete_consumer_groups, [(group, the error class)]
        delete = getattr(client, "delete_groups", None) or client.delete_consumer_groups
        results = delete([settings.app_id])
    except KafkaError as exc:
        raise KafkaClientError(f"{type(exc).__name__}: {exc}") from None
    finally:
        client.close()
    for _, error in results.items() if isinstance(results, dict) else results:
        name = error if isinstance(error, str) else getattr(error, "__name__", type(error).__name__)
        if name in ("OK", "NoError"):
            return True
        if name == "GroupIdNotFoundError":
            return False
        why = " (a worker of it still in the group)" if name == "NonEmptyGroupError" else ""
        raise KafkaClientError(f"the broker answered {name}{why}")
    return False


#: a partition folder of a topic, after its name: ``-<partition>``, or, deleted (or found
#: stray at a start), ``-<partition>.<32 hex digits>-delete`` (``-stray``)
_PARTITION_DIR = re.compile(r"-\d+(?:\.[0-9a-f]{32}-(?:delete|stray))?")


def remove_partition_dirs(logs: Path, topics: Iterable[str]) -> int:
    """Remove from a stopped broker's log dir the partition folders of ``topics`` (deleted
    topics only: the broker no longer knows them); return how many were removed."""
    names = sorted(set(topics), key=len, reverse=True)
    removed = 0
    with suppress(OSError):
        for path in logs.iterdir():
            if path.is_dir() and any(path.name.startswith(t)
                                     and _PARTITION_DIR.fullmatch(path.name[len(t):])
                                     for t in names):
                shutil.rmtree(path, ignore_errors=True)
                removed += 1
    return removed


@contextmanager
def demo_run(base: Settings, url: str, keep: bool, trash: list[str] | None = None,
             **overrides: Any) -> Iterator[Settings]:
    """The settings of one demo run on the broker at ``url``: a topic prefix and an app id
    of its own, and the worker's data dir in a new temporary folder.

    At the end, however it ends (an error, Ctrl-C), the topics the run created are deleted
    (each run has new ones: on a reused broker they piled up, compacted changelogs that
    retention never removes, 321 MB a ``make demo``; forty-fifth session), unless ``keep``
    (``--keep-broker``: left for inspection); their names go to ``trash``. The temporary
    folder is removed after a run that succeeded; after one that failed it is kept, and
    named, for the worker's log."""
    run_id = uuid.uuid4().hex[:6]
    folder = Path(tempfile.mkdtemp(prefix="sift-demo-"))
    settings = replace(base, broker=url, topic_prefix=f"demo{run_id}.",
                       app_id=f"sift-demo-{run_id}", data_dir=str(folder / "worker"),
                       **overrides)
    ok = False
    _RUN.append((settings, keep))
    try:
        yield settings
        ok = True
    finally:
        _RUN.remove((settings, keep))
        _CLEANING.set()
        try:
            _end_topics(settings, keep, trash)
        finally:
            if ok:
                shutil.rmtree(folder, ignore_errors=True)
            else:
                print(f"demo: the worker's log and data are kept in {folder}", file=sys.stderr)


def _end_topics(settings: Settings, keep: bool, trash: list[str] | None) -> None:
    """Delete the run's topics, or say they are kept; one line either way."""
    what = f"{settings.topic_prefix}*, {settings.app_id}-*"
    if keep:
        print(f"demo: this run's topics ({what}) kept on {settings.broker} (--keep-broker)")
        return
    try:
        names = delete_run_topics(settings)
    except SiftError as exc:
        print(f"demo: could not delete this run's topics ({what}) on {settings.broker}: {exc}",
              file=sys.stderr)
        return
    if trash is not None:
        trash.extend(names)
    group = failure = ""
    try:
        if delete_run_group(settings):
            group = f" and its consumer group {settings.app_id}"
    except SiftError as exc:
        failure = f"; could not delete its consumer group {settings.app_id}: {exc}"
    print(f"demo: removed this run's {len(names)} topics ({what}){group} from "
          f"{settings.broker}{failure}")


#: set when a demo's clean-up has begun (:func:`terminate_as_interrupt`'s watchdog then
#: waits for it instead of ending the process)
_CLEANING = threading.Event()

#: set by a caught SIGTERM or SIGHUP; the streaming loop checks it, since the interrupt
#: the signal raises can be lost (:func:`terminate_as_interrupt`)
_TERMINATED = threading.Event()


def _check_terminated() -> None:
    """Raise the interrupt again if a signal asked the demo to end and it was lost."""
    if _TERMINATED.is_set():
        raise KeyboardInterrupt("terminated")


#: the run in progress (its settings and ``--keep-broker``), for a watchdog that has to
#: end a terminated demo whose interrupt was lost: it deletes the run's topics first
_RUN: list[tuple[Settings, bool]] = []


#: seconds a terminated demo gets to reach its clean-up, and then to finish it, before it
#: ends the way it did before the forty-fifth session (at once; its broker and worker go
#: with it by their parent-death signal, its topics stay)
TERMINATE_GRACE = (10.0, 60.0)

#: seconds a terminated demo gives its worker to stop before killing it: the run's topics
#: go next, so nothing the worker would commit is wanted, and a Faust stop that hangs
#: (the worker's own watchdog ends it after SIFT_STOP_TIMEOUT, 30 s) plus the topics and
#: the broker under load outlasted TERMINATE_GRACE[1] (forty-ninth session, one CI run)
TERMINATED_WORKER_STOP = 10.0


def _stop_worker(worker: Any) -> None:
    """Stop the run's worker: gracefully, or within TERMINATED_WORKER_STOP once the
    demo was told to end."""
    if _TERMINATED.is_set():
        worker.stop(TERMINATED_WORKER_STOP)
    else:
        worker.stop()


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While inside, SIGTERM (``kill``) and SIGHUP (a closed terminal) end the demo as
    Ctrl-C does, so that its run's topics are deleted, its folder kept and its broker
    stopped on the way out (they were left behind by a demo killed this way).

    The signal raises ``KeyboardInterrupt`` in the main thread, wherever it is; the Kafka
    client catches every exception in its network loop, so one raised there is lost and
    the demo would go on: the streaming loop checks a flag the signal sets and raises it
    again, and a watchdog thread ends the process (``os._exit(143)``)
    if the clean-up has not begun within ``TERMINATE_GRACE[0]`` seconds, or not ended
    within ``TERMINATE_GRACE[1]`` more. A second signal is not caught. Only in the main
    thread (elsewhere Python cannot set a handler)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    done = threading.Event()  # this context has ended: the watchdog's work is over

    def watchdog() -> None:
        reach, finish = TERMINATE_GRACE
        phases = ((reach, "the interrupt was lost; ending now"),
                  (finish, "clean-up took too long; ending now"))
        for phase, (grace, why) in enumerate(phases):
            deadline = time.monotonic() + grace
            # phase 0 until the clean-up begins, phase 1 until it ends
            while not done.is_set() and (phase == 1 or not _CLEANING.is_set()):
                if time.monotonic() > deadline:
                    print(f"demo: {why}", file=sys.stderr, flush=True)
                    if faulthandler.is_enabled():  # where it was stuck (PYTHONFAULTHANDLER, -X)
                        faulthandler.dump_traceback(all_threads=True)
                    if _RUN:  # its topics from here (a client of its own), if not yet done
                        with suppress(Exception):
                            _end_topics(*_RUN[-1], None)
                    os._exit(143)
                done.wait(0.05)
            if done.is_set():
                return

    def interrupt(signum: int, frame: Any) -> None:
        _TERMINATED.set()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        threading.Thread(target=watchdog, name="demo-terminate", daemon=True).start()
        raise KeyboardInterrupt(signal.Signals(signum).name)

    _CLEANING.clear()
    _TERMINATED.clear()
    old = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        done.set()
        for sig, handler in old.items():
            signal.signal(sig, handler)


def run(args: argparse.Namespace) -> int:
    from sift.commands._common import check_out_file, refuse_unused

    check_out_file(args.out)  # before the run (minutes), not after it
    if args.review is not None:
        refuse_unused(args, ("train", "test", "limit", "chunk", "no_compare", "bags"),
                      "is for the Reuters run, not --review")
    else:
        refuse_unused(args, ("target_recall",), "is for --review")
    with terminate_as_interrupt():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from sift.agents.harness import HarnessError
    from sift.replay import load_corpus

    if args.review is not None:
        return run_review(args)
    if args.chunk < 1:
        raise SiftError("--chunk must be >= 1")
    if not 1 <= args.bags <= MAX_BAGS:
        raise SiftError(f"--bags must be in [1, {MAX_BAGS}], got {args.bags}")
    for path, default in ((args.train, DEFAULT_TRAIN), (args.test, DEFAULT_TEST)):
        if path == default and not default.is_file():
            raise SiftError(f"{default}: no such file ({NO_BUNDLED_DATA}): pass --train and --test")
    corpus = load_corpus(args.train, args.test)
    if args.limit is not None:
        corpus.test = corpus.test[: args.limit]
    base = Settings.from_env()
    trash: list[str] = []
    with broker_for(base, args.port, args.keep_broker, trash=trash) as url, \
            demo_run(base, url, args.keep_broker, trash, idf_corpus=str(args.train),
                     stats_interval=min(base.stats_interval, POLL * 2.5),
                     # the closed loop waits for each chunk's judgments: a shorter
                     # take than a worker under a backlog wants
                     judgment_batch_timeout=min(base.judgment_batch_timeout, 0.25)) as settings:
        try:
            result = stream(settings, corpus, args.chunk, args.bags)
        except HarnessError as exc:
            raise SiftError(str(exc)) from None
    if not args.no_compare:
        from sift.replay import ReplayConfig, replay

        print("demo: running sift replay in process for comparison ...")
        # the worker's vectorizer settings (SIFT_TRUNCATE, SIFT_CHARS) and bags
        vectorizer: dict[str, Any] = {}
        if base.truncate:
            vectorizer["truncate"] = base.truncate
        if base.chars:
            vectorizer["chars"] = base.chars
        cfg = ReplayConfig(vectorizer=vectorizer, bags=args.bags)
        ref = replay(corpus, cfg, result["specs_obj"])
        result["replay"] = summary(ref.metrics)
    result.pop("specs_obj")
    report(result)
    write_json(args.out, result)
    print(f"demo: results in {args.out}")
    return 0


SCREENING = ROOT / "data" / "screening"


def run_review(args: argparse.Namespace) -> int:
    """``sift demo --review DATASET``: review mode end to end through Kafka.

    A local broker (or SIFT_BROKER's), one worker, the review created with the dataset's
    title as its query, the records loaded as documents naming it, and a simulated
    reviewer answering every request from the labels until the stop signal; then the
    recall at the stop and the share of the collection screened, against the target."""
    from sift.agents.harness import HarnessError, WorkerProcess
    from sift.commands.review import answer, collection, gold_labels, review_spec, statuses
    from sift.commands.review import start as start_review

    path = SCREENING / f"{args.review}.jsonl.gz"
    listing = SCREENING / "reviews.json"
    if not listing.is_file():  # (it said "[Errno 2] No such file or directory: ...")
        raise SiftError(f"--review runs a screening set of a source checkout of sift: {listing}: no such "
                        f"file ({NO_BUNDLED_DATA}); 'sift screen --data FILE' screens a labelled "
                        "file of your own")
    titles = orjson.loads(listing.read_bytes())
    if args.review not in titles or not path.is_file():
        raise SiftError(f"--review must be one of {', '.join(sorted(titles))}, got {args.review!r}")
    if not 0 < args.target_recall <= 1:
        raise SiftError(f"--target-recall must be in (0, 1], got {args.target_recall}")
    gold = gold_labels(path)
    docs = list(collection(path, "demo"))
    base = Settings.from_env()
    trash: list[str] = []
    with broker_for(base, args.port, args.keep_broker, trash=trash) as url, \
            demo_run(base, url, args.keep_broker, trash) as settings:
        from sift.agents.app import prepare_topics
        from sift.agents.harness import send_all

        prepare_topics(settings)
        worker = WorkerProcess(settings, "worker").start()
        print(f"demo: worker pid {worker.proc and worker.proc.pid}, log {worker.log_path}")
        t0 = time.monotonic()
        try:
            worker.wait_ready(timeout=180)
            spec = review_spec("demo", titles[args.review], {"target_recall": args.target_recall,
                                                             "random_state": 0})
            if start_review(settings, spec, 60.0):
                raise SiftError("the review was refused")
            send_all(settings, settings.topic("documents"),
                     [(batch[0].id.encode(), orjson.dumps({"documents": [d.to_obj() for d in batch]}))
                      for batch in (docs[i:i + 100] for i in range(0, len(docs), 100))])
            print(f"demo: {len(docs)} records of {args.review} sent; answering requests "
                  f"from the labels until the stop signal")
            answered = answer(settings, "demo", gold, 1800.0)
            final = statuses(settings)["demo"]
        except HarnessError as exc:
            raise SiftError(str(exc)) from None
        finally:
            _CLEANING.set()  # (a terminated demo's watchdog waits for what follows)
            _stop_worker(worker)
    relevant = sum(gold.values())
    result = {"review": args.review, "documents": len(docs),
              "relevant": relevant, "answered": answered, "screened": final.screened,
              "found": final.found, "recall_at_stop": final.found / relevant if relevant else 1.0,
              "cost_at_stop": final.screened / len(docs), "r_hat": final.r_hat,
              "target_recall": args.target_recall, "stop": final.stop,
              "seconds": time.monotonic() - t0}
    print()
    print(f"{args.review}: {len(docs)} records, {relevant} relevant; stopped after screening "
          f"{final.screened} ({result['cost_at_stop']:.1%}) with {final.found} found: recall "
          f"{result['recall_at_stop']:.3f} (target {args.target_recall:g}), R-hat "
          f"{final.r_hat:.1f}, {result['seconds']:.0f} s")
    write_json(args.out, result)
    print(f"demo: results in {args.out}")
    return 0


def summary(metrics: dict[str, Any]) -> dict[str, Any]:
    keys = ("profiles", "macro_t11su", "macro_t11f", "micro_precision", "micro_recall")
    return {k: metrics[k] for k in keys}


def stream(settings: Settings, corpus: Any, chunk: int, bags: int = 1) -> dict[str, Any]:
    from sift.agents.app import prepare_topics
    from sift.agents.harness import WorkerProcess, send_all, wait_for
    from sift.filters.bank import Hit
    from sift.kafkaclient import consumer
    from sift.replay import default_specs, evaluate
    from sift.topics.records import Document, ProfileSpec

    specs = default_specs(corpus)
    first: dict[str, list[str]] = {}
    for d in corpus.train:
        for t in d.topics:
            first.setdefault(t, []).append(d.id)
    specs = [ProfileSpec(s.profile, query=s.query, positives=tuple(first[s.profile][:3]),
                         bags=bags) for s in specs]
    prepare_topics(settings)
    worker = WorkerProcess(settings, "worker").start()
    print(f"demo: worker pid {worker.proc and worker.proc.pid}, log {worker.log_path}")
    decisions_consumer = consumer(settings, settings.topic("decisions"),
                                  auto_offset_reset="earliest")
    rows = {d.id: i for i, d in enumerate(corpus.test)}
    gold = {d.id: set(d.topics) for d in corpus.test}
    hits: list[Hit] = []
    n_judgments = 0
    t0 = time.monotonic()
    try:
        worker.wait_ready(timeout=180)
        send_all(settings, settings.topic("profiles"),
                 [(s.profile.encode(), orjson.dumps(s.to_obj())) for s in specs])
        wait_for(lambda: stat(worker, "profiles_created") >= len(specs), 300, "profiles trained",
                 interval=POLL)
        print(f"demo: {len(specs)} profiles trained; streaming {len(corpus.test)} documents")
        progress = Progress(len(corpus.test), "demo")
        from sift.kafkaclient import Sends, producer

        prod = producer(settings)
        sends = Sends(prod)
        docs_topic = settings.topic("documents")
        judg_topic = settings.topic("judgments")
        sent = 0
        t_stream = time.monotonic()
        for start in range(0, len(corpus.test), chunk):
            _check_terminated()
            part = corpus.test[start:start + chunk]
            plain = [Document(d.id, d.text, d.title, d.date).to_obj() for d in part]
            sends.send(docs_topic, str(plain[0]["id"]).encode(), orjson.dumps({"documents": plain}),
                       f"test documents {start + 1}-{start + len(part)}")
            sends.flush()
            sent += len(part)
            # scored against every profile; then a snapshot of the counters written
            # after that: the worker counts a batch's documents before it scores them
            # and its decisions as it scores them, and the stats file is written by
            # another thread, so a snapshot can fall in between (the chunk's last
            # decisions then arrived with the next chunk's, a chunk late)
            target = sent * len(specs)
            wait_for(functools.partial(_reached, worker, ("scored",), target), 120,
                     "documents scored", interval=POLL)
            time.sleep(2 * settings.stats_interval)
            want = stat(worker, "decisions")
            new: list[dict[str, Any]] = []
            deadline = time.monotonic() + 120
            while len(hits) + len(new) < want:
                _check_terminated()
                if time.monotonic() > deadline:
                    raise SiftError(f"only {len(hits) + len(new)} of {want} decisions arrived")
                for records in decisions_consumer.poll(timeout_ms=100).values():
                    new.extend(orjson.loads(r.value) for r in records)
            for d in new:
                hits.append(Hit(rows[d["doc_id"]], d["profile"], d["score"], d["threshold"],
                                d["model_version"]))
                j = {"id": f"{d['profile']}|{d['doc_id']}", "doc_id": d["doc_id"],
                     "profile": d["profile"], "relevant": d["profile"] in gold[d["doc_id"]],
                     "judge": "gold"}
                if d.get("profile_epoch"):
                    j["profile_epoch"] = d["profile_epoch"]  # meant for the life that delivered
                sends.send(judg_topic, d["profile"].encode(), orjson.dumps(j),
                           f"the judgment of {d['doc_id']!r} for {d['profile']!r}")
                n_judgments += 1
            sends.flush()
            wait_for(functools.partial(_reached, worker, JUDGMENTS_TAKEN, n_judgments), 120,
                     "judgments applied", interval=POLL)
            progress.update(len(part))
            if not progress.enabled and (start // chunk) % 25 == 0:
                print(f"demo: {sent}/{len(corpus.test)} documents, {len(hits)} delivered, "
                      f"{n_judgments} judged", flush=True)
        progress.close()
        seconds = time.monotonic() - t_stream
        prod.close(timeout=10)
        final = worker.stats()
    finally:
        _CLEANING.set()  # (a terminated demo's watchdog waits for what follows)
        decisions_consumer.close()
        _stop_worker(worker)
    names = [s.profile for s in specs]
    metrics = evaluate(hits, corpus.test, names, n_initial={s.profile: len(s.positives)
                                                            for s in specs})
    return {"stream": summary(metrics), "documents": len(corpus.test), "bags": bags,
            "truncate": settings.truncate, "chars": settings.chars, "decisions": len(hits),
            "judgments": n_judgments, "stream_seconds": seconds,
            "total_seconds": time.monotonic() - t0, "chunk": chunk,
            "dead_letters": final.get("stats", {}).get("dead_letters", 0),
            "specs_obj": specs}


#: The worker's counters of the judgments it has taken, applied or skipped.
JUDGMENTS_TAKEN = ("judgments", "judgments_duplicate", "judgments_repeated", "judgments_corrected")


def _reached(worker: Any, keys: tuple[str, ...], target: int) -> bool:
    """Whether the worker's counters ``keys`` add up to ``target``."""
    return sum(stat(worker, k) for k in keys) >= target


def stat(worker: Any, key: str) -> int:
    return int(worker.stats().get("stats", {}).get(key, 0))


def report(result: dict[str, Any]) -> None:
    s = result["stream"]
    r = result.get("replay")
    print()
    print(f"{result['documents']} documents streamed in {result['stream_seconds']:.1f}s, "
          f"{result['decisions']} delivered and judged, {result['dead_letters']} dead letters")
    print(f"{'measure':18} {'stream':>10} {'replay':>10} {'diff':>8}")
    for key in ("macro_t11su", "macro_t11f", "micro_precision", "micro_recall"):
        if r is None:
            print(f"{key:18} {s[key]:>10.4f}")
        else:
            print(f"{key:18} {s[key]:>10.4f} {r[key]:>10.4f} {s[key] - r[key]:>+8.4f}")
    with suppress(Exception):
        sys.stdout.flush()
