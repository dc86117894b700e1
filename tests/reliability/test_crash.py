"""A worker killed with SIGKILL mid-stream (documents and judgments flowing), replaced by a
new process with an empty data dir: nothing lost (see :mod:`tests.reliability.faults`).

Delivery guarantee: ``at_least_once`` (Faust's ``exactly_once`` duplicates and crashes on
rebalance, faust-streaming#323). Messages consumed after the last offset commit (every
second) are processed again by the replacement: decisions may repeat, with the stable key
(``profile``, ``doc_id``) and, for the same model, the same score; judgments are
idempotent by key (kept in the profile record), so each is applied once.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from sift.agents.harness import WorkerProcess, send_all, total, wait_for
from sift.settings import Settings
from sift.topics.records import Document
from tests.integration import test_service as svc
from tests.reliability import faults

pytestmark = [pytest.mark.integration, pytest.mark.reliability]
PARTITIONS = 2


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Document], list[Document]]:
    return svc.make_corpus(tmp_path_factory)


@pytest.fixture(scope="module")
def full_corpus(corpus: tuple[Path, list[Document], list[Document]]
                ) -> tuple[Path, list[Document], list[Document]]:
    """The small IDF file, all of Reuters' training and test documents."""
    from sift.topics.codecs import read_jsonl

    train = list(read_jsonl(svc.REUTERS / "train.jsonl.gz", Document.from_obj))
    test = list(read_jsonl(svc.REUTERS / "test.jsonl.gz", Document.from_obj))
    return corpus[0], train, test


def make_settings(broker_url: str, topic_prefix: str, tmp_path: Path, corpus_path: Path) -> Settings:
    return Settings(broker=broker_url, topic_prefix=topic_prefix,
                    app_id=f"sift-{uuid.uuid4().hex[:8]}", partitions=PARTITIONS,
                    data_dir=str(tmp_path / "w1"), idf_corpus=str(corpus_path),
                    batch_size=32, batch_timeout=0.05,
                    # the killed worker's shards move after 10 s of silence, not Faust's
                    # 60: the path a SIGKILL takes either way, and how an operator
                    # shortens it (SIFT_SESSION_TIMEOUT)
                    session_timeout=10.0, heartbeat_interval=1.0)


def report(name: str, figures: dict[str, object]) -> None:
    """Figures for docs/reliability.md, printed and (with SIFT_RELIABILITY_OUT) saved."""
    print(f"\n{name}: {json.dumps(figures)}")
    out = os.environ.get("SIFT_RELIABILITY_OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / f"{name}.json").write_text(json.dumps(figures, indent=2))


def run_crash(n: int, broker_url: str, topic_prefix: str, tmp_path: Path,
              corpus: tuple[Path, list[Document], list[Document]], timeout: float) -> None:
    path, train, test = corpus
    settings = make_settings(broker_url, topic_prefix, tmp_path, path)
    stream = faults.make_stream(train, test, n, PARTITIONS)
    expected = faults.reference(path, stream, PARTITIONS)
    w1 = WorkerProcess(settings, "w1").start()
    w2: WorkerProcess | None = None
    started = time.monotonic()
    try:
        w1.wait_ready()
        faults.create_profiles(settings, stream, w1)
        # the first chunk, then the rest from a thread while the worker is killed
        first = 2
        for topic, msgs in faults.chunks_from(stream, 0):
            send_all(settings, settings.topic(topic), msgs)
            first -= topic == "judgments"
            if not first:
                break
        sent_first = sum(len(d) for d, _ in stream.chunks[:2])  # messages of 10 documents
        wait_for(lambda: total([w1], "judgments") > 0
                 and total([w1], "documents") >= min(400, n // 10), 120, "w1 under way")

        def rest() -> None:
            for topic, msgs in faults.chunks_from(stream, 2):
                send_all(settings, settings.topic(topic), msgs)

        sender = threading.Thread(target=rest)
        sender.start()
        time.sleep(0.5)
        before = w1.stats().get("stats", {})
        w1.kill()  # SIGKILL: no commit, no leave-group, no final stats
        w2 = WorkerProcess(replace(settings, data_dir=str(tmp_path / "w2")), "w2").start()
        sender.join()
        w2.wait_ready(timeout=180)
        faults.wait_complete(settings, stream, expected, timeout,
                             alive=lambda: w2 is not None and w2.ready())
        outcome = faults.check(settings, stream, expected, started)
        after = w2.stats().get("stats", {})
        figures = {"documents": n, "document_messages": len(stream.doc_messages),
                   "judgments": len(stream.judgments),
                   "profiles": {"fixed": len(stream.fixed), "learning": len(stream.learn)},
                   "w1_documents_at_kill": int(before.get("documents", 0)),
                   "w1_judgments_at_kill": int(before.get("judgments", 0)),
                   "document_messages_sent_before_kill": sent_first,
                   "w2_documents": int(after.get("documents", 0)),
                   "w2_judgments": int(after.get("judgments", 0)),
                   "w2_duplicate_judgments_skipped": int(after.get("judgments_duplicate", 0)),
                   "documents_processed_twice": int(before.get("documents", 0))
                   + int(after.get("documents", 0)) - n,
                   "fixed_decisions": outcome.n_decisions,
                   "repeated_decisions": outcome.n_duplicates,
                   "judgments_applied_once": outcome.n_judgments,
                   "seconds": round(outcome.seconds, 1)}
        report(f"crash_{n}", figures)
        assert int(before.get("documents", 0)) < n, "w1 finished before it was killed"
    finally:
        w1.kill()
        if w2 is not None:
            w2.stop()


def test_worker_sigkill_mid_stream_5000(
        broker_url: str, topic_prefix: str, tmp_path: Path,
        full_corpus: tuple[Path, list[Document], list[Document]]) -> None:
    run_crash(5_000, broker_url, topic_prefix, tmp_path, full_corpus, timeout=300)


@pytest.mark.slow
def test_worker_sigkill_mid_stream_50000(
        broker_url: str, topic_prefix: str, tmp_path: Path,
        full_corpus: tuple[Path, list[Document], list[Document]]) -> None:
    run_crash(50_000, broker_url, topic_prefix, tmp_path, full_corpus, timeout=1500)
