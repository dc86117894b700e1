"""Re-delivery skipping after a rebalance: only messages this worker processed are skipped.

``benchmarks/rebalance.py`` lost 15 decisions when the skip was "offset at or below the
highest one processed": after a rebalance Faust can hand a prefetched message from past
the committed offset to the stream first and then seek back (faust-streaming#221), and
the messages in between were then skipped although nobody had processed them.
"""

from __future__ import annotations

import orjson
import pytest

from sift.agents import service as service_module
from sift.agents.service import InputMessage, Service, TrainingSet

pytestmark = pytest.mark.reliability


def doc_message(i: int, offset: int, partition: int = 0) -> InputMessage:
    value = orjson.dumps({"id": f"d{i}", "text": f"wheat grain harvest {i}"})
    return InputMessage(value, "documents", partition, offset)


@pytest.fixture
def service() -> Service:
    return Service(TrainingSet.load(None), n_shards=2)


def test_a_message_delivered_out_of_order_does_not_hide_the_ones_before_it(
        service: Service) -> None:
    # prefetched offset 10 arrives first, then the seek back delivers 7, 8, 9 (and 10 again)
    assert service.route([doc_message(10, 10)]).n_documents == 1
    again = service.route([doc_message(i, i) for i in (7, 8, 9, 10)])
    assert again.n_documents == 3  # 7, 8, 9 scored; only 10 is a re-delivery
    assert service.stats["redelivered_skipped"] == 1
    assert service.stats["documents"] == 4


def test_redelivered_messages_are_skipped_per_partition(service: Service) -> None:
    service.route([doc_message(i, i) for i in range(5)])
    assert service.route([doc_message(i, i) for i in range(5)]).n_documents == 0
    assert service.route([doc_message(i, i, partition=1) for i in range(5)]).n_documents == 5
    assert service.stats["redelivered_skipped"] == 5


def test_remembered_offsets_are_bounded(service: Service, monkeypatch: pytest.MonkeyPatch
                                        ) -> None:
    monkeypatch.setattr(service_module, "MAX_PROCESSED_OFFSETS", 100)
    service.processed([InputMessage(b"", "shard", 0, o) for o in range(1_000)])
    offsets, order = service._done[("shard", 0)]
    assert len(offsets) == len(order) == 100
    assert min(offsets) == 900  # the most recent are kept
