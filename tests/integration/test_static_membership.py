"""Static membership (``SIFT_INSTANCE_ID``) on the real broker.

A worker killed with SIGKILL and started again under its instance id takes its shards
back without waiting for the dead member's session timeout, with its profiles' learned
state; two workers given one instance id stop with a one-line error instead of taking
the partitions from each other every few seconds, both scoring.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from sift.agents.harness import WorkerProcess, send_all, total, wait_for
from sift.settings import Settings
from sift.topics.records import Document

from . import test_service as svc

PARTITIONS = 4
N_PROFILES = 8
#: long, so that a restart that waited for it could not pass the waits below
SESSION_TIMEOUT = 180.0
#: below Faust's rebalance timeout (``broker_rebalance_timeout``, 60 s), the other wait
#: of a join that a dead member's place holds up
REJOIN_WAIT_S = 45.0


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Document], list[Document]]:
    return svc.make_corpus(tmp_path_factory)


def settings_for(broker_url: str, topic_prefix: str, tmp_path: Path, corpus_path: Path,
                 instance_id: str) -> Settings:
    return Settings(broker=broker_url, topic_prefix=topic_prefix,
                    app_id=f"sift-{uuid.uuid4().hex[:8]}", partitions=PARTITIONS,
                    data_dir=str(tmp_path / "w1"), idf_corpus=str(corpus_path),
                    batch_timeout=0.05, session_timeout=SESSION_TIMEOUT,
                    heartbeat_interval=3.0, instance_id=instance_id)


def test_a_worker_restarted_under_its_instance_id_does_not_wait_for_the_session_timeout(
        broker_url: str, topic_prefix: str, tmp_path: Path,
        corpus: tuple[Path, list[Document], list[Document]]) -> None:
    path, train, test = corpus
    settings = settings_for(broker_url, topic_prefix, tmp_path, path, f"w-{uuid.uuid4().hex[:6]}")
    specs = svc.specs_for(train, N_PROFILES)
    ref = svc.Reference(path, PARTITIONS)
    w1 = WorkerProcess(settings, "w1").start()
    w2 = WorkerProcess(settings, "w1-again")
    try:
        w1.wait_ready()
        send_all(settings, settings.topic("profiles"),
                 [(str(s["profile"]).encode(), orjson.dumps(s)) for s in specs])
        ref.specs(specs)
        wait_for(lambda: total([w1], "profiles_created") == N_PROFILES, 60, "profiles")
        part_a = list(svc.doc_messages(test[:100], 25))
        send_all(settings, settings.topic("documents"), part_a)
        expected_a = ref.documents(part_a)
        wait_for(lambda: total([w1], "scored") == 100 * N_PROFILES, 60, "phase A scored")
        gold = {d.id: d.topics for d in test}
        judged = [{"doc_id": doc, "profile": prof, "relevant": prof in gold[doc]}
                  for doc, prof, _ in sorted(svc.decisions(settings))]
        assert judged and set(svc.decisions(settings)) == expected_a
        send_all(settings, settings.topic("judgments"),
                 [(str(j["profile"]).encode(), orjson.dumps(j)) for j in judged])
        ref.judgments(judged)
        wait_for(lambda: total([w1], "judgments") == len(judged), 60, "judgments applied")

        w1.kill()
        w2.start()
        part_b = list(svc.doc_messages(test[100:200], 25))
        send_all(settings, settings.topic("documents"), part_b)
        expected_b = ref.documents(part_b)
        # without the instance id the restarted worker's join waits for the dead member
        # until its session ends or the rebalance times out (Faust's 60 s): it scored
        # phase B 80 s after its start in a run of this test without it, about 6 s with
        wait_for(lambda: w2.alive() and total([w2], "scored") >= 100 * N_PROFILES,
                 REJOIN_WAIT_S, "phase B scored by the restarted worker")
        got = set(svc.decisions(settings)) - expected_a
        assert got == expected_b  # scored with the state learned before the kill
        assert sorted(w2.stats()["partitions"]) == list(range(PARTITIONS))
    finally:
        w1.kill()
        w2.stop()


def test_two_workers_with_one_instance_id_stop_with_an_error(
        broker_url: str, topic_prefix: str, tmp_path: Path,
        corpus: tuple[Path, list[Document], list[Document]]) -> None:
    path, _, _ = corpus
    settings = replace(settings_for(broker_url, topic_prefix, tmp_path, path, "same"),
                       session_timeout=30.0)
    a = WorkerProcess(settings, "a").start()
    b = WorkerProcess(replace(settings, data_dir=str(tmp_path / "w2")), "b")
    try:
        a.wait_ready()
        b.start()
        wait_for(lambda: not (a.alive() and b.alive()), 120, "one of the two stopped")
        stopped = [w for w in (a, b) if not w.alive()]
        for w in stopped:
            assert w.proc is not None and w.proc.returncode == 1
            assert "error: SIFT_INSTANCE_ID 'same' is used by another worker" in w.log_tail(3)
    finally:
        a.stop()
        b.stop()
