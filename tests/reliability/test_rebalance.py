"""Rebalance under load: a second worker joins while documents and judgments flow, then
leaves (SIGTERM) while they still flow. After de-duplication by (profile, doc_id) the
fixed profiles' decisions equal the uninterrupted reference's (none missed, none scored
twice with another score), every judgment is applied once and the learned state equals
the reference's. ``slow``: two worker starts and two rebalances on two cores.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from sift.agents.harness import WorkerProcess, send_all, total, wait_for
from sift.settings import Settings
from sift.topics.records import Document
from tests.reliability import faults
from tests.reliability.test_broker_restart import corpus  # noqa: F401  (fixture)
from tests.reliability.test_crash import report

pytestmark = [pytest.mark.integration, pytest.mark.reliability, pytest.mark.slow]
PARTITIONS = 4
N_DOCS = 10_000


def test_worker_joins_and_leaves_under_load(
        broker_url: str, topic_prefix: str, tmp_path: Path,
        corpus: tuple[Path, list[Document], list[Document]]) -> None:  # noqa: F811
    path, train, test = corpus
    settings = Settings(broker=broker_url, topic_prefix=topic_prefix,
                        app_id=f"sift-{uuid.uuid4().hex[:8]}", partitions=PARTITIONS,
                        data_dir=str(tmp_path / "w1"), idf_corpus=str(path),
                        batch_size=32, batch_timeout=0.05)
    stream = faults.make_stream(train, test, N_DOCS, PARTITIONS, chunk=250)
    expected = faults.reference(path, stream, PARTITIONS)
    w1 = WorkerProcess(settings, "w1").start()
    w2 = WorkerProcess(replace(settings, data_dir=str(tmp_path / "w2")), "w2")
    started = time.monotonic()
    try:
        w1.wait_ready(timeout=180)
        faults.create_profiles(settings, stream, w1)
        n_chunks = len(stream.chunks)

        def send() -> None:  # paced: the stream lasts through both rebalances
            for topic, msgs in faults.chunks_from(stream, 0):
                send_all(settings, settings.topic(topic), msgs)
                if topic == "judgments":
                    time.sleep(60.0 / n_chunks)

        sender = threading.Thread(target=send)
        sender.start()
        wait_for(lambda: total([w1], "documents") >= N_DOCS // 10, 180, "w1 under way")
        w2.start().wait_ready(timeout=180)
        wait_for(lambda: bool(w2.stats().get("partitions")), 180, "w2 assigned partitions")
        joined = dict(w1.stats().get("stats", {}))
        wait_for(lambda: total([w2], "documents") > 0 or not sender.is_alive(), 120,
                 "w2 working")
        assert w2.stop() == 0
        left = dict(w1.stats().get("stats", {}))
        sender.join()
        faults.wait_complete(settings, stream, expected, 600, alive=w1.ready)
        outcome = faults.check(settings, stream, expected, started)
        report("rebalance", {
            "documents": N_DOCS, "judgments": len(stream.judgments), "partitions": PARTITIONS,
            "w1_documents_when_w2_joined": int(joined.get("documents", 0)),
            "w1_documents_when_w2_left": int(left.get("documents", 0)),
            "w2_documents": total([w2], "documents"), "w2_partitions": w2.stats().get("partitions"),
            "fixed_decisions": outcome.n_decisions, "repeated_decisions": outcome.n_duplicates,
            "judgments_applied_once": outcome.n_judgments, "seconds": round(outcome.seconds, 1)})
        assert total([w2], "scored") > 0, "w2 never scored: no rebalance under load happened"
    finally:
        w1.stop()
        w2.stop()
