"""The streaming service against a real broker: one worker, bad input, judgments, restarts.

Workers are real ``sift worker`` processes. Every test has its own topic prefix and
consumer group. The expected decisions come from the same :class:`Service` run
in-process on the same inputs in the same order (the service is deterministic).
"""

from __future__ import annotations

import base64
import gzip
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from sift.agents.harness import (
    WorkerProcess,
    read_all,
    recovered_profiles,
    send_all,
    total,
    wait_for,
)
from sift.agents.service import (
    InputMessage,
    Service,
    TrainingSet,
)
from sift.replay import query_from_name
from sift.settings import Settings
from sift.topics.codecs import read_jsonl
from sift.topics.records import Document

ROOT = Path(__file__).resolve().parents[2]
REUTERS = ROOT / "data" / "reuters21578"
PARTITIONS = 2


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Document], list[Document]]:
    return make_corpus(tmp_path_factory)


def make_corpus(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, list[Document], list[Document]]:
    """A small training file (fast worker start) and test documents."""
    train = list(read_jsonl(REUTERS / "train.jsonl.gz", Document.from_obj))[:800]
    test = list(read_jsonl(REUTERS / "test.jsonl.gz", Document.from_obj))[:400]
    path = tmp_path_factory.mktemp("corpus") / "train.jsonl.gz"
    with gzip.open(path, "wb") as fh:
        for d in train:
            fh.write(orjson.dumps(d.to_obj()) + b"\n")
    return path, train, test


def specs_for(train: list[Document], n: int) -> list[dict[str, object]]:
    counts: dict[str, list[str]] = {}
    for d in train:
        for t in d.topics:
            counts.setdefault(t, []).append(d.id)
    cats = sorted(counts, key=lambda c: (-len(counts[c]), c))[:n]
    return [{"profile": c, "query": query_from_name(c), "positives": counts[c][:3]} for c in cats]


def doc_messages(docs: list[Document], batch: int) -> Iterator[tuple[bytes | None, bytes]]:
    plain = [Document(d.id, d.text, d.title, d.date).to_obj() for d in docs]
    if batch == 1:
        for d in plain:
            yield str(d["id"]).encode(), orjson.dumps(d)
    else:
        for i in range(0, len(plain), batch):
            yield None, orjson.dumps({"documents": plain[i:i + batch]})


class Reference:
    """The service in-process, fed the same messages as the workers."""

    def __init__(self, corpus_path: Path, partitions: int) -> None:
        self.service = Service(TrainingSet.load(corpus_path), n_shards=partitions)
        self.table: dict[str, bytes] = {}
        self.partitions = partitions

    def specs(self, specs: list[dict[str, object]]) -> None:
        msgs = [InputMessage(orjson.dumps(s), "profiles", self.service.shard(str(s["profile"])))
                for s in specs]
        self.service.apply_specs(msgs, self.table)

    def documents(self, messages: list[tuple[bytes | None, bytes]]) -> set[tuple[str, str, float]]:
        routed = self.service.route([InputMessage(v) for _, v in messages])
        out = set()
        for payload in routed.payloads:
            for p in range(self.partitions):
                out |= {(d.doc_id, d.profile, round(d.score, 9))
                        for d in self.service.score(p, payload, self.table)}
        return out

    def judgments(self, judgments: list[dict[str, object]]) -> None:
        msgs = [InputMessage(orjson.dumps(j), "judgments", self.service.shard(str(j["profile"])))
                for j in judgments]
        self.service.apply_judgments(msgs, self.table)


def decisions(settings: Settings) -> list[tuple[str, str, float]]:
    rows = read_all(settings, settings.topic("decisions"), idle=1.5)
    out = []
    for _, value, _, _ in rows:
        d = orjson.loads(value)
        out.append((d["doc_id"], d["profile"], round(d["score"], 9)))
    return out


def dead_letters(settings: Settings) -> list[dict[str, object]]:
    return [orjson.loads(v) for _, v, _, _ in read_all(settings, settings.topic("dead-letters"),
                                                       idle=1.5)]


@pytest.fixture
def settings(broker_url: str, topic_prefix: str, tmp_path: Path,
             corpus: tuple[Path, list[Document], list[Document]]) -> Settings:
    return Settings(broker=broker_url, topic_prefix=topic_prefix,
                    app_id=f"sift-{uuid.uuid4().hex[:8]}", partitions=PARTITIONS,
                    data_dir=str(tmp_path / "w1"), idf_corpus=str(corpus[0]),
                    max_document_bytes=20_000, max_batch_documents=200, batch_timeout=0.05)


def test_worker_end_to_end_bad_input_judgments_and_replacement(
    settings: Settings, corpus: tuple[Path, list[Document], list[Document]], tmp_path: Path
) -> None:
    path, train, test = corpus
    ref = Reference(path, PARTITIONS)
    specs = specs_for(train, 6)
    w1 = WorkerProcess(settings, "w1").start()
    workers = [w1]
    try:
        w1.wait_ready()
        send_all(settings, settings.topic("profiles"),
                 [(str(s["profile"]).encode(), orjson.dumps(s)) for s in specs])
        ref.specs(specs)
        wait_for(lambda: total(workers, "profiles_created") == len(specs), 60, "profiles")

        # phase A: batched and single documents with bad input between them
        part_a = list(doc_messages(test[:150], 50)) + list(doc_messages(test[150:200], 1))
        bad = [b"{oops", b"\xff\xfe", orjson.dumps({"text": "no id"}),
               orjson.dumps({"id": "empty"}), orjson.dumps({"id": "huge", "text": "x" * 30_000}),
               orjson.dumps({"documents": [{"id": "ok1", "text": "wheat"}, {"id": 1.5}]}),
               # its dead letter (about 2.3 MB in base64) is over the local broker's 2 MiB
               # default: the worker makes the dead-letters topic take it whole
               orjson.dumps({"id": "huger", "text": "y" * 1_700_000})]
        send_all(settings, settings.topic("documents"),
                 part_a[:2] + [(None, b) for b in bad] + part_a[2:])
        expected_a = ref.documents(part_a) | ref.documents([(None, bad[-2])])
        n_a = 200 + 1
        wait_for(lambda: total(workers, "documents") == n_a, 60, "phase A routed")
        # "documents" counts a document when it is routed; its shard copies are scored
        # after a round trip through the shard topic: the decisions (and the per-profile
        # counts below) are complete only once every (document, profile) pair is scored
        wait_for(lambda: total(workers, "scored") >= n_a * len(specs), 60, "phase A scored")
        got_a = decisions(settings)
        assert len(got_a) == len(set(got_a)), "a decision was emitted twice"
        assert set(got_a) == expected_a
        scored = w1.stats()["scored"]
        assert scored == {str(s["profile"]): n_a for s in specs}
        # one worker holds every shard: with SIFT_SCORE_HERE it scores what it routes and
        # nothing goes round the internal shard topic; without (the default) each shard's
        # copy does
        counts = w1.stats()["stats"]
        shard_copies = n_a * settings.partitions
        assert counts.get("scored_here", 0) == (n_a if settings.score_here else 0)
        assert counts.get("scored_from_shard_topic", 0) == (
            0 if settings.score_here else shard_copies)

        letters = dead_letters(settings)
        assert sorted(str(d["reason"]) for d in letters) == sorted(
            ["bad_json", "not_utf8", "missing_id", "missing_text", "too_large", "bad_id",
             "too_large"])
        assert all(d["topic"] == settings.topic("documents") and int(d["offset"]) >= 0
                   for d in letters)
        assert bad[-1] in [base64.b64decode(str(d["original_b64"])) for d in letters]

        # judgments: for delivered documents, twice each, plus bad ones
        gold = {d.id: d.topics for d in test}
        judged = [{"id": f"j-{doc}-{prof}", "doc_id": doc, "profile": prof,
                   "relevant": prof in gold[doc]}
                  for doc, prof, _ in sorted(got_a) if doc in gold][:60]
        bad_j = [{"doc_id": "nope", "profile": specs[0]["profile"], "relevant": True},
                 {"doc_id": test[0].id, "profile": "no-such-profile", "relevant": True},
                 {"doc_id": "t", "profile": specs[0]["profile"], "relevant": "maybe"}]
        send_all(settings, settings.topic("judgments"),
                 [(str(j["profile"]).encode(), orjson.dumps(j)) for j in judged + judged + bad_j])
        ref.judgments(judged)
        wait_for(lambda: total(workers, "judgments") == len(judged)
                 and total(workers, "judgments_duplicate") == len(judged), 60, "judgments")
        wait_for(lambda: total(workers, "dead_letters") == 7 + 3, 30, "judgment dead letters")
        # the profiles as the state and journal changelogs hold them, recovered as a
        # worker recovers them
        states = recovered_profiles(settings, ref.service)
        n_judged = {p: e.profile.n_judged_ for p, e in states.items()}  # type: ignore[attr-defined]
        want = {str(s["profile"]): sum(j["profile"] == s["profile"] for j in judged)
                for s in specs}
        assert n_judged == want

        # a replacement worker (new process, empty data dir) recovers the state
        assert w1.stop() == 0
        final = orjson.loads((Path(settings.data_dir) / "stats.json").read_bytes())
        assert final["stats"]["documents"] == n_a
        w2 = WorkerProcess(replace(settings, data_dir=str(tmp_path / "w2")), "w2").start()
        workers = [w2]
        w2.wait_ready()
        part_b = list(doc_messages(test[200:400], 40))
        send_all(settings, settings.topic("documents"), part_b)
        expected_b = ref.documents(part_b)
        wait_for(lambda: total(workers, "documents") >= 200, 60, "phase B routed")
        wait_for(lambda: total(workers, "scored") >= 200 * len(specs), 60, "phase B scored")
        got = decisions(settings)
        got_b = set(got) - set(got_a)
        assert got_b == expected_b
        # nothing consumed twice after the restart (offsets committed and honoured)
        assert total(workers, "documents") == 200
        assert len(got) == len(set(got))

        # each profile's decisions carry one epoch, through the replacement worker; a
        # profile deleted and created again refuses a judgment carrying its old one
        rows = [orjson.loads(v) for _, v, _, _ in
                read_all(settings, settings.topic("decisions"), idle=1.5)]
        lives: dict[str, set[str]] = {}
        for r in rows:
            lives.setdefault(str(r["profile"]), set()).add(str(r["profile_epoch"]))
        assert all(len(v) == 1 for v in lives.values()) and len(set.union(*lives.values())) \
            == len(lives)
        name = str(specs[0]["profile"])
        (old,) = lives[name]
        send_all(settings, settings.topic("profiles"),
                 [(name.encode(), orjson.dumps({"profile": name, "delete": True})),
                  (name.encode(), orjson.dumps(specs[0]))])
        wait_for(lambda: total(workers, "profiles_created") == 1, 60, "profile created again")
        doc = test[200].id
        send_all(settings, settings.topic("judgments"), [(name.encode(), orjson.dumps(
            {"id": "j-stale", "doc_id": doc, "profile": name, "relevant": True,
             "profile_epoch": old}))])
        wait_for(lambda: total(workers, "dead_letters.stale_profile") == 1, 30,
                 "stale judgment dead-lettered")
        letter = next(d for d in dead_letters(settings) if d["reason"] == "stale_profile")
        assert old in str(letter["message"]) and letter["topic"] == settings.topic("judgments")
    finally:
        for w in [*workers, w1]:
            w.stop()


@pytest.mark.slow
def test_worker_killed_mid_stream_loses_nothing(
    settings: Settings, corpus: tuple[Path, list[Document], list[Document]], tmp_path: Path
) -> None:
    """SIGKILL while documents flow: the replacement re-reads what was not committed
    (at least once), and every document is scored; repeated decisions are identical."""
    path, train, test = corpus
    ref = Reference(path, PARTITIONS)
    specs = specs_for(train, 4)
    # the killed worker's partitions move once the group gives it up, after the session
    # timeout: 60 s by default, most of the replacement's 90 s wait_ready
    settings = replace(settings, session_timeout=10.0, heartbeat_interval=1.0)
    w1 = WorkerProcess(settings, "w1").start()
    w2: WorkerProcess | None = None
    try:
        w1.wait_ready()
        send_all(settings, settings.topic("profiles"),
                 [(str(s["profile"]).encode(), orjson.dumps(s)) for s in specs])
        ref.specs(specs)
        wait_for(lambda: total([w1], "profiles_created") == len(specs), 60, "profiles")
        msgs = list(doc_messages(test, 1))
        expected = ref.documents(msgs)
        send_all(settings, settings.topic("documents"), msgs)
        wait_for(lambda: total([w1], "documents") >= 100, 60, "some documents scored")
        w1.kill()
        w2 = WorkerProcess(replace(settings, data_dir=str(tmp_path / "w2")), "w2").start()
        w2.wait_ready()
        # nothing lost: every expected decision arrives (duplicates carry the same score)
        wait_for(lambda: set(decisions(settings)) >= expected, 120, "every decision")
        assert set(decisions(settings)) == expected
    finally:
        w1.kill()
        if w2 is not None:
            w2.stop()
