"""Review state read back from the review table is validated; a corrupt record is refused
with a one-line reason (the review is skipped and counted), or, when accepted, the
review still takes documents, judgments and computes its status (no broker: the
service's table path, as in ``tests/agents/test_review.py``).

The records are real ones (``encode_review_record`` of reviews with documents, judgments
and published statuses), corrupted field by field, as ``test_state_safety`` does for the
standing profiles.

Judgments here are of requested documents only. Unrequested judgments drawn again in a
pending batch once made ``Review.estimate_ht`` raise on good states too; that is fixed
and tested in ``tests/unit/test_screening_ht.py`` (only completed batches' draws are
sample units).
"""

from __future__ import annotations

import base64
import logging
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sift.agents.review import (
    CHUNK_SEPARATOR,
    REVIEW_DOCUMENTS_TOPIC,
    ReviewService,
    decode_review_record,
    gold_reviewer,
    review_record_obj,
    status_of,
)
from sift.agents.service import InputMessage
from sift.filters.screening.errors import ScreeningError
from sift.topics.review import ReviewDocuments, ReviewStatus, encode_review
from tests.reliability.records import ODD_LITERALS, arrays, paths, replaced, with_literal

pytestmark = pytest.mark.reliability

#: Two reviews: sampling from the first batch (bound rule, HH), and the greedy warm-up
#: with the Horvitz-Thompson rule (batches without draws, then with).
REVIEWS = {
    "rev": {"draws": 6, "n_top": 3, "min_batches": 2, "n_negatives": 10,
            "warmup_precision": 0.0, "random_state": 0},
    "revht": {"draws": 6, "n_top": 4, "min_batches": 2, "n_negatives": 10,
              "estimator": "ht", "warmup_precision": 0.9, "random_state": 1},
}
TOPIC = "wilson disease copper therapy"


def msg(value: bytes, topic: str) -> InputMessage:
    return InputMessage(value, topic, 0, 0)


def documents(name: str, ids: list[str], texts: list[str]) -> InputMessage:
    return msg(encode_review(ReviewDocuments(name, tuple(ids), tuple(texts))),
               REVIEW_DOCUMENTS_TOPIC)


def judgment(name: str, doc_id: str, relevant: bool, key: str | None = None) -> InputMessage:
    return msg(orjson.dumps({"id": key or f"{name}/{doc_id}", "doc_id": doc_id,
                             "profile": name, "relevant": relevant}), "judgments")


def collection(n: int, start: int = 0) -> tuple[list[str], list[str], dict[str, bool]]:
    rng = np.random.default_rng(start)
    words = [f"w{i}" for i in range(80)]
    ids, texts, gold = [], [], {}
    for i in range(start, start + n):
        rel = i % 5 == 0
        text = " ".join(rng.choice(words, 8)) + (f" {TOPIC} trial" if rel else "")
        ids.append(f"d{i}")
        texts.append(text)
        gold[f"d{i}"] = rel
    return ids, texts, gold


def finite_status(s: ReviewStatus) -> None:
    for v in (s.r_hat, s.r_hat_var, s.recall_lower, s.target_recall):
        assert isinstance(v, float) and math.isfinite(v), s
    # null while no sampling batch backs an estimate (docs/screening.md)
    est = s.recall_estimate
    assert est is None or (isinstance(est, float) and math.isfinite(est)), s
    for v in (s.documents, s.screened, s.found, s.pending, s.batches):
        assert isinstance(v, int) and v >= 0, s


@pytest.fixture(scope="module")
def world() -> dict[str, bytes]:
    """A table with two reviews: documents, two rounds judged, one half judged (pending),
    documents that joined after the first round, statuses published."""
    service = ReviewService(n_shards=1)
    table: dict[str, bytes] = {}
    for name, params in REVIEWS.items():
        spec = {"profile": name, "mode": "review", "query": TOPIC, "params": params}
        out = service.apply_specs([msg(orjson.dumps(spec), "profiles")], table)
        assert not out.dead_letters and out.statuses
        ids, texts, gold = collection(40)
        out = service.add_documents([documents(name, ids, texts)], table)
        requests = out.requests
        statuses = list(out.statuses)
        answer = gold_reviewer(gold)
        for rnd in range(4):
            assert requests, (name, rnd)
            if rnd == 1:  # documents join a running review
                more_ids, more_texts, more_gold = collection(10, start=40)
                gold.update(more_gold)
                out = service.add_documents([documents(name, more_ids, more_texts)], table)
                statuses.extend(out.statuses)
            take = requests if rnd < 3 else requests[: max(1, len(requests) // 2)]
            if rnd == 3 and len(requests) == 1:
                break
            out = service.apply_judgments(
                [msg(orjson.dumps(answer(r)), "judgments") for r in take], table)
            assert not out.dead_letters
            statuses.extend(out.statuses)
            requests = out.requests or [r for r in requests if r not in take]
        assert statuses
        for s in statuses:
            finite_status(s)
        review = decode_review_record(table[name], name, table).review
        assert review.pending_ and len(review.batches_) >= 3 and review.epoch_start_ > 0
        assert review.screened > 0 and review._scores is not None
        assert any(b["b"] > 0 for b in review.batches_)
        if review.warmup_precision > 0:
            assert review.batches_[0]["b"] == 0
    return table


def chunks_of(world: dict[str, bytes], name: str) -> dict[str, bytes]:
    """The chunk records of review ``name``'s texts in ``world``."""
    return {k: v for k, v in world.items() if k.startswith(name + CHUNK_SEPARATOR)}


def check_survives(world: dict[str, bytes], name: str, corrupt: bytes,
                   chunks: dict[str, bytes] | None = None) -> bool:
    """Put ``corrupt`` in place of review ``name`` (and ``chunks`` in place of its text
    chunks, if given) and drive a fresh service over it.

    Returns whether the record was accepted. Refused: a one-line reason, counted once,
    the review's documents and judgments dead-lettered as for an unknown review.
    Accepted: a new document, judgments and the status work, with finite numbers, and
    the state written back loads again.
    """
    try:
        decode_review_record(corrupt, name, world if chunks is None else chunks)
        accepted = True
    except ScreeningError as exc:
        assert str(exc) and "\n" not in str(exc), str(exc)
        accepted = False
    svc = ReviewService(n_shards=1)
    table = {**(chunks_of(world, name) if chunks is None else chunks), name: corrupt}
    out = svc.add_documents([documents(name, ["new-doc"], [f"{TOPIC} new"])], table)
    if not accepted:
        assert [d.reason for d in out.dead_letters] == ["unknown_review"]
        out = svc.apply_judgments([judgment(name, "d0", True)], table)
        assert [d.reason for d in out.dead_letters] == ["unknown_review"]
        assert svc.stats["review_bad_state"] == 1  # counted once, though read twice
        return False
    assert not out.dead_letters, out.dead_letters
    statuses = list(out.statuses)
    entry = svc.entry(name, table)
    assert entry is not None
    review = entry.review
    # requested documents only: a judgment of a document never requested that is drawn
    # later breaks the HT estimate of a good state too (see the module's docstring)
    judge = review.pending_[:3]
    out = svc.apply_judgments([judgment(name, d, i % 2 == 0, key=f"x{i}")
                               for i, d in enumerate(judge)], table)
    assert not out.dead_letters, out.dead_letters
    statuses.extend(out.statuses)
    entry = svc.entry(name, table)
    assert entry is not None
    statuses.append(status_of(name, entry.review))
    for s in statuses:
        finite_status(s)
    for est in (entry.review.estimate_ht(), entry.review.estimate_hh()):
        assert math.isfinite(est.r_hat) and math.isfinite(est.var)
    entry.review.should_stop()
    decode_review_record(table[name], name, table)  # what was written back loads again
    return True


def test_a_bad_record_is_reported_once_per_value(world: dict[str, bytes],
                                                caplog: pytest.LogCaptureFixture) -> None:
    svc = ReviewService(n_shards=1)
    table = {"rev": b"\x00garbage"}
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            assert svc.entry("rev", table) is None
    hits = [r.getMessage() for r in caplog.records if "'rev'" in r.getMessage()]
    assert len(hits) == 1 and "\n" not in hits[0]
    assert svc.stats["review_bad_state"] == 1
    table["rev"] = b"\x00other garbage"  # another bad value: reported again
    assert svc.entry("rev", table) is None
    assert svc.stats["review_bad_state"] == 2
    table.update(chunks_of(world, "rev"))
    table["rev"] = world["rev"]  # a good one: taken
    assert svc.entry("rev", table) is not None


@pytest.mark.parametrize("name", sorted(REVIEWS))
def test_good_records_are_accepted(world: dict[str, bytes], name: str) -> None:
    assert check_survives(world, name, world[name])


# ----------------------------------------------------------------- fixed corruptions
def arr(values: Any, dtype: str) -> dict[str, Any]:
    a = np.asarray(values, dtype=dtype)
    return {"dtype": a.dtype.str, "shape": list(a.shape),
            "b64": base64.b64encode(a.tobytes()).decode()}


def unarr(obj: dict[str, Any]) -> np.ndarray[Any, Any]:
    return np.frombuffer(base64.b64decode(obj["b64"]), dtype=obj["dtype"]).reshape(obj["shape"])


def with_state(r: dict[str, Any], **fields: Any) -> bytes:
    return orjson.dumps({**r, "state": {**r["state"], **fields}})


def with_texts(r: dict[str, Any], **fields: Any) -> bytes:
    return orjson.dumps({**r, "texts": {**r["texts"], **fields}})


def with_batch(r: dict[str, Any], i: int, **fields: Any) -> bytes:
    batches = list(r["state"]["batches"])
    batches[i] = {**batches[i], **fields}
    return with_state(r, batches=batches)


def changed(obj: dict[str, Any], f: Callable[[np.ndarray[Any, Any]], Any]) -> dict[str, Any]:
    a = unarr(obj).copy()
    out = f(a)
    return arr(a if out is None else out, obj["dtype"])


def set_at(i: int, v: Any) -> Callable[[np.ndarray[Any, Any]], None]:
    def f(a: np.ndarray[Any, Any]) -> None:
        a[i] = v
    return f


def first_sampling_batch(r: dict[str, Any]) -> int:
    return next(i for i, b in enumerate(r["state"]["batches"]) if b["b"] > 0)


def label_index(r: dict[str, Any], judged: bool) -> int:
    labels = unarr(r["state"]["labels"])
    return int(np.flatnonzero(labels >= 0 if judged else labels < 0)[0])


PROFILE_STATE = {"version": 1, "kind": "rocchio", "n_features": 16, "threshold": 0.5}

CORRUPTIONS: dict[str, Callable[[dict[str, Any]], bytes]] = {
    "random bytes": lambda r: b"\x00\xffgarbage",
    "empty": lambda r: b"",
    "truncated": lambda r: orjson.dumps(r)[: len(orjson.dumps(r)) // 2],
    "not an object": lambda r: b"[1, 2, 3]",
    "record format 3": lambda r: orjson.dumps({**r, "format": 3}),
    "state version 2": lambda r: with_state(r, version=2),
    "state version string": lambda r: with_state(r, version="1"),
    "no state": lambda r: orjson.dumps({k: v for k, v in r.items() if k != "state"}),
    "state not an object": lambda r: orjson.dumps({**r, "state": [1]}),
    "a standing profile's record": lambda r: orjson.dumps(
        {"format": 1, "spec": {"profile": r["spec"]["profile"], "query": "q"},
         "state": PROFILE_STATE, "judged": []}),
    "a standing profile's state": lambda r: orjson.dumps({**r, "state": PROFILE_STATE}),
    "spec not a review": lambda r: orjson.dumps({**r, "spec": {**r["spec"], "mode": "x"}}),
    "judged not a list": lambda r: orjson.dumps({**r, "judged": 5}),
    # params
    "params not an object": lambda r: with_state(r, params=[1]),
    "unknown param": lambda r: with_state(r, params={**r["state"]["params"], "zz": 1}),
    "param draws negative": lambda r: with_state(r, params={**r["state"]["params"], "draws": -1}),
    "param draws huge": lambda r: with_state(r, params={**r["state"]["params"], "draws": 2**53}),
    "C tiny": lambda r: with_state(r, params={**r["state"]["params"], "C": 1e-200}),
    "exponent changed": lambda r: with_state(r, params={**r["state"]["params"], "exponent": 10.0}),
    "random_state a string": lambda r: with_state(
        r, params={**r["state"]["params"], "random_state": "x"}),
    "random_state a float": lambda r: with_state(
        r, params={**r["state"]["params"], "random_state": 1.5}),
    # ids and texts
    "ids a string": lambda r: with_state(r, ids="abc"),
    "ids duplicated": lambda r: with_state(r, ids=[r["state"]["ids"][1], *r["state"]["ids"][1:]]),
    "id not a string": lambda r: with_state(r, ids=[7, *r["state"]["ids"][1:]]),
    "id empty": lambda r: with_state(r, ids=["", *r["state"]["ids"][1:]]),
    # where the texts are (the chunks themselves: test_corrupt_chunk_is_refused)
    "texts in the state too": lambda r: with_state(r, texts=["x"] * len(r["state"]["ids"])),
    "texts not an object": lambda r: orjson.dumps({**r, "texts": 5}),
    "texts missing": lambda r: orjson.dumps({k: v for k, v in r.items() if k != "texts"}),
    "texts count short": lambda r: with_texts(r, count=r["texts"]["count"] - 1),
    "texts count long": lambda r: with_texts(r, count=r["texts"]["count"] + 1),
    "texts count a float": lambda r: with_texts(r, count=float(r["texts"]["count"])),
    "texts epoch another's": lambda r: with_texts(r, epoch="0" * 16),
    "texts epoch not a string": lambda r: with_texts(r, epoch=7),
    "texts in no chunk": lambda r: with_texts(r, starts=[]),
    "texts chunk not from 0": lambda r: with_texts(r, starts=[1]),
    "texts chunk past the count": lambda r: with_texts(r, starts=[0, r["texts"]["count"]]),
    "texts chunk not stored": lambda r: with_texts(r, starts=[0, 1]),
    "texts starts not a list": lambda r: with_texts(r, starts={"0": 0}),
    "texts of a format-1 record": lambda r: orjson.dumps(
        {**r, "format": 1, "state": {**r["state"], "texts": None}}),
    # labels
    "label 2": lambda r: with_state(r, labels=changed(r["state"]["labels"], set_at(0, 2))),
    "label -5": lambda r: with_state(r, labels=changed(r["state"]["labels"], set_at(0, -5))),
    "labels float": lambda r: with_state(r, labels=arr(unarr(r["state"]["labels"]), "<f8")),
    "labels bool": lambda r: with_state(r, labels=arr(unarr(r["state"]["labels"]) > 0, "|b1")),
    "labels 2-d": lambda r: with_state(
        r, labels=arr(unarr(r["state"]["labels"]).reshape(-1, 1), "<i8")),
    "judged label unset": lambda r: with_state(
        r, labels=changed(r["state"]["labels"], set_at(label_index(r, True), -1))),
    "unjudged label set": lambda r: with_state(
        r, labels=changed(r["state"]["labels"], set_at(label_index(r, False), 1))),
    # order and pending
    "order unknown id": lambda r: with_state(r, order=[*r["state"]["order"][:-1], "nope"]),
    "order index": lambda r: with_state(r, order=[0, *r["state"]["order"][1:]]),
    "order duplicated": lambda r: with_state(r, order=[*r["state"]["order"][:-1],
                                                       r["state"]["order"][0]]),
    "order short": lambda r: with_state(r, order=r["state"]["order"][:-1]),
    "order a string": lambda r: with_state(r, order="d0"),
    "pending unknown id": lambda r: with_state(r, pending=["nope", *r["state"]["pending"]]),
    "pending index": lambda r: with_state(r, pending=[3]),
    "pending judged": lambda r: with_state(r, pending=[*r["state"]["pending"],
                                                       r["state"]["order"][0]]),
    "pending duplicated": lambda r: with_state(r, pending=r["state"]["pending"] * 2),
    "pending without batches": lambda r: with_state(r, batches=[], epoch_start=0),
    # epoch and rng
    "epoch_start negative": lambda r: with_state(r, epoch_start=-1),
    "epoch_start past the batches": lambda r: with_state(r, epoch_start=99),
    "epoch_start a float": lambda r: with_state(r, epoch_start=1.5),
    "epoch_start a string": lambda r: with_state(r, epoch_start="1"),
    "rng generator": lambda r: with_state(r, rng={**r["state"]["rng"], "bit_generator": "MT"}),
    "rng state huge": lambda r: with_state(r, rng={**r["state"]["rng"], "state": "9" * 60}),
    "rng state negative": lambda r: with_state(r, rng={**r["state"]["rng"], "state": "-1"}),
    "rng state text": lambda r: with_state(r, rng={**r["state"]["rng"], "state": "x"}),
    "rng inc float": lambda r: with_state(r, rng={**r["state"]["rng"], "inc": 1.5}),
    "rng has_uint32 7": lambda r: with_state(r, rng={**r["state"]["rng"], "has_uint32": 7}),
    "rng uinteger huge": lambda r: with_state(r, rng={**r["state"]["rng"], "uinteger": 2**63}),
    "rng not an object": lambda r: with_state(r, rng=[1]),
    # arrays of documents
    "log_miss nan": lambda r: with_state(
        r, log_miss=changed(r["state"]["log_miss"], set_at(0, np.nan))),
    "log_miss +inf": lambda r: with_state(
        r, log_miss=changed(r["state"]["log_miss"], set_at(0, np.inf))),
    "log_miss positive": lambda r: with_state(
        r, log_miss=changed(r["state"]["log_miss"], set_at(0, 3.0))),
    "sampled not the batches'": lambda r: with_state(
        r, sampled=changed(r["state"]["sampled"], lambda a: ~a)),
    "ever_certain not the batches'": lambda r: with_state(
        r, ever_certain=changed(r["state"]["ever_certain"], lambda a: ~a)),
    "sampled int": lambda r: with_state(r, sampled=arr(unarr(r["state"]["sampled"]), "<i8")),
    "scores nan": lambda r: with_state(r, scores=changed(r["state"]["scores"],
                                                          set_at(0, np.nan))),
    "scores -inf": lambda r: with_state(r, scores=changed(r["state"]["scores"],
                                                           set_at(0, -np.inf))),
    "scores 2-d": lambda r: with_state(
        r, scores=arr(unarr(r["state"]["scores"]).reshape(1, -1), "<f8")),
    "scores too long": lambda r: with_state(
        r, scores=arr(np.zeros(len(r["state"]["ids"]) + 5), "<f8")),
    "scores int": lambda r: with_state(r, scores=arr(unarr(r["state"]["scores"]), "<i8")),
    # batches
    "batches not a list": lambda r: with_state(r, batches={"a": 1}),
    "batch not an object": lambda r: with_state(r, batches=[1, *r["state"]["batches"][1:]]),
    "ranks in the record too": lambda r: with_batch(
        r, 0, ranks=arr(np.arange(len(r["state"]["ids"])), "<i8")),
    "certain out of range": lambda r: with_batch(
        r, 0, certain=changed(r["state"]["batches"][0]["certain"], set_at(0, 10**6))),
    "certain negative": lambda r: with_batch(
        r, 0, certain=changed(r["state"]["batches"][0]["certain"], set_at(0, -1))),
    "draws out of range": lambda r: with_batch(
        r, first_sampling_batch(r),
        draws=changed(r["state"]["batches"][first_sampling_batch(r)]["draws"],
                      set_at(0, 10**6))),
    "draws negative": lambda r: with_batch(
        r, first_sampling_batch(r),
        draws=changed(r["state"]["batches"][first_sampling_batch(r)]["draws"], set_at(0, -1))),
    "draws shorter than b": lambda r: with_batch(
        r, first_sampling_batch(r),
        draws=changed(r["state"]["batches"][first_sampling_batch(r)]["draws"],
                      lambda a: a[:-1])),
    "draw_p zero": lambda r: with_batch(
        r, first_sampling_batch(r),
        draw_p=changed(r["state"]["batches"][first_sampling_batch(r)]["draw_p"],
                       set_at(0, 0.0))),
    "draw_p nan": lambda r: with_batch(
        r, first_sampling_batch(r),
        draw_p=changed(r["state"]["batches"][first_sampling_batch(r)]["draw_p"],
                       set_at(0, np.nan))),
    "draw_p inf": lambda r: with_batch(
        r, first_sampling_batch(r),
        draw_p=changed(r["state"]["batches"][first_sampling_batch(r)]["draw_p"],
                       set_at(0, np.inf))),
    "draw_p tiny": lambda r: with_batch(
        r, first_sampling_batch(r),
        draw_p=changed(r["state"]["batches"][first_sampling_batch(r)]["draw_p"],
                       set_at(0, 1e-300))),
    "draw_p off the power law": lambda r: with_batch(
        r, first_sampling_batch(r),
        draw_p=changed(r["state"]["batches"][first_sampling_batch(r)]["draw_p"],
                       lambda a: a * np.linspace(1.0, 0.5, len(a)))),
    "draw_p above 1": lambda r: with_batch(
        r, first_sampling_batch(r),
        draw_p=changed(r["state"]["batches"][first_sampling_batch(r)]["draw_p"],
                       set_at(0, 2.0))),
    "draw_new short": lambda r: with_batch(
        r, first_sampling_batch(r),
        draw_new=changed(r["state"]["batches"][first_sampling_batch(r)]["draw_new"],
                         lambda a: a[:-1])),
    "b negative": lambda r: with_batch(r, 0, b=-1),
    "b a string": lambda r: with_batch(r, 0, b="6"),
    "b a float": lambda r: with_batch(r, first_sampling_batch(r), b=6.5),
    "found_before negative": lambda r: with_batch(r, 0, found_before=-1),
    "found_before huge": lambda r: with_batch(r, 0, found_before=10**18),
    "found_before a float": lambda r: with_batch(r, 0, found_before=1e300),
    "found_before null": lambda r: with_batch(r, 0, found_before=None),
}


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
@pytest.mark.parametrize("name", sorted(REVIEWS))
def test_corrupt_record_is_refused(world: dict[str, bytes], name: str, how: str) -> None:
    corrupt = CORRUPTIONS[how](review_record_obj(world[name]))
    assert not check_survives(world, name, corrupt), how


def _chunk(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj)


#: a text chunk's or a batch's ranks' record replaced (``None``: missing)
CHUNK_CORRUPTIONS: dict[str, Callable[[dict[str, Any]], bytes | None]] = {
    "missing": lambda c: None,
    "random bytes": lambda c: b"\x00\xffgarbage",
    "not zlib": lambda c: b"sift-zlib:garbage",
    "not an object": lambda c: b"[1]",
    "format 1": lambda c: _chunk({**c, "format": 1}),
    "another review's": lambda c: _chunk({**c, "review": "other"}),
    "another epoch": lambda c: _chunk({**c, "epoch": "0" * 16}),
}
TEXT_CORRUPTIONS: dict[str, Callable[[dict[str, Any]], bytes | None]] = {
    "another start": lambda c: _chunk({**c, "start": 1}),
    "one text short": lambda c: _chunk({**c, "texts": c["texts"][:-1]}),
    "a text not a string": lambda c: _chunk({**c, "texts": [None, *c["texts"][1:]]}),
    "texts not a list": lambda c: _chunk({**c, "texts": "abc"}),
}
RANKS_CORRUPTIONS: dict[str, Callable[[dict[str, Any]], bytes | None]] = {
    "another batch": lambda c: _chunk({**c, "batch": c["batch"] + 1}),
    "no ranks": lambda c: _chunk({k: v for k, v in c.items() if k != "ranks"}),
    "ranks not an array": lambda c: _chunk({**c, "ranks": [1, 2, 3]}),
    "ranks short": lambda c: _chunk({**c, "ranks": changed(c["ranks"], lambda a: a[1:])}),
    "ranks float": lambda c: _chunk({**c, "ranks": arr(unarr(c["ranks"]), "<f8")}),
    "ranks out of range": lambda c: _chunk({**c, "ranks": changed(c["ranks"], set_at(0, 10**6))}),
    "ranks negative": lambda c: _chunk({**c, "ranks": changed(c["ranks"], set_at(0, -3))}),
    "ranks repeated": lambda c: _chunk({**c, "ranks": changed(c["ranks"], lambda a: np.ones_like(a))}),
    "ranks too long": lambda c: _chunk({**c, "ranks": changed(
        c["ranks"], lambda a: np.arange(1, a.size + 3))}),
    # the batch's certain documents (rank 0) ranked too
    "certain ranked": lambda c: _chunk({**c, "ranks": changed(
        c["ranks"], lambda a: np.where(a == 0, a.max() + np.cumsum(a == 0), a))}),
}


def _refused_with(world: dict[str, bytes], name: str, key: str,
                  how: Callable[[dict[str, Any]], bytes | None]) -> bool:
    chunks = chunks_of(world, name)
    value = how(review_record_obj(chunks[key]))
    if value is None:
        del chunks[key]
    else:
        chunks[key] = value
    return not check_survives(world, name, world[name], chunks)


@pytest.mark.parametrize("how", sorted({**CHUNK_CORRUPTIONS, **TEXT_CORRUPTIONS}))
@pytest.mark.parametrize("name", sorted(REVIEWS))
def test_corrupt_text_chunk_is_refused(world: dict[str, bytes], name: str, how: str) -> None:
    """A review's record is good but the chunk holding its texts is not (or is gone):
    refused with a one-line reason, like a corrupt record."""
    texts = [k for k in chunks_of(world, name) if k.endswith(f"{CHUNK_SEPARATOR}0")]
    assert texts == [f"{name}{CHUNK_SEPARATOR}0"]
    assert _refused_with(world, name, texts[0], {**CHUNK_CORRUPTIONS, **TEXT_CORRUPTIONS}[how]), how


@pytest.mark.parametrize("how", sorted({**CHUNK_CORRUPTIONS, **RANKS_CORRUPTIONS}))
@pytest.mark.parametrize("name", sorted(REVIEWS))
def test_corrupt_ranks_chunk_is_refused(world: dict[str, bytes], name: str, how: str) -> None:
    """The same for the record of one batch's ranks (the first and the last batch)."""
    ranks = [k for k in chunks_of(world, name) if k.rpartition(CHUNK_SEPARATOR)[2].startswith("r")]
    n = len(review_record_obj(world[name])["state"]["batches"])
    assert n >= 3 and sorted(ranks) == sorted(f"{name}{CHUNK_SEPARATOR}r{t}" for t in range(n))
    for t in (0, n - 1):
        key = f"{name}{CHUNK_SEPARATOR}r{t}"
        assert _refused_with(world, name, key, {**CHUNK_CORRUPTIONS, **RANKS_CORRUPTIONS}[how]), (how, t)


def test_a_chunk_with_texts_past_its_record_is_read_up_to_the_record() -> None:
    """A worker that died after writing a chunk and before the record that counts its new
    texts leaves a chunk longer than the record says: the record's texts load, and the
    documents that come again are added once."""
    service, table = ReviewService(n_shards=1), {}
    spec = {"profile": "rev", "mode": "review", "query": TOPIC, "params": REVIEWS["rev"]}
    service.apply_specs([msg(orjson.dumps(spec), "profiles")], table)
    ids, texts, _ = collection(30)
    service.add_documents([documents("rev", ids[:20], texts[:20])], table)
    before = dict(table)
    service.add_documents([documents("rev", ids[20:], texts[20:])], table)
    after = table
    torn = {**before, **chunks_of(after, "rev")}  # the new chunk written, not the record
    review = decode_review_record(torn["rev"], "rev", torn).review
    assert list(review.ids_) == ids[:20] and list(review.texts_) == texts[:20]
    fresh = ReviewService(n_shards=1)
    out = fresh.add_documents([documents("rev", ids[20:], texts[20:])], torn)
    assert not out.dead_letters
    again = decode_review_record(torn["rev"], "rev", torn).review
    assert list(again.ids_) == ids and list(again.texts_) == texts
    assert torn == after  # the same records as the worker that did not die


# --------------------------------------------------------------- every encoded array




@pytest.mark.parametrize("fill", ["nan", "inf", "shape", "dtype", "b64", "2-d"])
@pytest.mark.parametrize("name", sorted(REVIEWS))
def test_every_array_is_validated(world: dict[str, bytes], name: str, fill: str) -> None:
    """Each encoded array broken one at a time: never accepted if a float is NaN or
    +infinite, its shape disagrees with its bytes or is not 1-d, or its dtype is unknown."""
    record = review_record_obj(world[name])
    n = 0
    for path, a in arrays(record):
        if fill in ("nan", "inf"):
            if a["dtype"] != "<f8" or a["shape"] == [0]:
                continue
            values = unarr(a).copy()
            values[values.size // 2] = np.nan if fill == "nan" else np.inf
            new = arr(values, "<f8")
        elif fill == "shape":
            new = {**a, "shape": [a["shape"][0] + 1]}
        elif fill == "dtype":
            new = {**a, "dtype": "<c16"}
        elif fill == "b64":
            new = {**a, "b64": "!!not base64!!"}
        else:
            new = {**a, "shape": [1, a["shape"][0]]}
        n += 1
        assert not check_survives(world, name, orjson.dumps(replaced(record, path, new))), path
    assert n > 0


# ---------------------------------------------------------------------- any field


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_field_replaced_by_anything_is_survived(world: dict[str, bytes],
                                                    data: st.DataObject) -> None:
    """Any one field of a record replaced by any JSON value (or an odd number literal):
    refused with a one-line reason, or accepted and still working (``check_survives``)."""
    name = data.draw(st.sampled_from(sorted(REVIEWS)))
    record = review_record_obj(world[name])
    path = data.draw(st.sampled_from(list(paths(record))[1:]))
    check_survives(world, name, with_literal(record, path, data.draw(ODD_LITERALS)))
