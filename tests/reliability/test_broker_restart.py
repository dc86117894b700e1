"""The broker stopped and restarted mid-stream (a broker of the test's own): the worker
reconnects by itself and finishes; nothing is lost, counted end to end (every fixed
profile's decision, every judgment learned, state equal to the uninterrupted reference).

All input is written (and acknowledged) before the broker goes away, so the producer's
own retry policy plays no part: what is checked is the worker's.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from sift.agents.harness import WorkerProcess, send_all, total, wait_for
from sift.devbroker import DevBroker
from sift.settings import Settings
from sift.topics.records import Document
from tests.integration import test_service as svc
from tests.reliability import faults
from tests.reliability.test_crash import report

pytestmark = [pytest.mark.integration, pytest.mark.reliability]
PARTITIONS = 2
N_DOCS = 3_000
DOWN_SECONDS = 8.0


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Document], list[Document]]:
    from sift.topics.codecs import read_jsonl

    path, _, _ = svc.make_corpus(tmp_path_factory)
    train = list(read_jsonl(svc.REUTERS / "train.jsonl.gz", Document.from_obj))
    test = list(read_jsonl(svc.REUTERS / "test.jsonl.gz", Document.from_obj))
    return path, train, test


def test_broker_stop_and_restart_mid_stream(
        private_broker: DevBroker, tmp_path: Path,
        corpus: tuple[Path, list[Document], list[Document]]) -> None:
    path, train, test = corpus
    settings = Settings(broker=private_broker.url, topic_prefix="r.",
                        app_id=f"sift-{uuid.uuid4().hex[:8]}", partitions=PARTITIONS,
                        data_dir=str(tmp_path / "w1"), idf_corpus=str(path),
                        batch_size=32, batch_timeout=0.05)
    stream = faults.make_stream(train, test, N_DOCS, PARTITIONS)
    expected = faults.reference(path, stream, PARTITIONS)
    w1 = WorkerProcess(settings, "w1").start()
    started = time.monotonic()
    try:
        w1.wait_ready(timeout=180)
        faults.create_profiles(settings, stream, w1)
        # The first half of the stream goes in before the stop, the rest after the
        # restart: the broker always goes down mid-stream, however fast the worker is
        # (sending everything first let a quick worker finish before the stop).
        half = max(len(stream.chunks) // 2, 1)
        for topic, msgs in list(faults.chunks_from(stream, 0))[: 2 * half]:
            send_all(settings, settings.topic(topic), msgs)
        wait_for(lambda: total([w1], "documents") >= 300, 120, "w1 under way")
        at_stop = dict(w1.stats().get("stats", {}))
        private_broker.stop()
        time.sleep(DOWN_SECONDS)
        assert w1.alive(), f"worker died while the broker was down: {w1.log_tail()}"
        private_broker.restart(timeout=180)
        restarted = time.monotonic()
        for topic, msgs in faults.chunks_from(stream, half):
            send_all(settings, settings.topic(topic), msgs)
        faults.wait_complete(settings, stream, expected, 400, alive=w1.ready)
        recovered = time.monotonic() - restarted
        outcome = faults.check(settings, stream, expected, started)
        end = w1.stats().get("stats", {})
        report("broker_restart", {
            "documents": N_DOCS, "judgments": len(stream.judgments),
            "documents_scored_at_stop": int(at_stop.get("documents", 0)),
            "broker_down_seconds": DOWN_SECONDS,
            "seconds_to_complete_after_restart": round(recovered, 1),
            "worker_documents": int(end.get("documents", 0)),
            "fixed_decisions": outcome.n_decisions, "repeated_decisions": outcome.n_duplicates,
            "judgments_applied_once": outcome.n_judgments,
            "dead_letters": int(end.get("dead_letters", 0))})
        assert int(at_stop.get("documents", 0)) < N_DOCS, "finished before the broker stopped"
        assert int(end.get("dead_letters", 0)) == 0
    finally:
        w1.stop()


def test_a_worker_told_to_stop_exits_when_its_broker_is_gone(
        private_broker: DevBroker, tmp_path: Path) -> None:
    """Seen in the seventh session: workers sent SIGTERM after their broker had gone never
    exited (one spun at 70-90 % of a core in aiokafka's metadata loop). A stop that
    outlasts ``SIFT_STOP_TIMEOUT`` now ends the process anyway."""
    import signal
    import subprocess

    settings = Settings(broker=private_broker.url, topic_prefix="s.",
                        app_id=f"sift-{uuid.uuid4().hex[:8]}", partitions=PARTITIONS,
                        data_dir=str(tmp_path / "w1"), stop_timeout=5.0)
    w1 = WorkerProcess(settings, "w1").start()
    try:
        w1.wait_ready(timeout=180)
        private_broker.stop()
        time.sleep(2.0)  # the worker notices: its connections fail
        assert w1.proc is not None and w1.alive()
        w1.proc.send_signal(signal.SIGTERM)
        try:
            rc = w1.proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the worker did not exit after SIGTERM: {w1.log_tail()}")
        assert rc is not None
    finally:
        w1.kill()
