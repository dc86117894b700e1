"""Defects found by the review of the fifty-fourth session's changes (a helper's review of
the shard release, static membership and the hot standby's store refill). Each test
failed before its fix.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from faust.types import TP

from sift.agents.service import InputMessage
from sift.topics.records import Document
from tests.agents.offline import offline_worker

P = 2


def changelogs(worker: Any, partitions: set[int]) -> set[TP]:
    """An assignment of ``partitions`` of every table's changelog (what the refill and
    the review cache look at; no input topic, so nothing asks the broker)."""
    return {TP(t.changelog_topic.get_topic_name(), p)
            for t in worker.app.tables.values() for p in partitions}


async def until(cond: Callable[[], bool], seconds: float = 5.0) -> None:
    """Let the event loop run until ``cond()`` holds or ``seconds`` have passed."""
    for _ in range(int(seconds / 0.01)):
        if cond():
            return
        await asyncio.sleep(0.01)


async def stand_by_then_take_over(worker: Any, reading: threading.Event) -> None:
    """An assignment with no shard, then one with both: a refill starts; returns once
    its reading has begun."""
    await worker.app.on_partitions_assigned.send(set())
    await worker.app.on_partitions_assigned.send(changelogs(worker, {0, 1}))
    loop = asyncio.get_running_loop()
    assert await loop.run_in_executor(None, reading.wait, 10)


def route(worker: Any, ids: list[str], offset: int) -> None:
    """Documents routed and scored by the worker: in its store, as scoring puts them."""
    svc = worker.service
    value = orjson.dumps({"documents": [{"id": i, "text": f"wheat exports rose {i}"}
                                        for i in ids]})
    for ids_, X in svc.route([InputMessage(value, "documents", 0, offset)]).batches:
        svc.store.put(ids_, X)


# ------------------------------------------------------------------------------ 1
def test_a_refill_does_not_evict_the_documents_routed_while_it_read(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hot standby given shards reads the recent documents back in a thread while its
    agents already route and score the new ones. The documents read back (older) were
    then put in the store after the new ones, and the store evicts in the order
    documents were put: with as many read back as the store holds (a standby that stood
    by while the group scored that many), every document routed during the read was
    evicted at once, and the judgments of the freshest documents were dead-lettered
    ``unknown_document``. The documents read back now go before those routed since
    the refill began, and the oldest are evicted first."""
    from sift.agents import restore

    worker = offline_worker(str(tmp_path), P, recent_documents=10)
    svc = worker.service
    read_back = [Document(f"old{i}", f"crude oil prices {i}") for i in range(10)]
    reading, go = threading.Event(), threading.Event()

    def read(settings: Any, service: Any, **kw: Any) -> tuple[list[Document], int, dict]:
        reading.set()
        assert go.wait(10)
        return list(read_back), len(read_back), {}

    monkeypatch.setattr(restore, "read_recent_documents", read)

    async def run() -> None:
        route(worker, [f"before{i}" for i in range(3)], 0)  # held before standing by
        await worker.app.on_partitions_assigned.send(set())  # the standby: no shard
        await worker.app.on_partitions_assigned.send(changelogs(worker, {0, 1}))
        loop = asyncio.get_running_loop()
        assert await loop.run_in_executor(None, reading.wait, 10)
        route(worker, [f"new{i}" for i in range(4)], 1)  # while the refill reads
        go.set()
        await until(lambda: bool(svc.stats["store_refills"] or svc.stats["store_refill_failures"]))

    asyncio.run(run())
    assert svc.stats["store_refills"] == 1
    held = list(svc.store.ids())
    assert len(held) == 10
    # the newest: every document routed during the read, then the newest read back
    assert [i for i in held if i.startswith("new")] == [f"new{i}" for i in range(4)]
    assert held == [f"old{i}" for i in range(4, 10)] + [f"new{i}" for i in range(4)]
    for doc_id in held:
        assert svc.store.get(doc_id) is not None


def test_the_store_puts_reserved_documents_before_later_ones_and_finds_them() -> None:
    """:meth:`DocumentStore.put` ``at`` reserved positions: in the order of eviction
    before the documents put after the reservation and after those put before; each
    document found with its own row; nothing put once newer documents are evicted."""
    import numpy as np
    import scipy.sparse as sp

    from sift.agents.service import DocumentStore

    def rows(first: int, n: int) -> sp.csr_matrix:
        return sp.csr_matrix(np.arange(first, first + n, dtype=float).reshape(n, 1) + 1)

    store = DocumentStore(7)
    store.put(["a", "b", "c"], rows(0, 3))
    store.put(["a", "d"], rows(3, 2))  # "a" again: a batch that added one id
    at = store.reserve(100)
    store.put(["n1", "n2"], rows(10, 2))
    store.put(["r1", "r2"], rows(20, 2), at=at)
    assert list(store.ids()) == ["b", "c", "d", "r1", "r2", "n1", "n2"]  # "a" evicted
    store.put(["r3", "c"], rows(22, 2), at=at + 2)  # "c" held already: kept, and its row
    assert list(store.ids()) == ["c", "d", "r1", "r2", "r3", "n1", "n2"]
    expected = {"c": 3, "d": 5, "r1": 21, "r2": 22, "r3": 23, "n1": 11, "n2": 12}
    for doc_id, value in expected.items():
        got = store.get(doc_id)
        assert got is not None and got.toarray()[0, 0] == value, doc_id
    store.put(["n3", "n4", "n5", "n6", "n7"], rows(30, 5))  # evicts c, d, r1, r2, r3
    assert list(store.ids()) == ["n1", "n2", "n3", "n4", "n5", "n6", "n7"]
    store.put(["r4"], rows(40, 1), at=at + 4)  # older than documents evicted: not put
    assert "r4" not in store and len(store) == 7
    store.put(["n8"], rows(50, 1))  # evicts n1, half of a batch
    assert next(iter(store.ids())) == "n2"
    store.put(["r5"], rows(60, 1), at=at + 5)
    assert "r5" not in store
    got = store.get("n2")
    assert got is not None and got.toarray()[0, 0] == 12

    other = DocumentStore(6)
    at = other.reserve(1)
    other.put(["n"], rows(0, 1))
    with pytest.raises(ValueError, match="not all reserved"):
        other.put(["r1", "r2"], rows(1, 2), at=at)  # one position reserved, two wanted


# ------------------------------------------------------------------------------ 2
def test_a_spec_naming_a_document_read_back_waits_for_the_refill(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A profile spec's ``positives`` may name recently seen documents by id, found in the
    same store as the judgments' documents. The judgments agent waited for a hot
    standby's refill; the specs agent did not, and a spec taken during the refill that
    named a document scored while the worker stood by was dead-lettered
    ``unknown_positive``, as the judgments were before item 92."""
    from sift.agents import restore
    from sift.agents.service import shard_of
    from tests.agents.offline import agent

    worker = offline_worker(str(tmp_path), P)
    svc = worker.service
    read_back = [Document("scored-meanwhile", "wheat exports rose again")]
    reading, go = threading.Event(), threading.Event()

    def read(settings: Any, service: Any, **kw: Any) -> tuple[list[Document], int, dict]:
        reading.set()
        assert go.wait(10)
        return list(read_back), 1, {}

    monkeypatch.setattr(restore, "read_recent_documents", read)
    name = "wheat"

    async def run() -> None:
        await stand_by_then_take_over(worker, reading)
        async with agent(worker, "apply_specs").test_context() as a:
            await a.put(orjson.dumps({"profile": name, "query": "wheat",
                                      "positives": ["scored-meanwhile"]}),
                        key=name.encode(), partition=shard_of(name, P))
            await asyncio.sleep(0.2)
            go.set()
            await until(lambda: bool(svc.stats["profiles_created"] or svc.stats["dead_letters"]))

    asyncio.run(run())
    assert svc.stats["store_refills"] == 1
    assert svc.stats["dead_letters"] == 0, worker.topics["dead-letters"].send.await_args_list
    assert svc.stats["profiles_created"] == 1


# ------------------------------------------------------------------------------ 3
def test_shards_given_again_during_a_refill_are_refilled_after_it(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A standby given shards, then none again and shards again while its first refill
    still read (assignments in quick succession, as when workers come and go): the
    second time with shards started no refill, since one was under way, and none came
    after it; the documents scored by the group while the worker stood by the second
    time (committed after the first refill asked where to read to) were never read
    back. Now a refill follows the one under way."""
    from sift.agents import restore

    worker = offline_worker(str(tmp_path), P)
    svc = worker.service
    calls: list[int] = []
    first_reading, go = threading.Event(), threading.Event()

    def read(settings: Any, service: Any, **kw: Any) -> tuple[list[Document], int, dict]:
        calls.append(1)
        if len(calls) == 1:
            first_reading.set()
            assert go.wait(10)
            return [Document("first", "wheat exports rose")], 1, {}
        return [Document("first", "wheat exports rose"),
                Document("second", "crude oil prices fell")], 2, {}

    monkeypatch.setattr(restore, "read_recent_documents", read)

    async def run() -> None:
        send = worker.app.on_partitions_assigned.send
        await send(set())
        await send(changelogs(worker, {0, 1}))
        loop = asyncio.get_running_loop()
        assert await loop.run_in_executor(None, first_reading.wait, 10)
        await send(set())  # a standby again ...
        await send(changelogs(worker, {1}))  # ... and given a shard again
        go.set()
        await until(lambda: svc.stats["store_refills"] + svc.stats["store_refill_failures"] >= 2)

    asyncio.run(run())
    assert len(calls) == 2 and svc.stats["store_refills"] == 2
    assert "first" in svc.store and "second" in svc.store


def test_the_agents_wait_for_a_refill_a_bounded_time(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A refill whose reading hangs (a broker answering slowly: its reads' timeouts add
    up to minutes) held every batch of judgments and specs, and with them a rebalance or
    a stop, until it ended. The agents now wait ``REFILL_WAIT_S`` at most, once per
    refill, and go on; the refill still completes afterwards."""
    from sift.agents import app as app_module
    from sift.agents import restore
    from sift.agents.service import shard_of
    from tests.agents.offline import agent

    monkeypatch.setattr(app_module, "REFILL_WAIT_S", 0.2)
    worker = offline_worker(str(tmp_path), P)
    svc = worker.service
    reading, go = threading.Event(), threading.Event()

    def read(settings: Any, service: Any, **kw: Any) -> tuple[list[Document], int, dict]:
        reading.set()
        assert go.wait(20)
        return [Document("late", "wheat exports rose")], 1, {}

    monkeypatch.setattr(restore, "read_recent_documents", read)

    async def run() -> None:
        await stand_by_then_take_over(worker, reading)
        async with agent(worker, "apply_specs").test_context() as a:
            for name in ("wheat", "grain"):
                await a.put(orjson.dumps({"profile": name, "query": name}),
                            key=name.encode(), partition=shard_of(name, P))
            await until(lambda: svc.stats["profiles_created"] == 2)  # while the refill reads
            assert svc.stats["profiles_created"] == 2 and not go.is_set()
            go.set()
            await until(lambda: bool(svc.stats["store_refills"]))

    asyncio.run(run())
    assert svc.stats["store_refill_waits_cut"] == 1  # waited once, not once a batch
    assert svc.stats["store_refills"] == 1 and "late" in svc.store
