"""Operations audit, forty-fourth session: how the profiles topic's two kinds of spec
share its names and its ``mode`` field (findings 1 and 2 of the audit).

1. A standing profile spec whose name is a live review is dead-lettered
   (``review_exists``), as a review spec taking a standing profile's name is
   (``profile_exists``): the name stays the review's, its judgments reach it, and the
   worker goes on.
2. Any spec with a ``mode`` field is a review spec: a ``mode`` other than ``"review"`` is
   dead-lettered (``bad_mode``) instead of becoming a standing profile that delivers.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import orjson
import pytest

from sift.agents.review import ReviewService, chunk_key
from sift.agents.service import InputMessage, Service, TrainingSet, shard_of
from sift.topics.errors import RecordError
from sift.topics.review import ReviewSpec, is_review_obj
from tests.agents.offline import agent, offline_worker, training_set

P = 2
REVIEW = "don1"
TAKEN = "a standing profile needs another name: review 'don1' is running"


def msg(obj: object, name: str, topic: str = "profiles", offset: int = 0) -> InputMessage:
    value = obj if isinstance(obj, bytes) else orjson.dumps(obj)
    return InputMessage(value, topic, shard_of(name, P), offset, name.encode())


def review_spec(name: str = REVIEW) -> dict[str, Any]:
    return {"profile": name, "mode": "review", "query": "emicizumab hemophilia",
            "params": {"draws": 10, "n_top": 5, "min_batches": 3, "n_negatives": 30}}


@pytest.fixture
def training() -> TrainingSet:
    return training_set()


@pytest.fixture
def worker(tmp_path: Any) -> Any:
    return offline_worker(str(tmp_path), P)


def put_specs(worker: Any, *batches: list[dict[str, Any]]) -> None:
    """Specs through the worker's specs agent, each on its name's partition, batch after
    batch. The tests' names are all of one partition: the test wrapper numbers the
    messages of every partition from one counter, and a gap in a partition's offsets
    sends the worker reading them back from the (absent) broker."""
    async def run() -> None:
        async with agent(worker, "apply_specs").test_context() as a:
            for batch in batches:
                for s in batch:
                    name = str(s["profile"])
                    assert shard_of(name, P) == 1
                    await a.put(orjson.dumps(s), key=name.encode(), partition=1, wait=False)
                await asyncio.sleep(0.5)

    asyncio.run(run())


def dead(worker: Any) -> list[tuple[str, str]]:
    return [(c.kwargs["key"].decode(), orjson.loads(c.kwargs["value"])["message"])
            for c in worker.topics["dead-letters"].send.await_args_list]


# -- 1. a standing profile may not take a review's name ----------------------------------
def test_a_standing_spec_taking_a_reviews_name_is_dead_lettered(training: TrainingSet) -> None:
    service = Service(training, n_shards=P)
    service.reviews = {REVIEW}
    table: dict[str, bytes] = {}
    out = service.apply_specs([msg({"profile": REVIEW, "query": "emicizumab hemophilia"},
                                   REVIEW)], table)
    assert [(d.reason, d.message) for d in out.dead_letters] == [("review_exists", TAKEN)]
    assert table == {} and not out.changed and service.stats["profiles_created"] == 0
    assert service.stats["dead_letters.review_exists"] == 1
    # another name is a standing profile as before
    out = service.apply_specs([msg({"profile": "wheat", "query": "wheat"}, "wheat")], table)
    assert not out.dead_letters and "wheat" in table


def test_a_standing_profile_made_before_the_review_can_still_be_deleted(
        training: TrainingSet) -> None:
    """A name both kinds hold (made before the check) is not locked: the standing
    profile can be deleted, not replaced."""
    service = Service(training, n_shards=P)
    table: dict[str, bytes] = {}
    service.apply_specs([msg({"profile": REVIEW, "query": "emicizumab"}, REVIEW)], table)
    assert REVIEW in table
    service.reviews = {REVIEW}
    again = service.apply_specs([msg({"profile": REVIEW, "query": "other"}, REVIEW)], table)
    assert [d.reason for d in again.dead_letters] == ["review_exists"]
    gone = service.apply_specs([msg({"profile": REVIEW, "delete": True}, REVIEW)], table)
    assert not gone.dead_letters and REVIEW not in table


def test_the_review_names_are_the_review_tables_names_not_its_chunks() -> None:
    from sift.agents.review import ReviewNames

    table = {REVIEW: b"record", chunk_key(REVIEW, 0): b"chunk"}
    names = ReviewNames(table)
    assert REVIEW in names and chunk_key(REVIEW, 0) not in names and "other" not in names
    assert 5 not in names


def test_the_worker_refuses_a_standing_profile_named_as_a_running_review(worker: Any) -> None:
    """Through the specs agent: the review first, then a standing spec of its name (a
    later batch): one dead letter, no standing profile, the worker goes on (a spec of
    another name after them is applied), and a judgment of the name still goes to the
    review. In one batch, the standing spec first: the batch is applied in partition
    order (since the fiftieth session, docs/reliability.md item 80; the review specs of a
    batch went first before, so the outcome depended on how the messages were batched),
    so the standing profile is made and the review refused, as in two batches."""
    put_specs(worker, [review_spec()], [{"profile": REVIEW, "query": "emicizumab hemophilia"}],
              [{"profile": "don3", "query": "emicizumab"}, review_spec("don3"),
               {"profile": "oil", "query": "crude oil", "positives": ["t2"]}])
    assert worker.reviews.service.stats["reviews_created"] == 1
    assert dead(worker) == [("review_exists", TAKEN),
                            ("profile_exists",
                             "'don3' is a standing profile; a review needs another name")]
    assert worker.service.stats["profiles_created"] == 2  # don3 and oil
    assert REVIEW not in worker.table and "don3" in worker.table and "oil" in worker.table
    assert worker.stats()["stats"]["dead_letters.review_exists"] == 1
    assert worker.stats()["stats"]["dead_letters.profile_exists"] == 1
    judgment = msg({"doc_id": "x", "profile": REVIEW, "relevant": True}, REVIEW, "judgments")
    assert worker.reviews.service.claims(judgment, worker.reviews.table)


# -- 2. a spec with a mode is a review spec ----------------------------------------------
MODES = [1, "Review", "reveiw", "profile", "standing", None, "", ["review"], True]


@pytest.mark.parametrize("mode", MODES)
def test_any_mode_makes_a_review_spec_and_only_review_is_one(mode: Any) -> None:
    obj = {"profile": "rq7", "mode": mode, "query": "a b"}
    assert is_review_obj(obj)
    assert ReviewService.is_review_spec(msg(obj, "rq7"))
    with pytest.raises(RecordError) as err:
        ReviewSpec.from_obj(obj)
    assert err.value.reason == "bad_mode"
    assert "a standing profile's spec has no 'mode'" in str(err.value)
    assert not is_review_obj({"profile": "rq7", "query": "a b"})


def test_the_worker_dead_letters_a_wrong_mode_and_makes_no_profile(worker: Any) -> None:
    names = [n for n in (f"rq{i}" for i in range(40)) if shard_of(n, P) == 1][:len(MODES)]
    specs = [{"profile": n, "mode": m, "query": "a b"} for n, m in zip(names, MODES, strict=True)]
    put_specs(worker, specs[:5], specs[5:])
    assert [r for r, _ in dead(worker)] == ["bad_mode"] * len(MODES)
    assert worker.service.stats["profiles_created"] == 0
    assert not any(s["profile"] in worker.table for s in specs)
    assert worker.reviews.service.stats["reviews_created"] == 0
    assert worker.stats()["stats"]["dead_letters.bad_mode"] == len(MODES)


def test_bad_lines_of_the_training_corpus_are_counted_and_said(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The corpus is read skipping bad lines (a corpus of good documents and a few
    broken ones still gives the IDF), but they were skipped without a word: now the
    count and the first bad line are logged (forty-fourth session)."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "a", "text": "wheat grain"}\n{"id": "b"}\nnot json\n'
                      '{"id": "c", "text": "oil price"}\n')
    with caplog.at_level(logging.WARNING, logger="sift.worker"):
        training = TrainingSet.load(corpus)
    assert sorted(training.ids) == ["a", "c"]
    (message,) = [r.getMessage() for r in caplog.records]
    assert message.startswith(f"training corpus {corpus}: 2 bad lines skipped (the first bad "
                              f"line: {corpus}:2: ") and "text" in message, message
