"""Hostile input for every decoder and for the service's input handling (no broker).

Properties checked with hypothesis:

* the wire decoders (``sift.topics.codecs``, the records' ``from_obj``) raise nothing but
  :class:`RecordError`, and what they accept has finite numbers;
* :meth:`Service.route`, :meth:`Service.apply_judgments` and :meth:`Service.apply_specs`
  never raise, and account for every input: each message (each batch item) is either
  used (scored, learned, created, a duplicate, forwarded) or dead-lettered with a reason;
* every dead letter can be encoded for the dead-letter topic;
* the web process's topic readers (:class:`WebState` ``on_*``) never raise.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sift.agents.app import guarded
from sift.agents.service import InputMessage, RouteResult, Service, TrainingSet
from sift.topics import codecs
from sift.topics.deadletter import DeadLetter
from sift.topics.errors import RecordError
from sift.topics.records import MAX_METADATA_DEPTH, Decision, Document, Judgment, ProfileSpec
from sift.web.state import WebState
from tests.reliability.strategies import (
    ODD_NUMBERS,
    document_message,
    json_values,
    judgment_message,
    nested,
    raw_object,
    spec_message,
)

pytestmark = pytest.mark.reliability

FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
REASON = re.compile(r"^[a-z][a-z0-9_]*$")
MAX_DOC_BYTES = 5_000
MAX_BATCH = 20
PARTITIONS = 2

any_bytes = (st.binary(max_size=400) | raw_object() | document_message()
             | json_values.map(orjson.dumps))
DECODERS: list[Callable[[bytes], Any]] = [
    codecs.loads, codecs.decode_documents, codecs.decode_document_batch, codecs.decode_judgment,
    codecs.decode_profile_spec, codecs.decode_decision,
]


def finite_numbers(record: object) -> bool:
    values = [v for v in vars(record).values() if isinstance(v, float)]
    return all(math.isfinite(v) for v in values)


def check_letter(dl: DeadLetter) -> None:
    assert REASON.match(dl.reason), dl.reason
    assert dl.message and "\n" not in dl.message, dl.message
    obj = orjson.loads(orjson.dumps(dl.to_obj()))  # what emit_dead sends must encode
    assert DeadLetter.from_obj(obj).original == dl.original


# ----------------------------------------------------------------------------- decoders
@pytest.mark.parametrize("decode", DECODERS, ids=lambda f: f.__name__)
@FUZZ
@given(data=any_bytes)
def test_decoders_raise_only_record_errors(decode: Callable[[bytes], Any], data: bytes) -> None:
    try:
        out = decode(data)
    except RecordError as exc:
        assert REASON.match(exc.reason) and str(exc)
        return
    records = out[0] if isinstance(out, tuple) else out
    for r in records if isinstance(records, list) else [records]:
        if isinstance(r, Document | Judgment | ProfileSpec | Decision):
            assert finite_numbers(r)


@pytest.mark.parametrize("cls", [Document, Judgment, ProfileSpec, Decision],
                         ids=lambda c: c.__name__)
@FUZZ
@given(obj=json_values | st.dictionaries(st.sampled_from(["id", "doc_id", "profile", "text",
                                                          "score", "threshold", "ts"]),
                                         json_values, max_size=7))
def test_from_obj_raises_only_record_errors(cls: Any, obj: Any) -> None:
    try:
        cls.from_obj(obj)
    except RecordError as exc:
        assert REASON.match(exc.reason)


@pytest.mark.parametrize("literal", ODD_NUMBERS)
def test_nan_infinite_and_huge_numbers_never_reach_a_record(literal: str) -> None:
    for template in ('{{"doc_id":"d","profile":"p","relevant":true,"ts":{}}}',
                     '{{"doc_id":"d","profile":"p","score":{},"threshold":0.1}}'):
        data = template.format(literal).encode()
        for decode in (codecs.decode_judgment, codecs.decode_decision):
            try:
                rec = decode(data)
            except RecordError:
                continue
            assert finite_numbers(rec)


@pytest.mark.parametrize("depth", [10, 253, 300, 1023, 1025, 100_000])
def test_deep_nesting_is_a_record_error_or_accepted(depth: int) -> None:
    for kind in ("object", "list"):
        for decode in DECODERS:
            try:
                decode(nested(depth, kind=kind))
            except RecordError as exc:
                assert exc.reason in {"bad_json", "not_an_object", "missing_id", "missing_doc_id",
                                      "missing_profile", "bad_batch"}, exc.reason


def test_duplicate_keys_take_the_last_value() -> None:
    j = codecs.decode_judgment(b'{"doc_id":"a","profile":"p","relevant":false,"relevant":true}')
    assert j.relevant is True
    with pytest.raises(RecordError) as err:
        codecs.decode_judgment(b'{"doc_id":"a","profile":"p","relevant":true,"relevant":"x"}')
    assert err.value.reason == "bad_relevant"


def test_huge_strings() -> None:
    big = "w" * 3_000_000
    with pytest.raises(RecordError):
        codecs.decode_judgment(orjson.dumps({"doc_id": big, "profile": "p", "relevant": True}))
    doc = codecs.decode_documents(orjson.dumps({"id": "d", "text": big}))[0]
    assert len(doc.text) == len(big)  # the codec accepts it; the service's size limit rejects it


# ----------------------------------------------------------------------------- the service
# The service skips offsets it already processed on a (topic, partition), as Kafka
# re-delivery demands; the module-wide service sees each document message on a
# partition of its own so that hypothesis examples are not mistaken for re-deliveries.
_PART = itertools.count(100)


@pytest.fixture(scope="module")
def service() -> Service:
    """A service without IDF corpus (fast), two shards, a profile in each shard."""
    return Service(TrainingSet.load(None), n_shards=PARTITIONS, recent_documents=500,
                   max_document_bytes=MAX_DOC_BYTES, max_batch_documents=MAX_BATCH)


@pytest.fixture(scope="module")
def table(service: Service) -> dict[str, bytes]:
    table: dict[str, bytes] = {}
    msgs = [InputMessage(orjson.dumps({"profile": p, "query": q}), "profiles", service.shard(p))
            for p, q in [("earn", "earnings profit net"), ("grain", "wheat grain corn")]]
    out = service.apply_specs(msgs, table)
    assert sorted(out.changed) == ["earn", "grain"] and not out.dead_letters
    assert {service.shard("earn"), service.shard("grain")} == {0, 1}
    doc = {"documents": [{"id": f"d{i}", "text": "wheat profit"} for i in range(5)]}
    routed = service.route([InputMessage(orjson.dumps(doc))])
    for payload in routed.payloads:
        for p in range(PARTITIONS):
            service.score(p, payload, table)
    return table


def units(value: bytes) -> int:
    """How many inputs a documents message carries: batch items, else 1."""
    try:
        obj = orjson.loads(value)
    except orjson.JSONDecodeError:
        return 1
    if isinstance(obj, dict) and "documents" in obj and "id" not in obj:
        items = obj["documents"]
        if isinstance(items, list) and 0 < len(items) <= MAX_BATCH:
            return len(items)
        return 0 if isinstance(items, list) and not items else 1
    return 1


@FUZZ
@given(values=st.lists(document_message(), min_size=1, max_size=6))
def test_route_never_raises_and_accounts_for_every_document(
        service: Service, values: list[bytes]) -> None:
    msgs = [InputMessage(v, "documents", next(_PART), i) for i, v in enumerate(values)]
    result = service.route(msgs)
    assert result.n_documents + len(result.dead_letters) == sum(units(v) for v in values)
    for dl in result.dead_letters:
        check_letter(dl)
        assert dl.topic == "documents" and 0 <= dl.offset < len(values)
    for payload in result.payloads:  # what goes to the shard topic scores everywhere
        for p in range(PARTITIONS):
            for d in service.score(p, payload, {}):
                assert math.isfinite(d.score)


def test_oversized_document_and_batch_item_are_dead_lettered_alone(service: Service) -> None:
    big = {"id": "big", "text": "x " * MAX_DOC_BYTES}
    msgs = [InputMessage(orjson.dumps(big), "documents", next(_PART), 0),
            InputMessage(orjson.dumps({"documents": [{"id": "ok", "text": "fine"}, big]}),
                         "documents", next(_PART), 1),
            InputMessage(orjson.dumps({"documents": [{"id": "a", "text": "b"}] * (MAX_BATCH + 1)}),
                         "documents", next(_PART), 2),
            InputMessage(None, "documents", next(_PART), 3)]
    result = service.route(msgs)
    assert result.n_documents == 1
    assert [(d.offset, d.reason) for d in result.dead_letters] == [
        (0, "too_large"), (1, "too_large"), (2, "batch_too_large"), (3, "empty")]


def test_metadata_nested_past_the_limit_is_dead_lettered_alone(service: Service) -> None:
    # orjson reads 1,024 levels and writes 254, and metadata is written again downstream
    # (a review's dead letter, the review routing): deeper metadata is refused on input
    deep = b'{"id":"deep","text":"wheat","metadata":' + nested(300) + b"}"
    ok = b'{"id":"ok","text":"wheat","metadata":' + nested(MAX_METADATA_DEPTH) + b"}"
    result = service.route([InputMessage(deep, "documents", next(_PART), 0),
                            InputMessage(ok, "documents", next(_PART), 1)])
    assert result.n_documents == 1
    assert [(d.offset, d.reason) for d in result.dead_letters] == [(0, "bad_metadata")]
    assert "nested deeper than" in result.dead_letters[0].message


def test_bad_batch_item_nested_deeply_is_dead_lettered_alone(service: Service) -> None:
    value = (b'{"documents":[{"id":"ok","text":"wheat corn"},{"id":1.5,"metadata":'
             + nested(300) + b"}]}")
    msg = InputMessage(value, "documents", next(_PART), 7)
    result = guarded(service.route, [msg])  # what the route_documents agent calls
    assert result.n_documents == 1
    assert [d.reason for d in result.dead_letters] == ["bad_id"]


@FUZZ
@given(data=st.data())
def test_judgments_never_raise_and_every_one_is_accounted(
        service: Service, table: dict[str, bytes], data: st.DataObject) -> None:
    values = data.draw(st.lists(judgment_message(["earn", "grain", "nope"],
                                                 ["d0", "d1", "d2", "dx"]),
                                min_size=1, max_size=6))
    msgs = [InputMessage(v, "judgments", data.draw(st.integers(0, PARTITIONS - 1)), i)
            for i, v in enumerate(values)]
    before = dict(service.stats)
    out = service.apply_judgments(msgs, table)
    # applied, delivered again, the label the document has already, or the other one
    taken = ("judgments", "judgments_duplicate", "judgments_repeated", "judgments_corrected")
    delta = {k: service.stats[k] - before.get(k, 0) for k in taken}
    assert len(out.dead_letters) + len(out.forwards) + sum(delta.values()) == len(msgs)
    for dl in out.dead_letters:
        check_letter(dl)
    for f in out.forwards:
        assert f.partition == service.shard(f.key.decode())
    for name in out.changed:  # what was written back reads back
        entry = service.entry(name, table)
        assert entry is not None
        assert not math.isnan(entry.profile.threshold_)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_specs_never_raise_and_every_one_is_accounted(service: Service,
                                                      data: st.DataObject) -> None:
    table: dict[str, bytes] = {}
    names = ["earn", "grain", "wheat"]
    values = data.draw(st.lists(spec_message(names), min_size=1, max_size=4))
    msgs = [InputMessage(v, "profiles", data.draw(st.integers(0, PARTITIONS - 1)), i)
            for i, v in enumerate(values)]
    out = service.apply_specs(msgs, table)
    assert len(out.dead_letters) + len(out.forwards) + len(out.changed) == len(msgs)
    for dl in out.dead_letters:
        check_letter(dl)
    for name in table:  # whatever was created can be scored
        routed = service.route([InputMessage(b'{"id":"z","text":"wheat profit"}')])
        for payload in routed.payloads:
            for d in service.score(service.shard(name), payload, table):
                assert math.isfinite(d.score)


@FUZZ
@given(values=st.lists(document_message(), min_size=1, max_size=4))
def test_guarded_route_never_raises(service: Service, values: list[bytes]) -> None:
    result = guarded(service.route, [InputMessage(v, "documents", next(_PART), i)
                                     for i, v in enumerate(values)])
    assert isinstance(result, RouteResult)
    assert all(dl.reason != "internal_error" for dl in result.dead_letters)


# ----------------------------------------------------------------------------- the web's readers
@FUZZ
@given(value=st.none() | any_bytes, key=st.text(max_size=10))
def test_web_state_readers_never_raise(value: bytes | None, key: str) -> None:
    state = WebState()
    state.on_documents(value, 1.0)
    state.on_decision(value)
    state.on_judgment(value, 1.0)
    state.on_profile_spec(value)
    state.on_profile_state(key, value, 1.0)
    state.on_dead_letter(value, 1.0)
    state.on_review_status(value, 1.0)
    state.refresh_states(now=10.0)
    orjson.dumps(state.snapshot(now=10.0))
    assert state.metrics()
