"""The Faust application: topics, the profile table and four thin agents.

Each agent decodes Faust events into :class:`~sift.agents.service.InputMessage`,
calls one :class:`~sift.agents.service.Service` method and emits the result.

============================  =====================================================
agent                         consumes -> emits
============================  =====================================================
``route_documents``           documents -> decisions for the shards this worker
                              holds (scored here), shard-documents (one copy per
                              other partition), dead letters
``score_documents``           shard-documents partition ``p`` -> decisions, using the
                              profiles of shard ``p``
``apply_specs``               profiles -> table ``profile_to_state``, dead letters
``apply_judgments``           judgments -> table ``profile_to_state``, dead letters
============================  =====================================================

The table, the judgments, the profiles and the shard topics have the same
number of partitions and are keyed (or explicitly partitioned) by
``shard_of(profile)``, so Faust's assignor gives partition ``p`` of all of them
to the same worker, and a rebalance moves a shard's state with its streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import ssl
import threading
import time
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass, field
from inspect import CORO_CREATED, getcoroutinestate
from pathlib import Path
from types import CoroutineType
from typing import Any, TypeVar

import faust
import orjson
from faust.exceptions import ConsumerNotStarted, NotReady
from faust.types import TP, EventT

from sift.agents import gcwatch
from sift.agents import review as review_mode
from sift.agents.metrics import WorkerMetrics
from sift.agents.service import (
    DEAD_LETTER_BYTES,
    MAX_RECORD_BYTES,
    MAX_STATE_BYTES,
    RECORD_FRAMING_BYTES,
    InputMessage,
    RouteResult,
    Service,
    ServiceError,
    TrainingSet,
    UpdateResult,
    dead_letter,
    default_corpus,
    release_free_memory,
    same_payloads,
    shard_of,
)
from sift.agents.tails import BusyTopics, PartitionView, TailWatch
from sift.hosts import host_refused, refusal
from sift.kafkaclient import read_offsets, start_offsets
from sift.observability import CONTENT_TYPE
from sift.settings import Settings
from sift.topics.codecs import encode
from sift.topics.deadletter import TOPIC_MAX_BYTES, DeadLetter
from sift.topics.errors import RecordError
from sift.topics.records import Decision, clip

log = logging.getLogger("sift.worker")

#: The producer's record batch (aiokafka's ``max_batch_size``; see ``create_app``).
PRODUCER_BATCH_BYTES = 512 * 1024
SHARD_TOPIC = "shard-documents"
#: Changelog segment size: Kafka never compacts the active segment (1 GiB by default), and
#: every judgment batch writes its profile's whole record (up to a few MB), so with the
#: default a replacement worker would recover (read) up to a GiB per partition.
CHANGELOG_SEGMENT_BYTES = 64 * 1024 * 1024
#: The internal fan-out topic only needs to outlive a restart.
SHARD_RETENTION_MS = 3_600_000
#: Seconds between two ``malloc_trim`` calls (see ``release_free_memory``).
TRIM_INTERVAL = 30.0
#: Seconds between two looks for partitions whose last messages never arrived, and how
#: long one must stay behind its high-water mark, without progress, to be sought back.
TAIL_CHECK_INTERVAL = 2.0
TAIL_STALL_S = 10.0
#: ... and how long when the worker's agents have taken nothing at all meanwhile
#: (TailWatch.idle_stall_s)
TAIL_IDLE_STALL_S = 3.0
#: Seconds between loads of the held shards' profiles from the table (load_profiles_held).
LOAD_INTERVAL = 5.0
#: documents stored per slice when a hot standby's store is filled again
REFILL_SLICE = 2_000
#: how long the judgments and specs agents wait for such a refill at most (below the
#: stop watchdog's SIFT_STOP_TIMEOUT default, 30 s: a stop waits for their batch)
REFILL_WAIT_S = 20.0
#: store positions a refill sets aside for the documents it reads back, before those the
#: worker stores meanwhile (DocumentStore.reserve): far more than any read gives (at most
#: MAX_RESTORED and a batch a partition; positions are only numbers)
REFILL_POSITIONS = 1 << 40
TABLE = "profile_to_state"
#: The profiles' judgment journals (sift.agents.journal), co-partitioned with TABLE.
JOURNAL_TABLE = "profile_to_journal"


def faust_credentials(settings: Settings) -> Any:
    """Faust credentials from the SASL/SSL settings (``None`` for PLAINTEXT)."""
    proto = settings.security_protocol.upper()
    if proto == "PLAINTEXT":
        return None
    context: ssl.SSLContext | None = None
    if proto in ("SSL", "SASL_SSL"):
        context = ssl.create_default_context(cafile=settings.ssl_cafile or None)
        if settings.ssl_certfile:
            context.load_cert_chain(settings.ssl_certfile, settings.ssl_keyfile or None)
    if proto == "SSL":
        return faust.SSLCredentials(context)
    if proto in ("SASL_PLAINTEXT", "SASL_SSL"):
        mech = (settings.sasl_mechanism or "PLAIN").upper()
        if mech == "GSSAPI":
            return faust.GSSAPICredentials(ssl_context=context)
        return faust.SASLCredentials(username=settings.sasl_username,
                                     password=settings.sasl_password,
                                     mechanism=mech, ssl_context=context)
    raise ServiceError(f"SIFT_SECURITY_PROTOCOL must be PLAINTEXT, SSL, SASL_PLAINTEXT or "
                       f"SASL_SSL, got {settings.security_protocol!r}")


WIRE_TOPICS = ("documents", "judgments", "profiles", "decisions", "dead-letters")
#: Topics whose partition p must belong to profile shard p.
SHARDED_TOPICS = ("judgments", "profiles")


def prepare_topics(settings: Settings) -> int:
    """Create the wire topics (Faust declares only internal ones) and check the sharded ones.

    Returns the largest dead letter the worker may send (see ``Service.dead_letter_bytes``):
    the dead-letters topic's max.message.bytes, which sift sets to ``TOPIC_MAX_BYTES``
    (sift.topics.deadletter) when it creates the topic, less framing; a stock broker's
    default when the broker does not say.

    Raises ServiceError when the judgments or profiles topic exists with a number of
    partitions other than ``settings.partitions``: judgments would miss their profile.
    """
    from sift.kafkaclient import ensure_topics, message_limit, partition_counts

    dead = settings.topic("dead-letters")
    names = [settings.topic(t) for t in WIRE_TOPICS]
    ensure_topics(settings, names, settings.partitions)  # dead-letters: TOPIC_MAX_BYTES
    limit = message_limit(settings, dead)
    if limit is not None and limit < TOPIC_MAX_BYTES:
        log.warning("topic %s takes messages of at most %d bytes (max.message.bytes): dead "
                    "letters of larger inputs carry them clipped; raise it to %d to keep "
                    "them whole", dead, limit, TOPIC_MAX_BYTES)
    review_mode.prepare_review_topics(settings)
    # Faust creates internal topics itself, but while its consumer already subscribes:
    # the group then assigns no partition of the missing topic and nothing is scored
    # until the next rebalance. Create it first.
    ensure_topics(settings, [settings.topic(SHARD_TOPIC)], settings.partitions,
                  configs={"retention.ms": str(SHARD_RETENTION_MS)})
    counts = partition_counts(settings, [settings.topic(t) for t in SHARDED_TOPICS])
    for name, n in counts.items():
        if n != settings.partitions:
            raise ServiceError(f"topic {name} has {n} partitions but SIFT_PARTITIONS is "
                               f"{settings.partitions}; they must be equal")
    return DEAD_LETTER_BYTES if limit is None else max(limit - RECORD_FRAMING_BYTES, 1024)


class _ActivePartitions:
    """Faust's live set of active partitions as aiokafka's ``fetched_records`` reads it:
    ``tp in`` asks the set, and it is never empty (see :func:`rotate_fetched_partitions`)."""

    __slots__ = ("tps",)

    def __init__(self, tps: set[Any]) -> None:
        self.tps = tps

    def __bool__(self) -> bool:
        return True

    def __contains__(self, tp: object) -> bool:
        return tp in self.tps


def rotate_fetched_partitions() -> None:
    """Make aiokafka hand out prefetched records round-robin over partitions, and only
    those of partitions Faust has active.

    ``Fetcher.fetched_records(max_records=n)`` serves the partitions in the order their
    fetches arrived and stops at ``n``; a partition whose prefetched result holds more
    than ``n`` records (16 MiB of judgments are about 10,000) comes first again on the
    next call, and the next, until it is used up: a replacement worker catching up on
    judgments routed no document for minutes. After each call the partitions just
    served go to the back of the queue.

    Faust passes its drain loop's set of active partitions to the consumer thread, which
    reads it while the event loop changes it; ``fetched_records`` treats an empty
    ``partitions`` as "all of them". When table recovery pauses the changelogs just
    before resuming the inputs, the set is empty for a moment: aiokafka then handed
    over, and moved past, records of paused input partitions, which Faust's ``getmany``
    drops (not active; seen in the fifty-second session: 713 documents of one partition).
    The seek to the committed offsets that follows puts them back, but aiokafka seeks no
    partition without a commit, whose head is then lost (docs/faust-notes.md). Here the
    set is asked, never taken as "all". Idempotent.
    """
    from aiokafka.consumer.fetcher import Fetcher

    original = Fetcher.fetched_records
    if getattr(original, "sift_rotating", False):
        return

    async def fetched_records(self: Any, partitions: Any, timeout: float = 0,
                              max_records: int | None = None) -> Any:
        if isinstance(partitions, set):  # Faust's live set of active partitions
            partitions = _ActivePartitions(partitions)
        drained = await original(self, partitions, timeout=timeout, max_records=max_records)
        pending = self._records
        for tp in drained:
            if tp in pending:
                pending.move_to_end(tp)
        return drained

    fetched_records.sift_rotating = True  # type: ignore[attr-defined]
    fetched_records.sift_original = original  # type: ignore[attr-defined]
    Fetcher.fetched_records = fetched_records


def keep_deliveries_at_recovery_end() -> None:
    """Keep Faust from emptying the stream buffers after it has resumed the input
    partitions at the end of table recovery. Idempotent.

    ``Recovery.on_recovery_completed`` resumes the input partitions, then awaits
    ``perform_seek`` (the seek to the committed offsets: 0.5-0.8 s here), then calls
    ``app.flow_control.resume()``, which empties every stream and channel buffer
    (mode's ``FlowControlEvent.resume`` clears the queues made with
    ``clear_on_resume``). The drain loop is already running (recovery resumed the flow
    to read the changelogs), so during the seek it delivers the records aiokafka
    prefetched from the committed offsets into those buffers and notes each as read
    (``Consumer._read_offset``); the clear then threw them away, and when the re-fetch
    from the committed offset came, the drain loop dropped the copies as already read
    (``offset >= r_offset``), then handed the last one again. A fresh worker on a backlog
    lost 68-782 messages at the head of a partition in most starts this way (the
    fifty-second session traced each skipped head of ``benchmarks/restart_heads.py`` to
    such a clear; docs/streaming.md finding 21). Here the buffers are emptied when
    recovery completes, before the inputs are resumed (all that Faust's clear would have
    dropped had been delivered by then), and the resume at the end leaves what was
    delivered since in place: at worst a record is delivered twice, which the agents
    drop (``offsets_repeated``, ``redelivered_skipped``).
    """
    from faust.tables.recovery import Recovery

    original = Recovery.on_recovery_completed
    if getattr(original, "sift_guarded", False):
        return

    async def on_recovery_completed(self: Any, generation_id: int = 0) -> None:
        flow = self.app.flow_control
        flow.clear()

        def resume() -> None:  # FlowControlEvent.resume without its clear
            flow._suspend.clear()
            flow._resume.set()

        flow.resume = resume
        try:
            await original(self, generation_id)
        finally:
            with contextlib.suppress(AttributeError):
                del flow.resume

    on_recovery_completed.sift_guarded = True  # type: ignore[attr-defined]
    Recovery.on_recovery_completed = on_recovery_completed  # type: ignore[method-assign]


#: Calls of Faust's drain loop for records (each a hop to its consumer thread and back):
#: ``consumer_polls`` in the worker's stats.
POLLS: Counter[str] = Counter()


def bound_poll_wait(max_wait_ms: int) -> None:
    """Make Faust's drain loop wait at most ``max_wait_ms`` for records per poll
    (``SIFT_FETCH_MAX_WAIT_MS``) instead of its fixed 1 s.

    When a stream's buffer passes 80 % of ``stream_buffer_maxsize``, Faust takes the
    partition out of the set its drain loop polls; it puts it back only once the buffer
    is empty. The loop, meanwhile, waits in ``getmany(timeout=1.0)`` for records of the
    partitions still in the set: with every partition of a busy topic paused that is the
    quiet topics, so the agent finished its buffer and waited with its next records
    already fetched, until the second ran out. A worker catching up on single-document
    messages spent 0.65-0.72 s of every 1.4 s that way (43 % of a core busy,
    docs/streaming.md). Idempotent.
    """
    from faust.transport.consumer import Consumer

    original = Consumer.getmany
    if getattr(original, "sift_poll_wait", None) == max_wait_ms:
        return
    original = getattr(original, "sift_original", original)
    limit = max_wait_ms / 1000

    def getmany(self: Any, timeout: float) -> Any:
        POLLS["polls"] += 1
        return original(self, timeout=min(timeout, limit))

    getmany.sift_poll_wait = max_wait_ms  # type: ignore[attr-defined]
    getmany.sift_original = original  # type: ignore[attr-defined]
    Consumer.getmany = getmany  # type: ignore[method-assign]


#: Table writes queued for the producer before Faust holds up the input streams (its
#: ``ProducerBuffer.max_messages`` is 100); see :func:`let_inputs_pass_table_writes`.
PRODUCER_BUFFER_MESSAGES = 1_000_000


def let_inputs_pass_table_writes() -> None:
    """Keep a batch of table writes from holding up every input stream. Idempotent.

    Faust queues a table write for its producer (``send_soon``) and, while more than
    ``ProducerBuffer.max_messages`` (100) are queued, makes its delivery of *every*
    consumed message wait (``Conductor.on_message`` awaits ``wait_until_ebb``), so that a
    stream writing tables faster than the producer sends cannot grow the queue without
    bound. A batch of judgments at 1,000 profiles writes a journal record for each of a
    few thousand profiles at once: the documents, which write no table, then waited
    until those records had been sent, a hundred at a time. Here the bound is the
    agents' own: each awaits every write of a batch (``ShardedTable.settle``) before it
    takes the next, so the queue holds at most a batch's writes per table-writing
    agent, and the limit is raised out of the way (:data:`PRODUCER_BUFFER_MESSAGES`).
    """
    from faust.transport.producer import ProducerBuffer

    ProducerBuffer.max_messages = PRODUCER_BUFFER_MESSAGES


def shorten_fetch_wait(max_wait_ms: int) -> None:
    """Make the worker's consumer long-poll for ``max_wait_ms`` (``SIFT_FETCH_MAX_WAIT_MS``)
    instead of Faust's fixed 1.5 s.

    aiokafka keeps one fetch request in flight per broker, for the partitions with no
    records buffered when it was sent; a partition whose buffered records are consumed
    meanwhile waits for that request to come back, which the broker holds up to
    ``fetch.max.wait.ms`` when the other partitions are quiet. With Faust's 1,500 ms a
    document went through two such waits (documents topic, then the shard topic) and a
    worker offered 1,000 documents a second, idle most of the time, answered after 3 s
    at the median (docs/streaming.md). Idempotent.
    """
    from faust.transport.drivers import aiokafka as driver

    thread = driver.AIOKafkaConsumerThread
    original = thread._create_worker_consumer
    if getattr(original, "sift_fetch_wait", None) == max_wait_ms:
        return
    original = getattr(original, "sift_original", original)

    def create(self: Any, transport: Any) -> Any:
        consumer = original(self, transport)
        consumer._fetch_max_wait_ms = max_wait_ms  # read when the consumer starts
        return consumer

    create.sift_fetch_wait = max_wait_ms  # type: ignore[attr-defined]
    create.sift_original = original  # type: ignore[attr-defined]
    thread._create_worker_consumer = create  # type: ignore[method-assign]


class _Resumed:
    """Awaitable continuing a coroutine that has already run its first step and yielded
    ``yielded`` (what ``yield from`` does after its first step)."""

    __slots__ = ("coro", "yielded")

    def __init__(self, coro: Any, yielded: Any) -> None:
        self.coro, self.yielded = coro, yielded

    def __await__(self) -> Any:
        coro, value = self.coro, self.yielded
        while True:
            try:
                sent = yield value
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # cancellation or an error for the awaited future
                try:
                    value = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    value = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


async def deliver_first(original: Callable[..., Any], service: Any, delivery: Any,
                        flow_wait: Any) -> Any:
    """What ``original(service, delivery, flow_wait)`` (mode's ``Service.wait_first``) does
    for Faust's per-message delivery, without its four tasks when the delivery does not
    have to wait.

    Faust's drain loop hands every consumed message to the conductor with ``await
    self.wait_first(callback(message), self.suspend_flow.wait())``: the delivery races a
    rebalance (``suspend_flow``) and the consumer's stop and crash events, four tasks
    and three loop iterations per message, about two thirds of Faust's ~105 us per
    message here (docs/faust-notes.md). The delivery almost always finishes without
    waiting (the event is put on a stream buffer with room). Its first step is run here:
    if it finishes, that is the result the race would have had (its task, created
    first, would have run first and finished in that step); if it raises, the error
    propagates as the race propagates it. Only when it has to wait (a full buffer,
    flow control) does the race run as before, on the rest of the delivery, so a
    rebalance still cancels a delivery stuck on a full buffer.
    """
    try:
        yielded = delivery.send(None)
    except StopIteration as stop:
        flow_wait.close()  # never started: no "never awaited" warning
        from mode.services import WaitResults

        return WaitResults([delivery], [stop.value], False)
    except BaseException:
        flow_wait.close()
        raise
    return await original(service, _Resumed(delivery, yielded), flow_wait)


def deliver_messages_directly() -> None:
    """Route Faust's per-message delivery race through :func:`deliver_first`. Idempotent.

    Only the drain loop's call is changed: ``wait_first`` with two coroutines, the first
    Faust's ``on_message`` callback and the second an event's ``wait()``, and no timeout;
    every other call goes to mode's ``wait_first`` unchanged.
    """
    from faust.transport.consumer import Consumer

    original = Consumer.wait_first
    if getattr(original, "sift_direct", False):
        return

    async def wait_first(self: Any, *coros: Any, timeout: Any = None) -> Any:
        if (timeout is None and len(coros) == 2 and isinstance(coros[0], CoroutineType)
                and isinstance(coros[1], CoroutineType)
                and coros[0].cr_code.co_name == "on_message"
                and coros[1].cr_code.co_name == "wait"
                and getcoroutinestate(coros[0]) == CORO_CREATED):
            return await deliver_first(original, self, coros[0], coros[1])
        return await original(self, *coros, timeout=timeout)

    wait_first.sift_direct = True  # type: ignore[attr-defined]
    Consumer.wait_first = wait_first  # type: ignore[method-assign]


#: Messages an agent has finished with (marked by :func:`mark_processed` before the
#: agent's batch is acknowledged); weak, so nothing is kept alive by it.
_PROCESSED: weakref.WeakSet[Any] = weakref.WeakSet()


def mark_processed(events: Iterable[EventT[Any]]) -> None:
    """Record that an agent finished these events: their acknowledgement may be
    committed even while flow is suspended (a batch completed during a rebalance or a
    clean stop), see :func:`commit_only_processed_messages`."""
    for e in events:
        _PROCESSED.add(e.message)


def commit_only_processed_messages() -> None:
    """Keep Faust from committing messages that no agent processed. Idempotent.

    A stream that pulls an event while flow control is suspended (a rebalance, or the
    worker stopping) or that was fetched in an earlier consumer generation skips it
    and *acknowledges* it (``Stream.__aiter__``: "ack the filtered out message,
    otherwise the lag would increase"); the consumer's next commit (Faust commits while
    stopping) then moves past a message nobody applied, and the worker that takes over
    never sees it: a worker leaving the group lost one judgment of 2,000 that way
    (docs/reliability.md, bug 9). Here such an acknowledgement only releases the message
    (so shutdown does not wait for it) and is not recorded as committable: the message
    is delivered again from the committed offset, to this worker or the next owner,
    whose processing is idempotent (judgment keys, decision keys). Faust's
    ``take_events`` acknowledges a whole batch when the agent is cancelled in the middle
    of it (a stopping worker), so an acknowledgement while flow is suspended counts only
    for messages the agent marked as processed (:func:`mark_processed`): a batch an
    agent completes during a rebalance or a clean stop is committed, instead of being
    processed again by the next owner (up to a whole batch of 25,600 documents twice).
    """
    from faust.transport.consumer import Consumer
    from mode.utils.futures import notify

    original = Consumer.ack
    if getattr(original, "sift_guarded", False):
        return
    lock: contextlib.AbstractContextManager[Any]
    try:
        from faust.types.tuples import ack_lock as lock
    except ImportError:  # older faust-streaming: no lock around acks
        lock = contextlib.nullcontext()

    def ack(self: Any, message: Any) -> bool:
        app = self.app
        current = (getattr(message, "generation_id", None) in (None,
                                                              app.consumer_generation_id)
                   and (app.flow_control.is_active() or message in _PROCESSED))
        if current:
            return bool(original(self, message))
        with lock:
            if not message.acked:
                message.acked = True
                self._unacked_messages.discard(message)
                notify(self._waiting_for_ack)
                log.debug("not committing %s[%d]@%d: acknowledged outside the current "
                          "generation or while flow is suspended", message.topic,
                          message.partition, message.offset)
        return False

    ack.sift_guarded = True  # type: ignore[attr-defined]
    Consumer.ack = ack  # type: ignore[method-assign]


#: Input topics whose skipped offsets the agents read back and acknowledge themselves
#: (see :func:`gaps_left_to_the_agents`).
_OWN_GAPS: set[str] = set()


def gaps_left_to_the_agents(topics: Iterable[str]) -> None:
    """Keep Faust's consumer from counting skipped offsets of ``topics`` as processed, and
    its gaps on other topics to the offsets actually skipped. Idempotent.

    When its fetch loop sees a partition jump from offset ``r`` to ``o``, Faust records
    ``r + 1 .. o`` as a gap, offsets its next commit counts as acknowledged (meant for
    compacted or transactional topics, whose missing offsets do not exist). On sift's
    input topics a jump means the consumer skipped messages that are on the broker (the
    agents read them back and apply them in their place, ``complete``), and the gap let
    a commit pass them before they were applied: a worker killed then would have lost
    them. The interval also includes ``o``, a message not yet processed, which, once
    acknowledged, then sat twice in the list Faust commits from: its commit takes the
    first run of consecutive offsets, which a repeated offset ends, so it moved one
    offset per commit (seen: a lag stuck at 601 after a read-back of 616, CI, eleventh
    session). Here no gap is recorded on ``topics``: the agents acknowledge each
    skipped offset once it is applied, or once a complete read-back shows the log does
    not hold it (``ack_recovered``); elsewhere the gap ends at ``o - 1``.
    """
    from faust.transport.consumer import Consumer

    _OWN_GAPS.update(topics)
    original = Consumer._add_gap
    if getattr(original, "sift_guarded", False):
        return

    async def _add_gap(self: Any, tp: Any, offset_from: int, offset_to: int) -> None:
        if tp.topic not in _OWN_GAPS and offset_to - 1 >= offset_from:
            await original(self, tp, offset_from, offset_to - 1)

    _add_gap.sift_guarded = True  # type: ignore[attr-defined]
    Consumer._add_gap = _add_gap  # type: ignore[method-assign]


def internal_error(msg: InputMessage, exc: BaseException) -> DeadLetter:
    return dead_letter(msg, RecordError("internal_error", f"{type(exc).__name__}: {exc}"))


def count_dead(stats: Counter[str] | None, letters: Sequence[DeadLetter]) -> None:
    """Count dead letters made outside the service (which counts its own) as it does:
    ``dead_letters`` and ``dead_letters.<reason>``."""
    if stats is None:
        return
    for d in letters:
        stats["dead_letters"] += 1
        stats[f"dead_letters.{d.reason}"] += 1


R = TypeVar("R", RouteResult, UpdateResult)


def runs_of_kind(messages: Sequence[InputMessage],
                 kind: Callable[[InputMessage], bool]) -> list[list[InputMessage]]:
    """``messages`` cut into runs of consecutive messages of one ``kind``, in order.

    >>> [[m.offset for m in r] for r in runs_of_kind(
    ...     [InputMessage(b"", "t", 0, o) for o in range(5)], lambda m: m.offset in (2, 3))]
    [[0, 1], [2, 3], [4]]
    """
    runs: list[list[InputMessage]] = []
    last: bool | None = None
    for m in messages:
        k = kind(m)
        if k is not last or not runs:
            runs.append([])
            last = k
        runs[-1].append(m)
    return runs


class OneAtATime:
    """A blocking call run in the default executor by a periodic task, never twice at once.

    A timer body that awaits a slow call (the stats file of a busy worker, a worker
    capped to part of a core) outlasts its interval, and Faust warns "Timer ... is
    overlapping" at every such tick. :meth:`tick` starts the call and returns at once;
    a tick that finds the last call still running starts none (counted in ``skipped``),
    and the next tick after a call that failed raises its error (for :func:`keep_going`
    to count) instead of starting one.

    >>> import asyncio, threading
    >>> gate = threading.Event(); runs = []
    >>> job = OneAtATime(lambda: (gate.wait(5), runs.append(1)))
    >>> async def ticks():
    ...     await job.tick(); await job.tick()      # the second finds the first running
    ...     gate.set(); await job.wait(); await job.tick(); await job.wait()
    >>> asyncio.run(ticks()); len(runs), job.skipped
    (2, 1)
    """

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.pending: asyncio.Future[Any] | None = None
        self.skipped = 0

    async def tick(self) -> None:
        pending = self.pending
        if pending is not None:
            if not pending.done():
                self.skipped += 1
                return
            self.pending = None
            pending.result()  # the last call's error, if any
        self.pending = asyncio.get_running_loop().run_in_executor(None, self.fn)

    async def wait(self) -> None:
        """Until the call in flight (if any) has ended; its error is left to :meth:`tick`."""
        if self.pending is not None:
            await asyncio.wait([self.pending])


#: How often a periodic task that keeps failing is logged (seconds); every failure counts.
TIMER_ERROR_LOG_INTERVAL = 60.0


def keep_going(name: str, fn: Callable[[], Awaitable[None]], stats: MutableMapping[str, int],
               *, clock: Callable[[], float] = time.monotonic) -> Callable[[], Awaitable[None]]:
    """``fn`` (the body of a periodic task) made unable to stop the worker.

    An exception escaping an ``@app.timer`` body ends its task, and mode's
    ``Service._execute_task`` then crashes the app: the worker stops over a stats file
    it could not write (a full or read-only disk) or a seek the broker refused during a
    rebalance. Wrapped, the failure is counted (``stats["timer_errors"]``), logged with
    its traceback the first time and then at most once every
    :data:`TIMER_ERROR_LOG_INTERVAL` seconds per task, and the next tick runs as usual.
    Cancellation (a stop) still goes through.
    """
    last_logged: list[float] = []

    @functools.wraps(fn)
    async def survive() -> None:
        try:
            await fn()
        except Exception:
            stats["timer_errors"] += 1
            now = clock()
            if not last_logged or now - last_logged[0] >= TIMER_ERROR_LOG_INTERVAL:
                last_logged[:] = [now]
                log.exception("periodic task %s failed (%d failures of periodic tasks so "
                              "far); it runs again at its next tick", name,
                              stats["timer_errors"])

    return survive


def guarded(fn: Callable[..., R], messages: list[InputMessage], *args: Any,
            stats: Counter[str] | None = None) -> R:
    """``fn(messages, *args)``; if it raises (a bug), retry message by message and
    dead-letter (``internal_error``) those that still fail, so the stream goes on.

    Retrying is safe: judgments are idempotent (and a profile that failed while learning
    is read back from the table, see :meth:`Service.apply_judgments`), specs replace,
    routing is pure. ``stats``, the service's counters: the dead letters of the failed
    attempt, which is thrown away, are taken off them (the retry makes them again), and
    the ``internal_error`` ones are counted.
    """
    before = None if stats is None else {k: v for k, v in stats.items() if k.startswith("dead_letters")}
    try:
        return fn(messages, *args)
    except Exception:
        log.exception("batch of %d messages failed; retrying one by one", len(messages))
    if stats is not None and before is not None:
        for key in [k for k in stats if k.startswith("dead_letters")]:
            del stats[key]
        stats.update(before)
    results = []
    for msg in messages:
        try:
            results.append(fn([msg], *args))
        except Exception as exc:
            log.exception("message %s[%d]@%d failed", msg.topic, msg.partition, msg.offset)
            one = fn([], *args)
            letter = internal_error(msg, exc)
            count_dead(stats, [letter])
            one.dead_letters.append(letter)
            results.append(one)
    first = results[0] if results else fn([], *args)
    for r in results[1:]:
        first.dead_letters.extend(r.dead_letters)
        if isinstance(first, RouteResult) and isinstance(r, RouteResult):
            first.parts.extend(r.parts)
            first.counts.extend(r.counts)
            first.with_metadata.extend(r.with_metadata)
            first.n_documents += r.n_documents
        elif isinstance(first, UpdateResult) and isinstance(r, UpdateResult):
            first.forwards.extend(r.forwards)
            first.changed.extend(r.changed)
    return first


def byte_steps(messages: Sequence[InputMessage], max_bytes: int) -> Iterator[slice]:
    """Consecutive slices of ``messages`` whose values add up to at most ``max_bytes``
    (a larger message is a step of its own), in order."""
    start = size = 0
    for i, m in enumerate(messages):
        n = len(m.value) if m.value is not None else 0
        if i > start and size + n > max_bytes:
            yield slice(start, i)
            start, size = i, 0
        size += n
    if start < len(messages):
        yield slice(start, len(messages))


async def take_events(stream: faust.StreamT[Any], n: int, *, within: float,
                      busy: BusyTopics | None = None) -> AsyncIterator[list[EventT[Any]]]:
    """``stream.take_events``: batches of up to ``n`` events, each with its message (the
    events are needed to acknowledge what was processed; faust's ``StreamT`` protocol
    does not declare the method). With ``busy``, the batch's topics are in it from the
    batch's delivery until the agent asks for the next one (or stops): the tail watch
    does not take a partition waiting behind a long batch for a lost tail."""
    batches: AsyncIterator[list[EventT[Any]]] = stream.take_events(n, within=within)  # type: ignore[attr-defined]
    async for batch in batches:
        if busy is None:
            yield batch
            continue
        topics = {e.message.topic for e in batch}
        busy.enter(topics)
        try:
            yield batch
        finally:
            busy.leave(topics)


def held_in_worker(app: faust.App, topic: str, partition: int, offset: int) -> bool:
    """Whether a message of the partition at ``offset`` or later is seen waiting in the
    worker, for :class:`~sift.agents.tails.TailWatch`: taken by an agent's stream and not
    yet acknowledged (Faust's take buffer, or the batch in progress), in the topic's
    stream queue, or the partition's fetching paused by Faust until its stream buffer
    drains. Private Faust state, read on the event loop's thread, where Faust changes
    it; anything unexpected in it is a no (a seek back is the safe side)."""
    consumer = app.consumer
    tp = TP(topic, partition)
    try:
        if tp in getattr(consumer, "_buffered_partitions", ()):
            return True
        for m in list(getattr(consumer, "_unacked_messages", ())):
            if m.tp == tp and m.offset >= offset and not m.acked:
                return True
        for channel in app.topics._tp_index.get(tp, ()):  # type: ignore[attr-defined]
            for event in list(getattr(channel.queue, "_queue", ())):
                m = event.message
                if m.partition == partition and m.topic == topic and m.offset >= offset:
                    return True
    except Exception as exc:  # Faust's internals changed: seek as before
        log.debug("tail check could not look into Faust's buffers: %r", exc)
    return False


def input_held_up(app: faust.App, inputs: Iterable[str]) -> bool:
    """Whether the stream queue of an input topic is full at this instant: Faust's drain
    loop then waits, holding the records it has fetched, of any partition."""
    names = set(inputs)
    try:
        return any(channel.queue.full()
                   for channel in list(app.topics._topics)  # type: ignore[attr-defined]
                   if channel.get_topic_name() in names)
    except Exception as exc:  # Faust's internals changed: no evidence
        log.debug("tail check could not look into Faust's queues: %r", exc)
        return False


def to_message(event: EventT[Any]) -> InputMessage:
    m = event.message
    value = m.value if isinstance(m.value, bytes | None) else bytes(m.value)
    return InputMessage(value, m.topic, m.partition, m.offset, m.key)


class ShardedTable(faust.Table):  # type: ignore[type-arg]
    """A table whose changelog partition for a key is the key's profile shard.

    Faust writes a table change to the partition of the event being processed,
    which is wrong for a batch taken from several partitions, and its
    ``use_partitioner`` mode asks the producer for topic metadata it may not
    have yet (a ``TypeError`` on the first write). The shard is known, so say it.
    """

    #: with a separator, a key ``<name><separator><rest>`` goes to the shard of ``name``
    #: (a review's chunks beside its record, sift.agents.review.chunk_key)
    name_separator: str | None = None

    def partition_for_key(self, key: Any) -> int:
        name = key.decode() if isinstance(key, bytes) else str(key)
        sep = self.name_separator
        if sep is not None and sep in name:
            name = name.rpartition(sep)[0]
        n = self.partitions
        if n is None:  # always given (the shards' count): a default would not match them
            raise RuntimeError(f"table {self.name!r} was made without a partition count")
        return shard_of(name, int(n))

    def send_changelog(self, partition: int | None, key: Any, value: Any,
                       *args: Any, **kwargs: Any) -> Any:
        fut = super().send_changelog(partition, key, value, *args, **kwargs)
        # Faust's memory store drops the keys of a partition that leaves this worker only
        # if it knows their partition, which it learns from recovery alone: the keys
        # written here stayed, and a profile the next owner deleted (its tombstone
        # compacted away by the time the partition came back) was scored here again
        # (fiftieth session, docs/reliability.md item 80). Placed as recovery places them.
        placed = getattr(self.data, "_key_partition", None)
        if isinstance(placed, MutableMapping) and partition is not None:
            if value is None:
                placed.pop(key, None)
            else:
                placed[key] = partition
        pending = self.__dict__.setdefault("_sift_unsettled", [])
        pending.append(fut)
        if len(pending) > 10_000:  # a writer that never settles must not grow this forever
            pending[:] = [f for f in pending if not f.done()]
        return fut

    async def settle(self) -> None:
        """Wait until every changelog write made so far is on the broker.

        Faust hands a table write to a buffer (``send_soon``) and, before committing
        offsets, flushes that buffer with a 0.1 s timeout per message: a multi-MB
        profile record that takes longer (or one the buffer task has taken but not yet
        given to aiokafka) is not waited for, the offsets of the judgments it holds
        are committed, and a worker killed then loses them (bug 9, and the flaky
        kill -9 test: one judgment of 1,000 missing from the replacement's state). The
        agents call this after every batch that wrote the table, before the batch is
        acknowledged, so an offset is only committed once its state change is durable.
        """
        pending = self.__dict__.get("_sift_unsettled")
        if not pending:
            return
        futures = list(pending)
        pending.clear()
        await asyncio.gather(*futures)


class TableView(MutableMapping[str, bytes]):
    """A Faust table with ``bytes`` keys seen as a ``str``-keyed mapping.

    The keys must reach Kafka as the raw UTF-8 profile name (Faust's ``str`` key
    type would JSON-encode them, and murmur2 of ``"name"`` with quotes is another
    partition): the changelog partition of a profile is then its shard.
    """

    def __init__(self, table: Any, stats: Counter[str] | None = None) -> None:
        self.table = table
        #: counts the keys skipped (``bad_table_keys``) when given
        self.stats = stats
        self._bad_keys: set[Any] = set()  # said once each

    def __getitem__(self, key: str) -> bytes:
        return self.table[key.encode()]  # type: ignore[no-any-return]

    def __setitem__(self, key: str, value: bytes) -> None:
        self.table[key.encode()] = value

    def __delitem__(self, key: str) -> None:
        del self.table[key.encode()]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.encode() in self.table

    def __iter__(self) -> Iterator[str]:
        names = []
        for k in list(self.table.keys()):
            try:
                names.append(k.decode())
            except (AttributeError, UnicodeDecodeError):
                # a key no worker writes (a foreign write to the changelog): skipped, or
                # it failed every pass over the keys, i.e. every scoring of every shard
                # held here (forty-ninth session)
                if k not in self._bad_keys:
                    self._bad_keys.add(k)
                    if self.stats is not None:
                        self.stats["bad_table_keys"] += 1
                    log.warning("table %s: key %s is not UTF-8 (not a profile name), "
                                "skipped", getattr(self.table, "name", "?"), clip(repr(k)))
        return iter(names)

    def __len__(self) -> int:
        return len(self.table)

    async def settle(self) -> None:
        """Wait until the table's changelog writes so far are durable (see ShardedTable)."""
        settle = getattr(self.table, "settle", None)
        if settle is not None:
            await settle()


@dataclass
class Worker:
    """The app and what its agents use (handy for tests and the CLI)."""

    app: faust.App
    service: Service
    settings: Settings
    topics: dict[str, faust.TopicT]
    table: Any
    reviews: Any = None  # sift.agents.review.ReviewHooks
    metrics: WorkerMetrics = field(default_factory=WorkerMetrics)
    #: the topics whose agent is inside a batch, for the tail watch
    busy: BusyTopics = field(default_factory=BusyTopics)
    #: partitions revoked and the next assignment not given yet: none is held (aiokafka's
    #: assignment still lists the revoked ones meanwhile)
    between_assignments: bool = False

    def stats(self) -> dict[str, Any]:
        out = self.service.counters()
        if self.reviews is not None:  # review mode's counters (all named review_*/reviews_*)
            out["stats"].update(self.reviews.service.stats)
        shard_topic = self.settings.topic(SHARD_TOPIC)
        try:
            # none between a revocation and the next assignment: aiokafka keeps listing
            # the partitions revoked until the group hands out new ones
            actives = set() if self.between_assignments else self.app.consumer.assignment()
        except (AttributeError, RuntimeError, ConsumerNotStarted):  # starting, or stopped
            actives = set()
        out["partitions"] = sorted(tp.partition for tp in actives if tp.topic == shard_topic)
        out["app_id"] = self.settings.app_id
        if gcwatch.WATCH is not None:
            out["gc"] = gcwatch.WATCH.summary()
        out["consumer_polls"] = POLLS["polls"]
        out["pid"] = os.getpid()
        out["ts"] = time.time()
        return out

    def metrics_text(self) -> str:
        """``GET /metrics``: the worker's metrics in Prometheus' text format."""
        return self.metrics.render(self.stats())

    def write_stats(self) -> None:
        path = Path(self.settings.data_dir) / "stats.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        # a file of its own per thread: the last write at a stop (main thread) may meet
        # the periodic one (an executor thread); each replaces the file whole
        tmp = path.with_name(f"{path.name}.{threading.get_ident()}.tmp")
        tmp.write_bytes(orjson.dumps(self.stats(), option=orjson.OPT_INDENT_2))
        tmp.replace(path)


def create_app(settings: Settings, *, training: TrainingSet | None = None,
               service: Service | None = None, web: bool = False) -> Worker:
    """Build the Faust app of one worker.

    Parameters
    ----------
    settings
        The frozen settings (broker, prefix, partitions, limits, security).
    training
        Vectorizer and training matrix; loaded from ``settings.idf_corpus`` (or the
        bundled Reuters training file) when not given.
    service
        A ready :class:`Service` (tests); built from ``training`` when not given.
    web
        Run Faust's web server on ``settings.web_host:web_port`` (``/sift/stats``).
    """
    P = settings.partitions
    rotate_fetched_partitions()
    shorten_fetch_wait(settings.fetch_max_wait_ms)
    bound_poll_wait(settings.fetch_max_wait_ms)
    if settings.direct_delivery:
        deliver_messages_directly()
    commit_only_processed_messages()
    let_inputs_pass_table_writes()
    keep_deliveries_at_recovery_end()
    if service is None:
        if training is None:
            training = TrainingSet.load(settings.idf_corpus or default_corpus(),
                                        truncate=settings.truncate or None, chars=settings.chars)
        service = Service(
            training, n_shards=P, recent_documents=settings.recent_documents,
            max_document_bytes=settings.max_document_bytes,
            max_batch_documents=settings.max_batch_documents,
            judgments_topic=settings.topic("judgments"), profiles_topic=settings.topic("profiles"),
            max_record_bytes=MAX_RECORD_BYTES)
    app = faust.App(
        settings.app_id,
        broker=settings.broker,
        broker_credentials=faust_credentials(settings),
        store="memory://",
        datadir=settings.data_dir,
        topic_partitions=P,
        topic_replication_factor=settings.replication_factor,
        table_standby_replicas=0,
        processing_guarantee=settings.processing_guarantee,
        producer_max_request_size=MAX_STATE_BYTES,
        # aiokafka keeps one request in flight per broker and drains one batch per
        # partition into it: with its 16 KiB default a step's decisions (some hundreds
        # of KB, an estimate) took many round trips, a quarter of the routing agent's
        # time (eighteenth session, docs/streaming.md finding 23). A batch stays under
        # the broker's 1 MiB max.message.bytes.
        producer_max_batch_size=PRODUCER_BATCH_BYTES,
        consumer_max_fetch_size=MAX_STATE_BYTES,
        # per stream, so also the documents' (shard payloads of up to 400 KB each): not
        # raised with the judgments' take, which drains the buffer as it fills
        stream_buffer_maxsize=max(4 * settings.batch_size, 4096),
        # Faust's default (None) hands its drain loop every record aiokafka has buffered
        # (up to 16 MiB a partition) at once, and the loop blocks on a full stream buffer
        # for the rest of that batch. With at most maxsize / 5 records per poll, a buffer
        # under pressure (Faust stops fetching its partition at maxsize / 1.25) cannot
        # fill; with ``rotate_fetched_partitions`` every partition gets its turn.
        broker_max_poll_records=max(4 * settings.batch_size, 4096) // 5,
        broker_commit_every=10_000,
        broker_commit_interval=1.0,
        broker_session_timeout=settings.session_timeout,
        broker_heartbeat_interval=settings.heartbeat_interval,
        consumer_group_instance_id=settings.instance_id or None,
        # Faust: the request timeout must not be below the session timeout
        broker_request_timeout=max(90.0, settings.session_timeout + 30.0),
        web_enabled=web,
        # Faust's web_host only names the server in its URLs; web_bind is the interface
        # it listens on, all of them by default: /metrics and /sift/stats were open to
        # the network whatever SIFT_WEB_HOST said
        web_bind=settings.web_host,
        web_host=settings.web_host,
        web_port=settings.web_port,
        key_serializer="raw",
        value_serializer="raw",
        logging_config=None,
    )

    def topic(name: str, **kw: Any) -> faust.TopicT:
        return app.topic(settings.topic(name), key_type=bytes, value_type=bytes,
                         key_serializer="raw", value_serializer="raw", partitions=P, **kw)

    documents_topic = topic("documents")
    judgments_topic = topic("judgments")
    profiles_topic = topic("profiles")
    decisions_topic = topic("decisions")
    dead_letters_topic = topic("dead-letters")
    shard_topic = topic(SHARD_TOPIC, retention=SHARD_RETENTION_MS / 1000, internal=True)
    profile_to_state = app.tables.add(ShardedTable(
        app, name=TABLE, beacon=app.tables.beacon, partitions=P, key_type=bytes,
        value_type=bytes, extra_topic_configs={"max.message.bytes": str(MAX_STATE_BYTES),
                                               "segment.bytes": str(CHANGELOG_SEGMENT_BYTES)},
    ))
    table = TableView(profile_to_state, service.stats)
    # read on recovery even with SIFT_JOURNAL=false (appends off): a journal an earlier
    # run left after a record still holds judgments
    profile_to_journal = app.tables.add(ShardedTable(
        app, name=JOURNAL_TABLE, beacon=app.tables.beacon, partitions=P, key_type=bytes,
        value_type=bytes, extra_topic_configs={
            "max.message.bytes": str(MAX_STATE_BYTES),
            "segment.bytes": str(CHANGELOG_SEGMENT_BYTES)},
    ))
    service.journal = TableView(profile_to_journal, service.stats)
    service.append_journal = settings.journal
    worker = Worker(app, service, settings,
                    {"documents": documents_topic, "judgments": judgments_topic,
                     "profiles": profiles_topic, "decisions": decisions_topic,
                     "dead-letters": dead_letters_topic, SHARD_TOPIC: shard_topic},
                    table)

    async def emit_dead(letters: Sequence[DeadLetter]) -> None:
        for dl in letters:
            log.warning("dead letter %s from %s[%d]@%d: %s", dl.reason, dl.topic, dl.partition,
                        dl.offset, dl.message)
            data = dl.encode(service.dead_letter_bytes)
            if len(data) < len(dl.original) * 4 // 3:
                log.warning("dead letter %s from %s[%d]@%d carries its input clipped (%d "
                            "bytes, over the dead-letters topic's limit)", dl.reason, dl.topic,
                            dl.partition, dl.offset, len(dl.original))
            await dead_letters_topic.send(key=dl.reason.encode(), value=data)

    async def emit_review_dead(letters: Sequence[DeadLetter]) -> None:
        count_dead(service.stats, letters)  # the service counts its own; the reviews' here
        await emit_dead(letters)

    busy = worker.busy  # the topics whose agent is inside a batch (the tail watch's)
    reviews = review_mode.attach(app, settings, topic, documents_topic, profiles_topic, table,
                                 emit_review_dead, busy)
    worker.reviews = reviews
    # a standing profile may not take a running review's name (nor a review a profile's):
    # both tables are co-partitioned by name, so a spec's shard holds both here
    service.reviews = review_mode.ReviewNames(reviews.table)

    async def complete(msgs: list[InputMessage],
                       recovered: list[tuple[str, int, int]]) -> list[InputMessage]:
        """``msgs`` with the messages the consumer skipped before them put back in order
        (their positions added to the agent's own ``recovered``, for :func:`ack_recovered`
        once the batch is processed).

        Faust's consumer can drop a message without a rebalance (seen: one judgment of
        1,000 never reached a replacement worker, whose next message was the one after
        it, and Faust committed past it). Offsets of one partition must arrive one by
        one; the missing ones (after the last one seen, or after the committed offset
        for the first message after an assignment) are read back with a plain consumer
        and processed in their place, so the partition order (which learning depends
        on) is kept. What cannot be read back is logged and counted.
        """
        seen: set[tuple[str, int, int]] = set()
        unique = []
        for m in msgs:  # Faust sometimes hands the same offset twice in a row
            if m.offset >= 0:
                key = (m.topic, m.partition, m.offset)
                if key in seen:
                    service.stats["offsets_repeated"] += 1
                    continue
                seen.add(key)
            unique.append(m)
        msgs = unique
        committed = getattr(app.consumer, "_committed_offset", {})
        unknown: set[tuple[str, int]] = set()
        for m in msgs:
            if m.offset >= 0:
                off = committed.get(TP(m.topic, m.partition))
                if off is not None and off >= 0:
                    service.expect(m.topic, m.partition, off)
                elif service.last_offset(m.topic, m.partition) is None:
                    unknown.add((m.topic, m.partition))
        if unknown and app.conf.consumer_auto_offset_reset == "earliest":
            # No committed offset known here: the group's start on the partition is its
            # commit on the broker or, never committed, the log's first offset. Faust can
            # drop the first records it fetched after an assignment, which no offset seen
            # would show (docs/streaming.md finding 15: a shard partition's head; the
            # seventh session: 24 messages at the head of a documents partition). Asked
            # at the assignment already (:func:`prefetch_starts`); asked now only if that
            # failed or the partition was not in it.
            starts: dict[tuple[str, int], int] = {}
            for lookup in {id(f): f for tp in unknown if (f := start_lookups.get(tp))}.values():
                with contextlib.suppress(Exception):  # logged by the lookup; asked again below
                    starts.update(await asyncio.shield(lookup))
            rest = sorted(tp for tp in unknown if tp not in starts)
            if rest:
                try:
                    starts.update(await asyncio.get_running_loop().run_in_executor(
                        None, start_offsets, settings, rest))
                except Exception as exc:  # the broker away: no expectation, as before
                    log.warning("could not read the start offsets of %s: %s", rest, exc)
            for (t, p), off in starts.items():
                if (t, p) in unknown:
                    service.expect(t, p, off)
        gaps = service.gaps(msgs)
        if gaps:
            log.warning("consumer skipped %s; reading them back",
                        ", ".join(f"{t}[{p}] {a}..{b - 1}" for t, p, a, b in gaps))
            try:
                got = await asyncio.get_running_loop().run_in_executor(
                    None, read_offsets, settings, gaps)
            except Exception as exc:
                # the broker away or slow: nothing is acknowledged, so the commit waits
                # below the gap and the tail watch has the partition delivered again
                log.error("could not read back skipped offsets: %s", exc)
                got = None
            if got is not None:
                service.stats["offsets_recovered"] += len(got)
                msgs = sorted(msgs + [InputMessage(v, t, p, o, k) for t, p, o, k, v in got],
                              key=lambda m: (m.topic, m.partition, m.offset))
                recovered.extend((t, p, o) for t, p, o, _, _ in got)
                # read to the end, so an offset not returned is not in the log (retention):
                # nothing to apply, but the commit must be able to pass it
                held = {(t, p, o) for t, p, o, _, _ in got}
                absent = [(t, p, o) for t, p, a, b in gaps for o in range(a, b)
                          if (t, p, o) not in held]
                if absent:
                    log.warning("%d skipped offsets are no longer in the log: %s", len(absent),
                                ", ".join(f"{t}[{p}]@{o}" for t, p, o in absent[:10]))
                    service.stats["offsets_absent"] += len(absent)
                    recovered.extend(absent)
        service.observe(msgs)
        return msgs

    def ack_recovered(recovered: list[tuple[str, int, int]]) -> None:
        """Acknowledge the read-back messages to Faust's consumer once processed (and the
        skipped offsets the log no longer holds): it never delivered them, and its commit
        would otherwise wait for them forever (seen: a partition's lag stuck at 200 after
        one skipped message). No gap of Faust's covers them: see
        :func:`gaps_left_to_the_agents`."""
        from faust.types import Message

        consumer = app.consumer
        generation = app.consumer_generation_id
        while recovered:  # (the consumer's ack refuses an offset it already holds)
            t, p, o = recovered.pop()
            m = Message(t, p, o, 0.0, 0, None, None, None, None, generation_id=generation)
            _PROCESSED.add(m)
            consumer._unacked_messages.add(m)  # type: ignore[attr-defined]  # private
            consumer.ack(m)

    @app.on_partitions_revoked.connect  # type: ignore[arg-type]
    async def forget_offsets(sender: Any, revoked: Any, **kwargs: Any) -> None:
        worker.between_assignments = True  # (Faust's eager protocol revokes every partition)
        service.forget_offsets()  # the next owner of a partition goes on from there
        tails.reset()
        start_lookups.clear()

    #: the store of recent documents misses what the group scored while this worker held
    #: no shard (a hot standby: nothing is routed to it and no copy reaches it); set at
    #: such an assignment, the store is filled again when shards come (``refill``)
    missed = [False]
    refill: list[asyncio.Future[None] | None] = [None]

    @app.on_partitions_assigned.connect  # type: ignore[arg-type]
    async def refill_documents(sender: Any, assigned: Any, **kwargs: Any) -> None:
        """A worker that held no shard and is given some (a hot standby taking over)
        reads the recent documents back from the documents topic, as at its start
        (:mod:`sift.agents.restore`): judgments of documents scored while it held
        nothing were dead-lettered ``unknown_document`` (fifty-fourth session's audit).
        The reading runs in a thread, the storing in slices on the loop; the judgments
        and specs agents wait for it."""
        changelog = profile_to_state.changelog_topic.get_topic_name()
        if not any(tp.topic == changelog for tp in assigned):
            missed[0] = True
        elif missed[0]:
            missed[0] = False
            # the documents read back are older than those the agents store meanwhile:
            # they go before them in the store, or the refill evicted those first
            at = service.store.reserve(REFILL_POSITIONS)
            # after one under way (shards given, taken, given again while it read: it
            # read only up to where the group was when it began)
            refill[0] = asyncio.ensure_future(refill_store(at, after=refill[0]))

    async def refill_store(at: int, *, after: asyncio.Future[None] | None = None) -> None:
        from sift.agents.restore import read_recent_documents
        from sift.kafkaclient import KafkaClientError

        if after is not None and not after.done():
            await asyncio.wait([after])  # (it catches its own errors)
        t0 = time.monotonic()
        loop = asyncio.get_running_loop()
        stored = 0
        try:
            # only what the group committed since the last read back (at the start, or
            # a refill before): none after a start whose first assignment was empty
            read = functools.partial(read_recent_documents, settings, service,
                                     since=dict(service.restored_to))
            docs, messages, tops = await loop.run_in_executor(None, read)
            for a in range(0, len(docs), REFILL_SLICE):  # the loop serves others in between
                stored += service.restore_recent(docs[a:a + REFILL_SLICE], at=at + a)
                await asyncio.sleep(0)
            service.restored_to = {**service.restored_to, **tops}
        except Exception as exc:  # the broker unreadable, or what no check foresaw: say so
            service.stats["store_refill_failures"] += 1
            why = str(exc) if isinstance(exc, KafkaClientError) else f"{type(exc).__name__}: {exc}"
            log.warning("could not read back the recent documents for the shards taken "
                        "over (%s; %d stored): judgments of documents scored before will "
                        "be dead-lettered unknown_document unless they carry the text",
                        why, stored)
            return
        service.stats["store_refills"] += 1
        log.info("restored %d recent documents from %d messages for the shards taken over "
                 "after holding none, in %.1f s", stored, messages, time.monotonic() - t0)

    given_up: list[asyncio.Future[None] | None] = [None]  # the refill no longer waited for

    async def refilled() -> None:
        """Wait for a refill of the document store under way (see refill_documents): the
        judgments name their documents by id, and so may a profile spec's positives. At
        most ``REFILL_WAIT_S``: the agents' batches hold a rebalance or a stop until
        they end, and a read from a broker that answers slowly can take minutes (its
        timeouts); after that the judgments go on without it (those of documents not
        read back yet are dead-lettered ``unknown_document``, as without a refill)."""
        pending = refill[0]
        if pending is None or pending.done() or pending is given_up[0]:
            return
        try:  # (the refill catches its own errors)
            await asyncio.wait_for(asyncio.shield(pending), REFILL_WAIT_S)
        except TimeoutError:
            given_up[0] = pending
            service.stats["store_refill_waits_cut"] += 1
            log.warning("the document store's refill still reads after %g s: judgments and "
                        "profile specs go on without waiting for it", REFILL_WAIT_S)

    #: the start offsets of the input partitions assigned, being asked of the broker
    start_lookups: dict[tuple[str, int], asyncio.Future[dict[tuple[str, int], int]]] = {}

    @app.on_partitions_assigned.connect  # type: ignore[arg-type]
    async def prefetch_starts(sender: Any, assigned: Any, **kwargs: Any) -> None:
        """Ask the broker where the group starts on each input partition assigned, in the
        background, as soon as the partitions are assigned: the first batch of a partition
        with no commit known here needs it (:func:`complete`), and asking then, with
        kafka-python's synchronous clients, held that batch up for about half a second
        (a fresh worker's first documents on each partition; docs/streaming.md finding
        20). Cleared when partitions are revoked."""
        worker.between_assignments = False
        if app.conf.consumer_auto_offset_reset != "earliest":
            return
        tps = sorted({(tp.topic, tp.partition) for tp in assigned if tp.topic in inputs})
        start_lookups.clear()
        if not tps:
            return
        lookup = asyncio.get_running_loop().run_in_executor(None, start_offsets, settings, tps)

        def retrieved(f: asyncio.Future[Any]) -> None:
            if not f.cancelled() and f.exception() is not None:
                log.warning("could not read the start offsets of %s at their assignment "
                            "(asked again at their first message): %s", tps, f.exception())

        lookup.add_done_callback(retrieved)
        for tp in tps:
            start_lookups[tp] = lookup

    def known_start(topic: str, partition: int) -> int | None:
        """The group's start on a partition as asked at its assignment, if answered."""
        lookup = start_lookups.get((topic, partition))
        if lookup is None or not lookup.done() or lookup.cancelled() or lookup.exception():
            return None
        return lookup.result().get((topic, partition))

    inputs = {settings.topic(t) for t in ("documents", "judgments", "profiles", SHARD_TOPIC)}
    gaps_left_to_the_agents(inputs)
    tails = TailWatch(stall_s=TAIL_STALL_S, idle_stall_s=TAIL_IDLE_STALL_S)

    def keep_going_here(name: str) -> Callable[[Callable[[], Awaitable[None]]],
                                               Callable[[], Awaitable[None]]]:
        """The worker's periodic tasks: a failure is counted and logged, never fatal."""
        return lambda fn: keep_going(name, fn, service.stats)

    @app.timer(interval=TAIL_CHECK_INTERVAL)  # type: ignore[untyped-decorator]
    @keep_going_here("seek_lost_tails")
    async def seek_lost_tails() -> None:
        """Seek back a partition whose last messages never reached its agent (see
        :mod:`sift.agents.tails`): they are fetched and delivered again."""
        consumer = app.consumer
        if not (app.flow_control.is_active() and getattr(consumer, "flow_active", True)) \
                or app.in_recovery:
            # a rebalance or a stop: offsets are being reset anyway; the tables' recovery:
            # Faust holds the input partitions until it ends, which is no lost tail
            tails.reset()
            return
        pressed = input_held_up(app, inputs)
        committed = getattr(consumer, "_committed_offset", {})
        acked = getattr(consumer, "_acked", {})
        try:
            views = [PartitionView(tp.topic, tp.partition, consumer.highwater(tp),
                                   service.last_offset(tp.topic, tp.partition),
                                   committed.get(tp), min(acked.get(tp) or (), default=None),
                                   known_start(tp.topic, tp.partition), tp.topic in busy,
                                   busy.finished(tp.topic), bool(busy), busy.finished_all(),
                                   pressed)
                     for tp in consumer.assignment() if tp.topic in inputs]
        except Exception as exc:  # the consumer not started or being replaced
            log.debug("tail check skipped: %s", exc)
            return
        waits = tails.waits
        for topic, partition, offset in tails.check(views, time.monotonic(),
                                                    held=functools.partial(held_in_worker, app)):
            service.stats["tail_seeks"] += 1
            log.warning("%s[%d]: offset %d is on the broker but never reached this worker "
                        "(or was never acknowledged); seeking back to it", topic, partition,
                        offset)
            await consumer.seek(TP(topic, partition), offset)
        service.stats["tail_waits"] += tails.waits - waits

    @app.agent(documents_topic)
    async def route_documents(stream: faust.StreamT[Any]) -> None:
        recovered: list[tuple[str, int, int]] = []
        stats = service.stats
        done: float | None = None
        async for batch in take_events(stream, settings.batch_size, within=settings.batch_timeout,
                                           busy=busy):
            # where the agent's time goes: waiting for a batch (Faust's reading and
            # per-message machinery, or no input) against processing it; the wait for
            # the first batch (start-up, recovery) is left out
            start = time.monotonic()
            everything = [to_message(e) for e in batch]
            # in steps of at most SIFT_BATCH_BYTES of messages, as if taken so: 256
            # messages of 100 documents are 25,600 documents, whose working arrays
            # outgrow the caches (docs/streaming.md, fifteenth session)
            # the decisions of each step are sent without waiting for the broker, so the
            # next step is routed and scored during the round trips; the batch is
            # acknowledged (by Faust, when this body ends) after all are delivered
            in_flight: list[asyncio.Future[Any]] = []
            for step in byte_steps(everything, settings.batch_bytes):
                events = batch[step]
                t = time.monotonic()
                completed = await complete(everything[step], recovered)
                stats["document_batch_complete_us"] += int(1e6 * (time.monotonic() - t))
                # the messages the consumer skipped, read back, can make a step many
                # times its size (seen at a worker's start on a backlog: 278 messages of
                # a partition's head read back at its first step): in steps again
                for part in byte_steps(completed, settings.batch_bytes):
                    t_routed = time.monotonic()
                    result = guarded(service.route, completed[part], stats=service.stats)
                    stats["document_batch_route_us"] += int(1e6 * (time.monotonic()
                                                                   - t_routed))
                    await reviews.route_documents(result.with_metadata)
                    await emit_dead(result.dead_letters)
                    in_flight += await fan_out(result)
                stats["document_batches"] += 1
                stats["document_batch_messages"] += len(events)
            t = time.monotonic()
            await asyncio.gather(*in_flight)
            stats["document_batch_publish_us"] += int(1e6 * (time.monotonic() - t))
            now = time.time()  # the decisions of the shards held here are on the broker
            worker.metrics.document_latency.observe_many(
                max(now - e.message.timestamp, 0.0) for e in batch if e.message.timestamp)
            ack_recovered(recovered)
            mark_processed(batch)
            if done is not None:
                stats["document_batch_wait_us"] += int(1e6 * (start - done))
            done = time.monotonic()
            stats["document_batch_work_us"] += int(1e6 * (done - start))
            worker.metrics.document_batch.observe(done - start)

    shard_topic_name = settings.topic(SHARD_TOPIC)

    def table_partitions() -> tuple[set[int], set[int]] | None:
        """The partitions this worker owns of the shard topic and of the profile table's
        changelog, once no rebalance is under way (flow active) and the table is
        recovered; ``None`` while that is not known (a rebalance, the table's recovery,
        no consumer yet or any more).

        Flow alone is not enough: Faust resumes it while it restores the table from the
        changelog, and a batch taken before the rebalance was then scored against the
        profiles restored so far (two workers starting on a backlog lost up to 1 % of
        their (document, profile) pairs, docs/streaming.md finding 15)."""
        if not app.flow_control.is_active() or app.in_recovery:
            return None
        try:
            # the consumer's assignment, not the assignor's: after a rebalance the
            # assignor of a worker was seen still listing every partition (finding 15)
            actives = app.consumer.assignment()
            changelog = profile_to_state.changelog_topic.get_topic_name()
        except (AttributeError, RuntimeError, NotReady):
            return None
        return ({tp.partition for tp in actives if tp.topic == shard_topic_name},
                {tp.partition for tp in actives if tp.topic == changelog})

    def shards_held() -> set[int] | None:
        """The shards whose profiles this worker holds and scores: it owns their shard
        topic's and table's partitions (:func:`table_partitions`); ``None`` while not known."""
        parts = table_partitions()
        return None if parts is None else parts[0] & parts[1]

    def shards_here() -> set[int]:
        """The shards this worker may score its routed documents for itself
        (:func:`shards_held`); none with ``SIFT_SCORE_HERE=false`` or while not known:
        each shard's copy then goes through the shard topic to its partition's owner."""
        held = shards_held() if settings.score_here else None
        return held or set()

    async def fan_out(result: RouteResult) -> list[asyncio.Future[Any]]:
        """Score the routed documents for the shards held here and send them to the shard
        topic for the others. Scoring here is what the shard's owner would do with the
        payload (same profiles, same vectors), minus an internal message per shard.
        Returns the futures of the decisions' delivery: the documents' messages are
        acknowledged only after they are done."""
        sent: list[asyncio.Future[Any]] = []
        for i, (ids, X) in enumerate(result.parts):
            counts = result.counts[i] if len(result.counts) == len(result.parts) else None
            # which shards are here and their scoring, with no await in between: a
            # rebalance cannot take a shard away between the two; scored whole, sent in
            # chunks (the shard topic's messages stay under the broker's 1 MiB)
            here = shards_here()
            decisions: list[Decision] = []
            if here:
                try:
                    decisions = service.score_here(sorted(here), ids, X, table)
                except Exception:  # a bug: the shard agent tries it (and dead-letters it)
                    log.exception("scoring here failed; sending the batch to the shard topic")
                    service.stats["scored_here_failed"] += 1
                    here = set()
            elsewhere = [p for p in range(P) if p not in here]
            # one copy for all the shards elsewhere, to the first of them, as term
            # counts; its owner scores those it holds and sends the rest on
            # (Service.score_copies)
            for p, payload in service.copies(ids, X, counts, elsewhere,
                                             one_copy=settings.score_here):
                await shard_topic.send(value=payload, partition=p)
            if decisions:
                sent += await send_records(decisions_topic, [(d.profile.encode(), encode(d))
                                                             for d in decisions])
        return sent

    batched_sends = settings.processing_guarantee == "at_least_once"
    partition_cache: dict[str, tuple[frozenset[int] | None, dict[bytes, int]]] = {}

    async def send_records(topic: faust.TopicT,
                           records: list[tuple[bytes, bytes]]) -> list[asyncio.Future[Any]]:
        """Send keyed records; the futures of their delivery (done already under
        exactly-once processing, where each record is sent and awaited through Faust).

        Decisions are most of what a worker writes (one per document and matching
        profile). Faust's ``topic.send`` costs tens of microseconds of its own machinery
        per record; here the records go to aiokafka as one record batch per partition
        (partitioned by key exactly as ``send`` would), and the caller's message is
        acknowledged only after their delivery (at least once). Under exactly-once
        processing the records go through Faust's transactional producer instead.
        """
        if not records:
            return []
        if not batched_sends:
            for key, value in records:
                await topic.send(key=key, value=value)
            return []
        producer = app.producer._ensure_producer()  # type: ignore[attr-defined]  # private
        name = topic.get_topic_name()
        await producer.client._wait_on_metadata(name)
        # the partition of a key (a profile name) is fixed while the topic's partitions
        # are: aiokafka's partitioner (murmur2 in Python) runs once per key, not per record
        parts = frozenset(producer._metadata.partitions_for_topic(name) or ())
        known, cache = partition_cache.get(name, (None, {}))
        if known != parts or len(cache) > 100_000:
            cache = {}
            partition_cache[name] = (parts, cache)
        by_partition: dict[int, list[tuple[bytes, bytes]]] = {}
        for key, value in records:
            part = cache.get(key)
            if part is None:
                part = cache[key] = producer._partition(name, None, None, None, key, value)
            by_partition.setdefault(part, []).append((key, value))
        futures = []
        for part, recs in by_partition.items():
            batch = producer.create_batch()
            for key, value in recs:
                if batch.append(timestamp=None, key=key, value=value) is None:
                    batch.close()
                    futures.append(await producer.send_batch(batch, name, partition=part))
                    batch = producer.create_batch()
                    if batch.append(timestamp=None, key=key, value=value) is None:
                        raise ServiceError(f"a record of {len(value)} bytes does not fit "
                                           "a producer batch")
            batch.close()
            futures.append(await producer.send_batch(batch, name, partition=part))
        return futures

    @app.agent(shard_topic)
    async def score_documents(stream: faust.StreamT[Any]) -> None:
        # taken in batches: a worker holding several shards gets each routed batch once
        # per shard, and the copies are scored as one (Service.score_copies)
        recovered: list[tuple[str, int, int]] = []
        async for batch in take_events(stream, settings.batch_size, within=settings.batch_timeout,
                                           busy=busy):
            start = time.monotonic()
            # the decisions of each payload are sent without waiting for the broker, so
            # the next payload is scored during the round trip (as the router does); the
            # batch is acknowledged after all of them are delivered
            in_flight: list[asyncio.Future[Any]] = []
            for copies in same_payloads(await complete([to_message(e) for e in batch], recovered)):
                try:
                    # the shards held here, and their scoring, with no await in between
                    here = shards_here()
                    scoring = service.score_copies(copies, table, here)
                except RecordError as err:  # a malformed payload (another producer's)
                    letters = [dead_letter(m, err) for m in copies]
                    count_dead(service.stats, letters)
                    await emit_dead(letters)
                    continue
                except Exception as exc:  # a bug must not stop the stream: dead-letter it
                    log.exception("scoring failed")
                    letters = [internal_error(m, exc) for m in copies]
                    count_dead(service.stats, letters)
                    await emit_dead(letters)
                    continue
                if scoring.forward is not None:  # shards for which this is the wrong worker
                    part, payload = scoring.forward
                    await shard_topic.send(value=payload, partition=part)
                in_flight += await send_records(decisions_topic, [(d.profile.encode(), encode(d))
                                                                  for d in scoring.decisions])
            await asyncio.gather(*in_flight)
            ack_recovered(recovered)
            mark_processed(batch)
            worker.metrics.copy_batch.observe(time.monotonic() - start)

    @app.agent(profiles_topic)
    async def apply_specs(stream: faust.StreamT[Any]) -> None:
        recovered: list[tuple[str, int, int]] = []
        async for events in take_events(stream, 8, within=settings.batch_timeout, busy=busy):
            await refilled()  # a spec's positives may name recent documents by id
            # review specs (any spec with a "mode") and standing ones in partition order,
            # a run of one kind at a time: "delete profile x, start review x" in one batch
            # was refused when the review specs went first (fiftieth session, item 80)
            msgs = await complete([to_message(e) for e in events], recovered)
            for run in runs_of_kind(msgs, reviews.service.is_review_spec):
                standing = await reviews.take_specs(run)
                if standing:
                    result = guarded(service.apply_specs, standing, table, stats=service.stats)
                    await settle()
                    await emit_forwards(result)
            ack_recovered(recovered)
            mark_processed(events)

    @app.agent(judgments_topic)
    async def apply_judgments(stream: faust.StreamT[Any]) -> None:
        recovered: list[tuple[str, int, int]] = []  # read back, to acknowledge when done
        # larger batches: more judgments of one profile share a re-threshold and a write
        async for events in take_events(stream, settings.judgment_batch_size,
                                        within=settings.judgment_batch_timeout, busy=busy):
            await refilled()
            start = time.monotonic()
            msgs = await reviews.take_judgments(await complete([to_message(e) for e in events],
                                                               recovered))
            result = guarded(service.apply_judgments, msgs, table, stats=service.stats)
            await settle()
            await emit_forwards(result)
            ack_recovered(recovered)
            mark_processed(events)
            worker.metrics.judgment_batch.observe(time.monotonic() - start)

    async def settle() -> None:
        """The batch's table writes on the broker before the batch is acknowledged."""
        try:
            await table.settle()
            if isinstance(service.journal, TableView):
                await service.journal.settle()
        except Exception as exc:  # e.g. a record over max.message.bytes: say so, go on
            service.stats["state_write_failed"] += 1
            service.rewrite_records()  # the next saves are whole records: see there
            log.error("a profile state write did not reach the changelog (%s: %s); the "
                      "in-memory state is ahead of the changelog until the profile's next "
                      "write", type(exc).__name__, exc)

    async def emit_forwards(result: Any) -> None:
        await emit_dead(result.dead_letters)
        for f in result.forwards:
            await app.topic(f.topic, key_serializer="raw", value_serializer="raw").send(
                key=f.key, value=f.value, partition=f.partition)

    stats_writer = OneAtATime(worker.write_stats)
    trimmer = OneAtATime(release_free_memory)

    @app.timer(interval=settings.stats_interval)  # type: ignore[untyped-decorator]
    @keep_going_here("write_stats")
    async def write_stats() -> None:
        await stats_writer.tick()

    @app.timer(interval=TRIM_INTERVAL)  # type: ignore[untyped-decorator]
    @keep_going_here("trim_memory")
    async def trim_memory() -> None:
        await trimmer.tick()

    @app.timer(interval=LOAD_INTERVAL)  # type: ignore[untyped-decorator]
    @keep_going_here("load_profiles_held")
    async def load_profiles_held() -> None:
        """Load the profiles of the shards held here from the recovered table. Without it a
        restarted worker decoded them at its first document, and until then its log line,
        /sift/stats and sift_worker_profiles said it held none (forty-third session's
        audit); a no-op pass over the table's keys when nothing changed. Then profiles of
        shards that moved to another worker are let go (:meth:`Service.release_shards`:
        until the fifty-fourth session they stayed in memory and in the worker's count)."""
        parts = table_partitions()
        if parts is None:
            return
        # released by the table's partitions alone: a judgment for a shard whose table
        # partition is here still needs its profiles, whoever owns its shard topic's
        released = service.release_shards(parts[1])
        if released:
            log.info("%d profiles of shards now held elsewhere released", len(released))
        held = parts[0] & parts[1]
        if held:
            service.sync_shards(sorted(held), table)

    @app.timer(interval=10.0)  # type: ignore[untyped-decorator]
    @keep_going_here("log_progress")
    async def log_progress() -> None:
        s, r = service.stats, reviews.service.stats
        log.info("documents %d, decisions %d, judgments %d (+%d duplicate, %d repeated, %d "
                 "corrections), dead letters %d, profiles here %d, review judgments %d",
                 s["documents"], s["decisions"], s["judgments"], s["judgments_duplicate"],
                 s["judgments_repeated"], s["judgments_corrected"], s["dead_letters"],
                 sum(len(b) for b in service._banks.values()), r["review_judgments"])

    @app.on_before_shutdown.connect  # type: ignore[arg-type]  # mode's signal types are narrower
    async def _final_stats(app: faust.App, **kwargs: Any) -> None:
        worker.write_stats()

    if web:
        def refused(web: Any, request: Any) -> Any:
            """A 403 for a ``Host`` this worker does not answer (DNS rebinding: sift.hosts)."""
            name = host_refused(request.headers.get("Host"), settings)
            return None if name is None else web.json({"error": refusal(clip(name))}, status=403)

        @app.page("/sift/stats")
        async def stats_page(web: Any, request: Any) -> Any:
            deny = refused(web, request)  # (a response is a mapping: not tested for truth)
            return deny if deny is not None else web.json(worker.stats())

        @app.page("/metrics")
        async def metrics_page(web: Any, request: Any) -> Any:
            deny = refused(web, request)
            # aiohttp takes no charset in content_type: the whole header goes in headers
            return deny if deny is not None else web.bytes(
                worker.metrics_text().encode(), headers={"Content-Type": CONTENT_TYPE})

    return worker
