"""``sift review``: run a review in the streaming service (review mode) from the command line."""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sift.commands._common import (
    broker_option,
    json_line,
    nonnegative_seconds,
    positive_int,
    positive_seconds,
    printable,
)
from sift.commands.produce import lines
from sift.commands.profiles import dead_letter_answer, parse_params
from sift.errors import SiftError
from sift.settings import Settings
from sift.topics.codecs import dumps, loads
from sift.topics.errors import RecordError
from sift.topics.records import Document, epoch_before, newest_life
from sift.topics.review import (
    REQUESTS_TOPIC,
    STATUS_TOPIC,
    JudgmentRequest,
    ReviewSpec,
    ReviewStatus,
)

EPILOG = """\
examples:
  sift review start donners --query "Pharmacokinetics of emicizumab" --wait 30
  sift review load donners data/screening/Donners_2021.jsonl.gz
  sift review answer donners --gold data/screening/Donners_2021.jsonl.gz --until-stop 300
  sift review status donners
  sift review rm donners --wait 30

A review screens a fixed collection with continuous active learning and estimates how
many relevant records it holds (docs/screening.md). 'start' sends the review spec to
the profiles topic; 'load' sends a file's records as documents naming the review
(screening files: id, title, abstract; or documents: id, text, title; labels are never
sent); the worker then asks for judgments on the requests topic. People answer them on
the review's page in 'sift web' (/judge/<review>); 'answer --gold' is a simulated
reviewer that answers from the file's labels. 'status' prints the review's last status:
screened, found, the estimate of the relevant records (R-hat), recall and the stop signal.
"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("review", help="run a review (review mode) in the streaming service",
                       description="Start, feed, answer and watch a review in the streaming "
                                   "service.", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    start = verbs.add_parser("start", help="create a review")
    start.add_argument("name")
    start.add_argument("--query", required=True, help="the review's topic text")
    start.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                       help="a review parameter (docs/screening.md; value parsed as JSON)")
    start.add_argument("--wait", type=nonnegative_seconds, default=0.0, metavar="S",
                       help="wait up to S seconds for the review's first status")
    load = verbs.add_parser("load", help="send a file's records to a review")
    load.add_argument("name")
    load.add_argument("file", type=Path)
    load.add_argument("--batch", type=positive_int, default=100, help="records per message")
    load.add_argument("--limit", type=positive_int, default=None, help="send at most N records")
    answer = verbs.add_parser("answer", help="a simulated reviewer answering from gold labels")
    answer.add_argument("name")
    answer.add_argument("--gold", type=Path, required=True,
                        help="JSONL with id and label (1 relevant, 0 not), e.g. the loaded file")
    answer.add_argument("--until-stop", type=positive_seconds, default=60.0, metavar="S",
                        help="answer until the stop signal, at most S seconds (default 60)")
    answer.add_argument("--limit", type=positive_int, default=None, metavar="N",
                        help="answer at most N requests, then return")
    status = verbs.add_parser("status", help="the last status of a review (or of every review)")
    status.add_argument("name", nargs="?")
    status.add_argument("--json", action="store_true", help="one JSON object per review")
    rm = verbs.add_parser("rm", help="delete a review")
    rm.add_argument("name")
    rm.add_argument("--wait", type=nonnegative_seconds, default=0.0, metavar="S",
                    help="wait up to S seconds for the worker's answer: deleted, or rejected "
                         "with its reason (default 0: send and return)")
    broker_option(p, [start, load, answer, status, rm])
    p.set_defaults(func=run)


# ----------------------------------------------------------------------------- records
def review_spec(name: str, query: str, params: dict[str, Any]) -> dict[str, Any]:
    """The spec object (validated: a bad name, query or parameter is a one-line error)."""
    obj = {"profile": name, "mode": "review", "query": query, "params": params}
    try:
        spec = ReviewSpec.from_obj(obj)
    except RecordError as exc:
        raise SiftError(str(exc)) from None
    # the review itself, as the worker makes it: a parameter it would refuse (unknown,
    # out of range) is an error here, before anything is sent
    from sift.filters.screening import Review
    from sift.filters.screening.errors import ScreeningError

    try:
        Review(spec.query, **spec.params)
    except (ScreeningError, TypeError) as exc:
        raise SiftError(f"review {name!r}: {exc}") from None
    return obj


def collection(path: Path, name: str, limit: int | None = None) -> Iterator[Document]:
    """The records of a screening file (``id``, ``title``, ``abstract``) or a documents
    file (``id``, ``text``, ``title``) as documents naming review ``name``; a record with
    neither text nor title and abstract is an error naming the file and line."""
    for count, (n, line) in enumerate(lines(path)):
        if limit is not None and count >= limit:
            return
        try:
            obj = loads(line)
            if not isinstance(obj, dict):
                raise RecordError("not_an_object", "a record must be a JSON object")
            if "text" not in obj:
                parts = [obj.get(k) for k in ("title", "abstract")]
                text = " ".join(p.strip() for p in parts if isinstance(p, str) and p.strip())
                obj = {"id": obj.get("id"), "text": text,
                       "title": obj["title"] if isinstance(obj.get("title"), str) else ""}
            doc = Document.from_obj({k: obj[k] for k in ("id", "text", "title") if k in obj})
        except RecordError as exc:
            raise SiftError(f"{path}:{n}: {exc}") from None
        yield Document(doc.id, doc.text, doc.title, None, {"review": name})


def gold_labels(path: Path) -> dict[str, bool]:
    """``id -> relevant`` from a JSONL file with ``label`` (1/0 or true/false)."""
    out: dict[str, bool] = {}
    for n, line in lines(path):
        try:
            obj = loads(line)
        except RecordError as exc:
            raise SiftError(f"{path}:{n}: {exc}") from None
        label = obj.get("label") if isinstance(obj, dict) else None
        doc_id = obj.get("id") if isinstance(obj, dict) else None
        if not isinstance(doc_id, str | int) or isinstance(doc_id, bool) or label not in (0, 1):
            raise SiftError(f"{path}:{n}: a gold record needs an id and a label of 0 or 1")
        out[str(doc_id)] = bool(label)
    if not out:
        raise SiftError(f"{path}: no gold labels")
    return out


# ----------------------------------------------------------------------------- Kafka
def _send(settings: Settings, topic: str, messages: Iterator[tuple[bytes | None, bytes]]) -> int:
    from sift.agents.harness import send_all
    from sift.kafkaclient import ensure_topics

    ensure_topics(settings, [topic])
    return send_all(settings, topic, messages)


def statuses(settings: Settings, *, idle: float = 1.0,
             deleted: set[str] | None = None) -> dict[str, ReviewStatus]:
    """The last status of every review on the review-status topic, but those of reviews
    deleted since (``deleted``, read by :func:`deleted_reviews` when not given)."""
    from sift.kafkaclient import ensure_topics, read_all

    topic = settings.topic(STATUS_TOPIC)
    ensure_topics(settings, [topic])
    out: dict[str, ReviewStatus] = {}
    for _, value, _, _ in read_all(settings, topic, idle=idle):
        try:
            st = ReviewStatus.from_obj(loads(value))
        except RecordError:
            continue
        if st.review not in out or st.ts >= out[st.review].ts:
            out[st.review] = st
    if deleted is None:
        deleted = deleted_reviews(settings, idle=idle)
    for name in deleted & out.keys():
        del out[name]
    return out


def deleted_reviews(settings: Settings, *, idle: float = 1.0) -> set[str]:
    """The reviews whose last spec on the profiles topic deletes them (a review's specs
    are keyed by its name, so they share a partition and arrive in the order sent; a
    spec creating it again brings it back)."""
    return _last_specs(settings, idle=idle)[0]


def _last_specs(settings: Settings, *, idle: float = 1.0) -> tuple[set[str], set[str]]:
    """From one read of the profiles topic: the reviews whose last spec deletes them
    (:func:`deleted_reviews`), and the names whose last standing-profile spec creates
    that profile (the worker may have refused it: see :func:`is_standing_profile`)."""
    from sift.kafkaclient import ensure_topics, read_all
    from sift.topics.records import ProfileSpec

    topic = settings.topic("profiles")
    ensure_topics(settings, [topic])
    deleted: dict[str, bool] = {}
    standing: dict[str, bool] = {}
    for _, value, _, _ in read_all(settings, topic, idle=idle):
        if value is None:
            continue
        try:
            obj = loads(value)
        except RecordError:  # a bad spec
            continue
        try:
            spec = ReviewSpec.from_obj(obj)
        except RecordError:  # a standing profile's spec, or a bad one
            try:
                prof = ProfileSpec.from_obj(obj)
            except RecordError:
                continue
            standing[prof.profile] = not prof.delete
            continue
        deleted[spec.review] = spec.delete
    return ({name for name, gone in deleted.items() if gone},
            {name for name, made in standing.items() if made})


def status_of(settings: Settings, name: str) -> ReviewStatus:
    """Review ``name``'s last status; a one-line error when it was deleted or has none
    (never started, or no worker has taken its spec yet), or when ``name`` is a standing
    profile's (the advice to start it would be refused ``profile_exists``).

    A deletion counts only for a review that had a status: the worker refuses
    (dead-letters ``unknown_review``) the deletion of a review that does not exist, but
    the spec stays on the profiles topic, and "was deleted" then named a review that
    never was (forty-fifth session)."""
    gone, standing = _last_specs(settings)
    found = statuses(settings, deleted=set())
    if name in found:
        if name in gone:
            raise SiftError(f"review {name!r} was deleted")
        return found[name]
    if name in standing and is_standing_profile(settings, name):
        raise SiftError(f"{name!r} is a standing profile, not a review (see 'sift profiles "
                        "list'); a review needs a name of its own")
    raise SiftError(f"no status for review {name!r} on {settings.topic(STATUS_TOPIC)}: start it "
                    f"with 'sift review start {name} --query ... --wait 30' (a worker answers "
                    "with its first status)")


def is_standing_profile(settings: Settings, name: str, timeout: float = 30.0) -> bool:
    """Whether the profile table holds a standing profile ``name`` now: its last value in
    the table's changelog (only the partition of its shard is read) is a record, not a
    tombstone. False when no worker of ``SIFT_APP_ID`` made that table; True when the
    changelog cannot be read (the caller asks only about a name whose last spec on the
    profiles topic created a standing profile)."""
    from sift import kafkaclient
    from sift.agents.service import shard_of
    from sift.commands.profiles import changelog_topic

    topic = changelog_topic(settings)
    try:
        n = kafkaclient.partition_counts(settings, [topic]).get(topic, 0)
        if not n:
            return False
        part = [(topic, shard_of(name, n))]
        first = kafkaclient.first_offsets(settings, part)
        end = kafkaclient.end_offsets(settings, part)
        values = kafkaclient.read_offsets(
            settings, [(t, p, first.get((t, p), 0), end.get((t, p), 0)) for t, p in part],
            timeout=timeout)
    except kafkaclient.KafkaClientError:
        return True
    key = name.encode()
    held = False
    for _, _, _, k, value in values:
        if k == key:
            held = bool(value)
    return held


def describe(st: ReviewStatus) -> str:
    """One line for a status; "no estimate yet" while no sampling batch backs one (its
    ``recall_estimate`` is null: the start, the warm-up, documents just joined)."""
    stop = "STOP" if st.stop else ("complete" if st.complete else "continue")
    if st.recall_estimate is None:
        estimate = f"no estimate yet (target {st.target_recall:g})"
    else:
        estimate = (f"R-hat {st.r_hat:.1f}, recall {st.recall_estimate:.3f} (lower bound "
                    f"{st.recall_lower:.3f} for target {st.target_recall:g})")
    return (f"{printable(st.review)}: {st.documents} documents, screened {st.screened}, found {st.found}, "
            f"{estimate}, {st.pending} pending, batch {st.batches}: {stop}")


def _follow(settings: Settings, topics: list[str], seek_end: bool) -> Any:
    """A consumer of ``topics`` (every partition), at their ends or their starts."""
    from kafka.structs import TopicPartition

    from sift.kafkaclient import consumer, ensure_topics

    ensure_topics(settings, topics)
    cons = consumer(settings, check_crcs=False, max_partition_fetch_bytes=16 * 1024 * 1024)
    tps = [TopicPartition(t, p) for t in topics for p in sorted(cons.partitions_for_topic(t) or ())]
    cons.assign(tps)
    if seek_end:
        for tp, end in cons.end_offsets(tps).items():
            cons.seek(tp, end)
    else:
        cons.seek_to_beginning(*tps)
    return cons


def start(settings: Settings, obj: dict[str, Any], wait: float) -> int:
    name = obj["profile"]
    value = dumps(obj)
    cons = _follow(settings, [settings.topic(STATUS_TOPIC), settings.topic("dead-letters")],
                   seek_end=True) if wait else None
    try:
        _send(settings, settings.topic("profiles"), iter([(name.encode(), value)]))
        print(f"sent review {name!r} to {settings.topic('profiles')}")
        if cons is None:
            return 0
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            for tp, records in cons.poll(timeout_ms=200).items():
                for r in records:
                    if tp.topic == settings.topic("dead-letters"):
                        refused = dead_letter_answer(r.value, value)
                        if refused:
                            print(f"sift review: review {name!r} rejected: {refused}",
                                  file=sys.stderr)
                            return 1
                        continue
                    try:
                        st = ReviewStatus.from_obj(loads(r.value))
                    except RecordError:
                        continue
                    if st.review == name:
                        print(describe(st))
                        return 0
    finally:
        if cons is not None:
            cons.close()
    raise SiftError(f"no status for review {name!r} within {wait:g} s: is a worker running "
                    f"with SIFT_TOPIC_PREFIX={settings.topic_prefix!r}?")


def review_changelog_topic(settings: Settings) -> str:
    """The review table's changelog topic (the table's name under ``SIFT_APP_ID``)."""
    from sift.agents.review import REVIEW_TABLE

    return f"{settings.app_id}-{REVIEW_TABLE}-changelog"


def deletion_answer(cons: Any, settings: Settings, name: str, sent: bytes,
                    wait: float) -> tuple[bool, str]:
    """The worker's answer to the deletion ``sent`` of review ``name``, read from
    ``cons`` (a consumer of the review table's changelog and the dead letters, at their
    ends before the spec was sent): ``(True, "deleted")`` at the review record's
    tombstone, ``(False, "reason: message")`` at the spec's dead letter. Raises
    :class:`SiftError` when neither comes within ``wait`` seconds."""
    table, dead = review_changelog_topic(settings), settings.topic("dead-letters")
    key = name.encode()
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        for tp, records in cons.poll(timeout_ms=200).items():
            for r in records:
                if tp.topic == dead:
                    refused = dead_letter_answer(r.value, sent)
                    if refused is not None:
                        return False, refused
                elif tp.topic == table and r.key == key and not r.value:
                    return True, "deleted"
    raise SiftError(f"no answer for review {name!r} within {wait:g} s: is a worker running "
                    f"with SIFT_APP_ID={settings.app_id}?")


def remove(settings: Settings, name: str, wait: float) -> int:
    """Send review ``name``'s deletion; with ``wait``, report the worker's answer
    (exit code 1 when it refuses, e.g. ``unknown_review``)."""
    from sift.kafkaclient import consumer_at_ends, ensure_topics

    obj = {"profile": name, "mode": "review", "delete": True}
    try:
        ReviewSpec.from_obj(obj)
    except RecordError as exc:
        raise SiftError(str(exc)) from None
    value = dumps(obj)
    if not wait:
        _send(settings, settings.topic("profiles"), iter([(name.encode(), value)]))
        print(f"sent deletion of review {name!r} to {settings.topic('profiles')}")
        return 0
    topics = [review_changelog_topic(settings), settings.topic("dead-letters")]
    ensure_topics(settings, topics[1:])  # the changelog is the workers' to create
    # the ends before the spec is sent: an answer can only come after them
    with consumer_at_ends(settings, topics) as cons:
        _send(settings, settings.topic("profiles"), iter([(name.encode(), value)]))
        accepted, detail = deletion_answer(cons, settings, name, value, wait)
    if accepted:
        print(f"review {name!r}: {detail}")
        return 0
    print(f"sift review: review {name!r} rejected: {detail}", file=sys.stderr)
    return 1


class Unanswered:
    """Which of one review's requests to answer, read in any order: each document once
    per life of the review, and none of a life older than the newest read (a review
    deleted and started again refuses those answers, ``stale_review``).

    >>> from sift.topics.records import new_profile_epoch
    >>> old, new = new_profile_epoch(), new_profile_epoch()
    >>> u, due = Unanswered(), []
    >>> for d, e in [("a", old), ("a", old), ("a", new), ("b", old), ("b", new)]:
    ...     due.append(u.due(JudgmentRequest("r", d, 1, 1, 0.0, e)))
    ...     if due[-1]:
    ...         u.add(d)
    >>> due, len(u)
    ([True, False, True, False, True], 2)
    """

    def __init__(self) -> None:
        self.life = ""  # the newest epoch read
        self.answered: set[str] = set()

    def current(self, epoch: str) -> bool:
        """Whether a record of the review's life ``epoch`` is of the newest life read (which
        it makes the newest when it is later): False for an older life's."""
        life = newest_life(epoch, self.life)
        if life is None:
            return False
        if life != self.life:
            self.life = life  # the review started again: its requests are all to answer
            self.answered.clear()
        return True

    def due(self, req: JudgmentRequest) -> bool:
        """Whether ``req`` is to be answered (not yet answered, and of the newest life)."""
        return self.current(req.profile_epoch) and req.doc_id not in self.answered

    def add(self, doc_id: str) -> None:
        """``doc_id``'s request of the current life is answered."""
        self.answered.add(doc_id)

    def __len__(self) -> int:
        return len(self.answered)


def answer(settings: Settings, name: str, gold: dict[str, bool], timeout: float,
           limit: int | None = None) -> int:
    """Answer the review's requests from ``gold`` until its stop signal (or every record
    screened), at most ``timeout`` seconds, or until ``limit`` requests are answered;
    returns the judgments sent. Requests published before are answered too (a judgment
    sent twice is skipped by the worker)."""
    from sift.kafkaclient import Sends, producer

    cons = _follow(settings, [settings.topic(REQUESTS_TOPIC), settings.topic(STATUS_TOPIC)],
                   seek_end=False)
    prod = producer(settings)
    sends = Sends(prod)
    answered = Unanswered()
    last: ReviewStatus | None = None
    # a stop signal counts once the statuses published before this start are read: read
    # from the start, the status partition holds a deleted review's statuses (its stop
    # among them) before those of the review started again, and a poll may return the
    # first without the others
    status_tps = [tp for tp in cons.assignment() if tp.topic == settings.topic(STATUS_TOPIC)]
    ends = cons.end_offsets(status_tps) if status_tps else {}
    read_up = not ends
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            sent = 0
            for tp, records in cons.poll(timeout_ms=200).items():
                for r in records:
                    if tp.topic == settings.topic(STATUS_TOPIC):
                        try:
                            st = ReviewStatus.from_obj(loads(r.value))
                        except RecordError:
                            continue
                        if st.review == name and answered.current(st.profile_epoch) and (
                                last is None or st.ts >= last.ts
                                or epoch_before(last.profile_epoch, st.profile_epoch)):
                            last = st
                        continue
                    try:
                        req = JudgmentRequest.from_obj(loads(r.value))
                    except RecordError:
                        continue
                    if req.review != name or not answered.due(req):
                        continue
                    if limit is not None and len(answered) >= limit:
                        break
                    if req.doc_id not in gold:
                        raise SiftError(f"review {name!r} asks for {req.doc_id!r}, which the "
                                        "gold file does not label")
                    j = {"id": f"{name}/{req.doc_id}", "doc_id": req.doc_id, "profile": name,
                         "relevant": gold[req.doc_id], "judge": f"gold-{uuid.uuid4().hex[:6]}",
                         "ts": time.time()}
                    if req.profile_epoch:
                        j["profile_epoch"] = req.profile_epoch
                    sends.send(settings.topic("judgments"), name.encode(), dumps(j),
                               f"the judgment of {req.doc_id!r}")
                    answered.add(req.doc_id)
                    sent += 1
            if sent:
                sends.flush(timeout=30)
            if limit is not None and len(answered) >= limit:
                print(f"answered {len(answered)} requests (--limit)")
                return len(answered)
            if last is not None and not answered.current(last.profile_epoch):
                last = None  # a deleted review's: the review was started again since
            read_up = read_up or all(cons.position(tp) >= end for tp, end in ends.items())
            if last is not None and (last.stop or last.complete) and read_up \
                    and last.screened >= len(answered):
                print(describe(last))
                print(f"answered {len(answered)} requests")
                return len(answered)
    finally:
        prod.close(timeout=10)
        cons.close()
    if last is not None:
        print(describe(last))
    raise SiftError(f"review {name!r}: no stop signal within {timeout:g} s "
                    f"({len(answered)} requests answered)")


def run(args: argparse.Namespace) -> int:
    settings = Settings.from_env(broker=args.broker)
    if args.verb == "start":
        return start(settings, review_spec(args.name, args.query, parse_params(args.param)),
                     args.wait)
    if args.verb == "load":
        if args.file.is_dir():
            raise SiftError(f"{args.file}: is a directory, not a JSONL file")
        if not args.file.exists():  # (a pipe, <(...), is read like a file)
            raise SiftError(f"{args.file}: no such file")
        if args.batch > settings.max_batch_documents:
            raise SiftError(f"--batch must be at most {settings.max_batch_documents}")
        docs = list(collection(args.file, args.name, args.limit))  # every line checked first
        if not docs:
            raise SiftError(f"{args.file}: no records (every line is blank)")
        status_of(settings, args.name)  # documents of a review that does not exist are lost
        batches = (docs[i : i + args.batch] for i in range(0, len(docs), args.batch))
        _send(settings, settings.topic("documents"),
              ((b[0].id.encode(), dumps({"documents": [d.to_obj() for d in b]})) for b in batches))
        print(f"sent {len(docs)} documents of review {args.name!r} to {settings.topic('documents')}")
        return 0
    if args.verb == "answer":
        gold = gold_labels(args.gold)
        status_of(settings, args.name)  # else it would wait for requests that never come
        answer(settings, args.name, gold, args.until_stop, args.limit)
        return 0
    if args.verb == "rm":
        return remove(settings, args.name, args.wait)
    rows = [status_of(settings, args.name)] if args.name else list(statuses(settings).values())
    for st in sorted(rows, key=lambda s: s.review):
        print(json_line(st.to_obj()) if args.json else describe(st))
    return 0
