"""A starting worker's document store, filled from the documents topic
(:mod:`sift.agents.restore`, :meth:`Service.restore_recent`), without Kafka."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from sift.agents.restore import restore_document_store
from sift.agents.service import InputMessage, Service, TrainingSet
from sift.filters.vectorize import Vectorizer
from sift.settings import Settings

TRAIN = ["wheat exports rose", "crude oil prices fell", "gold mine output", "bank rates"] * 3


@pytest.fixture
def training() -> TrainingSet:
    vec = Vectorizer(n_features=2**12).fit(TRAIN)
    return TrainingSet(vec, vec.transform(TRAIN), {f"t{i}": i for i in range(len(TRAIN))})


def doc_msg(obj: object, partition: int = 0, offset: int = 0) -> InputMessage:
    return InputMessage(obj if isinstance(obj, bytes) else orjson.dumps(obj), "sift.documents",
                        partition, offset)


def test_restored_documents_are_stored_as_routing_would_store_them(training: TrainingSet) -> None:
    """The vectors route() gives; an id keeps its first text; ids held are left alone;
    what is not a document is skipped without a dead letter; no other state changes."""
    messages = [
        doc_msg({"documents": [{"id": "a", "text": "wheat exports"}, {"id": "b", "text": "oil"}]}, 0, 0),
        doc_msg(b"{not json", 0, 1),
        doc_msg({"id": "c", "text": "gold mine"}, 0, 2),
        doc_msg({"id": "a", "text": "another text under a"}, 0, 3),
        doc_msg({"id": 7}, 0, 4),
        doc_msg({"id": "held", "text": "what the store holds is kept"}, 0, 5),
    ]
    svc = Service(training, n_shards=2, recent_documents=100)
    X_held, _ = svc.vectorizer.transform_counts(["bank rates held before"])
    svc.store.put(["held"], X_held)
    docs = [d for m in messages for d in svc.decode_documents(m, None)]
    assert [d.id for d in docs] == ["a", "b", "c", "a", "held"]  # the bad ones left out
    assert svc.restore_recent(docs, chunk=2) == 3
    assert svc.stats == {"documents_restored": 3}  # no dead letter, nothing routed
    assert not any(svc.redelivered(m) for m in messages)  # the worker still reads them
    twin = Service(training, n_shards=2, recent_documents=100)
    routed = twin.route([messages[0], messages[2]])
    ((ids, X),) = routed.parts
    for i, doc_id in enumerate(ids):
        got = svc.store.get(doc_id)
        assert got is not None and (got != X[i]).nnz == 0
    held = svc.store.get("held")
    assert held is not None and (held != X_held).nnz == 0
    assert list(svc.store.ids()) == ["held", "a", "b", "c"]


class FakeTopic:
    """Partitions of one-document messages (document ``d<p>-<offset>``), read as
    ``sift.kafkaclient.read_offsets`` reads them; records the ranges asked."""

    def __init__(self, sizes: dict[int, int], first: int = 0) -> None:
        self.sizes, self.first, self.asked = sizes, first, []  # type: ignore[var-annotated]

    def read(self, settings: Settings, ranges: list[tuple[str, int, int, int]],
             timeout: float) -> list[Any]:
        self.asked.append(sorted(ranges))
        return [(t, p, o, None, orjson.dumps({"id": f"d{p}-{o}", "text": f"wheat {o}"}))
                for t, p, a, b in ranges for o in range(max(a, self.first), b)]

    def starts(self, settings: Settings, parts: list[tuple[str, int]]) -> dict[Any, int]:
        return {(t, p): self.sizes[p] for t, p in parts}

    def beginnings(self, settings: Settings, parts: list[tuple[str, int]]) -> dict[Any, int]:
        return {(t, p): self.first for t, p in parts}


def test_the_newest_documents_of_every_partition_up_to_the_store(training: TrainingSet) -> None:
    settings = Settings(topic_prefix="sift.", partitions=2)
    svc = Service(training, n_shards=2, recent_documents=6)
    topic = FakeTopic({0: 10, 1: 2})
    done = restore_document_store(settings, svc, partitions=2, read=topic.read,
                                  starts=topic.starts, beginnings=topic.beginnings)
    # a share of 3 a partition; partition 1 holds only 2 below the committed offset, so
    # the next round gives partition 0 what it left
    assert topic.asked == [[("sift.documents", 0, 7, 10), ("sift.documents", 1, 0, 2)],
                           [("sift.documents", 0, 6, 7)]]
    assert (done.documents, done.messages) == (6, 6)
    assert sorted(svc.store.ids()) == ["d0-6", "d0-7", "d0-8", "d0-9", "d1-0", "d1-1"]


def test_nothing_to_read_back_and_a_store_of_size_zero(training: TrainingSet) -> None:
    settings = Settings(topic_prefix="sift.", partitions=2)
    topic = FakeTopic({0: 5, 1: 5}, first=5)  # retention: nothing below the offsets
    svc = Service(training, n_shards=2, recent_documents=10)
    done = restore_document_store(settings, svc, partitions=2, read=topic.read,
                                  starts=topic.starts, beginnings=topic.beginnings)
    assert (done.documents, done.messages, topic.asked) == (0, 0, [])
    off = Service(training, n_shards=2, recent_documents=0)
    assert restore_document_store(settings, off, partitions=2, read=topic.read).documents == 0


def test_at_most_the_limit_whatever_the_store_holds(training: TrainingSet) -> None:
    settings = Settings(topic_prefix="sift.", partitions=2)
    topic = FakeTopic({0: 50, 1: 50})
    svc = Service(training, n_shards=2, recent_documents=1000)
    done = restore_document_store(settings, svc, limit=10, partitions=2, read=topic.read,
                                  starts=topic.starts, beginnings=topic.beginnings)
    assert done.documents == 10 and sorted(svc.store.ids())[:2] == ["d0-45", "d0-46"]


def test_rounds_go_back_until_each_partition_has_its_share(training: TrainingSet) -> None:
    settings = Settings(topic_prefix="sift.", partitions=1)
    svc = Service(training, n_shards=1, recent_documents=3000)
    topic = FakeTopic({0: 5000})
    done = restore_document_store(settings, svc, partitions=1, read=topic.read,
                                  starts=topic.starts, beginnings=topic.beginnings)
    # the first round 100 messages; the next sized by the documents still needed and the
    # documents a message seen so far
    assert topic.asked == [[("sift.documents", 0, 4900, 5000)], [("sift.documents", 0, 2000, 4900)]]
    assert done.documents == 3000 and next(iter(svc.store.ids())) == "d0-2000"


def test_batched_messages_are_not_read_beyond_the_need(training: TrainingSet) -> None:
    """Messages of 100 documents: after the first round, only the messages still needed."""
    settings = Settings(topic_prefix="sift.", partitions=1)
    svc = Service(training, n_shards=1, recent_documents=25_000)
    asked: list[Any] = []

    def read(settings: Settings, ranges: list[tuple[str, int, int, int]], timeout: float) -> list[Any]:
        asked.append(ranges)
        return [(t, p, o, None, orjson.dumps({"documents": [
            {"id": f"d{o}-{i}", "text": "wheat"} for i in range(100)]}))
            for t, p, a, b in ranges for o in range(a, b)]

    done = restore_document_store(settings, svc, partitions=1, read=read,
                                  starts=lambda s, parts: {parts[0]: 100_000},
                                  beginnings=lambda s, parts: {parts[0]: 0})
    assert asked == [[("sift.documents", 0, 99_900, 100_000)], [("sift.documents", 0, 99_750, 99_900)]]
    assert done.documents == 25_000 and done.messages == 250


def test_a_second_read_back_reads_only_what_was_committed_since_the_first(
        training: TrainingSet) -> None:
    """A refill (a hot standby given shards) after the start's restore reads only above
    the offsets that restore went up to (``Service.restored_to``): nothing when the group
    committed nothing since (a start whose first assignment was empty), the new
    documents only when it did."""
    from sift.agents.restore import read_recent_documents

    svc = Service(training, n_shards=2, recent_documents=100)
    topic = FakeTopic({0: 30, 1: 10})
    kw: dict[str, Any] = {"partitions": 2, "read": topic.read, "starts": topic.starts,
                          "beginnings": topic.beginnings}
    assert restore_document_store(Settings(), svc, **kw).documents == 40
    assert svc.restored_to == {("sift.documents", 0): 30, ("sift.documents", 1): 10}
    asked = len(topic.asked)
    docs, messages, tops = read_recent_documents(Settings(), svc, since=svc.restored_to, **kw)
    assert (docs, messages, len(topic.asked)) == ([], 0, asked)  # not one read
    assert tops == svc.restored_to
    topic.sizes = {0: 33, 1: 10}  # the group went on on partition 0 meanwhile
    docs, messages, tops = read_recent_documents(Settings(), svc, since=svc.restored_to, **kw)
    assert [d.id for d in docs] == ["d0-30", "d0-31", "d0-32"] and messages == 3
    assert tops == {("sift.documents", 0): 33, ("sift.documents", 1): 10}
