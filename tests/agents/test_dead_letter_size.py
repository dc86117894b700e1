"""A dead letter fits its topic (forty-eighth session, an audit's finding 3): it carries its
input in base64, 4/3 of its size, and the dead-letters topic had the broker's default
limit (1 MiB on a stock broker), so the letter of any input over about 786 kB was refused
by the broker after it was counted. The worker now creates the topic with a 16 MiB limit,
reads the limit back, and clips the input of a letter that would not fit, saying so."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import orjson
import pytest

from sift.agents.service import DEAD_LETTER_BYTES
from sift.topics.deadletter import DeadLetter
from tests.agents.offline import agent, offline_worker


@pytest.fixture
def worker(tmp_path: Any) -> Any:
    return offline_worker(str(tmp_path))


def _sent(worker: Any) -> list[bytes]:
    return [c.kwargs["value"] for c in worker.topics["dead-letters"].send.await_args_list]


def _route(worker: Any, *values: bytes) -> None:
    async def run() -> None:
        async with agent(worker, "route_documents").test_context() as a:
            for v in values:
                await a.put(v)
            await asyncio.sleep(0.1)

    asyncio.run(run())


def test_a_letter_over_the_limit_carries_its_input_clipped_and_says_so(worker: Any) -> None:
    assert worker.service.dead_letter_bytes == DEAD_LETTER_BYTES  # until the topic is read
    worker.service.dead_letter_bytes = 2_000
    big = b"{" + b"z" * 4_999  # not JSON: bad_json, 5,000 bytes
    small = b"{oops"
    _route(worker, big, small)
    letters = _sent(worker)
    assert len(letters) == 2 and all(len(v) <= 2_000 for v in letters)
    first, second = (orjson.loads(v) for v in letters)
    assert first["reason"] == "bad_json" and first["original_clipped"] is True
    assert first["original_size"] == len(big)
    kept = base64.b64decode(first["original_b64"])
    assert 0 < len(kept) < len(big) and big.startswith(kept)
    back = DeadLetter.from_obj(first)
    assert back.clipped and back.original == kept and back.original_size == len(big)
    # one that fits is whole, and says nothing of clipping
    assert base64.b64decode(second["original_b64"]) == small
    assert "original_clipped" not in second and "original_size" not in second
    assert not DeadLetter.from_obj(second).clipped


def test_a_letter_under_the_limit_is_whole(worker: Any) -> None:
    big = b"{" + b"z" * 4_999
    _route(worker, big)
    (letter,) = _sent(worker)
    assert base64.b64decode(orjson.loads(letter)["original_b64"]) == big


@pytest.mark.parametrize("size", [-5, 3, True, "9", 1.5])
def test_a_read_back_letter_with_a_bad_original_size_is_refused(size: Any) -> None:
    from sift.topics.errors import RecordError

    obj = DeadLetter("bad_json", "m", "t", 0, 1, b"abcdef", ts=1.0).to_obj()
    obj["original_size"] = size
    with pytest.raises(RecordError, match="original_size"):
        DeadLetter.from_obj(obj)
