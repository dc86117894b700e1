"""The Faust agents with ``agent.test_context()`` (no broker): decode, call, emit."""

from __future__ import annotations

import asyncio
from typing import Any
from unittest.mock import AsyncMock, Mock

import orjson
import pytest

from sift.agents.app import create_app
from sift.agents.service import TrainingSet, decode_vector_batch, shard_of
from sift.filters.vectorize import Vectorizer
from sift.settings import Settings

TRAIN = ["wheat exports rose", "wheat crop", "crude oil prices", "oil output", "gold mine"]


@pytest.fixture
def worker(tmp_path: Any) -> Any:
    vec = Vectorizer(n_features=2**12).fit(TRAIN)
    training = TrainingSet(vec, vec.transform(TRAIN), {f"t{i}": i for i in range(len(TRAIN))})
    settings = Settings(broker="kafka://127.0.0.1:1", app_id="sift-test", partitions=2,
                        data_dir=str(tmp_path), batch_timeout=0.01)
    w = create_app(settings, training=training)
    w.app.finalize()
    w.app.conf.store = "memory://"
    w.app.flow_control.resume()
    for t in w.topics.values():
        t.send = AsyncMock()  # type: ignore[method-assign]
    w.table.table.send_changelog = Mock()  # the changelog producer needs a broker
    return w


def agent(worker: Any, name: str) -> Any:
    return next(a for a in worker.app.agents.values() if a.name.endswith(name))


def test_documents_agent_fans_out_and_dead_letters(worker: Any) -> None:
    async def run() -> None:
        async with agent(worker, "route_documents").test_context() as a:
            await a.put(orjson.dumps({"documents": [{"id": "a", "text": "wheat"},
                                                    {"id": "b", "text": "oil"}]}))
            await a.put(b"not json")
            await asyncio.sleep(0.1)

    asyncio.run(run())
    shard_sends = worker.topics["shard-documents"].send.await_args_list
    assert sorted(c.kwargs["partition"] for c in shard_sends) == [0, 1]
    assert decode_vector_batch(shard_sends[0].kwargs["value"])[0] == ["a", "b"]
    dead = worker.topics["dead-letters"].send.await_args_list
    assert [orjson.loads(c.kwargs["value"])["reason"] for c in dead] == ["bad_json"]


def test_specs_agent_writes_the_table(worker: Any) -> None:
    name = "wheat"
    part = shard_of(name, 2)

    async def run() -> None:
        async with agent(worker, "apply_specs").test_context() as a:
            await a.put(orjson.dumps({"profile": name, "query": "wheat", "positives": ["t0"]}),
                        key=name.encode(), partition=part)
            await asyncio.sleep(0.1)

    asyncio.run(run())
    assert name in worker.service.counters()["profiles"]
    assert worker.service.stats["profiles_created"] == 1
    (partition, key, value), _ = worker.table.table.send_changelog.call_args
    assert (partition, key) == (part, name.encode()) and value is worker.table[name]
