"""Findings 4, 8, 9 and 11 of the forty-fifth session's new-user walk of the README
(/tmp/s45/fresh/FINDINGS.md), with the Kafka calls replaced by fakes:

- 4: ``start_offsets`` asks again while the group coordinator is not available (a fresh
  or restarted broker), and never asks it for empty partitions;
- 11: a worker locks its ``SIFT_DATA_DIR``; a second one on it fails at start in one
  line, and a killed worker leaves no stale lock;
- 8: ``sift review status <standing profile>`` says it is a standing profile;
- 9: a refused deletion of a review that never existed is not "was deleted", and
  ``sift review rm --wait`` reports the worker's answer.

The same paths against a real broker: tests/integration/test_user_walk_s45_worker.py.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from kafka import TopicPartition
from kafka.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    GroupAuthorizationFailedError,
    NotCoordinatorError,
)

import sift.kafkaclient as kc
from sift.cli import main
from sift.errors import SiftError
from sift.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------- finding 4: start offsets
class _Consumer:
    def __init__(self, firsts: dict[TopicPartition, int], ends: dict[TopicPartition, int]) -> None:
        self.firsts, self.ends = firsts, ends

    def beginning_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.firsts[tp] for tp in tps}

    def end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.ends[tp] for tp in tps}

    def close(self) -> None:
        pass


class _Admin:
    """Answers ``list_group_offsets`` with the next of ``answers`` (an exception is raised)."""

    def __init__(self, answers: list[Any], calls: list[str]) -> None:
        self.answers, self.calls = answers, calls

    def list_group_offsets(self, specs: dict[str, None]) -> dict[str, Any]:
        self.calls.append("list_group_offsets")
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, BaseException):
            raise answer
        return {next(iter(specs)): answer}

    def close(self) -> None:
        pass


def _broker(monkeypatch: pytest.MonkeyPatch, answers: list[Any], firsts: dict[TopicPartition, int],
            ends: dict[TopicPartition, int]) -> tuple[list[str], list[float]]:
    calls: list[str] = []
    slept: list[float] = []
    monkeypatch.setattr(kc, "admin", lambda settings, timeout=30.0: _Admin(answers, calls))
    monkeypatch.setattr(kc, "consumer", lambda settings, *t, **kw: _Consumer(firsts, ends))
    monkeypatch.setattr(kc.time, "sleep", slept.append)
    return calls, slept


A0, A1 = TopicPartition("sift.documents", 0), TopicPartition("sift.documents", 1)
WANT = [("sift.documents", 0), ("sift.documents", 1)]


def test_start_offsets_ask_again_while_the_group_coordinator_is_not_there(
        monkeypatch: pytest.MonkeyPatch) -> None:
    answers = [CoordinatorNotAvailableError("no __consumer_offsets yet"),
               CoordinatorLoadInProgressError("loading"), NotCoordinatorError("moved"),
               {A0: SimpleNamespace(offset=7)}]
    calls, slept = _broker(monkeypatch, answers, {A0: 2, A1: 0}, {A0: 9, A1: 4})
    got = kc.start_offsets(Settings(), WANT)
    # the commit where there is one, the first offset where there is none
    assert got == {("sift.documents", 0): 7, ("sift.documents", 1): 0}
    assert calls == ["list_group_offsets"] * 4 and len(slept) == 3
    assert slept == sorted(slept) and all(0 < s <= kc.COORDINATOR_RETRY_SECONDS for s in slept)


def test_start_offsets_give_up_after_a_bounded_time_and_never_retry_a_final_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]

    def sleep(seconds: float) -> None:  # a clock that moves only when slept
        slept.append(seconds)
        now[0] += seconds

    calls, slept = _broker(monkeypatch, [CoordinatorNotAvailableError("still none")],
                           {A0: 0, A1: 0}, {A0: 3, A1: 3})
    monkeypatch.setattr(kc.time, "sleep", sleep)
    monkeypatch.setattr(kc.time, "monotonic", lambda: now[0])
    with pytest.raises(kc.KafkaClientError, match="CoordinatorNotAvailable"):
        kc.start_offsets(Settings(), WANT)
    # retried for the whole budget (a few seconds), and not longer
    assert sum(slept) == pytest.approx(kc.COORDINATOR_RETRY_SECONDS)
    assert 5.0 <= kc.COORDINATOR_RETRY_SECONDS <= 15.0 and len(calls) == len(slept) + 1
    # an error that does not go away by itself is reported at once
    calls.clear()
    slept.clear()
    _broker(monkeypatch, [GroupAuthorizationFailedError("denied")], {A0: 0, A1: 0},
            {A0: 3, A1: 3})
    with pytest.raises(kc.KafkaClientError, match="GroupAuthorizationFailed"):
        kc.start_offsets(Settings(), WANT)
    assert slept == []


def test_empty_partitions_start_at_their_end_without_asking_the_coordinator(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a new documents topic on a fresh broker: nothing to read back, so nothing to warn of
    calls, slept = _broker(monkeypatch, [CoordinatorNotAvailableError("none")],
                           {A0: 0, A1: 5}, {A0: 0, A1: 5})
    assert kc.start_offsets(Settings(), WANT) == {("sift.documents", 0): 0,
                                                  ("sift.documents", 1): 5}
    assert calls == [] and slept == []


def test_the_worker_says_nothing_of_a_read_back_when_the_documents_topic_is_empty(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from sift.commands.worker import restore_documents

    _broker(monkeypatch, [CoordinatorNotAvailableError("none")], {A0: 0, A1: 0}, {A0: 0, A1: 0})
    monkeypatch.setattr(kc, "partition_counts", lambda settings, names: dict.fromkeys(names, 2))
    service = SimpleNamespace(store=SimpleNamespace(capacity=100),
                              restore_recent=lambda docs: len(list(docs)))
    with caplog.at_level("INFO", logger="sift.worker"):
        restore_documents(Settings(), service)
    assert not [r for r in caplog.records if r.levelname == "WARNING"], caplog.text


# ----------------------------------------------------------------- finding 11: the data dir lock
def test_a_second_lock_on_a_data_dir_is_refused_in_one_line_naming_it(tmp_path: Path) -> None:
    from sift.commands.worker import lock_data_dir

    where = tmp_path / "w1"
    held = lock_data_dir(str(where))
    try:
        with pytest.raises(SiftError) as refused:
            lock_data_dir(str(where))
        text = str(refused.value)
        assert "\n" not in text and str(where) in text and "SIFT_DATA_DIR" in text
        assert f"pid {os.getpid()}" in text
    finally:
        held.release()
    lock_data_dir(str(where)).release()  # released: free again


_HOLDER = """
import sys, time
from sift.commands.worker import lock_data_dir
lock = lock_data_dir(sys.argv[1])
print("locked", flush=True)
time.sleep(600)
"""


def test_a_killed_worker_leaves_no_stale_lock(tmp_path: Path) -> None:
    from sift.commands.worker import lock_data_dir

    where = str(tmp_path / "w")
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, where], stdout=subprocess.PIPE,
                              text=True, cwd=ROOT)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(SiftError, match=f"pid {holder.pid}"):
            lock_data_dir(where)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
    lock_data_dir(where).release()  # the kernel dropped the dead process's lock


def test_sift_worker_on_a_locked_data_dir_exits_1_before_touching_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from sift.commands.worker import lock_data_dir

    where = tmp_path / "shared"
    held = lock_data_dir(str(where))
    before = sorted(p.name for p in where.iterdir())
    monkeypatch.setenv("SIFT_BROKER", "kafka://127.0.0.1:1")  # never reached
    monkeypatch.setenv("SIFT_DATA_DIR", str(where))
    try:
        assert main(["worker"]) == 1
    finally:
        held.release()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("sift worker: error: "), err
    assert str(where) in err and f"pid {os.getpid()}" in err and "SIFT_DATA_DIR" in err
    assert sorted(p.name for p in where.iterdir()) == before  # nothing written there


# ----------------------------------------------------------------- findings 8 and 9: reviews
def _spec(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj)


def _status(review: str, ts: float = 1.0) -> bytes:
    from sift.topics.review import ReviewStatus

    return orjson.dumps(ReviewStatus(
        review=review, documents=3, screened=1, found=0, pending=1, batches=1, r_hat=0.0,
        r_hat_var=0.0, recall_estimate=None, recall_lower=0.0, estimator="none",
        target_recall=0.95, stop=False, complete=False, ts=ts).to_obj())


@pytest.fixture
def topics(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[tuple[bytes | None, bytes | None]]]:
    """Fake topics (name -> [(key, value)]), read by ``read_all`` and by the offset
    functions of :mod:`sift.kafkaclient` (one partition each)."""
    data: dict[str, list[tuple[bytes | None, bytes | None]]] = {}

    def read_all(settings: Settings, topic: str, **kw: Any) -> list[Any]:
        return [(k, v, 0, i) for i, (k, v) in enumerate(data.get(topic, []))]

    monkeypatch.setattr(kc, "read_all", read_all)
    monkeypatch.setattr(kc, "ensure_topics", lambda *a, **kw: None)
    monkeypatch.setattr(kc, "partition_counts",
                        lambda settings, names: {n: 1 for n in names if n in data})
    monkeypatch.setattr(kc, "first_offsets",
                        lambda settings, parts: {tp: 0 for tp in parts})
    monkeypatch.setattr(kc, "end_offsets",
                        lambda settings, parts: {(t, p): len(data[t]) for t, p in parts},
                        raising=False)
    monkeypatch.setattr(kc, "read_offsets", lambda settings, ranges, timeout=10.0: [
        (t, p, i, *data[t][i]) for t, p, a, b in ranges for i in range(a, b)])
    return data


SETTINGS = Settings(app_id="sift")
TABLE = "sift-profile_to_state-changelog"


def test_a_refused_deletion_of_a_review_that_never_existed_is_not_a_deletion(
        topics: dict[str, list[tuple[bytes | None, bytes | None]]]) -> None:
    from sift.commands.review import status_of

    gone = {"profile": "nosuchreview", "mode": "review", "delete": True}
    topics["sift.profiles"] = [(b"nosuchreview", _spec(gone))]
    topics["sift.review-status"] = []
    with pytest.raises(SiftError) as err:
        status_of(SETTINGS, "nosuchreview")
    assert "was deleted" not in str(err.value) and "no status for review" in str(err.value)
    # a review that had a status, then was deleted, was deleted
    topics["sift.profiles"] = [
        (b"donners", _spec({"profile": "donners", "mode": "review", "query": "q"})),
        (b"donners", _spec({"profile": "donners", "mode": "review", "delete": True}))]
    topics["sift.review-status"] = [(b"donners", _status("donners"))]
    with pytest.raises(SiftError, match="review 'donners' was deleted"):
        status_of(SETTINGS, "donners")


def test_the_status_of_a_standing_profile_says_it_is_one(
        topics: dict[str, list[tuple[bytes | None, bytes | None]]]) -> None:
    from sift.commands.review import status_of

    topics["sift.profiles"] = [(b"trade", _spec({"profile": "trade", "query": "trade"}))]
    topics["sift.review-status"] = []
    topics[TABLE] = [(b"earn", b"{}"), (b"trade", b"{\"state\": {}}")]
    with pytest.raises(SiftError) as err:
        status_of(SETTINGS, "trade")
    text = str(err.value)
    assert "standing profile" in text and "sift review start trade" not in text, text
    # a profile deleted since (its tombstone last) is no standing profile any more
    topics[TABLE].append((b"trade", None))
    with pytest.raises(SiftError, match="sift review start trade"):
        status_of(SETTINGS, "trade")


class _Poller:
    """A consumer whose polls give ``batches`` (topic -> values) one after the other."""

    def __init__(self, batches: list[list[tuple[str, bytes | None, bytes | None]]]) -> None:
        self.batches = batches

    def poll(self, timeout_ms: int = 0) -> dict[TopicPartition, list[Any]]:
        if not self.batches:
            return {}
        out: dict[TopicPartition, list[Any]] = {}
        for topic, key, value in self.batches.pop(0):
            out.setdefault(TopicPartition(topic, 0), []).append(
                SimpleNamespace(key=key, value=value))
        return out


def _letter(reason: str, message: str, original: bytes) -> bytes:
    return orjson.dumps({"reason": reason, "message": message,
                         "original_b64": base64.b64encode(original).decode()})


def test_review_rm_wait_reports_the_workers_answer() -> None:
    from sift.commands.review import deletion_answer, review_changelog_topic

    sent = _spec({"profile": "x", "mode": "review", "delete": True})
    table = review_changelog_topic(SETTINGS)
    assert table == "sift-review_to_state-changelog"
    other = _spec({"profile": "y", "mode": "review", "delete": True})
    refused = _Poller([[("sift.dead-letters", None, _letter("unknown_review", "no y", other))],
                       [(table, b"x\x1fc0", None)],  # a chunk of another key: not the answer
                       [("sift.dead-letters", None, _letter(
                           "unknown_review", "cannot delete review 'x': no such review", sent))]])
    assert deletion_answer(refused, SETTINGS, "x", sent, 5.0) == (
        False, "unknown_review: cannot delete review 'x': no such review")
    deleted = _Poller([[(table, b"x", b"{...}")], [(table, b"x", None)]])
    assert deletion_answer(deleted, SETTINGS, "x", sent, 5.0) == (True, "deleted")
    with pytest.raises(SiftError, match=r"no answer for review 'x' within 0\.5 s"):
        deletion_answer(_Poller([]), SETTINGS, "x", sent, 0.5)


def test_review_rm_takes_wait(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["review", "rm", "--help"])
    assert "--wait S" in capsys.readouterr().out
