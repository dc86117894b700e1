"""A hot standby takes over: a worker that held no shard (more workers than partitions)
is given some when another stops, and applies judgments of documents scored while it
held nothing.

Its store of recent documents is filled at its start and then by the documents it
scores, none while it holds no shard: before the fifty-fourth session such judgments
were dead-lettered ``unknown_document``. It now reads the recent documents back from
the documents topic when shards come after a time with none.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from sift.agents.harness import WorkerProcess, send_all, total, wait_for
from sift.agents.service import shard_of
from sift.settings import Settings
from sift.topics.records import Document

from . import test_service as svc

PARTITIONS = 2
N_PROFILES = 10


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Document], list[Document]]:
    return svc.make_corpus(tmp_path_factory)


def test_a_standby_that_takes_over_applies_judgments_of_documents_scored_before(
        broker_url: str, topic_prefix: str, tmp_path: Path,
        corpus: tuple[Path, list[Document], list[Document]]) -> None:
    path, train, test = corpus
    settings = Settings(broker=broker_url, topic_prefix=topic_prefix,
                        app_id=f"sift-{uuid.uuid4().hex[:8]}", partitions=PARTITIONS,
                        data_dir=str(tmp_path / "w1"), idf_corpus=str(path),
                        batch_timeout=0.05)
    specs = svc.specs_for(train, N_PROFILES)
    workers = [WorkerProcess(replace(settings, data_dir=str(tmp_path / n)), n) for n in
               ("w1", "w2", "w3")]
    try:
        for w in workers[:2]:
            w.start()
        for w in workers[:2]:
            w.wait_ready()
        wait_for(lambda: sorted(p for w in workers[:2] for p in w.stats().get("partitions", []))
                 == list(range(PARTITIONS)), 90, "w1 and w2 assigned")
        workers[2].start().wait_ready()
        # the group settles with one worker idle: the standby
        def settled() -> bool:
            parts = [w.stats().get("partitions") for w in workers]
            return all(p is not None for p in parts) \
                and sorted(x for p in parts for x in p) == list(range(PARTITIONS)) \
                and sum(1 for p in parts if not p) == 1
        wait_for(settled, 90, "two workers with a partition each, one with none")
        standby = next(w for w in workers if not w.stats()["partitions"])
        busy = [w for w in workers if w is not standby]

        send_all(settings, settings.topic("profiles"),
                 [(str(s["profile"]).encode(), orjson.dumps(s)) for s in specs])
        wait_for(lambda: total(busy, "profiles_created") == N_PROFILES, 60, "profiles")
        send_all(settings, settings.topic("documents"), list(svc.doc_messages(test[:200], 20)))
        wait_for(lambda: total(busy, "scored") == 200 * N_PROFILES, 90, "documents scored")

        # one busy worker stops; the standby takes its shard over
        leaving = busy[0]
        assert leaving.stop() == 0
        wait_for(lambda: bool(standby.stats().get("partitions")), 90, "standby assigned")
        taken = set(standby.stats()["partitions"])
        gold = {d.id: d.topics for d in test}
        judged = [{"doc_id": d.id, "profile": str(s["profile"]),
                   "relevant": str(s["profile"]) in gold[d.id]}
                  for d in test[:200:5] for s in specs
                  if shard_of(str(s["profile"]), PARTITIONS) in taken]
        assert judged
        send_all(settings, settings.topic("judgments"),
                 [(str(j["profile"]).encode(), orjson.dumps(j)) for j in judged])
        wait_for(lambda: total([standby], "judgments") + total([standby], "dead_letters")
                 >= len(judged), 90, "the standby's judgments")
        stats = standby.stats()["stats"]
        assert stats.get("dead_letters", 0) == 0, stats
        assert stats["judgments"] == len(judged)
        assert stats.get("store_refills") == 1
    finally:
        for w in workers:
            w.stop()
