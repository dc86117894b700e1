"""Find input partitions whose last messages never reached an agent.

The agents check every batch for offsets missing *before* a message
(:meth:`~sift.agents.service.Service.gaps`); a message lost at the *tail* of a
partition, with nothing written after it, has no later message to reveal it (seen in
the scale-out test: the last two document batches of a partition taken over never
arrived, and nothing else was ever written there). :class:`TailWatch` looks at each
assigned input partition from the other end: the broker's high-water mark (the next
offset to be written, which the consumer learns from every fetch response) against
the last offset this worker processed (nothing processed yet: the committed offset, or
for a partition the group never committed, the log's first offset as the broker gave it
at the assignment). A partition that stays behind without moving
for ``stall_s`` seconds is reported once, so the worker can seek it back to the first
missing offset and have it delivered again. A false alarm (messages only slow to come)
costs a re-delivery, which the service drops (``redelivered_skipped``) or applies
idempotently; so before a partition is reported the worker looks for its next messages
in its own buffers (``held`` in :meth:`TailWatch.check`), and one whose messages wait
their turn there is not reported.

The same watch catches the other face of a lost message: an offset at the head of what
the consumer has acknowledged but not committed, below which the committed offset then
stays forever (Faust commits only consecutive acknowledged offsets; seen once as a
judgments partition whose commit stayed 599 behind). A partition whose committed offset
stays below its lowest acknowledged one for ``stall_s`` is sought back to the committed
offset: the missing message is delivered again and the commit moves on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class PartitionView:
    """What the worker knows of one assigned input partition at a check."""

    topic: str
    partition: int
    #: next offset to be written on the broker (None: not known yet)
    highwater: int | None
    #: highest offset this worker processed since the partition was assigned (None: none)
    last_seen: int | None
    #: the group's committed offset, the next to read (None: not known)
    committed: int | None
    #: lowest offset acknowledged and not yet committed (None: none)
    acked_min: int | None = None
    #: where the group starts on the partition, asked of the broker at the assignment:
    #: its commit or, never committed, the log's first offset (None: not known). What
    #: is expected first when nothing was seen and no commit is known here.
    start: int | None = None
    #: the topic's agent is processing a batch: the partition's next messages wait behind
    #: that work (in Faust's buffer, or not fetched while the buffer is full), not lost
    busy: bool = False
    #: batches of the topic the agent has finished so far (:meth:`BusyTopics.finished`)
    batches: int = 0
    #: some input topic's agent is inside a batch (``bool(BusyTopics)``), and the batches
    #: all of them have finished so far (:meth:`BusyTopics.finished_all`): the worker is
    #: idle when neither moves
    worker_busy: bool = False
    worker_batches: int = 0
    #: the worker's delivery of input is held up at this check: a stream buffer of some
    #: input topic is full, so Faust's drain loop waits with the records it has fetched,
    #: of any partition, in its hands
    pressed: bool = False


class BusyTopics:
    """The topics whose agent is inside a batch, and how many batches of each it has
    finished, for :class:`PartitionView`'s ``busy`` and ``batches``.

    >>> busy = BusyTopics()
    >>> busy.enter(["judgments"]); busy.enter(["judgments"]); busy.leave(["judgments"])
    >>> "judgments" in busy, "documents" in busy, busy.finished("judgments")
    (True, False, 1)
    >>> busy.leave(["judgments"]); "judgments" in busy, busy.finished("judgments")
    (False, 2)
    """

    def __init__(self) -> None:
        self._n: dict[str, int] = {}
        self._done: dict[str, int] = {}

    def finished(self, topic: str) -> int:
        return self._done.get(topic, 0)

    def finished_all(self) -> int:
        """Batches finished so far by the agents of every topic."""
        return sum(self._done.values())

    def enter(self, topics: Iterable[str]) -> None:
        for t in topics:
            self._n[t] = self._n.get(t, 0) + 1

    def leave(self, topics: Iterable[str]) -> None:
        for t in topics:
            self._done[t] = self._done.get(t, 0) + 1
            n = self._n.get(t, 0) - 1
            if n > 0:
                self._n[t] = n
            else:
                self._n.pop(t, None)

    def __contains__(self, topic: object) -> bool:
        return topic in self._n

    def __bool__(self) -> bool:
        """Whether the agent of some topic is inside a batch."""
        return bool(self._n)


@dataclass
class TailWatch:
    """Report partitions stuck behind their high-water mark.

    Parameters
    ----------
    stall_s
        Seconds a partition must stay behind, with its last processed offset
        unchanged, before it is reported, not counting the time its topic's agent spends
        inside one batch: a partition is not stalled behind a batch in progress, whatever
        the batch takes (a judgments batch of a busy worker took more than 10 s, its
        records written included, and such a partition was taken for a lost tail and
        delivered again from the batch's end; fiftieth session: the 1,000,000-document
        soak with a judgment every 5 documents sought its judgments partitions back 43
        times in 15 minutes, and the duplicates fed the backlog). Once the agent has
        finished a batch since the partition last moved, the time counts again, busy or
        not: an agent serving the topic's other partitions batch after batch does not
        hide a partition whose last messages never came.
    idle_stall_s
        See the attribute.
    pressed_stall_s
        Seconds a partition may stay behind, past ``stall_s``, while the worker's input
        is held up (:attr:`PartitionView.pressed`) before it is reported all the same.

    A partition found stalled is not reported while its own next messages are seen
    waiting in the worker (the ``held`` answer of :meth:`check`): taken from the broker
    into a stream buffer, or its fetching paused by Faust until that buffer drains. A
    worker behind on a large backlog of judgments had such partitions wait their turn
    for minutes, and took them for lost tails: 98 seeks and 28,666 judgments delivered
    again in the fifty-second session's soak. Nothing of a partition so held can be a
    lost tail: a message lost before the ones waiting shows as a gap when they come
    (:meth:`~sift.agents.service.Service.gaps`).

    Examples
    --------
    >>> w = TailWatch(stall_s=10)
    >>> view = PartitionView("judgments", 1, highwater=353, last_seen=350, committed=300)
    >>> w.check([view], now=0.0)
    []
    >>> w.check([view], now=5.0)
    []
    >>> w.check([view], now=10.0)
    [('judgments', 1, 351)]
    >>> w.check([view], now=11.0)  # reported once, then watched afresh
    []
    >>> busy = PartitionView("judgments", 1, highwater=353, last_seen=350, committed=300,
    ...                      busy=True)
    >>> w.check([view], now=12.0), w.check([busy], now=30.0), w.check([view], now=39.0)
    ([], [], [])
    >>> w.check([view], now=40.0)  # 10 s after the agent was last seen in that batch
    [('judgments', 1, 351)]
    >>> idle = TailWatch(stall_s=10, idle_stall_s=3)  # the agent takes nothing meanwhile
    >>> idle.check([view], now=0.0), idle.check([view], now=2.0), idle.check([view], now=4.0)
    ([], [], [('judgments', 1, 351)])
    >>> w = TailWatch(stall_s=10)
    >>> waiting = lambda topic, partition, offset: True  # offset 351 is in a stream buffer
    >>> w.check([view], now=0.0, held=waiting), w.check([view], now=10.0, held=waiting)
    ([], [])
    >>> w.waits, w.check([view], now=20.0)  # no longer seen waiting: lost
    (1, [('judgments', 1, 351)])
    """

    stall_s: float = 10.0
    #: seconds after which a partition behind is reported when the worker has been idle
    #: since it stopped moving: no agent inside a batch, none finished (the agent waits
    #: for input that is on the broker, and no work of the worker explains the wait: a
    #: batch of judgments holding the event loop can hold documents back too, finding 24;
    #: a worker starting on a backlog had a partition's last messages lost by Faust and
    #: waited the whole ``stall_s`` with nothing to do; fifty-first session). None:
    #: ``stall_s`` always.
    idle_stall_s: float | None = None
    pressed_stall_s: float = 60.0
    #: stalls not reported because the partition's next messages were seen waiting in
    #: the worker (``sift_worker_tail_waits_total``)
    waits: int = 0
    #: partition -> (its progress marker: last seen and committed offsets, since when,
    #: its topic's finished batches then, the worker's finished batches then)
    _behind: dict[tuple[str, int],
                  tuple[tuple[int | None, int | None], float, int, int]] = field(
        default_factory=dict)

    def reset(self) -> None:
        """Forget every partition (a rebalance: offsets start over)."""
        self._behind.clear()

    def check(self, views: Iterable[PartitionView], now: float,
              held: Callable[[str, int, int], bool] | None = None,
              ) -> list[tuple[str, int, int]]:
        """``(topic, partition, first_missing_offset)`` of each partition that has been
        behind its high-water mark, or has had a hole below its acknowledged offsets,
        with no progress for ``stall_s`` seconds.

        ``held(topic, partition, offset)``, asked only of a partition about to be
        reported behind its high-water mark: whether a message of the partition at
        ``offset`` or later is seen waiting in the worker. Yes: not reported, the clock
        starts again. (Not asked of a hole below the acknowledged offsets: the messages
        after the hole have arrived.)"""
        due: list[tuple[str, int, int]] = []
        live = set()
        for v in views:
            tp = (v.topic, v.partition)
            live.add(tp)
            missing = self._first_missing(v)
            if missing is None:
                self._behind.pop(tp, None)
                continue
            progress = (v.last_seen, v.committed)
            seen = self._behind.get(tp)
            if seen is None or seen[0] != progress:
                self._behind[tp] = (progress, now, v.batches, v.worker_batches)
            elif v.busy and v.batches == seen[2]:
                # still inside the batch of the stall's start: the clock starts again
                self._behind[tp] = (progress, now, v.batches, v.worker_batches)
            elif now - seen[1] >= self.stall_s or self._idle(v, seen, now):
                tail = not self._has_hole(v)
                if tail and held is not None and held(v.topic, v.partition, missing):
                    # its next messages are in the worker, waiting their turn: the clock
                    # starts again
                    self.waits += 1
                    self._behind[tp] = (progress, now, v.batches, v.worker_batches)
                    continue
                if tail and v.pressed and now - seen[1] < self.stall_s + self.pressed_stall_s:
                    continue  # the drain loop may hold them: not yet
                due.append((v.topic, v.partition, missing))
                del self._behind[tp]
        for tp in set(self._behind) - live:
            del self._behind[tp]
        return due

    def _idle(self, v: PartitionView,
              seen: tuple[tuple[int | None, int | None], float, int, int], now: float) -> bool:
        """Whether the worker has been idle for ``idle_stall_s`` while the partition stood
        behind: no agent inside a batch now and none finished since the clock started (a
        batch delivered since would be in progress or finished)."""
        return (self.idle_stall_s is not None and not v.busy and not v.worker_busy
                and v.worker_batches == seen[3] and now - seen[1] >= self.idle_stall_s)

    @staticmethod
    def _has_hole(v: PartitionView) -> bool:
        """Whether an offset below the acknowledged ones was never acknowledged."""
        return v.committed is not None and v.acked_min is not None \
            and v.acked_min > v.committed

    @classmethod
    def _first_missing(cls, v: PartitionView) -> int | None:
        """The first offset that should have arrived and did not, if any."""
        out = []
        if cls._has_hole(v):
            assert v.committed is not None
            out.append(v.committed)  # a hole below the acknowledged offsets
        last = v.last_seen
        if last is None:
            first = v.committed if v.committed is not None else v.start
            last = None if first is None else first - 1
        if last is not None and v.highwater is not None and v.highwater > last + 1:
            out.append(last + 1)  # behind the high-water mark
        return min(out) if out else None
