"""What a worker holds per profile (fifty-second session, benchmarks/memory_budget.py).

``orjson.dumps`` returns its output buffer as the ``bytes``, the allocation grown while
writing and never shrunk (about 6 times the length of a record of some MB, 12-15 times
for smaller ones). The profiles' table keeps every record, so a record is held at its
length: copied once out of orjson's buffer. 100 profiles at their caps (records of
about 2 MB) held about 1 GB of RSS more without the copy.
"""

from __future__ import annotations

import gc
import random
import tracemalloc

import orjson
import pytest

from sift.agents.service import (
    InputMessage,
    Service,
    TrainingSet,
    encode_profile_record,
    shard_of,
)
from sift.filters.vectorize import Vectorizer

WORDS = [f"w{i}" for i in range(3000)]


def texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=80)) for _ in range(n)]


@pytest.fixture
def service() -> Service:
    train = texts(200, 0)
    vec = Vectorizer(n_features=2**16).fit(train)
    training = TrainingSet(vec, vec.transform(train), {f"t{i}": i for i in range(len(train))})
    return Service(training, n_shards=2, recent_documents=100)


def judged_service(service: Service, n: int = 600) -> tuple[Service, dict[str, bytes]]:
    """One profile with ``n`` judgments (with their texts), written to its table."""
    table: dict[str, bytes] = {}
    spec = {"profile": "p", "query": "w1 w2", "positives": ["t0", "t1"]}
    service.apply_specs([InputMessage(orjson.dumps(spec), "profiles", shard_of("p", 2), 0)], table)
    msgs = [InputMessage(orjson.dumps({"id": f"j{i}", "doc_id": f"d{i}", "profile": "p",
                                       "relevant": i % 3 == 0, "text": t}),
                         "judgments", shard_of("p", 2), i)
            for i, t in enumerate(texts(n, 1))]
    for k in range(0, n, 100):
        service.apply_judgments(msgs[k:k + 100], table)
    return service, table


def allocated_by(make: object) -> tuple[bytes, int]:
    """What ``make()`` returns and the bytes still allocated once it returned (its
    temporaries freed), as tracemalloc counts them."""
    assert callable(make)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        out = make()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return out, after - before


def test_a_profile_record_is_allocated_at_its_length(service: Service) -> None:
    service, table = judged_service(service)
    entry = service.entry("p", table)
    assert entry is not None
    encode_profile_record(entry)  # caches the state builds (the examples' matrix) made once
    raw, held = allocated_by(lambda: encode_profile_record(entry))
    assert len(raw) > 200_000
    # orjson's own buffer: several times the length (about 6 to 15)
    assert held < len(raw) * 1.1 + 4096, (held, len(raw))
    # the same bytes as orjson wrote them
    assert raw == table["p"] or orjson.loads(raw) == orjson.loads(table["p"])
    assert type(raw) is bytes


def test_the_table_holds_records_at_their_length(service: Service) -> None:
    """The record the service writes to its table (the one the worker's Faust table
    keeps) is the copy, not orjson's buffer."""
    service, table = judged_service(service, 300)
    entry = service.entry("p", table)
    assert entry is not None
    service.rewrite_records(["p"])
    msgs = [InputMessage(orjson.dumps({"id": "j-last", "doc_id": "d-last", "profile": "p",
                                       "relevant": True, "text": texts(1, 9)[0]}),
                         "judgments", shard_of("p", 2), 10_000)]

    old = table["p"]  # held, so that its freeing does not offset the new record

    def write() -> bytes:
        service.apply_judgments(msgs, table)
        return table["p"]

    raw, held = allocated_by(write)
    assert raw is not old and len(raw) > 100_000
    # the record, and what learning one judgment keeps (a fraction of the record);
    # orjson's buffer alone was about 6 times the record
    assert held < len(raw) * 2.5, (held, len(raw))


def test_the_shard_cache_is_bounded(service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every judgment's profile name is looked up, a name of no profile too (its judgment
    dead-lettered): the names remembered stay under a bound, and the shards are the same."""
    import sift.agents.service as service_module

    monkeypatch.setattr(service_module, "MAX_SHARD_CACHE", 50, raising=False)
    table: dict[str, bytes] = {}
    msgs = [InputMessage(orjson.dumps({"id": f"j{i}", "doc_id": "d", "profile": f"nobody-{i}",
                                       "relevant": True}), "judgments",
                         shard_of(f"nobody-{i}", 2), i) for i in range(200)]
    out = service.apply_judgments(msgs, table)
    assert len(out.dead_letters) == 200
    assert len(service._shard_cache) <= 50
    assert all(service.shard(f"nobody-{i}") == shard_of(f"nobody-{i}", 2) for i in range(200))
