"""The Faust agents with ``agent.test_context()`` (no broker): decode, call, emit."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any
from unittest.mock import AsyncMock, Mock

import faust
import numpy as np
import orjson
import pytest
from faust.types import TP

from sift.agents.app import TIMER_ERROR_LOG_INTERVAL, OneAtATime, create_app, keep_going
from sift.agents.keys import key_digests
from sift.agents.service import (
    VECTOR_BATCH_MAGIC_COUNTS,
    Service,
    read_vector_batch,
    shard_of,
)
from sift.settings import Settings
from tests.agents.offline import TRAIN, agent, offline_worker, training_set


@pytest.fixture
def worker(tmp_path: Any) -> Any:
    return offline_worker(str(tmp_path))


def test_the_worker_vectorizes_as_its_settings_say(tmp_path: Any) -> None:
    """``SIFT_TRUNCATE`` and ``SIFT_CHARS`` reach the vectorizer the worker fits on its IDF
    corpus (as ``sift replay --truncate`` and ``--chars``); 0 keeps tokens whole and
    vectorizes words only."""
    corpus = tmp_path / "idf.jsonl"
    corpus.write_bytes(b"".join(orjson.dumps({"id": f"t{i}", "text": t}) + b"\n"
                                for i, t in enumerate(TRAIN)))
    nnz = {}
    for cut, chars, expect in ((6, 0.4, 6), (0, 0.0, None)):
        settings = Settings(broker="kafka://127.0.0.1:1", app_id="sift-test", partitions=2,
                            data_dir=str(tmp_path / str(cut)), idf_corpus=str(corpus),
                            truncate=cut, chars=chars)
        w = create_app(settings)
        vec = w.service.training.vectorizer
        assert (vec.truncate, vec.chars) == (expect, chars)
        X = w.service.training.X
        assert X is not None
        nnz[chars] = X.nnz
    assert nnz[0.4] > 3 * nnz[0.0]  # the n-gram block


def test_the_worker_refuses_profiles_its_changelog_cannot_hold(worker: Any) -> None:
    """The worker's service dead-letters a profile whose state record the changelog
    topic could not take (its max.message.bytes, less room for the framing)."""
    from sift.agents.app import MAX_RECORD_BYTES, MAX_STATE_BYTES
    assert worker.service.max_record_bytes == MAX_RECORD_BYTES
    assert MAX_STATE_BYTES - 2**20 < MAX_RECORD_BYTES < MAX_STATE_BYTES
    assert worker.table.table.changelog_topic.config["max.message.bytes"] == str(MAX_STATE_BYTES)


def test_the_group_session_settings_reach_faust(tmp_path: Any) -> None:
    """``SIFT_SESSION_TIMEOUT`` and ``SIFT_HEARTBEAT_INTERVAL`` reach the consumer; the
    request timeout stays at Faust's 90 s unless the session is longer (Faust refuses a
    session timeout above the request timeout)."""
    training = training_set()
    for session, heartbeat, request in ((60.0, 3.0, 90.0), (10.0, 1.0, 90.0), (120.0, 5.0, 150.0)):
        settings = Settings(broker="kafka://127.0.0.1:1", app_id="sift-test", partitions=2,
                            data_dir=str(tmp_path / str(session)), session_timeout=session,
                            heartbeat_interval=heartbeat)
        conf = create_app(settings, training=training).app.conf
        assert (conf.broker_session_timeout, conf.broker_heartbeat_interval,
                conf.broker_request_timeout) == (session, heartbeat, request)



def test_the_web_server_listens_where_the_settings_say(tmp_path: Any) -> None:
    """Faust's ``web_host`` only names the server; it listened on ``web_bind``, every
    interface by default, so ``/metrics`` was open to the network with SIFT_WEB_HOST
    127.0.0.1."""
    training = training_set()
    for host in ("127.0.0.1", "0.0.0.0"):
        settings = Settings(broker="kafka://127.0.0.1:1", app_id="sift-test", partitions=2,
                            data_dir=str(tmp_path / host), web_host=host, web_port=6123)
        conf = create_app(settings, training=training, web=True).app.conf
        assert (conf.web_bind, conf.web_port, conf.web_enabled) == (host, 6123, True)

def test_documents_agent_fans_out_and_dead_letters(worker: Any) -> None:
    async def run() -> None:
        async with agent(worker, "route_documents").test_context() as a:
            await a.put(orjson.dumps({"documents": [{"id": "a", "text": "wheat"},
                                                    {"id": "b", "text": "oil"}]}))
            await a.put(b"not json")
            await asyncio.sleep(0.1)

    asyncio.run(run())
    # no shard is held here (no consumer): one copy for both shards, to the first
    shard_sends = worker.topics["shard-documents"].send.await_args_list
    assert [c.kwargs["partition"] for c in shard_sends] == [0]
    copy = shard_sends[0].kwargs["value"]
    # as term counts, which the receiver weighs back into the router's vectors exactly
    assert copy.startswith(VECTOR_BATCH_MAGIC_COUNTS)
    ids, X, shards = read_vector_batch(copy, worker.service.vectorizer)
    assert ids == ["a", "b"] and shards == [0, 1]
    want = worker.service.vectorizer.transform(["wheat", "oil"])
    assert np.array_equal(X.indices, want.indices) and np.array_equal(X.data, want.data)
    dead = worker.topics["dead-letters"].send.await_args_list
    assert [orjson.loads(c.kwargs["value"])["reason"] for c in dead] == ["bad_json"]


def test_specs_agent_writes_the_table(worker: Any) -> None:
    name = "wheat"
    part = shard_of(name, 2)

    async def run() -> None:
        async with agent(worker, "apply_specs").test_context() as a:
            await a.put(orjson.dumps({"profile": name, "query": "wheat", "positives": ["t0"]}),
                        key=name.encode(), partition=part)
            await asyncio.sleep(0.1)

    asyncio.run(run())
    assert name in worker.service.counters()["profiles"]
    assert worker.service.stats["profiles_created"] == 1
    (partition, key, value), _ = worker.table.table.send_changelog.call_args
    assert (partition, key) == (part, name.encode()) and value is worker.table[name]


async def create_profile(worker: Any, name: str, query: str) -> None:
    """A profile spec through the specs agent, on the profile's shard."""
    async with agent(worker, "apply_specs").test_context() as a:
        await a.put(orjson.dumps({"profile": name, "query": query}), key=name.encode(),
                    partition=shard_of(name, 2))
        await asyncio.sleep(0.1)


def test_judgments_agent_appends_to_the_journal_on_the_profiles_shard(worker: Any) -> None:
    """A batch of judgments goes to the profile's journal (its own table, the profile's
    shard as changelog partition); the state record is not rewritten for it, and a
    worker reading both tables ends with the same profile."""
    name = "wheat"
    part = shard_of(name, 2)

    async def run() -> None:
        await create_profile(worker, name, "wheat")
        async with agent(worker, "apply_judgments").test_context() as a:
            for i in range(3):
                await a.put(orjson.dumps({"id": f"j{i}", "doc_id": f"t{i}", "profile": name,
                                          "relevant": i != 1, "text": TRAIN[i]}),
                            key=name.encode(), partition=part)
            await asyncio.sleep(0.6)

    asyncio.run(run())
    assert worker.table.table.send_changelog.call_count == 1  # the profile's creation
    journal = worker.service.journal
    (partition, key, value), _ = journal.table.send_changelog.call_args
    assert (partition, key) == (part, name.encode()) and value is journal[name]
    assert worker.service.stats["journal_appends"] >= 1
    live = worker.service.entry(name, worker.table)
    fresh = Service(worker.service.training, n_shards=2, journal=dict(journal.items()))
    again = fresh.entry(name, dict(worker.table.items()))
    assert live is not None and again is not None and again.judged.digests().tolist() == key_digests(["j0", "j1", "j2"])
    assert orjson.dumps(again.profile.to_state()) == orjson.dumps(live.profile.to_state())


def metric(text: str, name: str) -> float:
    """The value of one sample line of a Prometheus text page (``name`` with its labels)."""
    lines = [line for line in text.splitlines() if line.startswith(name + " ")]
    assert len(lines) == 1, f"{name}: {lines}"
    return float(lines[0].split()[-1])


def test_metrics_page_reports_what_the_agents_did(worker: Any) -> None:
    """``GET /metrics`` (``sift worker --web``): the worker's counters as the service
    counts them, refusals by reason, the profiles it holds and one histogram observation
    per taken batch of each agent."""
    name = "wheat"
    part = shard_of(name, 2)
    empty = worker.metrics_text()
    assert metric(empty, "sift_worker_documents_total") == 0
    assert metric(empty, "sift_worker_document_batch_seconds_count") == 0

    async def run() -> None:
        await create_profile(worker, name, "wheat")
        async with agent(worker, "route_documents").test_context() as a:
            await a.put(orjson.dumps({"documents": [{"id": "a", "text": "wheat"},
                                                    {"id": "b", "text": "oil"}]}))
            await a.put(b"not json")
            await asyncio.sleep(0.1)
        async with agent(worker, "apply_judgments").test_context() as a:
            for _ in range(2):  # the second is the first again: skipped
                await a.put(orjson.dumps({"id": "j0", "doc_id": "t0", "profile": name,
                                          "relevant": True, "text": TRAIN[0]}),
                            key=name.encode(), partition=part)
            await a.put(orjson.dumps({"doc_id": "t1", "profile": "nobody", "relevant": True,
                                      "text": "x"}), key=b"nobody", partition=shard_of("nobody", 2))
            await asyncio.sleep(0.6)

    asyncio.run(run())
    text = worker.metrics_text()
    assert metric(text, "sift_worker_documents_total") == 2
    assert metric(text, "sift_worker_judgments_total") == 1
    assert metric(text, "sift_worker_judgments_duplicate_total") == 1
    assert metric(text, "sift_worker_profiles_created_total") == 1
    assert metric(text, 'sift_worker_dead_letters_total{reason="bad_json"}') == 1
    assert metric(text, 'sift_worker_dead_letters_total{reason="unknown_profile"}') == 1
    assert metric(text, "sift_worker_document_batch_seconds_count") >= 1
    assert metric(text, "sift_worker_document_latency_seconds_count") == 2  # each message
    assert metric(text, "sift_worker_judgment_batch_seconds_count") >= 1
    assert metric(text, "sift_worker_profiles") == 1
    assert metric(text, "sift_worker_resident_bytes") > 0
    # the main thread's CPU by part, as the service's cpu_*_us counters say (in seconds)
    stats = worker.service.stats
    assert stats["cpu_route_us"] > 0
    assert metric(text, 'sift_worker_cpu_seconds_total{part="route"}') == pytest.approx(
        stats["cpu_route_us"] / 1e6)
    # counters mirror the service's: a second page does not count anything twice
    assert metric(worker.metrics_text(), "sift_worker_documents_total") == 2
    assert text.endswith("\n") and "# TYPE sift_worker_document_batch_seconds histogram" in text
    assert metric(text, "sift_worker_periodic_task_failures_total") == 0
    stats["timer_errors"] += 2  # as keep_going counts a failed periodic task
    assert metric(worker.metrics_text(), "sift_worker_periodic_task_failures_total") == 2


@pytest.fixture
def deliveries(worker: Any, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Changelog writes as futures the test resolves (delivered, or failed)."""
    import types

    import faust.tables.base

    class Delivery(asyncio.Future):  # type: ignore[type-arg]
        message: Any

    out: list[Delivery] = []

    def send_changelog(self: Any, partition: Any, key: Any, value: Any, *a: Any, **k: Any) -> Any:
        fut = Delivery()
        fut.message = types.SimpleNamespace(partition=partition)
        out.append(fut)
        return fut

    monkeypatch.setattr(faust.tables.base.Collection, "send_changelog", send_changelog)
    del worker.table.table.send_changelog  # the fixture's Mock: use ShardedTable's again
    return out


def run_specs_batch(worker: Any, deliveries: list[Any], outcome: BaseException | None
                    ) -> dict[str, Any]:
    """One batch (a spec: a table write; a bad message: a dead letter); the emits counted
    before and after the write's delivery is resolved with ``outcome``."""
    dead = worker.topics["dead-letters"].send
    seen: dict[str, Any] = {}

    async def run() -> None:
        async with agent(worker, "apply_specs").test_context() as a:
            part = shard_of("wheat", 2)
            await a.put(orjson.dumps({"profile": "wheat", "query": "wheat"}),
                        key=b"wheat", partition=part)
            await a.put(b"not json", key=b"wheat", partition=part)
            for _ in range(50):
                if deliveries:
                    break
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.1)
            seen["writes"] = len(deliveries)
            seen["emitted_before_delivery"] = dead.await_count
            for fut in deliveries:
                if outcome is None:
                    fut.set_result(None)
                else:
                    fut.set_exception(outcome)
            await asyncio.sleep(0.1)
            seen["emitted_after_delivery"] = dead.await_count

    asyncio.run(run())
    return seen


def test_a_batch_is_not_done_before_its_table_writes_are_on_the_broker(
        worker: Any, deliveries: list[Any]) -> None:
    """The specs agent waits for the changelog write's delivery before it emits (and
    before its batch is acknowledged, which follows): Faust's own flush gives up after
    0.1 s per message, and a committed offset whose state write was still in flight was
    a lost judgment after a kill -9 (bug 10)."""
    seen = run_specs_batch(worker, deliveries, None)
    assert seen == {"writes": 1, "emitted_before_delivery": 0, "emitted_after_delivery": 1}
    assert worker.service.stats["state_write_failed"] == 0


def test_a_failed_table_write_is_counted_and_the_agent_goes_on(
        worker: Any, deliveries: list[Any]) -> None:
    seen = run_specs_batch(worker, deliveries, ConnectionError("broker gone"))
    assert seen == {"writes": 1, "emitted_before_delivery": 0, "emitted_after_delivery": 1}
    assert worker.service.stats["state_write_failed"] == 1


def test_settle_waits_for_every_write_and_raises_a_failed_one(worker: Any) -> None:
    table = worker.table.table

    async def run() -> None:
        loop = asyncio.get_running_loop()
        a, b = loop.create_future(), loop.create_future()
        table.__dict__["_sift_unsettled"] = [a, b]
        waiter = asyncio.ensure_future(worker.table.settle())
        a.set_result(None)
        await asyncio.sleep(0.01)
        assert not waiter.done()
        b.set_exception(ConnectionError("broker gone"))
        with pytest.raises(ConnectionError, match="broker gone"):
            await waiter
        assert table.__dict__["_sift_unsettled"] == []
        await worker.table.settle()  # nothing pending: returns at once

    asyncio.run(run())


def test_only_messages_processed_in_the_current_generation_become_committable(
        worker: Any) -> None:
    """Faust acknowledges the events a stream skips while flow is suspended (rebalance,
    shutdown) or that come from an older generation; those must not be committed."""
    from faust.types import TP, Message

    app = worker.app
    consumer = app.consumer
    tp = TP("sift.judgments", 0)
    app.topics.acks_enabled_for = lambda topic: True  # no subscription without a broker

    def message(offset: int, generation: int) -> Any:
        m = Message(tp.topic, tp.partition, offset, 0.0, 0, None, b"k", b"v", None,
                    generation_id=generation)
        consumer._unacked_messages.add(m)
        return m

    gen = app.consumer_generation_id
    ok, old, suspended = message(0, gen), message(1, gen - 1), message(2, gen)
    assert consumer.ack(ok) is True
    assert consumer.ack(old) is False
    app.flow_control.suspend()
    assert consumer.ack(suspended) is False
    app.flow_control.resume()
    assert list(consumer._acked[tp]) == [0]  # only the processed one can be committed
    assert all(m.acked for m in (ok, old, suspended))  # none keeps shutdown waiting
    assert not consumer._unacked_messages
    assert consumer._new_offset(tp) == 1


def test_a_batch_an_agent_finished_while_flow_is_suspended_is_committable(
        worker: Any) -> None:
    """A batch completed during a rebalance or a clean stop (the agent marked it) is
    committed; one acknowledged without the mark (a cancelled batch) or from an older
    generation is not, marked or not."""
    from faust.types import TP, Message

    from sift.agents.app import mark_processed

    app = worker.app
    consumer = app.consumer
    tp = TP("sift.judgments", 1)
    app.topics.acks_enabled_for = lambda topic: True

    def event(offset: int, generation: int) -> Any:
        m = Message(tp.topic, tp.partition, offset, 0.0, 0, None, b"k", b"v", None,
                    generation_id=generation)
        consumer._unacked_messages.add(m)
        return Mock(message=m)

    gen = app.consumer_generation_id
    done, cancelled, stale = event(0, gen), event(1, gen), event(2, gen - 1)
    mark_processed([done, stale])
    app.flow_control.suspend()
    try:
        assert consumer.ack(done.message) is True
        assert consumer.ack(cancelled.message) is False
        assert consumer.ack(stale.message) is False
    finally:
        app.flow_control.resume()
    assert list(consumer._acked[tp]) == [0]
    assert not consumer._unacked_messages


def read_back_from(monkeypatch: pytest.MonkeyPatch, worker: Any, key: bytes | None,
                   value: Any) -> list[Any]:
    """Serve the agents' read-back of skipped offsets (``value(offset)`` each) without a
    broker; the ranges asked for are appended to the list returned."""
    import sift.agents.app as app_module

    asked: list[Any] = []

    def read_offsets(settings: Any, ranges: Any) -> list[Any]:
        asked.extend(ranges)
        return [(t, p, o, key, value(o)) for t, p, a, b in ranges for o in range(a, b)]

    monkeypatch.setattr(app_module, "read_offsets", read_offsets)
    worker.app.topics.acks_enabled_for = lambda topic: True  # no subscription here
    return asked


async def create_wheat(worker: Any, part: int) -> None:
    async with agent(worker, "apply_specs").test_context() as a:
        await a.put(orjson.dumps({"profile": "wheat", "query": "wheat"}), key=b"wheat",
                    partition=part)
        await asyncio.sleep(0.2)


def test_skipped_judgments_are_read_back_and_applied_in_partition_order(
        worker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The consumer skips offset 2 (seen with Faust): the agent reads it back and learns
    0, 1, 2, 3 in that order, as an uninterrupted stream would."""
    part = shard_of("wheat", 2)
    judgments_topic = worker.topics["judgments"].get_topic_name()

    def judgment(i: int) -> bytes:
        return orjson.dumps({"id": f"j{i}", "doc_id": f"d{i}", "profile": "wheat",
                             "relevant": i % 2 == 0, "text": TRAIN[i % 5]})

    asked = read_back_from(monkeypatch, worker, b"wheat", judgment)

    async def run() -> None:
        await create_wheat(worker, part)
        async with agent(worker, "apply_judgments").test_context() as a:
            for i in (0, 1, 1, 3):  # 1 twice in a row, as Faust sometimes delivers
                a.sent_offset = i  # the test wrapper's next offset
                await a.put(judgment(i), key=b"wheat", partition=part)
            await asyncio.sleep(0.6)

    asyncio.run(run())
    assert asked == [(judgments_topic, part, 2, 3)]
    # Faust never delivered offset 2: acknowledged by the agent once applied, so its
    # commits can pass it
    assert 2 in worker.app.consumer._acked[TP(judgments_topic, part)]
    entry = worker.service.entry("wheat", worker.table)
    assert entry.judged.digests().tolist() == key_digests(["j0", "j1", "j2", "j3"])
    assert worker.service.stats["offsets_recovered"] == 1
    assert worker.service.stats["offset_gaps"] == 0
    assert worker.service.stats["offsets_repeated"] + worker.service.stats[
        "judgments_duplicate"] == 1  # the repeat dropped (same batch) or skipped by its key


def skip_and_read_back(worker: Any, monkeypatch: pytest.MonkeyPatch,
                       read_back: Callable[[list[Any]], list[Any]]) -> tuple[Any, Any]:
    """Judgments 0, 1, 40, 41 delivered on one partition, 2..39 skipped by the consumer
    (whose fetch loop records the jump as Faust does), the read-back served by
    ``read_back(ranges)``; then the delivered ones acknowledged as the stream does (the
    test context does not). Returns the partition and a judgment's bytes by offset."""
    from faust.types import Message

    import sift.agents.app as app_module

    part = shard_of("wheat", 2)
    tp = TP(worker.topics["judgments"].get_topic_name(), part)
    consumer = worker.app.consumer
    worker.app.topics.acks_enabled_for = lambda topic: True

    def judgment(i: int) -> bytes:
        return orjson.dumps({"id": f"j{i}", "doc_id": f"d{i}", "profile": "wheat",
                             "relevant": i % 2 == 0, "text": TRAIN[i % 5]})

    monkeypatch.setattr(app_module, "read_offsets", lambda settings, ranges: read_back(
        [(t, p, o, b"wheat", judgment(o)) for t, p, a, b in ranges for o in range(a, b)]))

    async def run() -> None:
        await create_wheat(worker, part)
        async with agent(worker, "apply_judgments").test_context() as a:
            for i in (0, 1, 40, 41):
                if i == 40:  # what Faust's fetch loop does when 40 follows 1
                    await consumer._add_gap(tp, 2, 40)
                    # nothing skipped counts as processed before it is applied
                    assert not consumer._gap[tp].overlaps(0, 42)
                a.sent_offset = i
                await a.put(judgment(i), key=b"wheat", partition=part)
            await asyncio.sleep(0.6)

    asyncio.run(run())
    for i in (0, 1, 40, 41):
        m = Message(tp.topic, tp.partition, i, 0.0, 0, None, b"wheat", judgment(i), None,
                    generation_id=worker.app.consumer_generation_id)
        consumer._unacked_messages.add(m)
        assert consumer.ack(m) is True
    return tp, judgment


def test_read_back_offsets_are_counted_once_so_the_commit_passes_them_in_one_step(
        worker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Faust's fetch loop records a jump in offsets as a gap (offsets its next commit
    counts as acknowledged), and its interval also covers the message after the jump.
    The agent reads the skipped offsets back and acknowledges them itself once applied;
    counted by both, an offset sat twice in the consumer's acknowledged list, and Faust's
    commit (the first run of consecutive offsets) then moved one offset per commit: a
    read-back of 616 offsets left a partition's lag stuck for minutes (CI, eleventh
    session); and the gap let a commit pass offsets not applied yet. Each offset must
    be counted once, and none before it is applied."""
    tp, _ = skip_and_read_back(worker, monkeypatch, lambda got: got)
    entry = worker.service.entry("wheat", worker.table)
    assert entry.judged.digests().tolist() == key_digests(
        f"j{i}" for i in [0, 1, *range(2, 40), 40, 41])
    consumer = worker.app.consumer
    acked = list(consumer._acked[tp])
    assert sorted(acked) == list(range(42)) and len(set(acked)) == len(acked)
    assert consumer._new_offset(tp) == 42  # one commit passes everything applied
    assert not consumer._acked[tp]


def test_skipped_offsets_the_log_no_longer_holds_are_acknowledged_after_a_full_read_back(
        worker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A complete read-back without offsets 10..14 (gone with retention): nothing to
    apply for them, but the commit passes them with the rest once the batch is done."""
    tp, _ = skip_and_read_back(worker, monkeypatch,
                               lambda got: [m for m in got if not 10 <= m[2] < 15])
    entry = worker.service.entry("wheat", worker.table)
    assert entry.judged.digests().tolist() == key_digests(
        f"j{i}" for i in [0, 1, *range(2, 10), *range(15, 42)])
    assert worker.service.stats["offsets_absent"] == 5
    assert worker.app.consumer._new_offset(tp) == 42


def test_a_failed_read_back_leaves_the_commit_below_the_skipped_offsets(
        worker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The read-back fails (broker away, or not read to the end in time): the skipped
    offsets are neither applied nor acknowledged, so the commit stops below them and
    they are delivered again later (the tail watch seeks the partition back)."""
    from sift.kafkaclient import KafkaClientError

    def fail(got: list[Any]) -> list[Any]:
        raise KafkaClientError("cannot read back: not read to the end in 10 s")

    tp, _ = skip_and_read_back(worker, monkeypatch, fail)
    entry = worker.service.entry("wheat", worker.table)
    assert entry.judged.digests().tolist() == key_digests(["j0", "j1", "j40", "j41"])
    assert worker.app.consumer._new_offset(tp) == 2


def test_a_shard_partition_never_committed_is_read_from_its_first_offset(
        worker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first shard payload delivered on a partition the group never committed is
    offset 3 (Faust dropped the head it fetched at a rebalance): 0..2 are read back and
    scored before it, as an uninterrupted stream would have. A partition with a
    committed offset starts there instead (the judgments test above)."""
    import sift.agents.app as app_module
    from sift.agents.service import encode_vector_batch

    shard_topic = worker.topics["shard-documents"].get_topic_name()
    vec = worker.service.training.vectorizer

    def payload(i: int) -> bytes:
        return encode_vector_batch([f"d{i}"], vec.transform([TRAIN[i % 5]]))

    asked = read_back_from(monkeypatch, worker, None, payload)
    part = shard_of("wheat", 2)
    starts: list[Any] = []

    def start_offsets(settings: Any, tps: Any) -> dict[Any, int]:
        starts.extend(tps)
        return dict.fromkeys(tps, 0)  # never committed; the log starts at 0

    monkeypatch.setattr(app_module, "start_offsets", start_offsets)

    class Batch:  # what publish() needs of aiokafka's producer (no broker here)
        def append(self, timestamp: Any, key: bytes, value: bytes) -> int:
            return len(value)

        def close(self) -> None:
            pass

    class Producer:
        client = Mock(_wait_on_metadata=AsyncMock())
        _metadata = Mock(partitions_for_topic=lambda name: {0, 1})

        def _partition(self, *args: Any) -> int:
            return 0

        def create_batch(self) -> Batch:
            return Batch()

        async def send_batch(self, batch: Batch, name: str, partition: int) -> Any:
            done = asyncio.get_running_loop().create_future()
            done.set_result(None)
            return done

    monkeypatch.setattr(worker.app.producer, "_ensure_producer", Producer)

    async def run() -> None:
        await create_wheat(worker, part)
        async with agent(worker, "score_documents").test_context() as a:
            for i in (3, 4):
                a.sent_offset = i
                await a.put(payload(i), partition=part)
            await asyncio.sleep(0.3)

    asyncio.run(run())
    # asked once, at the partition's first message (the profiles partition's too)
    assert starts.count((shard_topic, part)) == 1
    assert asked == [(shard_topic, part, 0, 3)]
    assert worker.service.stats["offsets_recovered"] == 3
    assert worker.service.scored["wheat"] == 5  # d0..d4, each once


def _document(i: int) -> bytes:
    return orjson.dumps({"id": f"d{i}", "text": TRAIN[i % 5]})


def route_from_offset_3(worker: Any, monkeypatch: pytest.MonkeyPatch, starts: Any,
                        assigned: set[TP] | None = None, first: int = 3) -> list[Any]:
    """Documents partition 0 delivers offsets 3 and 4 first (Faust dropped the head; with
    ``first``, that offset and the next); ``starts`` serves ``start_offsets``, the
    partitions ``assigned`` are announced first (the lookup runs in a thread). Returns
    the ranges read back."""
    import sift.agents.app as app_module

    asked = read_back_from(monkeypatch, worker, None, _document)
    monkeypatch.setattr(app_module, "start_offsets", starts)

    async def run() -> None:
        if assigned is not None:
            await worker.app.on_partitions_assigned.send(assigned)
            await asyncio.sleep(0.1)
        async with agent(worker, "route_documents").test_context() as a:
            for i in (first, first + 1):
                a.sent_offset = i
                await a.put(_document(i), partition=0)
            await asyncio.sleep(0.3)

    asyncio.run(run())
    return asked


def test_documents_read_back_are_routed_in_steps_of_the_batch_bytes(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The messages the consumer skipped, read back into the step that revealed them, are
    routed in steps of at most ``SIFT_BATCH_BYTES`` too (seen at a worker's start on a
    backlog: 278 messages of a partition's head read back at its first batch); a step
    many times the limit outgrows the caches the limit is there for (docs/streaming.md,
    fifteenth and fifty-first sessions). Every document is routed once, in offset order."""
    limit = 3 * len(_document(0))  # about three messages a step
    worker = offline_worker(str(tmp_path), batch_bytes=limit)
    routed: list[list[int]] = []
    route = worker.service.route

    def recording(messages: Any) -> Any:
        messages = list(messages)
        routed.append([m.offset for m in messages])
        assert sum(len(m.value) for m in messages) <= limit or len(messages) == 1
        return route(messages)

    monkeypatch.setattr(worker.service, "route", recording)
    documents_topic = worker.topics["documents"].get_topic_name()
    asked = route_from_offset_3(worker, monkeypatch, lambda settings, tps: dict.fromkeys(tps, 0),
                                first=40)
    assert asked == [(documents_topic, 0, 0, 40)]
    assert [o for step in routed for o in step] == list(range(42))
    assert len(routed) >= 42 // 3
    assert worker.service.stats["documents"] == 42


def test_a_documents_partition_never_committed_is_read_from_the_log_start(
        worker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same on the documents topic (seen in the seventh session: the first 24
    messages of a partition a new group had never committed were never delivered). The
    log there starts at offset 1 (retention deleted 0): 1..2 are read back, not 0."""
    documents_topic = worker.topics["documents"].get_topic_name()
    asked = route_from_offset_3(worker, monkeypatch, lambda settings, tps: dict.fromkeys(tps, 1))
    assert asked == [(documents_topic, 0, 1, 3)]
    assert worker.service.stats["offsets_recovered"] == 2
    assert worker.service.stats["documents"] == 4  # d1..d4, each once
    assert worker.service.stats["offset_gaps"] == 0


def test_start_offsets_are_asked_at_the_assignment_not_at_the_first_message(
        worker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The group's start on each input partition is asked of the broker once, when the
    partitions are assigned (in the background); the first message of a partition with
    no commit known then uses that answer instead of waiting for a lookup of its own,
    and a gap before it is still read back from there."""
    documents_topic = worker.topics["documents"].get_topic_name()
    judgments_topic = worker.topics["judgments"].get_topic_name()
    calls: list[list[Any]] = []

    def start_offsets(settings: Any, tps: Any) -> dict[Any, int]:
        calls.append(list(tps))
        return dict.fromkeys(tps, 1)

    assigned = {TP(documents_topic, 0), TP(documents_topic, 1), TP(judgments_topic, 0),
                TP("someone-elses-topic", 0)}
    asked = route_from_offset_3(worker, monkeypatch, start_offsets, assigned)
    # once, at the assignment, for the input partitions only; not again at the message
    assert calls == [[(documents_topic, 0), (documents_topic, 1), (judgments_topic, 0)]]
    assert asked == [(documents_topic, 0, 1, 3)]
    assert worker.service.stats["documents"] == 4  # d1..d4, each once


def test_a_failed_start_lookup_at_the_assignment_is_asked_again_at_the_first_message(
        worker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lookup at the assignment fails (the broker away): the first message of the
    partition asks again, as before there was a lookup at the assignment."""
    from sift.kafkaclient import KafkaClientError

    documents_topic = worker.topics["documents"].get_topic_name()
    calls: list[list[Any]] = []

    def start_offsets(settings: Any, tps: Any) -> dict[Any, int]:
        calls.append(list(tps))
        if len(calls) == 1:
            raise KafkaClientError("cannot read the start offsets: broker away")
        return dict.fromkeys(tps, 2)

    asked = route_from_offset_3(worker, monkeypatch, start_offsets, {TP(documents_topic, 0)})
    assert calls == [[(documents_topic, 0)], [(documents_topic, 0)]]
    assert asked == [(documents_topic, 0, 2, 3)]
    assert worker.service.stats["documents"] == 3  # d2..d4


def test_the_worker_consumer_long_polls_for_the_configured_time() -> None:
    """Faust creates its consumer with fetch_max_wait_ms=1500; the worker's own wait
    (SIFT_FETCH_MAX_WAIT_MS) replaces it before the consumer starts."""
    from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

    from sift.agents.app import shorten_fetch_wait

    shorten_fetch_wait(37)
    try:
        async def wait_of_a_new_consumer() -> int:
            app = faust.App("fetch-wait-test", broker="kafka://127.0.0.1:1", store="memory://")
            thread = AIOKafkaConsumerThread(app.consumer, loop=asyncio.get_running_loop())
            consumer = thread._create_worker_consumer(app.transport)
            try:
                return int(consumer._fetch_max_wait_ms)
            finally:  # never started: close it and the threads' own loops (no ResourceWarning)
                await consumer.stop()
                thread.thread_loop.close()
                app.consumer._thread.thread_loop.close()

        assert asyncio.run(wait_of_a_new_consumer()) == 37
        shorten_fetch_wait(37)  # idempotent: not wrapped twice
        assert AIOKafkaConsumerThread._create_worker_consumer.sift_original.__name__ == \
            "_create_worker_consumer"
    finally:
        shorten_fetch_wait(Settings().fetch_max_wait_ms)


def test_the_drain_loop_polls_for_at_most_the_configured_time(monkeypatch: Any) -> None:
    """Faust's drain loop polls with ``getmany(timeout=1.0)``; a partition paused on a
    full stream buffer and resumed meanwhile waited for the rest of that second. The
    worker's bound (SIFT_FETCH_MAX_WAIT_MS) caps the poll; shorter waits pass through."""
    from faust.transport.consumer import Consumer

    from sift.agents.app import bound_poll_wait

    asked: list[float] = []

    def getmany(self: Any, timeout: float) -> str:
        asked.append(timeout)
        return "records"

    monkeypatch.setattr(Consumer, "getmany", getmany)
    bound_poll_wait(37)
    bound_poll_wait(37)  # idempotent: not wrapped twice
    assert Consumer.getmany.sift_original is getmany  # type: ignore[attr-defined]
    from faust.transport.drivers.aiokafka import Consumer as AIOKafkaConsumer

    poll = AIOKafkaConsumer.getmany  # what the worker's consumer runs (inherited)
    assert poll(None, timeout=1.0) == "records"
    assert poll(None, timeout=0.01) == "records"
    assert asked == [0.037, 0.01]
    bound_poll_wait(500)  # a new bound re-wraps the original, not the wrapper
    AIOKafkaConsumer.getmany(None, timeout=1.0)
    assert asked[-1] == 0.5 and Consumer.getmany.sift_original is getmany  # type: ignore[attr-defined]


class _Drain:
    """What deliver_first needs of Faust's consumer: mode's wait_first, a flow event."""

    def __init__(self) -> None:
        import mode

        class Svc(mode.Service):
            pass

        self.service = Svc()
        self.suspend_flow = asyncio.Event()
        self.original = type(self.service).wait_first


def test_a_delivery_that_need_not_wait_runs_without_tasks_and_returns_its_result() -> None:
    from sift.agents.app import deliver_first

    async def run() -> tuple[Any, int]:
        d = _Drain()
        log: list[str] = []

        async def on_message(m: str) -> str:
            log.append(m)
            return m.upper()

        before = len(asyncio.all_tasks())
        tasks_seen = []
        orig_create = asyncio.get_running_loop().create_task

        def counting(*a: Any, **k: Any) -> Any:
            tasks_seen.append(a)
            return orig_create(*a, **k)

        asyncio.get_running_loop().create_task = counting  # type: ignore[method-assign]
        try:
            res = await deliver_first(d.original, d.service, on_message("a"),
                                      d.suspend_flow.wait())
        finally:
            del asyncio.get_running_loop().create_task
        assert log == ["a"] and len(asyncio.all_tasks()) == before
        return res, len(tasks_seen)

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an un-awaited flow wait would warn
        res, n_tasks = asyncio.run(run())
    assert n_tasks == 0
    assert res.results == ["A"] and not res.stopped


def test_a_delivery_error_propagates_as_from_the_race() -> None:
    from sift.agents.app import deliver_first

    async def run() -> None:
        d = _Drain()

        async def on_message() -> None:
            raise ValueError("bad message")

        with pytest.raises(ValueError, match="bad message"):
            await deliver_first(d.original, d.service, on_message(), d.suspend_flow.wait())

    asyncio.run(run())


def test_a_delivery_that_waits_still_races_the_flow_and_is_cancelled_by_a_rebalance() -> None:
    """A delivery blocked on a full buffer finishes when the buffer frees up, and is
    cancelled when flow is suspended first (what Faust's race did for a rebalance)."""
    from sift.agents.app import deliver_first

    async def run() -> None:
        d = _Drain()
        room = asyncio.Event()
        log: list[str] = []

        async def on_message(m: str) -> str:
            log.append(f"{m} start")
            await room.wait()
            await asyncio.sleep(0)
            log.append(f"{m} put")
            return m

        task = asyncio.ensure_future(deliver_first(d.original, d.service, on_message("a"),
                                                   d.suspend_flow.wait()))
        await asyncio.sleep(0.01)
        assert log == ["a start"] and not task.done()
        room.set()
        res = await task
        assert log == ["a start", "a put"] and res.results[0] == "a"

        room.clear()
        log.clear()
        task = asyncio.ensure_future(deliver_first(d.original, d.service, on_message("b"),
                                                   d.suspend_flow.wait()))
        await asyncio.sleep(0.01)
        d.suspend_flow.set()  # a rebalance: the stuck delivery loses the race
        res = await task
        assert log == ["b start"] and res.results == [True]
        room.set()
        await asyncio.sleep(0.01)
        assert log == ["b start"]  # cancelled, never put

    asyncio.run(run())


def test_only_faust_delivery_races_take_the_direct_path(worker: Any) -> None:
    """The worker's consumer class routes the drain loop's race (on_message, an event's
    wait) through deliver_first; any other wait_first call is mode's own."""
    from faust.transport.consumer import Consumer

    assert getattr(Consumer.wait_first, "sift_direct", False)

    async def run() -> None:
        d = _Drain()

        async def on_message() -> int:
            return 7

        async def other() -> int:
            return 8

        patched = Consumer.wait_first
        import sift.agents.app as app_mod

        real = app_mod.deliver_first
        seen: list[Any] = []

        async def spy(orig: Any, svc: Any, a: Any, b: Any) -> Any:
            seen.append(a.cr_code.co_name)
            return await real(orig, svc, a, b)

        app_mod.deliver_first = spy  # type: ignore[assignment]
        try:
            res = await patched(d.service, on_message(), d.suspend_flow.wait())
            assert seen == ["on_message"] and res.results == [7]
            res = await patched(d.service, other(), d.suspend_flow.wait())  # mode's race
            assert res.results == [8]
            d.suspend_flow.set()
            res = await patched(d.service, d.suspend_flow.wait(), timeout=1.0)
            assert res.results == [True]
        finally:
            app_mod.deliver_first = real  # type: ignore[assignment]
        assert seen == ["on_message"]

    asyncio.run(run())


def test_byte_steps_split_a_batch_in_order_under_the_limit() -> None:
    """Consecutive slices whose values add up to at most the limit; a message over it
    is a step of its own; nothing is left out or repeated."""
    from sift.agents.app import byte_steps
    from sift.agents.service import InputMessage

    sizes = [3, 4, 2, 9, 1, 1, 1, 0, 5]
    msgs = [InputMessage(b"x" * n if n else None, "documents", 0, i) for i, n in enumerate(sizes)]
    steps = list(byte_steps(msgs, 7))
    assert [(s.start, s.stop) for s in steps] == [(0, 2), (2, 3), (3, 4), (4, 8), (8, 9)]
    assert [m.offset for s in steps for m in msgs[s]] == list(range(len(sizes)))
    assert all(sum(sizes[s]) <= 7 or s.stop - s.start == 1 for s in steps)
    assert list(byte_steps([], 7)) == []
    assert [(s.start, s.stop) for s in byte_steps(msgs, 10**9)] == [(0, 9)]


@pytest.mark.parametrize("as_counts", [False, True], ids=["weights", "counts"])
def test_the_shard_agent_sends_on_the_shards_it_does_not_hold(
        worker: Any, monkeypatch: pytest.MonkeyPatch, as_counts: bool) -> None:
    """A copy naming shards 0 and 1 arrives on partition 0 of a worker that holds no shard
    (no consumer here): it is scored for shard 0, the partition it arrived on, and one copy
    naming shard 1 goes on to partition 1, in the format it came in, the vectors unchanged."""
    import sift.agents.app as app_module
    from sift.agents.service import encode_vector_batch

    vec = worker.service.training.vectorizer
    X, counts = vec.transform_counts([TRAIN[0], TRAIN[1]])
    payload = encode_vector_batch(["d0", "d1"], X, shards=[0, 1]) if not as_counts else \
        encode_vector_batch(["d0", "d1"], X, shards=[0, 1], counts=counts,
                            vectorizer=vec.fingerprint())
    read_back_from(monkeypatch, worker, None, lambda offset: b"")
    monkeypatch.setattr(app_module, "start_offsets",
                        lambda settings, tps: dict.fromkeys(tps, 0))

    async def run() -> None:
        async with agent(worker, "score_documents").test_context() as a:
            a.sent_offset = 0
            await a.put(payload, partition=0)
            await asyncio.sleep(0.3)

    asyncio.run(run())
    sends = worker.topics["shard-documents"].send.await_args_list
    assert [c.kwargs["partition"] for c in sends] == [1]
    onward = sends[0].kwargs["value"]
    assert onward[:8] == payload[:8]  # the same format
    ids, got, shards = read_vector_batch(onward, vec)
    assert ids == ["d0", "d1"] and shards == [1]
    assert np.array_equal(got.indices, X.indices) and np.array_equal(got.data, X.data)
    assert worker.service.stats["shard_forwards"] == 1
    assert worker.service.stats["shard_payloads"] == 1


def test_a_failing_periodic_task_is_counted_and_logged_and_runs_again(
        caplog: pytest.LogCaptureFixture) -> None:
    """An exception escaping an ``@app.timer`` body would crash the app (mode's
    ``_execute_task``): wrapped, a stats file the disk refuses costs a count and a log
    line, at most one a minute."""
    calls: list[int] = []
    now = [100.0]

    async def write() -> None:
        calls.append(1)
        if len(calls) <= 3:
            raise OSError(28, "No space left on device")

    stats: Counter[str] = Counter()
    tick = keep_going("write_stats", write, stats, clock=lambda: now[0])
    assert tick.__name__ == "write"  # Faust names the timer after it
    with caplog.at_level("ERROR", logger="sift.agents.app"):
        for step in (0.0, 1.0, TIMER_ERROR_LOG_INTERVAL, 1.0):
            now[0] += step
            asyncio.run(tick())  # returns: the next tick would run
    assert len(calls) == 4 and stats["timer_errors"] == 3
    logged = [r for r in caplog.records if "periodic task write_stats failed" in r.getMessage()]
    assert len(logged) == 2  # the first failure, and the third a minute later; not the second
    assert logged[0].exc_info is not None and "No space left" in str(logged[0].exc_info[1])


def test_a_periodic_task_still_stops_when_cancelled() -> None:
    async def sleeps() -> None:
        await asyncio.sleep(10)

    stats: Counter[str] = Counter()

    async def run() -> None:
        task = asyncio.ensure_future(keep_going("t", sleeps, stats)())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert stats["timer_errors"] == 0


def test_a_slow_periodic_call_is_skipped_not_stacked_and_its_error_surfaces_at_the_next_tick(
        ) -> None:
    """The stats file and the memory trim run in the executor one call at a time: a tick
    returns at once (no "Timer ... is overlapping" warning from Faust), a tick during a
    call skips, and a failed call raises at the next tick, where keep_going counts it."""
    import threading

    gate = threading.Event()
    calls: list[int] = []

    def write() -> None:
        calls.append(1)
        gate.wait(5)
        if len(calls) == 2:
            raise OSError(30, "Read-only file system")

    job = OneAtATime(write)
    stats: Counter[str] = Counter()
    tick = keep_going("write_stats", job.tick, stats)

    async def run() -> None:
        await tick()
        await tick()  # the first call still waits at the gate: skipped
        assert job.skipped == 1 and len(calls) == 1
        gate.set()
        await job.wait()
        await tick()  # the first call ended well: a second starts, and fails
        await job.wait()
        await tick()  # its error surfaces here: counted, no call started
        assert stats["timer_errors"] == 1 and len(calls) == 2
        await tick()  # and the task goes on
        await job.wait()
        assert len(calls) == 3

    asyncio.run(run())


def test_table_writes_queued_for_the_producer_do_not_hold_up_the_inputs(worker: Any) -> None:
    """A judgment batch queues a table write per profile; Faust holds up the delivery of
    every input message while more than 100 are queued (``wait_until_ebb``: it waits for
    them to be sent). The worker lifts that limit (its agents settle each batch's writes
    before the next), so documents keep flowing behind a thousand queued writes."""
    buffer = worker.app.producer.buffer
    for _ in range(1000):
        buffer.pending.put_nowait(object())
    assert buffer.size == 1000
    # with Faust's limit this would wait to flush (here: raise, the producer is not
    # running); it returns at once
    asyncio.run(asyncio.wait_for(buffer.wait_until_ebb(), timeout=5.0))


def test_records_are_handed_over_only_for_partitions_faust_has_active(monkeypatch: Any) -> None:
    """aiokafka's ``fetched_records`` takes an empty ``partitions`` as "all of them";
    Faust passes its live set of active partitions, empty for a moment when recovery
    pauses the changelogs before resuming the inputs, and dropped what came back for
    the paused inputs (after aiokafka had moved past it). An empty set hands over
    nothing, and a partition resumed meanwhile is asked of the set at the time."""
    from collections import OrderedDict

    from aiokafka.consumer.fetcher import Fetcher, FetchResult
    from aiokafka.structs import TopicPartition

    import sift.agents.app as app_mod

    class Records(list[Any]):
        next_fetch_offset = 0

        def __init__(self, offsets: range) -> None:
            super().__init__(Mock(offset=o) for o in offsets)
            self.next_fetch_offset = offsets.start

    class State:
        paused = False

        def __init__(self, records: Records) -> None:
            self.records = records

        @property
        def position(self) -> int:
            return self.records.next_fetch_offset

        def consumed_to(self, position: int) -> None:
            pass

    paused, active = TopicPartition("documents", 0), TopicPartition("profiles-changelog", 0)
    records = {paused: Records(range(5, 8)), active: Records(range(0, 2))}
    assignment = Mock(active=True)
    assignment.state_value = lambda tp: State(records[tp])
    fetcher = Mock(_records=OrderedDict(
        (tp, FetchResult(tp, assignment=assignment, partition_records=r, backoff=0))
        for tp, r in records.items()))
    fetcher._subscriptions.reassignment_in_progress = False
    monkeypatch.setattr(Fetcher, "fetched_records",  # aiokafka's, even after a create_app
                        getattr(Fetcher.fetched_records, "sift_original", Fetcher.fetched_records))
    app_mod.rotate_fetched_partitions()
    live = {active}

    async def fetch() -> dict[Any, list[int]]:
        got = await Fetcher.fetched_records(fetcher, live, timeout=0)
        return {tp.topic: [r.offset for r in rs] for tp, rs in got.items()}

    assert asyncio.run(fetch()) == {"profiles-changelog": [0, 1]}
    live.clear()  # recovery paused the changelogs; the inputs are not resumed yet
    assert asyncio.run(fetch()) == {}
    assert paused in fetcher._records  # still there for when the partition is resumed
    live.add(paused)
    assert asyncio.run(fetch()) == {"documents": [5, 6, 7]}


def test_what_is_delivered_while_recovery_seeks_is_not_cleared_at_its_end(
        monkeypatch: Any) -> None:
    """Faust's ``on_recovery_completed`` resumes the inputs, awaits the seek to the
    committed offsets (during which the drain loop delivers into the stream buffers and
    notes the records as read) and then resumes flow control, which empties the
    buffers: a fresh worker lost the head of a partition in most starts. What was
    buffered before the inputs were resumed is still cleared; what came after stays."""
    from faust.tables.recovery import Recovery
    from mode.utils.queues import FlowControlEvent, FlowControlQueue

    import sift.agents.app as app_mod

    async def run() -> tuple[list[str], bool, list[str]]:
        flow = FlowControlEvent(initially_suspended=False)
        queue: FlowControlQueue[str] = FlowControlQueue(flow_control=flow,
                                                        clear_on_resume=True)
        queue.put_nowait("stale")

        async def original(self: Any, generation_id: int = 0) -> None:
            queue.put_nowait(f"delivered during the seek, generation {generation_id}")
            self.app.flow_control.resume()

        monkeypatch.setattr(Recovery, "on_recovery_completed", original)
        app_mod.keep_deliveries_at_recovery_end()
        app_mod.keep_deliveries_at_recovery_end()  # idempotent
        recovery = Mock()
        recovery.app.flow_control = flow
        await Recovery.on_recovery_completed(recovery, 7)
        kept = list(queue._queue)  # type: ignore[attr-defined]
        queue.put_nowait("later")
        flow.resume()  # any later resume clears as before
        return kept, flow.is_active(), list(queue._queue)  # type: ignore[attr-defined]

    kept, active, after = asyncio.run(run())
    assert kept == ["delivered during the seek, generation 7"]
    assert active and after == []
