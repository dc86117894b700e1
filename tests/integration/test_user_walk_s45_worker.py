"""Findings 4, 8, 9 and 11 of the forty-fifth session's new-user walk
(/tmp/s45/fresh/FINDINGS.md) against a real broker and worker; the logic is tested with
fakes in tests/unit/test_user_walk_s45_worker.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from sift import kafkaclient
from sift.agents.harness import WorkerProcess, settings_env
from sift.devbroker import DevBroker
from sift.settings import Settings

pytestmark = pytest.mark.integration


def sift(settings: Settings, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **settings_env(settings)}
    return subprocess.run([sys.executable, "-m", "sift.cli", *args], env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def test_start_offsets_on_a_fresh_broker_wait_for_the_group_coordinator(
        private_broker: DevBroker, topic_prefix: str) -> None:
    settings = Settings(broker=private_broker.url, topic_prefix=topic_prefix,
                        app_id=f"sift-{uuid.uuid4().hex[:8]}", partitions=2)
    topic = settings.topic("documents")
    kafkaclient.ensure_topics(settings, [topic])
    prod = kafkaclient.producer(settings)
    try:
        prod.send(topic, key=b"d", value=b"{}", partition=0)
        prod.flush(30)
    finally:
        prod.close(10)
    cli = kafkaclient.admin(settings)
    try:  # the race of the first worker on a fresh broker: no group coordinator yet
        assert "__consumer_offsets" not in cli.list_topics()
    finally:
        cli.close()
    got = kafkaclient.start_offsets(settings, [(topic, 0), (topic, 1)])
    assert got == {(topic, 0): 0, (topic, 1): 0}


def test_a_second_worker_on_a_data_dir_is_refused_and_a_killed_one_leaves_no_lock(
        review_settings: Settings) -> None:
    from dataclasses import replace

    # the replacement joins the killed worker's group, whose rebalance waits until the
    # group gives the killed member up: after the session timeout (60 s by default, which
    # left the replacement's 90 s wait_ready some 25 s on a slow machine; the broker's
    # least is 6 s)
    review_settings = replace(review_settings, session_timeout=8.0, heartbeat_interval=2.0)
    w1 = WorkerProcess(review_settings, "w1").start()
    try:
        w1.wait_ready()
        assert w1.proc is not None
        second = sift(review_settings, "worker")
        assert second.returncode == 1, second
        assert second.stderr.count("\n") == 1 and second.stderr.startswith("sift worker: error: ")
        assert f"pid {w1.proc.pid}" in second.stderr and "SIFT_DATA_DIR" in second.stderr
        assert review_settings.data_dir in second.stderr
        assert w1.alive()  # the first one goes on
        assert "could not read back" not in w1.log_path.read_text(errors="replace")
        w1.proc.kill()
        w1.proc.wait(30)
        # the kernel dropped the dead worker's lock: a replacement starts on the same dir
        w2 = WorkerProcess(review_settings, "w2").start()
        try:
            w2.wait_ready()
        finally:
            w2.stop()
    finally:
        w1.stop()


def test_review_rm_wait_and_status_tell_what_the_worker_did(review_settings: Settings) -> None:
    s = review_settings
    w = WorkerProcess(s, "w1").start()
    try:
        w.wait_ready()
        refused = sift(s, "review", "rm", "nosuchreview", "--wait", "60")
        assert refused.returncode == 1, refused
        assert refused.stderr.count("\n") == 1 and "rejected: unknown_review" in refused.stderr
        never = sift(s, "review", "status", "nosuchreview")
        assert never.returncode == 1 and "was deleted" not in never.stderr, never
        assert "no status for review 'nosuchreview'" in never.stderr
        started = sift(s, "review", "start", "r1", "--query", "copper mining", "--wait", "60")
        assert started.returncode == 0, started
        gone = sift(s, "review", "rm", "r1", "--wait", "60")
        assert gone.returncode == 0 and "review 'r1': deleted" in gone.stdout, gone
        after = sift(s, "review", "status", "r1")
        assert after.returncode == 1 and "review 'r1' was deleted" in after.stderr, after
        added = sift(s, "profiles", "add", "trade", "--query", "word1 text1", "--wait", "60")
        assert added.returncode == 0, added
        standing = sift(s, "review", "status", "trade")
        assert standing.returncode == 1 and "'trade' is a standing profile" in standing.stderr
        assert "sift review start" not in standing.stderr, standing
    finally:
        w.stop()
