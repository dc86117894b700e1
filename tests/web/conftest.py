"""Web tests: the aiohttp app with aiohttp's test client, a recording publisher, no broker."""

from __future__ import annotations

import time
import zlib
from typing import Any

import orjson
import pytest

from sift.settings import Settings
from sift.web.state import WebState

TOKEN = "test-token-3f9a"
HOSTILE = '<script>alert("x")</script>"><img src=x onerror=alert(1)>&amp;'


class Recorder:
    """A publisher that keeps what it is asked to send (or fails when told to)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, bytes]] = []
        self.fail = False

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        if self.fail:
            raise ConnectionError("broker away")
        self.sent.append((topic, key, value))


def state_record(threshold: float, version: int, n_judged: int = 0, *,
                 compress: bool = False, epoch: str = "") -> bytes:
    """A profile table record as the service writes it (only the fields the web reads)."""
    raw = orjson.dumps({
        "format": 1, "spec": {"profile": "p", "query": "q", "model": "rocchio"},
        "state": {"threshold": threshold, "model_version": version, "n_judged": n_judged,
                  "params": {"model": "rocchio", "measure": "t11su", "update": "every"}},
        "judged": [], "journal": {"epoch": epoch, "seq": 0}})
    return zlib.compress(raw, 1) if compress else raw


def fill(state: WebState, profile: str = "earn", n: int = 3, title: str = "Title") -> list[str]:
    """``n`` documents delivered to ``profile``; their ids."""
    now = time.time()
    ids = [f"d{i}" for i in range(n)]
    state.on_documents(orjson.dumps({"documents": [
        {"id": i, "title": f"{title} {i}", "text": f"text of {i} " * 5} for i in ids]}), now - 1)
    state.on_profile_state(profile, state_record(0.25, 3), now)
    for i in ids:
        state.on_decision(orjson.dumps({"doc_id": i, "profile": profile, "score": 0.5,
                                        "threshold": 0.25, "model_version": 3, "ts": now}))
    return ids


def review_fill(state: WebState, name: str = "wilson", n: int = 3) -> list[str]:
    """A review with ``n`` documents requested (their texts read first); their ids."""
    now = time.time()
    ids = [f"r{i}" for i in range(n)]
    state.on_profile_spec(orjson.dumps({"profile": name, "mode": "review",
                                        "query": "wilson disease"}))
    state.on_documents(orjson.dumps({"documents": [
        {"id": i, "title": f"Abstract {i}", "text": f"copper chelation {i}",
         "metadata": {"review": name}} for i in ids]}), now - 1)
    for rank, i in enumerate(ids, 1):
        state.on_request(orjson.dumps({"review": name, "doc_id": i, "batch": 1, "rank": rank,
                                       "ts": now}), now)
    return ids


@pytest.fixture
def settings() -> Settings:
    return Settings(topic_prefix="t.", api_token=TOKEN)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


def auth(token: str = TOKEN) -> dict[str, Any]:
    return {"Authorization": f"Bearer {token}"}
