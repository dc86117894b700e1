"""What a worker keeps across a rebalance (fifty-fourth session, a helper's audit of the
per-shard, per-partition and per-profile state a worker process holds in memory when
partitions are revoked, move to another worker and come back). Each test failed before
its fix.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import weakref
from typing import Any

import orjson
import pytest
from faust.types import TP

from sift.agents.review import ReviewService
from sift.agents.service import InputMessage, Service, TrainingSet, shard_of
from tests.agents.offline import offline_worker, training_set

P = 2
#: review names on each of the two shards
ON_0, ON_1 = "a", "d"
REVIEW_PARAMS = {"draws": 10, "n_top": 5, "min_batches": 3, "n_negatives": 30,
                 "random_state": 0}


@pytest.fixture(scope="module")
def training() -> TrainingSet:
    return training_set()


def review_spec(name: str, offset: int = 0) -> InputMessage:
    return InputMessage(orjson.dumps({"profile": name, "mode": "review",
                                      "query": "wilson disease therapy",
                                      "params": REVIEW_PARAMS}),
                        "profiles", shard_of(name, P), offset, name.encode())


def review_documents(name: str, n: int = 40) -> InputMessage:
    from sift.topics.review import ReviewDocuments, encode_review

    ids = tuple(f"{name}-d{i}" for i in range(n))
    texts = tuple(f"document {i} about copper" + (" wilson disease" if i % 4 == 0 else "")
                  for i in range(n))
    return InputMessage(encode_review(ReviewDocuments(name, ids, texts)), "review-documents",
                        shard_of(name, P), 0, name.encode())


def assigned_only(worker: Any, partitions: set[int]) -> set[TP]:
    """An assignment of ``partitions`` of every table's changelog and every input topic."""
    topics = [t.changelog_topic.get_topic_name() for t in worker.app.tables.values()]
    topics += [t.get_topic_name() for t in worker.topics.values()]
    return {TP(t, p) for t in topics for p in partitions}


# ------------------------------------------------------------------------------ 1
def test_a_review_whose_partition_moved_away_is_not_kept_decoded(tmp_path: Any) -> None:
    """The review service kept every review it had decoded (``ReviewService._cache``: the
    review's texts, its model) for as long as the process lived, also once its partition
    had moved to another worker: a worker that had held a large review once carried it
    for good (and a review deleted by the other worker meanwhile). Nothing of it could be
    used again: when the partition comes back, recovery puts new values in the table and
    the review is decoded from them. Now a rebalance's assignment drops the reviews of the
    partitions not assigned; those of the partitions kept stay decoded."""
    worker = offline_worker(str(tmp_path), P)
    hooks = worker.reviews
    assert shard_of(ON_0, P) == 0 and shard_of(ON_1, P) == 1

    async def run() -> None:
        for name in (ON_0, ON_1):
            await hooks.emit(await hooks.run(hooks.service.apply_specs, [review_spec(name)],
                                             "specs"))
            await hooks.emit(await hooks.run(hooks.service.add_documents,
                                             [review_documents(name)], "documents"))

    asyncio.run(run())
    assert hooks.service.stats["reviews_created"] == 2
    moved = hooks.service.entry(ON_1, hooks.table)
    kept = hooks.service.entry(ON_0, hooks.table)
    assert moved is not None and kept is not None and moved.review.n_documents == 40
    gone = weakref.ref(moved.review)
    del moved

    # the rebalance: this worker keeps partition 0, partition 1 goes to another worker
    asyncio.run(worker.app.on_partitions_assigned.send(assigned_only(worker, {0})))
    gc.collect()
    assert gone() is None, "the review of the partition that moved is still held"
    assert hooks.service.entry(ON_0, hooks.table) is kept  # not decoded again

    # the partition comes back (its values as recovery reads them): decoded from the table
    raw = hooks.table[ON_1]
    hooks.table[ON_1] = bytes(bytearray(raw))
    back = hooks.service.entry(ON_1, hooks.table)
    assert back is not None and back.review.n_documents == 40


# ------------------------------------------------------------------------------ 2
#: a profile or review record no worker can read (a damaged value, a newer version's), of
#: some size: a newer worker's record of a large profile can take MBs
UNUSABLE_RECORD = b'{"format": 99, "pad": "' + b"x" * 100_000 + b'"}'


def recovered(value: bytes) -> bytes:
    """``value`` as recovery puts it in the table: equal, another object."""
    copy = bytes(bytearray(value))
    assert copy == value and copy is not value
    return copy


def profile_spec(name: str, offset: int = 0, **fields: Any) -> InputMessage:
    return InputMessage(orjson.dumps({"profile": name, "query": name, **fields}), "profiles",
                        shard_of(name, P), offset, name.encode())


def test_an_unusable_profile_record_read_again_is_counted_and_logged_once(
        training: TrainingSet, caplog: pytest.LogCaptureFixture) -> None:
    """A profile record that does not decode is logged and counted once per value
    (``bad_state``, ``sift_worker_bad_state_total``: "logged once each"). The value was
    remembered by identity, and a partition that comes back after a rebalance has every
    value read again from its changelog, as a new object: the same record was logged and
    counted again at every such rebalance."""
    svc = Service(training, n_shards=P, journal={})
    table = {"wheat": UNUSABLE_RECORD}
    with caplog.at_level(logging.WARNING, logger="sift.worker"):
        assert svc.entry("wheat", table) is None
        table["wheat"] = recovered(UNUSABLE_RECORD)  # the partition moved and came back
        assert svc.entry("wheat", table) is None
    assert svc.stats["bad_state"] == 1
    assert len([r for r in caplog.records if "unusable state record" in r.getMessage()]) == 1
    # another value is another record: said again
    table["wheat"] = UNUSABLE_RECORD + b" "
    assert svc.entry("wheat", table) is None and svc.stats["bad_state"] == 2


def test_an_unusable_review_record_read_again_is_counted_and_logged_once(
        caplog: pytest.LogCaptureFixture) -> None:
    """The same for review mode (``review_bad_state``)."""
    svc = ReviewService(n_shards=P)
    table = {ON_0: UNUSABLE_RECORD}
    with caplog.at_level(logging.WARNING, logger="sift.worker"):
        assert svc.entry(ON_0, table) is None
        table[ON_0] = recovered(UNUSABLE_RECORD)
        assert svc.entry(ON_0, table) is None
    assert svc.stats["review_bad_state"] == 1
    assert len([r for r in caplog.records if "unusable state record" in r.getMessage()]) == 1


def test_an_unusable_profile_record_is_not_held_once_deleted_or_rebuilt(
        training: TrainingSet) -> None:
    """The unusable value stayed referenced by the service (``Service._bad``) after the
    profile was deleted, or rebuilt by its spec sent again (what its dead letters advise),
    until the process ended: up to a record's 16 MiB each."""
    for rebuild in (False, True):
        value = recovered(UNUSABLE_RECORD)
        alone = sys.getrefcount(value)
        svc = Service(training, n_shards=P, journal={})
        table = {"wheat": value}
        assert svc.entry("wheat", table) is None and svc.stats["bad_state"] == 1
        msg = profile_spec("wheat") if rebuild else profile_spec("wheat", delete=True)
        out = svc.apply_specs([msg], table)
        assert not out.dead_letters and out.changed == ["wheat"]
        assert ("wheat" in table) is rebuild
        assert sys.getrefcount(value) == alone, "the unusable value is still held"


def test_an_unusable_review_record_is_not_held_once_deleted_or_rebuilt() -> None:
    """The same for review mode."""
    for rebuild in (False, True):
        value = recovered(UNUSABLE_RECORD)
        alone = sys.getrefcount(value)
        svc = ReviewService(n_shards=P)
        table = {ON_0: value}
        assert svc.entry(ON_0, table) is None and svc.stats["review_bad_state"] == 1
        msg = review_spec(ON_0) if rebuild else InputMessage(
            orjson.dumps({"profile": ON_0, "mode": "review", "delete": True}), "profiles",
            shard_of(ON_0, P), 1, ON_0.encode())
        out = svc.apply_specs([msg], table)
        assert not out.dead_letters
        assert (ON_0 in table) is rebuild
        assert sys.getrefcount(value) == alone, "the unusable value is still held"


# ------------------------------------------------------------------------------ 3
def test_a_worker_between_revocation_and_assignment_reports_no_partition(
        tmp_path: Any) -> None:
    """``/sift/stats`` "partitions" and ``sift_worker_shards`` are the consumer's
    assignment, and aiokafka keeps the previous one from the revocation until the group
    hands out the next (``SubscriptionState.begin_reassignment`` only marks it): while a
    rebalance waited for the group (a member finishing a long batch, a member joining),
    a worker that had given up all its partitions (Faust's eager protocol revokes every
    one) still reported them held. It now reports none until the next assignment."""
    from unittest.mock import Mock

    from sift.agents.app import SHARD_TOPIC

    worker = offline_worker(str(tmp_path), P)
    shard_topic = worker.settings.topic(SHARD_TOPIC)
    held = {TP(shard_topic, 0), TP(shard_topic, 1)}
    consumer = worker.app.consumer = Mock()
    consumer.assignment.return_value = held  # aiokafka's, from here until the next

    def shards() -> float:
        line = next(x for x in worker.metrics_text().splitlines()
                    if x.startswith("sift_worker_shards "))
        return float(line.split()[1])

    assert worker.stats()["partitions"] == [0, 1] and shards() == 2
    asyncio.run(worker.app.on_partitions_revoked.send(held))
    assert worker.stats()["partitions"] == [] and shards() == 0
    consumer.assignment.return_value = {TP(shard_topic, 1)}
    asyncio.run(worker.app.on_partitions_assigned.send({TP(shard_topic, 1)}))
    assert worker.stats()["partitions"] == [1] and shards() == 1
