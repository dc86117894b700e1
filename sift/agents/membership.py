"""Static group membership (``SIFT_INSTANCE_ID``) and its guard against a name used twice.

With an instance id (Kafka's ``group.instance.id``, KIP-345) a worker restarted after a
crash takes its place in the group at once, with its shards (measured on the local
broker: 6.2 s against 59.7 s from the SIGKILL to the restarted worker scoring again,
``benchmarks/restart_in_place.py``, docs/streaming.md): without it the
restarted worker's join waits for the dead member until its session ends or the
rebalance times out (Faust's ``broker_rebalance_timeout``, 60 s).

Kafka fences the older of two members that give the same instance id: its client gets
``FENCED_INSTANCE_ID`` and stops. aiokafka's heartbeats are of a version without the
instance id, so its member is told only that its member id is unknown; it joins again,
under the same name, and pushes the other out, which does the same: two workers with
one name took every partition in turn every few seconds, each scoring documents the
other scored too (seen on the local broker). The guard watches for that: outside such a
fight a static member's id is forgotten by the group only when it has been silent for
a whole session timeout, so two of its member ids forgotten less than a session timeout
apart cannot both be a silence of this worker's; the worker then stops with a one-line
error naming the setting. The other worker, pushed out once more meanwhile, may stop
too (a misconfiguration stops loudly rather than scoring twice).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from aiokafka.errors import UnknownMemberIdError

#: the logger of aiokafka's group coordinator and the starts of the messages the guard
#: reads (aiokafka 0.14; ``tests/agents/test_membership.py`` fails if a version words
#: them otherwise): a heartbeat's answer that the group does not know the member id; a
#: commit's error saying the same (it can come first: the commit then resets the member
#: id and the heartbeat may never tell); a join, naming the member id the group gave
COORDINATOR_LOGGER = "aiokafka.consumer.group_coordinator"
UNKNOWN_MEMBER = "Heartbeat failed: local member_id was not recognized"
COMMIT_FAILED = "OffsetCommit failed for group "
JOINED = "Joined group "


class InstanceGuard(logging.Filter):
    """Calls ``on_duplicate(reason)`` (once) when the group forgets two of this worker's
    member ids within ``session_timeout`` seconds.

    A filter on aiokafka's coordinator logger: it sees each of the logger's records and
    passes on those at or above ``level`` (the level the logger had before the guard
    lowered it to INFO, to see the joins), so the user's log level still holds. One
    forgetting told twice (by a commit, then a heartbeat) counts once: a strike is
    counted per member id, the one the group gave at the last join.

    >>> seen = []
    >>> guard = InstanceGuard("w1", 60.0, seen.append, clock=iter([0.0, 59.0]).__next__)
    >>> guard.strike("m1"), guard.strike("m1"), guard.strike("m2")
    (False, False, True)
    >>> seen[0].startswith("SIFT_INSTANCE_ID 'w1' is used by another worker")
    True
    """

    def __init__(self, instance_id: str, session_timeout: float,
                 on_duplicate: Callable[[str], object], *, level: int = logging.NOTSET,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.instance_id = instance_id
        self.session_timeout = session_timeout
        self.on_duplicate = on_duplicate
        self.level = level
        self.clock = clock
        self.member: str | None = None  # the member id of the last join seen
        self.struck: str | None = None  # the member id of the last strike
        self.last: float | None = None
        self.fired = False

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text, args = record.getMessage(), record.args
            if text.startswith(JOINED) and isinstance(args, tuple) and len(args) == 3:
                self.member = str(args[2])
            elif text.startswith(UNKNOWN_MEMBER) or (
                    text.startswith(COMMIT_FAILED) and isinstance(args, tuple)
                    and len(args) == 2 and isinstance(args[1], UnknownMemberIdError)):
                self.strike(self.member)
        except Exception:  # a record that does not format: never the logging call's failure
            pass
        return record.levelno >= self.level

    def strike(self, member: str | None = None) -> bool:
        """The group forgot ``member`` (``None``: not known); True when this makes two
        member ids forgotten within a session timeout."""
        if member is not None and member == self.struck:
            return False  # the same forgetting, told again
        self.struck = member
        now = self.clock()
        twice = self.last is not None and now - self.last < self.session_timeout
        self.last = now
        if twice and not self.fired:
            self.fired = True
            self.on_duplicate(
                f"SIFT_INSTANCE_ID {self.instance_id!r} is used by another worker of the "
                f"group: the group replaced this worker twice within SIFT_SESSION_TIMEOUT "
                f"({self.session_timeout:g} s); give each worker its own instance id")
        return twice


def install(instance_id: str, session_timeout: float,
            on_duplicate: Callable[[str], object]) -> InstanceGuard:
    """Put an :class:`InstanceGuard` on aiokafka's coordinator logger, lowering the
    logger's level to INFO if it was above (records below the old level are then
    dropped by the guard, as the logger would have)."""
    logger = logging.getLogger(COORDINATOR_LOGGER)
    level = logger.getEffectiveLevel()
    guard = InstanceGuard(instance_id, session_timeout, on_duplicate, level=level)
    if level > logging.INFO:
        logger.setLevel(logging.INFO)
    logger.addFilter(guard)
    return guard
