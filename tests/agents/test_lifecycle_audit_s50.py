"""Lifecycle audit, fiftieth session: a standing profile created, replaced (another
model, parameters, update policy, bags), deleted and created again under the same name
while documents and judgments flow and partitions move. Each ``test_l<n>`` is a finding
of /tmp/s50/lifecycle.md (docs/reliability.md item 80) and failed before its fix; the
``test_checked_*`` ones pin down what the audit found right.
"""

from __future__ import annotations

import asyncio
from typing import Any
from unittest.mock import Mock

import orjson
import pytest
from faust.types import TP

from sift.agents.keys import key_digests
from sift.agents.service import InputMessage, Service, TrainingSet, shard_of
from tests.agents.offline import TRAIN, agent, offline_worker, training_set


@pytest.fixture(scope="module")
def training() -> TrainingSet:
    return training_set()


def spec(name: str, query: str, offset: int = 0, **fields: Any) -> InputMessage:
    return InputMessage(orjson.dumps({"profile": name, "query": query, **fields}),
                        "profiles", 0, offset)


def delete(name: str, offset: int = 0) -> InputMessage:
    return InputMessage(orjson.dumps({"profile": name, "delete": True}), "profiles", 0, offset)


def judgment(i: int, name: str, doc: int, relevant: bool) -> InputMessage:
    return InputMessage(orjson.dumps({"id": f"j{i}", "doc_id": f"t{doc}", "profile": name,
                                      "relevant": relevant, "text": TRAIN[doc]}),
                        "judgments", 0, 100 + i)


def judged(svc: Service, table: dict[str, bytes], name: str, n: int) -> None:
    """``n`` judgments of ``name`` (ids j0.., documents t0.., alternately relevant)."""
    for i in range(n):
        out = svc.apply_judgments([judgment(i, name, i % len(TRAIN), i % 2 == 0)], table)
        assert not out.dead_letters


def payload_scores(svc: Service, table: dict[str, bytes]) -> list[Any]:
    """Decisions of the training texts scored as documents d0.. on shard 0."""
    vec = svc.vectorizer
    return svc.score_here([0], [f"d{i}" for i in range(len(TRAIN))], vec.transform(TRAIN), table)


# ------------------------------------------------------------------------------ L1
def test_l1_keys_a_worker_wrote_leave_with_their_partition(tmp_path: Any,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Faust's memory store forgets the keys of a revoked partition only if recovery put
    them there; the profiles a worker created itself stayed in its table, so a profile
    deleted by the next owner (its tombstone compacted away by the time the partition
    came back) was scored again by this worker. The keys sift writes are now placed too."""
    import faust.tables.base as faust_tables

    worker = offline_worker(str(tmp_path))
    sent = Mock()
    sent.return_value.message.partition = 0  # (Faust only checks it is set)
    monkeypatch.setattr(faust_tables.Collection, "send_changelog", sent)
    for view in (worker.table, worker.service.journal):
        del view.table.send_changelog  # the offline worker's mock: Faust's path instead
    names = {shard_of(n, 2): n for n in ("wheat", "oil", "gold", "corn", "ship")}
    assert set(names) == {0, 1}
    for name in names.values():
        worker.table[name] = b"record of " + name.encode()
        worker.service.journal[name] = b"journal of " + name.encode()
    worker.table[names[0]] = b"again"  # rewritten: still one key
    del worker.table[names[1]]
    worker.table[names[1]] = b"created again"

    async def keep(partition: int) -> None:
        for view in (worker.table, worker.service.journal):
            t = view.table
            tp = TP(t.changelog_topic.get_topic_name(), partition)
            await t.on_recovery_completed({tp}, set())

    asyncio.run(keep(0))
    assert list(worker.table) == [names[0]] and worker.table[names[0]] == b"again"
    assert list(worker.service.journal) == [names[0]]
    # what is written after the move is placed again
    worker.table[names[1]] = b"b"
    asyncio.run(keep(1))
    assert list(worker.table) == [names[1]]


# ------------------------------------------------------------------------------ L2
def test_l2_a_batch_of_specs_is_applied_in_partition_order_across_the_two_kinds(
        tmp_path: Any) -> None:
    """Review specs of a consumed batch were applied before the standing ones: "delete
    profile x" then "start review x" in one batch refused the review (``profile_exists``,
    x was still a profile) and then deleted x; in two batches it worked."""
    worker = offline_worker(str(tmp_path))
    name = "wilson"
    part = shard_of(name, 2)
    review = orjson.dumps({"profile": name, "mode": "review", "query": "wilson disease"})

    async def run() -> None:
        async with agent(worker, "apply_specs").test_context() as a:
            await a.put(orjson.dumps({"profile": name, "query": "wilson"}),
                        key=name.encode(), partition=part)
            await asyncio.sleep(0.2)
            assert name in worker.table
            # one batch: both before the agent takes any
            await a.put(orjson.dumps({"profile": name, "delete": True}), key=name.encode(),
                        partition=part, wait=False)
            await a.put(review, key=name.encode(), partition=part, wait=False)
            await asyncio.sleep(0.3)

    asyncio.run(run())
    dead = [orjson.loads(c.kwargs["value"]) for c in
            worker.topics["dead-letters"].send.await_args_list]
    assert dead == []
    assert name not in worker.table
    assert worker.reviews.service.stats["reviews_created"] == 1
    assert worker.service.stats["profiles_deleted"] == 1


# ------------------------------------------------------------------------------ L3
@pytest.mark.parametrize("bags", [1, 3])
def test_l3_a_replaced_profiles_model_version_goes_on_from_the_old_one(
        training: TrainingSet, bags: int) -> None:
    """A replacement was fitted afresh and its version started again (5 -> 2), so the
    decisions after a spec update carried a lower model_version than before it."""
    table: dict[str, bytes] = {}
    svc = Service(training, n_shards=1, journal={})
    svc.apply_specs([spec("wheat", "wheat", bags=bags)], table)
    judged(svc, table, "wheat", 4)
    before = max(d.model_version for d in payload_scores(svc, table))
    old = svc.entry("wheat", table)
    assert old is not None and old.profile.version_ == before
    versions = [before]
    for i, change in enumerate(({"query": "wheat crop"}, {"model": "knn"}, {"update": 3},
                                {"update": "never"}, {"bags": 1 if bags > 1 else 2}), 1):
        out = svc.apply_specs([spec("wheat", change.pop("query", "wheat"), i,
                                    **{"bags": bags, **change})], table)
        assert not out.dead_letters
        entry = svc.entry("wheat", table)
        assert entry is not None
        versions.append(entry.profile.version_)
        decisions = payload_scores(svc, table)
        assert all(d.model_version == versions[-1] for d in decisions)
        # and a worker reading the record back agrees
        fresh = Service(training, n_shards=1, journal=dict(svc.journal or {}))
        again = fresh.entry("wheat", dict(table))
        assert again is not None and again.profile.version_ == versions[-1]
    assert versions == sorted(versions) and len(set(versions)) == len(versions), versions
    # a profile deleted and created again is a new profile: its versions start again
    svc.apply_specs([delete("wheat", 10), spec("wheat", "wheat", 11)], table)
    entry = svc.entry("wheat", table)
    assert entry is not None and entry.profile.version_ < versions[-1]


# ------------------------------------------------------------------------------ L4
def test_l4_judgments_a_replacement_under_never_did_not_learn_can_be_learned_later(
        training: TrainingSet) -> None:
    """A replacement under ``update="never"`` learns none of the old profile's judgments
    (batch filtering: the spec's model) but kept all their keys and labels; a later spec
    that learns again carried nothing (the never profile held nothing), and the
    judgments sent again to restore the feedback were skipped as duplicates: lost."""
    table: dict[str, bytes] = {}
    svc = Service(training, n_shards=1, journal={})
    svc.apply_specs([spec("wheat", "wheat")], table)
    judged(svc, table, "wheat", 4)
    svc.apply_specs([spec("wheat", "wheat", 1, update="never")], table)
    frozen = svc.entry("wheat", table)
    assert frozen is not None and frozen.profile.n_judged_ == 0
    assert not frozen.judged and not frozen.labels  # it learned none of them
    # judgments while it ignores them are remembered: a redelivery is a duplicate
    out = svc.apply_judgments([judgment(9, "wheat", 4, True)], table)
    assert not out.dead_letters and frozen.profile.n_ignored_ == 1
    svc.apply_judgments([judgment(9, "wheat", 4, True)], table)
    assert svc.stats["judgments_duplicate"] == 1 and frozen.profile.n_ignored_ == 1
    svc.apply_specs([spec("wheat", "wheat", 2)], table)
    # sent again, all five: learned (the never profile learned none, j9 included)
    judged(svc, table, "wheat", 4)
    svc.apply_judgments([judgment(9, "wheat", 4, True)], table)
    entry = svc.entry("wheat", table)
    assert entry is not None and entry.profile.n_judged_ == 5
    assert svc.stats["judgments_duplicate"] == 1
    # the same as a profile that learned them once
    ref_table: dict[str, bytes] = {}
    ref = Service(training, n_shards=1, journal={})
    ref.apply_specs([spec("wheat", "wheat")], ref_table)
    judged(ref, ref_table, "wheat", 4)
    ref.apply_judgments([judgment(9, "wheat", 4, True)], ref_table)
    want = ref.entry("wheat", ref_table)
    assert want is not None
    assert want.profile.threshold_ == entry.profile.threshold_
    assert want.judged == entry.judged and want.labels == entry.labels


def test_l4_a_replacement_that_learns_still_carries_every_key(training: TrainingSet) -> None:
    """Under a learning policy nothing changes: the keys of all the old judgments (those
    evicted included) are carried, so a redelivered judgment stays a duplicate."""
    table: dict[str, bytes] = {}
    svc = Service(training, n_shards=1, journal={})
    svc.apply_specs([spec("wheat", "wheat", update=3)], table)
    judged(svc, table, "wheat", 4)  # three learned, one pending
    svc.apply_specs([spec("wheat", "wheat crop", 1, model="kantor", update=5)], table)
    entry = svc.entry("wheat", table)
    assert entry is not None
    assert (entry.profile.n_judged_, entry.profile.n_pending_) == (0, 4)
    assert sorted(entry.judged.digests().tolist()) == sorted(
        key_digests(["j0", "j1", "j2", "j3"]))
    assert len(entry.labels) == 4
    judged(svc, table, "wheat", 4)
    assert svc.stats["judgments_duplicate"] == 4


# ------------------------------------------------------------------------------ L7
def test_l7_a_deleted_profiles_counters_go_with_it(training: TrainingSet) -> None:
    table: dict[str, bytes] = {}
    svc = Service(training, n_shards=1, journal={})
    svc.apply_specs([spec("wheat", "wheat"), spec("oil", "crude oil", 1)], table)
    payload_scores(svc, table)
    assert set(svc.counters()["scored"]) == {"wheat", "oil"}
    svc.apply_specs([delete("wheat", 2)], table)
    assert set(svc.counters()["scored"]) == {"oil"}


# ------------------------------------------------------------------------------ checked
def test_checked_a_judgment_for_a_deleted_profile_is_dead_lettered_and_counted(
        training: TrainingSet) -> None:
    """Dead-lettered ``unknown_profile`` with the name, counted; the profile created again
    afterwards starts without the old keys (delete forgets the feedback, as ``reset``),
    so the judgment sent again is learned by it, once."""
    table: dict[str, bytes] = {}
    svc = Service(training, n_shards=1, journal={})
    svc.apply_specs([spec("wheat", "wheat")], table)
    judged(svc, table, "wheat", 2)
    svc.apply_specs([delete("wheat", 1)], table)
    out = svc.apply_judgments([judgment(0, "wheat", 0, True)], table)
    assert [(d.reason, d.message) for d in out.dead_letters] == [
        ("unknown_profile", "judgment for unknown profile 'wheat'")]
    assert svc.stats["dead_letters.unknown_profile"] == 1
    assert payload_scores(svc, table) == []  # nothing scored for it
    svc.apply_specs([spec("wheat", "wheat", 2)], table)
    entry = svc.entry("wheat", table)
    assert entry is not None and not entry.replaces and not entry.judged
    judged(svc, table, "wheat", 2)
    judged(svc, table, "wheat", 2)
    assert entry.profile.n_judged_ == 2 and svc.stats["judgments_duplicate"] == 2


def test_checked_held_judgments_move_once_into_a_replacement_and_a_new_worker_agrees(
        training: TrainingSet) -> None:
    """Judgments waiting under ``update=3`` are carried once into a replacement of
    another model, policy and bags (pending again under 5, applied under every), and a
    worker reading the record and the journal ends with the same profile."""
    table: dict[str, bytes] = {}
    journal: dict[str, bytes] = {}
    svc = Service(training, n_shards=1, journal=journal)
    svc.apply_specs([spec("oil", "oil", update=3)], table)
    svc.apply_judgments([judgment(0, "oil", 2, True), judgment(1, "oil", 3, True)], table)
    svc.apply_specs([spec("oil", "oil", 1, model="knn", update=5, bags=2)], table)
    entry = svc.entry("oil", table)
    assert entry is not None and (entry.profile.n_pending_, entry.profile.n_judged_) == (2, 0)
    svc.apply_judgments([judgment(2, "oil", 0, False)], table)
    svc.apply_specs([spec("oil", "oil", 2, model="kantor")], table)
    entry = svc.entry("oil", table)
    assert entry is not None and (entry.profile.n_pending_, entry.profile.n_judged_) == (0, 3)
    svc.apply_judgments([judgment(3, "oil", 1, True)], table)
    fresh = Service(training, n_shards=1, journal=dict(journal))
    again = fresh.entry("oil", dict(table))
    assert again is not None
    assert orjson.dumps(again.profile.to_state()) == orjson.dumps(
        svc.entry("oil", table).profile.to_state())  # type: ignore[union-attr]
    assert sorted(again.judged.digests().tolist()) == sorted(key_digests(["j0", "j1", "j2", "j3"]))


def test_checked_delete_and_create_in_one_batch_scores_the_new_model_at_once(
        training: TrainingSet) -> None:
    table: dict[str, bytes] = {}
    svc = Service(training, n_shards=1, journal={})
    svc.apply_specs([spec("p", "wheat")], table)
    judged(svc, table, "p", 3)
    first = {d.doc_id for d in payload_scores(svc, table)}
    svc.apply_specs([delete("p", 1), spec("p", "crude oil", 2)], table)
    ref_table: dict[str, bytes] = {}
    ref = Service(training, n_shards=1, journal={})
    ref.apply_specs([spec("p", "crude oil")], ref_table)
    got = [(d.doc_id, d.score, d.model_version) for d in payload_scores(svc, table)]
    assert got == [(d.doc_id, d.score, d.model_version) for d in payload_scores(ref, ref_table)]
    assert {d for d, _, _ in got} != first
