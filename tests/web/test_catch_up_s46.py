"""sift web while it reads what the topics held when it started (forty-sixth session).

A restarted ``sift web`` answered 404 "no profile 'wheat'" for a profile that exists,
for as long as reading the profiles topic and the changelog took: CI's secured-broker
test saw it. The feed now takes the end offsets of what existed at start and tells the
state how much is left; until it has caught up once, a name not seen is answered 503
with ``Retry-After``, not 404, and ``/api/stats`` says ``caught_up``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import namedtuple
from typing import Any

import orjson
from aiohttp.test_utils import TestClient

from sift.settings import Settings
from sift.web.feed import KafkaFeed
from sift.web.state import WebState

from .conftest import Recorder, fill
from .test_app import with_client

TP = namedtuple("TP", "topic partition")
Record = namedtuple("Record", "key value timestamp")


class FakeConsumer:
    """What :meth:`KafkaFeed.behind` and ``_consume`` use of an aiokafka consumer."""

    def __init__(self, existing: set[str], ends: dict[TP, int]) -> None:
        self.existing = existing
        self.ends = dict(ends)
        self.assigned: set[TP] = set()
        self.positions: dict[TP, int] = {}
        self.batches: list[dict[TP, list[Record]]] = []
        self.end_calls = 0

    async def topics(self) -> set[str]:
        return set(self.existing)

    def assignment(self) -> set[TP]:
        return set(self.assigned)

    async def end_offsets(self, tps: list[TP]) -> dict[TP, int]:
        self.end_calls += 1
        return {tp: self.ends[tp] for tp in tps}

    async def position(self, tp: TP) -> int:
        if tp not in self.assigned:
            raise AssertionError(f"position of {tp}, not assigned")  # aiokafka raises too
        return self.positions.get(tp, 0)

    async def getmany(self, timeout_ms: int, max_records: int) -> dict[TP, list[Record]]:
        if self.batches:
            batch = self.batches.pop(0)
            for tp, records in batch.items():
                self.positions[tp] = self.positions.get(tp, 0) + len(records)
            return batch
        await asyncio.sleep(0.001)
        return {}


def feed_over(consumer: FakeConsumer) -> KafkaFeed:
    feed = KafkaFeed(Settings(topic_prefix="t."), WebState())
    feed.consumer = consumer
    return feed


def test_behind_waits_for_every_existing_topic_then_counts_down_to_the_start_ends() -> None:
    profiles, docs = TP("t.profiles", 0), TP("t.documents", 1)
    consumer = FakeConsumer({"t.profiles", "t.documents", "other"},
                            {profiles: 40, docs: 7, TP("other", 0): 99})
    feed = feed_over(consumer)

    async def go() -> list[int | None]:
        out = [await feed.behind()]
        consumer.assigned = {profiles}  # the pattern has matched one topic so far
        out.append(await feed.behind())
        consumer.assigned = {profiles, docs}
        out.append(await feed.behind())
        consumer.positions = {profiles: 30, docs: 7}
        consumer.ends[profiles] = 5_000  # written after the start: not waited for
        out.append(await feed.behind())
        consumer.positions[profiles] = 40
        out.append(await feed.behind())
        return out

    assert asyncio.run(go()) == [None, None, 47, 10, 0]
    assert consumer.end_calls == 1 and feed.targets == {profiles: 40, docs: 7}


def test_a_topic_deleted_while_reading_is_not_waited_for() -> None:
    profiles, docs = TP("t.profiles", 0), TP("t.documents", 0)
    consumer = FakeConsumer({"t.profiles", "t.documents"}, {profiles: 3, docs: 9})
    consumer.assigned = {profiles, docs}
    feed = feed_over(consumer)

    async def go() -> list[int | None]:
        out = [await feed.behind()]
        consumer.existing.discard("t.documents")
        consumer.assigned.discard(docs)
        out.append(await feed.behind())
        return out

    assert asyncio.run(go()) == [12, 3]


def test_no_topic_yet_is_caught_up_at_once() -> None:
    """A web started before any worker created the topics has nothing to catch up on."""
    feed = feed_over(FakeConsumer({"unrelated"}, {}))
    assert asyncio.run(feed.behind()) == 0


def test_the_feed_marks_the_state_caught_up_once_it_has_read_the_start() -> None:
    profiles = TP("t.profiles", 0)
    consumer = FakeConsumer({"t.profiles"}, {profiles: 2})
    consumer.assigned = {profiles}
    consumer.batches = [{profiles: [Record(b"p1", orjson.dumps({"profile": "p1", "query": "a b"}), 1000)]},
                        {profiles: [Record(b"p2", orjson.dumps({"profile": "p2", "query": "c d"}), 1000)]}]
    feed = feed_over(consumer)
    seen: list[tuple[bool, int | None, bool]] = []

    async def go() -> None:
        task = asyncio.create_task(feed._consume())
        try:
            for _ in range(200):
                st = feed.state
                seen.append((st.caught_up, st.behind, st.known("p2")))
                if st.caught_up:
                    break
                await asyncio.sleep(0)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    asyncio.run(go())
    assert seen[0] == (False, None, False)
    assert (False, 1, False) in seen  # one of the two read
    assert seen[-1] == (True, 0, True)  # caught up: p2 known by then
    assert feed.state.snapshot()["caught_up"] is True


def test_while_catching_up_an_unknown_name_is_503_with_retry_after_then_404(
        settings: Settings, recorder: Recorder) -> None:
    state = WebState()
    fill(state)
    state.set_behind(1234)
    token = {"Authorization": f"Bearer {settings.api_token}"}

    async def go(client: TestClient) -> list[tuple[int, str, Any]]:
        out = []
        requests: list[tuple[str, str, Any]] = [
            ("GET", "/api/profiles/wheat", None), ("GET", "/api/pending?profile=wheat", None),
            ("DELETE", "/api/profiles/wheat", None),
            ("POST", "/api/judgments", {"doc_id": "d0", "profile": "wheat", "relevant": True}),
            ("GET", "/api/profiles/earn", None), ("GET", "/api/stats", None)]
        for method, path, body in requests:
            resp = await client.request(method, path, json=body, headers=token)
            out.append((resp.status, resp.headers.get("Retry-After", ""), await resp.json()))
        page = await client.get("/judge/wheat")
        out.append((page.status, page.headers.get("Retry-After", ""), await page.text()))
        state.set_behind(0)
        for path in ("/api/profiles/wheat", "/api/pending?profile=wheat"):
            resp = await client.get(path)
            out.append((resp.status, resp.headers.get("Retry-After", ""), await resp.json()))
        page = await client.get("/judge/wheat")
        out.append((page.status, page.headers.get("Retry-After", ""), await page.text()))
        return out

    got = with_client(state, settings, recorder, go, caught_up=False)
    for status, retry, body in got[:4]:
        assert (status, retry) == (503, "2")
        assert body["error"].endswith("yet: sift web is still reading the topics, 1234 messages "
                                      "to go; try again shortly")
        assert "'wheat'" in body["error"]
    assert got[4][0] == 200 and got[4][2]["profile"] == "earn"  # a profile read is served
    assert got[5][0] == 200 and got[5][2]["caught_up"] is False and got[5][2]["behind"] == 1234
    assert got[6][:2] == (503, "2") and "still reading the topics" in got[6][2]
    assert [(s, r, b["error"]) for s, r, b in got[7:9]] == [
        (404, "", "no profile 'wheat'"), (404, "", "no profile or review 'wheat'")]
    assert got[9][:2] == (404, "") and "still reading" not in got[9][2]
    assert recorder.sent == []  # nothing published for a name not known


def test_the_dashboard_says_it_is_still_reading(settings: Settings, recorder: Recorder) -> None:
    state = WebState()
    fill(state)
    state.set_behind(1234)

    async def go(client: TestClient) -> list[str]:
        before = await (await client.get("/")).text()
        state.set_behind(0)
        return [before, await (await client.get("/")).text()]

    before, after = with_client(state, settings, recorder, go, caught_up=False)
    line = ("Still reading the topics: 1234 messages to go; profiles not read yet are not "
            "listed.</p>")
    assert '<p class="help" id="catching-up" role="status">' + line in before
    assert '<p class="help" id="catching-up" role="status" hidden>Still reading the topics; ' in after
