"""The judgment journal: a profile's state record plus the batches learned after it."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import orjson
import pytest
import scipy.sparse as sp

from sift.agents import journal as jr
from sift.agents.service import InputMessage, Service, TrainingSet
from sift.filters.bagging import BaggedProfile
from tests.agents.offline import reuters_stream, reuters_training

PROFILES = {"wheat": "wheat", "crude": "crude oil", "gold": "gold", "money-fx": "dollar yen"}


@pytest.fixture(scope="module")
def training() -> TrainingSet:
    return reuters_training()


@pytest.fixture(scope="module")
def stream() -> list[dict[str, str]]:
    return reuters_stream(600, 900)


def make(training: TrainingSet, journal: dict[str, bytes] | None) -> Service:
    return Service(training, n_shards=4, journal=journal)


def spec_msg(svc: Service, offset: int = 0, **spec: Any) -> InputMessage:
    return InputMessage(orjson.dumps(spec), "profiles", svc.shard(spec["profile"]), offset)


def seen(svc: Service, docs: list[dict[str, str]]) -> None:
    """Route the documents and keep their vectors, as scoring them does."""
    routed = svc.route([InputMessage(orjson.dumps({"documents": docs[i:i + 50]}), "documents",
                                     0, i) for i in range(0, len(docs), 50)])
    for ids, X in routed.parts:
        svc.store.put(ids, X)


def judgment_batches(docs: list[dict[str, str]], n: int, seed: int = 0) -> list[list[InputMessage]]:
    """``n`` consumed batches of 1-6 judgments each, over the profiles, some of one profile
    several times in a batch (learned together)."""
    rng = random.Random(seed)
    out, k = [], 0
    for _ in range(n):
        batch = []
        for _ in range(rng.randint(1, 6)):
            p = rng.choice(sorted(PROFILES))
            j = {"id": f"j{k}", "doc_id": rng.choice(docs)["id"], "profile": p,
                 "relevant": rng.random() < 0.4}
            batch.append(InputMessage(orjson.dumps(j), "judgments", 0, k))  # see apply()
            k += 1
        out.append(batch)
    return out


def apply(svc: Service, table: dict[str, bytes], batches: list[list[InputMessage]]) -> None:
    """Apply the batches, each message on its profile's partition."""
    for batch in batches:
        fixed = [InputMessage(m.value, m.topic, svc.shard(orjson.loads(m.value)["profile"]),
                              m.offset) for m in batch]
        res = svc.apply_judgments(fixed, table)
        assert not res.dead_letters, res.dead_letters[:1]


def states(svc: Service, table: dict[str, bytes]) -> dict[str, Any]:
    out = {}
    for name in PROFILES:
        entry = svc.entry(name, table)
        assert entry is not None, name
        out[name] = (orjson.dumps(entry.profile.to_state()), entry.judged.digests().tolist(), entry.seq)
    return out


def create(svc: Service, table: dict[str, bytes]) -> None:
    res = svc.apply_specs([spec_msg(svc, profile=p, query=q) for p, q in PROFILES.items()],
                          table)
    assert not res.dead_letters


def started(training: TrainingSet, stream: list[dict[str, str]]
            ) -> tuple[Service, dict[str, bytes], dict[str, bytes]]:
    """A service with a journal, the profiles created and the stream's vectors kept; and
    its state table and journal table."""
    table: dict[str, bytes] = {}
    journal: dict[str, bytes] = {}
    svc = make(training, journal)
    create(svc, table)
    seen(svc, stream)
    return svc, table, journal


def test_a_recovered_profile_is_the_live_one_bit_for_bit(training: TrainingSet,
                                                         stream: list[dict[str, str]]) -> None:
    """Record + journal, read by a fresh worker, give exactly the state the writer holds,
    and the same state as a writer without a journal (a record per batch)."""
    table: dict[str, bytes] = {}
    journal: dict[str, bytes] = {}
    live = make(training, journal)
    plain = make(training, None)
    plain_table: dict[str, bytes] = {}
    for svc, tab in ((live, table), (plain, plain_table)):
        create(svc, tab)
        seen(svc, stream)
    batches = judgment_batches(stream, 120)
    records = {n: table[n] for n in PROFILES}
    apply(live, table, batches[:5])
    # appends leave the state records alone
    assert all(table[n] is records[n] for n in PROFILES)
    assert set(journal) == set(PROFILES)
    apply(live, table, batches[5:])
    apply(plain, plain_table, batches)
    assert live.stats["journal_appends"] > 0
    # the journal was full at least once: some records were rewritten, far fewer than
    # the batches learned (a record per profile and batch without the journal)
    assert len(PROFILES) < live.stats["state_records"] < plain.stats["state_records"] / 4
    want = states(live, table)
    assert states(plain, plain_table) == want
    fresh = make(training, dict(journal))
    assert states(fresh, dict(table)) == want
    assert fresh.stats["journal_replayed"] > 0 and fresh.stats["bad_journal"] == 0
    # and the fresh worker's scores are the live ones
    X = training.vectorizer.transform([d["text"] for d in stream[:40]])
    for name in PROFILES:
        a, b = live.entry(name, table), fresh.entry(name, dict(table))
        assert a is not None and b is not None
        assert np.array_equal(a.profile.score(X), b.profile.score(X))
        assert a.profile.threshold_ == b.profile.threshold_


def test_a_bagged_profile_recovers_from_its_journal_bit_for_bit(
        training: TrainingSet, stream: list[dict[str, str]]) -> None:
    """Every member of a bagged profile learns the journal's batches on recovery, as it
    learned them live."""
    table: dict[str, bytes] = {}
    journal: dict[str, bytes] = {}
    live = make(training, journal)
    res = live.apply_specs([spec_msg(live, profile=p, query=q, bags=3, bag_rule="vote")
                            for p, q in PROFILES.items()], table)
    assert not res.dead_letters
    seen(live, stream)
    apply(live, table, judgment_batches(stream, 40, seed=3))
    assert live.stats["journal_appends"] > 0
    want = states(live, table)
    fresh = make(training, dict(journal))
    assert states(fresh, dict(table)) == want
    assert fresh.stats["journal_replayed"] > 0 and fresh.stats["bad_journal"] == 0
    for name in PROFILES:
        entry = fresh.entry(name, dict(table))
        assert entry is not None and isinstance(entry.profile, BaggedProfile)
        assert entry.profile.bags == 3 and entry.profile.rule == "vote"
        assert entry.profile.n_judged_ > 0


def test_a_recovered_worker_goes_on_and_is_recovered_again(training: TrainingSet,
                                                           stream: list[dict[str, str]]) -> None:
    """The journal continues after a takeover: the new owner appends to it, and a third
    worker reading it ends where the second did; a judgment seen before is a duplicate."""
    first, table, journal = started(training, stream)
    batches = judgment_batches(stream, 50, seed=3)
    apply(first, table, batches[:20])
    second = make(training, journal)  # the same tables, as after a rebalance
    seen(second, stream)
    apply(second, table, batches[20:])
    again = batches[10]  # already applied by the first worker
    before = states(second, table)
    second.apply_judgments([InputMessage(m.value, m.topic,
                                         second.shard(orjson.loads(m.value)["profile"]), m.offset)
                            for m in again], table)
    assert states(second, table) == before
    assert second.stats["judgments_duplicate"] == len(again)
    third = make(training, dict(journal))
    assert states(third, dict(table)) == before
    reference = make(training, None)
    ref_table: dict[str, bytes] = {}
    create(reference, ref_table)
    seen(reference, stream)
    apply(reference, ref_table, batches)
    assert {n: s[:2] for n, s in states(reference, ref_table).items()} == \
        {n: s[:2] for n, s in before.items()}


def test_a_replaced_profile_does_not_learn_its_predecessors_journal(
        training: TrainingSet, stream: list[dict[str, str]]) -> None:
    """Replaced, a profile learns the judgments its predecessor held once, from that
    profile (carried into the new record), never again from the old journal; replaced
    with ``reset``, none."""
    svc, table, journal = started(training, stream)
    apply(svc, table, judgment_batches(stream, 10, seed=5))
    before = svc.entry("wheat", table)
    assert before is not None and before.profile.n_judged_ > 0
    held, keys = before.profile.n_judged_, before.judged.copy()
    old_journal = journal["wheat"]
    svc.apply_specs([spec_msg(svc, profile="wheat", query="wheat grain", offset=9)], table)
    assert journal["wheat"] is old_journal  # left as it was: another epoch
    fresh = make(training, dict(journal))
    entry = fresh.entry("wheat", dict(table))
    assert entry is not None and entry.seq == 0 and entry.judged == keys
    assert entry.profile.n_judged_ == held and entry.spec.query == "wheat grain"
    assert fresh.stats["journal_replayed"] == 0 and fresh.stats["bad_journal"] == 0
    svc.apply_specs([spec_msg(svc, profile="wheat", query="wheat", reset=True, offset=10)],
                    table)
    fresh = make(training, dict(journal))
    entry = fresh.entry("wheat", dict(table))
    assert entry is not None and entry.seq == 0 and not entry.judged
    assert entry.profile.n_judged_ == 0 and fresh.stats["journal_replayed"] == 0
    # deleting the profile deletes both
    svc.apply_specs([spec_msg(svc, profile="wheat", delete=True, offset=11)], table)
    assert "wheat" not in table and "wheat" not in journal


def test_a_bad_or_broken_journal_falls_back_to_the_record(training: TrainingSet,
                                                          stream: list[dict[str, str]],
                                                          caplog: pytest.LogCaptureFixture
                                                          ) -> None:
    svc, table, journal = started(training, stream)
    apply(svc, table, judgment_batches(stream, 8, seed=7))
    name = max(PROFILES, key=lambda n: len(orjson.loads(journal[n])["batches"]) if n in journal
               else 0)
    record_only = make(training, None).entry(name, dict(table))
    assert record_only is not None
    corrupt = {**journal, name: journal[name][:-7]}
    fresh = make(training, corrupt)
    entry = fresh.entry(name, dict(table))
    assert entry is not None and fresh.stats["bad_journal"] == 1
    assert orjson.dumps(entry.profile.to_state()) == orjson.dumps(record_only.profile.to_state())
    assert "unusable judgment journal" in caplog.text
    # a journal that skips batches after the record (the record's write was lost)
    obj = orjson.loads(journal[name])
    assert len(obj["batches"]) >= 2
    obj["batches"] = obj["batches"][1:]
    fresh = make(training, {name: orjson.dumps(obj)})
    entry = fresh.entry(name, dict(table))
    assert entry is not None and fresh.stats["bad_journal"] == 1
    assert orjson.dumps(entry.profile.to_state()) == orjson.dumps(record_only.profile.to_state())


def test_a_record_from_before_journals_starts_one(training: TrainingSet,
                                                  stream: list[dict[str, str]]) -> None:
    table: dict[str, bytes] = {}
    old = make(training, None)
    create(old, table)
    for name in PROFILES:  # as the twentieth session wrote them: no journal position
        obj = orjson.loads(table[name])
        del obj["journal"]
        table[name] = orjson.dumps(obj)
    journal: dict[str, bytes] = {}
    svc = make(training, journal)
    seen(svc, stream)
    apply(svc, table, judgment_batches(stream, 6, seed=11))
    judged = [n for n in PROFILES if svc.entry(n, table).seq]  # type: ignore[union-attr]
    assert judged and svc.stats["journal_appends"] > 0
    for name in judged:  # the first save of each: a new record, with an epoch
        assert orjson.loads(table[name])["journal"]["epoch"]
    assert states(make(training, dict(journal)), dict(table)) == states(svc, table)


def test_journal_codec_round_trip_and_refusals() -> None:
    X = sp.csr_matrix(np.array([[0.0, 0.5, 0.0, 0.25], [1.0, 0.0, 0.0, 0.0]]))
    pieces = [jr.encode_batch(4, X, [True, False], ["a", "b"], True),
              jr.encode_batch(5, X[:1], [False], ["c"], False)]
    data = jr.encode_journal("p", "e1", pieces)
    epoch, batches = jr.decode_journal(data, "p", 4)
    assert epoch == "e1" and [b.seq for b in batches] == [4, 5]
    assert (batches[0].X != X).nnz == 0 and batches[0].relevant == [True, False]
    assert batches[1].keys == ["c"] and batches[1].coalesce is False
    assert [b.seq for b in jr.after(batches, 4)] == [5]
    assert jr.after(batches, 5) == []
    with pytest.raises(jr.JournalError, match="missing"):
        jr.after(batches, 2)
    with pytest.raises(jr.JournalError, match="is for profile 'p'"):
        jr.decode_journal(data, "q", 4)
    with pytest.raises(jr.JournalError, match="width 5"):
        jr.decode_journal(data, "p", 5)
    with pytest.raises(jr.JournalError, match="follows batch 4"):
        jr.decode_journal(jr.encode_journal("p", "e1", [pieces[0], pieces[0]]), "p", 4)
    with pytest.raises(jr.JournalError, match="format"):
        jr.decode_journal(b'{"format": 9}', "p", 4)
    with pytest.raises(jr.JournalError, match="bad journal record"):
        jr.decode_journal(b"\xff", "p", 4)
    with pytest.raises(jr.JournalError, match="labels"):
        jr.encode_batch(1, X, [True], ["a"], True)
    bad = orjson.loads(data)
    bad["batches"][0]["relevant"] = [1, 0]
    with pytest.raises(jr.JournalError, match="booleans"):
        jr.decode_journal(orjson.dumps(bad), "p", 4)


def test_journal_full_bounds_batches_and_bytes() -> None:
    n = jr.MAX_JOURNAL_BATCHES
    assert not jr.journal_full(n - 1, 1000, 10, 10**6)
    assert jr.journal_full(n, 1000, 10, 10**6)
    assert not jr.journal_full(0, 0, jr.MIN_JOURNAL_BYTES, 0)
    assert jr.journal_full(0, 0, jr.MIN_JOURNAL_BYTES + 1, 0)
    assert not jr.journal_full(1, 200_000, 50_000, 10**6)
    assert jr.journal_full(1, 200_000, 50_001, 10**6)  # past a quarter of the record


def test_append_extends_an_encoded_journal() -> None:
    X = sp.csr_matrix(np.array([[0.0, 0.5]]))
    name = 'p "batches":[ ,"batches":['  # the key's bytes in a name are escaped
    one = jr.encode_journal(name, "e", [jr.encode_batch(1, X, [True], ["a"], True)],
                            {"model_version": 1})
    two = jr.append(one, jr.encode_batch(2, X, [False], ["b"], True), name, "e",
                    {"model_version": 2})
    assert two == jr.encode_journal(name, "e", [jr.encode_batch(1, X, [True], ["a"], True),
                                                jr.encode_batch(2, X, [False], ["b"], True)],
                                    {"model_version": 2})
    assert [b.keys for b in jr.decode_journal(two, name, 2)[1]] == [["a"], ["b"]]
    assert orjson.loads(two)["latest"] == {"model_version": 2}
    with pytest.raises(jr.JournalError):
        jr.append(b"{}", b"{}", "p", "e")


def test_after_a_lost_write_the_next_save_is_a_whole_record(training: TrainingSet,
                                                            stream: list[dict[str, str]]) -> None:
    """The app calls ``rewrite_records`` when a table write did not reach the changelog:
    each profile's next save is then a record (a journal appended after a lost record would
    not continue what the broker holds), and journaling resumes after it."""
    svc, table, journal = started(training, stream)
    batches = judgment_batches(stream, 30, seed=13)
    apply(svc, table, batches[:10])
    records = svc.stats["state_records"]
    svc.rewrite_records()
    touched: set[str] = set()
    for batch in batches[10:]:
        names = {orjson.loads(m.value)["profile"] for m in batch}
        before = {n: table[n] for n in names}
        apply(svc, table, [batch])
        for n in names:
            if n not in touched:  # its first save since: a new record
                assert table[n] is not before[n], n
        touched |= names
    assert touched == set(PROFILES)
    assert svc.stats["state_records"] >= records + len(touched)  # (a full journal adds more)
    assert svc.stats["journal_appends"] > 0 and not svc._rewrite
    assert states(make(training, dict(journal)), dict(table)) == states(svc, table)


def test_with_appends_off_journals_are_still_read_and_records_written(
        training: TrainingSet, stream: list[dict[str, str]]) -> None:
    """``SIFT_JOURNAL=false`` after a run with journals: a worker still learns the journals
    after their records on recovery (nothing lost) and then writes whole records."""
    svc, table, journal = started(training, stream)
    batches = judgment_batches(stream, 20, seed=17)
    apply(svc, table, batches[:10])
    assert svc.stats["journal_appends"] > 0
    off = Service(training, n_shards=4, journal=journal, append_journal=False)
    seen(off, stream)
    assert states(off, table) == states(svc, table)  # the journals were learned
    records = {n: table[n] for n in PROFILES}
    apply(off, table, batches[10:])
    assert off.stats["journal_appends"] == 0 and off.stats["state_records"] > 0
    changed = {orjson.loads(m.value)["profile"] for b in batches[10:] for m in b}
    assert all(table[n] is not records[n] for n in changed)
    assert states(make(training, dict(journal)), dict(table)) == states(off, table)


def test_the_command_lines_summary_is_the_profile_after_its_journal(
        training: TrainingSet, stream: list[dict[str, str]]) -> None:
    """`sift profiles list` reads the two changelogs: between state records a profile's
    threshold, version and judgment count are those after its journal's last batch, the
    live profile's, and not the record's (which said 0 judgments until it was rewritten)."""
    from sift.commands.profiles import _record

    svc, table, journal = started(training, stream)
    apply(svc, table, judgment_batches(stream, 3))
    assert svc.stats["journal_appends"] > 0
    for name in PROFILES:
        live = svc.entry(name, table)
        assert live is not None
        summary = _record(table[name], journal.get(name))
        assert (summary["threshold"], summary["model_version"], summary["judged"]) == (
            live.profile.threshold_, live.profile.version_, live.profile.n_judged_)
    stale = [_record(table[n])["judged"] for n in PROFILES]
    assert sum(stale) < sum(_record(table[n], journal.get(n))["judged"] for n in PROFILES)
    # a journal of another epoch (a replaced profile's) is not this record's
    other = next(iter(PROFILES))
    moved = journal[other].replace(b'"epoch":"', b'"epoch":"x', 1)
    assert _record(table[other], moved) == _record(table[other])


@pytest.mark.parametrize("bags", [1, 3])
def test_judgments_waiting_for_the_update_policy_are_shown(
        training: TrainingSet, stream: list[dict[str, str]], bags: int) -> None:
    """Under ``update`` = n the judgments received before the n-th are held, not learned:
    `sift profiles list` and the web show them as waiting (they showed 0 judgments, as if
    the judgments were lost), from the record and from the journal after it."""
    from sift.commands.profiles import _record
    from sift.web.pages import judge_page
    from sift.web.state import WebState

    table: dict[str, bytes] = {}
    journal: dict[str, bytes] = {}
    svc = make(training, journal)
    spec = {"profile": "wheat", "query": "wheat", "update": 3, **({"bags": bags} if bags > 1 else {})}
    assert not svc.apply_specs([spec_msg(svc, **spec)], table).dead_letters
    seen(svc, stream)
    record = table["wheat"]
    judged = [{"id": f"j{i}", "doc_id": stream[i]["id"], "profile": "wheat", "relevant": i == 0}
              for i in range(5)]
    assert _record(record)["waiting"] == 0
    counts = []
    for j in judged:
        res = svc.apply_judgments([InputMessage(orjson.dumps(j), "judgments",
                                                svc.shard("wheat"), 0)], table)
        assert not res.dead_letters
        live = svc.entry("wheat", table)
        assert live is not None
        summary = _record(table["wheat"], journal.get("wheat"))
        assert summary["waiting"] == live.profile.n_pending_
        counts.append((summary["judged"], summary["waiting"]))
        web = WebState()
        web.on_profile_state("wheat", table["wheat"], 1.0)
        if "wheat" in journal:
            web.on_profile_journal("wheat", journal["wheat"], 2.0)
        row = web.snapshot()["profiles"][0]
        assert (row["learned_judgments"], row["waiting_judgments"]) == counts[-1]
        page = judge_page("wheat", [], row)
        assert ("2 judgments wait for the next model update (every 3)" in page) == (
            counts[-1][1] == 2)
    assert counts == [(0, 1), (0, 2), (3, 0), (3, 1), (3, 2)]
