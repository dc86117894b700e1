"""A worker lets go of the profiles of shards that moved to another worker.

Before the fifty-fourth session the decoded profiles of a shard whose table partition
had moved away stayed in the worker's banks until the shard came back (and were then
decoded again anyway), and the worker's count of profiles held (``/sift/stats``,
``sift_worker_profiles``) went on counting them.
"""

from __future__ import annotations

import orjson

from sift.agents.service import InputMessage, Service, TrainingSet, default_corpus
from sift.topics.codecs import read_jsonl
from sift.topics.records import Document
from tests.agents.test_service import N_SHARDS, REUTERS_TEST, judgment_msg, msg, spec_msg

QUERIES = {"oil": ("crude oil prices", "rocchio"), "wheat": ("wheat exports", "kantor"),
           "gold": ("gold mine", "knn"), "rates": ("interest rates", "rocchio"),
           "trade": ("trade deficit", "kantor"), "coffee": ("coffee", "rocchio"),
           "ship": ("shipping", "rocchio"), "jobs": ("unemployment", "knn")}


def key(d: object) -> tuple[object, ...]:
    return (d.doc_id, d.profile, d.score, d.threshold, d.model_version)  # type: ignore[attr-defined]


def test_profiles_of_shards_held_elsewhere_are_released_and_reloaded_on_return() -> None:
    training = TrainingSet.load(default_corpus())
    docs = [d for _, d in zip(range(300), read_jsonl(REUTERS_TEST, Document.from_obj),
                              strict=False)]
    gold = {d.id: d.topics for d in docs}
    table: dict[str, bytes] = {}
    w1 = Service(training, n_shards=N_SHARDS)
    w1.apply_specs([spec_msg(w1, profile=p, query=q, model=m)
                    for p, (q, m) in QUERIES.items()], table)
    shard_of = {p: w1.shard(p) for p in QUERIES}
    assert set(shard_of.values()) == set(range(N_SHARDS))  # every shard holds some
    moved = {0, 2}
    kept = sorted(set(range(N_SHARDS)) - moved)
    in_moved = sorted(p for p, s in shard_of.items() if s in moved)

    def score_here(svc: Service, shards: list[int], batch: list[Document], offset: int,
                   tab: dict[str, bytes]) -> list[tuple[object, ...]]:
        routed = svc.route([msg({"documents": [x.to_obj() for x in batch]}, offset=offset)])
        return sorted(key(d) for ids, X in routed.batches
                      for d in svc.score_here(shards, ids, X, tab))

    assert score_here(w1, list(range(N_SHARDS)), docs[:100], 0, table)
    assert dict(w1.scored) == dict.fromkeys(QUERIES, 100)  # the joint bank spans them all
    assert sorted(w1.counters()["profiles"]) == sorted(QUERIES)

    # shards 0 and 2 move to w2, which reads their profiles from the changelog (a copy)
    theirs = {p: bytes(table[p]) for p in in_moved}
    released = w1.release_shards(kept)
    assert sorted(released) == in_moved
    assert sorted(w1.counters()["profiles"]) == sorted(p for p in QUERIES if p not in in_moved)
    assert w1.stats["profiles_released"] == len(in_moved)
    assert not set(in_moved) & (set(w1._entries) | set(w1._raw) | set(w1._jraw))
    assert w1.release_shards(kept) == []  # nothing more to let go
    # what w1 still holds scores as before: the joint bank was rebuilt without them
    score_here(w1, kept, docs[100:200], 1, table)
    assert dict(w1.scored) == {p: 100 if p in in_moved else 200 for p in QUERIES}

    # w2 learns judgments for the moved profiles meanwhile, and writes their state
    w2 = Service(training, n_shards=N_SHARDS)
    w2.sync_shards(sorted(moved), theirs)
    delivered = score_here(w2, sorted(moved), docs[100:200], 1, theirs)
    res = w2.apply_judgments(
        [judgment_msg(w2, doc_id=d, profile=p, relevant=p in gold[str(d)])
         for d, p, *_ in delivered], theirs)
    assert res.changed
    # the shards come back to w1 with what w2 wrote: w1 scores with w2's state, not its own
    table.update(theirs)
    back = score_here(w1, list(range(N_SHARDS)), docs[200:300], 2, table)
    there = score_here(w2, sorted(moved), docs[200:300], 2, theirs)
    assert there and [d for d in back if shard_of[str(d[1])] in moved] == there
    assert {d[4] for d in there} != {0}  # the versions learned on w2
    assert sorted(w1.counters()["profiles"]) == sorted(QUERIES)


def test_releasing_keeps_what_a_worker_still_needs() -> None:
    """Holding every shard, nothing is released; a shard whose bank was never made
    (no profile there yet) is no trouble; a judgment for a released profile whose
    table partition came back is applied to the state in the table."""
    training = TrainingSet.load(default_corpus())
    table: dict[str, bytes] = {}
    svc = Service(training, n_shards=N_SHARDS)
    svc.apply_specs([spec_msg(svc, profile="oil", query="crude oil prices")], table)
    assert svc.release_shards(range(N_SHARDS)) == []
    assert svc.counters()["profiles"] == ["oil"]
    assert svc.release_shards([]) == ["oil"] and svc.counters()["profiles"] == []
    doc = {"id": "d1", "text": "crude oil prices fell as opec met"}
    (ids, X), = svc.route([InputMessage(orjson.dumps(doc), "documents", 0, 0)]).batches
    svc.store.put(ids, X)  # as scoring it elsewhere would
    res = svc.apply_judgments([judgment_msg(svc, doc_id="d1", profile="oil", relevant=True)],
                              table)
    assert res.changed and not res.dead_letters
    assert svc.counters()["profiles"] == ["oil"]
    assert svc._entries["oil"].profile.n_judged_ == 1


def test_released_shards_let_go_of_unusable_records_and_deleted_profiles_counts() -> None:
    """An unusable record remembered for a shard that moved away is let go with it (it is
    read, logged and counted again if the shard comes back); a profile deleted by another
    worker while its shard was away leaves the ``scored`` counts when its shard is synced
    again, as a deletion here does."""
    training = TrainingSet.load(default_corpus())
    table: dict[str, bytes] = {}
    svc = Service(training, n_shards=N_SHARDS)
    svc.apply_specs([spec_msg(svc, profile=p, query=q) for p, (q, _) in QUERIES.items()], table)
    bad = next(p for p in QUERIES if svc.shard(p) == 1)
    table[bad] = b"\x00 not a record"
    assert svc.entry(bad, table) is None and svc.stats["bad_state"] == 1
    svc.release_shards([0, 2, 3])
    assert bad not in svc._bad
    assert svc.entry(bad, table) is None and svc.stats["bad_state"] == 2  # said again
    # scored counts, then a profile deleted elsewhere while shard 2 was away
    score_all_shards = list(range(N_SHARDS))
    del table[bad]
    (ids, X), = svc.route([msg({"documents": [{"id": "a", "text": "crude oil"}]})]).batches
    svc.score_here(score_all_shards, ids, X, table)
    gone = next(p for p in QUERIES if svc.shard(p) == 2)
    assert svc.scored[gone] == 1
    del table[gone]
    svc.sync_shards([2], table)
    assert gone not in svc.scored and gone not in svc.counters()["profiles"]
    assert all(svc.scored[p] == 1 for p in QUERIES if p not in (gone, bad))
