"""WebState without HTTP: de-duplication, ordering, bounds, reviews; logs and the CLI."""

from __future__ import annotations

import io
import logging

import orjson
import pytest

from sift.cli import main
from sift.observability import JsonFormatter, RateMeter
from sift.web.state import WebState
from tests.web.conftest import fill, review_fill, state_record


def decision(doc: str, profile: str = "earn", ts: float = 100.0) -> bytes:
    return orjson.dumps({"doc_id": doc, "profile": profile, "score": 0.4, "threshold": 0.2,
                         "model_version": 1, "ts": ts})


def judgment(doc: str, relevant: bool, profile: str = "earn") -> bytes:
    return orjson.dumps({"doc_id": doc, "profile": profile, "relevant": relevant})


def test_repeated_decisions_and_judgments_count_once() -> None:
    st = WebState()
    fill(st, n=2)
    st.on_decision(decision("d0"))  # at-least-once repeat
    st.on_judgment(judgment("d0", True), 1.0)
    st.on_judgment(judgment("d0", True), 1.5)  # the same verdict again counts once
    st.on_judgment(judgment("d1", False), 2.0)
    p = st.snapshot()["profiles"][0]
    assert (p["delivered"], p["judged"], p["relevant"], p["pending"]) == (2, 2, 1, 0)
    assert p["precision"] == 0.5
    # the other verdict corrects the first, as the workers take it (forty-seventh session)
    st.on_judgment(judgment("d0", False), 3.0)
    p = st.snapshot()["profiles"][0]
    assert (p["judged"], p["relevant"], p["precision"]) == (2, 0, 0.0)
    assert st.snapshot()["totals"]["decisions"] == 2


def test_judgment_read_before_its_decision_keeps_it_out_of_the_queue() -> None:
    st = WebState()
    st.on_judgment(judgment("x", True), 1.0)
    st.on_decision(decision("x"))
    p = st.snapshot()["profiles"][0]
    assert (p["delivered"], p["judged"], p["relevant"], p["pending"]) == (1, 1, 1, 0)


def test_title_of_a_document_read_after_its_decision() -> None:
    st = WebState()
    st.on_decision(decision("late"))
    st.on_documents(orjson.dumps({"id": "late", "title": "Late title", "text": "body"}), 1.0)
    assert st.pending("earn")[0]["title"] == "Late title"


def test_a_journal_that_continues_the_record_gives_the_newer_threshold() -> None:
    """Between two state records a profile's threshold and version come from its
    judgment journal; a journal of another epoch (an earlier profile of the name), one
    older than the record, or an unreadable one leaves the record's."""
    import numpy as np
    import scipy.sparse as sp

    from sift.agents.journal import encode_batch, encode_journal

    batch = encode_batch(1, sp.csr_matrix(np.array([[0.5]])), [True], ["j1"], True)
    st = WebState()
    st.on_profile_state("a", state_record(0.3, 5, 2, epoch="e1"), 10.0)
    st.on_profile_journal("a", encode_journal("a", "e1", [batch], {
        "threshold": 0.25, "model_version": 6, "n_judged": 3}), 12.0)
    row = st.snapshot()["profiles"][0]
    assert (row["threshold"], row["model_version"], row["learned_judgments"]) == (0.25, 6, 3)
    assert row["last_update"] == 12.0
    for other in (encode_journal("a", "e0", [batch], {"threshold": 0.9, "model_version": 9}),
                  encode_journal("a", "e1", [batch], {"threshold": 0.9, "model_version": 4}),
                  b"{broken"):
        st = WebState()
        st.on_profile_state("a", state_record(0.3, 5, 2, epoch="e1"), 10.0)
        st.on_profile_journal("a", other, 12.0)
        row = st.snapshot()["profiles"][0]
        assert (row["threshold"], row["model_version"]) == (0.3, 5)
    assert st.snapshot()["skipped"]["profile-journal"] == 1


def test_bad_records_are_counted_not_raised() -> None:
    st = WebState()
    for raw in (b"\xff", b"[1]", b"{}", None):
        st.on_documents(raw, 1.0)
        st.on_decision(raw)
        st.on_judgment(raw, 1.0)
        st.on_profile_spec(raw)
        st.on_review_status(raw, 1.0)
        st.on_dead_letter(raw, 1.0)
    snap = st.snapshot()
    assert snap["profiles"] == [] and snap["skipped"]["decisions"] == 4
    assert snap["totals"]["dead_letters"] == 4


def test_state_tombstone_and_deletion_spec_remove_a_profile() -> None:
    st = WebState()
    st.on_profile_state("a", state_record(0.3, 5, 2), 10.0)
    st.on_profile_state("b", state_record(0.1, 1, compress=True), 10.0)
    rows = {p["profile"]: p for p in st.snapshot()["profiles"]}
    assert rows["a"]["threshold"] == 0.3 and rows["a"]["model_version"] == 5
    assert rows["a"]["learned_judgments"] == 2 and rows["a"]["last_update"] == 10.0
    assert rows["b"]["threshold"] == 0.1 and rows["b"]["model"] == "rocchio"
    st.on_profile_state("a", None, 11.0)
    st.on_profile_spec(orjson.dumps({"profile": "b", "delete": True}))
    assert st.snapshot()["profiles"] == []


def _dead_spec(spec: bytes, reason: str = "bad_params", topic: str = "sift.profiles") -> bytes:
    import base64

    return orjson.dumps({"reason": reason, "message": "...", "topic": topic, "partition": 0,
                         "offset": 1, "original_b64": base64.b64encode(spec).decode(),
                         "ts": 1.0})


TOPICS = {"sift.profiles": "profiles", "sift.judgments": "judgments"}


@pytest.mark.parametrize("dead_letter_first", [False, True])
def test_a_rejected_spec_makes_no_profile(dead_letter_first: bool) -> None:
    # forty-first session: a spec the workers dead-lettered (bad_params) stayed on the
    # dashboard as a profile with no threshold, and the API took judgments for it
    st = WebState()
    bad = orjson.dumps({"profile": "badk", "query": "gold", "model": "knn", "params": {"k": -1}})
    good = orjson.dumps({"profile": "gold", "query": "gold"})
    events = [lambda: st.on_profile_spec(bad), lambda: st.on_profile_spec(good),
              lambda: st.on_dead_letter(_dead_spec(bad), 2.0, TOPICS)]
    for event in (events[2:] + events[:2]) if dead_letter_first else events:
        event()
    assert [p["profile"] for p in st.snapshot()["profiles"]] == ["gold"]
    assert not st.known("badk") and st.known("gold")
    assert st.snapshot()["dead_letters_by_reason"] == {"bad_params": 1}
    # the same spec sent again and taken this time: its state record brings the profile
    st.on_profile_state("badk", state_record(0.3, 1), 3.0)
    assert st.known("badk")


def test_a_rejected_replacement_leaves_the_profile_and_other_dead_letters_leave_all() -> None:
    st = WebState()
    st.on_profile_spec(orjson.dumps({"profile": "gold", "query": "gold"}))
    st.on_profile_state("gold", state_record(0.3, 1), 1.0)
    bad = orjson.dumps({"profile": "gold", "query": "gold", "params": {"nonsense": 1}})
    st.on_profile_spec(bad)
    st.on_dead_letter(_dead_spec(bad), 2.0, TOPICS)
    assert st.known("gold")
    # a judgment's dead letter, one from an unknown topic, one with bad base64: no change
    st.on_profile_spec(orjson.dumps({"profile": "tin", "query": "tin"}))
    tin = orjson.dumps({"profile": "tin", "query": "tin"})
    st.on_dead_letter(_dead_spec(tin, topic="sift.judgments"), 2.0, TOPICS)
    st.on_dead_letter(_dead_spec(tin, topic="other"), 2.0, TOPICS)
    st.on_dead_letter(orjson.dumps({"reason": "x", "topic": "sift.profiles",
                                    "original_b64": "%%%"}), 2.0, TOPICS)
    st.on_dead_letter(_dead_spec(tin), 2.0)  # without the topic names
    assert st.known("tin") and st.known("gold")


def test_a_name_only_judgments_use_is_not_a_profile() -> None:
    # forty-first session: a judgment for a profile that does not exist (the workers
    # dead-letter it as unknown_profile) put a "ghost" profile on the dashboard
    st = WebState()
    st.on_judgment(judgment("r1", True, profile="ghost"), 1.0)
    assert st.shown("ghost") is None and st.snapshot()["profiles"] == []
    assert 'profile="ghost"' not in st.metrics()
    st.on_decision(decision("r2", profile="ghost"))  # the workers made a decision: it is one
    assert [p["profile"] for p in st.snapshot()["profiles"]] == ["ghost"]


def test_bounded_pending_queue_and_document_cache() -> None:
    st = WebState(doc_capacity=5, pending_capacity=3)
    st.on_documents(orjson.dumps({"documents": [{"id": f"d{i}", "text": "t"}
                                                for i in range(10)]}), 1.0)
    assert len(st.docs) == 5
    for i in range(10):
        st.on_decision(decision(f"d{i}"))
    assert [it["doc_id"] for it in st.pending("earn")] == ["d7", "d8", "d9"]


def test_review_status() -> None:
    st = WebState()
    st.on_review_status(orjson.dumps({"review": "appenzeller", "screened": 400, "found": 38,
                                      "r_hat": 40.2, "recall": 0.945, "stop": False}), 5.0)
    st.on_review_status(orjson.dumps({"review": "appenzeller", "screened": 500, "found": 40,
                                      "r_hat": 40.5, "recall": 0.988, "stop": True}), 6.0)
    (r,) = st.snapshot()["reviews"]
    assert r["stop"] is True and r["r_hat"] == 40.5 and r["screened"] == 500
    assert 'sift_review_value{review="appenzeller",field="stop"} 1' in st.metrics()


def test_rates_use_event_time() -> None:
    m = RateMeter(window=10.0)
    m.add(0.0, 1000, now=100.0)  # an old backlog is not a spike
    m.add(95.0, 20, now=100.0)
    assert m.rate(now=100.0) == 2.0


def test_json_log_lines() -> None:
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("sift.test.json")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("judged %s", "d1", extra={"profile": "earn"})
        try:
            raise ValueError("boom")
        except ValueError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    lines = buf.getvalue().splitlines()
    assert len(lines) == 2
    first, second = (orjson.loads(line) for line in lines)
    assert first["message"] == "judged d1" and first["profile"] == "earn"
    assert first["level"] == "WARNING" and first["logger"] == "sift.test.json"
    assert "ValueError: boom" in second["exc"]


@pytest.mark.parametrize("argv", [["web", "--port", "70000"], ["web", "--port", "-1"]])
def test_cli_errors_are_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("sift web: error: ")


def test_cli_help_shows_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["web", "--help"])
    assert "example:" in capsys.readouterr().out


def test_review_status_as_the_service_publishes_it() -> None:
    from sift.topics.review import ReviewStatus

    fields = {f: 0 for f in ReviewStatus.__dataclass_fields__}
    fields.update(review="wilson", documents=900, screened=300, found=27, r_hat=30.0,
                  recall_estimate=0.9, recall_lower=0.8, estimator="bound", target_recall=0.95,
                  stop=False, complete=False, ts=7.0)
    status = ReviewStatus(**fields)  # type: ignore[arg-type]
    st = WebState()
    st.on_review_status(orjson.dumps(status.to_obj()), 8.0)
    (r,) = st.snapshot()["reviews"]
    assert (r["review"], r["found"], r["r_hat"], r["recall"], r["stop"]) == ("wilson", 27, 30.0, 0.9, False)


# -- reviews: requests to judge, and reviews kept apart from the profiles -------------------
def test_a_review_is_not_shown_as_a_profile_and_its_requests_await_judgment() -> None:
    state = WebState()
    # a judgment read before anything told the web about the review
    state.on_judgment(orjson.dumps({"doc_id": "r9", "profile": "wilson", "relevant": False}), 1.0)
    ids = review_fill(state)
    state.on_review_status(orjson.dumps({"review": "wilson", "screened": 1, "found": 0,
                                         "r_hat": 1.0, "recall_estimate": 0.0, "stop": False,
                                         "ts": 1.0}), 1.0)
    snap = state.snapshot()
    assert snap["profiles"] == []  # a review, not a standing profile
    assert [r["review"] for r in snap["reviews"]] == ["wilson"]
    assert snap["reviews"][0]["pending"] == 3
    assert state.is_review("wilson") and not state.known("wilson")
    items = state.pending("wilson")
    assert [it["doc_id"] for it in items] == ids
    assert items[0]["review"] is True and (items[0]["batch"], items[0]["rank"]) == (1, 1)
    assert items[0]["title"] == "Abstract r0" and items[0]["snippet"] == "copper chelation r0"
    # a judgment read from the topic takes a request out of the queue, once
    state.on_judgment(orjson.dumps({"doc_id": "r1", "profile": "wilson", "relevant": True}), 2.0)
    state.on_judgment(orjson.dumps({"doc_id": "r1", "profile": "wilson", "relevant": False}), 2.0)
    assert [it["doc_id"] for it in state.pending("wilson")] == ["r0", "r2"]
    assert state.is_judged("wilson", "r1") and state.is_judged("wilson", "r9")
    # a request asked again (a re-sent spec) or already judged does not come back
    for doc_id in ("r1", "r0"):
        state.on_request(orjson.dumps({"review": "wilson", "doc_id": doc_id, "batch": 1,
                                       "rank": 1}), 3.0)
    assert [it["doc_id"] for it in state.pending("wilson")] == ["r0", "r2"]
    assert state.snapshot()["reviews"][0]["pending"] == 2
    # deleting the review forgets it, and what is read of it later does not bring it back
    state.on_profile_spec(orjson.dumps({"profile": "wilson", "mode": "review", "delete": True}))
    assert not state.is_review("wilson") and state.snapshot()["reviews"] == []
    assert state.pending("wilson") == []
    state.on_request(orjson.dumps({"review": "wilson", "doc_id": "r5", "batch": 2,
                                   "rank": 1}), 4.0)
    state.on_review_status(orjson.dumps({"review": "wilson", "screened": 2, "found": 1,
                                         "r_hat": 1.0, "recall_estimate": 1.0, "stop": True,
                                         "ts": 4.0}), 4.0)
    state.on_judgment(orjson.dumps({"doc_id": "r5", "profile": "wilson", "relevant": True}), 4.0)
    snap = state.snapshot()
    assert snap["reviews"] == [] and snap["profiles"] == [] and state.skipped["deleted-review"] == 3
    # a new spec of the name makes it a review again
    review_fill(state, "wilson", 1)
    assert state.is_review("wilson") and [it["doc_id"] for it in state.pending("wilson")] == ["r0"]


def test_requests_for_a_standing_profiles_name_and_bad_requests_are_skipped() -> None:
    state = WebState()
    fill(state, "earn")
    state.on_request(orjson.dumps({"review": "earn", "doc_id": "x", "batch": 1, "rank": 1}), 1.0)
    state.on_request(b"{not json", 1.0)
    state.on_request(orjson.dumps({"review": "w", "doc_id": "x", "batch": "1", "rank": 1}), 1.0)
    assert state.skipped["requests"] == 3 and not state.is_review("earn")
    assert [p["profile"] for p in state.snapshot()["profiles"]] == ["earn"]


def test_a_review_request_shows_its_document_after_the_recent_ones_moved_on() -> None:
    """A review may ask for any document of its collection: documents naming a review keep
    their title and snippet apart from the recent-documents cache."""
    state = WebState(doc_capacity=5)
    review_fill(state, "wilson", 0)
    state.on_documents(orjson.dumps({"documents": [
        {"id": f"c{i}", "title": f"Record {i}", "text": f"abstract {i} " * 80,
         "metadata": {"review": "wilson"}} for i in range(50)]}), 1.0)
    assert "c0" not in state.docs  # the recent cache holds the last five
    state.on_request(orjson.dumps({"review": "wilson", "doc_id": "c0", "batch": 1,
                                   "rank": 1}), 2.0)
    (item,) = state.pending("wilson")
    assert item["title"] == "Record 0" and item["snippet"].startswith("abstract 0 abstract 0")
    assert len(item["snippet"]) <= 321 and state.document_text("c0") is None


def test_an_unreadable_lag_is_unknown_not_the_last_value() -> None:
    """With the broker down the lag reading fails: the dashboard showed the last value
    read (0, as if caught up); now it is unknown, with the reason, and has no metric."""
    from sift.web.pages import dashboard

    st = WebState()
    st.set_lag({"documents": 0, "judgments": 3})
    snap = st.snapshot()
    assert (snap["lag_total"], snap["lag_error"]) == (3, None)
    st.lag_unavailable("KafkaConnectionError: Unable to bootstrap")
    snap = st.snapshot()
    assert snap["lag"] == {} and snap["lag_total"] is None
    assert snap["lag_error"] == "KafkaConnectionError: Unable to bootstrap"
    assert "unknown: KafkaConnectionError: Unable to bootstrap" in dashboard(snap)
    assert "sift_consumer_lag{" not in st.metrics()
    st.set_lag({"documents": 5})
    assert st.snapshot()["lag_error"] is None and st.snapshot()["lag_total"] == 5


def test_a_partition_without_a_known_leader_gives_a_readable_lag_error() -> None:
    """kafka-python's ``end_offsets`` raises a bare ``KeyError(TopicPartition(...))`` for a
    partition whose leader it does not know (a broker or worker restarting): the
    dashboard's ``lag_error`` showed only the partition's repr."""
    from kafka.structs import TopicPartition

    from sift.settings import Settings
    from sift.web.feed import KafkaFeed

    class NoLeader:
        def end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
            raise KeyError(tps[0])

    feed = KafkaFeed(Settings(), WebState())
    feed._lag_consumer = NoLeader()
    with pytest.raises(RuntimeError, match=r"^no end offset for TopicPartition\(topic='sift.documents', "
                                           r"partition=0\): its leader is not known"):
        feed._end_offsets([TopicPartition("sift.documents", 0)])


# -- operations audit, forty-fourth session: review specs the workers dead-letter ------------
def _review(name: str, query: str, **extra: object) -> bytes:
    return orjson.dumps({"profile": name, "mode": "review", "query": query, **extra})


def _status(name: str) -> bytes:
    return orjson.dumps({"review": name, "screened": 0, "found": 0, "r_hat": 0.0,
                         "recall_estimate": None, "stop": False, "ts": 1.0})


@pytest.mark.parametrize("dead_letter_first", [False, True])
def test_a_rejected_review_spec_makes_no_review(dead_letter_first: bool) -> None:
    """A review spec the workers dead-lettered (bad_params) made the name a review: its
    page answered 200 and the API published judgments the workers dead-lettered."""
    st = WebState()
    bad = _review("rq4", "a b", params={"target_recall": "0.9"})
    events = [lambda: st.on_profile_spec(bad), lambda: st.on_dead_letter(_dead_spec(bad), 2.0, TOPICS)]
    for event in reversed(events) if dead_letter_first else events:
        event()
    assert not st.is_review("rq4") and "rq4" not in st.review_queues
    assert st.snapshot()["reviews"] == [] and st.pending("rq4") == []
    # sent again and taken this time: its status makes it a review
    st.on_profile_spec(_review("rq4", "a b"))
    st.on_review_status(_status("rq4"), 3.0)
    assert st.is_review("rq4") and st.review_summary("rq4")["query"] == "a b"


@pytest.mark.parametrize("order", ["spec-status-bad-dl", "spec-bad-status-dl", "spec-bad-dl-status",
                                   "dl-spec-bad-status"])
def test_a_rejected_spec_of_a_running_review_keeps_its_query(order: str) -> None:
    """``review_exists``: a second spec of a running review with another query; the web
    showed the rejected query as the review's."""
    st = WebState()
    bad = _review("don1", "something else")
    steps = {"spec": lambda: st.on_profile_spec(_review("don1", "emicizumab")),
             "status": lambda: st.on_review_status(_status("don1"), 1.0),
             "bad": lambda: st.on_profile_spec(bad),
             "dl": lambda: st.on_dead_letter(_dead_spec(bad, "review_exists"), 2.0, TOPICS)}
    for step in order.split("-"):
        steps[step]()
    assert st.is_review("don1")
    assert st.review_summary("don1")["query"] == "emicizumab"
    assert [r["query"] for r in st.snapshot()["reviews"]] == ["emicizumab"]


def test_a_rejected_spec_of_a_review_with_requests_keeps_the_review() -> None:
    """Requests read (from a review whose spec was not read, ``--latest``) make it a review
    whatever happens to a later spec of the name."""
    st = WebState()
    st.on_request(orjson.dumps({"review": "w", "doc_id": "x", "batch": 1, "rank": 1}), 1.0)
    bad = _review("w", "other")
    st.on_profile_spec(bad)
    assert st.review_summary("w")["query"] == "other"
    st.on_dead_letter(_dead_spec(bad, "review_exists"), 2.0, TOPICS)
    assert st.is_review("w") and st.review_summary("w")["query"] == ""
    assert [it["doc_id"] for it in st.pending("w")] == ["x"]
