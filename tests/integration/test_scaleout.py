"""Scale-out: two workers in one group share 40 profiles; one stops, the other takes over.

Each document must be scored exactly once per profile across the workers, and the
decisions after the takeover must equal those of one uninterrupted worker (the
in-process reference service fed the same inputs in the same order).
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

PARTITIONS = 4
N_PROFILES = 40


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Document], list[Document]]:
    return svc.make_corpus(tmp_path_factory)


@pytest.fixture(params=[False, True], ids=["shard-topic", "score-here"])
def settings(request: pytest.FixtureRequest, broker_url: str, topic_prefix: str,
             tmp_path: Path, corpus: tuple[Path, list[Document], list[Document]]) -> Settings:
    return Settings(broker=broker_url, topic_prefix=topic_prefix,
                    app_id=f"sift-{uuid.uuid4().hex[:8]}", partitions=PARTITIONS,
                    data_dir=str(tmp_path / "w1"), idf_corpus=str(corpus[0]),
                    batch_timeout=0.05, score_here=request.param)


def test_two_workers_share_profiles_and_take_over(
    settings: Settings, corpus: tuple[Path, list[Document], list[Document]], tmp_path: Path
) -> None:
    path, train, test = corpus
    specs = svc.specs_for(train, N_PROFILES)
    assert len(specs) == N_PROFILES
    ref = svc.Reference(path, PARTITIONS)
    w1 = WorkerProcess(settings, "w1").start()
    w2 = WorkerProcess(replace(settings, data_dir=str(tmp_path / "w2")), "w2").start()
    workers = [w1, w2]
    try:
        w1.wait_ready()
        w2.wait_ready()
        # the group settles with partitions on both workers
        wait_for(lambda: all(w.stats().get("partitions") for w in workers)
                 and sorted(p for w in workers for p in w.stats()["partitions"])
                 == list(range(PARTITIONS)), 90, "both workers assigned")
        send_all(settings, settings.topic("profiles"),
                 [(str(s["profile"]).encode(), orjson.dumps(s)) for s in specs])
        ref.specs(specs)
        wait_for(lambda: total(workers, "profiles_created") == N_PROFILES, 60, "profiles")
        owned = [set(w.stats()["profiles"]) for w in workers]
        assert owned[0] and owned[1] and not owned[0] & owned[1]

        part_a = list(svc.doc_messages(test[:200], 25))
        send_all(settings, settings.topic("documents"), part_a)
        expected_a = ref.documents(part_a)
        wait_for(lambda: total(workers, "scored") == 200 * N_PROFILES, 60, "phase A scored")
        got_a = svc.decisions(settings)
        assert set(got_a) == expected_a and len(got_a) == len(expected_a)
        # with SIFT_SCORE_HERE (the default) each worker scores what it routes for its own
        # shards and sends the rest through the shard topic to the other, whose shards
        # they are; without, every shard's copy goes through the shard topic
        stats = [w.stats() for w in workers]
        counts = [s["stats"] for s in stats]
        assert sum(c.get("documents", 0) for c in counts) == 200
        here = settings.score_here
        assert all(c.get("scored_here", 0) == (c.get("documents", 0) if here else 0)
                   for c in counts)
        sent = sum(c.get("documents", 0) * (PARTITIONS - (len(s["partitions"]) if here else 0))
                   for c, s in zip(counts, stats, strict=True))
        assert sent and sum(c.get("scored_from_shard_topic", 0) for c in counts) == sent

        gold = {d.id: d.topics for d in test}
        judged = [{"doc_id": doc, "profile": prof, "relevant": prof in gold[doc]}
                  for doc, prof, _ in sorted(got_a)]
        send_all(settings, settings.topic("judgments"),
                 [(str(j["profile"]).encode(), orjson.dumps(j)) for j in judged])
        ref.judgments(judged)
        wait_for(lambda: total(workers, "judgments") == len(judged), 60, "judgments applied")

        # w2 leaves; w1 takes over its shards with their learned state
        assert w2.stop() == 0
        wait_for(lambda: w1.stats().get("partitions") == list(range(PARTITIONS)), 90,
                 "w1 owns every partition")
        part_b = list(svc.doc_messages(test[200:400], 25))
        send_all(settings, settings.topic("documents"), part_b)
        expected_b = ref.documents(part_b)
        wait_for(lambda: total([w1], "scored") == 400 * N_PROFILES
                 - int(w2.stats()["stats"]["scored"]), 90, "phase B scored")
        got = svc.decisions(settings)
        got_b = set(got) - set(got_a)
        assert got_b == expected_b
        assert len(got) == len(set(got)), "a decision was emitted twice"
        # exactly once per (document, profile) across both workers
        per_profile = {str(s["profile"]): 0 for s in specs}
        for w in workers:
            for name, n in w.stats()["scored"].items():
                per_profile[name] += n
        assert per_profile == {str(s["profile"]): 400 for s in specs}

        # w3 joins: w1 lets go of the profiles of the shards that move to w3, which loads
        # them from the changelog (each worker's count is its own shards' profiles)
        w3 = WorkerProcess(replace(settings, data_dir=str(tmp_path / "w3")), "w3").start()
        workers.append(w3)
        w3.wait_ready()

        def shards_profiles(stats: dict) -> list[str]:
            return sorted(str(s["profile"]) for s in specs
                          if shard_of(str(s["profile"]), PARTITIONS) in stats["partitions"])

        def split() -> bool:
            s1, s3 = w1.stats(), w3.stats()
            return bool(s1.get("partitions")) and bool(s3.get("partitions")) \
                and sorted(s1["partitions"] + s3["partitions"]) == list(range(PARTITIONS)) \
                and sorted(s1["profiles"]) == shards_profiles(s1) \
                and sorted(s3["profiles"]) == shards_profiles(s3)
        wait_for(split, 120, "w1 and w3 each holding their own shards' profiles")
        released = w1.stats()["stats"]["profiles_released"]
        assert released >= N_PROFILES - len(shards_profiles(w1.stats())) > 0
    finally:
        for w in workers:
            w.stop()
