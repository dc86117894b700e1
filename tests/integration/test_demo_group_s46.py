"""``sift demo`` deletes its worker's consumer group too (forty-sixth session).

The forty-fifth session made a demo delete the topics it created; its worker's consumer
group (the run's own app id) stayed on the broker, empty, with offsets of deleted topics,
for the broker's offsets retention (a week by default): one more per run.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from sift.cli import main
from sift.commands.demo import delete_run_group
from sift.errors import SiftError
from sift.settings import Settings
from tests.integration.test_demo import small_corpus


def _groups(bootstrap: str) -> set[str]:
    from kafka import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="sift-tests")
    try:
        listed: list[Any] = client.list_groups()
    finally:
        client.close()
    # kafka-python 3: dicts with "group_id"; 2.x: (group_id, protocol type) tuples
    return {g["group_id"] if isinstance(g, dict) else g[0] for g in listed}


def test_a_demo_leaves_no_consumer_group(broker_url: str, bootstrap: str, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    train, test = small_corpus(tmp_path, 400, 20)
    monkeypatch.setenv("SIFT_BROKER", broker_url)
    before = _groups(bootstrap)
    assert main(["demo", "--train", str(train), "--test", str(test), "--chunk", "5",
                 "--no-compare", "--out", str(tmp_path / "result.json")]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "removed this run's" in x)
    app_id = line.split(" and its consumer group ")[1].split()[0]
    assert app_id.startswith("sift-demo-")
    # only this run's group is looked for: on a broker shared with other test processes
    # (SIFT_BROKER and scripts/test.sh's parallel processes) other groups come and go
    assert app_id not in before
    assert [g for g in _groups(bootstrap) if g.startswith(app_id)] == []


def test_deleting_a_group_that_is_not_there_or_still_has_a_member(
        broker_url: str, bootstrap: str, topic_prefix: str) -> None:
    from kafka import KafkaConsumer

    settings = Settings(broker=broker_url, topic_prefix=topic_prefix,
                        app_id=f"sift-demo-{uuid.uuid4().hex[:6]}")
    assert delete_run_group(settings) is False  # never existed
    member = KafkaConsumer(f"{topic_prefix}x", bootstrap_servers=bootstrap,
                           group_id=settings.app_id, client_id="sift-tests")
    try:
        for _ in range(20):  # joined once it has polled
            member.poll(timeout_ms=500)
            if settings.app_id in _groups(bootstrap) and member.assignment():
                break
        with pytest.raises(SiftError, match=r"^the broker answered NonEmptyGroupError \(a "
                                            r"worker of it still in the group\)$"):
            delete_run_group(settings)
    finally:
        member.close()
    assert delete_run_group(settings) is True  # left: an empty group, deleted
    assert settings.app_id not in _groups(bootstrap)
