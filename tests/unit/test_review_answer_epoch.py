"""``sift review answer`` follows the newest life of its review (fifty-second session):
requests and statuses of a review deleted and started again under the name are read in
any order, and only the newest life's are answered or stop it (docs/screening.md, "A
review's epoch")."""

from __future__ import annotations

from sift.commands.review import Unanswered
from sift.topics.records import new_profile_epoch
from sift.topics.review import JudgmentRequest


def req(doc_id: str, epoch: str) -> JudgmentRequest:
    return JudgmentRequest("wilson", doc_id, 1, 1, 0.0, epoch)


def test_a_newer_life_starts_the_answers_afresh_and_an_older_one_is_not_answered() -> None:
    old, new = new_profile_epoch(), new_profile_epoch()
    u = Unanswered()
    for d in ("a", "b"):
        assert u.due(req(d, old))
        u.add(d)
    assert len(u) == 2 and not u.due(req("a", old))
    assert u.due(req("a", new))  # the review started again: "a" is asked anew
    u.add("a")
    assert len(u) == 1
    assert not u.due(req("c", old)) and not u.current(old)  # the deleted one's
    assert u.current(new) and u.current("")  # the same life; a status with no epoch


def test_requests_without_epochs_are_answered_once_each() -> None:
    u = Unanswered()
    assert u.due(req("a", "")) and (u.add("a") is None) and not u.due(req("a", ""))
    assert u.due(req("b", ""))
