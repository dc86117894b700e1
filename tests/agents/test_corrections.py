"""Judgments that repeat or correct an earlier judgment of the same document (forty-seventh
session): one label per document and profile, the last judgment's."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pytest

from sift.agents import journal as jr
from sift.agents.service import (
    InputMessage,
    Service,
    ServiceError,
    TrainingSet,
    decode_profile_record,
)
from tests.agents.offline import reuters_stream, reuters_training


@pytest.fixture(scope="module")
def training() -> TrainingSet:
    return reuters_training()


@pytest.fixture(scope="module")
def stream() -> list[dict[str, str]]:
    return reuters_stream(600, 700)


def make(training: TrainingSet, stream: list[dict[str, str]], model: str = "rocchio",
         journal: dict[str, bytes] | None = None, **spec: Any) -> tuple[Service, dict[str, bytes]]:
    """A service holding profile ``grain`` that has seen ``stream``."""
    svc = Service(training, n_shards=4, journal=journal)
    table: dict[str, bytes] = {}
    res = svc.apply_specs([InputMessage(orjson.dumps({"profile": "grain", "query": "grain wheat",
                                                      "model": model, **spec}),
                                        "profiles", svc.shard("grain"), 0)], table)
    assert not res.dead_letters, res.dead_letters
    see(svc, stream)
    return svc, table


def see(svc: Service, docs: list[dict[str, str]]) -> None:
    routed = svc.route([InputMessage(orjson.dumps({"documents": docs}), "documents", 0, 0)])
    for ids, X in routed.parts:
        svc.store.put(ids, X)


def judge(svc: Service, table: dict[str, bytes], *judgments: dict[str, Any]) -> Any:
    """One consumed batch of judgments of ``grain``."""
    msgs = [InputMessage(orjson.dumps({"profile": "grain", **j}), "judgments",
                         svc.shard("grain"), k) for k, j in enumerate(judgments)]
    return svc.apply_judgments(msgs, table)


def labels_of(svc: Service, table: dict[str, bytes]) -> list[bool]:
    entry = svc.entry("grain", table)
    assert entry is not None
    return entry.profile.judgments()[1].tolist()


def state(svc: Service, table: dict[str, bytes], docs: list[dict[str, str]]) -> tuple[Any, float]:
    entry = svc.entry("grain", table)
    assert entry is not None
    p = entry.profile
    X = svc.vectorizer.transform([d["text"] for d in docs])
    return p.score(X), p.threshold_


@pytest.mark.parametrize("model", ["rocchio", "kantor", "knn"])
def test_a_correction_leaves_the_profile_judged_right_from_the_start(
        training: TrainingSet, stream: list[dict[str, str]], model: str) -> None:
    labels = [i % 3 == 0 for i in range(12)]
    wrong, right = make(training, stream, model), make(training, stream, model)
    judge(*wrong, *({"id": f"j{i}", "doc_id": stream[i]["id"], "relevant": r ^ (i == 4)}
                    for i, r in enumerate(labels)))
    res = judge(*wrong, {"id": "fix", "doc_id": stream[4]["id"], "relevant": labels[4]})
    assert res.changed == ["grain"] and not res.dead_letters
    judge(*right, *({"id": f"j{i}", "doc_id": stream[i]["id"], "relevant": r}
                    for i, r in enumerate(labels)))
    assert wrong[0].stats["judgments_corrected"] == 1 and wrong[0].stats["judgments"] == 12
    assert labels_of(*wrong) == labels_of(*right) == labels
    (s_w, t_w), (s_r, t_r) = state(*wrong, stream), state(*right, stream)
    np.testing.assert_allclose(s_w, s_r, rtol=1e-9, atol=1e-12)
    assert t_w == pytest.approx(t_r, rel=1e-9)


def test_the_same_label_again_is_a_repeat_and_changes_nothing(
        training: TrainingSet, stream: list[dict[str, str]]) -> None:
    svc, table = make(training, stream)
    judge(svc, table, {"id": "a", "doc_id": stream[0]["id"], "relevant": True})
    before = table["grain"]
    res = judge(svc, table, {"id": "b", "doc_id": stream[0]["id"], "relevant": True})
    assert res.changed == [] and table["grain"] is before
    assert (svc.stats["judgments"], svc.stats["judgments_repeated"]) == (1, 1)
    # delivered again it is a repeat again (its key is not kept: it changed nothing)
    judge(svc, table, {"id": "b", "doc_id": stream[0]["id"], "relevant": True})
    assert (svc.stats["judgments_duplicate"], svc.stats["judgments_repeated"]) == (0, 2)
    assert "b" not in svc.entry("grain", table).judged  # type: ignore[union-attr]


def test_without_ids_the_other_label_corrects_and_the_same_is_a_duplicate(
        training: TrainingSet, stream: list[dict[str, str]]) -> None:
    svc, table = make(training, stream)
    d = stream[1]["id"]
    judge(svc, table, {"doc_id": d, "relevant": True})
    judge(svc, table, {"doc_id": d, "relevant": True})
    assert svc.stats["judgments_duplicate"] == 1
    judge(svc, table, {"doc_id": d, "relevant": False})
    assert svc.stats["judgments_corrected"] == 1 and labels_of(svc, table) == [False]
    entry = svc.entry("grain", table)
    assert entry is not None and entry.profile.n_judged_ == 1 and entry.profile.n_relevant_ == 0


def test_a_judgment_delivered_again_after_its_correction_stays_corrected(
        training: TrainingSet, stream: list[dict[str, str]]) -> None:
    svc, table = make(training, stream)
    d = stream[2]["id"]
    judge(svc, table, {"id": "a", "doc_id": d, "relevant": True})
    judge(svc, table, {"id": "b", "doc_id": d, "relevant": False})
    judge(svc, table, {"id": "a", "doc_id": d, "relevant": True})  # re-delivered: a duplicate
    assert labels_of(svc, table) == [False]
    assert (svc.stats["judgments_corrected"], svc.stats["judgments_duplicate"]) == (1, 1)


def test_a_judgment_and_its_correction_in_one_batch(
        training: TrainingSet, stream: list[dict[str, str]]) -> None:
    svc, table = make(training, stream)
    ids = [d["id"] for d in stream[:4]]
    judge(svc, table, {"id": "a", "doc_id": ids[0], "relevant": True},
          {"id": "b", "doc_id": ids[1], "relevant": False},
          {"id": "c", "doc_id": ids[0], "relevant": False},
          {"id": "d", "doc_id": ids[2], "relevant": True},
          {"id": "e", "doc_id": ids[0], "relevant": False})  # a repeat of the correction
    assert labels_of(svc, table) == [False, False, True]
    assert (svc.stats["judgments"], svc.stats["judgments_corrected"],
            svc.stats["judgments_repeated"]) == (3, 1, 1)


@pytest.mark.parametrize("update", ["every", 3])
def test_corrections_survive_a_restart_through_the_record_and_the_journal(
        training: TrainingSet, stream: list[dict[str, str]], update: Any) -> None:
    journal: dict[str, bytes] = {}
    svc, table = make(training, stream, journal=journal, update=update)
    judge(svc, table, *({"id": f"j{i}", "doc_id": stream[i]["id"], "relevant": i % 2 == 0}
                        for i in range(5)))
    judge(svc, table, {"id": "fix", "doc_id": stream[1]["id"], "relevant": True})
    # a batch after the correction goes to the journal, with its documents' ids
    judge(svc, table, {"id": "j9", "doc_id": stream[9]["id"], "relevant": True})
    assert "grain" in journal and b'"docs"' in journal["grain"]
    # another worker takes over from the table and the journal
    other = Service(training, n_shards=4, journal=journal)
    see(other, stream)
    entry = other.entry("grain", table)
    assert entry is not None
    assert entry.labels[stream[1]["id"]] is True and entry.labels[stream[9]["id"]] is True
    # what it learned from the journal is told apart too: a repeat and a correction
    judge(other, table, {"id": "r", "doc_id": stream[9]["id"], "relevant": True},
          {"id": "c", "doc_id": stream[9]["id"], "relevant": False},
          {"id": "c2", "doc_id": stream[0]["id"], "relevant": False})
    assert (other.stats["judgments_repeated"], other.stats["judgments_corrected"]) == (1, 2)
    assert labels_of(other, table) == [False, True, True, False, True, False]


def test_a_correction_needs_the_document(training: TrainingSet,
                                         stream: list[dict[str, str]]) -> None:
    svc, table = make(training, stream)
    judge(svc, table, {"id": "a", "doc_id": "elsewhere", "relevant": True,
                       "text": stream[3]["text"]})
    res = judge(svc, table, {"id": "b", "doc_id": "elsewhere", "relevant": False})
    assert len(res.dead_letters) == 1
    letter = res.dead_letters[0]
    assert letter.reason == "unknown_document" and "correction of document" in letter.message
    # with its text it corrects
    judge(svc, table, {"id": "b", "doc_id": "elsewhere", "relevant": False,
                       "text": stream[3]["text"]})
    assert svc.stats["judgments_corrected"] == 1 and labels_of(svc, table) == [False]


def test_a_replaced_profile_keeps_the_labels(training: TrainingSet,
                                             stream: list[dict[str, str]]) -> None:
    svc, table = make(training, stream)
    judge(svc, table, {"id": "a", "doc_id": stream[0]["id"], "relevant": True})
    svc.apply_specs([InputMessage(orjson.dumps({"profile": "grain", "query": "grain corn"}),
                                  "profiles", svc.shard("grain"), 1)], table)
    judge(svc, table, {"id": "b", "doc_id": stream[0]["id"], "relevant": False})
    assert svc.stats["judgments_corrected"] == 1 and labels_of(svc, table) == [False]


def test_bad_labels_in_a_record_or_docs_in_a_journal_are_refused(
        training: TrainingSet, stream: list[dict[str, str]]) -> None:
    svc, table = make(training, stream)
    judge(svc, table, {"id": "a", "doc_id": stream[0]["id"], "relevant": True})
    obj = orjson.loads(table["grain"])
    assert obj["labels"] == [[stream[0]["id"], True]]
    for bad in ([[stream[0]["id"], 1]], [["x"]], {"x": True}, [[3, True]]):
        with pytest.raises(ServiceError, match="labels"):
            decode_profile_record(orjson.dumps({**obj, "labels": bad}), svc.weights, "grain",
                                  n_features=svc.vectorizer.n_features)
    X = svc.vectorizer.transform(["wheat"])
    piece = orjson.loads(jr.encode_batch(1, X, [True], ["k"], True, ["d"]))
    assert piece["docs"] == ["d"]
    with pytest.raises(jr.JournalError, match="document ids"):
        jr.encode_batch(1, X, [True], ["k"], True, ["d", "e"])
    for bad_docs in (["d", "e"], [1], "d"):
        raw = jr.encode_journal("grain", "e1", [orjson.dumps({**piece, "docs": bad_docs})])
        with pytest.raises(jr.JournalError, match="docs"):
            jr.decode_journal(raw, "grain", svc.vectorizer.n_features)


def test_a_batch_split_by_a_correction_never_learned_recovers_bit_for_bit(
        training: TrainingSet, stream: list[dict[str, str]]) -> None:
    """A correction of a vector the profile never learned (judged from one text, corrected
    from another) is learned as a new judgment; the judgments before it in the batch were
    learned apart from it (one learn_many each side), so the journal batch must say so
    (its steps), not stand for one call: a worker taking over from record and journal
    ends with the live profile's state, bit for bit (it was one model version apart)."""
    journal: dict[str, bytes] = {}
    svc, table = make(training, stream, journal=journal)
    judge(svc, table, {"id": "a", "doc_id": "x", "relevant": True, "text": stream[5]["text"]})
    judge(svc, table, {"id": "b", "doc_id": stream[1]["id"], "relevant": True},
          {"id": "c", "doc_id": "x", "relevant": False, "text": stream[6]["text"]},
          {"id": "d", "doc_id": stream[2]["id"], "relevant": False})
    assert (svc.stats["judgments"], svc.stats["judgments_corrected"]) == (4, 0)
    live = svc.entry("grain", table)
    other = Service(training, n_shards=4, journal=dict(journal))
    fresh = other.entry("grain", table)
    assert live is not None and fresh is not None
    assert orjson.dumps(fresh.profile.to_state()) == orjson.dumps(live.profile.to_state())
    assert fresh.labels == live.labels and fresh.judged == live.judged


@pytest.mark.parametrize(("model", "update", "bags"), [
    ("rocchio", "every", 1), ("kantor", 2, 1), ("knn", "every", 1), ("rocchio", 3, 3)])
def test_a_correction_goes_to_the_journal_and_a_worker_taking_over_makes_it_too(
        training: TrainingSet, stream: list[dict[str, str]], model: str, update: Any,
        bags: int) -> None:
    """A correction is a journal step (-1), not a whole record: the record stays, and a
    worker that takes over relearns the batches and makes the corrections where they
    were made, ending with the live profile bit for bit."""
    journal: dict[str, bytes] = {}
    svc, table = make(training, stream, model, journal=journal, update=update, bags=bags)
    judge(svc, table, *({"id": f"j{i}", "doc_id": stream[i]["id"], "relevant": i % 3 == 0}
                        for i in range(8)))
    record = table["grain"]
    judge(svc, table, {"id": "k1", "doc_id": stream[8]["id"], "relevant": True},
          {"id": "c1", "doc_id": stream[1]["id"], "relevant": True},
          {"id": "k2", "doc_id": stream[9]["id"], "relevant": False},
          {"id": "c2", "doc_id": stream[8]["id"], "relevant": False})
    judge(svc, table, {"id": "c3", "doc_id": stream[0]["id"], "relevant": False})
    assert table["grain"] is record  # no record rewritten for the corrections
    steps = [b.steps for b in jr.decode_journal(journal["grain"], "grain",
                                                svc.vectorizer.n_features)[1]]
    assert steps[-2:] == [[1, -1, 1, -1], [-1]]
    assert (svc.stats["judgments"], svc.stats["judgments_corrected"]) == (10, 3)
    live = svc.entry("grain", table)
    fresh = Service(training, n_shards=4, journal=dict(journal)).entry("grain", table)
    assert live is not None and fresh is not None
    assert orjson.dumps(fresh.profile.to_state()) == orjson.dumps(live.profile.to_state())
    assert list(fresh.labels.items()) == list(live.labels.items())
    assert fresh.judged == live.judged


def test_journal_steps_are_checked() -> None:
    import scipy.sparse as sp

    X = sp.csr_matrix(np.eye(3))
    piece = orjson.loads(jr.encode_batch(1, X, [True, False, True], ["a", "b", "c"], True,
                                         ["d", "e", "f"], [1, -1, 1]))
    assert piece["steps"] == [1, -1, 1]
    plain = orjson.loads(jr.encode_batch(1, X, [True] * 3, ["a", "b", "c"], True, None, [3]))
    assert "steps" not in plain  # one learning call: as before the steps
    for bad in ([2], [1, -2, 1], [0, 3], [True, 2], "3", []):
        with pytest.raises(jr.JournalError, match="steps"):
            jr.encode_batch(1, X, [True] * 3, ["a", "b", "c"], True, None, bad)  # type: ignore[arg-type]
        raw = jr.encode_journal("p", "e", [orjson.dumps({**piece, "steps": bad})])
        with pytest.raises(jr.JournalError, match="steps"):
            jr.decode_journal(raw, "p", 3)


def test_a_record_past_its_limit_forgets_the_oldest_keys_and_labels(
        training: TrainingSet, stream: list[dict[str, str]]) -> None:
    """The judgment keys (up to 200,000) and labels (50,000) grow with the judgments; a
    record they would push past the changelog's limit keeps the newest that fit."""
    ids = [f"judgment-with-a-long-id-{i:04d}-" + "x" * 40 for i in range(60)]
    # the record's size with every key and label (no limit), and theirs
    free, free_table = make(training, stream)
    for i, jid in enumerate(ids):
        judge(free, free_table, {"id": jid, "doc_id": stream[i]["id"], "relevant": i % 4 == 0})
    obj = orjson.loads(free_table["grain"])
    # (the keys' digests, 11 bytes of base64 each, give way first: half of them here)
    grown = len(orjson.dumps(obj["judged_digests"]))
    svc, table = make(training, stream)
    svc.max_record_bytes = len(free_table["grain"]) - grown // 2
    for i, jid in enumerate(ids):
        judge(svc, table, {"id": jid, "doc_id": stream[i]["id"], "relevant": i % 4 == 0})
    entry = svc.entry("grain", table)
    assert entry is not None
    assert len(table["grain"]) <= svc.max_record_bytes
    assert svc.stats["record_keys_trimmed"] > 0
    assert ids[0] not in entry.judged and ids[-1] in entry.judged
    # the newest keep working: a re-delivery is a duplicate, the other label a correction
    judge(svc, table, {"id": ids[-1], "doc_id": stream[59]["id"], "relevant": False})
    judge(svc, table, {"id": "fix", "doc_id": stream[59]["id"], "relevant": True})
    assert (svc.stats["judgments_duplicate"], svc.stats["judgments_corrected"]) == (1, 1)
    # a worker taking over reads the trimmed record and its journal
    fresh = Service(training, n_shards=4).entry("grain", table)
    assert fresh is not None and fresh.judged == entry.judged
    # tighter: every key gives way, then the oldest labels
    svc, table = make(training, stream)
    svc.max_record_bytes = len(free_table["grain"]) - grown - len(orjson.dumps(obj["labels"])) // 2
    for i, jid in enumerate(ids):
        judge(svc, table, {"id": jid, "doc_id": stream[i]["id"], "relevant": i % 4 == 0})
    entry = svc.entry("grain", table)
    assert entry is not None and len(table["grain"]) <= svc.max_record_bytes
    assert stream[0]["id"] not in entry.labels and stream[59]["id"] in entry.labels
    assert len(entry.judged) < 60
