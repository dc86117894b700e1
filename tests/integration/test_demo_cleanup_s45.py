"""``sift demo`` leaves nothing behind (forty-fifth session, finding 2): every run used a
new topic prefix and app id on a reused broker, and its topics (the tables' changelogs
compacted, so never removed by retention) stayed: 321 MB a ``make demo`` in
``.cache/kafka/data-9092``; and each run left a ``/tmp/sift-demo-*`` folder."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest

from sift.cli import main
from tests.integration.test_demo import _free_pair, small_corpus

REUTERS = Path(__file__).resolve().parents[2] / "data" / "reuters21578"


def _record_deleted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    import sift.commands.demo as demo

    deleted: list[str] = []
    real = getattr(demo, "delete_run_topics", None)
    if real is None:  # (the code before the fix: nothing was deleted)
        return deleted

    def recording(settings: Any, timeout: float = 30.0) -> list[str]:
        names = real(settings, timeout)
        deleted.extend(names)
        return names

    monkeypatch.setattr(demo, "delete_run_topics", recording)
    return deleted


def _list_topics(bootstrap: str) -> set[str]:
    from kafka import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="sift-tests")
    try:
        return set(client.list_topics())
    finally:
        client.close()


def test_a_demo_on_a_users_broker_deletes_only_its_own_topics(
        broker_url: str, bootstrap: str, make_topics: Any, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    others = make_topics("documents", "users-own")  # another user's topics stay
    train, test = small_corpus(tmp_path, 400, 20)
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.setenv("SIFT_BROKER", broker_url)
    deleted = _record_deleted(monkeypatch)
    before = _list_topics(bootstrap)
    assert set(others) <= before
    assert main(["demo", "--train", str(train), "--test", str(test), "--chunk", "5",
                 "--no-compare", "--out", str(tmp_path / "result.json")]) == 0
    assert orjson.loads((tmp_path / "result.json").read_bytes())["documents"] == 20
    after = _list_topics(bootstrap)
    assert set(others) <= after  # another user's topics stay
    assert list(temp.iterdir()) == []  # the worker's temporary folder too
    # the run's wire topics and its app's changelogs were there, and are gone; only this
    # run's names are looked for: on a broker shared with other test processes
    # (SIFT_BROKER and scripts/test.sh's parallel processes) other topics come and go
    changelog = next(t for t in deleted if t.endswith("-profile_to_state-changelog"))
    documents = next(t for t in deleted if t.endswith(".documents") and t.startswith("demo"))
    app_id, prefix = changelog.split("-profile_to_state-")[0], documents[: -len("documents")]
    assert [t for t in after if t.startswith((app_id + "-", prefix))] == []
    removed = [line for line in capsys.readouterr().out.splitlines() if "removed" in line]
    assert len(removed) == 1 and f"{len(deleted)} topics" in removed[0]


def test_a_demo_that_starts_its_broker_leaves_no_partition_of_its_topics_on_disk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The broker the demo starts reuses ``.cache/kafka/data-<port>``: a deleted topic's
    partitions are removed by the broker only a minute later, after the demo stopped it."""
    from sift.devbroker import DevBroker

    port = _free_pair()
    broker = DevBroker(port=port, controller_port=port + 1)
    existed = broker.data.exists()
    train, test = small_corpus(tmp_path, 400, 20)
    monkeypatch.delenv("SIFT_BROKER", raising=False)
    deleted = _record_deleted(monkeypatch)
    try:
        assert main(["demo", "--train", str(train), "--test", str(test), "--chunk", "5",
                     "--no-compare", "--port", str(port),
                     "--out", str(tmp_path / "result.json")]) == 0
        assert not broker.is_running()
        logs = broker.data / "kafka-logs"
        left = sorted(p.name for p in logs.iterdir() if p.is_dir())
        assert left and all(re.match(r"__(consumer_offsets|cluster_metadata)-\d+$", n)
                            for n in left), left
        assert any(t.endswith("-profile_to_state-changelog") for t in deleted)
    finally:
        broker.stop()
        if not existed:
            shutil.rmtree(broker.data, ignore_errors=True)
