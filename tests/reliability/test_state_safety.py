"""State read back from the profile table's changelog is validated; a corrupt record is
skipped for its profile and never stops the worker (no broker: the service's table path).

The records are real ones (``encode_profile_record`` of trained profiles with judgments),
corrupted field by field: version, shapes, dtypes, NaN/infinite floats in the base64
arrays, wrong types, truncation, random bytes.
"""

from __future__ import annotations

import base64
import logging
import math
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sift.agents.service import (
    InputMessage,
    Service,
    ServiceError,
    TrainingSet,
    decode_profile_record,
)
from tests.reliability.records import ODD_LITERALS, arrays, paths, replaced, with_literal

pytestmark = pytest.mark.reliability

PARTITIONS = 1  # every profile in one shard: a corrupt one sits next to good ones
DOCS = [f"d{i}" for i in range(30)]
TEXTS = ["wheat grain corn harvest", "profit net earnings quarter", "oil crude barrel price",
         "wheat exports tonnes", "net loss per share"]


def _judgments(name: str) -> list[InputMessage]:
    return [InputMessage(orjson.dumps({"id": f"{name}-{d}", "doc_id": d, "profile": name,
                                       "relevant": i % 3 == 0}), "judgments", 0)
            for i, d in enumerate(DOCS[:12])]


@pytest.fixture(scope="module")
def world() -> tuple[Service, dict[str, bytes], bytes]:
    """A service, a table with three trained profiles (rocchio, kantor, knn), a doc payload."""
    service = Service(TrainingSet.load(None), n_shards=PARTITIONS)
    table: dict[str, bytes] = {}
    specs = [{"profile": "grain", "query": "wheat grain corn"},
             {"profile": "earn", "query": "profit net earnings", "model": "kantor"},
             {"profile": "crude", "query": "oil crude barrel", "model": "knn"}]
    out = service.apply_specs([InputMessage(orjson.dumps(s), "profiles", 0) for s in specs], table)
    assert not out.dead_letters, out.dead_letters
    docs = {"documents": [{"id": d, "text": TEXTS[i % len(TEXTS)]} for i, d in enumerate(DOCS)]}
    routed = service.route([InputMessage(orjson.dumps(docs))])
    (payload,) = routed.payloads
    service.score(0, payload, table)
    for name in ("grain", "earn", "crude"):
        service.apply_judgments(_judgments(name), table)
    return service, table, payload


def fresh(world: tuple[Service, dict[str, bytes], bytes]) -> Service:
    """A new service (empty caches), as a restarted worker recovering the table."""
    return Service(TrainingSet.load(None), n_shards=PARTITIONS)








def check_survives(world: tuple[Service, dict[str, bytes], bytes], name: str,
                   corrupt: bytes) -> tuple[Service, bool]:
    """Put ``corrupt`` in place of profile ``name``; the others must still score and learn.

    Returns the service and whether the corrupt record was accepted.
    """
    _, table, payload = world
    svc = fresh(world)
    bad_table = {**table, name: corrupt}
    try:
        decode_profile_record(corrupt, svc.weights, name,
                              n_features=svc.vectorizer.n_features)
        accepted = True
    except ServiceError as exc:
        assert str(exc) and "\n" not in str(exc)
        accepted = False
    decisions = svc.score(0, payload, bad_table)  # must not raise
    assert all(math.isfinite(d.score) and not math.isnan(d.threshold) for d in decisions)
    good = sorted(set(table) - {name})
    expected = sorted(good + ([name] if accepted else []))
    assert svc.counters()["profiles"] == expected
    assert svc.stats["bad_state"] == (0 if accepted else 1)
    # the other profiles still learn; the corrupt one is refused as unknown
    msgs = [InputMessage(orjson.dumps({"id": f"x-{p}", "doc_id": "d1", "profile": p,
                                       "relevant": True}), "judgments", 0) for p in sorted(table)]
    out = svc.apply_judgments(msgs, bad_table)
    assert set(good) <= set(out.changed)
    if not accepted:
        assert [d.reason for d in out.dead_letters] == ["unknown_profile"]
    return svc, accepted


@pytest.mark.parametrize("name", ["grain", "earn", "crude"])
def test_good_records_round_trip(world: tuple[Service, dict[str, bytes], bytes],
                                 name: str) -> None:
    _, table, _ = world
    _, accepted = check_survives(world, name, table[name])
    assert accepted


CORRUPTIONS: dict[str, Any] = {
    "random bytes": lambda r: b"\x00\xffgarbage",
    "empty": lambda r: b"",
    "truncated": lambda r: orjson.dumps(r)[: len(orjson.dumps(r)) // 2],
    "not an object": lambda r: b"[1, 2, 3]",
    "record format 2": lambda r: orjson.dumps({**r, "format": 2}),
    "state version 9": lambda r: orjson.dumps({**r, "state": {**r["state"], "version": 9}}),
    "state kind": lambda r: orjson.dumps({**r, "state": {**r["state"], "kind": "rocchio"}}),
    "no state": lambda r: orjson.dumps({k: v for k, v in r.items() if k != "state"}),
    "bad spec": lambda r: orjson.dumps({**r, "spec": {"profile": 3}}),
    "threshold nan string": lambda r: orjson.dumps({**r, "state": {**r["state"],
                                                                     "threshold": "nan"}}),
    "threshold wrong type": lambda r: orjson.dumps({**r, "state": {**r["state"],
                                                                     "threshold": [1]}}),
    "n_features 0": lambda r: orjson.dumps({**r, "state": {**r["state"], "n_features": 0}}),
    # a record from before the fifty-third session lists its keys; one since, their digests
    "judged not a list": lambda r: orjson.dumps(
        {**{k: v for k, v in r.items() if k != "judged_digests"}, "judged": 5}),
    "judged digests not an array": lambda r: orjson.dumps({**r, "judged_digests": [5]}),
    "judged digests of floats": lambda r: orjson.dumps(
        {**r, "judged_digests": {"dtype": "<f8", "shape": [1], "b64": "AAAAAAAAAAA="}}),
    "zlib garbage": lambda r: b"x\x01garbage",
}


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
@pytest.mark.parametrize("name", ["grain", "earn", "crude"])
def test_corrupt_record_is_skipped_for_its_profile_only(
        world: tuple[Service, dict[str, bytes], bytes], name: str, how: str) -> None:
    _, table, _ = world
    corrupt = CORRUPTIONS[how](orjson.loads(table[name]))
    _, accepted = check_survives(world, name, corrupt)
    assert not accepted


@pytest.mark.parametrize("fill", ["nan", "inf", "shape", "dtype", "b64"])
@pytest.mark.parametrize("name", ["grain", "earn", "crude"])
def test_every_array_is_validated(world: tuple[Service, dict[str, bytes], bytes], name: str,
                                  fill: str) -> None:
    """Each encoded array of the record, broken one at a time: never accepted if its
    floats are not finite, its shape disagrees with its bytes, or its dtype is unknown."""
    _, table, _ = world
    record = orjson.loads(table[name])
    n = 0
    for path, arr in arrays(record):
        if fill in ("nan", "inf"):
            if arr["dtype"] not in ("<f8", "<f4") or arr["shape"] in ([0], [0, 0]):
                continue
            values = np.frombuffer(base64.b64decode(arr["b64"]), dtype=arr["dtype"]).copy()
            if not values.size:
                continue
            values[values.size // 2] = np.nan if fill == "nan" else -np.inf
            new = {**arr, "b64": base64.b64encode(values.tobytes()).decode()}
        elif fill == "shape":
            new = {**arr, "shape": [*arr["shape"][:-1], arr["shape"][-1] + 1] if arr["shape"]
                   else [1]}
        elif fill == "dtype":
            new = {**arr, "dtype": "<c16"}
        else:
            new = {**arr, "b64": "!!not base64!!"}
        n += 1
        _, accepted = check_survives(world, name, orjson.dumps(replaced(record, path, new)))
        assert not accepted, (path, fill)
    assert n > 0


NAME_PATHS = {("spec", "profile"), ("state", "params", "name")}


@pytest.mark.parametrize("path", sorted(NAME_PATHS))
def test_record_of_another_profile_is_refused(
        world: tuple[Service, dict[str, bytes], bytes], path: tuple[str, ...]) -> None:
    _, table, _ = world
    record = orjson.loads(table["crude"])
    _, accepted = check_survives(world, "crude", orjson.dumps(replaced(record, path, "other")))
    assert not accepted


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_field_replaced_by_anything_is_survived(
        world: tuple[Service, dict[str, bytes], bytes], data: st.DataObject) -> None:
    """Any one field of a record replaced by any JSON value: either rejected, or accepted
    with finite scores (``check_survives``); the worker's other profiles carry on."""
    _, table, _ = world
    name = data.draw(st.sampled_from(sorted(table)))
    record = orjson.loads(table[name])
    # the profile's own name is covered by test_record_of_another_profile_is_refused
    path = data.draw(st.sampled_from([p for p in list(paths(record))[1:]
                                      if p not in NAME_PATHS]))
    check_survives(world, name, with_literal(record, path, data.draw(ODD_LITERALS)))


def test_state_is_not_accepted_with_an_infinite_threshold_of_the_wrong_sign(
        world: tuple[Service, dict[str, bytes], bytes]) -> None:
    """``threshold: null`` means +inf (deliver nothing); a "-inf" string would deliver all."""
    _, table, _ = world
    record = orjson.loads(table["grain"])
    for value in ("-inf", "-Infinity", "1e999"):
        corrupt = orjson.dumps({**record, "state": {**record["state"], "threshold": value}})
        _, accepted = check_survives(world, "grain", corrupt)
        assert not accepted, value


def test_corrupt_record_is_reported_once_with_profile_and_reason(
        world: tuple[Service, dict[str, bytes], bytes], caplog: pytest.LogCaptureFixture) -> None:
    _, table, payload = world
    svc = fresh(world)
    bad = {**table, "grain": b"\x00garbage"}
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            svc.score(0, payload, bad)
    hits = [r for r in caplog.records if "grain" in r.getMessage()]
    assert len(hits) == 1
    assert svc.stats["bad_state"] == 1


@pytest.mark.parametrize("path", [("state", "examples", "X", "shape", 1),
                                  ("state", "examples", "X", "shape", 0)])
def test_a_shape_too_large_for_numpy_is_survived(
        world: tuple[Service, dict[str, bytes], bytes], path: tuple[Any, ...]) -> None:
    """Found by hypothesis (the property above): ``2**64`` as a matrix dimension made
    scipy raise ``OverflowError`` past the core's checks, out of the record decoder."""
    _, table, _ = world
    for name in sorted(table):
        record = orjson.loads(table[name])
        text = orjson.dumps(replaced(record, path, "__BIG__")).replace(
            b'"__BIG__"', b"18446744073709551616")
        check_survives(world, name, text)


SWEEP_VALUES = ["100", "0", "-1", "0.5", "1e308", "1048577", "2147483647", "99999999999",
                "true", "null", '"x"', "[]", "{}"]


@pytest.mark.slow
def test_every_field_replaced_by_each_odd_value_is_survived(
        world: tuple[Service, dict[str, bytes], bytes]) -> None:
    """The deterministic counterpart of the hypothesis test (about 4,700 cases, 95 s):
    every field of the three records, each replaced by each of a few odd values. It
    found the width bugs (bug 11 in docs/reliability.md) that 150 random draws had
    missed for two sessions."""
    _, table, _ = world
    failures = []
    for name in sorted(table):
        record = orjson.loads(table[name])
        for path in list(paths(record))[1:]:
            if path in NAME_PATHS:
                continue
            for literal in SWEEP_VALUES:
                text = with_literal(record, path, literal)
                try:
                    check_survives(world, name, text)
                except Exception as exc:  # collect them all, then fail with the list
                    failures.append(f"{name} {path} = {literal}: {type(exc).__name__}: {exc}")
    assert not failures, "\n".join(failures[:20])
