"""The streaming service's rules, without Kafka."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import orjson
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kp_murmur2

import sift.agents.service as service_module
from sift.agents.keys import key_digests
from sift.agents.service import (
    VECTOR_BATCH_MAGIC,
    VECTOR_BATCH_MAGIC_COUNTS,
    VECTOR_BATCH_MAGIC_SHARDS,
    DocumentStore,
    InputMessage,
    RouteResult,
    Service,
    ServiceError,
    TrainingSet,
    dead_letter,
    decode_profile_record,
    decode_vector_batch,
    default_corpus,
    encode_profile_record,
    encode_vector_batch,
    learn_batch,
    read_vector_batch,
    reshard_vector_batch,
    same_payloads,
    shard_of,
    split_rows,
)
from sift.filters.bagging import BaggedProfile
from sift.filters.profile import Profile
from sift.filters.vectorize import Vectorizer
from sift.topics.codecs import decode_profile_spec
from sift.topics.errors import RecordError

TRAIN = [
    ("t1", "wheat exports rose sharply this season"), ("t2", "wheat crop harvest in kansas"),
    ("t3", "crude oil prices fell on opec news"), ("t4", "oil output from the gulf"),
    ("t5", "gold mine production up"), ("t6", "gold bullion prices steady"),
    ("t7", "wheat tender by egypt"), ("t8", "crude oil stocks and refinery output"),
]
N_SHARDS = 4
REUTERS_TEST = Path(__file__).resolve().parents[2] / "data" / "reuters21578" / "test.jsonl.gz"


@pytest.fixture
def training() -> TrainingSet:
    vec = Vectorizer(n_features=2**12).fit(t for _, t in TRAIN)
    return TrainingSet(vec, vec.transform([t for _, t in TRAIN]), {i: k for k, (i, _) in
                                                                 enumerate(TRAIN)})


@pytest.fixture
def service(training: TrainingSet) -> Service:
    return Service(training, n_shards=N_SHARDS, recent_documents=50, max_document_bytes=2000,
                   max_batch_documents=10)


def msg(obj: object, partition: int = 0, offset: int = 0, topic: str = "documents") -> InputMessage:
    value = obj if isinstance(obj, bytes) else orjson.dumps(obj)
    return InputMessage(value, topic, partition, offset)


def spec_msg(service: Service, **spec: object) -> InputMessage:
    return msg(spec, partition=service.shard(str(spec["profile"])), topic="profiles")


def judgment_msg(service: Service, **j: object) -> InputMessage:
    return msg(j, partition=service.shard(str(j["profile"])), topic="judgments")


def add_wheat(service: Service, table: dict[str, bytes]) -> None:
    service.apply_specs([spec_msg(service, profile="wheat", query="wheat", positives=["t1"])],
                        table)


def score_all(service: Service, table: dict[str, bytes], docs: list[dict[str, str]]) -> list:
    routed = service.route([msg(d, offset=i) for i, d in enumerate(docs)])
    out = []
    for payload in routed.payloads:
        for p in range(N_SHARDS):
            out.extend(service.score(p, payload, table))
    return out


def test_shard_matches_kafka_default_partitioner() -> None:
    for key in ["wheat", "earn", "money-fx", "ü-profile", "x" * 300]:
        expected = (kp_murmur2(key.encode()) & 0x7FFFFFFF) % 7
        assert shard_of(key, 7) == expected


def test_bad_documents_are_dead_lettered_and_nothing_else_is_lost(service: Service) -> None:
    good = {"id": "d1", "text": "wheat"}
    messages = [
        msg(b"{not json", offset=0), msg(b"\xff\xfe\x00", offset=1),
        msg({"text": "no id"}, offset=2),
        msg({"id": "d0"}, offset=3), msg({"id": 5.5, "text": "x"}, offset=4),
        msg({"id": "big", "text": "w" * 3000}, offset=5), msg(good, offset=6),
        msg({"documents": [{"id": "d2", "text": "oil"}, {"id": "d3"},
                           {"id": "d4", "text": "gold"}]}, offset=7),
        msg({"documents": [{"id": f"x{i}", "text": "a"} for i in range(11)]}, offset=8),
        msg({"documents": "nope"}, offset=9), msg([1, 2], offset=10),
    ]
    result = service.route(messages)
    reasons = [(d.reason, d.offset) for d in result.dead_letters]
    assert reasons == [("bad_json", 0), ("not_utf8", 1), ("missing_id", 2), ("missing_text", 3),
                       ("bad_id", 4), ("too_large", 5), ("missing_text", 7),
                       ("batch_too_large", 8), ("bad_batch", 9), ("not_an_object", 10)]
    assert result.dead_letters[1].original == b"\xff\xfe\x00"
    assert orjson.loads(result.dead_letters[6].original) == {"id": "d3"}
    ids = [i for p in result.payloads for i in decode_vector_batch(p)[0]]
    assert ids == ["d1", "d2", "d4"]
    assert service.stats["dead_letters"] == 10


def test_a_batch_and_a_document_exactly_at_the_limits_are_accepted(service: Service) -> None:
    """The limits are inclusive: max_batch_documents=10 documents in a batch and
    max_document_bytes=2000 bytes of text (and title) pass; one more of either does not."""
    batch = [{"id": f"b{i}", "text": "wheat"} for i in range(10)]
    at_limit = [
        {"id": "ascii", "text": "w" * 2000},
        {"id": "utf8", "text": "\u00e9" * 1000},  # 2 bytes each in UTF-8
        {"id": "titled", "title": "t" * 500, "text": "w" * 1500},
    ]
    over = [{"id": "over", "text": "w" * 2001}, {"id": "over_titled", "title": "t" * 501, "text": "w" * 1500}]
    messages = [msg({"documents": batch}, offset=0),
                msg({"documents": [*batch, {"id": "b10", "text": "wheat"}]}, offset=1)]
    messages += [msg(d, offset=2 + i) for i, d in enumerate(at_limit + over)]
    result = service.route(messages)
    assert [(d.reason, d.offset) for d in result.dead_letters] == [
        ("batch_too_large", 1), ("too_large", 5), ("too_large", 6)]
    ids = [i for p in result.payloads for i in decode_vector_batch(p)[0]]
    assert ids == [f"b{i}" for i in range(10)] + ["ascii", "utf8", "titled"]
    assert result.n_documents == 13


def test_a_dead_letter_says_where_its_message_came_from(service: Service) -> None:
    """partition and offset are the message's own on the wire too (the integration test
    only checks that the offset is >= 0)."""
    m = InputMessage(b"x", "documents", 3, 17)
    letter = dead_letter(m, RecordError("bad_json", "not JSON"))
    assert (letter.topic, letter.partition, letter.offset, letter.original) == ("documents", 3, 17, b"x")
    obj = letter.to_obj()
    assert obj["reason"] == "bad_json" and obj["message"] == "not JSON"
    assert (obj["topic"], obj["partition"], obj["offset"]) == ("documents", 3, 17)
    assert obj["original_b64"] == "eA==" and obj["ts"] == letter.ts > 0
    # through the service, for a message elsewhere than partition 0, offset 0
    result = service.route([InputMessage(b"{not json", "documents", 2, 41)])
    (wire,) = [orjson.loads(orjson.dumps(d.to_obj())) for d in result.dead_letters]
    assert (wire["reason"], wire["topic"], wire["partition"], wire["offset"]) == ("bad_json", "documents", 2, 41)
    assert wire["original_b64"] == "e25vdCBqc29u"  # base64 of b"{not json"


def test_profiles_score_documents_once_per_shard(service: Service) -> None:
    table: dict[str, bytes] = {}
    res = service.apply_specs([spec_msg(service, profile="wheat", query="wheat",
                                        positives=["t1", "t2"]),
                               spec_msg(service, profile="oil", query="crude oil", model="knn",
                                        positives=["t3", "t8"]),
                               spec_msg(service, profile="gold", query="gold",
                                        positives=["a text about gold bullion"])], table)
    assert not res.dead_letters and sorted(table) == ["gold", "oil", "wheat"]
    decisions = score_all(service, table, [{"id": "n1", "text": "wheat exports to egypt"},
                                           {"id": "n2", "text": "opec crude oil output"}])
    got = {(d.doc_id, d.profile) for d in decisions}
    assert ("n1", "wheat") in got and ("n2", "oil") in got and ("n1", "oil") not in got
    assert dict(service.scored) == {"wheat": 2, "oil": 2, "gold": 2}
    assert "n1" in service.store


def test_a_documents_title_is_scored_with_its_text(service: Service) -> None:
    """The wire contract's example carries the title apart from the text: its words
    count (they were display only, so a document whose topic was in its title alone was
    never delivered), once when the text already begins with it."""
    table: dict[str, bytes] = {}
    service.apply_specs([spec_msg(service, profile="oil", query="crude oil opec",
                                  positives=["t3", "t8"])], table)
    docs = [{"id": "apart", "title": "OPEC CRUDE OIL OUTPUT", "text": "officials met on tuesday"},
            {"id": "in-text", "text": "OPEC CRUDE OIL OUTPUT\nofficials met on tuesday"},
            {"id": "both", "title": "OPEC CRUDE OIL OUTPUT",
             "text": "OPEC CRUDE OIL OUTPUT\nofficials met on tuesday"},
            {"id": "neither", "text": "officials met on tuesday"}]
    scores = {d.doc_id: d.score for d in score_all(service, table, docs)}
    assert set(scores) == {"apart", "in-text", "both"}
    assert scores["apart"] == scores["in-text"] == scores["both"]


EIGHT_PROFILES = ["wheat", "oil", "gold", "grain", "crude", "bullion", "egypt", "opec"]
FIVE_TEXTS = [{"id": f"n{i}", "text": t} for i, t in enumerate(
    ["wheat exports to egypt", "opec crude oil output", "gold bullion steady",
     "grain harvest and wheat crop", "refinery output and oil stocks"])]


def eight_profiles(training: TrainingSet) -> tuple[Service, dict[str, bytes]]:
    """A fresh service and table with the profiles of :data:`EIGHT_PROFILES` (over
    several shards), each with its name as query and one training positive."""
    svc = Service(training, n_shards=N_SHARDS, recent_documents=50,
                  max_document_bytes=2000, max_batch_documents=10)
    table: dict[str, bytes] = {}
    res = svc.apply_specs([spec_msg(svc, profile=n, query=n, positives=[f"t{1 + k % 8}"])
                           for k, n in enumerate(EIGHT_PROFILES)], table)
    assert not res.dead_letters
    return svc, table


def test_copies_of_a_payload_are_scored_once_for_all_their_shards(training: TrainingSet) -> None:
    """What a worker holding several shards gets from the shard topic: the same routed
    batch once per shard. Scored as one, the decisions are those of scoring each copy
    for its own shard, every profile scores each document once, and a re-delivered
    copy is skipped."""
    names, texts = EIGHT_PROFILES, FIVE_TEXTS

    def fresh() -> tuple[Service, dict[str, bytes]]:
        return eight_profiles(training)

    one, t1 = fresh()
    assert len({one.shard(n) for n in names}) >= 3  # the copies below span several shards
    (payload,) = one.route([msg(d, offset=i) for i, d in enumerate(texts)]).payloads
    each = [d for p in range(N_SHARDS) for d in one.score(p, payload, t1)]
    two, t2 = fresh()
    copies = [InputMessage(payload, "shard", p, 10 + p) for p in range(N_SHARDS)]
    joint = two.score_copies(copies, t2).decisions
    key = lambda d: (d.doc_id, d.profile, d.score, d.threshold)  # noqa: E731
    assert each and sorted(map(key, joint)) == sorted(map(key, each))
    assert dict(two.scored) == {n: len(texts) for n in names}
    assert two.stats["scored_from_shard_topic"] == len(texts) * N_SHARDS
    # copies already processed are skipped, a new one is scored (for its shard only)
    again = two.score_copies([*copies[:2], InputMessage(payload, "shard", 2, 20)], t2).decisions
    assert two.stats["redelivered_skipped"] == 2
    assert {d.profile for d in again} == {d.profile for d in each if two.shard(d.profile) == 2}
    with pytest.raises(ServiceError, match="copies of one payload"):
        two.score_copies([InputMessage(payload, "shard", 0, 30), InputMessage(b"x", "shard", 1, 30)],
                         t2)


@pytest.mark.parametrize("as_counts", [False, True], ids=["weights", "counts"])
def test_one_copy_for_the_shards_elsewhere_is_scored_once_per_shard(
        training: TrainingSet, as_counts: bool) -> None:
    """The router sends one copy naming all the shards it does not hold, to the first.
    Its receiver scores those it holds and sends one copy on for the rest, which their
    owner scores: together, the decisions of scoring each shard on its own, every
    profile scoring each document exactly once, whatever the receiver holds."""
    names, texts = EIGHT_PROFILES, FIVE_TEXTS

    def fresh() -> tuple[Service, dict[str, bytes]]:
        return eight_profiles(training)

    ref, t0 = fresh()
    routed = ref.route([msg(d, offset=i) for i, d in enumerate(texts)])
    ((ids, X),) = routed.parts
    (payload,) = routed.payloads
    each = sorted((d.doc_id, d.profile, d.score, d.threshold)
                  for p in range(N_SHARDS) for d in ref.score(p, payload, t0))
    assert each
    elsewhere = [1, 2, 3]  # the router holds shard 0
    counts = routed.counts[0] if as_counts else None
    ((first, copy),) = ref.shard_copies(ids, X, elsewhere, counts=counts)
    vec = training.vectorizer
    assert first == 1 and read_vector_batch(copy, vec)[2] == elsewhere
    # formats 2 and 3: a worker of an earlier version refuses them (another format
    # version) rather than scoring its partition's shard only
    assert copy.startswith(VECTOR_BATCH_MAGIC_COUNTS if as_counts else VECTOR_BATCH_MAGIC_SHARDS)
    assert payload.startswith(VECTOR_BATCH_MAGIC)
    with pytest.raises(RecordError, match="shards and format disagree"):
        read_vector_batch(VECTOR_BATCH_MAGIC + copy[len(VECTOR_BATCH_MAGIC):], vec)
    assert [p for p, _ in ref.shard_copies(ids, X, elsewhere, one_copy=False)] == elsewhere
    for held in ([1, 2, 3], [1, 3], [1], []):
        got = []
        svc, table = fresh()
        scoring = svc.score_copies([InputMessage(copy, "shard", first, 7)], table, here=held)
        got += scoring.decisions
        rest = sorted(set(elsewhere) - set(held) - {first})
        if rest:
            assert scoring.forward is not None
            part, onward = scoring.forward
            assert part == rest[0] and read_vector_batch(onward, vec)[2] == rest
            assert np.array_equal(read_vector_batch(onward, vec)[1].data, X.data)  # unchanged
            other, t2 = fresh()
            more = other.score_copies([InputMessage(onward, "shard", part, 3)], t2, here=rest)
            assert more.forward is None
            got += more.decisions
            assert all(other.scored[n] == len(texts) for n in names if other.shard(n) in rest)
        else:
            assert scoring.forward is None
        assert all(svc.scored[n] == len(texts) for n in names
                   if svc.shard(n) in {first, *held})
        assert sorted((d.doc_id, d.profile, d.score, d.threshold) for d in got) == sorted(
            e for e in each if ref.shard(e[1]) != 0), held
    # a payload naming a shard the service does not have is refused with a reason
    svc, table = fresh()
    bad = InputMessage(reshard_vector_batch(copy, [1, N_SHARDS]), "shard", 1, 1)
    with pytest.raises(RecordError, match="shards") as err:
        svc.score_copies([bad], table)
    assert err.value.reason == "bad_vector_batch"


def test_same_payloads_groups_equal_values_in_arrival_order() -> None:
    ms = [InputMessage(b"a", "s", 0, 1), InputMessage(b"b", "s", 1, 1), InputMessage(b"a", "s", 2, 4),
          InputMessage(None, "s", 3, 2), InputMessage(b"b", "s", 0, 2)]
    assert [[(m.partition, m.offset) for m in g] for g in same_payloads(ms)] == [
        [(0, 1), (2, 4)], [(1, 1), (0, 2)], [(3, 2)]]


def test_judgments_are_idempotent_and_late_ones_work(service: Service) -> None:
    table: dict[str, bytes] = {}
    add_wheat(service, table)
    score_all(service, table, [{"id": f"n{i}", "text": f"wheat news {i}"} for i in range(5)])
    first = service.apply_judgments([judgment_msg(service, id="j1", doc_id="n0", profile="wheat",
                                                  relevant=True)], table)
    assert first.changed == ["wheat"]
    raw = table["wheat"]
    # same id again, and the same (doc, profile) without id twice in one batch
    again = service.apply_judgments([
        judgment_msg(service, id="j1", doc_id="n0", profile="wheat", relevant=True),
        judgment_msg(service, doc_id="n1", profile="wheat", relevant=False),
        judgment_msg(service, doc_id="n1", profile="wheat", relevant=False)], table)
    assert service.stats["judgments_duplicate"] == 2 and again.changed == ["wheat"]
    # each batch that applied something counts once, each profile's share of it once
    assert (service.stats["judgments"], service.stats["judgment_batches"],
            service.stats["judgment_profile_batches"]) == (2, 2, 2)
    service.apply_specs([spec_msg(service, profile="oil", query="oil")], table)
    two = service.apply_judgments([
        judgment_msg(service, id="j2", doc_id="n2", profile="wheat", relevant=True),
        judgment_msg(service, id="j3", doc_id="n3", profile="wheat", relevant=False),
        judgment_msg(service, id="j4", doc_id="n2", profile="oil", relevant=False)], table)
    assert sorted(two.changed) == ["oil", "wheat"]
    assert (service.stats["judgments"], service.stats["judgment_batches"],
            service.stats["judgment_profile_batches"]) == (5, 3, 4)
    only_seen = service.apply_judgments([judgment_msg(service, id="j1", doc_id="n0",
                                                      profile="wheat", relevant=True)], table)
    assert not only_seen.changed and service.stats["judgment_batches"] == 3
    entry = decode_profile_record(table["wheat"], service.weights)
    assert entry.profile.n_judged_ == 4 and table["wheat"] is not raw
    # a late judgment (many documents later) still finds its vector
    score_all(service, table, [{"id": f"m{i}", "text": f"oil {i}"} for i in range(30)])
    late = service.apply_judgments([judgment_msg(service, id="j9", doc_id="n4", profile="wheat",
                                                 relevant=True)], table)
    assert late.changed == ["wheat"] and not late.dead_letters


def test_judgment_dead_letters_and_forwarding(service: Service) -> None:
    table: dict[str, bytes] = {}
    service.apply_specs([spec_msg(service, profile="wheat", query="wheat")], table)
    wrong = (service.shard("wheat") + 1) % N_SHARDS
    res = service.apply_judgments([
        judgment_msg(service, doc_id="zz", profile="nope", relevant=True),
        judgment_msg(service, doc_id="never-seen", profile="wheat", relevant=True),
        judgment_msg(service, doc_id="bad", profile="wheat", relevant="yes"),
        msg({"doc_id": "d", "profile": "wheat", "relevant": True}, partition=wrong),
        judgment_msg(service, doc_id="with-text", profile="wheat", relevant=True,
                     text="wheat shipments"),
    ], table)
    assert [d.reason for d in res.dead_letters] == ["unknown_profile", "unknown_document",
                                                    "bad_relevant"]
    assert "no longer kept" in res.dead_letters[1].message
    assert [(f.partition, f.key) for f in res.forwards] == [(service.shard("wheat"), b"wheat")]
    assert res.changed == ["wheat"]


def test_positives_are_ids_texts_or_dead_letters(service: Service) -> None:
    """A positive is a training id, a recently seen document's id or a text (whitespace
    inside); a bare token that names no document is dead-lettered: until the thirtieth
    session a mistyped id silently became a one-word positive document."""
    table: dict[str, bytes] = {}
    score_all(service, table, [{"id": "seen-1", "text": "gold coins minted"}])
    res = service.apply_specs([
        spec_msg(service, profile="wheat", query="wheat", positives=["t1", "seen-1"]),
        spec_msg(service, profile="gold", positives=["gold bullion vaults"]),
        spec_msg(service, profile="oil", query="oil", positives=["t3", "t33"]),
    ], table)
    assert [d.reason for d in res.dead_letters] == ["unknown_positive"]
    dead = res.dead_letters[0]
    assert "'oil'" in dead.message and "'t33'" in dead.message and "\n" not in dead.message
    assert sorted(table) == ["gold", "wheat"]
    ex = service.entry("wheat", table).profile.examples_  # type: ignore[union-attr]
    assert int(((ex.labels > 0) & ex.real).sum()) == 2
    assert service.stats["profiles_created"] == 2


def test_delete_and_replace_profiles(service: Service) -> None:
    table: dict[str, bytes] = {}
    service.apply_specs([spec_msg(service, profile="wheat", query="wheat")], table)
    res = service.apply_specs([spec_msg(service, profile="wheat", delete=True),
                               spec_msg(service, profile="ghost", delete=True),
                               spec_msg(service, profile="x", query="x", model="nope"),
                               spec_msg(service, profile="y", query="y",
                                        params={"no_such_param": 1})], table)
    assert [d.reason for d in res.dead_letters] == ["unknown_profile", "bad_model", "bad_params"]
    assert table == {}
    assert score_all(service, table, [{"id": "n1", "text": "wheat"}]) == []


def test_a_changed_profile_scores_with_its_new_model_at_once(service: Service) -> None:
    """A profile re-created by a new spec, fitted as often as the one it replaces (the
    same version number), scores with its new query from the next document on. Until
    the fifteenth session the shard's bank knew its stacked models by name and version
    and went on scoring the old model until the profile's first judgment."""
    table: dict[str, bytes] = {}
    texts = ["wheat harvest in kansas", "crude oil opec output", "gold mine"]
    X = service.vectorizer.transform(texts)
    shard = service.shard("p")
    service.apply_specs([spec_msg(service, profile="p", query="wheat harvest")], table)
    old = service.entry("p", table).profile
    np.testing.assert_array_equal(service.sync_shard(shard, table).score(X)[:, 0], old.score(X))
    service.apply_specs([spec_msg(service, profile="p", query="crude oil opec")], table)
    new = service.entry("p", table).profile
    # (its version now goes on from the old one's, docs/reliability.md item 80; the bank
    # dropping a replaced profile's stacks whatever its version is test_core_guards')
    assert new is not old and new.version_ == old.version_ + 1
    assert not np.array_equal(new.score(X), old.score(X))
    np.testing.assert_array_equal(service.sync_shard(shard, table).score(X)[:, 0], new.score(X))


def test_a_record_says_whether_its_spec_replaced_a_profile(service: Service) -> None:
    """`sift profiles add --wait` said "created" for a spec that replaced a profile."""
    from sift.commands.profiles import _record, _record_answer

    table: dict[str, bytes] = {}
    add_wheat(service, table)
    first = service.entry("wheat", table)
    assert first is not None and not first.replaces
    assert (_record_answer(table["wheat"], first.spec.to_obj(), False) or "").startswith("created (")
    add_wheat(service, table)
    again = service.entry("wheat", table)
    assert again is not None and again.replaces and _record(table["wheat"])["replaces"]
    assert (_record_answer(table["wheat"], again.spec.to_obj(), False) or "").startswith("replaced (")
    assert decode_profile_record(encode_profile_record(again), service.weights).replaces


def test_profile_record_round_trip_is_exact(service: Service) -> None:
    table: dict[str, bytes] = {}
    add_wheat(service, table)
    entry = service.entry("wheat", table)
    assert entry is not None
    X = service.vectorizer.transform([t for _, t in TRAIN])
    copy = decode_profile_record(encode_profile_record(entry), service.weights)
    assert np.array_equal(copy.profile.score(X), entry.profile.score(X))
    assert copy.profile.threshold_ == entry.profile.threshold_


def test_a_bagged_profile_is_created_scored_judged_and_stored(service: Service) -> None:
    """A spec with ``bags`` makes a bagged profile: its members scored in the shard's
    stack, its decisions at or above its threshold, every judgment learned by every
    member, its record exact through the codec and summarised by the readers."""
    from sift.commands.profiles import _record
    from sift.web.state import summarize_state

    table: dict[str, bytes] = {}
    res = service.apply_specs([spec_msg(service, profile="wheat", query="wheat", positives=["t1", "t2"],
                                        bags=3, bag_rule="margin"),
                               spec_msg(service, profile="oil", query="crude oil", positives=["t3"])],
                              table)
    assert not res.dead_letters
    entry = service.entry("wheat", table)
    assert entry is not None and isinstance(entry.profile, BaggedProfile)
    bag = entry.profile
    assert [m.seed for m in bag.members] == [0, 1, 2] and entry.spec.bags == 3
    docs = [{"id": f"n{i}", "text": t} for i, t in enumerate(
        ["wheat exports to egypt", "wheat harvest kansas", "crude oil news", "gold"])]
    decisions = score_all(service, table, docs)
    X = service.vectorizer.transform([d["text"] for d in docs])
    want = np.flatnonzero(bag.decide(X)).tolist()
    assert [int(d.doc_id[1:]) for d in decisions if d.profile == "wheat"] == want and want
    assert all(d.score >= d.threshold for d in decisions)
    res = service.apply_judgments([judgment_msg(service, id="j1", doc_id="n1", profile="wheat",
                                                relevant=True),
                                   judgment_msg(service, id="j2", doc_id="n2", profile="wheat",
                                                relevant=False)], table)
    assert res.changed == ["wheat"] and not res.dead_letters
    entry = service.entry("wheat", table)
    assert entry is not None and isinstance(entry.profile, BaggedProfile)
    assert [m.n_judged_ for m in entry.profile.members] == [2, 2, 2]
    copy = decode_profile_record(encode_profile_record(entry), service.weights)
    assert np.array_equal(copy.profile.score(X), entry.profile.score(X))
    assert (copy.profile.threshold_, copy.profile.version_) == (entry.profile.threshold_,
                                                               entry.profile.version_)
    assert copy.spec == entry.spec
    summary = _record(table["wheat"])
    assert (summary["model"], summary["judged"], summary["model_version"]) == (
        "rocchio", 2, entry.profile.version_)
    web = summarize_state(table["wheat"])
    assert (web["threshold"], web["bags"]) == (entry.profile.threshold_, 3)
    assert summarize_state(table["oil"])["bags"] == 1
    from sift.web.pages import profile_row
    assert "rocchio &times; 3</td>" in profile_row({"profile": "wheat", **web}, 0.0)
    assert "rocchio</td>" in profile_row({"profile": "oil", **summarize_state(table["oil"])}, 0.0)


@pytest.mark.parametrize("bad", [{"bags": 0}, {"bags": 6}, {"bags": "3"}, {"bags": True},
                                 {"bags": 2, "bag_rule": "mean"},
                                 # a rule for one profile was dropped, unsaid
                                 {"bag_rule": "vote"}, {"bags": 1, "bag_rule": "abstain"}])
def test_bad_bags_are_dead_lettered(service: Service, bad: dict[str, object]) -> None:
    table: dict[str, bytes] = {}
    res = service.apply_specs([spec_msg(service, profile="wheat", query="wheat", **bad)], table)
    assert [d.reason for d in res.dead_letters] == ["bad_bags"] and table == {}
    assert "\n" not in res.dead_letters[0].message and "bag" in res.dead_letters[0].message


def test_a_linear_utility_is_a_measure_a_spec_may_name(service: Service) -> None:
    """``utility:R:N`` (the core's linear utility, which `sift profiles add --measure`
    offers) was refused as ``bad_measure``; credits that are not finite still are."""
    table: dict[str, bytes] = {}
    res = service.apply_specs([spec_msg(service, profile="wheat", query="wheat", measure="utility:3:-1"),
                               spec_msg(service, profile="oil", query="oil", measure="utility:nan:-1"),
                               spec_msg(service, profile="gold", query="gold", measure="utility:3")],
                              table)
    assert [d.reason for d in res.dead_letters] == ["bad_measure", "bad_measure"]
    entry = service.entry("wheat", table)
    assert entry is not None and entry.profile.measure == "utility:3:-1"


@pytest.mark.parametrize("value", [None, b""])
def test_a_message_without_a_value_is_empty_on_every_topic(service: Service,
                                                             value: bytes | None) -> None:
    """It was ``empty`` on the documents topic only for ``None``, and ``bad_json`` otherwise."""
    table: dict[str, bytes] = {}
    reasons = [d.reason for d in service.route([InputMessage(value, "documents", 0, 0)]).dead_letters]
    reasons += [d.reason for d in service.apply_judgments(
        [InputMessage(value, "judgments", 0, 0)], table).dead_letters]
    reasons += [d.reason for d in service.apply_specs(
        [InputMessage(value, "profiles", 0, 0)], table).dead_letters]
    assert reasons == ["empty", "empty", "empty"]


def test_the_wire_contract_knows_the_cores_bag_rules() -> None:
    from sift.filters import bagging
    from sift.topics import records

    assert records.BAG_RULES == bagging.RULES and records.MAX_BAGS <= bagging.MAX_BAGS


def test_coalesced_judgments_end_where_one_by_one_ends(service: Service) -> None:
    table: dict[str, bytes] = {}
    add_wheat(service, table)
    entry = service.entry("wheat", table)
    assert entry is not None
    a = decode_profile_record(table["wheat"], service.weights).profile
    b = decode_profile_record(table["wheat"], service.weights).profile
    X = service.vectorizer.transform([t for _, t in TRAIN])
    labels = [i % 3 != 2 for i in range(X.shape[0])]
    learn_batch(a, X, labels, coalesce=True)
    learn_batch(b, X, labels, coalesce=False)
    assert a.update == "every"
    assert a.threshold_ == b.threshold_ and a.n_judged_ == b.n_judged_
    assert np.array_equal(a.score(X), b.score(X))


def test_document_store_is_bounded() -> None:
    vec = Vectorizer(n_features=64, idf="none")
    store = DocumentStore(3)
    store.put([f"d{i}" for i in range(5)], vec.transform([f"w{i}" for i in range(5)]))
    assert len(store) == 3 and store.get("d0") is None and store.get("d4") is not None


def test_messages_redelivered_to_the_same_worker_are_skipped(service: Service) -> None:
    """Faust re-delivers uncommitted offsets after a rebalance: no double scoring."""
    table: dict[str, bytes] = {}
    add_wheat(service, table)
    first = service.route([msg({"id": "a", "text": "wheat"}, offset=5),
                           msg({"id": "b", "text": "wheat"}, offset=6)])
    again = service.route([msg({"id": "a", "text": "wheat"}, offset=5),
                           msg({"id": "c", "text": "wheat"}, offset=7)])
    assert first.n_documents == 2 and again.n_documents == 1
    shard = service.shard("wheat")
    src = InputMessage(first.payloads[0], "shard", shard, 3)
    assert service.score(shard, first.payloads[0], table, src)
    assert service.score(shard, first.payloads[0], table, src) == []
    assert service.scored["wheat"] == 2 and service.stats["redelivered_skipped"] == 2


def test_learn_batch_rejects_mismatched_labels(service: Service) -> None:
    table: dict[str, bytes] = {}
    add_wheat(service, table)
    entry = service.entry("wheat", table)
    assert entry is not None
    X = service.vectorizer.transform(["wheat crop", "oil price"])
    with pytest.raises(ValueError, match="2 rows but 1 labels"):
        learn_batch(entry.profile, X, [True])


def test_offset_gaps_and_rewinds_are_counted(service: Service) -> None:
    msgs = [InputMessage(b"{}", "sift.documents", 0, o) for o in (5, 6, 9, 3, 4)]
    service.observe(msgs[:3])  # 7 and 8 never arrived
    assert (service.stats["offset_gaps"], service.stats["offsets_skipped"]) == (1, 2)
    service.observe(msgs[3:])  # back to 3 and 4 (re-deliveries)
    assert service.stats["offset_rewinds"] == 2 and service.stats["offset_gaps"] == 1
    # a re-delivery does not lower the high-water mark: 10 follows 9, no gap
    assert service.gaps([InputMessage(b"{}", "sift.documents", 0, 10)]) == []
    service.observe([InputMessage(b"{}", "sift.documents", 0, 10)])
    assert service.stats["offset_gaps"] == 1
    service.observe([InputMessage(b"{}", "sift.documents", 1, 100)])  # another partition
    service.observe([InputMessage(b"{}", "sift.documents", 0, -1)])  # no offset (tests)
    assert service.stats["offset_gaps"] == 1


def test_vector_batch_round_trips_bit_exact_and_reads_the_json_format() -> None:
    dense = sp.random(7, 300, density=0.05, random_state=1).toarray()
    dense[3] = 0  # an empty row
    X = sp.csr_matrix(dense)
    ids = [f"d{i}" for i in range(7)]
    for a, b in [(0, 7), (2, 5), (6, 7), (4, 4)]:
        got_ids, got = decode_vector_batch(encode_vector_batch(ids[a:b], X[a:b]))
        want = X[a:b]
        assert got_ids == ids[a:b] and got.shape == want.shape
        assert np.array_equal(got.indptr, want.indptr)
        assert np.array_equal(got.indices, want.indices) and np.array_equal(got.data, want.data)
    from sift.filters.state import encode_csr  # format 0, still in a shard topic after an upgrade
    old = orjson.dumps({"ids": ids, "X": encode_csr(X), "ts": 0.0})
    assert np.array_equal(decode_vector_batch(old)[1].toarray(), X.toarray())


@pytest.mark.parametrize("corrupt", ["magic", "truncated", "header", "ids", "index", "nan",
                                     "indptr"])
def test_a_corrupt_vector_batch_is_a_record_error(corrupt: str) -> None:
    from sift.topics.errors import RecordError

    X = sp.csr_matrix(np.array([[0.0, 1.5, 0.0], [2.0, 0.0, 3.0]]))
    good = bytearray(encode_vector_batch(["a", "b"], X))
    k = len(b"SIFTVB\x01\x00") + 4
    body = len(good) - (3 * 8 + 3 * 8 + 3 * 4)  # data, indptr, indices
    if corrupt == "magic":
        good[6] = 9  # another format version
    elif corrupt == "truncated":
        del good[-3:]
    elif corrupt == "header":
        good[k] = ord("x")
    elif corrupt == "ids":
        good[k:body] = orjson.dumps({"ids": ["a"], "shape": [2, 3], "nnz": 3}).ljust(body - k)
    elif corrupt == "index":
        good[-4:] = np.array([3], dtype="<i4").tobytes()
    elif corrupt == "nan":
        good[body:body + 8] = np.array([np.nan]).tobytes()
    elif corrupt == "indptr":
        good[body + 24 + 8:body + 24 + 16] = np.array([5], dtype="<i8").tobytes()
    with pytest.raises(RecordError) as err:
        decode_vector_batch(bytes(good))
    assert err.value.reason == "bad_vector_batch"


COUNT_TEXTS = ["wheat prices rose " * 3 + "corn", "the of and",  # stop words only: empty
                "oil " * 300 + "crude",  # a count above 255: uint16 counts
                "Sugar exports, sugar imports; SUGAR quotas.", "shipping rates in Rotterdam"]


def counts_copy(vec: Vectorizer, texts: list[str], shards: list[int] | None = None
                ) -> tuple[sp.csr_matrix, bytes]:
    X, counts = vec.transform_counts(texts)
    ids = [f"d{i}" for i in range(len(texts))]
    return X, encode_vector_batch(ids, X, shards, counts=counts, vectorizer=vec.fingerprint())


def test_a_copy_of_term_counts_weighs_back_into_the_routers_vectors_bit_for_bit(
        training: TrainingSet) -> None:
    vec = training.vectorizer
    X, payload = counts_copy(vec, COUNT_TEXTS, shards=[2, 3])
    assert payload.startswith(VECTOR_BATCH_MAGIC_COUNTS)
    assert orjson.loads(payload[12:payload.index(b"}") + 1])["counts"] == "<u2"
    ids, got, shards = read_vector_batch(payload, vec)
    assert ids == [f"d{i}" for i in range(5)] and shards == [2, 3]
    assert np.array_equal(got.indptr, X.indptr) and np.array_equal(got.indices, X.indices)
    assert np.array_equal(got.data, X.data) and got.getnnz(axis=1)[1] == 0
    many = [t for _, t in TRAIN] * 40  # arrays, not the header: 5-6 bytes a term, not 12
    big_X, big = counts_copy(vec, many)
    assert len(big) < 0.6 * len(encode_vector_batch([f"d{i}" for i in range(len(many))], big_X))
    # resharded (sent on by a receiver): the same format and arrays
    onward = reshard_vector_batch(payload, [3])
    assert onward.startswith(VECTOR_BATCH_MAGIC_COUNTS) and onward.endswith(payload[-40:])
    assert np.array_equal(read_vector_batch(onward, vec)[1].data, X.data)
    # a slice of a routed part (a chunk) travels with its own counts
    X2, counts2 = vec.transform_counts(COUNT_TEXTS)
    part = encode_vector_batch(["d2", "d3"], X2[2:4], [1], counts=counts2[X2.indptr[2]:X2.indptr[4]],
                               vectorizer=vec.fingerprint())
    assert np.array_equal(read_vector_batch(part, vec)[1].data, X2[2:4].data)


@pytest.mark.parametrize("options", [{"tf": "raw"}, {"tf": "binary", "idf": "idf2"},
                                     {"normalize": False}, {"ngram_max": 2}, {"truncate": 4},
                                     {"chars": 0.4, "char_top": 20}])
def test_vectorizers_weigh_their_counts_into_their_vectors(options: dict[str, object]) -> None:
    vec = Vectorizer(n_features=2**12, **options).fit(t for _, t in TRAIN)  # type: ignore[arg-type]
    X, payload = counts_copy(vec, COUNT_TEXTS + [t for _, t in TRAIN])
    got = read_vector_batch(payload, vec)[1]
    assert np.array_equal(got.indices, X.indices) and np.array_equal(got.data, X.data)


def test_a_copy_of_counts_needs_the_same_vectorizer(training: TrainingSet) -> None:
    vec = training.vectorizer
    _, payload = counts_copy(vec, COUNT_TEXTS)
    with pytest.raises(RecordError, match="no vectorizer"):
        read_vector_batch(payload)
    other = Vectorizer(n_features=2**12, idf="idf2").fit(t for _, t in TRAIN)
    with pytest.raises(RecordError, match="another vectorizer") as err:
        read_vector_batch(payload, other)
    assert err.value.reason == "bad_vector_batch"
    chars = Vectorizer(n_features=2**12, chars=0.4).fit(t for _, t in TRAIN)  # n-grams on one side only
    with pytest.raises(RecordError, match="another vectorizer"):
        read_vector_batch(payload, chars)
    refit = Vectorizer(n_features=2**12).fit(t for _, t in TRAIN[:3])  # another IDF corpus
    with pytest.raises(RecordError, match="another vectorizer"):
        read_vector_batch(payload, refit)
    assert Vectorizer(n_features=2**12).fit(t for _, t in TRAIN).fingerprint() == vec.fingerprint()


@pytest.mark.parametrize("corrupt", ["zero_count", "unsorted", "truncated", "dtype", "index",
                                     "indptr", "columns"])
def test_a_corrupt_copy_of_counts_is_a_record_error(training: TrainingSet, corrupt: str) -> None:
    vec = training.vectorizer
    X, payload = counts_copy(vec, ["wheat corn oil", "sugar"])
    data = bytearray(payload)
    nnz, n = X.nnz, X.shape[0]
    counts_at = len(data) - nnz  # uint8 counts at the end, after the int32 columns
    cols_at = counts_at - 4 * nnz
    head_end = cols_at - 8 * (n + 1)
    if corrupt == "zero_count":
        data[counts_at] = 0
    elif corrupt == "unsorted":  # the first row's first two columns swapped
        a, b = data[cols_at:cols_at + 4], data[cols_at + 4:cols_at + 8]
        data[cols_at:cols_at + 8] = b + a
    elif corrupt == "truncated":
        del data[-1:]
    elif corrupt == "dtype":
        data[:head_end] = data[:head_end].replace(b'"<u1"', b'"<f8"')
    elif corrupt == "index":
        data[cols_at:cols_at + 4] = np.array([-1], dtype="<i4").tobytes()
    elif corrupt == "indptr":
        data[head_end + 8:head_end + 16] = np.array([nnz + 1], dtype="<i8").tobytes()
    elif corrupt == "columns":
        data[:head_end] = data[:head_end].replace(b'"shape":[2,4096]', b'"shape":[2,4095]')
    assert bytes(data) != payload
    with pytest.raises(RecordError) as err:
        read_vector_batch(bytes(data), vec)
    assert err.value.reason == "bad_vector_batch"


def test_split_rows_keeps_chunks_under_the_limit() -> None:
    X = sp.random(500, 2000, density=0.02, format="csr", random_state=2)
    ranges = list(split_rows(X, max_bytes=5_000))
    assert ranges[0][0] == 0 and ranges[-1][1] == 500
    assert all(a < b and b == c for (a, b), (c, _) in itertools.pairwise(ranges))
    for a, b in ranges:
        assert b - a == 1 or len(encode_vector_batch([f"d{i}" for i in range(a, b)], X[a:b])) \
            <= 5_000 + 200  # the estimate's slack: header and padding
    assert list(split_rows(sp.csr_matrix((0, 5)))) == []
    assert list(split_rows(X[:1], max_bytes=10)) == [(0, 1)]  # a big row alone


def test_split_rows_cuts_as_few_ranges_as_the_limit_allows_of_about_equal_size() -> None:
    X = sp.random(2000, 3000, density=0.02, format="csr", random_state=3)
    size = np.diff(X.indptr) * 5 + 72  # the estimate of a row, at 5 bytes an entry
    for limit in (30_000, 100_000, 250_000, 700_000, 10**7):
        ranges = list(split_rows(X, max_bytes=limit, entry_bytes=5))
        assert ranges[0][0] == 0 and ranges[-1][1] == 2000
        assert all(b == c for (_, b), (c, _) in itertools.pairwise(ranges))
        sums = [int(size[a:b].sum()) for a, b in ranges]
        assert max(sums) <= limit
        fewest, acc = 1, 0  # greedy filling: the fewest ranges possible
        for s in size.tolist():
            if acc + s > limit:
                fewest, acc = fewest + 1, 0
            acc += s
        assert len(ranges) == fewest
        if int(size.sum()) / fewest + int(size.max()) <= limit:  # room to even them out
            # each cut within half a row of its share
            assert max(sums) - min(sums) <= 2 * int(size.max())
    # 700 kB in 400 kB ranges: two of about 350, not 400 and 300
    sums = [int(size[a:b].sum()) for a, b in split_rows(X, max_bytes=int(size.sum()) * 4 // 7,
                                                       entry_bytes=5)]
    assert len(sums) == 2 and abs(sums[0] - sums[1]) <= int(size.max())


def test_copies_with_ids_longer_than_the_estimate_stay_under_the_message_limit(
        training: TrainingSet, monkeypatch: pytest.MonkeyPatch) -> None:
    svc = Service(training, n_shards=N_SHARDS)
    texts = [f"wheat and corn exports {i} rose" for i in range(60)]
    routed = svc.route([msg({"id": f"d{i}", "text": t}, offset=i) for i, t in enumerate(texts)])
    ((ids, X),) = routed.parts
    long_ids = [f"{i:04d}-" + "x" * 2_000 for i in range(len(ids))]  # ~72 bytes a row estimated
    monkeypatch.setattr(service_module, "MAX_COPY_BYTES", 20_000)
    monkeypatch.setattr(service_module, "CHUNK_BYTES", 16_000)
    out = svc.copies(long_ids, X, routed.counts[0], [1, 2, 3])
    assert len(out) > 1 and all(len(payload) <= 20_000 for _, payload in out)
    got = [read_vector_batch(payload, training.vectorizer) for _, payload in out]
    assert [i for ids_, _, _ in got for i in ids_] == long_ids  # every row, in order
    assert (sp.vstack([Y for _, Y, _ in got]) != X).nnz == 0


def test_gaps_are_found_against_the_last_offset_or_the_committed_one(service: Service) -> None:
    def m(p: int, o: int) -> InputMessage:
        return InputMessage(b"{}", "sift.judgments", p, o)

    assert service.gaps([m(0, 7), m(0, 8)]) == []  # nothing known yet: no baseline
    service.expect("sift.judgments", 0, 5)  # committed offset 5: 5 and 6 are due first
    assert service.gaps([m(0, 7), m(0, 8), m(1, 3)]) == [("sift.judgments", 0, 5, 7)]
    service.observe([m(0, 5), m(0, 6), m(0, 7)])
    service.expect("sift.judgments", 0, 2)  # already seen since the last forget: kept
    assert service.gaps([m(0, 9), m(0, 8), m(0, 12)]) == [("sift.judgments", 0, 8, 9),
                                                            ("sift.judgments", 0, 10, 12)]
    assert service.stats["offset_gaps"] == 0  # gaps() only looks
    service.forget_offsets()
    assert service.gaps([m(0, 40)]) == []


def test_query_only_profiles_deliver_and_so_can_get_feedback() -> None:
    """A profile created with a query and no positives must deliver something (the
    training-quantile fallback), or it would never receive a judgment, whatever its model.
    (A change that left pseudo-positives out of TROT once made every such profile deliver
    nothing; a fusion profile, whose scores are mostly below 0, delivered nothing until
    the fallback stopped requiring a cut above 0.)"""
    import math

    from sift.topics.codecs import read_jsonl
    from sift.topics.records import Document

    svc = Service(TrainingSet.load(default_corpus()), n_shards=2)
    table: dict[str, bytes] = {}
    queries = {f"{name}-{model}": (query, model)
               for name, query in [("oil", "crude oil prices"), ("wheat", "wheat exports"),
                                   ("gold", "gold mine"), ("rates", "interest rates"),
                                   ("trade", "trade deficit")]
               for model in ("rocchio", "kantor", "knn", "fusion")}
    svc.apply_specs([spec_msg(svc, profile=p, query=q, model=m) for p, (q, m) in queries.items()],
                    table)
    assert set(table) == set(queries)
    docs = [d for _, d in zip(range(600), read_jsonl(REUTERS_TEST, Document.from_obj),
                              strict=False)]
    delivered: dict[str, int] = dict.fromkeys(queries, 0)
    routed = svc.route([msg({"documents": [x.to_obj() for x in docs[i:i + 100]]}, offset=i)
                        for i in range(0, len(docs), 100)])
    for payload in routed.payloads:
        for p in range(2):
            for d in svc.score(p, payload, table):
                delivered[d.profile] += 1
    thresholds = {p: svc.entry(p, table).profile.threshold_ for p in queries}  # type: ignore[union-attr]
    assert all(math.isfinite(t) for t in thresholds.values()), thresholds
    assert all(n > 0 for n in delivered.values()), delivered
    assert all(n < len(docs) / 4 for n in delivered.values()), delivered  # not everything


def test_scoring_here_is_scoring_each_shards_payload() -> None:
    """The routing worker's direct path (one product over the profiles of all the shards it
    holds) delivers exactly what the shard topic's payloads give, shard by shard: same
    documents, profiles, scores, thresholds and model versions, also after judgments
    change some models and with a subset of the shards."""
    from sift.topics.codecs import read_jsonl
    from sift.topics.records import Document

    svc = Service(TrainingSet.load(default_corpus()), n_shards=N_SHARDS)
    table: dict[str, bytes] = {}
    queries = {"oil": ("crude oil prices", "rocchio"), "wheat": ("wheat exports", "kantor"),
               "gold": ("gold mine", "knn"), "rates": ("interest rates", "rocchio"),
               "trade": ("trade deficit", "kantor"), "coffee": ("coffee", "rocchio"),
               "ship": ("shipping", "rocchio"), "jobs": ("unemployment", "knn")}
    svc.apply_specs([spec_msg(svc, profile=p, query=q, model=m)
                     for p, (q, m) in queries.items()], table)
    assert len({svc.shard(p) for p in queries}) == N_SHARDS  # every shard holds some
    docs = [d for _, d in zip(range(400), read_jsonl(REUTERS_TEST, Document.from_obj),
                              strict=False)]

    def key(d: object) -> tuple:
        return (d.doc_id, d.profile, d.score, d.threshold, d.model_version)  # type: ignore[attr-defined]

    offsets = itertools.count()

    def both(batch: list[Document], shards: list[int]) -> tuple[list, list]:
        routed = svc.route([msg({"documents": [x.to_obj() for x in batch]},
                                offset=next(offsets))])
        here, there = [], []
        for ids, X in routed.batches:
            here.extend(key(d) for d in svc.score_here(shards, ids, X, table))
            payload = encode_vector_batch(ids, X)
            for p in shards:
                there.extend(key(d) for d in svc.score(p, payload, table))
        return here, there

    here, there = both(docs[:100], list(range(N_SHARDS)))
    assert here and sorted(here) == sorted(there)
    # judgments change some models (new versions): the joint bank follows them
    delivered = sorted({(d[0], d[1]) for d in here})[:40]
    gold = {d.id: d.topics for d in docs}
    res = svc.apply_judgments([judgment_msg(svc, doc_id=doc, profile=p, relevant=p in gold[doc])
                               for doc, p in delivered], table)
    assert res.changed
    here, there = both(docs[100:250], list(range(N_SHARDS)))
    assert here and sorted(here) == sorted(there)
    assert {d[4] for d in here} != {0}  # scored with the judged versions
    here, there = both(docs[250:400], [1, 3])
    assert sorted(here) == sorted(there)
    assert {p for _, p, *_ in here} <= {p for p in queries if svc.shard(p) in (1, 3)}


def test_routing_scoring_and_copies_add_their_thread_cpu_time_to_the_stats(
        training: TrainingSet, monkeypatch: pytest.MonkeyPatch) -> None:
    """``cpu_*_us``: each timed call adds the CPU time of its thread between its start
    and its end (here a fake clock that moves 1.5 ms a reading), even when it raises."""
    ticks = itertools.count(0, 1_500_000)
    monkeypatch.setattr(service_module.time, "thread_time_ns", lambda: next(ticks))
    svc, table = eight_profiles(training)
    routed = svc.route([msg(d, offset=i) for i, d in enumerate(FIVE_TEXTS)])
    ((ids, X),) = routed.parts
    svc.score_here([0, 1], ids, X, table)
    ((first, copy),) = svc.copies(ids, X, routed.counts[0], [2, 3])
    svc.score_copies([InputMessage(copy, "shard", first, 1)], table, here=[2, 3])
    with pytest.raises(ServiceError):
        svc.score_copies([InputMessage(copy, "shard", 0, 2), InputMessage(b"x", "shard", 1, 2)], table)
    # one reading at the start and one at the end of each call: 1,500 µs a call
    assert {k: v for k, v in svc.stats.items() if k.startswith("cpu_")} == {
        "cpu_route_us": 1500, "cpu_score_here_us": 1500, "cpu_copies_us": 1500,
        "cpu_score_copies_us": 3000}


@settings(max_examples=80, deadline=None)
@given(capacity=st.integers(0, 6),
       batches=st.lists(st.lists(st.integers(0, 9), max_size=6), max_size=6))
def test_document_store_keeps_the_first_row_of_the_last_capacity_distinct_ids(
        capacity: int, batches: list[list[int]]) -> None:
    """Against a plain model: an id's first row is kept (a repeat, in its batch or a
    later one, changes nothing) and ids are evicted oldest first."""
    vec = Vectorizer(n_features=64, idf="none")
    store = DocumentStore(capacity)
    model: dict[str, tuple[int, int]] = {}
    for b, batch in enumerate(batches):
        ids = [f"d{i}" for i in batch]
        X = vec.transform([f"w{i}" for i in batch]) if batch else sp.csr_matrix((0, 64))
        store.put(ids, X)
        for row, doc in enumerate(ids):
            model.setdefault(doc, (b, row))
        while len(model) > capacity:
            del model[next(iter(model))]
        assert list(store.ids()) == list(model) and len(store) == len(model)
        for doc, (_, row) in model.items():
            located = store.locate(doc)
            assert located is not None and located[1] == row


def test_a_profile_whose_state_record_is_over_the_limit_is_dead_lettered(training: TrainingSet) -> None:
    # the size of a plain profile's record, then a limit that holds it but not three of it
    probe: dict[str, bytes] = {}
    unlimited = Service(training, n_shards=N_SHARDS)
    unlimited.apply_specs([spec_msg(unlimited, profile="wheat", query="wheat", positives=["t1"])], probe)
    one = len(probe["wheat"])
    svc = Service(training, n_shards=N_SHARDS, max_record_bytes=2 * one)
    table: dict[str, bytes] = {}
    res = svc.apply_specs([spec_msg(svc, profile="wheat", query="wheat", positives=["t1"])], table)
    assert not res.dead_letters and res.changed == ["wheat"]
    before = table["wheat"]
    # replacing it by a bag of three: refused whole, the profile as it was
    res = svc.apply_specs([spec_msg(svc, profile="wheat", query="wheat", positives=["t1"], bags=3),
                           spec_msg(svc, profile="oil", query="crude oil", positives=["t3"])], table)
    assert [d.reason for d in res.dead_letters] == ["state_too_large"] and res.changed == ["oil"]
    message = res.dead_letters[0].message
    assert "\n" not in message and "'wheat'" in message and "3 bagged members" in message
    assert "fewer bags" in message and f"{2 * one / 2**20:.1f} MiB" in message
    assert table["wheat"] == before
    entry = svc.entry("wheat", table)
    assert entry is not None and isinstance(entry.profile, Profile)
    assert svc.stats["dead_letters.state_too_large"] == 1
    # a plain profile over the limit says so too, without advice on bags
    tight = Service(training, n_shards=N_SHARDS, max_record_bytes=one // 2)
    res = tight.apply_specs([spec_msg(tight, profile="corn", query="corn", positives=["t1"])], {})
    assert [d.reason for d in res.dead_letters] == ["state_too_large"]
    assert "bags" not in res.dead_letters[0].message



def _judged_service(training: TrainingSet) -> tuple[Service, dict[str, bytes], list[InputMessage]]:
    svc = Service(training, n_shards=N_SHARDS, recent_documents=50, max_document_bytes=2000)
    table: dict[str, bytes] = {}
    svc.apply_specs([spec_msg(svc, profile="wheat", query="wheat", positives=["t1"])], table)
    docs = [{"id": f"d{i}", "text": t} for i, t in enumerate(
        ["wheat exports", "oil output", "wheat harvest", "gold mine", "corn and wheat"])]
    score_all(svc, table, docs)
    judgments = [judgment_msg(svc, id=f"j{i}", doc_id=d["id"], profile="wheat",
                              relevant="wheat" in d["text"]) for i, d in enumerate(docs)]
    return svc, table, judgments


def test_a_profile_that_fails_while_learning_is_read_back_not_learned_twice(
        training: TrainingSet, monkeypatch: pytest.MonkeyPatch) -> None:
    from sift.agents.app import guarded

    want_svc, want_table, judgments = _judged_service(training)
    want_svc.apply_judgments(judgments, want_table)
    want = want_svc.entry("wheat", want_table)
    svc, table, judgments = _judged_service(training)
    real = service_module.learn_batch
    calls = []

    def half_then_fail(profile: object, X: sp.csr_matrix, relevant: list[bool], **kw: object) -> None:
        calls.append(len(relevant))
        if len(calls) == 1:  # the whole batch: learned, then a failure (a bug, say)
            real(profile, X, relevant, **kw)  # type: ignore[arg-type]
            raise RuntimeError("boom after learning")
        real(profile, X, relevant, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(service_module, "learn_batch", half_then_fail)
    res = guarded(svc.apply_judgments, judgments, table, stats=svc.stats)
    assert calls == [5, 1, 1, 1, 1, 1] and not res.dead_letters
    got = svc.entry("wheat", table)
    assert got is not None and want is not None
    assert (got.profile.n_judged_, got.profile.threshold_) == (5, want.profile.threshold_)
    assert got.judged == want.judged
    # what the table holds is what the live worker holds
    stored = decode_profile_record(table["wheat"], svc.weights)
    assert (stored.profile.n_judged_, stored.profile.threshold_) == (5, want.profile.threshold_)


def test_dead_letters_are_counted_once_through_a_retry_and_internal_errors_too(
        training: TrainingSet, monkeypatch: pytest.MonkeyPatch) -> None:
    from sift.agents.app import guarded

    svc, table, judgments = _judged_service(training)
    real = service_module.learn_batch

    oil = svc.vectorizer.transform(["oil output"])

    def fail_on_oil(profile: object, X: sp.csr_matrix, relevant: list[bool], **kw: object) -> None:
        if X.shape[0] == 1 and (oil != X).nnz == 0:
            raise RuntimeError("this one always fails")
        if X.shape[0] > 1:
            raise RuntimeError("the batch fails")
        real(profile, X, relevant, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(service_module, "learn_batch", fail_on_oil)
    bad = msg(b"{bad", partition=svc.shard("wheat"), topic="judgments")
    before = svc.stats["dead_letters"]
    res = guarded(svc.apply_judgments, [bad, *judgments], table, stats=svc.stats)
    assert sorted(d.reason for d in res.dead_letters) == ["bad_json", "internal_error"]
    assert svc.stats["dead_letters"] - before == 2
    assert svc.stats["dead_letters.bad_json"] == 1 and svc.stats["dead_letters.internal_error"] == 1
    entry = svc.entry("wheat", table)
    assert entry is not None and entry.profile.n_judged_ == 4


def test_judgment_text_over_the_size_limit_is_dead_lettered(service: Service) -> None:
    table: dict[str, bytes] = {}
    service.apply_specs([spec_msg(service, profile="wheat", query="wheat")], table)
    res = service.apply_judgments([judgment_msg(service, id="j1", doc_id="unseen", profile="wheat",
                                                relevant=True, text="wheat " * 400)], table)
    assert [d.reason for d in res.dead_letters] == ["too_large"] and not res.changed
    assert "2400 bytes" in res.dead_letters[0].message and "'unseen'" in res.dead_letters[0].message


def test_a_document_is_limited_by_its_text_not_its_message(service: Service) -> None:
    # max_document_bytes=2000: a small text with escapes and metadata passes, as in a batch
    doc = {"id": "e1", "text": "wheat " + "\u00e9" * 400, "metadata": {"note": "x" * 3000}}
    value = orjson.dumps(doc, option=0).replace("\u00e9".encode(), b"\\u00e9")
    assert len(value) > 2000
    for offset, payload in enumerate((value, orjson.dumps({"documents": [doc]}))):
        res = service.route([msg(payload, offset=offset)])
        assert res.n_documents == 1 and not res.dead_letters
    res = service.route([msg({"id": "big", "text": "wheat " * 400}, offset=2)])
    assert [d.reason for d in res.dead_letters] == ["too_large"]


def test_a_judgment_id_cannot_pass_for_the_key_of_a_judgment_without_one(service: Service) -> None:
    table: dict[str, bytes] = {}
    service.apply_specs([spec_msg(service, profile="wheat", query="wheat")], table)
    res = service.apply_judgments([judgment_msg(service, id="wheat\x1fd1", doc_id="d2",
                                                profile="wheat", relevant=True)], table)
    assert [d.reason for d in res.dead_letters] == ["bad_id"]


def test_a_document_id_twice_in_one_routed_batch_keeps_the_first(service: Service) -> None:
    table: dict[str, bytes] = {}
    service.apply_specs([spec_msg(service, profile="wheat", query="wheat", positives=["t1"])], table)
    batch = {"documents": [{"id": "b1", "text": "gold bullion"}, {"id": "b2", "text": "oil"},
                           {"id": "b1", "text": "wheat wheat kansas"}]}
    routed = service.route([msg(batch, offset=0), msg({"id": "b2", "text": "wheat"}, offset=1)])
    assert routed.n_documents == 2
    assert [(d.reason, d.offset) for d in routed.dead_letters] == [("duplicate_id", 0), ("duplicate_id", 1)]
    assert orjson.loads(routed.dead_letters[0].original)["text"] == "wheat wheat kansas"
    assert "'b1' came twice" in routed.dead_letters[0].message
    assert service.stats["dead_letters.duplicate_id"] == 2
    # what is scored is what a judgment of b1 learns: the first text
    for payload in routed.payloads:
        for p in range(N_SHARDS):
            service.score(p, payload, table)
    x = service.store.get("b1")
    assert x is not None and (x != service.vectorizer.transform(["gold bullion"])).nnz == 0


def test_a_stored_id_sent_again_is_scored_again_with_its_text_and_refused_with_another(
        service: Service) -> None:
    """Across routed batches: the same text under a stored id is scored again (a document
    sent twice); another text is dead-lettered, since a judgment of the id learns the
    stored text, never the one that would be scored."""
    table: dict[str, bytes] = {}
    service.apply_specs([spec_msg(service, profile="wheat", query="wheat", positives=["t1"])], table)

    def route_and_score(batch: dict[str, object], offset: int) -> RouteResult:
        routed = service.route([msg(batch, offset=offset)])
        for payload in routed.payloads:
            for p in range(N_SHARDS):
                service.score(p, payload, table)
        return routed

    first = route_and_score({"documents": [{"id": "b1", "text": "wheat harvest"},
                                           {"id": "b2", "text": "oil prices"}]}, 0)
    assert first.n_documents == 2 and not first.dead_letters
    again = route_and_score({"documents": [{"id": "b1", "text": "wheat harvest"},
                                           {"id": "b3", "text": "wheat exports"},
                                           {"id": "b2", "text": "wheat wheat kansas"}]}, 1)
    assert again.n_documents == 2 and [d.reason for d in again.dead_letters] == ["duplicate_id"]
    letter = again.dead_letters[0]
    assert "'b2' was scored before with another text" in letter.message and letter.offset == 1
    assert orjson.loads(letter.original)["text"] == "wheat wheat kansas"
    (ids, kept), = again.parts
    assert ids == ["b1", "b3"]
    want = service.vectorizer.transform(["wheat harvest", "wheat exports"])
    assert (kept != want).nnz == 0
    # the copy the other shards' owners get carries the kept documents' counts only,
    # which the receiver weighs back into the same vectors
    counts = again.counts[0]
    assert counts.size == kept.nnz
    ((_, payload),) = service.copies(ids, kept, counts, [1, 2])
    got_ids, got_X = read_vector_batch(payload, service.vectorizer)[:2]
    assert got_ids == ids and (got_X != kept).nnz == 0
    x2 = service.store.get("b2")
    assert x2 is not None and (x2 != service.vectorizer.transform(["oil prices"])).nnz == 0
    # every document of a batch refused: nothing routed, the letters kept
    refused = service.route([msg({"id": "b2", "text": "gold"}, offset=2)])
    assert refused.n_documents == 0 and not refused.parts
    assert [d.reason for d in refused.dead_letters] == ["duplicate_id"]


def test_one_message_delivered_twice_in_a_take_is_routed_once(service: Service) -> None:
    m = msg({"documents": [{"id": "a1", "text": "wheat"}, {"id": "a2", "text": "oil"}]}, offset=5)
    routed = service.route([m, m])
    assert routed.n_documents == 2 and not routed.dead_letters


def test_messages_made_in_process_without_offsets_are_all_routed(service: Service) -> None:
    routed = service.route([InputMessage(orjson.dumps({"id": f"p{i}", "text": "wheat"}))
                            for i in range(3)])
    assert routed.n_documents == 3 and not routed.dead_letters


def test_a_replaced_profile_learns_the_judgments_it_held_unless_reset(service: Service) -> None:
    """A new spec for an existing profile trains it afresh and then learns the old
    profile's judgments again, under the new model and update policy, with their keys
    (a judgment delivered again stays a duplicate); ``reset`` leaves them out. The
    replacement equals a profile built from the new spec that learned the same
    judgments itself."""
    table: dict[str, bytes] = {}
    add_wheat(service, table)
    docs = [{"id": f"c{i}", "text": t} for i, t in enumerate(
        ["wheat exports to egypt", "wheat harvest kansas", "crude oil news",
         "wheat prices fall", "gold rises"])]
    score_all(service, table, docs)
    verdicts = [("c0", True), ("c2", False), ("c1", True), ("c4", False)]
    res = service.apply_judgments([judgment_msg(service, id=f"j{k}", doc_id=d, profile="wheat",
                                                relevant=r, offset=k)
                                   for k, (d, r) in enumerate(verdicts)], table)
    assert res.changed == ["wheat"]
    new_spec = {"profile": "wheat", "query": "wheat grain", "positives": ["t1"], "model": "knn",
                "update": 3}
    res = service.apply_specs([spec_msg(service, **new_spec)], table)
    assert not res.dead_letters and service.stats["judgments_carried"] == 4
    entry = service.entry("wheat", table)
    assert entry is not None and entry.spec.model == "knn" and entry.spec.update == 3
    prof = entry.profile
    assert isinstance(prof, Profile)
    # update=3: three learned, the fourth pending, as if judged under the new spec
    assert (prof.n_judged_, prof.n_pending_) == (3, 1)
    assert entry.judged.digests().tolist() == key_digests(["j0", "j1", "j2", "j3"])
    twin = service.build_profile(decode_profile_spec(orjson.dumps(new_spec)))
    X = sp.vstack([service.store.get(d) for d, _ in verdicts], format="csr")
    twin.learn_many(X, [r for _, r in verdicts])
    assert (twin.threshold_, twin.n_judged_) == (prof.threshold_, prof.n_judged_)
    Xd = service.vectorizer.transform([d["text"] for d in docs])
    assert np.array_equal(twin.score(Xd), prof.score(Xd))
    again = service.apply_judgments([judgment_msg(service, id="j1", doc_id="c2", profile="wheat",
                                                  relevant=False, offset=9)], table)
    assert again.changed == [] and service.stats["judgments_duplicate"] == 1
    # the record holds them: a fresh worker reads the same
    copy = decode_profile_record(table["wheat"], service.weights)
    assert copy.profile.n_judged_ == 3 and copy.judged.digests().tolist() == key_digests(
        ["j0", "j1", "j2", "j3"])

    res = service.apply_specs([spec_msg(service, **new_spec, reset=True)], table)
    entry = service.entry("wheat", table)
    assert entry is not None and entry.profile.n_judged_ == 0 and not entry.judged
    assert entry.profile.n_pending_ == 0 and service.stats["judgments_carried"] == 4
    bad = service.apply_specs([spec_msg(service, **new_spec, reset="yes")], table)
    assert [d.reason for d in bad.dead_letters] == ["bad_reset"]
