"""The guard of static membership against one instance id given to two workers."""

from __future__ import annotations

import inspect
import logging

import aiokafka.consumer.group_coordinator as coordinator
import pytest

from sift.agents import membership
from sift.agents.membership import COORDINATOR_LOGGER, UNKNOWN_MEMBER, InstanceGuard
from sift.errors import ConfigError
from sift.settings import Settings


def test_aiokafka_still_says_what_the_guard_listens_for() -> None:
    """The guard reads aiokafka's warning: a new version that words it otherwise must
    fail here, not leave two workers of one name fighting unseen."""
    assert coordinator.log.name == COORDINATOR_LOGGER
    assert f'"{UNKNOWN_MEMBER};"' in inspect.getsource(coordinator)


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
        assert logger.getEffectiveLevel() == logging.WARNING and guard.level == logging.ERROR
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
