"""TailWatch: which input partitions to seek back because their last messages never
arrived (no broker: the decision only)."""

from __future__ import annotations

import asyncio
from typing import Any

from sift.agents.tails import BusyTopics, PartitionView, TailWatch


def view(last: int | None, hw: int | None, committed: int | None = None,
         partition: int = 0) -> PartitionView:
    return PartitionView("documents", partition, hw, last, committed)


def test_a_partition_that_keeps_moving_is_never_reported() -> None:
    w = TailWatch(stall_s=10)
    for t in range(60):
        assert w.check([view(100 + t, 200)], now=float(t)) == []


def test_a_partition_stuck_behind_is_reported_once_after_the_stall() -> None:
    w = TailWatch(stall_s=10)
    assert w.check([view(349, 352)], now=0.0) == []
    assert w.check([view(349, 352)], now=9.9) == []
    assert w.check([view(349, 352)], now=10.0) == [("documents", 0, 350)]
    assert w.check([view(349, 352)], now=15.0) == []  # watched afresh
    assert w.check([view(349, 352)], now=24.9) == []
    assert w.check([view(349, 352)], now=25.0) == [("documents", 0, 350)]


def test_a_partition_at_its_high_water_mark_is_not_behind() -> None:
    w = TailWatch(stall_s=1)
    for t in range(5):
        assert w.check([view(351, 352), view(None, None, partition=1),
                        view(None, 0, committed=0, partition=2)], now=float(t)) == []


def test_nothing_seen_since_the_assignment_falls_back_to_the_committed_offset() -> None:
    """A partition taken over whose remaining messages never came: nothing seen, so the
    first missing offset is the committed one."""
    w = TailWatch(stall_s=5)
    assert w.check([view(None, 40, committed=30)], now=0.0) == []
    assert w.check([view(None, 40, committed=30)], now=5.0) == [("documents", 0, 30)]
    # neither seen nor committed: nothing to compare with, nothing reported
    w = TailWatch(stall_s=5)
    assert w.check([view(None, 40)], now=0.0) == []
    assert w.check([view(None, 40)], now=50.0) == []


def test_nothing_seen_and_never_committed_falls_back_to_the_groups_start() -> None:
    """A partition the group never committed whose messages never came at all (seen: a
    fresh worker on a backlog got nothing of one documents partition for a minute): the
    start the broker gave at the assignment (the log's first offset) is expected first."""
    w = TailWatch(stall_s=5)
    stuck = PartitionView("documents", 3, highwater=750, last_seen=None, committed=None,
                          start=0)
    assert w.check([stuck], now=0.0) == []
    assert w.check([stuck], now=5.0) == [("documents", 3, 0)]
    # a commit known here wins over the start asked at the assignment
    w = TailWatch(stall_s=5)
    moved_on = PartitionView("documents", 3, highwater=750, last_seen=None, committed=700,
                             start=0)
    assert w.check([moved_on], now=0.0) == []
    assert w.check([moved_on], now=5.0) == [("documents", 3, 700)]
    # nothing on the broker past the start: not behind
    w = TailWatch(stall_s=5)
    empty = PartitionView("documents", 3, highwater=12, last_seen=None, committed=None,
                          start=12)
    assert w.check([empty], now=0.0) == [] and w.check([empty], now=50.0) == []


def test_reset_and_revoked_partitions_start_the_clock_again() -> None:
    w = TailWatch(stall_s=10)
    w.check([view(5, 9)], now=0.0)
    w.reset()
    assert w.check([view(5, 9)], now=10.0) == []
    assert w.check([], now=15.0) == []  # revoked: forgotten
    assert w.check([view(5, 9)], now=20.0) == []
    assert w.check([view(5, 9)], now=30.0) == [("documents", 0, 6)]


def test_a_hole_below_the_acknowledged_offsets_is_reported_at_the_committed_offset() -> None:
    """Offsets 600.. acknowledged, 1..599 missing below them: the commit cannot move."""
    w = TailWatch(stall_s=10)
    stuck = PartitionView("judgments", 1, highwater=1200, last_seen=1199, committed=1,
                          acked_min=600)
    assert w.check([stuck], now=0.0) == []
    assert w.check([stuck], now=10.0) == [("judgments", 1, 1)]
    # the commit moving on (the missing offset acknowledged) is progress, not a hole
    w = TailWatch(stall_s=10)
    w.check([stuck], now=0.0)
    moved = PartitionView("judgments", 1, highwater=1200, last_seen=1199, committed=1200)
    assert w.check([moved], now=10.0) == []
    # acknowledged offsets starting at the committed one are no hole
    ok = PartitionView("judgments", 1, highwater=1200, last_seen=1199, committed=600,
                       acked_min=600)
    assert w.check([ok], now=0.0) == [] and w.check([ok], now=60.0) == []


# -- a partition waiting behind its agent's long batch (fiftieth session) -------------


def busy_view(last: int, hw: int, busy: bool) -> PartitionView:
    return PartitionView("judgments", 0, hw, last, None, busy=busy)


def test_a_partition_behind_a_long_batch_is_not_reported() -> None:
    """The soak's judgments: a batch of a busy worker took more than the stall, and the
    watch sought the partition back to the batch's end (43 times in 15 minutes). Behind
    a batch in progress the partition is not stalled."""
    w = TailWatch(stall_s=10)
    for t in range(0, 60, 2):
        assert w.check([busy_view(500, 900, busy=True)], now=float(t)) == []
    # the batch ended and nothing came after it: a lost tail, 10 s after the last busy look
    assert w.check([busy_view(500, 900, busy=False)], now=60.0) == []
    assert w.check([busy_view(500, 900, busy=False)], now=67.9) == []
    assert w.check([busy_view(500, 900, busy=False)], now=68.0) == [("judgments", 0, 501)]


def test_an_agent_busy_with_other_partitions_does_not_hide_a_lost_tail() -> None:
    """The agent serves the topic's other partitions batch after batch (busy at every
    look): once it has finished a batch since the partition last moved, the stall's
    time counts, and the partition whose last messages never came is reported."""
    w = TailWatch(stall_s=10)
    for t in range(0, 10, 2):
        v = PartitionView("documents", 3, 900, 500, None, busy=True, batches=40 + t)
        assert w.check([v], now=float(t)) == []
    v = PartitionView("documents", 3, 900, 500, None, busy=True, batches=60)
    assert w.check([v], now=10.0) == [("documents", 3, 501)]


def test_a_hole_below_the_acknowledged_offsets_waits_for_the_batch_too() -> None:
    w = TailWatch(stall_s=5)
    v = PartitionView("judgments", 0, 700, 650, 400, acked_min=450, busy=True)
    assert [w.check([v], now=float(t)) for t in range(0, 20, 5)] == [[], [], [], []]
    idle = PartitionView("judgments", 0, 700, 650, 400, acked_min=450)
    assert w.check([idle], now=19.9) == []  # the last busy look was at 15
    assert w.check([idle], now=20.0) == [("judgments", 0, 400)]


class _Event:
    def __init__(self, topic: str) -> None:
        self.message = type("M", (), {"topic": topic})()


class _Stream:
    """What ``take_events`` reads of a Faust stream: ``take_events(n, within)``; after its
    batches, the end of the stream, or with ``then_wait`` no more input (as a live one)."""

    def __init__(self, batches: list[list[_Event]], *, then_wait: bool = False) -> None:
        self.batches = batches
        self.then_wait = then_wait

    async def take_events(self, n: int, within: float):  # type: ignore[no-untyped-def]
        for b in self.batches:
            yield b
        if self.then_wait:
            await asyncio.Event().wait()


def test_take_events_marks_the_topics_of_the_batch_in_progress() -> None:
    import asyncio

    from sift.agents.app import take_events
    from sift.agents.tails import BusyTopics

    busy = BusyTopics()
    seen: list[tuple[bool, bool]] = []

    async def agent() -> None:
        stream = _Stream([[_Event("judgments")], [_Event("judgments"), _Event("documents")]])
        async for _batch in take_events(stream, 10, within=0.1, busy=busy):  # type: ignore[arg-type]
            seen.append(("judgments" in busy, "documents" in busy))
            await asyncio.sleep(0)
        seen.append(("judgments" in busy, "documents" in busy))

    asyncio.run(agent())
    assert seen == [(True, False), (True, True), (False, False)]
    assert (busy.finished("judgments"), busy.finished("documents")) == (2, 1)


def test_take_events_leaves_the_topics_when_the_agent_stops_in_a_batch() -> None:
    import asyncio

    from sift.agents.app import take_events
    from sift.agents.tails import BusyTopics

    busy = BusyTopics()

    async def agent() -> None:
        batches = take_events(_Stream([[_Event("documents")]] * 3), 10, within=0.1,  # type: ignore[arg-type]
                              busy=busy)
        async for _batch in batches:
            assert "documents" in busy
            break
        await batches.aclose()  # type: ignore[attr-defined]

    asyncio.run(agent())
    assert "documents" not in busy


def test_an_idle_agent_has_a_partition_behind_sought_back_sooner() -> None:
    """A worker whose agents take no batch at all while a partition stands behind its
    high-water mark waits for input that is on the broker: reported after
    ``idle_stall_s``, not ``stall_s`` (fifty-first session: a worker starting on a backlog
    waited 10 s with nothing to do for a partition's last messages, which Faust had
    lost)."""
    w = TailWatch(stall_s=10, idle_stall_s=3)
    idle = PartitionView("documents", 1, 900, 500, None)
    assert [w.check([idle], now=float(t)) for t in (0, 2)] == [[], []]
    assert w.check([idle], now=3.0) == [("documents", 1, 501)]


def test_another_agent_at_work_is_no_idleness() -> None:
    """A batch of another topic's agent (in progress, or finished since the clock started)
    can hold this topic's input back (a batch of judgments holds the event loop and, with
    it, Faust's delivery of documents: finding 24): ``stall_s`` applies."""
    w = TailWatch(stall_s=10, idle_stall_s=3)
    judging = PartitionView("documents", 1, 900, 500, None, worker_busy=True)
    assert [w.check([judging], now=float(t)) for t in (0, 2, 4, 6, 8)] == [[]] * 5
    assert w.check([judging], now=10.0) == [("documents", 1, 501)]
    w = TailWatch(stall_s=10, idle_stall_s=3)
    assert w.check([PartitionView("documents", 1, 900, 500, None, worker_batches=7)],
                   now=0.0) == []
    done = PartitionView("documents", 1, 900, 500, None, worker_batches=8)
    assert [w.check([done], now=float(t)) for t in (2, 4, 9.9)] == [[], [], []]
    assert w.check([done], now=10.0) == [("documents", 1, 501)]


def test_busy_topics_say_whether_any_agent_works() -> None:
    busy = BusyTopics()
    assert not busy and busy.finished_all() == 0
    busy.enter(["judgments"])
    assert busy
    busy.leave(["judgments"])
    busy.enter(["documents"])
    busy.leave(["documents"])
    assert not busy and busy.finished_all() == 2


def test_an_agent_taking_batches_is_not_idle() -> None:
    """Batches of the topic's other partitions (finished, or one in progress) are not
    idleness: the partition waits the whole ``stall_s``, as before."""
    w = TailWatch(stall_s=10, idle_stall_s=3)
    for t, busy, batches in ((0, False, 0), (2, True, 0), (4, True, 1), (6, False, 2),
                             (8, False, 2)):
        v = PartitionView("documents", 1, 900, 500, None, busy=busy, batches=batches,
                          worker_busy=busy, worker_batches=batches)
        assert w.check([v], now=float(t)) == []
    # the clock started at 2 (the batch in progress when the partition stopped moving
    # held it until then); 10 s later it is reported
    late = PartitionView("documents", 1, 900, 500, None, batches=2, worker_batches=2)
    assert w.check([late], now=11.9) == []
    assert w.check([late], now=12.0) == [("documents", 1, 501)]


def test_an_idle_stall_needs_the_whole_idle_time_after_a_batch() -> None:
    """A batch finished since the clock started ends the idleness: the idle time counts
    from where the clock stands, and the rule of ``stall_s`` applies."""
    w = TailWatch(stall_s=10, idle_stall_s=3)
    assert w.check([PartitionView("judgments", 0, 50, 20, None, batches=4,
                                  worker_batches=4)], now=0.0) == []
    after = PartitionView("judgments", 0, 50, 20, None, batches=5, worker_batches=5)
    assert w.check([after], now=5.0) == []
    assert w.check([after], now=9.9) == []
    assert w.check([after], now=10.0) == [("judgments", 0, 21)]


def test_a_partition_whose_next_messages_wait_in_the_worker_is_not_reported() -> None:
    """Fifty-second session's soak: behind a large backlog of judgments a partition's
    next messages waited minutes in Faust's buffers and were taken for a lost tail (98
    seeks). Seen waiting, it is not reported and its clock starts again; no longer seen,
    it is reported after a whole ``stall_s`` more."""
    w = TailWatch(stall_s=10)
    stuck = view(349, 400)
    asked: list[tuple[str, int, int]] = []
    waiting = True

    def held(topic: str, partition: int, offset: int) -> bool:
        asked.append((topic, partition, offset))
        return waiting

    assert w.check([stuck], now=0.0, held=held) == []
    assert asked == []  # asked only of a partition about to be reported
    assert w.check([stuck], now=10.0, held=held) == []
    assert asked == [("documents", 0, 350)] and w.waits == 1
    waiting = False
    assert w.check([stuck], now=19.9, held=held) == []  # its clock started again at 10
    assert w.check([stuck], now=20.0, held=held) == [("documents", 0, 350)]
    assert w.waits == 1


def test_a_hole_below_the_acknowledged_offsets_is_not_excused_by_messages_waiting() -> None:
    """Messages after a hole have arrived by definition: their waiting says nothing of
    the one never acknowledged, which is reported as before."""
    w = TailWatch(stall_s=5)
    hole = PartitionView("judgments", 2, highwater=700, last_seen=650, committed=600,
                         acked_min=601)
    never = []
    assert w.check([hole], now=0.0, held=lambda *a: never.append(a) or True) == []
    assert w.check([hole], now=5.0, held=lambda *a: never.append(a) or True) == [
        ("judgments", 2, 600)]
    assert never == [] and w.waits == 0


def test_input_held_up_defers_the_report_for_a_bounded_time() -> None:
    """A full stream queue holds Faust's drain loop, with fetched records of any
    partition in its hands: the report waits up to ``pressed_stall_s`` more, not for
    ever (a lost tail under a backlog that never drains is still sought back)."""
    w = TailWatch(stall_s=10, pressed_stall_s=30)
    pressed = PartitionView("documents", 1, highwater=90, last_seen=80, committed=None,
                            pressed=True)
    assert w.check([pressed], now=0.0) == []
    for t in (10.0, 20.0, 39.9):
        assert w.check([pressed], now=t) == []
    assert w.check([pressed], now=40.0) == [("documents", 1, 81)]
    # without the pressure, the usual stall
    w = TailWatch(stall_s=10, pressed_stall_s=30)
    free = PartitionView("documents", 1, highwater=90, last_seen=80, committed=None)
    assert w.check([free], now=0.0) == [] and w.check([free], now=10.0) == [
        ("documents", 1, 81)]


def _message(app: Any, topic: str, partition: int, offset: int) -> Any:
    from faust.types import Message

    return Message(topic, partition, offset, 0.0, 0, None, b"k", b"v", None,
                   generation_id=app.consumer_generation_id)


def test_held_in_worker_reads_faust_s_buffers(tmp_path: Any) -> None:
    """The evidence the tail watch asks for, read from a real Faust app's consumer and
    conductor: a message of the partition at the offset or later taken by a stream and
    not acknowledged, or in the topic's stream queue, or the partition paused while its
    buffer drains; nothing else counts."""
    from faust.events import Event
    from faust.types import TP

    from sift.agents.app import held_in_worker
    from tests.agents.offline import offline_worker

    w = offline_worker(str(tmp_path))
    app = w.app
    name = w.topics["judgments"].get_topic_name()
    tp = TP(name, 1)
    assert not held_in_worker(app, name, 1, 350)

    # taken by the agent's stream, not yet acknowledged
    m = _message(app, name, 1, 351)
    app.consumer._unacked_messages.add(m)
    assert held_in_worker(app, name, 1, 350) and held_in_worker(app, name, 1, 351)
    assert not held_in_worker(app, name, 1, 352)  # only older messages wait
    assert not held_in_worker(app, name, 0, 350)  # another partition's
    m.acked = True
    assert not held_in_worker(app, name, 1, 350)
    app.consumer._unacked_messages.discard(m)

    # in the stream queue of the topic's channel for that partition
    topic = w.topics["judgments"]
    app.topics._topics.add(topic)
    app.topics._update_tp_index({tp})
    topic.queue.put_nowait(Event(app, b"k", b"v", {}, _message(app, name, 1, 360)))
    assert held_in_worker(app, name, 1, 355)
    assert not held_in_worker(app, name, 1, 361)
    assert not held_in_worker(app, name, 0, 355)

    # paused by Faust's flow control until its buffer drains
    app.consumer._buffered_partitions.add(TP(name, 0))
    assert held_in_worker(app, name, 0, 355)

    # Faust's internals not as expected: no evidence, so the seek goes ahead
    app.consumer._buffered_partitions.clear()
    app.consumer._unacked_messages = [object()]
    assert not held_in_worker(app, name, 0, 355)


def test_input_held_up_sees_a_full_stream_queue(tmp_path: Any) -> None:
    from faust.events import Event

    from sift.agents.app import input_held_up
    from tests.agents.offline import offline_worker

    w = offline_worker(str(tmp_path))
    app = w.app
    topic = w.topics["documents"]
    name = topic.get_topic_name()
    app.topics._topics.add(topic)
    assert not input_held_up(app, [name])
    queue = topic.queue
    while not queue.full():
        queue.put_nowait(Event(app, b"k", b"v", {}, _message(app, name, 0, queue.qsize())))
    assert input_held_up(app, [name])
    assert not input_held_up(app, ["some.other.topic"])  # not an input's queue
