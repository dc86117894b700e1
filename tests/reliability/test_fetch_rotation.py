"""``rotate_fetched_partitions``: a partition with a deep prefetched backlog no longer gets
every poll to itself (docs/faust-notes.md, "One partition's backlog starves every other
agent"). Without a broker: the fetcher's draining rule is reproduced by a stand-in with
aiokafka's semantics (serve prefetched results in order, stop at ``max_records``).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

import pytest
from aiokafka.consumer.fetcher import Fetcher

from sift.agents.app import rotate_fetched_partitions

pytestmark = pytest.mark.reliability


async def in_order(self: Any, partitions: Any, timeout: float = 0,
                   max_records: int | None = None) -> dict[str, list[int]]:
    """aiokafka's rule: prefetched results in arrival order, at most ``max_records``."""
    drained: dict[str, list[int]] = {}
    for tp in list(self._records):
        if partitions and tp not in partitions:
            continue
        left = self._records[tp]
        n = len(left) if max_records is None else min(max_records, len(left))
        drained[tp], self._records[tp] = left[:n], left[n:]
        if not self._records[tp]:
            del self._records[tp]
        if max_records is not None:
            max_records -= n
            if max_records == 0:
                break
    return drained


class FakeFetcher:
    def __init__(self, records: dict[str, list[int]]) -> None:
        self._records = OrderedDict(records)


def polls(n: int, fetcher: FakeFetcher, max_records: int) -> list[list[str]]:
    async def run() -> list[list[str]]:
        return [list(await Fetcher.fetched_records(fetcher, {"judgments", "documents"},  # type: ignore[arg-type]
                                                   0, max_records=max_records))
                for _ in range(n)]

    return asyncio.run(run())


def test_without_rotation_the_first_backlog_takes_every_poll(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Fetcher, "fetched_records", in_order)
    fetcher = FakeFetcher({"judgments": list(range(10_000)), "documents": list(range(50))})
    assert polls(5, fetcher, 800) == [["judgments"]] * 5


def test_rotation_gives_every_partition_its_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Fetcher, "fetched_records", in_order)
    rotate_fetched_partitions()
    rotate_fetched_partitions()  # idempotent: wrapped once
    fetcher = FakeFetcher({"judgments": list(range(10_000)), "documents": list(range(50))})
    served = polls(4, fetcher, 800)
    assert served[0] == ["judgments"] and served[1][0] == "documents"
    # nothing lost or repeated: the records come out in order, each once
    fetcher = FakeFetcher({"judgments": list(range(2_000)), "documents": list(range(300))})
    out: dict[str, list[int]] = {"judgments": [], "documents": []}

    async def drain() -> None:
        while fetcher._records:
            for tp, recs in (await Fetcher.fetched_records(  # type: ignore[arg-type]
                    fetcher, set(out), 0, max_records=256)).items():
                out[tp] += recs

    asyncio.run(drain())
    assert out == {"judgments": list(range(2_000)), "documents": list(range(300))}
