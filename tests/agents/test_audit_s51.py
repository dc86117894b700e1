"""The fifty-first session's audit of the tail watch's busy marks (fiftieth session,
docs/reliability.md item 81): an agent that leaves a batch by an exception or by being
cancelled, without closing the batches itself, does not leave its topic marked busy
for good (which would hide a lost tail for good). Checked and right."""

from __future__ import annotations

import asyncio

import pytest

from sift.agents.app import take_events
from sift.agents.tails import BusyTopics, PartitionView, TailWatch
from tests.agents.test_tails import _Event, _Stream


def _stall_is_reported(busy: BusyTopics) -> bool:
    """A partition of the topic whose tail never came, looked at over 20 s."""
    w = TailWatch(stall_s=10)
    topic = "judgments"
    due = []
    for t in range(0, 21, 5):
        v = PartitionView(topic, 1, 900, 500, None, busy=topic in busy,
                          batches=busy.finished(topic))
        due += w.check([v], now=float(t))
    return due == [(topic, 1, 501)]


@pytest.mark.parametrize("how", ["raises", "cancelled"])
def test_checked_an_agent_leaving_a_batch_leaves_its_topic(how: str) -> None:
    busy = BusyTopics()

    async def agent() -> None:
        async for _batch in take_events(_Stream([[_Event("judgments")]] * 2, then_wait=True), 10,  # type: ignore[arg-type]
                                        within=0.1, busy=busy):
            assert "judgments" in busy
            if how == "raises":
                raise RuntimeError("a bug in the batch")
            await asyncio.sleep(3600)

    async def main() -> None:
        task = asyncio.ensure_future(agent())
        await asyncio.sleep(0.01)
        if how == "cancelled":
            task.cancel()
        with pytest.raises(RuntimeError if how == "raises" else asyncio.CancelledError):
            await task
        for _ in range(3):  # the event loop closes the abandoned batches
            await asyncio.sleep(0)
        assert "judgments" not in busy
        assert busy.finished("judgments") == 1

    asyncio.run(main())
    assert _stall_is_reported(busy)


def test_checked_a_topic_left_busy_would_hide_the_stall() -> None:
    """What the test above guards against: the same look with the mark left set."""
    busy = BusyTopics()
    busy.enter(["judgments"])
    assert not _stall_is_reported(busy)
