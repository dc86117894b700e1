"""Audit of judgment corrections in the service (forty-seventh session).

A document's label in ``ProfileEntry.labels`` must stand for a judgment the profile
learned: a correction takes the old label's share out of the model's sums. Labels of
judgments a profile never learned (ignored under ``update="never"``, not carried by a
replacement because they had been evicted, learned from another vector) made a later
correction take out of the sums what was never put in, and a later judgment of the same
label skipped as a repeat though the profile had never learned the document.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numpy as np
import orjson
import pytest

from sift.agents import service as service_mod
from sift.agents.service import InputMessage, Service, TrainingSet
from sift.filters.profile import Profile
from tests.agents.offline import reuters_stream, reuters_training

_OFFSETS = itertools.count(1000)


@pytest.fixture(scope="module")
def training() -> TrainingSet:
    return reuters_training()


@pytest.fixture(scope="module")
def stream() -> list[dict[str, str]]:
    return reuters_stream(600, 700)


def spec(svc: Service, table: dict[str, bytes], **fields: Any) -> None:
    res = svc.apply_specs([InputMessage(orjson.dumps({"profile": "grain", "query": "grain wheat",
                                                      **fields}),
                                        "profiles", svc.shard("grain"), next(_OFFSETS))], table)
    assert not res.dead_letters, res.dead_letters


def see(svc: Service, docs: list[dict[str, str]]) -> None:
    routed = svc.route([InputMessage(orjson.dumps({"documents": docs}), "documents", 0,
                                     next(_OFFSETS))])
    for ids, X in routed.parts:
        svc.store.put(ids, X)


def make(training: TrainingSet, stream: list[dict[str, str]],
         journal: dict[str, bytes] | None = None, **fields: Any) -> tuple[Service, dict[str, bytes]]:
    svc = Service(training, n_shards=4, journal=journal)
    table: dict[str, bytes] = {}
    spec(svc, table, **fields)
    see(svc, stream)
    return svc, table


def judge(svc: Service, table: dict[str, bytes], *judgments: dict[str, Any]) -> Any:
    msgs = [InputMessage(orjson.dumps({"profile": "grain", **j}), "judgments",
                         svc.shard("grain"), next(_OFFSETS)) for j in judgments]
    res = svc.apply_judgments(msgs, table)
    assert not res.dead_letters, res.dead_letters
    return res


def profile(svc: Service, table: dict[str, bytes]) -> Any:
    entry = svc.entry("grain", table)
    assert entry is not None
    return entry.profile


def assert_same_model(a: Any, b: Any, X: Any) -> None:
    np.testing.assert_allclose(a.score(X), b.score(X), rtol=1e-9, atol=1e-12)
    assert a.threshold_ == pytest.approx(b.threshold_, rel=1e-9)
    assert (a.n_judged_, a.n_relevant_) == (b.n_judged_, b.n_relevant_)
    assert a.judgments()[1].tolist() == b.judgments()[1].tolist()


def test_judgments_ignored_under_never_are_not_labels_of_the_replacement(
        training: TrainingSet, stream: list[dict[str, str]]) -> None:
    """Judged under ``update="never"`` (ignored), then replaced by a spec that learns:
    the new profile never learned those documents, so judging them again is learning
    them (the same label is not a repeat; the other label takes nothing out of sums that
    never held the first)."""
    a, b = stream[0]["id"], stream[1]["id"]
    journal: dict[str, bytes] = {}
    svc, table = make(training, stream, journal=journal, update="never")
    judge(svc, table, {"id": "1", "doc_id": a, "relevant": True},
          {"id": "2", "doc_id": b, "relevant": False})
    spec(svc, table)  # the same profile, now learning every judgment
    judge(svc, table, {"id": "3", "doc_id": a, "relevant": True})
    judge(svc, table, {"id": "4", "doc_id": b, "relevant": True})
    assert (svc.stats["judgments_repeated"], svc.stats["judgments_corrected"]) == (0, 0)
    ref, ref_table = make(training, stream)
    judge(ref, ref_table, {"id": "3", "doc_id": a, "relevant": True})
    judge(ref, ref_table, {"id": "4", "doc_id": b, "relevant": True})
    X = svc.vectorizer.transform([d["text"] for d in stream])
    assert_same_model(profile(svc, table), profile(ref, ref_table), X)
    # and a worker taking over holds the same labels (record and journal)
    other = Service(training, n_shards=4, journal=dict(journal))
    entry = other.entry("grain", dict(table))
    assert entry is not None and entry.labels == {a: True, b: True}


CAP = 12


@pytest.fixture
def small_profiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Profiles built by the service hold at most CAP examples (judgments get evicted)."""
    monkeypatch.setattr(service_mod, "Profile", functools.partial(Profile, max_examples=CAP))


def held_docs(svc: Service, table: dict[str, bytes], ids: list[str]) -> set[str]:
    """The documents among ``ids`` whose judgment the profile holds as an example."""
    ex = profile(svc, table).examples_
    out = set()
    for d in ids:
        x = svc.store.get(d)
        assert x is not None
        x.sort_indices()
        if ex.matching_rows(x, real=True).size:
            out.add(d)
    return out


@pytest.mark.usefixtures("small_profiles")
def test_a_replacement_keeps_the_labels_of_the_judgments_it_learns_only(
        training: TrainingSet, stream: list[dict[str, str]]) -> None:
    """A replaced profile learns the judgments its predecessor still held; a document
    whose judgment had been evicted is new to it: judged again with the other label, it
    is learned (not unlearned from sums that never held it)."""
    ids = [d["id"] for d in stream[:20]]
    svc, table = make(training, stream)
    judge(svc, table, *({"id": f"j{i}", "doc_id": d, "relevant": i % 3 == 0}
                        for i, d in enumerate(ids)))
    held = held_docs(svc, table, ids)
    assert ids[0] not in held and 0 < len(held) < len(ids)
    spec(svc, table, query="grain corn")
    entry = svc.entry("grain", table)
    assert entry is not None and set(entry.labels) == held
    judge(svc, table, {"id": "fix", "doc_id": ids[0], "relevant": False})
    assert svc.stats["judgments_corrected"] == 0
    ref, ref_table = make(training, stream, query="grain corn")
    judge(ref, ref_table, *({"id": f"j{i}", "doc_id": d, "relevant": i % 3 == 0}
                            for i, d in enumerate(ids) if d in held))
    judge(ref, ref_table, {"id": "fix", "doc_id": ids[0], "relevant": False})
    X = svc.vectorizer.transform([d["text"] for d in stream])
    assert_same_model(profile(svc, table), profile(ref, ref_table), X)


@pytest.mark.usefixtures("small_profiles")
def test_a_correction_in_place_keeps_the_label_in_the_judgments_order(
        training: TrainingSet, stream: list[dict[str, str]]) -> None:
    """Labels are in the order of the examples they stand for, so that the newest held
    judgments' labels are the newest labels: a judgment corrected where it is held keeps
    its place (and is evicted in its turn), it does not become the newest."""
    ids = [d["id"] for d in stream[:CAP + 2]]
    svc, table = make(training, stream)
    judge(svc, table, *({"id": f"j{i}", "doc_id": d, "relevant": False}
                        for i, d in enumerate(ids[:CAP])))
    judge(svc, table, {"id": "fix", "doc_id": ids[0], "relevant": True})
    assert svc.stats["judgments_corrected"] == 1  # corrected where it is held
    judge(svc, table, *({"id": f"k{i}", "doc_id": d, "relevant": False}
                        for i, d in enumerate(ids[CAP:])))
    entry = svc.entry("grain", table)
    assert entry is not None and list(entry.labels) == ids
    held = held_docs(svc, table, ids)
    assert ids[0] not in held and ids[CAP] in held
    spec(svc, table, query="grain corn")
    entry = svc.entry("grain", table)
    assert entry is not None and set(entry.labels) == held


def test_a_correction_from_a_text_that_is_not_the_judged_vector(
        training: TrainingSet, stream: list[dict[str, str]]) -> None:
    """A titled document is scored with its title; a judgment's ``text`` (what sift web
    sends) is its text alone, another vector. A correction sent with the text to a worker
    that no longer keeps the document finds no judgment of that vector: in a profile that
    has evicted no judgment it is learned as a judgment, not taken out of the sums."""
    doc = {"id": "t1", "title": "GRAIN EXPORTS RISE",
           "text": "Officials said wheat exports rose sharply this year."}
    svc, table = make(training, stream)
    see(svc, [doc])
    judge(svc, table, {"id": "a", "doc_id": "t1", "relevant": True})
    other = Service(training, n_shards=4)  # takes over; never saw t1
    judge(other, table, {"id": "b", "doc_id": "t1", "relevant": False, "text": doc["text"]})
    assert (other.stats["judgments"], other.stats["judgments_corrected"]) == (1, 0)
    entry = other.entry("grain", table)
    assert entry is not None and entry.labels == {"t1": False}
    # what it holds: the first judgment and this one, as two judgments of two vectors
    ref, ref_table = make(training, stream)
    see(ref, [doc])
    judge(ref, ref_table, {"id": "a", "doc_id": "t1", "relevant": True})
    judge(ref, ref_table, {"id": "b", "doc_id": "t1-text", "relevant": False, "text": doc["text"]})
    X = svc.vectorizer.transform([d["text"] for d in stream])
    assert_same_model(profile(other, table), profile(ref, ref_table), X)
