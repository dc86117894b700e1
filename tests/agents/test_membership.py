"""The guard of static membership against one instance id given to two workers."""

from __future__ import annotations

import inspect
import logging

import aiokafka.consumer.group_coordinator as coordinator
import pytest

from sift.agents import membership
from sift.agents.membership import (
    COMMIT_FAILED,
    COORDINATOR_LOGGER,
    JOINED,
    UNKNOWN_MEMBER,
    InstanceGuard,
)
from sift.errors import ConfigError
from sift.settings import Settings


def test_aiokafka_still_says_what_the_guard_listens_for() -> None:
    """The guard reads aiokafka's warning: a new version that words it otherwise must
    fail here, not leave two workers of one name fighting unseen."""
    assert coordinator.log.name == COORDINATOR_LOGGER
    source = inspect.getsource(coordinator)
    assert f'"{UNKNOWN_MEMBER};"' in source
    assert f'"{COMMIT_FAILED}%s due to group"' in source
    assert f'"{JOINED}\'%s\' (generation %s) with member_id %s"' in source
    assert coordinator.Errors.UnknownMemberIdError is membership.UnknownMemberIdError


def record(level: int, msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord(COORDINATOR_LOGGER, level, __file__, 1, msg, args, None)


def test_one_forgetting_told_by_a_commit_and_a_heartbeat_is_one_strike() -> None:
    """A single session expiry can be told twice (every partition's commit error, then
    the heartbeat): one strike per member id, the one of the last join. Two member ids
    forgotten within a session timeout are two workers of one name."""
    times = iter([0.0, 1.0, 2.0, 3.0, 100.0, 101.0, 102.0])
    seen: list[str] = []
    guard = InstanceGuard("w1", 60.0, seen.append, clock=lambda: next(times))
    commit = COMMIT_FAILED + "%s due to group error (%s), will rejoin"
    heartbeat = UNKNOWN_MEMBER + "; resetting and re-joining group"
    joined = JOINED + "'%s' (generation %s) with member_id %s"
    for r in [record(logging.INFO, joined, "g", 1, "w1-aaa"),
              record(logging.ERROR, commit, "g", coordinator.Errors.UnknownMemberIdError("g")),
              record(logging.ERROR, commit, "g", coordinator.Errors.UnknownMemberIdError("g")),
              record(logging.WARNING, heartbeat),
              # another group error is not a forgetting
              record(logging.ERROR, commit, "g", coordinator.Errors.RebalanceInProgressError("g"))]:
        guard.filter(r)
    assert not seen and guard.last == 0.0  # one strike, at the first telling
    guard.filter(record(logging.INFO, joined, "g", 2, "w1-bbb"))
    guard.filter(record(logging.WARNING, heartbeat))
    assert len(seen) == 1  # w1-bbb forgotten 1 s after w1-aaa


def test_two_unknown_member_answers_within_a_session_timeout_are_a_duplicate() -> None:
    times = iter([0.0, 61.0, 200.0, 259.9, 260.0, 261.0])
    seen: list[str] = []
    guard = InstanceGuard("w1", 60.0, seen.append, clock=lambda: next(times))
    # a silence of a whole session each time: the group forgot this worker, no duplicate
    assert [guard.strike(), guard.strike(), guard.strike()] == [False, False, False]
    assert guard.strike() is True and len(seen) == 1
    assert "SIFT_INSTANCE_ID 'w1' is used by another worker" in seen[0] and "60 s" in seen[0]
    assert guard.strike() and guard.strike() and len(seen) == 1  # said once


def test_the_guard_sees_the_warning_and_keeps_the_users_log_level(
        caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger(COORDINATOR_LOGGER)
    before, filters = logger.level, list(logger.filters)
    logger.setLevel(logging.ERROR)
    seen: list[str] = []
    try:
        guard = membership.install("w1", 60.0, seen.append)
        assert logger.getEffectiveLevel() == logging.INFO and guard.level == logging.ERROR
        with caplog.at_level(logging.WARNING, logger=COORDINATOR_LOGGER):
            logger.setLevel(logging.WARNING)  # caplog set it to WARNING itself; keep it
            for _ in range(2):
                logger.warning("%s; resetting and re-joining group", UNKNOWN_MEMBER)
            logger.warning("Heartbeat failed for group g because it is rebalancing")
            logger.error("something else")
        assert len(seen) == 1
        # the warnings were the guard's only: below the user's ERROR, nothing was logged
        assert [r.levelname for r in caplog.records] == ["ERROR"]
    finally:
        logger.setLevel(before)
        logger.filters[:] = filters


@pytest.mark.parametrize("bad", ["has space", "é", "x" * 250, "a/b"])
def test_an_instance_id_kafka_refuses_is_a_one_line_error(bad: str) -> None:
    with pytest.raises(ConfigError, match="SIFT_INSTANCE_ID must"):
        Settings.from_env({"SIFT_INSTANCE_ID": bad})


def test_an_instance_id_is_read_from_the_environment() -> None:
    assert Settings.from_env({"SIFT_INSTANCE_ID": "sift-worker-0"}).instance_id == "sift-worker-0"
    assert Settings.from_env({}).instance_id == ""
